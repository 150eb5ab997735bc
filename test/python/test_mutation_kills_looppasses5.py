"""Tests of the loop-level passes (issue 35, fifth round, area loop-passes of
bench/mutation.py): the memory plan's figures (`dlpc.arena_bytes`, `dlpc.intermediate_bytes`)
on small graphs whose plan follows from the rules in memory_plan's docstring (in-place only
over a dying input read at the same index, of the same type; views for copies), each run in
C against numpy; loop-opencl-winograd's fused chain taken or refused at each bound of
`fused_spec`, on OpenCL against the reference; loop-prepack-weights on a conv's weight tile
and on weight-only kernels (lenet, mobilenet unfolded), new weights giving new results."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import FunctionType, ModuleOp, f32, i32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes

import dlpc
from dlpc import api
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.dialects import graph as g
from dlpc.dialects.loop import KernelOp
from dlpc.passes.lower.memory_plan import ALIGN
from dlpc.passes.lower.prepack import PACKED, PREPARE
from dlpc.universe import PASSES

PLAIN = "graph-to-te,te-to-loop,loop-memory-plan"
VIEWS = "graph-to-te,te-to-loop,loop-views,loop-memory-plan"


def build(shape, body) -> ModuleOp:
    """@main(x: f32[shape]) returning the last op `body(x)` builds."""
    ty = g.tensor_type(shape, f32)
    block = Block(arg_types=[ty])
    ops = body(block.args[0])
    block.add_ops(ops)
    block.add_op(ReturnOp(ops[-1].results[0]))
    fn = FuncOp("main", FunctionType.from_lists([ty], [ops[-1].results[0].type]), Region(block))
    module = ModuleOp([fn])
    module.verify()
    return module


def lower(module: ModuleOp, spec: str) -> ModuleOp:
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, spec).apply(Context(), module)
    module.verify()
    return module


def figures(module: ModuleOp) -> tuple[int | None, int | None, list[str], int]:
    """(arena bytes, intermediate bytes: None when @main has no intermediate left,
    kernels, reinterpret casts)."""
    fn = next(op for op in module.walk() if isinstance(op, FuncOp))
    arena, total = (
        fn.attributes.get("dlpc.arena_bytes"),
        fn.attributes.get("dlpc.intermediate_bytes"),
    )
    return (
        arena.value.data if arena is not None else None,  # type: ignore[union-attr]
        total.value.data if total is not None else None,  # type: ignore[union-attr]
        [k.sym for k in module.walk() if isinstance(k, KernelOp)],
        sum(1 for op in module.walk() if isinstance(op, memref.ReinterpretCastOp)),
    )


def _chain_used_twice(x):  # b = -a cannot go over a: a is read again by the add
    a = g.ExpOp.make(x)
    b = g.NegOp.make(a)
    return [a, b, g.AddOp.make(a, b)]


def _transpose(x):  # a transpose reads a at other indices: never in place
    a = g.ExpOp.make(x)
    t = g.TransposeOp.make(a, perm=(1, 0))
    return [a, t, g.NegOp.make(t)]


def _cast(x):  # f32 -> i32: the same bytes, another type: never in place
    a = g.ExpOp.make(x)
    b = g.CastOp.make(a, to=i32)
    return [a, b, g.CastOp.make(b, to=f32)]


def _reshape(x):
    a = g.ExpOp.make(x)
    r = g.ReshapeOp.make(a, shape=(64,))
    return [a, r, g.NegOp.make(r)]


def _strided_slice(x):  # 4 x 4 f32 = 64 bytes, live with a
    a = g.ExpOp.make(x)
    s = g.SliceOp.make(a, starts=(0, 1), ends=(8, 8), steps=(2, 2))
    return [a, s, g.NegOp.make(s)]


def _long_chain(x):  # a live to the end; b, c, d one slot (each over the last)
    a = g.ExpOp.make(x)
    b = g.NegOp.make(a)
    c = g.SinOp.make(b)
    d = g.ExpOp.make(c)
    return [a, b, c, d, g.AddOp.make(d, a)]


def _reshape_out(x):  # a reshape into @main's output: the copy stays
    a = g.ExpOp.make(x)
    return [a, g.ReshapeOp.make(a, shape=(64,))]


def _transpose_out(x):  # written through: exp stores into the output transposed
    a = g.ExpOp.make(x)
    return [a, g.TransposeOp.make(a, perm=(1, 0))]


def _transpose_in(x):  # read through: exp reads the input transposed
    t = g.TransposeOp.make(x, perm=(1, 0))
    return [t, g.ExpOp.make(t)]


def _numpy(name: str, x: np.ndarray) -> np.ndarray:
    a = np.exp(x)
    return {
        "used_twice": a - a,
        "transpose": -a.T,
        "cast": a.astype(np.int32).astype(np.float32),
        "reshape": -a.reshape(64),
        "slice": -a[0:8:2, 1:8:2],
        "long_chain": np.exp(np.sin(-a)) + a,
        "reshape_out": a.reshape(64),
        "transpose_out": a.T,
        "transpose_in": np.exp(x.T),
    }[name]


# (name, body, plain: (arena, intermediates, kernels, casts), with loop-views: the same)
PLANS = [
    ("used_twice", _chain_used_twice, (512, 512, 3, 0), (512, 512, 3, 0)),
    ("transpose", _transpose, (512, 512, 3, 0), (256, 256, 2, 0)),
    ("cast", _cast, (512, 512, 3, 0), (512, 512, 3, 0)),
    ("reshape", _reshape, (512, 512, 3, 0), (256, 256, 2, 1)),
    ("slice", _strided_slice, (256 + ALIGN, 256 + ALIGN, 3, 0), (256, 256, 2, 0)),
    ("long_chain", _long_chain, (512, 1024, 5, 0), (512, 1024, 5, 0)),
    ("reshape_out", _reshape_out, (256, 256, 2, 0), (256, 256, 2, 0)),
    ("transpose_out", _transpose_out, (256, 256, 2, 0), (None, None, 1, 0)),
    ("transpose_in", _transpose_in, (256, 256, 2, 0), (None, None, 1, 0)),
]


@pytest.mark.parametrize("name,body,plain,views", PLANS, ids=[p[0] for p in PLANS])
def test_memory_plan_figures_and_values(name, body, plain, views):
    """f32[8, 8] intermediates are 256 bytes: the arena holds what is live at once, less
    what goes in place or becomes a view (loop-views), and the C program still computes
    the same values."""
    got = figures(lower(build((8, 8), body), PLAIN))
    assert (got[0], got[1], len(got[2]), got[3]) == plain
    module = lower(build((8, 8), body), VIEWS)
    got = figures(module)
    assert (got[0], got[1], len(got[2]), got[3]) == views
    x = np.linspace(-1.5, 1.5, 64, dtype=np.float32).reshape(8, 8)
    (y,) = CFunction(module, name=f"looppasses5_{name}")(x)
    np.testing.assert_allclose(y, _numpy(name, x), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------- loop-opencl-winograd


def _conv_model(tmp_path, c: int, o: int, h: int, w: int, bias: bool = True, batch: int = 1):
    b_param = f"  param b: f32[{o}] = normal(seed=6, std=0.1)\n" if bias else ""
    conv = "conv2d(x, k, b, padding=1)" if bias else "conv2d(x, k, padding=1)"
    text = (
        f"model wconv(x: f32[B, {c}, {h}, {w}]) {{\n"
        f"  param k: f32[{o}, {c}, 3, 3] = kaiming(seed=5)\n{b_param}"
        f"  return relu({conv})\n}}\n"
    )
    path = tmp_path / "wconv.dlpc"
    path.write_text(text)
    return dlpc.load(str(path), batch=batch)


@pytest.mark.parametrize(
    "c, o, h, w, bias, fused",
    [
        (8, 8, 2, 64, True, True),  # 16 (c + o) (w / 2) = 8192 floats: FUSED_MAX_FLOATS
        (9, 8, 2, 64, True, False),  # 8704: over it
        (8, 8, 4, 16, False, True),  # no bias: fused all the same
        (8, 8, 4, 8, True, False),  # a width that is no multiple of 16
    ],
    ids=["at_limit", "over_limit", "no_bias", "narrow_w"],
)
def test_opencl_winograd_fuses_within_its_bounds(tmp_path, c, o, h, w, bias, fused):
    pytest.importorskip("pyopencl")
    from dlpc.passes.lower.opencl_winograd import is_fused

    model = _conv_model(tmp_path, c, o, h, w, bias)
    xs = api.random_inputs(model)
    expected = api.reference(model, xs)
    compiled = dlpc.compile(model, target="opencl", graph_winograd={"where": "all"})
    for got, want in zip(compiled(*xs), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    kernels = list(compiled.artifact.kernel_ops)
    assert any(is_fused(k) for k in kernels) is fused
    if fused:
        assert len(kernels) == 1


# ---------------------------------------------------------------- loop-prepack-weights


def _prepared(compiled) -> tuple[list[KernelOp], list[int]]:
    from dlpc.backends.c import find_main

    main = find_main(compiled.lowered)
    kernels = [op for op in main.walk() if isinstance(op, KernelOp) and PREPARE in op.attributes]
    packed = [
        op.memref.type.get_shape()[0]  # type: ignore[union-attr]
        for op in main.walk()
        if isinstance(op, memref.AllocOp) and PACKED in op.attributes
    ]
    return kernels, packed


def _assert_matches(compiled, model, params=None):
    from dlpc.model import Model

    xs = api.random_inputs(model, seed=3)
    got = compiled(*xs) if params is None else compiled.artifact(*xs, params=params)
    ref_model = model if params is None else Model(model.module, params, model.name, model.path)
    for y, r in zip(got, api.reference(ref_model, xs)):
        np.testing.assert_allclose(y, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fold", [True, False], ids=["folded", "no-fold"])
def test_a_conv_weight_tile_is_packed_once(fold):
    """lenet's second conv packs its weight tile into the resident block: a prepare
    kernel named after the pack, a packed block holding at least that weight (16 x 6 x 5
    x 5 f32), the values right, and right again with other weights bound per call."""
    model = dlpc.load("examples/lenet.dlpc", batch=2)
    compiled = api.compile(model, fold_weights=fold)
    kernels, packed = _prepared(compiled)
    packs = [k for k in kernels if k.sym.endswith("_prepack")]
    assert packs and all(
        k.origin is not None and k.origin.data.startswith("loop-prepack-weights: pack of conv")
        for k in packs
    )
    assert len(packed) == 1 and packed[0] >= 16 * 6 * 5 * 5 * 4 and packed[0] % ALIGN == 0
    _assert_matches(compiled, model)
    rng = np.random.default_rng(7)
    other = {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in model.weights.items()}
    _assert_matches(compiled, model, params=other)
    _assert_matches(compiled, model)  # (the bound weights' packs left alone)


def test_weight_only_kernels_are_prepared_in_place_without_folding():
    """mobilenet unfolded: its batch-norm weight arithmetic (add, rsqrt, mul, sub over
    params only) runs in dlpc_prepare into the packed block; folded, those kernels are
    gone into constants and nothing is packed. Both match the reference."""
    model = dlpc.load("examples/mobilenet.dlpc", batch=1)
    unfolded = api.compile(model, fold_weights=False)
    kernels, packed = _prepared(unfolded)
    origins = {k.origin.data for k in kernels if k.origin is not None}
    assert kernels and origins <= {"graph.add", "graph.rsqrt", "graph.mul", "graph.sub"}
    assert len(packed) == 1 and packed[0] % ALIGN == 0
    _assert_matches(unfolded, model)
    folded = api.compile(model, fold_weights=True)
    assert _prepared(folded) == ([], [])
    _assert_matches(folded, model)


# ------------------------------------------------------ graph-to-te's reductions in C


@pytest.mark.parametrize(
    "op, dtype, values, ref",
    [
        ("reduce_max", "i32", [-(2**31)] * 3, -(2**31)),  # starts at INT_MIN itself
        ("reduce_min", "i32", [2**31 - 1] * 3, 2**31 - 1),  # at INT_MAX itself
        ("reduce_max", "i8", [-128, -128, -128], -128),
        ("reduce_min", "i8", [127, 127, 127], 127),
        ("reduce_max", "i1", [False, False, False], False),  # a bool: false < true
        ("reduce_max", "i1", [False, True, False], True),
        ("reduce_min", "i1", [True, True, True], True),
        ("reduce_min", "i1", [True, False, True], False),
    ],
)
def test_integer_reductions_start_at_their_types_bounds(op, dtype, values, ref):
    src = f"""
func.func @main(%x: tensor<3x{dtype}>) -> tensor<{dtype}> {{
  %y = graph.{op} %x {{axes = array<i64: 0>}} : (tensor<3x{dtype}>) -> tensor<{dtype}>
  func.return %y : tensor<{dtype}>
}}"""
    from dlpc.passes.pipeline import parse_module

    module = lower(parse_module(src), "graph-to-te,te-to-loop")
    np_t = {"i32": np.int32, "i8": np.int8, "i1": np.bool_}[dtype]
    (got,) = CFunction(module, name="looppasses5_reduce")(np.array(values, np_t))
    assert got.dtype == np_t and got.item() == ref


# ---------------------------------------------- seed 43's survivors (written after it)

MAX_SUB = """
func.func @main(%x: tensor<32x512xf32>) -> tensor<32x512xf32> {
  %m = te.reduce "rowmax_0" (%i0) reduce (%r0) over [512] combiner "max" init -inf : tensor<32xf32> {
    %0 = te.read %x[%i0, %r0] : tensor<32x512xf32>
    te.yield %0 : f32
  }
  %y = te.compute "centre_0" (%i0_1, %i1) : tensor<32x512xf32> {
    %1 = te.read %x[%i0_1, %i1] : tensor<32x512xf32>
    %2 = te.read %m[%i0_1] : tensor<32xf32>
    %3 = arith.subf %1, %2 : f32
    te.yield %3 : f32
  }
  func.return %y : tensor<32x512xf32>
}"""


def test_a_two_member_row_group_blocks_by_its_statistics_alone():
    """x - max(x) by rows: the group is the reduction and its last compute, whose block
    buffer holds one statistic a row (no compute of the tail before the last), so the
    block is ROW_BLOCK rows however long the row (te_to_loop.py:548)."""
    from dlpc.dialects.loop import ForOp
    from dlpc.passes.pipeline import parse_module

    module = lower(parse_module(MAX_SUB), "te-to-loop")
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    nest = [lp for lp in kernel.walk() if isinstance(lp, ForOp)]
    assert nest[0].loop_name == "i0" and nest[0].upper == 2
    assert [lp.upper for lp in nest if lp.loop_name == "b"][:1] == [16]
    x = np.random.default_rng(1).standard_normal((32, 512)).astype(np.float32)
    (y,) = CFunction(module, name="looppasses5_rows")(x)
    np.testing.assert_array_equal(y, x - x.max(1, keepdims=True))


def test_alias_reshapes_counts_the_kernels_it_replaced():
    """memory_plan.alias_reshapes' result (the count its docstring names; no caller in
    the package reads it): one reshape kernel replaced, then none (memory_plan.py:156)."""
    from dlpc.passes.lower.memory_plan import alias_reshapes

    module = lower(build((8, 8), _reshape), "graph-to-te,te-to-loop")
    fn = next(op for op in module.walk() if isinstance(op, FuncOp))
    assert alias_reshapes(fn) == 1
    assert alias_reshapes(fn) == 0
    assert sum(1 for op in module.walk() if isinstance(op, memref.ReinterpretCastOp)) == 1


def test_prepack_returns_the_packed_bytes_once():
    """prepack's result (the packed bytes, recorded as dlpc.packed_bytes; the pass does
    not read it): lenet's pack, then 0 when @main is already prepacked (prepack.py:377)."""
    from dlpc.passes.lower.prepack import prepack

    model = dlpc.load("examples/lenet.dlpc", batch=2)
    lowered = api.compile(model).lowered
    fn = next(op for op in lowered.walk() if isinstance(op, FuncOp))
    total = fn.attributes["dlpc.packed_bytes"].value.data  # type: ignore[union-attr]
    assert total > 0 and total % ALIGN == 0
    assert prepack(lowered) == 0
    assert fn.attributes["dlpc.packed_bytes"].value.data == total  # type: ignore[union-attr]


def test_a_pack_as_large_as_its_weight_passes_max_ratio_one(monkeypatch, tmp_path):
    """lenet's conv weight tile is the weight itself re-laid (16 x 6 x 5 x 5 f32, no
    padding): a ratio of exactly 1, which max_ratio=1 still takes (`>`, not `>=`)."""
    from dlpc.passes.lower import prepack as pp

    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))  # (no warm compile: the pass runs)
    original = pp.prepack
    monkeypatch.setattr(pp, "prepack", lambda module, max_ratio=4: original(module, 1))
    model = dlpc.load("examples/lenet.dlpc", batch=2)
    compiled = api.compile(model)
    kernels, packed = _prepared(compiled)
    assert [k for k in kernels if k.sym.endswith("_prepack")]
    assert packed == [16 * 6 * 5 * 5 * 4]
    _assert_matches(compiled, model)


@pytest.mark.parametrize("batch", [1, 2])
def test_an_unfused_chains_transforms_get_their_opencl_nests(tmp_path, batch):
    """A chain the fused kernel refuses (a row of 8) runs as winograd_nests makes it: the
    input transform's point loop unrolled, its NDRange the channels and, past one image,
    the images; the output transform tiled by two in h and w (4 x 8 -> 2 x 4 tiles)."""
    pytest.importorskip("pyopencl")
    from dlpc.dialects.loop import ForOp
    from dlpc.passes.lower.opencl_winograd import DONE

    model = _conv_model(tmp_path, 8, 8, 4, 8, batch=batch)
    compiled = dlpc.compile(model, target="opencl", graph_winograd={"where": "all"})
    xs = api.random_inputs(model)
    np.testing.assert_allclose(compiled(*xs)[0], api.reference(model, xs)[0], rtol=1e-4, atol=1e-4)
    by_origin = {k.origin.data: k for k in compiled.artifact.kernel_ops if k.origin is not None}
    it = by_origin["graph.winograd_input_transform"]
    ot = by_origin["graph.fused(graph.winograd_output_transform, graph.relu)"]
    assert DONE in it.attributes and DONE in ot.attributes

    def marks(k):
        return [
            (lp.loop_name, lp.upper, "parallel" in lp.attributes, "vectorize" in lp.attributes)
            for lp in k.walk()
            if isinstance(lp, ForOp)
        ]

    assert marks(it) == [
        ("i1", batch, batch > 1, False),
        ("i2", 8, True, False),
        ("i3", 2, False, False),
        ("i4", 4, False, False),
    ]
    assert [(n, u, v) for n, u, _, v in marks(ot)[:4]] == [
        ("i0", batch, False),
        ("i1", 8, False),
        ("i2t", 2, False),
        ("i3t", 4, False),
    ]


@pytest.mark.parametrize(
    "names, chosen", [(["f", "main"], "main"), (["g"], "g"), (["a", "b"], None)]
)
def test_the_main_function_of_a_module(names, chosen):
    """@main when there is one, else the only function (view_copies.main_function,
    memory_plan._main, prepack._main); with neither, a diagnostic / None."""
    from xdsl.utils.exceptions import VerifyException

    from dlpc.passes.lower import memory_plan, prepack, view_copies

    fns = [FuncOp(n, FunctionType.from_lists([], []), Region(Block())) for n in names]
    for fn in fns:
        fn.body.block.add_op(ReturnOp())
    module = ModuleOp(fns)
    for find in (memory_plan._main, prepack._main):
        got = find(module)
        assert (got.sym_name.data if got is not None else None) == chosen
    if chosen is None:
        with pytest.raises(VerifyException) as e:
            view_copies.main_function(module, "loop-x")
        assert str(e.value) == (
            "loop-x needs a func.func @main; the module has 2 functions, none named main"
        )
    else:
        assert view_copies.main_function(module, "loop-x").sym_name.data == chosen


# --------------------------------------------------- memory_plan's affine index forms


def test_affine_forms_add_scale_and_span():
    from xdsl.dialects.builtin import IndexType

    from dlpc.passes.lower.memory_plan import Lin, _divmod, _span

    i, j = Block(arg_types=[IndexType(), IndexType()]).args
    a = Lin(3, ((i, 2), (j, -1)))
    b = Lin(1, ((j, -1),))
    assert a.plus(b) == Lin(4, ((i, 2), (j, -2)))
    assert a.plus(b, -1) == Lin(2, ((i, 2),))  # the j terms cancel: dropped
    assert a.times(3) == Lin(9, ((i, 6), (j, -3)))
    assert a.times(0) == Lin(0, ())
    assert (a.coef(i), a.coef(j), Lin(0).coef(i)) == (2, -1, 0)
    ranges = {i: (0, 3), j: (0, 15)}
    assert _span(a, ranges) == (3 - 15, 3 + 6)
    assert _span(Lin(5), ranges) == (5, 5)
    # ((i * 16) + j) split by 16: i, j; by 8: refused (j reaches 15 >= 8)
    f = Lin(0, ((i, 16), (j, 1)))
    assert _divmod(f, 16, ranges) == (Lin(0, ((i, 1),)), Lin(0, ((j, 1),)))
    assert _divmod(f, 8, ranges) is None
    assert _divmod(Lin(35, ((i, 16),)), 16, ranges) == (Lin(2, ((i, 1),)), Lin(3))
    assert _divmod(Lin(-1, ((i, 16),)), 16, ranges) is None  # may be negative
    assert _divmod(f, 0, ranges) is None
    g = Lin(0, ((i, 16), (j, 1)))
    assert _divmod(g, 16, {i: (0, 3), j: (0, 16)}) is None  # j = 16 would carry


def test_index_forms_of_arith_ops():
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IndexType, IntegerAttr

    from dlpc.passes.lower.memory_plan import Lin, index_form

    i, j = Block(arg_types=[IndexType(), IndexType()]).args
    ranges = {i: (0, 3), j: (0, 15)}

    def const(n):
        return arith.ConstantOp(IntegerAttr(n, IndexType())).result

    sixteen = const(16)
    mul = arith.MuliOp(i, sixteen).result
    flat = arith.AddiOp(mul, j).result
    assert index_form(flat, ranges) == Lin(0, ((i, 16), (j, 1)))
    assert index_form(arith.MuliOp(sixteen, i).result, ranges) == Lin(0, ((i, 16),))
    assert index_form(arith.SubiOp(flat, j).result, ranges) == Lin(0, ((i, 16),))
    assert index_form(arith.DivSIOp(flat, sixteen).result, ranges) == Lin(0, ((i, 1),))
    assert index_form(arith.RemSIOp(flat, sixteen).result, ranges) == Lin(0, ((j, 1),))
    assert index_form(arith.RemUIOp(flat, sixteen).result, ranges) == Lin(0, ((j, 1),))
    assert index_form(arith.FloorDivSIOp(flat, sixteen).result, ranges) == Lin(0, ((i, 1),))
    assert index_form(arith.MuliOp(i, j).result, ranges) is None  # not affine
    assert index_form(arith.DivSIOp(flat, const(8)).result, ranges) is None
    assert index_form(arith.DivSIOp(flat, j).result, ranges) is None  # by a variable
    assert index_form(const(7), ranges) == Lin(7)
    other = Block(arg_types=[IndexType()]).args[0]
    assert index_form(arith.AddiOp(i, other).result, ranges) is None  # an unknown iv


def _copy_kernel(body):
    module = lower(build((8, 8), body), "graph-to-te,te-to-loop")
    return [k for k in module.walk() if isinstance(k, KernelOp)]


def test_copy_maps_of_slices_transposes_and_others():
    from dlpc.passes.lower.memory_plan import Lin, copy_map

    exp, sliced, _ = _copy_kernel(_strided_slice)
    assert copy_map(exp) is None  # computes: no copy
    m = copy_map(sliced)
    assert m is not None and len(m.ivs) == 2
    s0, s1 = m.ivs
    assert m.forms == [Lin(0, ((s0, 2),)), Lin(1, ((s1, 2),))]
    assert m.permutation() is None  # offsets and steps: no transpose
    _, t, _ = _copy_kernel(_transpose)
    m = copy_map(t)
    assert m is not None and m.permutation() == [1, 0]
    assert m.forms == [Lin(0, ((m.ivs[1], 1),)), Lin(0, ((m.ivs[0], 1),))]

    def head(x):  # rows 0..3 of 8: reads like the identity, but is no permutation
        a = g.ExpOp.make(x)
        s = g.SliceOp.make(a, starts=(0,), ends=(4,), axes=(0,))
        return [a, s, g.NegOp.make(s)]

    _, h, _ = _copy_kernel(head)
    m = copy_map(h)
    assert m is not None and m.forms == [Lin(0, ((m.ivs[0], 1),)), Lin(0, ((m.ivs[1], 1),))]
    assert m.permutation() is None


# ---------------------------------------------- seed 44's survivors (written after it)


def test_integer_max_and_min_start_at_the_types_bounds_in_te():
    """graph-to-te writes an integer max / min's init as the type's bound (an i1 as a
    bool), the reduction's own element type when there is no wider accumulator
    (_te_builder.py:90)."""
    from dlpc.dialects.te import ReduceOp
    from dlpc.passes.pipeline import parse_module

    want = {
        ("i32", "reduce_max"): -(2.0**31),
        ("i32", "reduce_min"): 2.0**31 - 1,
        ("i8", "reduce_max"): -128.0,
        ("i8", "reduce_min"): 127.0,
        ("i1", "reduce_max"): 0.0,
        ("i1", "reduce_min"): 1.0,
    }
    for (dtype, op), init in want.items():
        src = f"""
func.func @main(%x: tensor<3x{dtype}>) -> tensor<{dtype}> {{
  %y = graph.{op} %x {{axes = array<i64: 0>}} : (tensor<3x{dtype}>) -> tensor<{dtype}>
  func.return %y : tensor<{dtype}>
}}"""
        module = lower(parse_module(src), "graph-to-te")
        (reduce,) = [r for r in module.walk() if isinstance(r, ReduceOp)]
        assert reduce.init_value == init, (dtype, op)


PACK_ALIAS = """
func.func @main(%x: memref<16xf32>, %b: memref<16xf32>, %y: memref<16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["b"], dlpc.num_outputs = 1 : i64} {
  %arena = memref.alloc() {dlpc.arena} : memref<64xi8>
  %c0 = arith.constant 0 : index
  %bs = memref.view %arena[%c0][] : memref<64xi8> to memref<16xf32>
  %r = memref.reinterpret_cast %bs to offset: [0], sizes: [4, 4], strides: [4, 1] : memref<16xf32> to memref<4x4xf32>
  loop.kernel "bscale" {
    loop.for %j = 0 to 16 step 1 {name = "j"} {
      %v = memref.load %b[%j] : memref<16xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %bs[%j] : memref<16xf32>
    }
  }
  loop.kernel "overwrite" {
    loop.for %i = 0 to 4 step 1 {name = "i"} {
      loop.for %k = 0 to 4 step 1 {name = "k"} {
        %four = arith.constant 4 : index
        %m = arith.muli %i, %four : index
        %n = arith.addi %m, %k : index
        %v = memref.load %x[%n] : memref<16xf32>
        memref.store %v, %r[%i, %k] : memref<4x4xf32>
      }
    }
  }
  loop.kernel "out" {
    loop.for %j = 0 to 16 step 1 {name = "j"} {
      %v = memref.load %bs[%j] : memref<16xf32>
      memref.store %v, %y[%j] : memref<16xf32>
    }
  }
  func.return
}"""


def test_a_weight_only_kernel_whose_output_is_written_through_an_alias_is_not_prepared():
    """`bscale` reads only the param b, but its arena view is written again, through
    a reshape alias, by a kernel over the input: it stays in the call (prepack.py:413,
    `_aliases` following the reinterpret casts); the values (2 b overwritten by x)
    stay right."""
    from dlpc.passes.pipeline import parse_module

    module = lower(parse_module(PACK_ALIAS), "loop-prepack-weights")
    assert not any(PREPARE in k.attributes for k in module.walk() if isinstance(k, KernelOp))
    assert not any(PACKED in op.attributes for op in module.walk() if op.name == "memref.alloc")
    x = np.arange(16, dtype=np.float32)
    b = np.full(16, 5.0, np.float32)
    (y,) = CFunction(module, name="looppasses5_alias")(x, params={"b": b})
    np.testing.assert_array_equal(y, x)


def _winograd_chain(reshape_body: str) -> str:
    """An output transform reading its product through a graph.reshape kernel, whose
    body is `reshape_body` (hand-written: loop-opencl-winograd's matcher on shapes no
    model gives)."""
    return f"""
func.func @main(%p: memref<16xf32>, %y: memref<1x1x2x2xf32>)
    attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  %m = memref.alloc() : memref<16xf32>
  loop.kernel "reshape_0" attributes {{origin = "graph.reshape"}} {{
{reshape_body}
  }}
  loop.kernel "ot_1" attributes {{origin = "graph.winograd_output_transform"}} {{
    loop.for %i = 0 to 2 step 1 {{name = "i0"}} {{
      loop.for %j = 0 to 2 step 1 {{name = "i1"}} {{
        %c0 = arith.constant 0 : index
        %v = memref.load %m[%i] : memref<16xf32>
        memref.store %v, %y[%c0, %c0, %i, %j] : memref<1x1x2x2xf32>
      }}
    }}
  }}
  memref.dealloc %m : memref<16xf32>
  func.return
}}"""


def test_a_reshape_kernel_that_loads_nothing_ends_the_winograd_match():
    """(opencl_winograd.py:304: `_through_reshape` with a reshape kernel reading no
    buffer: no chain, nothing fused, no error)"""
    from dlpc.passes.lower.opencl_winograd import is_fused
    from dlpc.passes.pipeline import parse_module

    body = """    loop.for %k = 0 to 16 step 1 {name = "k"} {
      %z = arith.constant 0.0 : f32
      memref.store %z, %m[%k] : memref<16xf32>
    }"""
    module = lower(parse_module(_winograd_chain(body)), "loop-opencl-winograd")
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert [k.sym for k in kernels] == ["reshape_0", "ot_1"]
    assert not any(is_fused(k) for k in kernels)


def test_an_empty_winograd_kernel_is_left_alone():
    """(opencl_winograd.py:82: `_nest` of a kernel with no ops is no loop; the input
    transform's rewrite leaves it)"""
    from dlpc.passes.pipeline import parse_module

    src = """
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "winograd_input_transform_0" attributes {origin = "graph.winograd_input_transform"} {
  }
  loop.kernel "winograd_output_transform_1" attributes {origin = "graph.winograd_output_transform"} {
  }
  func.return
}"""
    module = lower(parse_module(src), "loop-opencl-winograd")
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert [len(list(k.block.ops)) for k in kernels] == [0, 0]
