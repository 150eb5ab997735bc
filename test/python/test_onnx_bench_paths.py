"""The example models exported from PyTorch to ONNX (both exporters), imported by dlpc,
compile to the kernels the .dlpc examples compile to (bench/models.py --batches times
both paths); and the graph-simplify rules that make them so preserve results.

The exported models are bench/models.py's: its torch interpreter of the example's graph
IR (the same weights), exported with torch.onnx, TorchScript (`dynamo=False`) and dynamo
(`dynamo=True`) exporters.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from test_graph_passes import check, count, parse

from dlpc import api
from dlpc.dialects.loop import KernelOp
from dlpc.passes import pipeline
from dlpc.passes.lower.prepack import PREPARE

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------------------------- graph-simplify numerics

PADS = """
func.func @main(%x: tensor<2x3x9x8xf32>) -> (tensor<2x4x11x9xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) {
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %b = graph.param "b" : tensor<4xf32>
  %p = graph.pad %x {pads = array<i64: 0, 0, 2, 1, 0, 0, 1, 2>, value = 0.0 : f64} : (tensor<2x3x9x8xf32>) -> tensor<2x3x12x11xf32>
  %y = graph.conv2d %p, %w, %b {pads = array<i64: 0, 0, 1, 0>} : (tensor<2x3x12x11xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x11x9xf32>
  %n = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 0>, value = 0xFFF0000000000000 : f64} : (tensor<2x3x9x8xf32>) -> tensor<2x3x11x9xf32>
  %m = graph.max_pool2d %n {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<2x3x11x9xf32>) -> tensor<2x3x5x4xf32>
  %z = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 0>, value = 0.0 : f64} : (tensor<2x3x9x8xf32>) -> tensor<2x3x11x9xf32>
  %a = graph.avg_pool2d %z {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, count_include_pad = true} : (tensor<2x3x11x9xf32>) -> tensor<2x3x5x4xf32>
  func.return %y, %m, %a : tensor<2x4x11x9xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>
}
"""

ATTENTION_KT = """
func.func @main(%q: tensor<2x4x8x16xf32>, %k: tensor<2x8x4x16xf32>, %x: tensor<3x5x2xf32>) -> (tensor<2x4x8x8xf32>, tensor<3x2x2xf32>) {
  %t = graph.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %t : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %u = graph.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<3x5x2xf32>) -> tensor<3x2x5xf32>
  %v = graph.transpose %x {perm = array<i64: 0, 1, 2>} : (tensor<3x5x2xf32>) -> tensor<3x5x2xf32>
  %r = graph.matmul %u, %v : (tensor<3x2x5xf32>, tensor<3x5x2xf32>) -> tensor<3x2x2xf32>
  func.return %s, %r : tensor<2x4x8x8xf32>, tensor<3x2x2xf32>
}
"""


MEAN = """
func.func @main(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32> {
  %g = graph.reduce_mean %x {axes = array<i64: 3, 2>, keepdims = true} : (tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32>
  func.return %g : tensor<2x3x1x1xf32>
}
"""


def test_simplify_spatial_mean_is_the_global_avg_pool():
    module = check(MEAN, "graph-simplify")
    assert count(module, "graph.reduce_mean") == 0 and count(module, "graph.global_avg_pool") == 1


def test_simplify_folds_pads_into_conv_and_pools():
    module = check(PADS, "graph-simplify")
    assert count(module, "graph.pad") == 0


def test_simplify_moves_the_kt_swap_into_transpose_b():
    module = check(ATTENTION_KT, "graph-simplify")
    mm = [op for op in module.walk() if op.name == "graph.matmul"]
    assert mm[0].transpose_b and not mm[0].transpose_a
    perms = sorted(op.permutation() for op in module.walk() if op.name == "graph.transpose")
    # (the rank-3 pure swap is graph-substitute's matmul-transpose; the identity is gone)
    assert perms == [(0, 2, 1), (0, 2, 1, 3)]


def test_simplify_kt_rewrite_reaches_a_fixed_point():
    """Applying the pass again changes nothing (the rule never undoes itself)."""
    module = check(ATTENTION_KT, "graph-simplify")
    text = str(module)
    assert str(check(parse(text), "graph-simplify")) == text


# ------------------------------------------- torch exports compile like the .dlpc


def _bench():
    spec = importlib.util.spec_from_file_location("bench_models", ROOT / "bench" / "models.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _kernels(model: api.Model) -> list[tuple[str, str]]:
    """The compiled C kernels in order, a call's and then the weight packing's
    (loop-prepack-weights: `dlpc.prepare`, once per binding): each one's name without its
    number ("linear_relu") and the graph op it came from."""
    lowered = api.compile(model, target="c").lowered
    every = [op for op in lowered.walk() if isinstance(op, KernelOp)]
    kernels = [k for k in every if PREPARE not in k.attributes]
    assert len(kernels) == pipeline.stats(lowered)[1]
    kernels += [k for k in every if PREPARE in k.attributes]
    return [
        (k.sym.rstrip("0123456789").rstrip("_"), k.origin.data if k.origin else "") for k in kernels
    ]


# (the transformer too: torch.onnx writes its rank-3 linears as MatMul by the transposed
# weight, then Add, which graph-canonicalize turns back into linear)
@pytest.mark.parametrize("kind", ["ts", "dyn"])
@pytest.mark.parametrize(
    "name,batch", [("mlp", 4), ("lenet", 4), ("resnet", 1), ("mobilenet", 1), ("transformer", 1)]
)
def test_torch_exports_compile_to_the_examples_kernels(name, batch, kind, tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    pytest.importorskip("onnx", reason="onnx is not installed (dlpc[onnx])")
    if kind == "dyn":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    bench = _bench()
    model = api.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
    xs = api.random_inputs(model, seed=0)
    paths = bench.onnx_exports(model, xs, tmp_path, [kind])
    assert kind in paths, f"the {kind} export of {name} failed"
    exported = api.load(paths[kind])
    assert _kernels(exported) == _kernels(model)
    (want,) = api.reference(model, xs)
    (got,) = api.compile(exported, target="c")(*xs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_constant_nodes_import_without_the_reference_evaluator(tmp_path):
    """Weights in Constant nodes (TorchScript exports of tensors that are not parameters)
    are read directly: onnx's reference evaluator (~17 MB of imports, a bench/models.py
    --memory figure) is not loaded, and the values are the evaluator's."""
    import subprocess
    import sys

    onnx = pytest.importorskip("onnx", reason="onnx is not installed (dlpc[onnx])")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    s = np.array(2.5, np.float32)
    nodes = [
        helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w)),
        helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(s)),
        helper.make_node("MatMul", ["x", "w"], ["y0"]),
        helper.make_node("Mul", ["y0", "s"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    )
    path = tmp_path / "c.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    code = (
        "import sys, numpy as np\n"
        "from dlpc import api\n"
        f"m = api.load({str(path)!r})\n"
        "x = np.ones((2, 3), np.float32)\n"
        "(y,) = api.reference(m, [x])\n"
        "np.save(sys.argv[1], y)\n"
        "print('onnx.reference' in sys.modules)\n"
    )
    out = tmp_path / "y.npy"
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"
    np.testing.assert_allclose(np.load(out), np.ones((2, 3), np.float32) @ w * s, rtol=1e-6)
