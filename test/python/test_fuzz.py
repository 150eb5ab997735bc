"""No traceback, no hang, no damage, whatever the input (issue #9 part 2).

A bounded seeded fuzz run over the tools (`fuzzing.py`: mutated examples, frontend tests,
lit inputs and small ONNX models; each case must end with exit 0, or one located
diagnostic and exit 1, within a time limit), and one regression test per defect the issue
lists, run as a user runs the tools (subprocess: exit 1, one stderr line, no traceback).
The long run is `python bench/fuzz.py --cases 10000`.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fuzzing import KINDS, Case, Generator, fuzz, mutate_onnx, run_subprocess, verdict

pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "mlp.dlpc")


def tool(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    exe = {"dlpc": "dlpc.tools.dlpc", "dlpc-opt": "dlpc.tools.dlpc_opt"}[args[0]]
    return subprocess.run(
        [sys.executable, "-m", exe, *args[1:]],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


def one_error_line(p: subprocess.CompletedProcess, located: str | None = None) -> str:
    """The run failed as a user error should: exit 1, no traceback, stderr one
    diagnostic line (the text frontend may add its source line and caret below)."""
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    lines = p.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 or (len(lines) == 3 and lines[2].strip() == "^"), p.stderr
    assert "error: " in lines[0] and lines[0].strip(), p.stderr
    if located:
        assert lines[0].startswith(located), p.stderr
    return lines[0]


# ------------------------------------------------------------------------ the fuzz run


@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_in_process(kind):
    """500 seeded cases per kind through the tools' main functions."""
    report = fuzz(cases=500, seed=2026, kinds=(kind,), timeout=30)
    assert report.cases == 500
    assert not report.findings, report.summary()
    # the mutations reach past the parser: some cases compile, some fail later
    outcomes = {outcome for (_, outcome) in report.outcomes}
    assert outcomes == {"ok", "error"}, report.summary()


def test_fuzz_through_the_console_scripts():
    """A few cases of each kind through the real exit path (python -m / console script)."""
    report = fuzz(cases=12, seed=7, timeout=60, subprocess_every=1)
    assert report.cases == 12
    assert not report.findings, report.summary()


def test_generator_is_seeded():
    a = [c.data for c, _ in zip(Generator(5), range(9))]
    b = [c.data for c, _ in zip(Generator(5), range(9))]
    assert a == b
    assert {c.kind for c, _ in zip(Generator(5), range(9))} == set(KINDS)


def test_verdict():
    assert verdict(0, "anything") is None
    assert verdict(1, "dlpc: error: bad\n") is None
    assert verdict(1, "m.dlpc:2:3: error: bad\n  let y = z\n  ^\n") is None
    assert verdict(None, "") == "hang"
    assert verdict(1, "Traceback (most recent call last):\n") == "traceback"
    assert verdict(1, "dlpc: internal error: IndexError: x\n") == "internal error"
    assert verdict(1, "\n^\n") == "empty diagnostic"
    assert verdict(1, "dlpc: error: a\ndlpc: error: b\n") == "multi-line diagnostic"
    assert verdict(2, "dlpc: error: a\n") == "exit 2"


def test_onnx_mutation_keeps_most_models_readable():
    import random

    import onnx
    from fuzzing import onnx_seeds

    rng = random.Random(0)
    _, data = onnx_seeds()[0]
    readable = 0
    for _ in range(50):
        try:
            onnx.load_model_from_string(mutate_onnx(data, rng))
            readable += 1
        except Exception:  # noqa: BLE001 - a byte-level mutation may break the encoding
            pass
    assert readable >= 35


# ------------------------------------------------------- regression tests, one a defect


def write(tmp_path: Path, text: str, name: str = "m.dlpc") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_deep_unary_minus_is_a_located_error(tmp_path):
    path = write(tmp_path, "model m(x: f32[2]) {\n  let y = " + "-" * 400 + "x\n  return y\n}\n")
    line = one_error_line(tool("dlpc", path, "--emit=graph"), f"{path}:2:")
    assert "nested more than 200 levels deep" in line


def test_nesting_within_the_limit_compiles(tmp_path):
    path = write(tmp_path, "model m(x: f32[2]) {\n  let y = " + "-" * 150 + "x\n  return y\n}\n")
    p = tool("dlpc", path, "--emit=c")
    assert p.returncode == 0, p.stderr


def test_zero_size_param_with_kaiming(tmp_path):
    path = write(
        tmp_path,
        "model m(x: f32[3, 0]) {\n  param p: f32[3, 0] = kaiming()\n  return x + p\n}\n",
    )
    p = tool("dlpc", path, "--emit=graph")
    assert p.returncode == 0, p.stderr
    assert "tensor<3x0xf32>" in p.stdout


def test_reduction_over_a_scalar_is_a_located_error(tmp_path):
    path = write(tmp_path, "model m(x: f32[]) {\n  let y = reduce_sum(x, axis=0)\n  return y\n}\n")
    line = one_error_line(tool("dlpc", path, "--emit=c"), f"{path}:2:11: error: ")
    assert "axis 0 is out of range for rank 0" in line


def test_concat_of_scalars_is_a_located_error(tmp_path):
    path = write(tmp_path, "model m(x: f32[]) {\n  let y = concat([x, x])\n  return y\n}\n")
    one_error_line(tool("dlpc", path, "--emit=c"), f"{path}:2:11: error: ")


def test_exp_of_an_integer_tensor_is_a_located_error(tmp_path):
    path = write(tmp_path, "model m(x: i8[2]) {\n  let y = exp(x)\n  return y\n}\n")
    line = one_error_line(tool("dlpc", path, "--emit=c"), f"{path}:2:11: error: ")
    assert "graph.exp needs a floating-point operand, got i8" in line


def test_dtype_mismatch_is_located_at_the_operator(tmp_path):
    path = write(tmp_path, "model m(x: i8[2], z: f32[2]) {\n  let y = x - z\n  return y\n}\n")
    line = one_error_line(tool("dlpc", path, "--emit=c"), f"{path}:2:13: error: ")
    assert "element types i8 and f32" in line


def test_huge_dim_is_a_located_error(tmp_path):
    path = write(tmp_path, "model m(x: f32[9223372036854775808]) {\n  return x\n}\n")
    one_error_line(tool("dlpc", path, "--emit=c"), f"{path}:1:")


@pytest.mark.parametrize("text", ["", "\n\n", "   \n\t\n"])
def test_empty_file_is_one_line(tmp_path, text):
    path = write(tmp_path, text)
    p = tool("dlpc", path, "--emit=graph")
    line = one_error_line(p, f"{path}:")
    assert "unexpected end of file" in line
    assert len(p.stderr.strip().split("\n")) == 1  # no blank source line, no lone caret


def test_internal_error_names_pass_op_and_location():
    """A dlpc bug inside a pass is one line naming the pass, the op and its source."""
    from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr
    from xdsl.ir import Operation

    from dlpc.diagnostics import boundary, format_exception
    from dlpc.dialects import graph
    from dlpc.frontends.builder import GraphBuilder

    b = GraphBuilder("m")
    b.loc = FileLineColLoc(StringAttr("m.dlpc"), IntAttr(3), IntAttr(9))
    y = b.relu(b.input("x", (2,)))
    op: Operation = y.owner
    assert isinstance(op, graph.ReluOp)

    def failing_pattern(op):
        return (1,)[op.results[0].index + 1]  # an IndexError, as a buggy pass would raise

    with pytest.raises(Exception) as e:
        with boundary("pass graph-to-te"):
            failing_pattern(op)
    assert format_exception(e.value) == (
        "internal error in pass graph-to-te at graph.relu (m.dlpc:3:9): "
        "IndexError: tuple index out of range; please report"
    )


def raising(e: Exception):
    raise e


def test_xdsl_exceptions_in_a_pass_are_one_line():
    """xDSL's exceptions escaping a pass (no op in sight here) are one 'error:' line with
    the pass named, never raw multi-line text, never an internal error."""
    from dlpc.diagnostics import boundary, format_exception

    cases = [
        (
            ValueError("Attempting to delete SSA value that still has uses of result\n%0 = x"),
            "error: Attempting to delete SSA value that still has uses of result (pass te-inline)",
        ),
        (
            ValueError("Invalid BlockArgument name format `1a`.", "Make sure names ..."),
            "error: Invalid BlockArgument name format `1a`. (pass te-inline)",
        ),
    ]
    for exc, expected in cases:
        with pytest.raises(Exception) as e:
            with boundary("pass te-inline"):
                raising(exc)
        assert format_exception(e.value) == expected


def test_verifier_failure_after_a_pass_keeps_its_reason():
    """xDSL's two-line 'does not verify:' message becomes one line with its reason."""
    from dlpc.diagnostics import one_line

    assert one_line(
        "operand 'operand' at position 0 does not verify:\nUnexpected attribute i8"
    ) == ("operand 'operand' at position 0 does not verify: Unexpected attribute i8")


def test_dlpc_opt_internal_error_is_one_line():
    """A pass that crashes inside dlpc-opt: one line naming it, exit 1."""
    from dlpc.passes.graph import simplify

    code = (
        "import sys\n"
        "from dlpc.passes.graph import simplify\n"
        "def boom(self, ctx, op):\n"
        "    raise KeyError('boom')\n"
        "for name in dir(simplify):\n"
        "    cls = getattr(simplify, name)\n"
        "    if getattr(cls, 'name', None) == 'graph-simplify':\n"
        "        cls.apply = boom\n"
        "from dlpc.tools.dlpc_opt import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    assert simplify  # the pass module exists
    src = ROOT / "test" / "passes" / "graph-simplify.mlir"
    p = subprocess.run(
        [sys.executable, "-c", code, str(src), "-p", "graph-simplify"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1
    assert p.stderr.strip().split("\n") == [
        "dlpc-opt: internal error in pass graph-simplify: KeyError: 'boom'; please report"
    ]


def test_schedule_search_has_a_budget():
    import re

    src = ROOT / "test" / "passes" / "loop-default-schedule.mlir"
    p = tool("dlpc-opt", str(src), "-p", "loop-default-schedule{budget=0.0}")
    assert p.returncode == 0, p.stderr
    note = re.fullmatch(
        r"dlpc: note: loop-default-schedule: schedule search stopped after its budget of 0 s; "
        r"(\d+) of (\d+) kernels keep the identity schedule",
        p.stderr.strip(),
    )
    assert note and int(note[1]) == int(note[2]) >= 3, p.stderr  # every kernel
    assert "unroll" not in p.stdout


# ---------------------------------------------------------------------------- writing


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("name", ["dlpc", "dlpc-opt"])
def test_full_device_is_one_line(name):
    src = EXAMPLE if name == "dlpc" else str(ROOT / "test" / "passes" / "te-inline.mlir")
    extra = ["--emit=graph"] if name == "dlpc" else []
    line = one_error_line(tool(name, src, *extra, "-o", "/dev/full"))
    assert line == f"{name}: error: cannot write /dev/full: No space left on device"
    with open("/dev/full", "w") as full:
        line = one_error_line(tool(name, src, *extra, stdout=full))
    assert line == f"{name}: error: cannot write to stdout: No space left on device"


@pytest.mark.parametrize("name", ["dlpc", "dlpc-opt"])
def test_output_onto_a_device_or_fifo_writes_in_place(tmp_path, name):
    src = EXAMPLE if name == "dlpc" else str(ROOT / "test" / "passes" / "te-inline.mlir")
    extra = ["--emit=graph"] if name == "dlpc" else []
    before = os.stat("/dev/null")
    p = tool(name, src, *extra, "-o", "/dev/null")
    assert p.returncode == 0, p.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    p = tool(name, src, *extra, "-o", str(fifo))
    out, _ = reader.communicate(timeout=60)
    assert p.returncode == 0, p.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert b"func.func @" in out


def test_a_case_through_run_subprocess(tmp_path):
    """The subprocess path of the harness itself reports exit code and stderr."""
    case = Case("text", "dlpc", ["--emit=graph"], "t", b"model m(", ".dlpc")
    rc, err = run_subprocess(case, str(tmp_path), 60)
    assert rc == 1 and verdict(rc, err) is None, err


def test_te_inline_on_a_compute_that_reads_itself(tmp_path):
    """Was 'Attempting to delete SSA value that still has uses' from te-inline: the
    verifier now rejects the input."""
    path = write(
        tmp_path,
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        '  %e = te.compute "exp_0" (%i0) : tensor<4xf32> {\n'
        "    %v = te.read %e[%i0] : tensor<4xf32>\n"
        "    %r = math.exp %v : f32\n"
        "    te.yield %r : f32\n"
        "  }\n"
        "  func.return %e : tensor<4xf32>\n"
        "}\n",
        "self.mlir",
    )
    line = one_error_line(tool("dlpc-opt", path, "-p", "te-inline"))
    assert line == 'dlpc-opt: error: te.read inside "exp_0" reads that compute\'s own result'


def test_default_schedule_of_a_kernel_its_script_cannot_name(tmp_path):
    """A kernel named '1 mm' keeps the identity schedule (the candidate script did not
    parse, and the error escaped the search)."""
    src = (ROOT / "test" / "passes" / "loop-default-schedule.mlir").read_text()
    path = write(tmp_path, src.replace('"mm"', '"1 mm"'), "k.mlir")
    p = tool("dlpc-opt", path, "-p", "loop-default-schedule")
    assert p.returncode == 0, p.stderr
    assert 'loop.kernel "1 mm"' in p.stdout


def test_bare_exception_from_an_xdsl_verifier_is_an_error(tmp_path):
    """memref.load with too few indices: xDSL's verifier raises a bare Exception (was
    'internal error in verifying the input')."""
    path = write(
        tmp_path,
        "func.func @f(%m: memref<4x4xf32>, %i: index) -> f32 {\n"
        "  %v = memref.load %m[%i] : memref<4x4xf32>\n"
        "  func.return %v : f32\n"
        "}\n",
        "load.mlir",
    )
    assert one_error_line(tool("dlpc-opt", path)) == (
        "dlpc-opt: error: expected an index for each dimension"
    )


def test_a_newline_inside_a_message_is_escaped():
    """A name read from a model may hold a newline; the diagnostic stays one line."""
    from dlpc.diagnostics import DlpcError, format_exception

    e = DlpcError("m.onnx: node #3 (ReduceMean -> 'var'): error: unsupported attribute 'k\nep'")
    assert format_exception(e) == (
        "m.onnx: node #3 (ReduceMean -> 'var'): error: unsupported attribute 'k\\nep'"
    )
    located = "m.dlpc:2:3: error: x\n  let y = z\n  ^"
    assert format_exception(DlpcError(located)) == located


def test_verdict_does_not_read_the_echoed_source_line():
    err = "m.dlpc:7:1: error: unexpected 'CHECK'\nCHECK-NOT: Traceback internal error\n^\n"
    assert verdict(1, err) is None


def test_loop_to_dlp_with_an_index_constant_past_int64(tmp_path):
    """Was OverflowError in loop-to-dlp's copy matcher (an internal error)."""
    src = (ROOT / "test" / "e2e" / "check-each-pass-subtracted-index.mlir").read_text()
    assert "arith.constant 33 : index" in src
    big = src.replace("arith.constant 33 : index", "arith.constant 99999999999999999999 : index")
    path = write(tmp_path, big, "big.mlir")
    p = tool("dlpc-opt", path, "-p", "loop-to-dlp{target-desc=tiny}")
    assert p.returncode == 0, p.stderr
    assert "dlp.kernel" in p.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_print_to_a_full_stdout_is_one_line():
    """dlpc-run prints its report with print(): a full stdout is one line, exit 1."""
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [sys.executable, "-m", "dlpc.tools.dlpc_run", EXAMPLE, "--target", "numpy"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert p.returncode == 1
    assert p.stderr.strip().split("\n") == [
        "dlpc-run: error: cannot write: No space left on device"
    ]


def test_literal_out_of_range(tmp_path):
    """1e308 in f32 arithmetic is inf without a numpy warning on stderr; 1000 in i8
    arithmetic is a located error (numpy raised OverflowError)."""
    path = write(tmp_path, "model m(x: f32[2]) {\n  return x * 1e308\n}\n")
    p = tool("dlpc", path, "--emit=graph")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "0x7f800000" in p.stdout  # +inf
    path = write(tmp_path, "model m(x: i8[2]) {\n  return x * 1000\n}\n", "i.dlpc")
    line = one_error_line(tool("dlpc", path, "--emit=graph"), f"{path}:2:12: error: ")
    assert line.endswith("1000 does not fit in i8")


def test_avg_pool_over_a_very_wide_input_compiles(tmp_path):
    """graph-to-te looped over every output position of an avg pool (a hang at 2^31)."""
    path = write(
        tmp_path,
        "model m(x: f32[1, 1, 2, 2147483648]) {\n"
        "  let y = avg_pool2d(x, kernel=[2, 2], stride=2)\n"
        "  return y\n}\n",
    )
    p = tool("dlpc", path, "--emit=te")
    assert p.returncode == 0, p.stderr


def test_numpy_runtime_warnings_stay_off_stderr(capsys):
    """A numpy RuntimeWarning raised while a tool works (mean of an empty slice when an
    ONNX model's constants are folded at import) is not printed above the diagnostic."""
    import numpy as np

    from dlpc.diagnostics import run_guarded

    assert run_guarded(lambda: float(np.mean(np.zeros(0))) and 0, "dlpc") == 0
    assert capsys.readouterr().err == ""


def test_an_integer_type_of_width_0_in_an_array_is_one_line(tmp_path):
    """`array<i0: ...>` ended in ZeroDivisionError inside xDSL's parser (found by
    `bench/fuzz.py --seed 1234`): one diagnostic naming the file, from both tools."""
    import subprocess

    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
        "  %s = graph.slice %x {starts = array<i0: 0, 0>, ends = array<i64: 2, 3>}"
        " : (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
        "  func.return %s : tensor<2x3xf32>\n}\n"
    )
    for argv in (["dlpc-opt", str(bad), "-p", "graph-simplify"], ["dlpc", str(bad), "--emit=te"]):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert r.returncode == 1, argv
        assert r.stderr.splitlines() == [
            f"{bad}: error: malformed IR: the parser failed "
            "(ZeroDivisionError: integer modulo by zero)"
        ], argv
