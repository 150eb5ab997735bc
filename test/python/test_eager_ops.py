"""Every graph op, called eagerly, on every device.

- Every name of the builder's op table (`OPS` and `SUGAR`, what `dlpc.ops` exposes) has a
  forward case here or a reasoned exclusion, and every op with a float result a gradient
  case or a reasoned exclusion: a new op without an eager case fails
  `test_every_op_has_eager_cases`.
- Forward: each case (float, integer and bool operands where the op takes them, numbers
  as operands, optional operands left out) equals the numpy reference, dtype and shape
  exactly, on `cpu`, the first OpenCL device and `dlp:0` (the DLP simulator). What the
  dlp target cannot compile is refused in one line naming the op and the device.
- Gradients: each differentiable op's eager gradient (float64) equals torch's,
  graph-autodiff's (the whole-graph pass, run by the numpy reference) and a central
  finite difference of the numpy reference, on cpu; a representative subset also on
  the OpenCL device. At ties and kinks (max pooling over equal values, relu at 0, ...)
  they equal torch's.

Shapes are small and each case compiles one kernel per device (two with its gradient).
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.eager import dispatch
from dlpc.frontends.builder import OPS, SUGAR, GraphBuilder
from dlpc.model import Model
from dlpc.passes.train import _grad
from dlpc.runtime.device import devices

OPENCL = [d.name for d in devices("opencl")][:1]
DEVICES = ["cpu", *OPENCL, "dlp:0"]

rng = np.random.default_rng(30)


def _r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _pos(*shape, dtype=np.float32):
    return (np.abs(rng.standard_normal(shape)) + 0.5).astype(dtype)


def _i(*shape, lo=-5, hi=6, dtype=np.int32):
    return rng.integers(lo, hi, shape).astype(dtype)


def _u(*shape, hi=256, dtype=np.uint8):
    return rng.integers(0, hi, shape).astype(dtype)


def _b(*shape):
    return rng.random(shape) > 0.5


@dataclass(eq=False)
class Case:
    """`name` on `operands` (arrays become tensors; numbers and None are passed as they
    are) with attributes `attrs`."""

    name: str
    operands: list
    attrs: dict[str, Any] = field(default_factory=dict)
    tag: str = ""

    @property
    def id(self) -> str:
        kinds = "-".join(a.dtype.name for a in self.operands if isinstance(a, np.ndarray))
        return f"{self.name}-{self.tag or kinds}"


C = Case
CASES = [
    # elementwise, one operand
    C("abs", [_r(3, 4)]),
    C("abs", [_i(5)]),
    C("neg", [_r(5)]),
    C("neg", [_i(5, dtype=np.int64)]),
    C("exp", [_r(5)]),
    C("log", [_pos(5)]),
    C("sqrt", [_pos(5)]),
    C("rsqrt", [_pos(5)]),
    C("erf", [_r(6)]),
    C("tanh", [_r(6)]),
    C("sigmoid", [_r(6)]),
    C("relu", [_r(3, 4)]),
    C("relu", [_i(6)]),
    C("gelu", [_r(6)]),
    C("gelu", [_r(6)], {"approximate": "tanh"}, "tanh"),
    C("leaky_relu", [_r(6)], {"alpha": 0.2}),
    C("clip", [_r(6)], {"min": -0.5, "max": 0.5}),
    C("clip", [_i(6)], {"min": -2, "max": 3}),
    C("relu6", [_r(6) * 5]),
    *(C(f, [_r(6) * 0.5]) for f in "sin cos tan asin acos atan sinh cosh asinh atanh".split()),
    C("acosh", [_pos(6) + 1.0]),
    *(
        C(f, [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.3, -0.7], np.float32) * 1.0])
        for f in ("floor", "ceil", "round")
    ),  # fmt: skip
    C("cast", [_r(6) * 4], {"to": "i32"}, "f32-i32"),
    C("cast", [_i(6, dtype=np.int64)], {"to": "f32"}),
    C("cast", [_b(6)], {"to": "f32"}),
    C("cast", [_r(5)], {"to": "f64"}, "f32-f64"),
    C("cast", [_i(5)], {"to": "i64"}),
    C("dropout", [_r(4, 8)], {"p": 0.5, "seed": 3}, "inference"),
    C("dropout", [_r(4, 8), np.array(7.0, np.float32)], {"p": 0.5, "seed": 3}, "step"),
    # elementwise, two or three operands (numpy broadcasting)
    C("add", [_r(2, 3), _r(3)]),
    C("add", [_i(2, 3, dtype=np.int64), _i(3, dtype=np.int64)]),
    C("add", [_r(2, 3), 2.5], tag="number"),
    C("add", [np.array([1, -2, 3], np.int8), np.array([4, 5, -6], np.int8)]),
    C("add", [_r(2, 3).astype(np.float16), _r(3).astype(np.float16)]),
    C("add", [_r(), _r(3)], tag="rank0"),
    C("add", [_r(0, 3), _r(3)], tag="empty"),
    C("sub", [_r(3, 4), _r(4)]),
    C("sub", [_i(3), _i(3)]),
    C("sub", [1.0, _r(3)], tag="number-first"),
    C("mul", [_r(4, 1), _r(1, 5)]),
    C("mul", [_i(4, dtype=np.int64), _i(4, dtype=np.int64)]),
    C("div", [_r(3, 4), _pos(3, 4)]),
    C("div", [_i(6), np.array([2, -3, 4, -1, 5, 3], np.int32)]),  # truncating, as in C
    C("max", [_r(3, 4), _r(4)]),
    C("max", [_i(4), _i(4)]),
    C("max", [_b(4), _b(4)]),
    C("min", [_r(3, 4), _r(3, 1)]),
    C("min", [_i(4, dtype=np.int64), _i(4, dtype=np.int64)]),
    C("pow", [_pos(3, 4), _r(4)]),
    C("pow", [_pos(3), 2.0], tag="number"),
    C("prelu", [_r(2, 3, 2), _r(3, 1)]),
    C("where", [_b(3, 4), _r(3, 4), _r(4)]),
    C("where", [_b(4), _i(4, dtype=np.int64), _i(1, dtype=np.int64)]),
    *(C("compare", [_r(3, 4), _r(4)], {"predicate": p}, p) for p in "eq ne lt le gt ge".split()),
    C(
        "compare",
        [_i(6, lo=0, hi=3, dtype=np.int64), _i(6, lo=0, hi=3, dtype=np.int64)],
        {"predicate": "eq"},
        "i64",
    ),  # fmt: skip
    C("compare", [_b(6), _b(6)], {"predicate": "ne"}, "bool"),
    # integers of every width and signedness; bit operations (integers only)
    C("add", [_u(6), _u(6)]),  # (wraps)
    C("add", [_i(6, dtype=np.int16), _i(6, dtype=np.int16)]),
    C("div", [_u(6, dtype=np.uint32), _u(6, hi=9, dtype=np.uint32) + 1]),
    C("max", [_u(2, 3, dtype=np.uint16), _u(3, dtype=np.uint16)]),
    C("reduce_max", [_u(3, 4)], {"axes": [1]}),  # (C's size_of lacked the unsigned types)
    C("cast", [_u(6)], {"to": "f32"}),
    C("cast", [_r(6) * 50 + 60], {"to": "ui8"}, "f32-ui8"),
    C("compare", [_u(6, dtype=np.uint64), _u(6, dtype=np.uint64)], {"predicate": "lt"}, "u64"),
    C("bit_and", [_i(2, 3, lo=-50, hi=50), _i(3, lo=-50, hi=50)]),
    C("bit_and", [_u(6), _u(6)]),
    C("bit_or", [_i(6, lo=-50, hi=50, dtype=np.int64), _i(6, lo=0, hi=50, dtype=np.int64)]),
    C("bit_xor", [_u(2, 3), _u(1, 3)]),
    C("bit_not", [_i(6, lo=-50, hi=50)]),
    C("bit_not", [_u(6, dtype=np.uint16)]),
    C("shift_left", [_u(6), np.array([0, 1, 3, 7, 8, 9], np.uint8)]),  # (>= width: 0)
    C("shift_left", [_i(6, lo=-50, hi=50), np.array([0, 1, 5, 31, 32, 2], np.int32)]),
    C("shift_right", [_i(6, lo=-50, hi=50), np.array([0, 1, 5, 31, 40, 2], np.int32)]),
    C("shift_right", [_u(6, dtype=np.uint32), _u(6, hi=40, dtype=np.uint32)]),
    C("bitcast", [_r(2, 3)], {"to": "i32"}),
    C("bitcast", [_i(6, lo=-128, hi=128, dtype=np.int8)], {"to": "ui8"}),
    # linear algebra, convolution, pooling, normalisation
    C("matmul", [_r(3, 4), _r(4, 2)]),
    C("matmul", [_r(4, 3), _r(2, 4)], {"transpose_a": True, "transpose_b": True}, "transposed"),
    C("matmul", [_r(2, 3, 4), _r(2, 4, 2)], tag="batched"),
    C("matmul", [_i(3, 4), _i(4, 2)]),
    C("linear", [_r(2, 4), _r(3, 4), _r(3)]),
    C("linear", [_r(2, 4), _r(3, 4)], tag="no-bias"),
    C("conv2d", [_r(1, 2, 7, 7), _r(3, 2, 3, 3)], {"stride": 2}),
    C("conv2d", [_r(1, 4, 5, 5), _r(4, 2, 3, 3), _r(4)], {"padding": 1, "groups": 2}, "groups"),
    C("conv2d", [_r(1, 2, 6, 6), _r(2, 2, 2, 2), None], {"dilation": 2}, "dilated"),
    C("max_pool2d", [_r(1, 2, 4, 4)], {"kernel_size": 2, "stride": 2}),
    C(
        "max_pool2d",
        [_r(1, 2, 5, 5)],
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        "ceil",
    ),  # fmt: skip
    C("avg_pool2d", [_r(1, 2, 4, 4)], {"kernel_size": 2, "stride": 2}),
    C(
        "avg_pool2d",
        [_r(1, 2, 5, 5)],
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        "exclude-pad",
    ),  # fmt: skip
    C("global_avg_pool", [_r(1, 3, 4, 4)]),
    C("batch_norm", [_r(2, 3, 2, 2), _r(3), _r(3), _r(3), _pos(3)], {"eps": 1e-5}),
    C("layer_norm", [_r(2, 6), _r(6), _r(6)]),
    C("layer_norm", [_r(2, 3, 4), _r(3, 4)], {"axis": 1}, "no-bias"),
    C("softmax", [_r(2, 5)], {"axis": 1}),
    C("log_softmax", [_r(3, 5)], {"axis": -1}),
    C("winograd_filter_transform", [_r(2, 3, 3, 3)]),
    C("winograd_input_transform", [_r(1, 2, 4, 4)], {"pads": [1, 1, 1, 1]}),
    C("winograd_output_transform", [_r(16, 1, 2, 2, 2), _r(2)], {"output": [4, 3]}),
    # reductions
    C("reduce_sum", [_r(3, 4)], {"axes": [1]}),
    C("reduce_sum", [_i(3, 4, dtype=np.int64)], {"axes": [0]}),
    C("reduce_sum", [_r(2, 3, 4)], {"axes": [], "keepdims": False}, "all"),
    C("reduce_mean", [_r(3, 4)], {"axes": [0], "keepdims": True}),
    C("reduce_max", [_r(3, 4)], {"axes": [1]}),
    C("reduce_max", [_i(3, 4)], {"axes": [0, 1]}),
    C("reduce_min", [_r(3, 4)], {"axes": [1]}),
    C("reduce_min", [_i(3, 4, dtype=np.int64)], {"axes": [0], "keepdims": True}),
    C("reduce_prod", [_pos(3, 4)], {"axes": [1]}),
    # data movement
    C("reshape", [_r(2, 6)], {"shape": [3, 4]}),
    C("reshape", [_i(2, 6)], {"shape": [-1, 3]}),
    C("transpose", [_r(2, 3, 4)], {"perm": [2, 0, 1]}),
    C("slice", [_r(4, 6)], {"starts": [1, 0], "ends": [4, 6], "axes": [0, 1], "steps": [1, 2]}),
    C("slice", [_i(4, 6)], {"starts": [-3], "ends": [5], "axes": [1], "steps": [1]}),
    C("broadcast", [_r(3, 1)], {"shape": [2, 3, 4]}),
    C("broadcast", [_b(1, 4)], {"shape": [3, 4]}),
    C("concat", [_r(2, 3), _r(2, 2)], {"axis": 1}),
    C(
        "concat", [_i(2, dtype=np.int64), _i(3, dtype=np.int64), _i(1, dtype=np.int64)], {"axis": 0}
    ),  # fmt: skip
    C("pad", [_r(2, 3)], {"pads": [1, 0, 0, 2]}),
    C("pad", [_r(3, 4)], {"pads": [1, -1, -1, 2], "value": 2.5}, "crop-value"),
    C("gather", [_r(5, 3), np.array([4, 0, 2], np.int64)], {"axis": 0}),
    C("gather", [_r(3, 5), np.array([[1, 4], [0, 0]], np.int32)], {"axis": 1}),
    C("gather", [_i(5, dtype=np.int64), np.array([3, 3, 1], np.int64)], {"axis": 0}),
    C("dynamic_slice", [_r(5, 4), np.array([2, -3], np.int64)], {"axes": [0, 1], "sizes": [2, 2]}),
    C("dynamic_slice", [_i(6), np.array([9], np.int32)], {"axes": [0], "sizes": [3]}),
    # integer quantization: per tensor and per axis, a tie and saturation
    C(
        "quantize",
        [
            np.array([0.5, 1.5, -2.5, 1e4, -1e4, 3.3], np.float32),
            np.asarray(0.5, np.float32),
            np.asarray(3, np.int8),
        ],
    ),
    C(
        "quantize",
        [_r(3, 4) * 40, np.array([0.5, 0.25, 1.0, 2.0], np.float32), _u(4, hi=20)],
        {"axis": 1},
        "axis",
    ),
    C(
        "dequantize",
        [
            _i(3, 4, lo=-128, hi=128, dtype=np.int8),
            np.asarray(0.25, np.float32),
            np.asarray(-2, np.int8),
        ],
    ),
    C(
        "matmul_integer",
        [
            _u(4, 8),
            _i(8, 5, lo=-128, hi=128, dtype=np.int8),
            np.asarray(128, np.uint8),
            np.asarray(-3, np.int8),
        ],
    ),
    C(
        "conv_integer",
        [
            _u(1, 3, 6, 6),
            _i(4, 3, 3, 3, lo=-128, hi=128, dtype=np.int8),
            np.asarray(7, np.uint8),
            np.asarray(0, np.int8),
        ],
        {"pads": [1, 1, 1, 1]},
    ),
]

# Every op has a forward case: an op may be left out only with its reason here.
FORWARD_EXCLUDED: dict[str, str] = {}


def _graph(case: Case, arrays: list[np.ndarray]) -> Model:
    """The one-op graph of `case` (inputs: its array operands)."""
    gb = GraphBuilder("ref")
    values: list[Any] = []
    k = 0
    for o in case.operands:
        if isinstance(o, np.ndarray):
            values.append(gb.input(f"a{k}", arrays[k].shape, dispatch.dtype_name(arrays[k].dtype)))
            k += 1
        else:
            values.append(o)
    gb.output(dispatch.build_op(gb, case.name, values, dict(case.attrs)))
    return Model(gb.module(), {}, "ref")


def _arrays(case: Case) -> list[np.ndarray]:
    return [o for o in case.operands if isinstance(o, np.ndarray)]


def _eager(case: Case, device: str, arrays=None, requires_grad=()):
    """The case's call through `dlpc.ops` on `device`: (output, tensor operands)."""
    arrays = _arrays(case) if arrays is None else arrays
    tensors = [
        dlpc.tensor(a, dtype=a.dtype, device=device, requires_grad=k in requires_grad)
        for k, a in enumerate(arrays)
    ]
    it = iter(tensors)
    args = [next(it) if isinstance(o, np.ndarray) else o for o in case.operands]
    return getattr(dlpc.ops, case.name)(*args, **case.attrs), tensors


def _tolerance(dtype: np.dtype) -> float:
    return {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}.get(np.dtype(dtype).name, 0.0)


def test_every_op_has_eager_cases():
    """Every name `dlpc.ops` takes has a forward case (or its reason), every op with a
    gradient rule a gradient case (or its reason); no exclusion names a missing op."""
    names = {*OPS, *SUGAR}
    covered = {c.name for c in CASES}
    assert names - covered - set(FORWARD_EXCLUDED) == set(), "ops without an eager case"
    assert set(FORWARD_EXCLUDED) <= names and set(GRAD_EXCLUDED) <= names
    graded = {c.name for c in GRAD_CASES}
    differentiable = {n for n in names if f"graph.{SUGAR.get(n, (n,))[0]}" in _grad.RULES}
    assert differentiable - graded - set(GRAD_EXCLUDED) == set(), "ops without a gradient case"
    assert names - differentiable <= set(GRAD_EXCLUDED), "ops without a rule, not excluded"
    assert not graded & set(GRAD_EXCLUDED)
    for name in names:
        assert callable(getattr(dlpc.ops, name))


def _first_per_dtypes(cases: list[Case]) -> list[Case]:
    first: dict[tuple, Case] = {}
    for c in cases:
        first.setdefault((c.name, tuple(a.dtype.name for a in _arrays(c))), c)
    return list(first.values())


# on dlp (its kernels cost the most to build: C of the simulator) the first case of each
# op and operand dtypes; the variants of attributes run on cpu and OpenCL
DLP_CASES = _first_per_dtypes(CASES)
RUNS = [(d, c) for c in CASES for d in DEVICES if d != "dlp:0" or c in DLP_CASES]


def _lacks_fp16(device: str) -> bool:
    """An OpenCL device without `cl_khr_fp16` (PoCL 3.0 on an AMD Zen 3): no `half`
    arithmetic in its kernels."""
    if not device.startswith("opencl"):
        return False
    cl_device = dlpc.device(device).backend.cl_device
    return "cl_khr_fp16" not in cl_device.extensions


@pytest.mark.parametrize("device, case", RUNS, ids=[f"{c.id}-{d}" for d, c in RUNS])
def test_op_equals_reference(device, case):
    arrays = _arrays(case)
    want = api.reference(_graph(case, arrays), arrays)[0]
    if any(a.dtype == np.float16 for a in arrays) and _lacks_fp16(device):
        # (the device cannot build the kernel: a one-line error naming the cause)
        with pytest.raises(DlpcError, match=r"^error: no kernel for .* does not build: ") as e:
            _eager(case, device)
        assert "\n" not in str(e.value)
        return
    out, _ = _eager(case, device)
    assert out.device.name == device
    got = np.asarray(out)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    tol = _tolerance(want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_dlp_refusal_is_one_line():
    """A kernel the dlp target cannot compile (a matmul's right operand is kept whole in
    WRAM: 1.2 MB here, over the simulator's 1 MiB) is one line naming op and device."""
    a = dlpc.tensor(np.zeros((2, 512), np.float32), device="dlp:0")
    b = dlpc.tensor(np.zeros((512, 600), np.float32), device="dlp:0")
    with pytest.raises(DlpcError) as e:
        dlpc.ops.matmul(a, b)
    message = str(e.value)
    assert "'matmul' on dlp:0" in message and "wram" in message and "\n" not in message


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_view_of_a_result_outlives_the_tensor(device):
    """`np.asarray(op(...))` keeps its values after the tensor died and later ops ran:
    on dlp (host memory from the caching allocator) it is a view of the block, which the
    allocator handed out again to the next result until the view kept it (fixed); the
    block is freed once the last view has died."""
    gc.collect()  # earlier tests' tensors in reference cycles must not be freed mid-count
    x = dlpc.tensor(np.arange(6, dtype=np.float32), device=device)
    active = dlpc.memory_stats(device)["active_blocks"] if device != "cpu" else 0
    y = np.asarray(x + 1.0)
    z = np.asarray(x * 5.0)
    assert y.tolist() == [1, 2, 3, 4, 5, 6] and z.tolist() == [0, 5, 10, 15, 20, 25]
    if device == "dlp:0":
        assert dlpc.memory_stats(device)["active_blocks"] == active + 2
    del y, z
    if device != "cpu":
        assert dlpc.memory_stats(device)["active_blocks"] == active


DLP_VIEWS = ("offset", "strided")
VIEWS = {
    "offset": lambda x: x[1:],
    "transposed": lambda x: x.T,
    "strided": lambda x: x[:, 1::2],
    "expanded": lambda x: x[:1].expand(3, 6) if hasattr(x, "expand") else x[:1],
    "column": lambda x: x[:, 3],
}


@pytest.mark.parametrize(
    "device, view", [(d, v) for v in VIEWS for d in DEVICES if d != "dlp:0" or v in DLP_VIEWS]
)
def test_ops_on_views(device, view):
    """Views (an offset into the storage, strided, broadcast) as operands, with a dense
    tensor of the same shape, and integer indices that are a view."""
    a = _r(5, 6)
    x = dlpc.tensor(a, device=device)
    v, ref = VIEWS[view](x), VIEWS[view](a)
    ref = np.broadcast_to(ref, v.shape) if view == "expanded" else ref
    dense = _r(*v.shape)
    np.testing.assert_allclose(np.asarray(v.relu()), np.maximum(ref, 0), rtol=1e-6)
    sum_ = np.asarray(v + dlpc.tensor(dense, device=device))
    np.testing.assert_allclose(sum_, ref + dense, rtol=1e-6)
    if view == "offset":
        i = dlpc.tensor(np.array([[0, 3], [1, 2]], np.int64), device=device)
        got = np.asarray(dlpc.ops.gather(x, i[:, 1], axis=0))
        np.testing.assert_allclose(got, a[[3, 2]], rtol=1e-6)


# ------------------------------------------------------------------ gradients


def _t(torch, name):
    """torch's function for graph op `name` (operands as torch tensors, attributes as
    the case gives them)."""
    F = torch.nn.functional

    def pool_pads(attrs):
        p = attrs.get("padding", 0)
        return p if isinstance(p, int) else p[0]

    def graph_pad(x, pads, value=0.0):
        rank = x.dim()
        width = []
        for d in reversed(range(rank)):
            width += [pads[d], pads[rank + d]]
        return F.pad(x, width, value=value)

    def layer_norm(x, scale, bias=None, axis=-1, eps=1e-5):
        return F.layer_norm(x, x.shape[axis % x.dim() :], scale, bias, eps)

    def gather(x, idx, axis):
        return torch.index_select(x, axis, idx.reshape(-1).long()).reshape(
            *x.shape[:axis], *idx.shape, *x.shape[axis + 1 :]
        )

    def slice_(x, starts, ends, axes, steps):
        index = [slice(None)] * x.dim()
        for s, e, a, st in zip(starts, ends, axes, steps):
            index[a] = slice(s, e, st)
        return x[tuple(index)]

    def dynamic_slice(x, starts, axes, sizes):
        # starts read at run time: a negative one counts from the end, then clamped
        for a, st, n in zip(axes, starts.tolist(), sizes):
            st = st + x.shape[a] if st < 0 else st
            x = x.narrow(a, min(max(st, 0), x.shape[a] - n), n)
        return x

    def batch_norm(x, scale, bias, mean, var, eps=1e-5):
        shape = (1, -1, 1, 1)
        inv = (var.reshape(shape) + eps).rsqrt()
        return (x - mean.reshape(shape)) * inv * scale.reshape(shape) + bias.reshape(shape)

    def dropout(x, step, p, seed):
        from dlpc.reference import graph as ref

        keep = ref.dropout_keep(tuple(x.shape), step.item(), seed, p)
        return x * torch.tensor(keep, dtype=x.dtype) / (1 - p)

    def winograd_filter(w):
        g = torch.tensor([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=w.dtype)
        return torch.einsum("ai,ocij,bj->aboc", g, w, g).reshape(16, *w.shape[:2])

    def winograd_input(x, pads):
        n, c, h, w = x.shape
        top, left, bottom, right = pads
        th, tw = (h + top + bottom - 1) // 2, (w + left + right - 1) // 2
        xp = F.pad(x, [left, 2 * tw + 2 - w - left, top, 2 * th + 2 - h - top])
        d = torch.stack(
            [
                torch.stack([xp[:, :, i : i + 2 * th : 2, j : j + 2 * tw : 2] for j in range(4)])
                for i in range(4)
            ]
        )
        bt = torch.tensor(
            [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=x.dtype
        )
        return torch.einsum("ai,ijncst,bj->abncst", bt, d, bt).reshape(16, n, c, th, tw)

    def winograd_output(m, b, output):
        _, n, o, th, tw = m.shape
        at = torch.tensor([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=m.dtype)
        y = torch.einsum("ai,ijnost,bj->nosatb", at, m.reshape(4, 4, n, o, th, tw), at)
        y = y.reshape(n, o, 2 * th, 2 * tw)[:, :, : output[0], : output[1]]
        return y + b.reshape(1, o, 1, 1)

    def reduce(fn):
        def run(x, axes, keepdims=False):
            dims = list(axes) or list(range(x.dim()))
            for d in sorted(dims, reverse=True):
                x = fn(x, d, keepdims)
            return x

        return run

    return {
        "abs": torch.abs,
        "neg": torch.neg,
        "exp": torch.exp,
        "log": torch.log,
        "sqrt": torch.sqrt,
        "rsqrt": torch.rsqrt,
        "erf": torch.erf,
        "tanh": torch.tanh,
        **{
            f: getattr(torch, f)
            for f in "sin cos tan sinh cosh floor ceil round asinh acosh atanh".split()
        },
        "asin": torch.asin,
        "acos": torch.acos,
        "atan": torch.atan,
        "sigmoid": torch.sigmoid,
        "relu": torch.relu,
        "gelu": lambda x, approximate="none": F.gelu(x, approximate=approximate),
        "leaky_relu": lambda x, alpha: F.leaky_relu(x, alpha),
        "clip": lambda x, min, max: torch.clamp(x, min, max),  # noqa: A006
        "relu6": F.relu6,
        "cast": lambda x, to: x.to(torch.float32 if to == "f32" else torch.float64),
        "dropout": dropout,
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "div": torch.div,
        "max": torch.maximum,
        "min": torch.minimum,
        "pow": torch.pow,
        "prelu": lambda x, s: torch.where(x > 0, x, s * x),
        "where": torch.where,
        "matmul": lambda a, b, transpose_a=False, transpose_b=False: torch.matmul(
            a.transpose(-1, -2) if transpose_a else a, b.transpose(-1, -2) if transpose_b else b
        ),
        "linear": F.linear,
        "conv2d": lambda x, w, b=None, stride=1, padding=0, dilation=1, groups=1: F.conv2d(
            x, w, b, stride, padding, dilation, groups
        ),
        "max_pool2d": lambda x, **a: F.max_pool2d(
            x, a["kernel_size"], a["stride"], pool_pads(a), ceil_mode=a.get("ceil_mode", False)
        ),
        "avg_pool2d": lambda x, **a: F.avg_pool2d(
            x,
            a["kernel_size"],
            a["stride"],
            pool_pads(a),
            ceil_mode=a.get("ceil_mode", False),
            count_include_pad=a.get("count_include_pad", True),
        ),
        "global_avg_pool": lambda x: x.mean((2, 3), keepdim=True),
        "batch_norm": batch_norm,
        "layer_norm": layer_norm,
        "softmax": lambda x, axis: torch.softmax(x, axis),
        "log_softmax": lambda x, axis: torch.log_softmax(x, axis),
        "winograd_filter_transform": winograd_filter,
        "winograd_input_transform": winograd_input,
        "winograd_output_transform": winograd_output,
        "reduce_sum": lambda x, axes, keepdims=False: (
            x.sum(list(axes) or None, keepdims) if axes else x.sum()
        ),
        "reduce_mean": lambda x, axes, keepdims=False: x.mean(list(axes), keepdims),
        "reduce_max": lambda x, axes, keepdims=False: x.amax(list(axes), keepdims),
        "reduce_min": lambda x, axes, keepdims=False: x.amin(list(axes), keepdims),
        "reduce_prod": reduce(lambda x, d, k: x.prod(d, keepdim=k)),
        "reshape": lambda x, shape: x.reshape(shape),
        "transpose": lambda x, perm: x.permute(perm),
        "slice": slice_,
        "broadcast": lambda x, shape: x.expand(shape),
        "concat": lambda *xs, axis: torch.cat(xs, axis),
        "pad": graph_pad,
        "gather": gather,
        "dynamic_slice": dynamic_slice,
    }[name]


D = np.float64
GRAD_CASES = [
    C("abs", [_r(6, dtype=D)]),
    C("neg", [_r(6, dtype=D)]),
    C("exp", [_r(6, dtype=D)]),
    C("log", [_pos(6, dtype=D)]),
    C("sqrt", [_pos(6, dtype=D)]),
    C("rsqrt", [_pos(6, dtype=D)]),
    C("erf", [_r(6, dtype=D)]),
    C("tanh", [_r(6, dtype=D)]),
    C("sigmoid", [_r(6, dtype=D)]),
    C("relu", [_r(3, 4, dtype=D)]),
    C("gelu", [_r(6, dtype=D)]),
    C("gelu", [_r(6, dtype=D)], {"approximate": "tanh"}, "tanh"),
    C("leaky_relu", [_r(6, dtype=D)], {"alpha": 0.2}),
    C("clip", [_r(8, dtype=D)], {"min": -0.5, "max": 0.5}),
    C("relu6", [_r(8, dtype=D) * 5]),
    *(
        C(f, [_r(6, dtype=D) * 0.5])
        for f in "sin cos tan asin acos atan sinh cosh asinh atanh".split()
    ),
    C("acosh", [_pos(6, dtype=D) + 1.0]),
    *(C(f, [np.array([-2.4, -1.3, -0.2, 0.4, 1.6], D)]) for f in ("floor", "ceil", "round")),
    C("cast", [_r(5)], {"to": "f64"}),  # f32 -> f64: the gradient is cast back
    C("dropout", [_r(4, 8, dtype=D), np.array(7.0, D)], {"p": 0.5, "seed": 3}),
    C("add", [_r(2, 3, dtype=D), _r(3, dtype=D)]),
    C("sub", [_r(3, 1, dtype=D), _r(4, dtype=D)]),
    C("mul", [_r(4, 1, dtype=D), _r(1, 5, dtype=D)]),
    C("div", [_r(3, 4, dtype=D), _pos(4, dtype=D)]),
    C("max", [_r(3, 4, dtype=D), _r(4, dtype=D)]),
    C("min", [_r(3, 4, dtype=D), _r(3, 1, dtype=D)]),
    C("pow", [_pos(3, 4, dtype=D), _r(4, dtype=D)]),
    C("prelu", [_r(2, 3, 2, dtype=D), _r(3, 1, dtype=D)]),
    C("where", [_b(3, 4), _r(3, 4, dtype=D), _r(4, dtype=D)]),
    C("matmul", [_r(3, 4, dtype=D), _r(4, 2, dtype=D)]),
    C(
        "matmul",
        [_r(4, 3, dtype=D), _r(2, 4, dtype=D)],
        {"transpose_a": True, "transpose_b": True},
        "transposed",
    ),  # fmt: skip
    C("matmul", [_r(2, 3, 4, dtype=D), _r(2, 4, 2, dtype=D)], tag="batched"),
    C("linear", [_r(2, 4, dtype=D), _r(3, 4, dtype=D), _r(3, dtype=D)]),
    C("conv2d", [_r(1, 2, 7, 7, dtype=D), _r(3, 2, 3, 3, dtype=D), _r(3, dtype=D)], {"stride": 2}),
    C(
        "conv2d",
        [_r(2, 4, 5, 5, dtype=D), _r(4, 2, 3, 3, dtype=D)],
        {"padding": 1, "groups": 2, "dilation": 2},
        "groups-dilated",
    ),  # fmt: skip
    C("max_pool2d", [_r(1, 2, 4, 4, dtype=D)], {"kernel_size": 2, "stride": 2}),
    C(
        "max_pool2d",
        [_r(1, 2, 5, 5, dtype=D)],
        {"kernel_size": 3, "stride": 2, "padding": 1},
        "overlapping",
    ),  # fmt: skip
    C("avg_pool2d", [_r(1, 2, 4, 4, dtype=D)], {"kernel_size": 2, "stride": 2}),
    C(
        "avg_pool2d",
        [_r(1, 2, 5, 5, dtype=D)],
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        "exclude-pad",
    ),  # fmt: skip
    C("global_avg_pool", [_r(2, 3, 2, 2, dtype=D)]),
    C(
        "batch_norm",
        [_r(2, 3, 2, 2, dtype=D), _r(3, dtype=D), _r(3, dtype=D), _r(3, dtype=D), _pos(3, dtype=D)],
        {"eps": 1e-5},
    ),  # fmt: skip
    C("layer_norm", [_r(2, 6, dtype=D), _r(6, dtype=D), _r(6, dtype=D)]),
    C("layer_norm", [_r(2, 3, 4, dtype=D), _r(3, 4, dtype=D)], {"axis": 1}, "no-bias"),
    C("softmax", [_r(2, 5, dtype=D)], {"axis": 1}),
    C("log_softmax", [_r(3, 5, dtype=D)], {"axis": 0}),
    C("winograd_filter_transform", [_r(2, 3, 3, 3, dtype=D)]),
    C("winograd_input_transform", [_r(1, 2, 4, 4, dtype=D)], {"pads": [1, 1, 1, 1]}),
    C(
        "winograd_output_transform",
        [_r(16, 1, 2, 2, 2, dtype=D), _r(2, dtype=D)],
        {"output": [4, 3]},
    ),  # fmt: skip
    C("reduce_sum", [_r(3, 4, dtype=D)], {"axes": [1]}),
    C("reduce_sum", [_r(2, 3, dtype=D)], {"axes": []}, "all"),
    C("reduce_mean", [_r(3, 4, dtype=D)], {"axes": [0], "keepdims": True}),
    C("reduce_max", [_r(3, 4, dtype=D)], {"axes": [1]}),
    C("reduce_min", [_r(3, 4, dtype=D)], {"axes": [0], "keepdims": True}),
    C("reduce_prod", [_pos(3, 4, dtype=D)], {"axes": [1]}),
    C("reshape", [_r(2, 6, dtype=D)], {"shape": [3, 4]}),
    C("transpose", [_r(2, 3, 4, dtype=D)], {"perm": [2, 0, 1]}),
    C(
        "slice",
        [_r(4, 6, dtype=D)],
        {"starts": [1, 0], "ends": [4, 6], "axes": [0, 1], "steps": [1, 2]},
    ),  # fmt: skip
    C("broadcast", [_r(3, 1, dtype=D)], {"shape": [2, 3, 4]}),
    C("concat", [_r(2, 3, dtype=D), _r(2, 2, dtype=D)], {"axis": 1}),
    C("pad", [_r(3, 4, dtype=D)], {"pads": [1, -1, -1, 2], "value": 2.5}),
    C("gather", [_r(5, 3, dtype=D), np.array([4, 0, 4], np.int64)], {"axis": 0}),  # repeated
    C("gather", [_r(3, 5, dtype=D), np.array([[1, 4], [0, 1]], np.int32)], {"axis": 1}),
    C(
        "dynamic_slice",
        [_r(5, 4, dtype=D), np.array([2, -3], np.int64)],
        {"axes": [0, 1], "sizes": [2, 2]},
    ),  # fmt: skip
]
GRAD_EXCLUDED = {
    "compare": "a boolean result carries no gradient",
    **dict.fromkeys(
        ["bit_and", "bit_or", "bit_xor", "bit_not", "shift_left", "shift_right"],
        "integers only: no gradient (their rules give none)",
    ),
    "bitcast": "bits reread as another type: no gradient (its rule gives none)",
    **dict.fromkeys(
        ["quantize", "dequantize", "matmul_integer", "conv_integer"],
        "integer operands or results: no gradient (their rules give none)",
    ),
}
# on the OpenCL device too: one of each kind of rule
OPENCL_GRAD = [
    "add-float64-float64",
    "div-float64-float64",
    "max-float64-float64",
    "where-bool-float64-float64",
    "tanh-float64",
    "gelu-float64",
    "matmul-float64-float64",
    "conv2d-float64-float64-float64",
    "max_pool2d-overlapping",
    "avg_pool2d-exclude-pad",
    "batch_norm-float64-float64-float64-float64-float64",
    "layer_norm-float64-float64-float64",
    "log_softmax-float64",
    "reduce_max-float64",
    "reduce_prod-float64",
    "slice-float64",
    "broadcast-float64",
    "concat-float64-float64",
    "pad-float64",
    "gather-float64-int64",
]


def _wanted(case: Case) -> list[int]:
    """The array operands a gradient is taken for: the float ones (dropout's step is a
    counter, not an input)."""
    arrays = _arrays(case)
    floats = [k for k, a in enumerate(arrays) if a.dtype.kind == "f"]
    return floats[:1] if case.name == "dropout" else floats


def _grads(case: Case, device: str, dy: np.ndarray) -> tuple[np.ndarray, list]:
    wanted = _wanted(case)
    out, tensors = _eager(case, device, requires_grad=wanted)
    out.backward(dlpc.tensor(dy, dtype=dy.dtype, device=device))
    grads = []
    for k in wanted:
        g = tensors[k].grad
        assert g is not None and g.device.name == device and g.dtype == tensors[k].dtype
        grads.append(np.asarray(g))
    return np.asarray(out), grads


def _torch_grads(case: Case, dy: np.ndarray) -> list[np.ndarray]:
    torch = pytest.importorskip("torch")
    wanted = _wanted(case)
    ts = [torch.tensor(a, requires_grad=k in wanted) for k, a in enumerate(_arrays(case))]
    it = iter(ts)
    args = [next(it) if isinstance(o, np.ndarray) else o for o in case.operands]
    while args and args[-1] is None:
        args.pop()
    y = _t(torch, case.name)(*args, **case.attrs)
    y.backward(torch.tensor(dy))
    return [ts[k].grad.numpy() for k in wanted]


def _finite_difference(case: Case, dy: np.ndarray, k: int, v: np.ndarray) -> float:
    """d/de <dy, f(a_k + e v)> at 0, centrally, by the numpy reference in float64."""
    arrays = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in _arrays(case)]
    model = _graph(case, arrays)
    eps = 1e-6
    sides = []
    for sign in (1, -1):
        moved = list(arrays)
        moved[k] = arrays[k] + sign * eps * v
        sides.append(float(np.sum(dy * api.reference(model, moved)[0])))
    return (sides[0] - sides[1]) / (2 * eps)


def _autodiff_grads(case: Case, dy: np.ndarray) -> list[np.ndarray]:
    """graph-autodiff's gradients (`wrt-inputs`) of <dy, op(...)>, by the numpy reference."""
    from dlpc.passes.train.autodiff import differentiate

    arrays = _arrays(case)
    gb = GraphBuilder("grad")
    values: list[Any] = []
    inputs = iter(arrays)
    for o in case.operands:
        if isinstance(o, np.ndarray):
            a = next(inputs)
            values.append(gb.input(f"a{len(values)}", a.shape, dispatch.dtype_name(a.dtype)))
        else:
            values.append(o)
    y = dispatch.build_op(gb, case.name, values, dict(case.attrs))
    dyv = gb.input("dy", dy.shape, dispatch.dtype_name(dy.dtype))
    gb.output(gb.reduce_sum(gb.mul(y, dyv), axes=[]))
    module = gb.module()
    differentiate(module, wrt_inputs=True)
    grads = api.reference(Model(module, {}, "grad"), [*arrays, dy])[1:]
    floats = [k for k, a in enumerate(arrays) if a.dtype.kind == "f"]  # (then dy's)
    return [grads[floats.index(k)] for k in _wanted(case)]


def _check_grads(case: Case, device: str) -> None:
    arrays = _arrays(case)
    want = api.reference(_graph(case, arrays), arrays)[0]
    local = np.random.default_rng(math.prod(want.shape) + 7)
    dy = local.standard_normal(want.shape).astype(want.dtype)
    out, grads = _grads(case, device, dy)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    tol = 1e-5 if arrays[_wanted(case)[0]].dtype == np.float32 else 1e-10
    for g, tg in zip(grads, _torch_grads(case, dy)):
        np.testing.assert_allclose(g, tg, rtol=tol, atol=tol)
    for g, ag in zip(grads, _autodiff_grads(case, dy)):
        np.testing.assert_allclose(g, ag, rtol=tol, atol=tol)
    for k, g in zip(_wanted(case), grads):
        v = local.standard_normal(arrays[k].shape)
        fd = _finite_difference(case, dy.astype(np.float64), k, v)
        fd_tol = 1e-7 if arrays[k].dtype == np.float64 else 1e-5  # (measured: < 2e-8, 1.1e-7)
        np.testing.assert_allclose(float(np.sum(g * v)), fd, rtol=fd_tol, atol=1e-9)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.id for c in GRAD_CASES])
def test_grad_equals_torch_and_finite_differences(case):
    pytest.importorskip("torch")
    _check_grads(case, "cpu")


@pytest.mark.skipif(not OPENCL, reason="no OpenCL device")
@pytest.mark.parametrize("case", [c for c in GRAD_CASES if c.id in OPENCL_GRAD], ids=lambda c: c.id)
def test_grad_on_opencl_equals_torch_and_finite_differences(case):
    pytest.importorskip("torch")
    _check_grads(case, OPENCL[0])


def test_opencl_grad_subset_names_cases():
    assert set(OPENCL_GRAD) <= {c.id for c in GRAD_CASES}


def test_integer_and_bool_results_carry_no_gradient():
    """A comparison or an integer cast of a tensor that requires grad does not (torch's
    rule): a float mask made of one is a constant of the backward pass, which went
    through graph.compare's missing rule before (fixed); an integer leaf cannot
    require grad."""
    torch = pytest.importorskip("torch")
    a = np.array([1.5, -2.0, 3.0, -0.5], np.float32)
    x = dlpc.tensor(a, requires_grad=True)
    assert not (x > 0).requires_grad and not x.astype(np.int32).requires_grad
    mask = (x > 0).astype(np.float32)
    (mask * x * x).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    ((tx > 0).float() * tx * tx).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), tx.grad.numpy(), rtol=1e-6)
    for make in (
        lambda: dlpc.tensor(np.arange(3), requires_grad=True),
        lambda: dlpc.tensor(np.array([True])).requires_grad_(),
    ):
        with pytest.raises(DlpcError) as e:
            make()
        assert "floating-point" in str(e.value) and "\n" not in str(e.value)


def _tied(shape, values):
    """An array of `shape` (that of a gradient case: its kernels are shared) cycling
    through `values`."""
    return np.resize(np.array(values, D), shape)


TIES = [
    C("max_pool2d", [np.zeros((1, 2, 4, 4))], {"kernel_size": 2, "stride": 2}, "equal-window"),
    C(
        "max_pool2d",
        [_tied((1, 2, 5, 5), [1.0, 2.0, 2.0, 0.0])],
        {"kernel_size": 3, "stride": 2, "padding": 1},
        "overlapping",
    ),  # fmt: skip
    C("reduce_max", [_tied((3, 4), [1.0, 3.0, 3.0, 2.0, 2.0, 2.0])], {"axes": [1]}),
    C("reduce_min", [_tied((3, 4), [1.0, 1.0, 3.0])], {"axes": [0], "keepdims": True}),
    C("max", [_tied((3, 4), [1.0, 2.0, 0.0]), _tied((4,), [1.0, 3.0, 0.0, 2.0])]),
    C("min", [_tied((3, 4), [1.0, 2.0]), _tied((3, 1), [1.0, 3.0, 2.0])]),
    C("relu", [_tied((3, 4), [0.0, 1.0, -1.0])]),
    C("abs", [_tied((6,), [0.0, 1.0, -1.0])]),
    C("leaky_relu", [_tied((6,), [0.0, 1.0, -1.0])], {"alpha": 0.2}),
    C("prelu", [_tied((2, 3, 2), [0.0, 1.0, -1.0]), _tied((3, 1), [0.1, 0.2])]),
    C("clip", [_tied((8,), [-1.0, -0.5, 0.5, 0.0, 2.0])], {"min": -0.5, "max": 0.5}),
    C("reduce_prod", [_tied((3, 4), [0.0, 2.0, 3.0, 1.0, 0.0, 0.0, 1.0])], {"axes": [1]}),
    C("pow", [_tied((3, 4), [0.0, 2.0, 0.0]), _tied((4,), [2.0, 0.0, 1.0, 0.5])]),
]


@pytest.mark.parametrize("case", TIES, ids=[c.id for c in TIES])
def test_grad_at_ties_and_kinks_equals_torch(case):
    """Where the derivative is not unique, the eager gradient is torch's choice (max
    pooling: the first maximum of a window; reductions and max/min: shared evenly;
    relu at 0: 0; clip at its bounds: 1), as graph-autodiff's."""
    pytest.importorskip("torch")
    arrays = _arrays(case)
    want = api.reference(_graph(case, arrays), arrays)[0]
    dy = np.arange(1.0, 1.0 + want.size).reshape(want.shape)
    _, grads = _grads(case, "cpu", dy)
    for g, tg, ag in zip(grads, _torch_grads(case, dy), _autodiff_grads(case, dy)):
        np.testing.assert_allclose(g, tg, rtol=1e-12, atol=0)
        np.testing.assert_allclose(g, ag, rtol=1e-12, atol=0)


def test_variadic_op_takes_a_list():
    """`dlpc.ops.concat([a, b], axis=1)`, as the builder and torch.cat take it (it was
    'concat needs at least one tensor operand')."""
    case = next(c for c in CASES if c.name == "concat")
    a, b = _arrays(case)
    got = dlpc.ops.concat([dlpc.tensor(a), dlpc.tensor(b)], **case.attrs)
    np.testing.assert_array_equal(np.asarray(got), np.concatenate([a, b], axis=1))
