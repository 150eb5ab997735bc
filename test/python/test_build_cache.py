"""The C build cache recovers from damaged entries (issue #15 item 4): a truncated library,
garbage, a missing or wrong hash file are rebuilt with one warning line, never loaded.

Every damaged run happens in a child process: a loaded damaged library would kill it with
SIGBUS, which the test then reports as a failure instead of taking pytest down."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = """
int dlpc_main(void **args) {
    float *x = (float *)args[0];
    for (int i = 0; i < 4; i++) x[i] = x[i] * 2.0f + 1.0f;
    return 0;
}
"""

CHILD = f"""
import numpy as np
from dlpc.backends.runtime.cbuild import build
lib = build({SOURCE!r}, name="cache_test")
x = np.arange(4, dtype=np.float32)
lib.call([x])
print("cached" if lib.cached else "built", x.tolist())
"""


def run_child(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DLPC_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300
    )


def entry(cache: Path) -> Path:
    (lib,) = cache.glob("cache_test-*.so")
    return lib


@pytest.fixture
def cache(tmp_path):
    """A cache directory holding one intact entry."""
    cache = tmp_path / "cache"
    first = run_child(cache)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split()[0] == "built" and first.stderr == ""
    lib = entry(cache)
    assert lib.with_name(lib.name + ".sha256").read_text().strip() != ""
    return cache


def expect_rebuilt(cache: Path, reason: str) -> None:
    proc = run_child(cache)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)  # -7 would be SIGBUS
    assert proc.stdout.split(" ", 1) == ["built", "[1.0, 3.0, 5.0, 7.0]\n"]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "warning: cached library" in lines[0] and str(entry(cache)) in lines[0]
    assert reason in lines[0] and "rebuilding it" in lines[0]
    # repaired: the next run is a quiet cache hit
    again = run_child(cache)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert again.stdout.split(" ", 1) == ["cached", "[1.0, 3.0, 5.0, 7.0]\n"]


def test_intact_entry_is_a_quiet_hit(cache):
    proc = run_child(cache)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == "cached [1.0, 3.0, 5.0, 7.0]\n"


def test_truncated_library_is_rebuilt(cache):
    lib = entry(cache)
    os.truncate(lib, lib.stat().st_size // 2)
    expect_rebuilt(cache, "does not match its hash")


def test_garbage_library_is_rebuilt(cache):
    lib = entry(cache)
    lib.write_bytes(os.urandom(lib.stat().st_size))
    expect_rebuilt(cache, "does not match its hash")


def test_missing_hash_is_rebuilt(cache):
    lib = entry(cache)
    lib.with_name(lib.name + ".sha256").unlink()
    expect_rebuilt(cache, "hash file is missing")


def test_library_that_does_not_load_is_rebuilt(cache):
    """Garbage whose hash matches (as if written by a broken build): the loader refuses it."""
    import hashlib

    lib = entry(cache)
    lib.write_bytes(b"\x7fELF not really a shared library")
    digest = hashlib.sha256(lib.read_bytes()).hexdigest()
    lib.with_name(lib.name + ".sha256").write_text(digest + "\n")
    expect_rebuilt(cache, "does not load")


def test_no_temporary_files_are_left(cache):
    names = sorted(p.name for p in cache.iterdir())
    assert all(not n.startswith(".") for n in names), names
    assert [n.rsplit(".", 1)[-1] for n in names] == ["c", "so", "sha256"]
