"""Tests of the tools area's lines new since its seed-38 sample (issue 35, eighth round;
bench/mutation.py --area tools: tools/*.py, diagnostics.py), written from a branch-coverage
run of the area's tests before the seed-49 draw: `--dims` / `--buckets` parsing, a .dlpc
model's named dims in each tool (symbolic in dlpc-run, bound or refused in dlpc),
dlpc-tune's maxima of a symbolic program, dlpc-run's padded arguments of the one program,
`--opencl-profile`'s check, dlpc-train's distributed switches; and two bad-input bugs
fixed with them (an empty or damaged `--input` / `--data` file). Tools run in-process on
small models."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dlpc.diagnostics import DlpcError

TINY = """model tiny(x: f32[B, 4]) {
  param w: f32[3, 4] = kaiming(seed=1)
  return linear(x, w)
}
"""


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.dlpc"
    path.write_text(TINY)
    return str(path)


# ---- bad input files: one line, never an internal error ------------------------------------
def _bad_files(tmp_path) -> dict[str, Path]:
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    damaged = tmp_path / "damaged.npy"
    damaged.write_bytes(b"PK\x03\x04not a zip")
    archive = tmp_path / "two.npz"
    np.savez(archive, a=np.zeros(3, np.float32))
    return {"empty": empty, "damaged": damaged, "archive": archive}


def test_dlpc_run_input_files_that_are_not_one_array_are_one_line(tiny, tmp_path, capsys):
    from dlpc.tools import dlpc_run

    files = _bad_files(tmp_path)
    expected = {
        "empty": f"dlpc-run: error: cannot read input {files['empty']}: No data left in file",
        "damaged": f"dlpc-run: error: cannot read input {files['damaged']}: File is not a zip file",
        "archive": f"dlpc-run: error: input {files['archive']} is an .npz archive: --input "
        "takes .npy files",
    }
    for kind, path in files.items():
        argv = [tiny, "--target", "numpy", "--input", str(path)]
        assert dlpc_run.main(argv) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [expected[kind]], kind
    good = tmp_path / "x.npy"
    np.save(good, np.ones((2, 4), np.float32))
    assert dlpc_run.load_inputs([str(good)])[0].tolist() == [[1.0] * 4] * 2


def test_dlpc_train_data_files_that_are_not_an_archive_are_one_line(tmp_path):
    from dlpc.tools.dlpc_train import load_data

    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes(b"PK\x03\x04not a zip")
    one = tmp_path / "one.npz"
    with open(one, "wb") as f:  # one .npy array under an .npz name
        np.save(f, np.zeros(3))
    objects = tmp_path / "objects.npz"
    np.savez(objects, x=np.array([{"a": 1}], dtype=object), y=np.zeros(1))
    for path, message in [
        (empty, f"error: cannot read data {empty}: No data left in file"),
        (damaged, f"error: cannot read data {damaged}: File is not a zip file"),
        (one, f"error: data {one} must be an .npz archive of named arrays"),
    ]:
        with pytest.raises(DlpcError) as e:
            load_data(str(path))
        assert str(e.value) == message
    with pytest.raises(DlpcError, match=rf"^error: cannot read data {objects}: Object arrays"):
        load_data(str(objects))


# ---- --dims / --buckets ---------------------------------------------------------------------
def test_parse_dims_one_size_or_many():
    from dlpc.tools.common import parse_dims

    assert parse_dims(None, "--dims", many=False) == {}
    assert parse_dims("", "--dims", many=False) == {}
    assert parse_dims(" seq=16 , batch=2,", "--dims", many=False) == {"seq": 16, "batch": 2}
    assert parse_dims("seq= 7", "--dims", many=False) == {"seq": 7}
    assert parse_dims("seq =7", "--dims", many=False) == {"seq": 7}
    assert parse_dims("seq=8:16, b=1", "--buckets", many=True) == {"seq": [8, 16], "b": [1]}
    out = parse_dims("s=3", "--dims", many=False)
    assert type(out["s"]) is int
    for text, what, many, form in [
        ("seq", "--dims", False, "NAME=N"),
        ("=4", "--dims", False, "NAME=N"),
        ("seq=0", "--dims", False, "NAME=N"),
        ("seq=-1", "--dims", False, "NAME=N"),
        ("seq=x", "--dims", False, "NAME=N"),
        ("seq=8:16", "--dims", False, "NAME=N"),
        ("seq=8:0", "--buckets", True, "NAME=N:N:..."),
        ("seq=8:", "--buckets", True, "NAME=N:N:..."),
        ("seq:8", "--buckets", True, "NAME=N:N:..."),
    ]:
        with pytest.raises(DlpcError) as e:
            parse_dims(f"a=1,{text}", what, many)
        assert str(e.value) == f"error: {what} entry '{text}' is not {form} (N > 0)", text


def test_load_model_binds_or_keeps_a_dlpc_models_named_dims(tiny, monkeypatch):
    import io
    import sys

    from dlpc.runtime.dynamic import is_dynamic
    from dlpc.tools.common import load_model

    assert not is_dynamic(load_model(tiny))  # (unbound: 1)
    assert load_model(tiny).weights["w"].shape == (3, 4)
    symbolic = load_model(tiny, unbound=None)
    assert is_dynamic(symbolic)
    bound = load_model(tiny, dims={"B": 5}, unbound=None)
    assert "tensor<5x4xf32>" in str(bound.module)
    assert "tensor<6x4xf32>" in str(load_model(tiny, batch=6, unbound=None).module)
    assert "tensor<2x4xf32>" in str(load_model(tiny, unbound=2).module)
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(TINY.encode())))
    piped = load_model("-", "dlpc", dims={"B": 3}, unbound=None)
    assert "tensor<3x4xf32>" in str(piped.module)
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(TINY.encode())))
    assert is_dynamic(load_model("-", "dlpc", unbound=None))


# ---- dlpc: a model with symbolic dims ------------------------------------------------------
MLIR_SYMBOLIC = """func.func @main(%x: tensor<?x4xf32, ["B"]>) -> tensor<?x4xf32, ["B"]> {
  %y = graph.relu %x : (tensor<?x4xf32, ["B"]>) -> tensor<?x4xf32, ["B"]>
  func.return %y : tensor<?x4xf32, ["B"]>
}
"""


def test_dlpc_on_a_symbolic_model_needs_dims_below_the_graph(tmp_path, capsys):
    from dlpc.tools.dlpc import main

    path = tmp_path / "sym.mlir"
    path.write_text(MLIR_SYMBOLIC)
    assert main([str(path), "--emit", "te"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"{path}: error: graph input 'x' dim 0 is the symbolic dim 'B': pass --dims to "
        "emit a program for given sizes (dlpc.compile serves every size)"
    )
    assert main([str(path), "--emit", "graph"]) == 0  # (the symbolic graph as it is)
    assert 'tensor<?x4xf32, ["B"]>' in capsys.readouterr().out
    assert main([str(path), "--emit", "graph", "--dims", "B=3"]) == 0
    out = capsys.readouterr().out
    assert "tensor<3x4xf32>" in out and "?" not in out
    assert main([str(path), "--emit", "te", "--dims", "B=2"]) == 0
    assert "tensor<2x4xf32>" in capsys.readouterr().out
    static = tmp_path / "static.mlir"
    static.write_text(MLIR_SYMBOLIC.replace('?x4xf32, ["B"]', "5x4xf32"))
    assert main([str(static), "--emit", "graph", "--dims", "B=3"]) == 0  # (nothing to bind)
    assert "tensor<5x4xf32>" in capsys.readouterr().out
    assert main([str(path), "--emit", "te", "--dims", "B=0"]) == 1
    assert (
        capsys.readouterr().err.strip() == "dlpc: error: --dims entry 'B=0' is not NAME=N (N > 0)"
    )


def test_dlpc_writes_no_weights_beside_a_device_output(tiny, tmp_path, capsys):
    from dlpc.tools.dlpc import main

    out = tmp_path / "out.mlir"
    assert main([tiny, "--emit", "graph", "--fold-weights", "-o", str(out)]) == 0
    assert (tmp_path / "out.npz").is_file()
    capsys.readouterr()
    assert main([tiny, "--emit", "graph", "--fold-weights", "-o", "/dev/null"]) == 0
    assert "wrote" not in capsys.readouterr().err and not Path("/dev/null.npz").exists()


# ---- dlpc-tune: the maxima of a symbolic program ------------------------------------------
SLICED = """func.func @main(%x: tensor<?x?xf32, ["batch", "seq"]>) -> tensor<1x?xf32, ["seq"]> {
  %p = graph.param "pos" : tensor<1x48xf32>
  %s = graph.slice %p {sym_ends = ["seq"], starts = array<i64: 0>, ends = array<i64: -9223372036854775808>, axes = array<i64: 1>} : (tensor<1x48xf32>) -> tensor<1x?xf32, ["seq"]>
  func.return %s : tensor<1x?xf32, ["seq"]>
}
"""


def test_dlpc_tunes_symbolic_maxima_default_given_and_capped():
    from dlpc.model import Model
    from dlpc.passes import pipeline
    from dlpc.runtime.dynamic import DEFAULT_MAX
    from dlpc.tools.dlpc_tune import symbolic_maxima

    model = Model(pipeline.parse_module(SLICED), {}, "m", None)
    # seq slices a table of 48: capped there; batch at the default maximum
    assert symbolic_maxima(model, {}) == {"batch": DEFAULT_MAX, "seq": 48}
    assert list(symbolic_maxima(model, {})) == ["batch", "seq"]  # (sorted)
    assert symbolic_maxima(model, {"seq": 32, "batch": 4}) == {"batch": 4, "seq": 32}
    assert symbolic_maxima(model, {"seq": 48}) == {"batch": DEFAULT_MAX, "seq": 48}
    assert symbolic_maxima(model, {"seq": 64}) == {"batch": DEFAULT_MAX, "seq": 48}
    with pytest.raises(DlpcError) as e:
        symbolic_maxima(model, {"B": 2})
    assert str(e.value) == (
        "dlpc-tune: error: --dims B: the model has no symbolic dim 'B' (its symbolic dims: "
        "batch, seq)"
    )
    static = Model(
        pipeline.parse_module(MLIR_SYMBOLIC.replace('?x4xf32, ["B"]', "5x4xf32")), {}, "s", None
    )
    assert symbolic_maxima(static, {}) is None
    with pytest.raises(
        DlpcError, match="^dlpc-tune: error: --dims names symbolic dims; this model has none$"
    ):
        symbolic_maxima(static, {"B": 2})


# ---- dlpc-run: the one program's arguments, the OpenCL function, --opencl-profile ----------
def test_generic_arguments_pad_each_input_to_its_maximum_then_the_dims():
    from dlpc.tools.dlpc_run import generic_arguments

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.array([7, 8], np.int32)
    generic = SimpleNamespace(fn=print, full=[(4, 5), (3,)], names=["s", "b"])
    function = SimpleNamespace(generic=generic, bind=lambda arrays: {"b": 2, "s": 3})
    padded_x, padded_y, dims = generic_arguments(SimpleNamespace(function=function), [x, y])
    want = np.zeros((4, 5), np.float32)
    want[:2, :3] = x
    np.testing.assert_array_equal(padded_x, want)
    assert padded_x.dtype == np.float32 and padded_y.dtype == np.int32
    np.testing.assert_array_equal(padded_y, [7, 8, 0])
    assert dims.dtype == np.int64 and dims.tolist() == [3, 2]  # (in the program's order)
    inputs = [x, y]
    for other in (
        SimpleNamespace(),  # (no generic program: a per-binding function)
        SimpleNamespace(generic=None),
        SimpleNamespace(generic=SimpleNamespace(fn=None, full=[(4, 5)])),
        SimpleNamespace(generic=SimpleNamespace(fn=print, full=[])),
    ):
        assert generic_arguments(SimpleNamespace(function=other), inputs) is inputs


def test_the_opencl_function_of_a_compiled_or_dynamic_model():
    from dlpc import api
    from dlpc.tools.dlpc_run import _opencl_function

    artifact = object()
    plain = SimpleNamespace(artifact=artifact)
    assert _opencl_function(plain) is artifact
    assert _opencl_function(SimpleNamespace()) is None
    dynamic = api.DynamicCompiledModel.__new__(api.DynamicCompiledModel)
    dynamic.function = SimpleNamespace(last=plain)  # type: ignore[attr-defined]
    assert _opencl_function(dynamic) is artifact


def test_opencl_profile_needs_the_opencl_target(tiny, capsys):
    from dlpc.tools import dlpc_run

    assert dlpc_run.main([tiny, "--target", "c", "--opencl-profile", "gpu"]) == 1
    assert capsys.readouterr().err.strip() == (
        "dlpc-run: error: --opencl-profile needs --target opencl, not 'c'"
    )


def test_dlpc_run_random_inputs_at_dims_and_its_dims_line(tiny, capsys):
    from dlpc.tools import dlpc_run

    argv = [tiny, "--target", "c", "--dims", "B=3", "--repeat", "1", "--check"]
    assert dlpc_run.main(argv) == 0
    out = capsys.readouterr().out
    assert "output 0: 3x3 float32" in out and ": ok" in out
    # (the call, then the timing's warm-up and its one run; no short kernel: B leads x)
    assert out.endswith("\ndims: 3 guarded calls, 1 compile(s)\n"), out
    assert dlpc_run.main([tiny, "--target", "c", "--batch", "9", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "output 0: 9x3 float32" in out and "dims:" not in out  # (bound: static)


# ---- dlpc-train: the asynchronous parameter server's switches -------------------------------
@pytest.mark.parametrize("extra", [["--ps-async"], ["--staleness", "2"]])
def test_dlpc_train_async_switches_take_the_distributed_path(tiny, monkeypatch, extra):
    import dlpc.dist.cli as dist
    from dlpc.tools import dlpc_train

    seen = []
    monkeypatch.setattr(dist, "run", lambda args, line, *rest: seen.append(line) or 0)
    argv = [tiny, "--data", "digits", "--epochs", "1", *extra]
    assert dlpc_train.main(argv) == 0
    assert seen == [argv]


def test_dlpc_tune_binds_named_dims_to_one_unless_dims_keeps_them(tiny, tmp_path, monkeypatch):
    from dlpc.tools import dlpc_tune

    calls = []

    def load(*args):
        calls.append(args)
        raise DlpcError("error: stop here")

    monkeypatch.setattr(dlpc_tune, "load_model", load)
    log = str(tmp_path / "t.jsonl")
    assert dlpc_tune.main([tiny, "--log", log]) == 1
    assert dlpc_tune.main([tiny, "--log", log, "--batch", "4"]) == 1
    assert dlpc_tune.main([tiny, "--log", log, "--dims", "B=8"]) == 1
    assert calls == [
        (tiny, None, None, None, None, 1),
        (tiny, None, None, 4, None, 1),
        (tiny, None, None, None, None, None),
    ]


def _profile_row(out: str, kernel: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.startswith(kernel + " "))


def test_dlpc_run_profiles_the_one_program_at_its_maxima(tmp_path, capsys):
    from dlpc.tools import dlpc_run

    path = tmp_path / "sym.mlir"
    path.write_text(MLIR_SYMBOLIC)
    argv = [str(path), "--target", "c", "--profile", "--repeat", "1", "--dims", "B=3"]
    assert dlpc_run.main(argv) == 0
    out = capsys.readouterr().out
    assert "output 0: 3x4 float32" in out
    assert (
        "\nnote: the one program for every value of the dims: the profile's FLOPs and bytes "
        "are counted at its maxima (B=128)\nprofile (median of 1 calls" in out
    )
    # relu over 128 x 4 floats in and out: 4096 bytes
    assert _profile_row(out, "relu_0")[-2] == "4.1"
    # bucketed: the program's inputs are padded, so no profile is taken
    assert dlpc_run.main([*argv, "--buckets", "B=4:8"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\ndims: 3 guarded calls, 1 compile(s)\n") and "profile" not in out


def test_dlpc_run_profiles_one_chunk_of_a_chunked_batch(tmp_path, capsys):
    import re

    from dlpc.tools import dlpc_run

    path = tmp_path / "big.dlpc"
    path.write_text("model big(x: f32[256, 4096]) {\n  return relu(x)\n}\n")
    assert dlpc_run.main([str(path), "--target", "c", "--profile", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    found = re.search(
        r"\nnote: the batch runs in chunks of (\d+): the profile is one chunk's\n", out
    )
    assert found, out
    chunk = int(found.group(1))
    assert 1 <= chunk < 256 and "output 0: 256x4096 float32" in out
    # the profile's bytes are one chunk's: its rows of 4096 floats read and written
    assert _profile_row(out, "relu_0")[-2] == f"{chunk * 4096 * 8 / 1000:.1f}"


# ---- diagnostics.py: each exception's one line ----------------------------------------------
def _parse_error():
    from dlpc.passes import pipeline

    try:
        pipeline.parse_module("func.func @main( {\n")
    except Exception as e:  # noqa: BLE001 - the parser's own exception
        return e
    raise AssertionError("parsed")


def test_format_exception_per_kind():
    import errno

    from xdsl.utils.exceptions import DiagnosticException, VerifyException

    from dlpc.diagnostics import format_exception, one_diagnostic, one_line

    cases = [
        (DlpcError("m.dlpc:1:2: error: bad\n  line\n  ^"), "m.dlpc:1:2: error: bad\n  line\n  ^"),
        (DlpcError("error: two\nlines"), "error: two\\nlines"),
        (
            VerifyException("op 'x' does not verify:\n  why\nrest"),
            "error: op 'x' does not verify: why",
        ),
        (DiagnosticException("bad  op"), "error: bad op"),
        (RecursionError("deep"), "error: the input is nested too deeply"),
        (MemoryError(), "error: out of memory"),
        (FileNotFoundError(2, "No such file", "gone.txt"), "error: no such file: gone.txt"),
        (PermissionError(13, "Permission denied", "ro.txt"), "error: ro.txt: Permission denied"),
        (
            OSError(errno.ENOSPC, "No space left on device"),
            "error: cannot write: No space left on device",
        ),
        (OSError(errno.EIO, "Input/output error"), "error: cannot write: Input/output error"),
        (OSError(errno.EFBIG, "File too large"), "error: cannot write: File too large"),
        (OSError(errno.EPERM, "Not permitted"), "error: Not permitted"),
        (OSError(), "internal error: OSError:"),
        (ValueError("Invalid name `x`.", "Make sure ..."), "error: Invalid name `x`."),
        (ValueError("one\ntwo"), "error: one"),
        (NotImplementedError("not yet"), "error: not yet"),
        (Exception("verifier says no"), "error: verifier says no"),
        (KeyError("w"), "error: 'w'"),
        (TypeError("bug here\nmore"), "internal error: TypeError: bug here"),
    ]
    for e, want in cases:
        assert format_exception(e) == want, (type(e), want)
    assert format_exception(_parse_error()) == "<input>:1:18: error: Expected argument or type"
    assert one_line("") == "" and one_line(" \n  \n") == ""
    assert one_line("last:") == "last:"  # (ends in ':' with nothing after it)
    assert (
        one_diagnostic("a\nb\nc") == "a\\nb\\nc"
        and one_diagnostic("a\nb\n  ^") == "a\nb\n  ^"
        and one_diagnostic("a\r\nb") == "a\\r\\nb"
    )


def test_a_pass_pipeline_error_names_the_spec_and_column():
    from xdsl.utils.arg_spec import parse_pipeline
    from xdsl.utils.exceptions import ArgSpecParseError

    from dlpc.diagnostics import format_exception

    with pytest.raises(ArgSpecParseError) as e:
        list(parse_pipeline("a,,b"))
    assert format_exception(e.value) == (
        "error: bad pass pipeline 'a,,b' at column 3: Expected pass name here"
    )
    short = ArgSpecParseError.__new__(ArgSpecParseError)
    BaseException.__init__(short, "no  spec\nhere")  # (fewer lines than the usual five)
    assert format_exception(short) == "error: bad pass pipeline: no spec here"


def _raised_in_an_op(exc: BaseException, located: bool = True):
    """`exc` raised from a frame whose `op` is a graph op (with a text location or not)."""
    from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr

    from dlpc.passes import pipeline

    module = pipeline.parse_module(
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  %y = graph.relu %x : (tensor<2xf32>) -> tensor<2xf32>\n"
        "  func.return %y : tensor<2xf32>\n}\n"
    )
    func_op = next(iter(module.ops))
    op = next(o for o in func_op.walk() if o.name == "graph.relu")
    if located:
        func_op.location = FileLineColLoc(StringAttr("m.dlpc"), IntAttr(3), IntAttr(9))

    def fail(op):
        raise exc

    try:
        fail(op)
    except BaseException as e:  # noqa: BLE001
        return e, op
    raise AssertionError("did not raise")


def test_stage_errors_name_the_stage_op_and_location():
    from xdsl.utils.exceptions import DiagnosticException, VerifyException

    from dlpc.diagnostics import culprit_op, op_location, stage_error

    e, op = _raised_in_an_op(IndexError("list index out of range"))
    assert culprit_op(e) is op and op_location(op) == "m.dlpc:3:9"  # (through its parent)
    err = stage_error("pass p", e)
    assert err.internal and str(err) == (
        "internal error in pass p at graph.relu (m.dlpc:3:9): IndexError: list index out "
        "of range; please report"
    )
    e, _ = _raised_in_an_op(DiagnosticException("the pass's own words"))
    err = stage_error("pass p", e)
    assert not err.internal and str(err) == "m.dlpc:3:9: error: the pass's own words"
    err = stage_error("verifying the input", e)  # (xDSL's verifier: the context added)
    assert str(err) == "m.dlpc:3:9: error: the pass's own words"
    e, _ = _raised_in_an_op(VerifyException("bad"), located=False)
    assert str(stage_error("verifying after pass q", e)) == (
        "error: bad (verifying after pass q at graph.relu)"
    )
    for exc, why in [
        (RecursionError(), "the input is nested too deeply"),
        (MemoryError(), "out of memory"),
    ]:
        e, _ = _raised_in_an_op(exc, located=False)
        err = stage_error("emitter c", e)
        assert not err.internal and str(err) == f"error: {why} (emitter c at graph.relu)"
    e, _ = _raised_in_an_op(AssertionError(), located=False)
    assert str(stage_error("emitter c", e)) == (
        "internal error in emitter c at graph.relu: AssertionError; please report"
    )
    assert culprit_op(ValueError("no traceback")) is None and op_location(None) is None


def test_a_stage_boundary_passes_some_errors_and_wraps_the_rest(monkeypatch):
    from xdsl.utils.exceptions import DiagnosticException

    from dlpc.diagnostics import StageError, boundary

    for passed in (DlpcError("error: mine"), OSError("disk"), KeyboardInterrupt()):
        with pytest.raises(type(passed)):
            with boundary("pass p"):
                raise passed
    with pytest.raises(StageError) as e:
        with boundary("pass p"):
            raise ValueError("bad value")
    assert str(e.value) == "error: bad value (pass p)" and isinstance(e.value.__cause__, ValueError)
    with pytest.raises(DiagnosticException):
        with boundary("pass p", keep_diagnostics=True):
            raise DiagnosticException("kept")
    with pytest.raises(StageError):
        with boundary("pass p"):
            raise DiagnosticException("wrapped")
    monkeypatch.setenv("DLPC_DEBUG", "1")
    with pytest.raises(ValueError):
        with boundary("pass p"):
            raise ValueError("as it is")


def test_run_guarded_exit_codes_and_lines(capsys, monkeypatch):
    from dlpc.diagnostics import EXIT_BROKEN_PIPE, run_guarded

    def raising(e):
        def fn():
            raise e

        return fn

    assert run_guarded(lambda: 7, "t") == 7 and run_guarded(lambda: "x", "t") == 0
    assert run_guarded(raising(SystemExit(3)), "t") == 3
    assert run_guarded(raising(SystemExit("bye")), "t") == 1
    assert run_guarded(raising(KeyboardInterrupt()), "t") == 130
    assert run_guarded(raising(BrokenPipeError()), "t") == EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""
    assert run_guarded(raising(DlpcError("m.dlpc:1:2: error: located")), "t") == 1
    assert capsys.readouterr().err == "m.dlpc:1:2: error: located\n"
    assert run_guarded(raising(DlpcError("error: plain: error: inside")), "t") == 1
    assert capsys.readouterr().err == "t: error: plain: error: inside\n"
    assert run_guarded(raising(DlpcError("")), "t") == 1
    assert capsys.readouterr().err == "t: internal error: DlpcError\n"
    monkeypatch.setenv("DLPC_DEBUG", "1")
    with pytest.raises(ValueError):
        run_guarded(raising(ValueError("raw")), "t")


# ---- dlpc-opt in-process: passes, their check, -o, the boundary ------------------------------
OPT_INPUT = """func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = graph.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %z = graph.relu %y : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %z : tensor<2x3xf32>
}
"""


def test_dlpc_opt_runs_passes_checks_them_and_writes_o(tmp_path, capsys):
    from dlpc.tools.dlpc_opt import main

    src = tmp_path / "in.mlir"
    src.write_text(OPT_INPUT)
    out = tmp_path / "out.mlir"
    assert main([str(src), "-p", "graph-to-te", "-o", str(out)]) == 0
    text = out.read_text()
    assert "te.compute" in text and "graph.relu %" not in text
    assert capsys.readouterr().out == ""  # (written to -o only)
    assert main([str(src), "-p", "graph-simplify,graph-to-te", "--check-each-pass"]) == 0
    captured = capsys.readouterr()
    assert "te.compute" in captured.out and captured.err == ""
    # a pass that breaks the model: the checker names it in one line
    assert main([str(src), "-p", "test-swap-operands", "--check-each-pass"]) == 0
    capsys.readouterr()
    sub = OPT_INPUT.replace("%z = graph.relu %y : (", "%z = graph.sub %x, %y : (tensor<2x3xf32>, ")
    src.write_text(sub)
    assert main([str(src), "-p", "test-swap-operands", "--check-each-pass"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "dlpc-opt: error: --check-each-pass: pass 'test-swap-operands' changed result 0 of @main"
    ), err
    src.write_text(sub)
    assert main([str(src), "-p", "test-swap-operands"]) == 0  # (unchecked: it runs)
    assert "graph.sub %y, %x" in capsys.readouterr().out


# ---- diagnostics.py: output, files and optional packages -----------------------------------
def test_write_stdout_to_a_file_descriptor_and_a_full_device(tmp_path, monkeypatch):
    import io
    import os
    import sys

    from dlpc.diagnostics import write_stdout

    path = tmp_path / "out.txt"
    with open(path, "w") as f:
        monkeypatch.setattr(sys, "stdout", f)
        print("head", end="")  # (buffered: flushed before the descriptor's writes)
        write_stdout("é" * 70000)
    assert path.read_text() == "head" + "é" * 70000
    captured = io.StringIO()
    monkeypatch.setattr(sys, "stdout", captured)
    write_stdout("plain")  # (no descriptor: written to the stream)
    assert captured.getvalue() == "plain"
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            monkeypatch.setattr(sys, "stdout", full)
            with pytest.raises(DlpcError) as e:
                write_stdout("x" * 10)
        assert str(e.value) == "error: cannot write to stdout: No space left on device"


def test_write_atomically_and_its_failures(tmp_path):
    import os
    import stat

    from dlpc.diagnostics import same_file, save_npz, write_atomically

    path = tmp_path / "a.txt"
    write_atomically(path, "text")
    write_atomically(tmp_path / "b.bin", b"\x00\x01")
    write_atomically(tmp_path / "c.npz", lambda f: save_npz(f, {"allow_pickle": np.ones(2)}))
    assert path.read_text() == "text" and (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    with np.load(tmp_path / "c.npz") as npz:  # (an array named like np.savez's flag)
        assert npz.files == ["allow_pickle"] and npz["allow_pickle"].tolist() == [1.0, 1.0]
    os.chmod(path, 0o600)
    write_atomically(path, "again")  # (an existing file keeps its mode)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == "again"
    link = tmp_path / "link.txt"
    link.symlink_to(path)
    write_atomically(link, "through")
    assert link.is_symlink() and path.read_text() == "through" and same_file(link, path)
    assert not same_file(path, tmp_path / "b.bin")
    assert same_file(tmp_path / "none", tmp_path / "none")  # (neither exists: by name)
    with pytest.raises(DlpcError) as e:
        write_atomically(tmp_path / "no" / "x.txt", "t")
    assert str(e.value) == (
        f"error: cannot write {tmp_path / 'no' / 'x.txt'}: no such directory {tmp_path / 'no'}"
    )

    def broken(f):
        f.write(b"part")
        raise ValueError("half way")

    with pytest.raises(ValueError):
        write_atomically(path, broken)
    assert path.read_text() == "through" and sorted(p.name for p in tmp_path.iterdir()) == [
        "a.txt",
        "b.bin",
        "c.npz",
        "link.txt",
    ]  # (no temp file left)
    if os.path.exists("/dev/full"):
        with pytest.raises(DlpcError, match=r"^error: cannot write /dev/full: No space left"):
            write_atomically("/dev/full", "x")


def test_optional_packages_and_versions(monkeypatch, capsys):
    import argparse

    from dlpc.diagnostics import (
        ToolArgumentParser,
        dlpc_version,
        install_hint,
        require,
        version_text,
    )

    assert require("json", "x", "y").dumps([1]) == "[1]"
    with pytest.raises(DlpcError) as e:
        require("no_such_module_dlpc", "extra9", "doing it")
    assert str(e.value).startswith(
        "error: doing it needs no_such_module_dlpc (pip install -e '.[extra9]' from the dlpc "
        "checkout"
    )
    assert install_hint("extra9") == "pip install -e '.[extra9]' from the dlpc checkout"
    assert version_text("dlpc").startswith(f"dlpc {dlpc_version()} (xdsl ")
    assert version_text("dlpc-run").startswith(f"dlpc-run (dlpc {dlpc_version()}, xdsl ")
    p = ToolArgumentParser(prog="t", example="t x")
    p.add_argument("x")
    with pytest.raises(SystemExit) as exit_:
        p.parse_args([])
    assert exit_.value.code == 1
    assert capsys.readouterr().err.splitlines()[-2:] == [
        "example: t x",
        "run 't --help' for every option",
    ]
    with pytest.raises(DlpcError, match="^t: error: unrecognized arguments: --y$"):
        p.parse_args(["a", "--y"])
    assert p.parse_args(["a"]).x == "a"
    quiet = ToolArgumentParser(prog="q")
    quiet.add_argument("--n", type=int, default=1)
    assert quiet.parse_args([]).n == 1 and isinstance(quiet, argparse.ArgumentParser)


# ---- dlpc-train's option checks, each one line before any work ------------------------------
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--epochs", "0"], "dlpc-train: error: --epochs must be >= 1, got 0"),
        (["--batch", "0"], "dlpc-train: error: --batch must be >= 1, got 0"),
        (["--lr", "0"], "dlpc-train: error: --lr must be > 0, got 0.0"),
        (["--lr", "nan"], "dlpc-train: error: --lr must be > 0, got nan"),
        (["--resume"], "dlpc-train: error: --resume needs --save (the file to resume)"),
        (
            ["--resume", "--save", "MISSING.npz"],
            "dlpc-train: error: --resume: no such file: MISSING.npz",
        ),
        (["--save", "w.txt"], "dlpc-train: error: --save must name an .npz file, got w.txt"),
        (
            ["--momentum", "0.9", "--optimizer", "adam"],
            "dlpc-train: error: --momentum applies to --optimizer sgd, rmsprop, lars",
        ),
        (["--accumulate", "0"], "dlpc-train: error: --accumulate must be >= 1, got 0"),
        (["--step-size", "0"], "dlpc-train: error: --step-size must be >= 1, got 0"),
        (["--schedule", "warmup"], "dlpc-train: error: --schedule warmup needs --warmup N"),
        (
            ["--schedule", "warmup_cosine", "--warmup", "0"],
            "dlpc-train: error: --schedule warmup_cosine needs --warmup N",
        ),
        ([], "dlpc-train: error: --data is required (digits or an .npz)"),
    ],
)
def test_dlpc_train_refuses_each_bad_option_in_one_line(tiny, capsys, extra, message):
    from dlpc.tools import dlpc_train

    assert dlpc_train.main([tiny, *extra]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [message]


def test_dlpc_train_accepts_the_edges_of_its_options(tiny, monkeypatch):
    """The smallest accepted values pass the checks (the data set's absence is next)."""
    from dlpc.tools import dlpc_train

    seen = []
    monkeypatch.setattr(dlpc_train, "load_data", lambda spec: seen.append(spec) or 1 / 0)
    for extra in (
        ["--epochs", "1", "--batch", "1", "--lr", "1e-9"],
        ["--momentum", "0.9", "--optimizer", "rmsprop"],
        ["--momentum", "0.9", "--optimizer", "lars"],
        ["--accumulate", "1", "--step-size", "1"],
        ["--schedule", "warmup", "--warmup", "1"],
        ["--save", "w.npz"],
    ):
        assert dlpc_train.main([tiny, "--data", "d.npz", *extra]) == 1, extra
    assert seen == ["d.npz"] * 6
    assert dlpc_train.main(["missing.dlpc", "--data", "d.npz"]) == 1
    assert len(seen) == 6  # (the missing model first)


# ---- tools seed 49's killable survivors (drawn on 33dbb2c) ---------------------------------
def test_a_warmup_schedule_takes_any_warmup_of_one_or_more(tiny, monkeypatch):
    """dlpc_train.py:322 (`args.warmup < 1` -> `!= 1` refused --warmup 5)."""
    from dlpc.tools import dlpc_train

    seen = []
    monkeypatch.setattr(dlpc_train, "load_data", lambda spec: seen.append(spec) or 1 / 0)
    for schedule, warmup in (("warmup", "5"), ("warmup_cosine", "3"), ("warmup", "1")):
        argv = [tiny, "--data", "d.npz", "--schedule", schedule, "--warmup", warmup]
        assert dlpc_train.main(argv) == 1
    assert seen == ["d.npz"] * 3  # (each past the checks, to the data)


def test_a_summary_of_fewer_values_than_shown_has_no_ellipsis():
    """dlpc_run.py:264 (`flat.size > count` -> `!=` added ', ...' to short outputs)."""
    from dlpc.tools.dlpc_run import summary

    assert summary(np.array([1.0, 2.0, 3.0], np.float32)) == (
        "3 float32  [1, 2, 3]  mean 2  std 0.816497"
    )
    assert summary(np.arange(4), count=5).startswith("4 int64  [0, 1, 2, 3]  mean")
    assert summary(np.arange(5)).startswith("5 int64  [0, 1, 2, 3, 4]  mean")
    assert summary(np.arange(6)).startswith("6 int64  [0, 1, 2, 3, 4, ...]  mean")


def test_plot_without_matplotlib_is_one_line(tiny, monkeypatch, capsys):
    """dlpc_train.py:308 (the ImportError handler replaced: a traceback-free line is the
    contract, tested with matplotlib made unimportable)."""
    import sys

    from dlpc.tools import dlpc_train

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert dlpc_train.main([tiny, "--data", "digits", "--plot", "p.png"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "dlpc-train: error: --plot needs matplotlib (pip install -e '.[train]' from the dlpc "
        "checkout"
    ), err


def test_check_memory_counts_the_references_peak_plus_the_outputs(monkeypatch):
    """common.py:204 (`peak + outputs` -> `-`): relu over 256 floats peaks at 2048 bytes
    (its input and output) and the compiled output adds 1024: 3072 fit, 3071 do not."""
    from dlpc.frontends.text import parse_model
    from dlpc.tools import common

    model = parse_model("model m(x: f32[256]) {\n  return relu(x)\n}\n")
    monkeypatch.setattr(common, "available_memory", lambda: 3072)
    common.check_memory(model, "running m")
    monkeypatch.setattr(common, "available_memory", lambda: 3071)
    with pytest.raises(DlpcError) as e:
        common.check_memory(model, "running m")
    assert str(e.value) == (
        "error: running m needs at least 0.0 GiB (the reference's live tensors and the "
        "outputs) but 0.0 GiB of memory are available"
    )
    monkeypatch.setattr(common, "available_memory", lambda: None)  # (unknown: no check)
    common.check_memory(model, "running m")


def test_the_replay_note_replays_only_this_machines_records(tmp_path):
    """dlpc_tune.py:192 (`r.machine == machine` -> `>` took another machine's records,
    the ones sorting after this machine's name, as this machine's)."""
    from dlpc.tools.dlpc_tune import replay_note

    def rec(machine: str, script: str, time: float):
        return SimpleNamespace(sig="s", target="c", machine=machine, script=script, time=time)

    records = [
        rec("box-b", "a", 2e-3),
        rec("box-b", "b", 1e-3),
        rec("box-b", "b", 1.5e-3),
        rec("box-a", "c", 5e-4),
        rec("box-c", "d", 4e-4),
        SimpleNamespace(sig="other", target="c", machine="box-b", script="x", time=1.0),
    ]

    class Log:
        def __init__(self, records):
            self.records = records

        def best(self, sig, target, default=None, machine=None):
            mine = [
                r
                for r in self.records
                if r.sig == sig and r.target == target and machine in (None, r.machine)
            ]
            return min(mine, key=lambda r: r.time) if mine else None

    path = tmp_path / "tune.jsonl"
    path.write_text("")
    tasks = [SimpleNamespace(sig="s", kernel="mm", default="a")]
    assert replay_note(Log(records), tasks, str(path), machine="box-b") == "\n".join(
        [
            f"dlpc-tune: resuming from {path}: replayed 3 logged measurements (2 schedules, "
            "not measured again)",
            "  2 logged measurements were made on other machines: not replayed (this machine "
            "is 'box-b'; their schedules are measured again)",
            "  mm: best so far 1.0000 ms",
        ]
    )
    assert replay_note(Log(records[3:5]), tasks, str(path), machine="box-b") == "\n".join(
        [
            f"dlpc-tune: {path} has no measurements of this model's kernels on this machine",
            "  2 logged measurements were made on other machines: not replayed (this machine "
            "is 'box-b'; their schedules are measured again)",
            "  mm: best so far none yet (its records were measured on other machines)",
        ]
    )
    assert replay_note(Log(records[:3]), tasks, str(path), machine="box-b").count("\n") == 1
    assert replay_note(Log(records[5:]), tasks, str(path), machine="box-b") == (
        f"dlpc-tune: {path} has no measurements of this model's kernels yet"
    )
    assert replay_note(Log(records), tasks, str(tmp_path / "none.jsonl"), "box-b") is None


# ---- dlpc-train's helpers: data sets, the optimizer, the trainer, the stats line -------------
def test_load_data_checks_and_splits_an_npz(tmp_path):
    from dlpc.tools.dlpc_train import DATA_SPLIT_SEED, load_data

    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20)
    for arrays, message in [
        ({"x": x}, "has no 'y' array"),
        ({"y": y}, "has no 'x' array"),
        ({"x": x, "y": y[:19]}, "has 20 samples in x but 19 in y"),
    ]:
        path = tmp_path / "d.npz"
        np.savez(path, **arrays)
        with pytest.raises(DlpcError) as e:
            load_data(str(path))
        assert str(e.value) == f"error: data {path} {message}"
    path = tmp_path / "t.npz"
    np.savez(path, x=x, y=y, x_test=x[:3] + 100, y_test=y[:3])
    xtr, ytr, xv, yv, xt, yt, name = load_data(str(path))
    order = np.random.default_rng(DATA_SPLIT_SEED).permutation(20)
    assert name == "t.npz" and (len(xtr), len(xv)) == (18, 2)  # (a tenth for validation)
    np.testing.assert_array_equal(yv, order[:2])
    np.testing.assert_array_equal(ytr, order[2:])
    np.testing.assert_array_equal(xt, x[:3] + 100)
    np.testing.assert_array_equal(yt, y[:3])
    np.savez(path, x=x, y=y, x_test=x[:3])  # (x_test without y_test: split from x)
    xtr, ytr, xv, yv, xt, yt, _ = load_data(str(path))
    assert (len(xtr), len(xv), len(xt)) == (15, 1, 4)
    np.testing.assert_array_equal(yt, order[:4])


def _train_args(*extra: str):
    from dlpc.tools.dlpc_train import build_parser

    return build_parser().parse_args(["m.dlpc", *extra])


def test_the_optimizer_each_option_reaches():
    from dlpc.tools.dlpc_train import _optimizer

    sgd = _optimizer(
        _train_args("--optimizer", "sgd", "--momentum", "0.5", "--nesterov", "--lr", "0.1"), 10
    )
    assert (type(sgd).__name__, sgd.lr, sgd.momentum, sgd.nesterov) == ("SGD", 0.1, 0.5, True)
    assert sgd.weight_decay == 0.0 and sgd.schedule.step_size == 3  # (a third of the steps)
    assert _optimizer(_train_args(), 2).schedule.step_size == 1  # (at least one)
    args = ("--schedule", "step", "--step-size", "4", "--gamma", "0.5", "--warmup", "2")
    schedule = _optimizer(_train_args(*args), 10).schedule
    assert (schedule.kind, schedule.step_size, schedule.gamma, schedule.warmup_steps) == (
        "step",
        4,
        0.5,
        2,
    )
    assert schedule.total_steps == 10
    rms = _optimizer(_train_args("--optimizer", "rmsprop", "--momentum", "0.5"), 10)
    assert rms.momentum == 0.5
    lars = _optimizer(_train_args("--optimizer", "lars", "--momentum", "0.5"), 10)
    assert lars.momentum == 0.5
    assert _optimizer(_train_args("--optimizer", "lars"), 10).momentum == 0.9  # (its own)
    adam = _optimizer(_train_args("--optimizer", "adam", "--weight-decay", "0.01"), 10)
    assert adam.weight_decay == 0.01 and not hasattr(adam, "momentum")
    clipped = _optimizer(_train_args("--clip-norm", "2.0"), 10)
    assert clipped.clip_norm == 2.0


def test_the_trainer_class_and_the_activation_line(monkeypatch):
    import dlpc.dist.cli as dist
    import dlpc.train as dlpc_train
    from dlpc.tools.dlpc_train import _trainer_class, activation_stats

    assert _trainer_class(_train_args()) is dlpc_train.Trainer
    monkeypatch.setattr(dist, "trainer_class", lambda args: "distributed")
    for flag in ("--dp", "--tp", "--pp", "--ps"):
        assert _trainer_class(_train_args(flag, "2")) == "distributed", flag
    step = SimpleNamespace(recompute=False, kept_bytes=2048, kept_bytes_other=512)
    assert activation_stats(step) == (
        "backward keeps 2.0 KiB of activations alive (0.5 KiB with graph-autodiff recompute)"
    )
    step.recompute = True
    assert activation_stats(step) == (
        "backward keeps 0.5 KiB of activations alive (2.0 KiB with graph-autodiff recompute)"
    )


# ---- tools/common.py: formats, stdin, the memory a run may use --------------------------------
def test_model_format_from_the_option_or_the_extension(tmp_path):
    from dlpc.tools.common import check_model_path, model_format

    assert model_format("m.txt", "dlpc") == "dlpc" and model_format("M.ONNX", None) == "onnx"
    assert model_format("a/b.mlir", None) == "mlir" and model_format("-", "mlir") == "mlir"
    with pytest.raises(DlpcError) as e:
        model_format("-", None)
    assert str(e.value) == "error: a model read from stdin ('-') needs --format dlpc|onnx|mlir"
    with pytest.raises(DlpcError) as e:
        model_format("m.txt", None)
    assert str(e.value) == (
        "error: cannot tell the format of m.txt from its extension; pass --format dlpc|onnx|mlir"
    )
    path = tmp_path / "m.mlir"
    path.write_text("")
    assert check_model_path(str(path), None) == "mlir"
    assert check_model_path("-", "dlpc") == "dlpc"
    with pytest.raises(DlpcError, match=r"^error: no such file: .*none\.mlir$"):
        check_model_path(str(tmp_path / "none.mlir"), None)


def test_load_model_from_stdin_per_format(tmp_path, monkeypatch):
    import io
    import sys

    from dlpc.tools.common import load_model

    def stdin(data: bytes):
        monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(data)))

    w = tmp_path / "w.npz"
    np.savez(w, w=np.full((2, 3), 2.0, np.float32))
    text = (
        'func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {\n  %w = graph.param "w" : '
        "tensor<2x3xf32>\n  %y = graph.add %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> "
        "tensor<2x3xf32>\n  func.return %y : tensor<2x3xf32>\n}\n"
    )
    stdin(text.encode())
    model = load_model("-", "mlir", str(w))
    assert (model.name, model.path) == ("stdin", None) and model.weights["w"][0, 0] == 2.0
    stdin(text.encode())
    assert load_model("-", "mlir").weights == {}
    stdin(b"\xff\xfe")
    with pytest.raises(DlpcError, match=r"^<stdin>: error: not UTF-8 text: "):
        load_model("-", "mlir")
    pytest.importorskip("onnx")
    stdin(b"not a protobuf \xff")
    with pytest.raises(DlpcError, match=r"^<stdin>: error: not a readable ONNX model: "):
        load_model("-", "onnx")


def test_available_memory_from_meminfo_and_the_address_space_limit(monkeypatch):
    import resource

    from dlpc.tools import common

    fields = {
        "/proc/meminfo": {"MemAvailable": 1000, "SwapFree": 24},
        "/proc/self/status": {"VmSize": 300},
    }
    monkeypatch.setattr(common, "_kib_fields", lambda path: fields[path])
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, 0))
    assert common.available_memory() == 1024
    monkeypatch.setattr(resource, "getrlimit", lambda which: (800, 0))
    assert common.available_memory() == 500  # (the limit less what is mapped)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (2000, 0))
    assert common.available_memory() == 1024
    fields["/proc/meminfo"] = {}
    assert common.available_memory() == 1700
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, 0))
    assert common.available_memory() is None


def test_kib_fields_reads_the_kb_lines_in_bytes(tmp_path):
    from dlpc.tools.common import _kib_fields, gib

    path = tmp_path / "meminfo"
    path.write_text(
        "MemAvailable:   12 kB\nHugePages:  3\nOdd: x kB\nVmSize:\t 7 kB extra\nZ: 0 kB\n"
    )
    assert _kib_fields(str(path)) == {"MemAvailable": 12 * 1024, "Z": 0}
    assert gib(3 * 2**29) == "1.5 GiB"


# ---- dlpc-tune's history and option checks ----------------------------------------------------
def test_history_of_counts_distinct_schedules_of_this_machine():
    from dlpc.tools.dlpc_tune import history_of

    def rec(sig, script, time, machine="m1", target="c", ok=True):
        return SimpleNamespace(
            sig=sig, script=script, time=time, machine=machine, target=target, ok=ok
        )

    log = SimpleNamespace(
        records=[
            rec("s", "a", 3.0),
            rec("s", "a", 1.0),  # (a re-measurement: no new trial, no new best)
            rec("s", "b", None, ok=False),  # (a failed one: a trial, no time)
            rec("s", "c", 2.0, machine="m2"),  # (another machine's)
            rec("s", "d", 2.5, target="opencl"),
            rec("other", "e", 0.1),  # (not a task's kernel)
            rec("s", "f", 2.0),
            rec("t", "g", 5.0),
        ]
    )
    tasks = [SimpleNamespace(sig="s", kernel="k"), SimpleNamespace(sig="t", kernel="u")]
    assert history_of(log, tasks, machine="m1") == [
        (1, "k", 3.0),
        (2, "k", 3.0),
        (3, "k", 2.0),
        (4, "u", 5.0),
    ]
    assert history_of(log, tasks, target="opencl", machine="m1") == [(1, "k", 2.5)]


def test_dlpc_tune_checks_its_log_and_plot_paths(tiny, tmp_path, capsys):
    from dlpc.tools import dlpc_tune

    assert dlpc_tune.main([tiny, "--log", str(tmp_path)]) == 1
    assert (
        capsys.readouterr().err.strip() == f"dlpc-tune: error: tuning log {tmp_path} is not a file"
    )
    assert dlpc_tune.main([tiny, "--log", str(tmp_path / "no" / "t.jsonl")]) == 1
    assert capsys.readouterr().err.strip() == (
        f"dlpc-tune: error: cannot write {tmp_path / 'no' / 't.jsonl'}: no such directory "
        f"{tmp_path / 'no'}"
    )
    pytest.importorskip("matplotlib")
    log = str(tmp_path / "t.jsonl")
    assert dlpc_tune.main([tiny, "--log", log, "--plot", tiny]) == 1
    assert capsys.readouterr().err.strip() == (
        f"dlpc-tune: error: --plot {tiny} would overwrite {tiny}, the model; choose another "
        "output name"
    )


def test_dlpc_target_needs_a_target_stage(tiny, capsys):
    from dlpc.tools.dlpc import main

    assert main([tiny, "--emit", "c", "--target", "dlp"]) == 1
    assert capsys.readouterr().err.strip() == (
        "dlpc: error: --target applies to --emit=graph|te|loop, not --emit=c"
    )
    assert main([tiny, "--emit", "loop", "--target", "c"]) == 0  # (a target stage)
    assert "loop.kernel" in capsys.readouterr().out


# ---- tools seed 50's killable survivors (drawn on b918473) ---------------------------------
def test_dlpc_tune_option_defaults():
    """dlpc_tune.py:90 (`--timeout`'s default 60.0 -> 61.0): every default as documented."""
    from dlpc.tools.dlpc_tune import parser

    args = parser().parse_args(["m.dlpc"])
    assert args.timeout == 60.0 and type(args.timeout) is float
    defaults = {a.dest: a.default for a in parser()._actions if a.dest != "help"}
    assert defaults["timeout"] == 60.0


def test_non_square_images_resized_name_height_then_width():
    """dlpc_train.py:241 (the message's `side[0]` -> `side[-1]`: 4x4 for a 4x6 input)."""
    from dlpc.tools.dlpc_train import fit_to_input

    x = np.arange(2 * 8 * 12, dtype=np.float32).reshape(2, 8, 12)
    said = []
    out = fit_to_input(x, (1, 4, 6), "d", said.append)
    assert out.shape == (2, 1, 4, 6)
    np.testing.assert_allclose(out[0, 0], x[0].reshape(4, 2, 6, 2).mean(axis=(1, 3)))
    assert said == ["d: 8x12 images resized to 4x6 (bilinear) for the model's input 1x4x6"]


@pytest.mark.parametrize("tool", ["dlpc", "dlpc_opt", "dlpc_run", "dlpc_train", "dlpc_tune"])
def test_each_tool_runs_as_a_module(tool):
    """`python -m dlpc.tools.<tool>` runs the tool (dlpc_train.py:527, `__name__ ==
    "__main__"` -> `<`: the module then did nothing and exited 0)."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", f"dlpc.tools.{tool}", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    name = tool.replace("_", "-")
    assert proc.stdout.startswith("dlpc " if name == "dlpc" else f"{name} (dlpc "), proc.stdout


def test_a_cosine_schedule_with_fewer_steps_than_accumulated(tiny, tmp_path, capsys):
    """dlpc_train.py:428 (`max(steps // accumulate, 1)` -> `max(..., 0)`): 2 steps an epoch
    accumulated by 4 still give the schedule one step an epoch, so a cosine schedule (which
    refuses 0 total steps) trains."""
    from dlpc.tools.dlpc_train import main

    rng = np.random.default_rng(0)
    data = tmp_path / "d.npz"
    np.savez(
        data,
        x=rng.standard_normal((12, 4)).astype(np.float32),
        y=rng.integers(0, 3, 12).astype(np.int64),
    )
    argv = [tiny, "--data", str(data), "--batch", "4", "--accumulate", "4", "--target", "numpy"]
    assert main([*argv, "--schedule", "cosine", "--epochs", "1"]) == 0, capsys.readouterr().err


def test_a_model_path_sorting_before_the_dash_is_no_stdin():
    """common.py:54 (`path == "-"` -> `<=`: '+m.dlpc' and '(m).mlir' sort before '-')."""
    from dlpc.tools.common import model_format

    assert model_format("+m.dlpc", None) == "dlpc"
    assert model_format("(m).mlir", None) == "mlir"
    assert model_format("--.onnx", None) == "onnx"


def test_a_reader_gone_away_is_a_quiet_141_not_a_write_error(monkeypatch, capsys, tmp_path):
    """diagnostics.py:266 (`except BrokenPipeError: raise` replaced: the flush's broken pipe
    fell to the OSError handler, 'cannot write to stdout: Broken pipe' and exit 1)."""
    import sys

    from dlpc import diagnostics
    from dlpc.diagnostics import EXIT_BROKEN_PIPE, run_guarded, write_atomically

    class Gone:
        def write(self, text):
            return len(text)

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            raise OSError("no descriptor")

    monkeypatch.setattr(sys, "stdout", Gone())
    with pytest.raises(BrokenPipeError):
        diagnostics._flush_stdout()
    assert run_guarded(lambda: 0, "t") == EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""

    def gone_writer(f):
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        write_atomically(tmp_path / "x.txt", gone_writer)


# ---- more of the tools' lines no area test reached ---------------------------------------------
def test_target_desc_options_apply_to_the_dlp_target_only():
    from dlpc.tools.dlpc_run import target_desc_options

    assert target_desc_options(None, "c") == {}
    assert target_desc_options("tiny", "dlp") == {"loop_to_dlp": {"target_desc": "tiny"}}
    assert target_desc_options("tiny", "dlp-c") == {"loop_to_dlp": {"target_desc": "tiny"}}
    with pytest.raises(DlpcError) as e:
        target_desc_options("tiny", "c")
    assert str(e.value) == "error: --target-desc applies to the dlp target, not 'c'"
    with pytest.raises(DlpcError):
        target_desc_options("no-such-target-desc", "dlp")


def test_dlpc_training_step_options_are_checked(tiny, capsys):
    from dlpc.tools.dlpc import main

    assert main([tiny, "--dp", "2"]) == 1
    assert capsys.readouterr().err.strip() == "dlpc: error: --dp/--tp/--pp apply to --train"
    assert main([tiny, "--train", "-o", "x.mlir"]) == 1
    assert capsys.readouterr().err.strip() == (
        "dlpc: error: --train prints to stdout; -o is not supported with it"
    )


def test_dlpc_timing_and_stats_go_to_stderr(tiny, capsys):
    from dlpc.tools.dlpc import main

    assert main([tiny, "--emit", "loop", "--timing", "--stats"]) == 0
    captured = capsys.readouterr()
    assert "loop.kernel" in captured.out and "graph-to-te" in captured.err
    assert "graph-to-te" not in captured.out
    lines = captured.err.splitlines()
    assert lines[0].split() == ["seconds", "share", "pass"]
    assert any(line.split()[-1] == "graph-to-te" for line in lines[1:])
    assert lines.index("                input  graph  te  loop") > 0  # (--stats' table)
    assert any(line.split() == ["kernels", "1", "1", "1", "1"] for line in lines)


def test_digits_without_scikit_learn_is_one_line(monkeypatch):
    import sys

    from dlpc.tools.dlpc_train import load_data

    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(DlpcError) as e:
        load_data("digits")
    assert str(e.value).startswith(
        "error: --data digits needs scikit-learn (pip install -e '.[train]' from the dlpc checkout"
    )


def test_replay_note_on_records_of_an_older_default():
    from dlpc.tools.dlpc_tune import replay_note

    record = SimpleNamespace(sig="s", target="c", machine="m", script="a", time=1e-3)

    class Log:
        records = [record]

        def best(self, sig, target, default=None, machine=None):
            return None if default is not None else record  # (tuned against another default)

    tasks = [SimpleNamespace(sig="s", kernel="mm", default="new")]
    note = replay_note(Log(), tasks, __file__, machine="m")
    assert note is not None
    assert note.splitlines()[-1] == (
        "  mm: best so far none yet (its records were tuned against an older default schedule)"
    )


def test_load_data_names_what_it_takes(tmp_path):
    from dlpc.tools.dlpc_train import fit_to_input, load_data

    with pytest.raises(DlpcError) as e:
        load_data(str(tmp_path / "d.csv"))
    assert (
        str(e.value)
        == f"error: --data must be 'digits' or an .npz file, got '{tmp_path / 'd.csv'}'"
    )
    with pytest.raises(DlpcError) as e:
        load_data(str(tmp_path / "none.npz"))
    assert str(e.value) == f"error: no such data file: {tmp_path / 'none.npz'}"
    said = []
    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    out = fit_to_input(x, (3, 4), "d", said.append)
    assert out.shape == (2, 3, 4) and said == ["d: samples 12 reshaped to the model's input 3x4"]
    assert fit_to_input(x, (12,), "d", said.append) is x and len(said) == 1


def test_dlpc_tune_on_a_model_without_kernels(tmp_path, capsys):
    from dlpc.tools import dlpc_tune

    path = tmp_path / "id.mlir"
    path.write_text(
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  func.return %x : tensor<2xf32>\n}\n"
    )
    assert dlpc_tune.main([str(path), "--log", str(tmp_path / "t.jsonl")]) == 0
    assert capsys.readouterr().err.strip() == "dlpc-tune: no tunable kernels in the model"


def test_dlpc_stats_memory_plan_and_packed_weights_lines(tmp_path, capsys):
    """dlpc.py:270 (the arena's share `100 * arena / total` -> `& total`: 0 %)."""
    from dlpc.tools.dlpc import main

    path = tmp_path / "three.dlpc"
    path.write_text("model three(x: f32[4, 64]) {\n  return exp(tanh(x) + sigmoid(x)) * x\n}\n")
    assert main([str(path), "--emit", "loop", "--stats", "-O0"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "memory plan: arena 2048 bytes for 4096 bytes of intermediates (50%)" in err
    path.write_text(
        "model two(x: f32[4, 64]) {\n  param w: f32[64, 64] = kaiming(seed=1)\n"
        "  param v: f32[64, 64] = kaiming(seed=2)\n  return linear(relu(linear(x, w)), v)\n}\n"
    )
    assert main([str(path), "--emit", "loop", "--stats"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "memory plan: arena 1024 bytes for 1024 bytes of intermediates (100%)" in err
    assert "packed weights: 32768 bytes, resident, packed once per binding" in err


# ---- every tool's defaults, as its --help documents them --------------------------------------
TOOL_DEFAULTS = {
    "dlpc": {
        "model": "m.dlpc",
        "emit": "c",
        "output": None,
        "opt_level": 2,
        "weights": None,
        "tuning_log": None,
        "fold_weights": None,
        "stats": False,
        "timing": False,
        "check_each_pass": False,
        "target_desc": None,
        "target": None,
        "train": False,
        "dp": 0,
        "tp": 0,
        "pp": 0,
        "format": None,
        "batch": None,
        "dims": None,
    },
    "dlpc_run": {
        "model": "m.dlpc",
        "target": "c",
        "weights": None,
        "input": [],
        "seed": 0,
        "check": False,
        "rtol": 0.0001,
        "atol": 1e-05,
        "repeat": 10,
        "opt_level": 2,
        "tuning_log": None,
        "profile": False,
        "opencl_profile": None,
        "target_desc": None,
        "dims": None,
        "buckets": None,
        "format": None,
        "batch": None,
    },
    "dlpc_tune": {
        "model": "m.dlpc",
        "target": "c",
        "trials": 32,
        "time_budget": None,
        "log": "tune.jsonl",
        "plot": None,
        "strategy": "evolutionary",
        "threads": 1,
        "timeout": 60.0,
        "opt_level": 2,
        "seed": 0,
        "verify": 2,
        "quiet": False,
        "compare": False,
        "repeat": 30,
        "weights": None,
        "dims": None,
        "batch": None,
        "format": None,
    },
    "dlpc_train": {
        "model": "m.dlpc",
        "emit": None,
        "data": None,
        "loss": "cross_entropy",
        "label_smoothing": 0.0,
        "optimizer": "adam",
        "lr": 0.001,
        "momentum": 0.0,
        "nesterov": False,
        "weight_decay": None,
        "schedule": "constant",
        "warmup": 0,
        "step_size": None,
        "gamma": 0.1,
        "accumulate": 1,
        "keep_last": False,
        "bn_momentum": 0.1,
        "freeze": [],
        "clip_norm": None,
        "epochs": 10,
        "batch": 32,
        "target": "c",
        "opt_level": 2,
        "weights": None,
        "save": None,
        "resume": False,
        "plot": None,
        "seed": 0,
        "dp": 0,
        "ranks": 0,
        "bucket_mb": 25.0,
        "tp": 0,
        "pp": 0,
        "microbatches": 2,
        "ps": 0,
        "ps_async": False,
        "staleness": 0,
        "pp_schedule": "1f1b",
        "stats": False,
    },
}


@pytest.mark.parametrize("tool", sorted(TOOL_DEFAULTS))
def test_each_tools_defaults(tool):
    import importlib

    module = importlib.import_module(f"dlpc.tools.{tool}")
    parser = module.build_parser() if tool == "dlpc_train" else module.parser()
    got = vars(parser.parse_args(["m.dlpc"]))
    assert got == TOOL_DEFAULTS[tool]
    assert {k: type(v) for k, v in got.items()} == {
        k: type(v) for k, v in TOOL_DEFAULTS[tool].items()
    }


# ---- tools seed 51's killable survivors (drawn on 600b2ea) ---------------------------------
def _data(tmp_path, regression: bool) -> str:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 4)).astype(np.float32)
    y = (
        rng.standard_normal((40, 3)).astype(np.float32)
        if regression
        else rng.integers(0, 3, 40).astype(np.int64)
    )
    path = tmp_path / ("reg.npz" if regression else "cls.npz")
    np.savez(path, x=x, y=y)
    return str(path)


def test_the_epoch_line_names_validation_mse_only_for_a_regression(tiny, tmp_path, capsys):
    """dlpc_train.py:486 (`mse == mse` -> `!=`: a classifier's line said 'validation mse
    nan', a regression's lost its mse)."""
    import re

    from dlpc.tools.dlpc_train import main

    argv = [tiny, "--batch", "4", "--epochs", "1", "--target", "numpy"]
    assert main([*argv, "--data", _data(tmp_path, False)]) == 0
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("epoch ")]
    assert re.fullmatch(
        r"epoch 1/1: loss \d+\.\d{4}, accuracy \d+\.\d %, validation accuracy \d+\.\d %, "
        r"\d+ samples/s",
        line,
    ), line
    assert main([*argv, "--data", _data(tmp_path, True), "--loss", "mse"]) == 0
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("epoch ")]
    assert re.fullmatch(
        r"epoch 1/1: loss \d+\.\d{4}, validation mse [0-9.e+-]+, \d+ samples/s", line
    ), line
    assert "nan" not in line


def test_the_schedules_total_steps_are_steps_per_epoch_times_epochs(tiny, tmp_path, monkeypatch):
    """dlpc_train.py:428 (`* args.epochs` -> `& args.epochs`): 29 training samples in
    batches of 4 are 7 steps an epoch, 3 epochs 21 steps (accumulated by 2: 3 a epoch, 9)."""
    from dlpc.tools import dlpc_train

    seen = []

    def optimizer(args, total_steps):
        seen.append(total_steps)
        raise DlpcError("error: stop here")

    monkeypatch.setattr(dlpc_train, "_optimizer", optimizer)
    argv = [tiny, "--data", _data(tmp_path, False), "--batch", "4", "--target", "numpy"]
    assert dlpc_train.main([*argv, "--epochs", "3"]) == 1
    assert dlpc_train.main([*argv, "--epochs", "3", "--accumulate", "2"]) == 1
    assert dlpc_train.main([*argv, "--epochs", "1", "--accumulate", "8"]) == 1  # (at least 1)
    assert seen == [21, 9, 1]


def test_the_split_without_a_test_set_at_sizes_whose_bits_overlap(tmp_path):
    """dlpc_train.py:207 (`n_test + n_val` -> `n_test | n_val`: equal at 20, 40 or 100
    samples, not at 60: 12 test, 4 validation, 44 training)."""
    from dlpc.tools.dlpc_train import DATA_SPLIT_SEED, load_data

    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((60, 2), np.float32), y=np.arange(60))
    _, ytr, _, yv, _, yt, _ = load_data(str(path))
    assert (len(ytr), len(yv), len(yt)) == (44, 4, 12)
    order = np.random.default_rng(DATA_SPLIT_SEED).permutation(60)
    np.testing.assert_array_equal(yt, order[:12])
    np.testing.assert_array_equal(yv, order[12:16])
    np.testing.assert_array_equal(ytr, order[16:])


# ---- tools seed 52's killable survivors (drawn on c6bf195) ---------------------------------
def test_the_stats_table_leaves_an_absent_op_blank():
    """dlpc.py:150 (an op a stage lacks: `ops.get(name, 0)` -> `-1` printed -1 in its cell)."""
    from collections import Counter

    from dlpc.tools.dlpc import stats_table

    rows = [
        ("graph", Counter({"graph.relu": 2, "func.return": 1}), 1),
        ("loop", Counter({"loop.kernel": 1, "func.return": 1}), 1),
    ]
    lines = stats_table(rows).splitlines()
    assert [line.split() for line in lines] == [
        ["graph", "loop"],
        ["kernels", "1", "1"],
        ["ops", "3", "2"],
        ["func.return", "1", "1"],
        ["graph.relu", "2"],
        ["loop.kernel", "1"],
    ]
    assert lines[4] == "graph.relu       2" and lines[5] == "loop.kernel            1"


def test_a_nan_against_a_number_is_an_infinite_difference():
    """dlpc_run.py:182 (NaN in one array only counted as agreeing: `&` -> `|`)."""
    from dlpc.tools.dlpc_run import difference

    nan = float("nan")
    assert difference(np.array([nan, 1.0]), np.array([1.0, 1.0])) == (np.inf, np.inf)
    assert difference(np.array([1.0, 1.0]), np.array([1.0, nan]))[0] == np.inf
    assert difference(np.array([nan, 2.0]), np.array([nan, 1.0])) == (1.0, 1.0)


def test_one_line_cuts_at_400_characters_by_default():
    """diagnostics.py:38 (the default limit 400 -> 401)."""
    from dlpc.diagnostics import one_line

    assert one_line("a" * 400) == "a" * 400
    assert one_line("a" * 401) == "a" * 397 + "..."


def test_dlpc_run_on_opencl_profiles_only_when_asked(tiny, capsys):
    """dlpc_run.py:366 (`args.profile and opencl` -> `not args.profile`: every OpenCL run
    printed a profile)."""
    pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    from dlpc.tools import dlpc_run

    argv = [tiny, "--target", "opencl", "--repeat", "1", "--batch", "2"]
    assert dlpc_run.main(argv) == 0
    out = capsys.readouterr().out
    assert "output 0: 2x3 float32" in out and "profile" not in out
    assert dlpc_run.main([*argv, "--profile"]) == 0
    assert "\nprofile (median of 1 calls, static FLOPs and compulsory bytes):\n" in (
        capsys.readouterr().out
    )


def test_digits_are_scaled_to_the_unit_interval():
    """dlpc_train.py:168 (`images / 16.0` -> `//`: every pixel 0 or 1)."""
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits

    from dlpc.tools.dlpc_train import DATA_SPLIT_SEED, load_data

    x, y, *_ = load_data("digits")
    images = load_digits().images
    order = np.random.default_rng(DATA_SPLIT_SEED).permutation(len(images))
    n_test = len(images) // 5
    n_val = (len(images) - n_test) // 10
    first = order[n_test + n_val]
    np.testing.assert_array_equal(x[0], (images[first] / 16.0).astype(np.float32))
    assert x.dtype == np.float32 and x.max() == 1.0 and 0.0 < x[x > 0].min() < 1.0


def test_kib_fields_takes_only_kb_lines():
    """common.py:187 (`parts[1] == "kB"` -> `is not`: a line in another unit was taken)."""
    import tempfile

    from dlpc.tools.common import _kib_fields

    with tempfile.NamedTemporaryFile("w", suffix=".status", delete=False) as f:
        f.write("VmSize: 8 kB\nThreads: 4 MB\nOther: 2 pages\n")
    assert _kib_fields(f.name) == {"VmSize": 8192}
