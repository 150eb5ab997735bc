"""The numpy reference: every graph op against hand-written numpy (or plain loops),
and emit_numpy's generated module against run_reference, bit for bit."""

import math

import numpy as np
import pytest
from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr, TensorType, f32, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

from dlpc.backends.numpy import emit_numpy
from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph as g
from dlpc.reference import graph as ref

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def tensor(a):
    return TensorType(g.NUMPY_TO_ELT[a.dtype.name], list(a.shape))


def module_of(build, arrays):
    """@main(arrays...) returning build(*block_args) (an op or list of ops, last is result)."""
    types = [tensor(a) for a in arrays]
    block = Block(arg_types=types)
    ops = build(*block.args)
    ops = ops if isinstance(ops, list) else [ops]
    block.add_ops([*ops, ReturnOp(ops[-1].results[0])])
    ftype = FunctionType.from_lists(types, [ops[-1].results[0].type])
    module = ModuleOp([FuncOp("main", ftype, Region(block))])
    module.verify()
    return module


def run_op(cls, arrays, **attrs):
    """Evaluate one op through run_reference and through the emitted module; both agree."""
    module = module_of(lambda *args: cls.make(*args, **attrs), arrays)
    (out,) = ref.run_reference(module, arrays, {})
    namespace = {}
    exec(emit_numpy(module), namespace)
    (emitted,) = namespace["main"](*arrays, params={})
    assert emitted.dtype == out.dtype and emitted.shape == out.shape
    np.testing.assert_array_equal(emitted, out)
    assert out.shape == g.shape_of(module.ops.first.body.block.first_op.results[0])
    return out


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ elementwise

UNARY = [
    (g.NegOp, {}, lambda x: -x),
    (g.AbsOp, {}, np.abs),
    (g.ExpOp, {}, np.exp),
    (g.LogOp, {}, lambda x: np.log(np.abs(x))),
    (g.SqrtOp, {}, lambda x: np.sqrt(np.abs(x))),
    (g.RsqrtOp, {}, lambda x: 1 / np.sqrt(np.abs(x))),
    (g.TanhOp, {}, np.tanh),
    (g.SigmoidOp, {}, lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    (g.ErfOp, {}, np.vectorize(math.erf)),
    (g.ReluOp, {}, lambda x: np.where(x > 0, x, 0)),
    (g.GeluOp, {}, np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))),
    (
        g.GeluOp,
        {"approximate": "tanh"},
        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    ),
    (g.LeakyReluOp, {"alpha": 0.2}, lambda x: np.where(x > 0, x, 0.2 * x)),
    (g.ClipOp, {"min": -0.5, "max": 0.25}, lambda x: np.clip(x, -0.5, 0.25)),
    (g.ClipOp, {"max": 0.0}, lambda x: np.minimum(x, 0)),
]


@pytest.mark.parametrize("cls, attrs, expect", UNARY, ids=lambda v: getattr(v, "name", ""))
def test_unary(cls, attrs, expect):
    x = rand(3, 5)
    if cls in (g.LogOp, g.SqrtOp, g.RsqrtOp):
        x = np.abs(x) + np.float32(0.1)
    out = run_op(cls, [x], **attrs)
    assert out.dtype == np.float32
    close(out, expect(x))


def test_sigmoid_extremes_do_not_overflow():
    x = np.array([-100, -20, 0, 20, 100], dtype=np.float32)
    close(run_op(g.SigmoidOp, [x]), [0, 2.0611537e-09, 0.5, 1, 1], atol=1e-12)


def test_erf_is_float64_accurate():
    x = np.linspace(-4, 4, 101).astype(np.float32)
    expect = np.array([math.erf(v) for v in x.astype(np.float64)]).astype(np.float32)
    np.testing.assert_array_equal(run_op(g.ErfOp, [x]), expect)


def test_cast_truncates_and_converts():
    x = np.array([-1.7, -0.2, 0.0, 2.9], dtype=np.float32)
    out = run_op(g.CastOp, [x], to=i64)
    assert out.dtype == np.int64 and out.tolist() == [-1, 0, 0, 2]


BINARY = [
    (g.AddOp, np.add),
    (g.SubOp, np.subtract),
    (g.MulOp, np.multiply),
    (g.DivOp, np.divide),
    (g.MaxOp, np.maximum),
    (g.MinOp, np.minimum),
]


@pytest.mark.parametrize("cls, expect", BINARY, ids=lambda v: getattr(v, "name", ""))
def test_binary_broadcasts(cls, expect):
    a, b = rand(2, 3, 4), rand(3, 1)
    out = run_op(cls, [a, b])
    assert out.shape == (2, 3, 4)
    close(out, expect(a, b))


def test_pow():
    a, b = np.abs(rand(4)) + 0.5, np.array([0.0, 1.0, 2.0, 0.5], dtype=np.float32)
    close(run_op(g.PowOp, [a, b]), [1, a[1], a[2] ** 2, np.sqrt(a[3])])


def test_integer_division_truncates_toward_zero():
    a = np.array([7, -7, 7, -7], dtype=np.int64)
    b = np.array([2, 2, -2, -2], dtype=np.int64)
    assert run_op(g.DivOp, [a, b]).tolist() == [3, -3, -3, 3]


def test_prelu_where_compare():
    x, slope = rand(1, 3, 2, 2), rand(3, 1, 1)
    close(run_op(g.PReluOp, [x, slope]), np.where(x > 0, x, slope * x))
    c = np.array([True, False, True])
    a, b = rand(3), rand(2, 3)
    close(run_op(g.WhereOp, [c, a, b]), np.where(c, a, b))
    a, b = rand(4), rand(4)
    b[1] = a[1]
    for pred, fn in [
        ("eq", np.equal),
        ("ne", np.not_equal),
        ("lt", np.less),
        ("le", np.less_equal),
        ("gt", np.greater),
        ("ge", np.greater_equal),
    ]:
        out = run_op(g.CompareOp, [a, b], predicate=pred)
        assert out.dtype == np.bool_ and out.tolist() == fn(a, b).tolist()


# -------------------------------------------------------------- linear algebra


@pytest.mark.parametrize(
    "sa, sb, ta, tb",
    [
        ((4, 8), (8, 5), False, False),
        ((2, 4, 8), (8, 5), False, False),
        ((8, 4), (5, 8), True, True),
        ((3, 1, 4, 8), (2, 8, 5), False, False),
        ((8,), (8, 5), False, False),
        ((4, 8), (8,), False, False),
    ],
)
def test_matmul(sa, sb, ta, tb):
    a, b = rand(*sa), rand(*sb)
    expect = np.matmul(a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b)
    close(run_op(g.MatMulOp, [a, b], transpose_a=ta, transpose_b=tb), expect)


def test_linear():
    x, w, b = rand(2, 3, 6), rand(4, 6), rand(4)
    close(run_op(g.LinearOp, [x, w, b]), np.einsum("bsi,oi->bso", x, w) + b)
    close(run_op(g.LinearOp, [x, w]), x @ w.T)


def naive_conv(x, w, b, strides, pads, dilations, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]))
    xp[:, :, pads[0] : pads[0] + h, pads[1] : pads[1] + wd] = x
    oh = (xp.shape[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (xp.shape[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for ni, oi, yi, xi in np.ndindex(n, o, oh, ow):
        grp = oi // og
        acc = 0.0 if b is None else float(b[oi])
        for ci, ki, kj in np.ndindex(cg, kh, kw):
            acc += (
                w[oi, ci, ki, kj]
                * xp[
                    ni,
                    grp * cg + ci,
                    yi * strides[0] + ki * dilations[0],
                    xi * strides[1] + kj * dilations[1],
                ]
            )
        y[ni, oi, yi, xi] = acc
    return y


@pytest.mark.parametrize(
    "strides, pads, dilations, groups, bias",
    [
        ((1, 1), (0, 0, 0, 0), (1, 1), 1, True),
        ((2, 1), (1, 0, 2, 1), (1, 1), 1, False),
        ((1, 1), (1, 1, 1, 1), (2, 2), 1, True),
        ((1, 2), (1, 1, 1, 1), (1, 1), 2, True),
        ((1, 1), (1, 1, 1, 1), (1, 1), 4, False),
    ],
)
def test_conv2d(strides, pads, dilations, groups, bias):
    x = rand(2, 4, 7, 6)
    w = rand(8, 4 // groups, 3, 2)
    b = rand(8) if bias else None
    arrays = [x, w] + ([b] if bias else [])
    out = run_op(g.Conv2DOp, arrays, strides=strides, pads=pads, dilations=dilations, groups=groups)
    close(out, naive_conv(x, w, b, strides, pads, dilations, groups), rtol=1e-4, atol=1e-5)


def naive_pool(x, kind, kernel, strides, pads, out_hw, count_include_pad=False):
    n, c, h, w = x.shape
    y = np.zeros((n, c) + tuple(out_hw))
    for ni, ci, oi, oj in np.ndindex(n, c, *out_hw):
        h0, w0 = oi * strides[0] - pads[0], oj * strides[1] - pads[1]
        h1, w1 = min(h0 + kernel[0], h + pads[2]), min(w0 + kernel[1], w + pads[3])
        pool_size = (h1 - h0) * (w1 - w0)  # PyTorch: window clipped to input + pads
        hs, ws, he, we = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
        window = x[ni, ci, hs:he, ws:we]
        if kind == "max":
            y[ni, ci, oi, oj] = window.max()
        else:
            div = pool_size if count_include_pad else window.size
            y[ni, ci, oi, oj] = window.sum() / div
    return y


@pytest.mark.parametrize(
    "kernel, strides, pads, ceil_mode",
    [
        ((2, 2), (2, 2), (0, 0, 0, 0), False),
        ((3, 3), (2, 2), (1, 1, 1, 1), False),
        ((3, 2), (2, 2), (0, 0, 0, 0), True),
        ((3, 3), (2, 3), (1, 0, 1, 1), True),
    ],
)
@pytest.mark.parametrize("kind", ["max", "avg", "avg_include_pad"])
def test_pool(kind, kernel, strides, pads, ceil_mode):
    x = rand(1, 2, 7, 8)
    cls = g.MaxPool2DOp if kind == "max" else g.AvgPool2DOp
    attrs = dict(kernel=kernel, strides=strides, pads=pads, ceil_mode=ceil_mode)
    if kind != "max":
        attrs["count_include_pad"] = kind == "avg_include_pad"
    out = run_op(cls, [x], **attrs)
    expect = naive_pool(
        x, kind[:3], kernel, strides, pads, out.shape[2:], kind == "avg_include_pad"
    )
    close(out, expect)


def test_ceil_mode_adds_a_partial_window():
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    out = run_op(g.MaxPool2DOp, [x], kernel=(2, 2), strides=(2, 2), ceil_mode=True)
    assert out[0, 0].tolist() == [[6, 8, 9], [16, 18, 19], [21, 23, 24]]
    avg = run_op(g.AvgPool2DOp, [x], kernel=(2, 2), strides=(2, 2), ceil_mode=True)
    assert avg[0, 0, 2].tolist() == [20.5, 22.5, 24.0]


def test_global_avg_pool():
    x = rand(2, 3, 4, 5)
    close(run_op(g.GlobalAvgPoolOp, [x]), x.mean(axis=(2, 3), keepdims=True))


# --------------------------------------------------------------- normalisation


def test_batch_norm():
    x = rand(2, 3, 4, 4)
    scale, bias, mean = rand(3), rand(3), rand(3)
    var = np.abs(rand(3)) + 0.5
    out = run_op(g.BatchNormOp, [x, scale, bias, mean, var], epsilon=1e-3)
    c = lambda v: v.reshape(1, 3, 1, 1)  # noqa: E731
    close(out, (x - c(mean)) / np.sqrt(c(var) + 1e-3) * c(scale) + c(bias))


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm(axis):
    x = rand(2, 3, 8)
    norm = x.shape[axis:] if axis != -1 else x.shape[-1:]
    scale, bias = rand(*norm), rand(*norm)
    axes = tuple(range(axis % 3, 3))
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    expect = (x - mean) / np.sqrt(var + 1e-5) * scale
    close(run_op(g.LayerNormOp, [x, scale, bias], axis=axis), expect + bias)
    close(run_op(g.LayerNormOp, [x, scale], axis=axis), expect)


def test_softmax_and_log_softmax():
    x = rand(3, 5) * 30
    e = np.exp(x.astype(np.float64) - x.max(axis=0))
    close(run_op(g.SoftmaxOp, [x], axis=0), e / e.sum(axis=0))
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    close(run_op(g.LogSoftmaxOp, [x]), np.log(e / e.sum(axis=-1, keepdims=True)), atol=1e-5)


@pytest.mark.parametrize("axis", [0, 1])
def test_f16_softmax_sums_in_f32_along_any_axis(axis):
    """The f16 exps are rounded to f16, summed in f32 and the sum rounded once: numpy's own
    f16 sum does so along a contiguous axis only (elsewhere it rounds every partial sum)."""
    x = np.random.default_rng(3).standard_normal((600, 600)).astype(np.float16)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    total = e.astype(np.float32).sum(axis=axis, keepdims=True).astype(np.float16)
    got = run_op(g.SoftmaxOp, [x], axis=axis)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, e / total)
    np.testing.assert_array_equal(
        run_op(g.LogSoftmaxOp, [x], axis=axis),
        (x - x.max(axis=axis, keepdims=True)) - np.log(total),
    )


# ------------------------------------------------------------------ reductions


@pytest.mark.parametrize(
    "cls, fn",
    [
        (g.ReduceSumOp, np.sum),
        (g.ReduceMeanOp, np.mean),
        (g.ReduceMaxOp, np.max),
        (g.ReduceMinOp, np.min),
        (g.ReduceProdOp, np.prod),
    ],
)
def test_reductions(cls, fn):
    x = rand(2, 3, 4)
    close(run_op(cls, [x], axes=(0, -1)), fn(x, axis=(0, 2)))
    close(run_op(cls, [x], axes=(1,), keepdims=True), fn(x, axis=1, keepdims=True))
    close(run_op(cls, [x]), fn(x))


# --------------------------------------------------------------- data movement


def test_reshape_transpose_concat_broadcast():
    x = rand(2, 3, 4)
    np.testing.assert_array_equal(run_op(g.ReshapeOp, [x], shape=(0, -1)), x.reshape(2, 12))
    np.testing.assert_array_equal(run_op(g.TransposeOp, [x], perm=(2, 0, 1)), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(run_op(g.TransposeOp, [x]), x.T)
    y = rand(2, 5, 4)
    np.testing.assert_array_equal(
        run_op(g.ConcatOp, [x, y, x], axis=-2), np.concatenate([x, y, x], axis=1)
    )
    np.testing.assert_array_equal(
        run_op(g.BroadcastOp, [rand(3, 1)], shape=(2, 3, 4)).shape, (2, 3, 4)
    )


@pytest.mark.parametrize(
    "attrs, index",
    [
        (dict(starts=(1,), ends=(3,), axes=(1,)), np.s_[:, 1:3]),
        (dict(starts=(0, -3), ends=(2, 100)), np.s_[0:2, -3:]),
        (dict(starts=(-1,), ends=(-100,), axes=(1,), steps=(-1,)), np.s_[:, ::-1]),
        (dict(starts=(4, 0), ends=(0, 6), axes=(1, 0), steps=(-2, 3)), np.s_[0:6:3, 4:0:-2]),
    ],
)
def test_slice(attrs, index):
    x = rand(6, 5)
    np.testing.assert_array_equal(run_op(g.SliceOp, [x], **attrs), x[index])


def test_pad_positive_and_negative():
    x = rand(2, 3)
    out = run_op(g.PadOp, [x], pads=(1, 0, 0, 2), value=7.0)
    np.testing.assert_array_equal(out, np.pad(x, ((1, 0), (0, 2)), constant_values=7))
    out = run_op(g.PadOp, [x], pads=(0, -1, 1, 1))
    np.testing.assert_array_equal(out, np.pad(x[:, 1:], ((0, 1), (0, 1))))


def test_gather_with_negative_indices():
    data = rand(5, 3)
    idx = np.array([[0, -1], [2, 4]], dtype=np.int64)
    np.testing.assert_array_equal(run_op(g.GatherOp, [data, idx], axis=0), data[idx])
    np.testing.assert_array_equal(run_op(g.GatherOp, [data, idx[0]], axis=1), data[:, [0, 2]])


# ------------------------------------------------- constants, params, fused, errors


def test_every_graph_op_has_a_reference():
    names = {op.name for op in g.GRAPH_OPS} - {"graph.yield"}
    assert names <= set(ref.REFERENCE)


def test_constant_param_and_emitted_names_are_sanitised():
    x = rand(2, 3)
    weights = {"layer-1.w": rand(2, 3), "def": rand(3)}

    def build(a):
        p = g.ParamOp("layer-1.w", tensor(weights["layer-1.w"]))
        q = g.ParamOp("def", tensor(weights["def"]))
        c = g.ConstantOp.from_numpy(np.array([1.5, -np.inf, 2.0], dtype=np.float32))
        s = g.AddOp.make(a, p)
        t = g.MulOp.make(s, q)
        return [p, q, c, s, t, g.MaxOp.make(t, c)]

    module = module_of(build, [x])
    func = module.ops.first
    func.args[0].name_hint = "in.put"
    func.arg_attrs = None
    (out,) = ref.run_reference(module, [x], weights)
    close(out, np.maximum((x + weights["layer-1.w"]) * weights["def"], [1.5, -np.inf, 2.0]))
    source = emit_numpy(module)
    assert "'layer-1.w'" in source and "in_put" in source and "-np.inf" in source
    namespace = {}
    exec(source, namespace)
    assert namespace["PARAMS"] == ("layer-1.w", "def")
    np.testing.assert_array_equal(namespace["main"](x, params=weights)[0], out)


def test_fused_region_is_evaluated():
    x, w, b = rand(1, 2, 5, 5), rand(3, 2, 3, 3), rand(3, 1, 1)
    types = [tensor(a) for a in (x, w, b)]
    outer = Block(arg_types=types)
    body = Block(arg_types=types)
    conv = g.Conv2DOp.make(body.args[0], body.args[1])
    add = g.AddOp.make(conv, body.args[2])
    relu = g.ReluOp.make(add)
    body.add_ops([conv, add, relu, g.YieldOp.create(operands=[relu.results[0]])])
    fused = g.FusedOp("conv bias+relu", list(outer.args), relu.results[0].type, Region(body))
    outer.add_ops([fused, ReturnOp(fused.results[0])])
    module = ModuleOp(
        [FuncOp("main", FunctionType.from_lists(types, [fused.output.type]), Region(outer))]
    )
    module.verify()
    (out,) = ref.run_reference(module, [x, w, b], {})
    expect = np.maximum(naive_conv(x, w, None, (1, 1), (0,) * 4, (1, 1), 1) + b, 0)
    close(out, expect, rtol=1e-4, atol=1e-5)
    source = emit_numpy(module)
    assert "def fused_conv_bias_relu(" in source
    namespace = {}
    exec(source, namespace)
    np.testing.assert_array_equal(namespace["main"](x, w, b, params={})[0], out)


def test_errors_name_the_culprit():
    x = rand(2, 3)

    def build(a):
        p = g.ParamOp("fc.w", TensorType(f32, [2, 3]))
        p.attributes["name"] = StringAttr("fc.w")
        return [p, g.AddOp.make(a, p)]

    module = module_of(build, [x])
    with pytest.raises(DlpcError, match="no value for weight 'fc.w'"):
        ref.run_reference(module, [x], {})
    with pytest.raises(
        DlpcError, match=r"weight 'fc\.w' has shape 3x2 but graph.param declares 2x3"
    ):
        ref.run_reference(module, [x], {"fc.w": rand(3, 2)})
    with pytest.raises(DlpcError, match="input 'arg0' has shape 3x2 but the model expects 2x3"):
        ref.run_reference(module, [rand(3, 2)], {"fc.w": x})
    with pytest.raises(DlpcError, match="input 'arg0' has dtype float64"):
        ref.run_reference(module, [x.astype(np.float64)], {"fc.w": x})
    with pytest.raises(DlpcError, match="takes 1 inputs"):
        ref.run_reference(module, [], {"fc.w": x})


@pytest.mark.parametrize(
    "cls, attrs, extra",
    [
        (g.Conv2DOp, dict(strides=(2, 1), pads=(1, 0, 2, 1), groups=2), [(6, 2, 3, 3), (6,)]),
        (g.MaxPool2DOp, dict(kernel=(3, 3), strides=(2, 2), ceil_mode=True), []),
        (g.AvgPool2DOp, dict(kernel=(2, 3), pads=(1, 1, 0, 1), count_include_pad=True), []),
        (g.GlobalAvgPoolOp, {}, []),
        (g.BatchNormOp, dict(epsilon=1e-3), [(4,)] * 4),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_nhwc_layout_is_the_nchw_op_on_transposed_activations(cls, attrs, extra):
    from dlpc.passes.graph.layout import with_layout

    x = rand(2, 4, 7, 6)
    operands = [x] + [np.abs(rand(*s)) + 0.5 for s in extra]
    (expect,) = [run_op(cls, operands, **attrs)]
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))

    def build(a, *rest):
        nchw_args = Block(arg_types=[tensor(v) for v in operands]).args
        probe = cls.make(*nchw_args, **attrs)
        op = with_layout(probe, "nhwc", [a, *rest])
        probe.drop_all_references()
        return op

    module = module_of(build, [x_nhwc, *operands[1:]])
    (out,) = ref.run_reference(module, [x_nhwc, *operands[1:]], {})
    close(out, expect.transpose(0, 2, 3, 1), rtol=1e-6, atol=1e-7)  # summation order differs
    namespace = {}
    source = emit_numpy(module)
    assert "layout='nhwc'" in source
    exec(source, namespace)
    np.testing.assert_array_equal(namespace["main"](x_nhwc, *operands[1:], params={})[0], out)
