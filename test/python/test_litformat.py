"""test/litformat.py: lit files whose RUN lines run inside lit's worker get lit's verdicts.

A small suite in a temporary directory under the format: a file that passes passes in
the worker; a wrong CHECK, a `not` on a command that succeeds, and an error from the tool
each FAIL, with the failing run's output from lit's own command run; an XFAIL file and a
line of another form go to lit's ShTest."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFIG = f"""
import os, sys
sys.path.insert(0, {str(ROOT / "test")!r})
from litformat import InProcessShTest
config.name = "litformat"
config.test_format = InProcessShTest(preamble_commands=[])
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PYTHONHASHSEED"] = "0"
for var in ("PATH", "HOME", "DLPC_CACHE_DIR", "VIRTUAL_ENV", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
"""

IR = """
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = graph.relu %x : (tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}
"""

FILES = {
    "pass.mlir": "// RUN: dlpc-opt %s | filecheck %s\n// CHECK: graph.relu\n" + IR,
    "wrong-check.mlir": "// RUN: dlpc-opt %s | filecheck %s\n// CHECK: graph.tanh\n" + IR,
    "wrong-not.mlir": "// RUN: not dlpc-opt %s 2>&1 | filecheck %s\n// CHECK: graph.relu\n" + IR,
    "bad-pass.mlir": "// RUN: dlpc-opt %s -p no-such-pass | filecheck %s\n// CHECK: relu\n" + IR,
    "expected-error.mlir": "// RUN: not dlpc-opt %s -p no-such-pass 2>&1 | filecheck %s\n"
    "// CHECK: no-such-pass\n" + IR,
    "xfail.mlir": "// XFAIL: *\n// RUN: dlpc-opt %s | filecheck %s\n// CHECK: graph.tanh\n" + IR,
    "shell.mlir": "// RUN: dlpc-opt %s > %t && filecheck %s < %t\n// CHECK: graph.relu\n" + IR,
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, tuple[str, str]]:
    suite = tmp_path_factory.mktemp("suite")
    (suite / "lit.cfg.py").write_text(CONFIG)
    for name, text in FILES.items():
        (suite / name).write_text(text)
    run = subprocess.run(
        [sys.executable, "-c", "from lit.main import main; main()", "-a", "-j", "1", str(suite)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = {}  # name -> (verdict, what lit printed of the file: -a, every file's)
    heads = list(
        re.finditer(r"^(PASS|FAIL|XFAIL|XPASS|UNRESOLVED): litformat :: (\S+)", run.stdout, re.M)
    )
    for head, after in zip(heads, [*heads[1:], None]):
        found[head.group(2)] = (
            head.group(1),
            run.stdout[head.start() : after.start() if after else None],
        )
    return found


def test_passing_files_pass_in_the_worker(results):
    for name in ("pass.mlir", "expected-error.mlir"):
        assert results[name][0] == "PASS"
        assert "(run in lit's worker process)" in results[name][1]
    verdict, out = results["shell.mlir"]  # (not a line of the form: lit's ShTest)
    assert verdict == "PASS" and "# executed command: dlpc-opt" in out


@pytest.mark.parametrize("name", ["wrong-check.mlir", "wrong-not.mlir", "bad-pass.mlir"])
def test_failing_files_fail_with_lits_own_output(results, name):
    verdict, out = results[name]
    assert verdict == "FAIL"
    assert "# RUN: at line 1" in out  # (lit's command run, its output)


def test_an_xfail_file_is_lits(results):
    assert results["xfail.mlir"][0] == "XFAIL"


def test_the_worker_environment_is_the_tests(tmp_path, monkeypatch):
    """A line runs under config.environment, not the worker's own (a variable lit does
    not pass on is not seen), and the worker's is restored after it."""
    sys.path.insert(0, str(ROOT / "test"))
    import os

    from litformat import _as_process

    monkeypatch.setenv("DLPC_OPENCL_PROFILE", "gpu")
    with _as_process({"PATH": os.environ["PATH"]}, str(tmp_path)):
        assert "DLPC_OPENCL_PROFILE" not in os.environ
        assert Path.cwd() == tmp_path
    assert os.environ["DLPC_OPENCL_PROFILE"] == "gpu" and Path.cwd() != tmp_path
