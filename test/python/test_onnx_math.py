"""The float math functions (ONNX Sin ... Atanh, Floor, Ceil, Round; graph.sin ...):
imported from ONNX and run through `dlpc.load` + `dlpc.compile` on numpy, C and OpenCL
against onnxruntime (f32; torch for f64) on one model holding them all (one C build); their
gradient rules against central finite differences and torch.autograd in float64."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.passes.train._build import Builder
from dlpc.passes.train.autodiff import differentiate
from dlpc.reference.graph import run_reference

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper  # noqa: E402

# ONNX operator -> (graph op, torch function, the interval its inputs are drawn from)
FUNCTIONS = {
    "Sin": (graph.SinOp, torch.sin, (-4.0, 4.0)),
    "Cos": (graph.CosOp, torch.cos, (-4.0, 4.0)),
    "Tan": (graph.TanOp, torch.tan, (-1.3, 1.3)),
    "Asin": (graph.AsinOp, torch.asin, (-0.95, 0.95)),
    "Acos": (graph.AcosOp, torch.acos, (-0.95, 0.95)),
    "Atan": (graph.AtanOp, torch.atan, (-5.0, 5.0)),
    "Sinh": (graph.SinhOp, torch.sinh, (-3.0, 3.0)),
    "Cosh": (graph.CoshOp, torch.cosh, (-3.0, 3.0)),
    "Asinh": (graph.AsinhOp, torch.asinh, (-5.0, 5.0)),
    "Acosh": (graph.AcoshOp, torch.acosh, (1.05, 5.0)),
    "Atanh": (graph.AtanhOp, torch.atanh, (-0.95, 0.95)),
    "Floor": (graph.FloorOp, torch.floor, (-3.0, 3.0)),
    "Ceil": (graph.CeilOp, torch.ceil, (-3.0, 3.0)),
    "Round": (graph.RoundOp, torch.round, (-3.0, 3.0)),
}
# halves round to even; values just off a half, integers, signed zeros, inf and nan
ROUND_EDGES = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.50000006, 3.0, -0.0, np.inf, np.nan]


def _inputs(dtype, rng) -> dict[str, np.ndarray]:
    out = {}
    for name, (_, _, (lo, hi)) in FUNCTIONS.items():
        x = rng.uniform(lo, hi, (3, 4))
        if name in ("Floor", "Ceil", "Round"):
            x.reshape(-1)[: len(ROUND_EDGES)] = ROUND_EDGES
        out[name] = x.astype(dtype)
    return out


def _model(elem: int):
    nodes = [helper.make_node(op, [f"x_{op}"], [f"y_{op}"]) for op in FUNCTIONS]
    graph_ = helper.make_graph(
        nodes,
        "math",
        [helper.make_tensor_value_info(f"x_{op}", elem, [3, 4]) for op in FUNCTIONS],
        [helper.make_tensor_value_info(f"y_{op}", elem, [3, 4]) for op in FUNCTIONS],
    )
    return helper.make_model(graph_, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)


@pytest.fixture(scope="module", params=[np.float32, np.float64], ids=["f32", "f64"])
def case(request, tmp_path_factory):
    dtype = request.param
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    model = _model(elem)
    path = tmp_path_factory.mktemp("math") / "math.onnx"
    path.write_bytes(model.SerializeToString())
    xs = _inputs(dtype, np.random.default_rng(0))
    if dtype == np.float32:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, {f"x_{k}": v for k, v in xs.items()})
    else:  # (onnxruntime's CPU provider has no double Tan, Asin, ...): torch's
        want = [FUNCTIONS[k][1](torch.tensor(v)).numpy() for k, v in xs.items()]
    return path, list(xs.values()), want


@pytest.mark.parametrize("target", ["numpy", "c", "opencl"])
def test_math_functions_match_onnxruntime(case, target):
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    path, xs, want = case
    got = dlpc.compile(dlpc.load(str(path)), target=target)(*xs)
    for op, g, w in zip(FUNCTIONS, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, op
        if op in ("Floor", "Ceil", "Round"):  # exact, inf and nan kept
            np.testing.assert_array_equal(g, w, err_msg=op)
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg=op)
        else:  # libm / vector-libm functions: a few ulp
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, err_msg=op)


def test_round_is_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5], dtype=np.float32)
    b = Block(arg_types=[graph.tensor_type(x.shape, graph.f32)])
    y = Builder.at_end(b).op(graph.RoundOp, b.args[0])
    b.add_op(func.ReturnOp(y))
    module = ModuleOp([func.FuncOp("main", ([b.args[0].type], [y.type]), Region(b))])
    (got,) = run_reference(module, [x], {})
    np.testing.assert_array_equal(got, [-2, -2, -0, 0, 2, 2, 4])


def _loss_module(cls, r: np.ndarray) -> ModuleOp:
    """loss = sum(f(x) * r) for a fixed random r, in float64."""
    block = Block(arg_types=[graph.tensor_type(r.shape, graph.f64)])
    b = Builder.at_end(block)
    y = b.op(cls, block.args[0])
    loss = b.sum(b.mul(y, b.const(r, graph.f64)))
    block.add_op(func.ReturnOp(loss))
    f = func.FuncOp("main", ([block.args[0].type], [loss.type]), Region(block))
    return ModuleOp([f])


@pytest.mark.parametrize("op", list(FUNCTIONS))
def test_gradient_matches_finite_differences_and_torch(op):
    cls, torch_fn, (lo, hi) = FUNCTIONS[op]
    rng = np.random.default_rng(len(op))
    x = rng.uniform(lo, hi, (2, 3))
    if op in ("Floor", "Ceil", "Round"):  # away from the jumps, where the slope is 0
        x = np.floor(x) + rng.uniform(0.1, 0.4, x.shape)
    r = rng.standard_normal(x.shape)
    module = _loss_module(cls, r)
    grad_module = module.clone()
    differentiate(grad_module, wrt_inputs=True)
    grad_module.verify()
    loss, grad = run_reference(grad_module, [x], {})

    eps = 1e-6
    for k in range(x.size):
        hi_, lo_ = x.copy(), x.copy()
        hi_.reshape(-1)[k] += eps
        lo_.reshape(-1)[k] -= eps
        fd = (run_reference(module, [hi_], {})[0] - run_reference(module, [lo_], {})[0]) / (2 * eps)
        assert grad.reshape(-1)[k] == pytest.approx(float(fd), rel=1e-6, abs=1e-6), k

    t = torch.tensor(x, requires_grad=True)
    t_loss = (torch_fn(t) * torch.tensor(r)).sum()
    assert float(t_loss.detach()) == pytest.approx(float(loss), rel=1e-12)
    t_loss.backward()
    np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-9, atol=1e-12)


def _det_model(shape):
    node = helper.make_node("Det", ["x"], ["y"])
    graph_ = helper.make_graph(
        [node],
        "det",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape[:-2]))],
    )
    return helper.make_model(graph_, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)


@pytest.mark.parametrize("target", ["numpy", "c"])
@pytest.mark.parametrize("shape", [(1, 1), (4, 2, 2), (2, 3, 3, 3)], ids=str)
def test_det_matches_onnxruntime(shape, target, tmp_path):
    model = _det_model(shape)
    path = tmp_path / "det.onnx"
    path.write_bytes(model.SerializeToString())
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    (got,) = dlpc.compile(dlpc.load(str(path)), target=target)(x)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_det_of_a_4x4_matrix_is_refused_in_one_line(tmp_path):
    path = tmp_path / "det4.onnx"
    path.write_bytes(_det_model((4, 4)).SerializeToString())
    with pytest.raises(DlpcError) as e:
        dlpc.load(str(path))
    assert "Det of 4x4 matrices is not supported" in str(e.value) and "\n" not in str(e.value)
