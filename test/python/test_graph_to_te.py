"""graph-to-te: every graph op lowers to te, and the te evaluator's results on random
inputs match the numpy reference (rtol/atol 1e-5 for elementwise, 1e-4 where a
reduction reorders float32 sums). graph.fused becomes exactly one te op."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import Builtin, FunctionType, ModuleOp, f32, i1, i64
from xdsl.dialects.func import Func, FuncOp, ReturnOp
from xdsl.ir import Block, Region
from xdsl.parser import Parser

from dlpc.dialects import graph as g
from dlpc.dialects.te import ComputeOp, ReduceOp, Te
from dlpc.passes.lower.graph_to_te import GraphToTe
from dlpc.passes.lower.te_inline import TeInline
from dlpc.reference.graph import run_reference
from dlpc.reference.te import run_te

RNG = np.random.default_rng(0)


def context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, g.Graph, Te, arith.Arith, xmath.Math, scf.Scf):
        ctx.load_dialect(dialect)
    return ctx


def rand(*shape, positive=False) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(x) + np.float32(0.1) if positive else x


def ints(*shape, lo=-5, hi=6) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(np.int64)


def module_of(arrays, build) -> ModuleOp:
    """@main(arrays...) returning build(*args) (one graph op, or a list of ops)."""
    types = [g.tensor_type(a.shape, g.NUMPY_TO_ELT[a.dtype.name]) for a in arrays]
    block = Block(arg_types=types)
    ops = build(*block.args)
    ops = ops if isinstance(ops, list) else [ops]
    block.add_ops(ops)
    result = ops[-1].results[0]
    block.add_op(ReturnOp(result))
    func = FuncOp("main", FunctionType.from_lists(types, [result.type]), Region(block))
    module = ModuleOp([func])
    module.verify()
    return module


def lower_and_check(module: ModuleOp, inputs, weights=None, tol=1e-5) -> ModuleOp:
    weights = weights or {}
    expected = run_reference(module, inputs, weights)
    GraphToTe().apply(context(), module)
    module.verify()
    left = [
        op.name
        for op in module.walk()
        if op.name.startswith("graph.") and op.name not in ("graph.param", "graph.constant")
    ]
    assert left == []
    # the printed IR parses back to the same text
    text = str(module)
    assert str(Parser(context(), text).parse_module()) == text
    got = run_te(module, inputs, weights)
    for e, o in zip(expected, got, strict=True):
        assert o.shape == e.shape and o.dtype == e.dtype
        if e.dtype == bool or np.issubdtype(e.dtype, np.integer):
            np.testing.assert_array_equal(o, e)
        else:
            np.testing.assert_allclose(o, e, rtol=tol, atol=tol)
    return module


def te_ops(module: ModuleOp) -> list:
    return [op for op in module.walk() if isinstance(op, ComputeOp | ReduceOp)]


# ------------------------------------------------------------------- elementwise

UNARY = [
    ("neg", g.NegOp, {}, False),
    ("abs", g.AbsOp, {}, False),
    ("exp", g.ExpOp, {}, False),
    ("log", g.LogOp, {}, True),
    ("sqrt", g.SqrtOp, {}, True),
    ("rsqrt", g.RsqrtOp, {}, True),
    ("tanh", g.TanhOp, {}, False),
    ("sigmoid", g.SigmoidOp, {}, False),
    ("erf", g.ErfOp, {}, False),
    ("relu", g.ReluOp, {}, False),
    ("gelu", g.GeluOp, {}, False),
    ("gelu_tanh", g.GeluOp, {"approximate": "tanh"}, False),
    ("leaky_relu", g.LeakyReluOp, {"alpha": 0.2}, False),
    ("clip", g.ClipOp, {"min": -0.5, "max": 0.7}, False),
    ("clip_min", g.ClipOp, {"min": 0.1}, False),
    ("cast_i64", g.CastOp, {"to": i64}, False),
    ("cast_i1", g.CastOp, {"to": i1}, False),
]


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 1, 4)], ids=str)
@pytest.mark.parametrize("name,cls,attrs,positive", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, cls, attrs, positive, shape):
    x = rand(*shape, positive=positive) * np.float32(3)
    lower_and_check(module_of([x], lambda a: cls.make(a, **attrs)), [x])


def test_cast_int_to_float():
    x = ints(3, 4)
    lower_and_check(module_of([x], lambda a: g.CastOp.make(a, to=f32)), [x])


BINARY = [
    ("add", g.AddOp),
    ("sub", g.SubOp),
    ("mul", g.MulOp),
    ("div", g.DivOp),
    ("max", g.MaxOp),
    ("min", g.MinOp),
    ("pow", g.PowOp),
]
BROADCAST = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((2, 1, 4), (3, 1)),
    ((5,), ()),
    ((1, 3, 1), (2, 1, 5)),
]


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("name,cls", BINARY, ids=[b[0] for b in BINARY])
def test_binary(name, cls, shapes):
    a, b = rand(*shapes[0], positive=name == "pow"), rand(*shapes[1], positive=True)
    lower_and_check(module_of([a, b], lambda x, y: cls.make(x, y)), [a, b])


@pytest.mark.parametrize("cls", [g.AddOp, g.SubOp, g.MulOp, g.DivOp, g.MaxOp], ids=str)
def test_binary_integer(cls):
    a, b = ints(3, 4), ints(4, lo=1, hi=4) * np.array([1, -1, 1, -1])
    lower_and_check(module_of([a, b], lambda x, y: cls.make(x, y)), [a, b])


def test_prelu():
    x, s = rand(1, 4, 3, 3), rand(4, 1, 1)
    lower_and_check(module_of([x, s], lambda a, b: g.PReluOp.make(a, b)), [x, s])


@pytest.mark.parametrize("pred", g.CompareOp.PREDICATES)
def test_compare(pred):
    a, b = rand(3, 4), rand(4)
    a[0, :] = b  # some equal elements
    lower_and_check(module_of([a, b], lambda x, y: g.CompareOp.make(x, y, predicate=pred)), [a, b])


def test_where():
    c, a, b = rand(3, 1) > 0, rand(3, 4), rand(4)
    lower_and_check(module_of([c, a, b], lambda *v: g.WhereOp.make(*v)), [c, a, b])


# ---------------------------------------------------------------- linear algebra

MATMUL = [
    ((3, 5), (5, 4), {}),
    ((2, 3, 5), (5, 4), {}),
    ((2, 1, 3, 5), (3, 5, 4), {}),
    ((5, 3), (5, 4), {"transpose_a": True}),
    ((3, 5), (4, 5), {"transpose_b": True}),
    ((2, 5, 3), (2, 4, 5), {"transpose_a": True, "transpose_b": True}),
    ((5,), (5, 4), {}),
    ((3, 5), (5,), {}),
    ((5,), (5,), {}),
    ((2, 3, 5), (5,), {}),
]


@pytest.mark.parametrize("sa,sb,attrs", MATMUL, ids=str)
def test_matmul(sa, sb, attrs):
    a, b = rand(*sa), rand(*sb)
    m = lower_and_check(
        module_of([a, b], lambda x, y: g.MatMulOp.make(x, y, **attrs)), [a, b], tol=1e-4
    )
    (op,) = te_ops(m)
    assert isinstance(op, ReduceOp) and op.reduce_extents == (5,)


@pytest.mark.parametrize(
    "sx,bias", [((3, 6), (4,)), ((2, 3, 6), (4,)), ((3, 6), None), ((3, 6), (1, 4))], ids=str
)
def test_linear(sx, bias):
    x, w = rand(*sx), rand(4, 6)
    arrays = [x, w] + ([rand(*bias)] if bias else [])
    m = lower_and_check(module_of(arrays, lambda *v: g.LinearOp.make(*v)), arrays, tol=1e-4)
    (op,) = te_ops(m)
    assert op.has_epilogue == (bias is not None)


# ------------------------------------------------------------------- convolution

CONV = [
    ((1, 3, 6, 6), (4, 3, 3, 3), {}),
    ((2, 3, 7, 5), (4, 3, 3, 3), {"pads": (1, 1, 1, 1), "strides": (2, 2)}),
    ((1, 2, 6, 7), (3, 2, 2, 3), {"pads": (0, 1, 2, 1), "dilations": (2, 1)}),
    ((1, 4, 5, 5), (6, 2, 3, 3), {"pads": (1, 1), "groups": 2}),
    ((1, 4, 5, 5), (4, 1, 3, 3), {"pads": (1, 1, 1, 1), "groups": 4}),
]


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("sx,sw,attrs", CONV, ids=str)
def test_conv2d(sx, sw, attrs, bias):
    arrays = [rand(*sx), rand(*sw)] + ([rand(sw[0])] if bias else [])
    m = lower_and_check(
        module_of(arrays, lambda *v: g.Conv2DOp.make(*v, **attrs)), arrays, tol=1e-4
    )
    (op,) = te_ops(m)
    assert op.reduce_extents == sw[1:]
    guarded = any(isinstance(o, scf.IfOp) for o in op.walk())
    assert guarded == any(p > 0 for p in attrs.get("pads", (0,)))


POOL = [
    ((1, 2, 6, 6), {"kernel": (2, 2), "strides": (2, 2)}),
    ((2, 3, 7, 5), {"kernel": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}),
    ((1, 2, 7, 7), {"kernel": (2, 2), "strides": (2, 2), "ceil_mode": True}),
    ((1, 1, 8, 6), {"kernel": (3, 2), "strides": (2, 1), "pads": (1, 0, 1, 1), "ceil_mode": True}),
]


@pytest.mark.parametrize("sx,attrs", POOL, ids=str)
def test_max_pool(sx, attrs):
    x = rand(*sx)
    lower_and_check(module_of([x], lambda a: g.MaxPool2DOp.make(a, **attrs)), [x])


@pytest.mark.parametrize("include", [False, True], ids=["exclude_pad", "include_pad"])
@pytest.mark.parametrize("sx,attrs", POOL, ids=str)
def test_avg_pool(sx, attrs, include):
    x = rand(*sx)
    build = lambda a: g.AvgPool2DOp.make(a, count_include_pad=include, **attrs)  # noqa: E731
    lower_and_check(module_of([x], build), [x])


def test_global_avg_pool():
    x = rand(2, 3, 5, 4)
    lower_and_check(module_of([x], lambda a: g.GlobalAvgPoolOp.make(a)), [x])


# ------------------------------------------------------------------ normalisation


def test_batch_norm():
    x = rand(2, 3, 4, 5)
    params = [rand(3), rand(3), rand(3), rand(3, positive=True)]
    arrays = [x, *params]
    lower_and_check(module_of(arrays, lambda *v: g.BatchNormOp.make(*v, epsilon=1e-3)), arrays)


@pytest.mark.parametrize(
    "sx,axis,ss,bias",
    [((4, 6), -1, (6,), True), ((2, 3, 5), 1, (3, 5), True), ((2, 3, 5), 1, (5,), False)],
    ids=str,
)
def test_layer_norm(sx, axis, ss, bias):
    arrays = [rand(*sx), rand(*ss)] + ([rand(*ss)] if bias else [])
    m = lower_and_check(
        module_of(arrays, lambda *v: g.LayerNormOp.make(*v, axis=axis)), arrays, tol=1e-4
    )
    assert [op.compute_name for op in te_ops(m)] == [
        "layer_norm_0_mean",
        "layer_norm_0_rstd",
        "layer_norm_0",
    ]


@pytest.mark.parametrize("cls", [g.SoftmaxOp, g.LogSoftmaxOp], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("sx,axis", [((4, 7), -1), ((3, 4, 5), 0), ((3, 4, 5), 1)], ids=str)
def test_softmax(cls, sx, axis):
    x = rand(*sx) * np.float32(4)
    m = lower_and_check(module_of([x], lambda a: cls.make(a, axis=axis)), [x], tol=1e-5)
    kinds = [(type(op).__name__, getattr(op, "combiner_name", None)) for op in te_ops(m)]
    exps = sum(inner.name == "math.exp" for op in te_ops(m) for inner in op.walk())
    if cls is g.SoftmaxOp and axis % len(sx) == len(sx) - 1:
        # the last axis: exp once, stored (a row-local buffer in te-to-loop's row
        # kernel), summed, then scaled
        assert kinds == [("ReduceOp", "max"), ("ComputeOp", None)] + [
            ("ReduceOp", "add"),
            ("ComputeOp", None),
        ]
        assert exps == 1
    else:
        assert kinds == [("ReduceOp", "max"), ("ReduceOp", "add"), ("ComputeOp", None)]
        assert exps == (2 if cls is g.SoftmaxOp else 1)


# --------------------------------------------------------------------- reductions

REDUCE = [g.ReduceSumOp, g.ReduceMeanOp, g.ReduceMaxOp, g.ReduceMinOp, g.ReduceProdOp]


@pytest.mark.parametrize("keepdims", [False, True], ids=["drop", "keep"])
@pytest.mark.parametrize("axes", [(1,), (), (0, 2), (-1,)], ids=str)
@pytest.mark.parametrize("cls", REDUCE, ids=lambda c: c.name)
def test_reduce(cls, axes, keepdims):
    x = rand(3, 4, 5) + np.float32(cls is g.ReduceProdOp)
    build = lambda a: cls.make(a, axes=axes, keepdims=keepdims)  # noqa: E731
    lower_and_check(module_of([x], build), [x], tol=1e-4)


def test_reduce_max_integer():
    x = ints(3, 4)
    lower_and_check(module_of([x], lambda a: g.ReduceMaxOp.make(a, axes=(1,))), [x])


# ------------------------------------------------------------------ data movement


@pytest.mark.parametrize(
    "sx,target",
    [
        ((2, 3, 4), (4, 6)),
        ((2, 3, 4), (24,)),
        ((6,), (1, 2, 1, 3)),
        ((1, 4, 1, 3), (3, -1)),
        ((3, 5), (5, 3)),
    ],
    ids=str,
)
def test_reshape(sx, target):
    x = rand(*sx)
    lower_and_check(module_of([x], lambda a: g.ReshapeOp.make(a, shape=target)), [x])


@pytest.mark.parametrize("perm", [(), (1, 0, 2), (2, 0, 1)], ids=str)
def test_transpose(perm):
    x = rand(2, 3, 4)
    lower_and_check(module_of([x], lambda a: g.TransposeOp.make(a, perm=perm)), [x])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = {
        0: [(1, 3, 2), (2, 3, 2), (3, 3, 2)],
        1: [(2, 1, 2), (2, 4, 2), (2, 2, 2)],
        -1: [(2, 3, 1), (2, 3, 3), (2, 3, 2)],
    }[axis]
    arrays = [rand(*s) for s in shapes]
    lower_and_check(module_of(arrays, lambda *v: g.ConcatOp.make(*v, axis=axis)), arrays)


@pytest.mark.parametrize(
    "attrs",
    [
        {"starts": (1,), "ends": (4,), "axes": (1,)},
        {"starts": (0, 1), "ends": (3, 100), "steps": (2, 2)},
        {"starts": (-1,), "ends": (-100,), "axes": (1,), "steps": (-2,)},
        {"starts": (-2,), "ends": (6,)},
    ],
    ids=str,
)
def test_slice(attrs):
    x = rand(4, 7)
    lower_and_check(module_of([x], lambda a: g.SliceOp.make(a, **attrs)), [x])


@pytest.mark.parametrize("pads", [(0, 1, 2, 3), (1, 0, 0, 2), (-1, 1, 2, -2)], ids=str)
def test_pad(pads):
    x = rand(4, 5)
    lower_and_check(module_of([x], lambda a: g.PadOp.make(a, pads=pads, value=1.5)), [x])


@pytest.mark.parametrize("sx,target", [((4,), (3, 4)), ((3, 1), (2, 3, 5)), ((), (2, 2))], ids=str)
def test_broadcast(sx, target):
    x = rand(*sx)
    lower_and_check(module_of([x], lambda a: g.BroadcastOp.make(a, shape=target)), [x])


@pytest.mark.parametrize("axis,si", [(0, (3,)), (1, (2, 2)), (-1, (4,))], ids=str)
def test_gather(axis, si):
    data = rand(5, 6, 4)
    n = data.shape[axis]
    idx = RNG.integers(-n, n, si).astype(np.int64)
    arrays = [data, idx]
    lower_and_check(module_of(arrays, lambda d, i: g.GatherOp.make(d, i, axis=axis)), arrays)


def test_params_and_constants_stay():
    x, w = rand(3, 4), rand(4)
    c = g.ConstantOp.from_numpy(np.arange(4, dtype=np.float32))

    def build(a):
        p = g.ParamOp("w", g.tensor_type((4,)))
        s = g.AddOp.make(a, p)
        return [p, c, s, g.MulOp.make(s, c)]

    m = lower_and_check(module_of([x], build), [x], {"w": w})
    names = [op.name for op in m.walk() if op.name.startswith(("graph.", "te.compute"))]
    assert names == ["graph.param", "graph.constant", "te.compute", "te.compute"]
    assert [op.compute_name for op in te_ops(m)] == ["add_0", "mul_1"]


def test_guarded_reads_never_out_of_bounds():
    """The te evaluator raises on an out-of-bounds read: padding must be guarded."""
    x, w = rand(1, 1, 3, 3), rand(1, 1, 3, 3)
    m = module_of([x, w], lambda a, k: g.Conv2DOp.make(a, k, pads=(2, 2, 2, 2)))
    lower_and_check(m, [x, w], tol=1e-4)


# -------------------------------------------------------------------------- fusion

FUSED = {
    "conv_bias_relu": (
        """
func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32> {
  %y = graph.fused "conv_bias_relu" %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32> {
  ^bb0(%a: tensor<1x3x8x8xf32>, %k: tensor<4x3x3x3xf32>, %c: tensor<4x1x1xf32>):
    %0 = graph.conv2d %a, %k {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
    %1 = graph.add %0, %c : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
    %2 = graph.relu %1 : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    graph.yield %2 : tensor<1x4x8x8xf32>
  }
  func.return %y : tensor<1x4x8x8xf32>
}""",
        [(1, 3, 8, 8), (4, 3, 3, 3), (4, 1, 1)],
        ReduceOp,
    ),
    "linear_gelu": (
        """
func.func @main(%x: tensor<3x6xf32>, %w: tensor<5x6xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
  %y = graph.fused "linear_gelu" %x, %w, %b : (tensor<3x6xf32>, tensor<5x6xf32>, tensor<5xf32>) -> tensor<3x5xf32> {
  ^bb0(%a: tensor<3x6xf32>, %k: tensor<5x6xf32>, %c: tensor<5xf32>):
    %0 = graph.linear %a, %k, %c : (tensor<3x6xf32>, tensor<5x6xf32>, tensor<5xf32>) -> tensor<3x5xf32>
    %1 = graph.gelu %0 : (tensor<3x5xf32>) -> tensor<3x5xf32>
    graph.yield %1 : tensor<3x5xf32>
  }
  func.return %y : tensor<3x5xf32>
}""",
        [(3, 6), (5, 6), (5,)],
        ReduceOp,
    ),
    "relu_matmul_sigmoid": (
        """
func.func @main(%x: tensor<3x6xf32>, %w: tensor<6x5xf32>) -> tensor<3x5xf32> {
  %y = graph.fused "relu_matmul_sigmoid" %x, %w : (tensor<3x6xf32>, tensor<6x5xf32>) -> tensor<3x5xf32> {
  ^bb0(%a: tensor<3x6xf32>, %k: tensor<6x5xf32>):
    %0 = graph.relu %a : (tensor<3x6xf32>) -> tensor<3x6xf32>
    %1 = graph.matmul %0, %k : (tensor<3x6xf32>, tensor<6x5xf32>) -> tensor<3x5xf32>
    %2 = graph.sigmoid %1 : (tensor<3x5xf32>) -> tensor<3x5xf32>
    graph.yield %2 : tensor<3x5xf32>
  }
  func.return %y : tensor<3x5xf32>
}""",
        [(3, 6), (6, 5)],
        ReduceOp,
    ),
    "exp_mul_tanh": (
        """
func.func @main(%x: tensor<4x5xf32>, %s: tensor<5xf32>) -> tensor<4x5xf32> {
  %y = graph.fused "exp_mul_tanh" %x, %s : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32> {
  ^bb0(%a: tensor<4x5xf32>, %c: tensor<5xf32>):
    %0 = graph.exp %a : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %1 = graph.mul %0, %c : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
    %2 = graph.tanh %1 : (tensor<4x5xf32>) -> tensor<4x5xf32>
    graph.yield %2 : tensor<4x5xf32>
  }
  func.return %y : tensor<4x5xf32>
}""",
        [(4, 5), (5,)],
        ComputeOp,
    ),
}


@pytest.mark.parametrize("name", list(FUSED))
def test_fused_is_one_te_op(name):
    src, shapes, kind = FUSED[name]
    module = Parser(context(), src).parse_module()
    arrays = [rand(*s) for s in shapes]
    m = lower_and_check(module, arrays, tol=1e-4)
    (op,) = te_ops(m)
    assert isinstance(op, kind) and op.compute_name == name
    if kind is ReduceOp and name != "relu_matmul_sigmoid":
        assert op.has_epilogue


def test_te_inline_preserves_numerics():
    x, w = rand(3, 6), rand(5, 6)

    def build(a, k):
        r = g.ReluOp.make(a)
        n = g.NegOp.make(r)
        lin = g.LinearOp.make(n, k)
        return [r, n, lin, g.ExpOp.make(lin)]

    m = lower_and_check(module_of([x, w], build), [x, w], tol=1e-4)
    expected = run_te(m, [x, w])
    TeInline().apply(context(), m)
    m.verify()
    assert [op.compute_name for op in te_ops(m)] == ["linear_2", "exp_3"]
    np.testing.assert_allclose(run_te(m, [x, w])[0], expected[0], rtol=1e-6)
    assert math.isfinite(float(expected[0].sum()))


# ---------------------------------------------------------------------- examples


@pytest.mark.parametrize("example", ["mlp", "lenet", "resnet", "mobilenet", "transformer"])
def test_examples_fused_and_lowered(example):
    """The example models, fused by graph-fuse and lowered: same outputs as the graph,
    and each graph.fused is one te op named after its kernel."""
    import os

    from dlpc.frontends.text import load_model
    from dlpc.universe import PASSES

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    model = load_model(os.path.join(root, "examples", f"{example}.dlpc"), batch=1)
    module, weights = model.module, model.weights
    func = next(op for op in module.walk() if isinstance(op, FuncOp))
    inputs = [rand(*g.shape_of(a)) for a in func.args]
    ctx = context()
    for name in ("graph-infer-shapes", "graph-substitute", "graph-fuse"):
        PASSES[name]()().apply(ctx, module)
    kernels = [op.kernel_name for op in module.walk() if isinstance(op, g.FusedOp)]
    assert kernels
    m = lower_and_check(module, inputs, weights, tol=1e-4)
    names = [op.compute_name for op in te_ops(m)]
    for kernel in kernels:
        assert names.count(kernel) == 1
        assert not any(n.startswith(kernel + "_") for n in names)


def test_fused_kernel_names_stay_unique():
    src = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.fused "exp_neg" %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %0 = graph.exp %a : (tensor<4xf32>) -> tensor<4xf32>
    %1 = graph.neg %0 : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %1 : tensor<4xf32>
  }
  %z = graph.fused "exp_neg" %y : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %0 = graph.exp %a : (tensor<4xf32>) -> tensor<4xf32>
    %1 = graph.neg %0 : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %1 : tensor<4xf32>
  }
  func.return %z : tensor<4xf32>
}"""
    m = lower_and_check(Parser(context(), src).parse_module(), [rand(4)])
    assert [op.compute_name for op in te_ops(m)] == ["exp_neg", "exp_neg_1"]
