"""dlpc, dlpc-run and dlpc-opt, called in-process through `main([...])`."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from dlpc.diagnostics import write_atomically
from dlpc.tools import dlpc as dlpc_tool
from dlpc.tools import dlpc_opt, dlpc_run

MODEL = """
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = graph.param "fc.weight" : tensor<4x8xf32>
  %y = graph.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %r = graph.tanh %y : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}
"""


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(MODEL)
    weights = tmp_path / "w.npz"
    np.savez(weights, **{"fc.weight": np.full((4, 8), 0.1, np.float32)})
    return str(path), str(weights)


def one_error_line(capsys, expected: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err, err


# ----------------------------------------------------------------------- dlpc


@pytest.mark.parametrize(
    "kind, marker",
    [
        ("graph", "graph.linear"),
        ("te", "te.reduce"),
        ("loop", "loop.kernel"),
        ("dlp", "dlp.kernel"),
        ("numpy", "def main(*inputs, params):"),
        ("c", "int dlpc_main(void **args)"),
        ("opencl", "__kernel void"),
        ("dlp-c", "DLP_CLUSTERS"),
    ],
)
def test_dlpc_emits_every_stage(model, capsys, kind, marker):
    assert dlpc_tool.main([model[0], f"--emit={kind}", "-O0"]) == 0
    assert marker in capsys.readouterr().out


def test_dlpc_output_file_and_stats(model, tmp_path, capsys):
    out = tmp_path / "out.py"
    assert dlpc_tool.main([model[0], "--emit=numpy", "-o", str(out), "-O1", "--stats"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "import numpy as np" in out.read_text()
    header, kernels = captured.err.splitlines()[:2]
    assert header.split() == ["input", "graph"]
    assert kernels.split() == ["kernels", "2", "2"]


def test_dlpc_stats_print_the_memory_plan_and_the_packed_weights(capsys, tmp_path):
    """--stats on target c: the arena against the intermediates, and the resident block of
    pre-packed weights (the mlp's 784x256 and 256x256 layers at batch 4: B panels)."""
    mlp = Path(__file__).resolve().parents[2] / "examples" / "mlp.dlpc"
    out = tmp_path / "mlp.c"
    assert dlpc_tool.main([str(mlp), "--emit=c", "--batch", "4", "--stats", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    plan = next(line for line in err.splitlines() if line.startswith("memory plan:"))
    arena, total = (int(w) for w in plan.split() if w.isdigit())
    assert 0 < arena <= total, plan
    packed = next(line for line in err.splitlines() if line.startswith("packed weights:"))
    nbytes = int(packed.split()[2])
    assert nbytes >= 4 * (784 * 256 + 256 * 256), packed  # both big layers, packed once
    assert f"dlpc_packed_bytes = {nbytes};" in out.read_text()


def test_dlpc_failure_writes_no_output(model, tmp_path, capsys):
    out = tmp_path / "never.mlir"
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        MODEL.replace(
            "tensor<2x4xf32>) -> tensor<2x4xf32>\n  func",
            "tensor<2x4xf32>) -> tensor<9x4xf32>\n  func",
        )
    )
    assert dlpc_tool.main([str(bad), "--emit=graph", "-o", str(out)]) == 1
    assert not out.exists() and list(tmp_path.glob(".never*")) == []
    one_error_line(capsys, "error:")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--emit=spirv"], "invalid choice: 'spirv'"),
        (["--emit=graph", "-O4"], "argument -O: invalid choice: 4"),
        (["--emit=graph", "--weights", "/nonexistent.npz"], "no such weights file"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_dlpc_bad_options(model, capsys, argv, message):
    assert dlpc_tool.main([model[0], *argv]) == 1
    one_error_line(capsys, message)


def test_write_atomically_replaces_whole_file(tmp_path):
    path = tmp_path / "f.txt"
    write_atomically(path, "first\n")
    write_atomically(path, "second\n")
    assert path.read_text() == "second\n" and [p.name for p in tmp_path.iterdir()] == ["f.txt"]


# ------------------------------------------------------------------- dlpc-run


def test_dlpc_run_summary_and_check(model, capsys):
    path, weights = model
    argv = [path, "--target", "numpy", "--weights", weights, "--check", "--repeat", "2"]
    assert dlpc_run.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "m: target numpy, -O2, 1 input(s) seed 0"
    assert out[1].startswith("output 0: 2x4 float32  [") and "mean" in out[1]
    assert "max abs diff 0, max rel diff 0" in out[2] and out[2].endswith(": ok (identical)")
    assert out[3].startswith("time: ") and out[3].endswith("ms per run (median of 2)")


def test_dlpc_run_inputs_from_files(model, tmp_path, capsys):
    path, weights = model
    x = tmp_path / "x.npy"
    np.save(x, np.ones((2, 8), np.float32))
    assert (
        dlpc_run.main(
            [path, "--target", "numpy", "--weights", weights, "--input", str(x), "--repeat", "1"]
        )
        == 0
    )
    out = capsys.readouterr().out
    expected = np.tanh(np.float32(0.8))
    assert "from files" in out and f"{expected:.6g}" in out


def test_dlpc_run_check_fails_beyond_tolerance(model, monkeypatch, capsys):
    from dlpc import api

    real = api.reference
    monkeypatch.setattr(api, "reference", lambda m, xs: [y + 1e-3 for y in real(m, xs)])
    path, weights = model
    argv = [path, "--target", "numpy", "--weights", weights, "--repeat", "1"]
    assert dlpc_run.main(argv) == 0  # without --check a mismatch is only reported
    assert "MISMATCH" in capsys.readouterr().out
    assert dlpc_run.main([*argv, "--check"]) == 1
    captured = capsys.readouterr()
    assert "max abs diff 0.001" in captured.out
    assert captured.err.count("\n") == 1 and "beyond tolerance" in captured.err
    assert dlpc_run.main([*argv, "--check", "--atol", "2e-3"]) == 0


def test_difference_and_within():
    ref = np.array([1.0, 0.0, -2.0, np.nan], np.float32)
    out = np.array([1.1, 0.0, -2.0, np.nan], np.float32)
    abs_diff, rel_diff = dlpc_run.difference(out, ref)
    assert abs_diff == pytest.approx(0.1, rel=1e-5) and rel_diff == pytest.approx(0.1, rel=1e-5)
    assert dlpc_run.within(out, ref, rtol=0.11, atol=0)
    assert not dlpc_run.within(out, ref, rtol=0.09, atol=0)
    assert dlpc_run.difference(out[:2], ref) == (np.inf, np.inf)


def test_difference_of_infinities_is_exact_and_quiet():
    """Equal infinities agree; opposite ones (or inf against a finite value) are an infinite
    difference; and no numpy RuntimeWarning ('invalid value in subtract') escapes."""
    ref = np.array([np.inf, -np.inf, 1.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dlpc_run.difference(ref.copy(), ref) == (0.0, 0.0)
        assert dlpc_run.difference(np.array([np.inf, np.inf, 1.0], np.float32), ref)[0] == np.inf
        assert dlpc_run.difference(np.array([1.0, -np.inf, 1.0], np.float32), ref)[0] == np.inf


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--target", "tpu"], "unsupported target 'tpu'"),
        (["--target", "numpy"], "no value for weight 'fc.weight'"),
        (["--target", "numpy", "--seed", "x"], "argument --seed: invalid int value"),
        (["--target", "numpy", "--input", "/nonexistent.npy"], "no such input file"),
        (["--target", "numpy", "--repeat", "0"], "--repeat must be >= 1"),
    ],
)
def test_dlpc_run_bad_options(model, capsys, argv, message):
    assert dlpc_run.main([model[0], *argv]) == 1
    one_error_line(capsys, message)


def test_dlpc_run_bad_input_shape(model, tmp_path, capsys):
    path, weights = model
    x = tmp_path / "x.npy"
    np.save(x, np.ones((8, 2), np.float32))
    assert dlpc_run.main([path, "--target", "numpy", "--weights", weights, "--input", str(x)]) == 1
    one_error_line(capsys, "input 'x' has shape 8x2 but the model expects 2x8")


def test_dlpc_run_unreadable_npy(model, tmp_path, capsys):
    path, weights = model
    x = tmp_path / "x.npy"
    x.write_text("not numpy")
    assert dlpc_run.main([path, "--target", "numpy", "--weights", weights, "--input", str(x)]) == 1
    one_error_line(capsys, "cannot read input")


# ------------------------------------------------------------------- dlpc-opt


def test_dlpc_opt_invalid_ir_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.mlir"
    bad.write_text(MODEL.replace("graph.tanh", "graph.tanhh"))
    assert dlpc_opt.main([str(bad)]) == 1
    one_error_line(capsys, "graph.tanhh")


# ---------------------------------------------------------------------- bench


def test_bench_models_prints_one_checked_table(capsys):
    bench = _bench_module()
    for export in ("graph", "torch"):
        argv = [
            "--models",
            "mlp",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--onnx-from",
            export,
            "-O",
            "0,2",
        ]
        assert bench.main(argv) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[1].split() == [
            "model",
            "numpy",
            "ref",
            "dlpc",
            "C",
            "-O0",
            "dlpc",
            "C",
            "-O2",
            "torch",
            "onnxruntime",
            "kernels",
            "-O0",
            "kernels",
            "-O2",
        ]
        cells = lines[2].split()
        assert cells[0] == "mlp" and len(cells) == 8
        # every backend either ran and matched the reference, or is not installed
        assert all(c == "n/a" or float(c) > 0 for c in cells[1:6]), cells
        assert "n/a" not in cells[1:4]
        # -O2 fuses the MLP's bias+relu epilogues into the linear kernels
        assert int(cells[7]) < int(cells[6]), cells


def test_diagnostics_are_one_line(capsys):
    from xdsl.utils.exceptions import VerifyException

    from dlpc.diagnostics import format_exception, run_guarded

    e = VerifyException("graph.add operands differ\n\nbuiltin.module {\n  ...\n}")
    assert format_exception(e) == "error: graph.add operands differ"

    def boom():
        raise RuntimeError("\nsomething broke\nat depth")

    assert run_guarded(boom, "dlpc") == 1
    one_error_line(capsys, "dlpc: internal error: RuntimeError: something broke")


def _bench_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "models.py"
    spec = importlib.util.spec_from_file_location("bench_models", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _op_cases():
    from dlpc.dialects import graph as g

    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    return [
        (
            "conv2d",
            g.Conv2DOp,
            [r(1, 4, 7, 6), r(6, 2, 3, 2), r(6)],
            dict(strides=(2, 1), pads=(1, 0, 2, 1), dilations=(2, 1), groups=2),
        ),
        (
            "max_pool_ceil",
            g.MaxPool2DOp,
            [r(1, 2, 7, 8)],
            dict(kernel=(3, 3), strides=(2, 3), pads=(1, 0, 1, 1), ceil_mode=True),
        ),
        (
            "avg_pool_ceil",
            g.AvgPool2DOp,
            [r(1, 2, 7, 8)],
            dict(kernel=(3, 2), strides=(2, 2), ceil_mode=True),
        ),
        (
            "avg_pool_pad",
            g.AvgPool2DOp,
            [r(1, 2, 7, 8)],
            dict(kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), count_include_pad=True),
        ),
        (
            "slice_negative_step",
            g.SliceOp,
            [r(6, 5)],
            dict(starts=(4, 0), ends=(0, 6), axes=(1, 0), steps=(-2, 3)),
        ),
        ("pad_crop", g.PadOp, [r(3, 4)], dict(pads=(1, -1, 0, 2), value=0.5)),
        ("layer_norm", g.LayerNormOp, [r(2, 3, 4), r(3, 4), r(4)], dict(axis=1)),
        ("reduce_prod", g.ReduceProdOp, [r(2, 3, 4)], dict(axes=(0, 2))),
        ("matmul_t", g.MatMulOp, [r(2, 8, 4), r(5, 8)], dict(transpose_a=True, transpose_b=True)),
        ("clip_one_sided", g.ClipOp, [r(3, 4)], dict(min=-0.5)),
        ("gelu_tanh", g.GeluOp, [r(3, 4)], dict(approximate="tanh")),
        ("log_softmax", g.LogSoftmaxOp, [r(3, 4)], dict(axis=0)),
        ("prelu", g.PReluOp, [r(1, 3, 2, 2), r(3, 1, 1)], {}),
        ("broadcast", g.BroadcastOp, [r(3, 1)], dict(shape=(2, 3, 4))),
        ("concat", g.ConcatOp, [r(2, 3), r(2, 1)], dict(axis=-1)),
        (
            "batch_norm",
            g.BatchNormOp,
            [r(1, 3, 2, 2), r(3), r(3), r(3), np.abs(r(3)) + 0.5],
            dict(epsilon=1e-3),
        ),
    ]


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_bench_interpreters_agree_with_the_reference(backend, tmp_path):
    """The torch interpreter and the direct ONNX export that bench/models.py times
    compute what the numpy reference computes."""
    pytest.importorskip("torch" if backend == "torch" else "onnxruntime")
    from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
    from xdsl.dialects.func import FuncOp, ReturnOp
    from xdsl.ir import Block, Region

    from dlpc import api
    from dlpc.dialects import graph as g
    from dlpc.reference import graph as ref

    bench = _bench_module()
    for name, cls, arrays, attrs in _op_cases():
        # operands after the first are weights (graph.param), as in the example models
        types = [TensorType(g.NUMPY_TO_ELT[a.dtype.name], list(a.shape)) for a in arrays]
        block = Block(arg_types=types[:1])
        params = [g.ParamOp(f"p{i}", t) for i, t in enumerate(types[1:])]
        op = cls.make(block.args[0], *params, **attrs)
        block.add_ops([*params, op, ReturnOp(op.results[0])])
        ftype = FunctionType.from_lists(types[:1], [op.results[0].type])
        module = ModuleOp([FuncOp("main", ftype, Region(block))])
        model = api.Model(module, {f"p{i}": a for i, a in enumerate(arrays[1:])}, name)
        (want,) = ref.run_reference(module, arrays[:1], model.weights)
        if backend == "torch":
            (got,) = bench.torch_runner(model)[1](arrays[:1])
        else:
            (got,) = bench.ort_runner(model, arrays[:1], tmp_path, "graph")(arrays[:1])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)


def test_dlpc_run_on_the_simulator_prints_its_report(model, capsys):
    path, weights = model
    assert (
        dlpc_run.main([path, "--target", "dlp", "--weights", weights, "--check", "--repeat", "1"])
        == 0
    )
    out = capsys.readouterr().out
    assert ": ok" in out and "GDRAM B" in out and "us simulated" in out


def test_dlpc_fold_weights_writes_what_the_output_needs(tmp_path, capsys):
    from pathlib import Path

    from dlpc import api

    resnet = Path(__file__).resolve().parents[2] / "examples" / "resnet.dlpc"
    out = tmp_path / "resnet.py"
    assert dlpc_tool.main([str(resnet), "--emit=numpy", "--fold-weights", "-o", str(out)]) == 0
    namespace = {}
    exec(out.read_text(), namespace)
    assert any(p.startswith("folded.") for p in namespace["PARAMS"])
    with np.load(tmp_path / "resnet.npz") as data:
        params = {k: data[k] for k in data.files}
    model = api.load(resnet, batch=1)
    x = api.random_inputs(model)[0]
    np.testing.assert_allclose(
        namespace["main"](x, params=params)[0], api.reference(model, [x])[0], rtol=1e-4, atol=1e-5
    )


def test_dlpc_output_to_a_fifo_writes_no_weights_beside_it(tmp_path, capsys):
    """-o naming a device or FIFO (as -o /dev/null does) is written in place, and no
    `<output>.npz` is made beside it (before: /dev/null.npz)."""
    import os
    import threading

    mlp = Path(__file__).resolve().parents[2] / "examples" / "mlp.dlpc"
    fifo = tmp_path / "out.c"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert dlpc_tool.main([str(mlp), "--fold-weights", "-o", str(fifo)]) == 0
    reader.join(timeout=60)
    assert got and b"dlpc_main" in got[0]
    assert not (tmp_path / "out.npz").exists()
    assert "out.npz" not in capsys.readouterr().err


def test_loop_level_ir_is_compiled_not_run(tmp_path, capsys):
    """A loop-level module (memref arguments) compiles to C with `dlpc`; `dlpc-run` and a
    compiled model's call say in one line that only graph-level models run (the call
    raised xDSL's VerifyException 'expected a tensor' with a traceback)."""
    import dlpc
    from dlpc.diagnostics import DlpcError

    path = tmp_path / "loop.mlir"
    path.write_text(
        "func.func @main(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dlpc.num_inputs"
        " = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {\n"
        '  loop.kernel "neg_0" {\n'
        '    loop.for %i = 0 to 4 step 1 {name = "i0"} {\n'
        "      %v = memref.load %x[%i] : memref<4xf32>\n"
        "      %n = arith.negf %v : f32\n"
        "      memref.store %n, %y[%i] : memref<4xf32>\n"
        "    }\n  }\n  func.return\n}\n"
    )
    assert dlpc_tool.main([str(path), "--emit", "c", "-o", str(tmp_path / "loop.c")]) == 0
    assert "kernel_neg_0" in (tmp_path / "loop.c").read_text()
    capsys.readouterr()
    assert dlpc_run.main([str(path), "--target", "c"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "only graph-level models run" in err, err
    compiled = dlpc.compile(dlpc.load(path), target="c")
    with pytest.raises(DlpcError, match="memref<4xf32>, not a tensor"):
        compiled(np.zeros(4, np.float32))
