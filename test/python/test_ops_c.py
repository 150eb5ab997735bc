"""Every graph op through graph-to-te -> te-to-loop -> C, compared with the numpy
reference (`run_reference`) on random inputs: several shapes per op, broadcasting, odd
sizes. Cases are batched per op family into one module (one C compile each); every
output is checked on its own and a failure names its case. rtol 1e-4 (atol 1e-4 where
float32 sums are reordered, 1e-5 otherwise); integer and bool outputs exactly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import FunctionType, ModuleOp, f32, i1, i32, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region

from dlpc.backends.runtime.cbuild import CFunction
from dlpc.dialects import graph as g
from dlpc.dialects.loop import KernelOp
from dlpc.passes.lower.graph_to_te import GraphToTe
from dlpc.passes.lower.te_to_loop import TeToLoop
from dlpc.passes.pipeline import parse_module
from dlpc.reference.graph import run_reference

RNG = np.random.default_rng(42)
COVERED: set[str] = set()


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dlpc-cache"))


def rand(*shape, positive=False) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(x) + np.float32(0.1) if positive else x


def ints(*shape, lo=-5, hi=6) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(np.int64)


@dataclass
class Case:
    """One op application: `build(*args)` returns the ops (the last one's result is the
    case's output); `weights` are bound to graph.param ops the builder creates."""

    id: str
    arrays: list[np.ndarray]
    build: Callable[..., Operation | list[Operation]]
    tol: float = 1e-5
    weights: dict[str, np.ndarray] = field(default_factory=dict)


def batch_module(cases: list[Case]) -> ModuleOp:
    """@main taking every case's inputs and returning every case's output."""
    types = [g.tensor_type(a.shape, g.NUMPY_TO_ELT[a.dtype.name]) for c in cases for a in c.arrays]
    block = Block(arg_types=types)
    args = list(block.args)
    results = []
    for c in cases:
        mine, args = args[: len(c.arrays)], args[len(c.arrays) :]
        ops = c.build(*mine)
        ops = ops if isinstance(ops, list) else [ops]
        block.add_ops(ops)
        COVERED.update(op.name for op in ops)
        results.append(ops[-1].results[0])
    block.add_op(ReturnOp(*results))
    fn = FuncOp("main", FunctionType.from_lists(types, [r.type for r in results]), Region(block))
    module = ModuleOp([fn])
    module.verify()
    return module


def lower_to_loop(module: ModuleOp, **options) -> ModuleOp:
    GraphToTe().apply(Context(), module)
    module.verify()
    TeToLoop(**options).apply(Context(), module)
    module.verify()
    return module


def check(name: str, module: ModuleOp, cases: list[Case], **options) -> CFunction:
    inputs = [a for c in cases for a in c.arrays]
    weights = {k: v for c in cases for k, v in c.weights.items()}
    expected = run_reference(module, inputs, weights)
    lower_to_loop(module, **options)
    assert any(isinstance(op, KernelOp) for op in module.walk())
    fn = CFunction(module, name=f"ops_{name}")
    got = fn(*inputs, params=weights)
    for c, e, o in zip(cases, expected, got, strict=True):
        assert o.shape == e.shape and o.dtype == e.dtype, c.id
        if e.dtype == bool or np.issubdtype(e.dtype, np.integer):
            np.testing.assert_array_equal(o, e, err_msg=c.id)
        else:
            np.testing.assert_allclose(o, e, rtol=max(c.tol, 1e-4), atol=c.tol, err_msg=c.id)
    return fn


# ------------------------------------------------------------------------ cases

SHAPES = [(7,), (3, 5), (2, 3, 1, 4)]
UNARY = [
    ("neg", g.NegOp, {}, False), ("abs", g.AbsOp, {}, False), ("exp", g.ExpOp, {}, False),
    ("log", g.LogOp, {}, True), ("sqrt", g.SqrtOp, {}, True), ("rsqrt", g.RsqrtOp, {}, True),
    ("tanh", g.TanhOp, {}, False), ("sigmoid", g.SigmoidOp, {}, False),
    ("erf", g.ErfOp, {}, False), ("relu", g.ReluOp, {}, False), ("gelu", g.GeluOp, {}, False),
    ("gelu_tanh", g.GeluOp, {"approximate": "tanh"}, False),
    ("leaky_relu", g.LeakyReluOp, {"alpha": 0.2}, False),
    ("clip", g.ClipOp, {"min": -0.5, "max": 0.7}, False), ("clip_min", g.ClipOp, {"min": 0.1}, False),
    ("cast_i64", g.CastOp, {"to": i64}, False), ("cast_i1", g.CastOp, {"to": i1}, False),
]  # fmt: skip


def unary_cases() -> list[Case]:
    cases = []
    for name, cls, attrs, positive in UNARY:
        for shape in SHAPES:
            x = rand(*shape, positive=positive) * np.float32(3)
            cases.append(Case(f"{name}{shape}", [x], lambda a, c=cls, k=attrs: c.make(a, **k)))
    x = ints(3, 4)
    cases.append(Case("cast_i64_to_f32", [x], lambda a: g.CastOp.make(a, to=f32)))
    return cases


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


def binary_cases() -> list[Case]:
    cases = []
    for name, cls in BINARY:
        for sa, sb in BROADCAST:
            a, b = rand(*sa, positive=name == "pow"), rand(*sb, positive=True)
            cases.append(Case(f"{name}{sa}{sb}", [a, b], lambda x, y, c=cls: c.make(x, y)))
    for cls in (g.AddOp, g.SubOp, g.MulOp, g.DivOp, g.MaxOp, g.MinOp):
        a, b = ints(3, 4), ints(4, lo=1, hi=4) * np.array([1, -1, 1, -1])
        cases.append(Case(f"{cls.name}_int", [a, b], lambda x, y, c=cls: c.make(x, y)))
    # integer pow is math.ipowi (by squaring in C); exponents >= 0 (numpy rejects others)
    base, expo = ints(3, 4, lo=-4, hi=5), ints(4, lo=0, hi=9)
    cases.append(Case("pow_int", [base, expo], lambda x, y: g.PowOp.make(x, y)))
    cases.append(
        Case(
            "pow_int32",
            [base.astype(np.int32), expo.astype(np.int32)],
            lambda x, y: g.PowOp.make(x, y),
        )
    )
    for pred in g.CompareOp.PREDICATES:
        a, b = rand(3, 4), rand(4)
        a[0, :] = b
        cases.append(
            Case(
                f"compare_{pred}", [a, b], lambda x, y, p=pred: g.CompareOp.make(x, y, predicate=p)
            )
        )
    c, a, b = rand(3, 1) > 0, rand(3, 4), rand(4)
    cases.append(Case("where", [c, a, b], lambda *v: g.WhereOp.make(*v)))
    x, s = rand(1, 4, 3, 3), rand(4, 1, 1)
    cases.append(Case("prelu", [x, s], lambda a, b: g.PReluOp.make(a, b)))
    return cases


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
    ((17, 33), (33, 9), {}),
]


def linalg_cases() -> list[Case]:
    cases = []
    for sa, sb, attrs in MATMUL:
        a, b = rand(*sa), rand(*sb)
        cases.append(
            Case(
                f"matmul{sa}{sb}{attrs}",
                [a, b],
                lambda x, y, k=attrs: g.MatMulOp.make(x, y, **k),
                tol=1e-4,
            )
        )
    for sx, bias in [((3, 6), (4,)), ((2, 3, 6), (4,)), ((3, 6), None), ((3, 6), (1, 4))]:
        arrays = [rand(*sx), rand(4, 6)] + ([rand(*bias)] if bias else [])
        cases.append(Case(f"linear{sx}{bias}", arrays, lambda *v: g.LinearOp.make(*v), tol=1e-4))
    # weights as graph.param: they become parameters of the C entry point
    x, w, b = rand(2, 7), rand(5, 7), rand(5)

    def linear_params(a):
        pw, pb = (
            g.ParamOp("fc.weight", g.tensor_type((5, 7))),
            g.ParamOp("fc.bias", g.tensor_type((5,))),
        )
        return [pw, pb, g.LinearOp.make(a, pw, pb)]

    cases.append(Case("linear_params", [x], linear_params, 1e-4, {"fc.weight": w, "fc.bias": b}))
    return cases


CONV = [
    ((1, 3, 6, 6), (4, 3, 3, 3), {}),
    ((2, 3, 7, 5), (4, 3, 3, 3), {"pads": (1, 1, 1, 1), "strides": (2, 2)}),
    ((1, 2, 6, 7), (3, 2, 2, 3), {"pads": (0, 1, 2, 1), "dilations": (2, 1)}),
    ((1, 4, 5, 5), (6, 2, 3, 3), {"pads": (1, 1), "groups": 2}),
    ((1, 4, 5, 5), (4, 1, 3, 3), {"pads": (1, 1, 1, 1), "groups": 4}),
]
POOL = [
    ((1, 2, 6, 6), {"kernel": (2, 2), "strides": (2, 2)}),
    ((2, 3, 7, 5), {"kernel": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}),
    ((1, 2, 7, 7), {"kernel": (2, 2), "strides": (2, 2), "ceil_mode": True}),
    ((1, 1, 8, 6), {"kernel": (3, 2), "strides": (2, 1), "pads": (1, 0, 1, 1), "ceil_mode": True}),
]


def conv_cases() -> list[Case]:
    cases = []
    for sx, sw, attrs in CONV:
        for bias in (False, True):
            arrays = [rand(*sx), rand(*sw)] + ([rand(sw[0])] if bias else [])
            cases.append(
                Case(
                    f"conv2d{sx}{sw}{attrs}{bias}",
                    arrays,
                    lambda *v, k=attrs: g.Conv2DOp.make(*v, **k),
                    tol=1e-4,
                )
            )
    for sx, attrs in POOL:
        cases.append(
            Case(f"max_pool{sx}{attrs}", [rand(*sx)], lambda a, k=attrs: g.MaxPool2DOp.make(a, **k))
        )
        for include in (False, True):
            cases.append(
                Case(
                    f"avg_pool{sx}{attrs}{include}",
                    [rand(*sx)],
                    lambda a, k=attrs, i=include: g.AvgPool2DOp.make(a, count_include_pad=i, **k),
                )
            )
    cases.append(Case("global_avg_pool", [rand(2, 3, 5, 4)], lambda a: g.GlobalAvgPoolOp.make(a)))
    # graph-winograd's three ops, each alone (test_winograd.py checks them composed)
    cases.append(
        Case("winograd_filter", [rand(5, 3, 3, 3)], lambda w: g.WinogradFilterTransformOp.make(w))
    )
    for sx, pads in (((2, 3, 6, 8), (1, 1, 1, 1)), ((1, 2, 7, 5), (0, 1, 2, 0))):
        cases.append(
            Case(
                f"winograd_input{sx}{pads}",
                [rand(*sx)],
                lambda x, p=pads: g.WinogradInputTransformOp.make(x, pads=p),
            )
        )
    for out, bias in (((6, 8), True), ((5, 7), False)):
        tiles = ((out[0] + 1) // 2, (out[1] + 1) // 2)
        arrays = [rand(16, 2, 3, *tiles)] + ([rand(3)] if bias else [])
        cases.append(
            Case(
                f"winograd_output{out}{bias}",
                arrays,
                lambda *v, o=out: g.WinogradOutputTransformOp.make(*v, output=o),
                tol=1e-4,
            )
        )
    return cases


def norm_cases() -> list[Case]:
    cases = []
    arrays = [rand(2, 3, 4, 5), rand(3), rand(3), rand(3), rand(3, positive=True)]
    cases.append(Case("batch_norm", arrays, lambda *v: g.BatchNormOp.make(*v, epsilon=1e-3)))
    for sx, axis, ss, bias in [
        ((4, 6), -1, (6,), True),
        ((2, 3, 5), 1, (3, 5), True),
        ((2, 3, 5), 1, (5,), False),
    ]:
        arrays = [rand(*sx), rand(*ss)] + ([rand(*ss)] if bias else [])
        cases.append(
            Case(
                f"layer_norm{sx}{axis}{bias}",
                arrays,
                lambda *v, a=axis: g.LayerNormOp.make(*v, axis=a),
                tol=1e-4,
            )
        )
    for cls in (g.SoftmaxOp, g.LogSoftmaxOp):
        for sx, axis in [((4, 7), -1), ((3, 4, 5), 0), ((3, 4, 5), 1)]:
            x = rand(*sx) * np.float32(4)
            cases.append(
                Case(f"{cls.name}{sx}{axis}", [x], lambda a, c=cls, k=axis: c.make(a, axis=k))
            )
    # dropout: training (a step counter) and inference (the identity)
    step = np.array(3.0, np.float32)
    cases.append(
        Case("dropout", [rand(3, 4, 5), step], lambda x, s: g.DropoutOp.make(x, s, p=0.3, seed=9))
    )
    cases.append(Case("dropout_inference", [rand(6)], lambda x: g.DropoutOp.make(x, p=0.3)))
    return cases


def reduce_cases() -> list[Case]:
    cases = []
    for cls in (g.ReduceSumOp, g.ReduceMeanOp, g.ReduceMaxOp, g.ReduceMinOp, g.ReduceProdOp):
        for axes in [(1,), (), (0, 2), (-1,)]:
            for keep in (False, True):
                x = rand(3, 4, 5) + np.float32(cls is g.ReduceProdOp)
                cases.append(
                    Case(
                        f"{cls.name}{axes}{keep}",
                        [x],
                        lambda a, c=cls, ax=axes, k=keep: c.make(a, axes=ax, keepdims=k),
                        tol=1e-4,
                    )
                )
    cases.append(Case("reduce_max_int", [ints(3, 4)], lambda a: g.ReduceMaxOp.make(a, axes=(1,))))
    # i1 orders false < true (signed i1 would put true = -1 first): max is any, min is all
    flags = np.array([[True, True], [True, False], [False, True], [False, False]])
    for cls in (g.ReduceMaxOp, g.ReduceMinOp):
        cases.append(
            Case(f"{cls.name}_bool", [flags], lambda a, c=cls: c.make(a, axes=(1,), keepdims=True))
        )
    return cases


def movement_cases() -> list[Case]:
    cases = []
    for sx, target in [
        ((2, 3, 4), (4, 6)),
        ((2, 3, 4), (24,)),
        ((6,), (1, 2, 1, 3)),
        ((1, 4, 1, 3), (3, -1)),
        ((3, 5), (5, 3)),
    ]:
        cases.append(
            Case(
                f"reshape{sx}{target}",
                [rand(*sx)],
                lambda a, t=target: g.ReshapeOp.make(a, shape=t),
            )
        )
    for perm in [(), (1, 0, 2), (2, 0, 1)]:
        cases.append(
            Case(
                f"transpose{perm}", [rand(2, 3, 4)], lambda a, p=perm: g.TransposeOp.make(a, perm=p)
            )
        )
    for axis, shapes in [
        (0, [(1, 3, 2), (2, 3, 2), (3, 3, 2)]),
        (1, [(2, 1, 2), (2, 4, 2), (2, 2, 2)]),
        (-1, [(2, 3, 1), (2, 3, 3), (2, 3, 2)]),
    ]:
        cases.append(
            Case(
                f"concat{axis}",
                [rand(*s) for s in shapes],
                lambda *v, a=axis: g.ConcatOp.make(*v, axis=a),
            )
        )
    for attrs in [
        {"starts": (1,), "ends": (4,), "axes": (1,)},
        {"starts": (0, 1), "ends": (3, 100), "steps": (2, 2)},
        {"starts": (-1,), "ends": (-100,), "axes": (1,), "steps": (-2,)},
        {"starts": (-2,), "ends": (6,)},
    ]:
        cases.append(Case(f"slice{attrs}", [rand(4, 7)], lambda a, k=attrs: g.SliceOp.make(a, **k)))
    for pads in [(0, 1, 2, 3), (1, 0, 0, 2), (-1, 1, 2, -2)]:
        cases.append(
            Case(f"pad{pads}", [rand(4, 5)], lambda a, p=pads: g.PadOp.make(a, pads=p, value=1.5))
        )
    for sx, target in [((4,), (3, 4)), ((3, 1), (2, 3, 5)), ((), (2, 2))]:
        cases.append(
            Case(
                f"broadcast{sx}{target}",
                [rand(*sx)],
                lambda a, t=target: g.BroadcastOp.make(a, shape=t),
            )
        )
    for axis, si in [(0, (3,)), (1, (2, 2)), (-1, (4,))]:
        data = rand(5, 6, 4)
        n = data.shape[axis]
        idx = RNG.integers(-n, n, si).astype(np.int64)
        cases.append(
            Case(
                f"gather{axis}{si}", [data, idx], lambda d, i, a=axis: g.GatherOp.make(d, i, axis=a)
            )
        )
    return cases


def constant_cases() -> list[Case]:
    w = rand(4)

    def build(a):
        c = g.ConstantOp.from_numpy(np.arange(4, dtype=np.float32))
        p = g.ParamOp("w", g.tensor_type((4,)))
        s = g.AddOp.make(a, p)
        return [c, p, s, g.MulOp.make(s, c)]

    return [Case("param_and_constant", [rand(3, 4)], build, weights={"w": w})]


def _region(arg_types, body) -> Region:
    """A region whose block takes `arg_types`; `body(*args)` gives its ops, then the
    values to yield."""
    block = Block(arg_types=arg_types)
    ops, values = body(*block.args)
    block.add_ops([*ops, g.YieldOp.create(operands=values)])
    return Region(block)


def quant_cases() -> list[Case]:
    """The integer quantization ops: per tensor and per axis, ties and saturation included."""
    r = np.random.default_rng(11)
    x = (r.standard_normal((3, 4)) * 40).astype(np.float32)
    x[0, :3] = [0.5, 1.5, -2.5]  # halves round to even
    x[1, :2] = [1e6, -1e6]  # saturate
    scale, zp = np.asarray(0.5, np.float32), np.asarray(3, np.int8)
    scales = np.asarray([0.5, 0.25, 1.0, 2.0], np.float32)
    zps = np.asarray([0, 4, 7, 1], np.uint8)
    q = r.integers(-128, 128, (3, 4)).astype(np.int8)
    a, b = (
        r.integers(0, 256, (4, 8)).astype(np.uint8),
        r.integers(-128, 128, (8, 5)).astype(np.int8),
    )
    za, zb = np.asarray(128, np.uint8), np.asarray(-3, np.int8)
    xi = r.integers(0, 256, (1, 3, 6, 6)).astype(np.uint8)
    wi = r.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    return [
        Case("quantize", [x, scale, zp], lambda *v: g.QuantizeOp.make(*v)),
        Case("quantize_axis", [x, scales, zps], lambda *v: g.QuantizeOp.make(*v, axis=1)),
        Case("dequantize", [q, scale, zp], lambda *v: g.DequantizeOp.make(*v)),
        Case("matmul_integer", [a, b, za, zb], lambda *v: g.MatMulIntegerOp.make(*v)),
        Case(
            "conv_integer",
            [xi, wi, za, zb],
            lambda *v: g.ConvIntegerOp.make(*v, pads=(1, 1, 1, 1)),
        ),
    ]


def control_cases() -> list[Case]:
    """graph.if on each branch and a graph.loop of 3 iterations (host control flow)."""

    def unary(cls):
        def body(x):
            op = cls.make(x)
            return [op], [op.results[0]]

        return body

    def build_if(c, a):
        then, other = _region([a.type], unary(g.ReluOp)), _region([a.type], unary(g.NegOp))
        return g.IfOp(c, [a], [a.type], then, other)

    def build_loop(a):
        true = g.ConstantOp.from_numpy(np.array(True))

        def body(i, x):  # x + i, then go on
            go = g.ConstantOp.from_numpy(np.array(True))
            fi = g.CastOp.make(i, to=f32)
            y = g.AddOp.make(x, fi)
            return [go, fi, y], [go.results[0], y.results[0]]

        loop = g.LoopOp(true.results[0], [a], _region([g.tensor_type((), i64), a.type], body), 3)
        return [true, loop]

    return [
        Case("if_then", [np.array(True), rand(3, 4)], build_if),
        Case("if_else", [np.array(False), rand(3, 4)], build_if),
        Case("loop", [rand(3, 4)], build_loop),
    ]


def math_bit_cases() -> list[Case]:
    """The float math functions on their domains (rounding at exact halves: to even), the
    bit ops on signed and unsigned integers, bitcast both ways, and a slice at run-time
    offsets (one negative, counted from the end)."""
    cases = []
    wide, unit = rand(3, 5) * np.float32(2), np.tanh(rand(3, 5)) * np.float32(0.9)
    domains = {
        "sin": wide, "cos": wide, "tan": unit, "sinh": wide, "cosh": wide, "asinh": wide,
        "atan": wide, "asin": unit, "acos": unit, "atanh": unit,
        "acosh": np.abs(wide) + np.float32(1),
    }  # fmt: skip
    for name, x in domains.items():
        cls = getattr(g, f"{name.capitalize()}Op")
        cases.append(Case(name, [x], lambda a, c=cls: c.make(a)))
    halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 7.25], np.float32)
    for cls in (g.FloorOp, g.CeilOp, g.RoundOp):
        cases.append(Case(cls.name, [halves], lambda a, c=cls: c.make(a)))
    r = np.random.default_rng(3)
    for dt in (np.int32, np.uint8):
        info = np.iinfo(dt)
        a = r.integers(info.min, info.max, (3, 4), endpoint=True).astype(dt)
        b = r.integers(info.min, info.max, (4,), endpoint=True).astype(dt)
        for cls in (g.BitAndOp, g.BitOrOp, g.BitXorOp):
            cases.append(
                Case(f"{cls.name}_{dt.__name__}", [a, b], lambda x, y, c=cls: c.make(x, y))
            )
        cases.append(Case(f"bit_not_{dt.__name__}", [a], lambda x: g.BitNotOp.make(x)))
    v = r.integers(0, 2**32 - 1, (3, 4), endpoint=True).astype(np.uint32)
    amounts = np.array([0, 1, 17, 31], np.uint32)
    for cls in (g.ShiftLeftOp, g.ShiftRightOp):
        cases.append(Case(cls.name, [v, amounts], lambda x, y, c=cls: c.make(x, y)))
    cases.append(Case("bitcast_f32_i32", [rand(3, 4)], lambda a: g.BitcastOp.make(a, to=i32)))
    bits = r.integers(0, 2**20, (3, 4)).astype(np.int32)  # positive subnormals and small floats
    cases.append(Case("bitcast_i32_f32", [bits], lambda a: g.BitcastOp.make(a, to=f32)))
    starts = np.array([1, -2], np.int64)
    cases.append(
        Case(
            "dynamic_slice",
            [rand(5, 6), starts],
            lambda x, st: g.DynamicSliceOp.make(x, st, axes=(0, 1), sizes=(2, 3)),
        )
    )
    return cases


FAMILIES = {
    "unary": unary_cases, "math_bit": math_bit_cases, "binary": binary_cases, "linalg": linalg_cases, "conv": conv_cases,
    "norm": norm_cases, "reduce": reduce_cases, "movement": movement_cases,
    "constant": constant_cases, "control": control_cases, "quant": quant_cases,
}  # fmt: skip


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family(family):
    cases = FAMILIES[family]()
    check(family, batch_module(cases), cases)


@pytest.mark.parametrize("family", ["linalg", "conv", "norm", "reduce"])
def test_family_with_vectorized_reductions(family):
    """te-to-loop{vectorize_reductions}: the C simd reduction clauses reassociate sums."""
    cases = FAMILIES[family]()
    for c in cases:
        c.tol = max(c.tol, 1e-4)
    fn = check(f"{family}_vecred", batch_module(cases), cases, vectorize_reductions=True)
    assert "#pragma omp simd reduction(+:v_acc)" in fn.source


def test_f16_sums_accumulate_in_f32():
    """f16 matmul / linear / conv / softmax sum in f32 and round once, as numpy's f16
    matmul (the reference) does; f16 partial sums would drift by many f16 ulps at k=512."""
    rng = np.random.default_rng(7)
    h = lambda *s: rng.standard_normal(s).astype(np.float16)  # noqa: E731
    cases = [
        Case("matmul_f16", [h(4, 512), h(512, 8)], lambda x, y: g.MatMulOp.make(x, y)),
        Case("linear_f16", [h(3, 512), h(5, 512), h(5)], lambda *v: g.LinearOp.make(*v)),
        Case(
            "conv_f16",
            [h(1, 64, 4, 4), h(3, 64, 3, 3)],
            lambda x, w: g.Conv2DOp.make(x, w, pads=(1, 1, 1, 1)),
        ),
        # softmax's f16 exps are summed in f32 too (the reference's, along any axis)
        Case("softmax_f16", [h(3, 700)], lambda x: g.SoftmaxOp.make(x, axis=-1)),
        Case("log_softmax_f16_axis0", [h(700, 3)], lambda x: g.LogSoftmaxOp.make(x, axis=0)),
    ]
    module = batch_module(cases)
    inputs = [a for c in cases for a in c.arrays]
    expected = run_reference(module, inputs, {})
    lower_to_loop(module)
    got = CFunction(module, name="ops_f16_dot")(*inputs)
    for c, e, o in zip(cases, expected, got, strict=True):
        assert o.dtype == np.float16, c.id
        # f32 sums in another order round to f16 within an ulp of the reference's
        ulp = np.spacing(np.abs(e).astype(np.float16)).astype(np.float32)
        assert np.all(np.abs(o.astype(np.float32) - e.astype(np.float32)) <= ulp), c.id


FUSED = """
func.func @main(%x: tensor<1x3x8x8xf32>, %s: tensor<4x5xf32>, %t: tensor<5xf32>) -> (tensor<1x4x8x8xf32>, tensor<4x5xf32>) {
  %w = graph.param "conv.w" : tensor<4x3x3x3xf32>
  %b = graph.param "conv.b" : tensor<4x1x1xf32>
  %y = graph.fused "conv_bias_relu" %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32> {
  ^bb0(%a: tensor<1x3x8x8xf32>, %k: tensor<4x3x3x3xf32>, %c: tensor<4x1x1xf32>):
    %0 = graph.conv2d %a, %k {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
    %1 = graph.add %0, %c : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
    %2 = graph.relu %1 : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    graph.yield %2 : tensor<1x4x8x8xf32>
  }
  %z = graph.fused "exp_mul_tanh" %s, %t : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32> {
  ^bb0(%a: tensor<4x5xf32>, %c: tensor<5xf32>):
    %0 = graph.exp %a : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %1 = graph.mul %0, %c : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
    %2 = graph.tanh %1 : (tensor<4x5xf32>) -> tensor<4x5xf32>
    graph.yield %2 : tensor<4x5xf32>
  }
  func.return %y, %z : tensor<1x4x8x8xf32>, tensor<4x5xf32>
}
"""


def test_fused_ops_become_one_kernel_each():
    module = parse_module(FUSED)
    COVERED.update(op.name for op in module.walk())
    inputs = [rand(1, 3, 8, 8), rand(4, 5), rand(5)]
    weights = {"conv.w": rand(4, 3, 3, 3), "conv.b": rand(4, 1, 1)}
    expected = run_reference(module, inputs, weights)
    lower_to_loop(module)
    assert [k.sym for k in module.walk() if isinstance(k, KernelOp)] == [
        "conv_bias_relu",
        "exp_mul_tanh",
    ]
    got = CFunction(module, name="ops_fused")(*inputs, params=weights)
    for e, o in zip(expected, got, strict=True):
        np.testing.assert_allclose(o, e, rtol=1e-4, atol=1e-4)


def test_every_graph_op_is_covered():
    """The cases above build every graph op at least once."""
    for family in FAMILIES.values():
        for c in family():
            ops = c.build(*[_placeholder(a) for a in c.arrays])
            COVERED.update(op.name for op in (ops if isinstance(ops, list) else [ops]))
    COVERED.update(op.name for op in parse_module(FUSED).walk())
    missing = {op.name for op in g.Graph.operations} - COVERED - {"graph.yield"}
    assert not missing, f"graph ops without a C test: {sorted(missing)}"


def _placeholder(array: np.ndarray):
    block = Block(arg_types=[g.tensor_type(array.shape, g.NUMPY_TO_ELT[array.dtype.name])])
    return block.args[0]


RETURNS = """
func.func @main(%x: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %w = graph.param "w" : tensor<4xf32>
  %c = graph.constant dense<[1.5, -2.0]> : tensor<2xf32>
  %y = graph.add %x, %w : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  func.return %x, %w, %c, %y, %y : tensor<3x4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}
"""


def test_returned_inputs_params_constants_and_duplicates_are_copied():
    module = parse_module(RETURNS)
    x, w = rand(3, 4), rand(4)
    expected = run_reference(module, [x], {"w": w})
    lower_to_loop(module)
    kernels = [k.sym for k in module.walk() if isinstance(k, KernelOp)]
    assert kernels == ["add_0", "copy_out0", "copy_out1", "copy_out2", "copy_out4"]
    got = CFunction(module, name="returns")(x, params={"w": w})
    for e, o in zip(expected, got, strict=True):
        np.testing.assert_array_equal(o, e)


@pytest.mark.parametrize("exponent", ["1.0", "2.0", "3.0", "4.0", "-1.0", "2.5"])
def test_pow_by_constant_matches_numpy_with_special_values(tmp_path, exponent):
    """pow by a constant 1..4 is lowered to products (graph-to-te): the same values as
    numpy's power, special values included, on C and DLP."""
    import dlpc

    src = tmp_path / "p.dlpc"
    src.write_text(f"model t(x: f32[3, 33]) {{\n  return pow(x, {exponent})\n}}\n")
    model = dlpc.load(src)
    x = np.random.default_rng(0).standard_normal((3, 33)).astype(np.float32) * 3
    x[0, :6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30]
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), float(exponent)).astype(np.float32)
    for target in ("c", "dlp"):
        (y,) = dlpc.compile(model, target=target)(x)
        np.testing.assert_allclose(y, want, rtol=2e-6, atol=0, equal_nan=True, err_msg=target)
        np.testing.assert_array_equal(np.signbit(y[0, 3:5]), np.signbit(want[0, 3:5]))
