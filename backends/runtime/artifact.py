"""Warm compiles: the whole compiled C artifact, cached by everything that determines it.

    key = artifact_key(ir_text, weights, "c", settings)   # no pass runs to compute it
    entry = load_entry(key, "mlp")                        # None: a miss (or a damaged entry)
    if entry is None:
        ... lower, emit, build ...
        store_entry(key, "mlp", function, loop_ir_text)
    function = entry.function()                           # a CFunction, weights resident

The C library cache (cbuild.py) is keyed on the C source, so it can only hit after the
whole xDSL pipeline has run; this cache sits in front of the pipeline. Its key is a
SHA-256 of

- the input model's IR text (a loaded model is IR, whatever file it came from; a bound
  batch dim is in its types) and the bound weights (names, dtypes, shapes, bytes);
- the target and the compile settings: -O level, weight folding, pass options, the
  tuning log's contents, the contents of any option naming a file (a target description);
  with a tuning log, this machine's `tuning_log.machine_fingerprint()` (the same log
  applies only its own machine's records: another machine compiles other schedules);
- dlpc itself: its version and a digest of its source files (any change to a pass or an
  emitter is a miss);
- the C toolchain without running it: `$CC` (or `cc`), the resolved path of the compiler
  and its size and modification time, and the flags cbuild may use.

An entry is `<DLPC_CACHE_DIR>/<name>-<key>.model.npz`: the resident parameters in
@main's order (folded weights included) and a JSON record of what a call needs (the C
source, the loop IR, @main's signature, the library's file name). Its SHA-256 is written
beside it (`.sha256`, before the entry is renamed into place) and checked before it is
read, as cbuild does for libraries: a damaged entry is one warning line on stderr and
is recompiled and replaced. The library itself is cbuild's cached `.so`, loaded after its
own hash check (rebuilt from the stored C source if it is gone or damaged).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlpc.backends.runtime import cbuild
from dlpc.diagnostics import save_npz

FORMAT = 1  # bump when the entry's layout changes
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the `dlpc` package (repository root)
SOURCE_SUFFIXES = (".py", ".lark", ".h", ".c", ".toml", ".json")
NOT_SOURCE = {"test", "bench", "examples", "docs", "__pycache__", "build", "dlpc.egg-info"}


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 of dlpc's version and every source file the compiler is made of (read once
    per process): editing a pass, an emitter or a runtime is a miss."""
    from dlpc.diagnostics import dlpc_version  # not `dlpc`: that is the top of the house

    h = hashlib.sha256(f"dlpc {dlpc_version()}\0".encode())
    for dirpath, dirnames, filenames in os.walk(PACKAGE_ROOT):
        dirnames[:] = sorted(d for d in dirnames if d not in NOT_SOURCE and not d.startswith("."))
        for fname in sorted(filenames):
            if fname.endswith(SOURCE_SUFFIXES):
                path = Path(dirpath, fname)
                h.update(str(path.relative_to(PACKAGE_ROOT)).encode() + b"\0")
                h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def toolchain_identity() -> list[str]:
    """The C compiler as it stands, without running it: the command, the resolved binary
    with its size and modification time, the CPU it builds for (`-march=native`), the
    flags cbuild may add (its probes and
    `--version` run only when a library has to be built)."""
    cmd = cbuild.compiler()
    found = shutil.which(cmd[0]) if cmd else None
    stamp = "missing"
    if found:
        real = os.path.realpath(found)
        st = os.stat(real)
        stamp = f"{real}:{st.st_size}:{st.st_mtime_ns}"
    from dlpc.passes.schedule.tuning_log import cpu_fingerprint

    return [
        *cmd,
        stamp,
        f"cpu {cpu_fingerprint()}",  # (-march=native: the library is this CPU's)
        *cbuild.BASE_FLAGS,
        *cbuild.OPTIONAL_FLAGS,
        *cbuild.LIBS,
        *cbuild.OPTIONAL_LIBS,
        *cbuild.extra_flags(),  # ($DLPC_CFLAGS: a sanitizer build is another library)
    ]


def weights_digest(weights: dict[str, np.ndarray]) -> str:
    """SHA-256 of the bound weights: every name, dtype, shape and byte."""
    h = hashlib.sha256()
    for name in sorted(weights):
        a = np.ascontiguousarray(weights[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.data.cast("B") if a.size else b"")
    return h.hexdigest()


def _file_contents_digest(value) -> str | None:
    """The SHA-256 of a file an option names (a tuning log, a target description)."""
    if isinstance(value, str | os.PathLike) and os.path.isfile(value):
        return hashlib.sha256(Path(value).read_bytes()).hexdigest()
    return None


def _settings_text(settings: dict) -> str:
    """The compile settings as canonical JSON, every named file replaced by its content's
    digest beside its name."""

    def canon(value):
        if isinstance(value, dict):
            return {str(k): canon(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
        if isinstance(value, list | tuple):
            return [canon(v) for v in value]
        digest = _file_contents_digest(value)
        if digest is not None:
            return {"file": str(value), "sha256": digest}
        if value is None or isinstance(value, bool | int | float | str):
            return value
        return repr(value)

    return json.dumps(canon(settings), sort_keys=True)


def artifact_key(ir_text: str, weights: dict[str, np.ndarray], target: str, settings: dict) -> str:
    """The cache key of a compiled model (see the module docstring)."""
    parts = [
        f"format {FORMAT}",
        target,
        source_digest(),
        *toolchain_identity(),
        _settings_text(settings),
        weights_digest(weights),
        ir_text,
    ]
    if settings.get("tuning_log"):
        from dlpc.passes.schedule.tuning_log import machine_fingerprint

        parts.insert(1, f"tuning machine {machine_fingerprint()}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


# ----------------------------------------------------------------------- entries


def entry_path(key: str, name: str) -> Path:
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in name)[:40] or "module"
    return cbuild.cache_dir() / f"{stem}-{key}.model.npz"


@dataclass
class Entry:
    """A cached compiled model: what `function()` needs to call it without the pipeline."""

    path: Path
    meta: dict
    params: list[np.ndarray]

    @property
    def source(self) -> str:
        return self.meta["source"]

    @property
    def loop_ir(self) -> str:
        return self.meta["loop_ir"]

    def function(self, name: str) -> cbuild.CFunction:
        """The CFunction: the cached library (its hash checked; rebuilt from the stored C
        source when it is missing or damaged) with the parameters bound."""
        lib_path = cbuild.cache_dir() / self.meta["library"]
        library = cbuild.load_cached(lib_path) or cbuild.build(self.source, name=name)
        fn = cbuild.CFunction.restore(self.source, self.meta["signature"], library)
        fn.bind_params(self.params)
        return fn


def load_entry(key: str, name: str) -> Entry | None:
    """The cached entry for `key`, or None on a miss; a damaged entry (its hash missing or
    different, unreadable, or not an entry) is one warning line and a miss."""
    path = entry_path(key, name)
    if not path.exists():
        return None
    damage = cbuild.check_entry(path)
    if damage is None:
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(bytes(data["meta"]).decode())
                if meta.get("format") != FORMAT:
                    raise ValueError(f"format {meta.get('format')}, expected {FORMAT}")
                n = len(meta["signature"]["param_names"])
                params = [data[f"p{k}"] for k in range(n)]
            return Entry(path, meta, params)
        except (OSError, ValueError, KeyError, TypeError) as e:
            damage = f"it cannot be read: {e}"
    cbuild.warn_damaged(path, damage, what="cached model", then="recompiling it")
    return None


def store_entry(key: str, name: str, function: cbuild.CFunction, loop_ir: str) -> Path:
    """Write the entry for `key` (atomically: a temporary file renamed into place, its
    hash written first). Failing to write it (a read-only or full cache) is not an error
    of the compile: the entry is simply not kept."""
    path = entry_path(key, name)
    meta = {
        "format": FORMAT,
        "source": function.source,
        "loop_ir": loop_ir,
        "signature": function.signature(),
        "library": function.library.path.name,
    }
    arrays = {f"p{k}": a for k, a in enumerate(function.bound_params or [])}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                save_npz(f, arrays)
            digest = cbuild.file_digest(Path(tmp))
            cbuild.atomic_write(cbuild.hash_path(path), digest + "\n")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        pass
    return path
