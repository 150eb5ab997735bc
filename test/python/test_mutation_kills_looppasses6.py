"""Tests of the loop-level passes (issue 35, sixth round, area loop-passes of
bench/mutation.py), written from a branch-coverage run of the area's tests before the
round's samples: graph-to-te's fold of a compute into a reduction's epilogue (composed with
the reduction's own, refused where the compute is not a pointwise reader of it), on the te
evaluator against numpy; te-to-loop's row groups refused where a later member reads
another row, and kept where the read is guarded or sits in a reduction's epilogue, run in
C against numpy; a row group over a symbolic number of rows; integer reductions' bounds
and the `nsw` sum."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, Signedness, UnitAttr
from xdsl.ir import Block
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes
from xdsl.utils.exceptions import DiagnosticException

import dlpc
from dlpc import api
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.dialects import te
from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.model import Model
from dlpc.passes import pipeline
from dlpc.passes.lower.te_inline import fold_into_epilogue
from dlpc.passes.lower.te_to_loop import init_attr
from dlpc.passes.pipeline import parse_module
from dlpc.reference.te import run_te
from dlpc.universe import PASSES


def lower(module: ModuleOp, spec: str = "te-to-loop") -> ModuleOp:
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, spec).apply(Context(), module)
    module.verify()
    return module


def te_ops(module: ModuleOp) -> dict[str, te.ComputeOp | te.ReduceOp]:
    return {o.compute_name: o for o in module.walk() if isinstance(o, te.ComputeOp | te.ReduceOp)}


def kernels(module: ModuleOp) -> list[str]:
    return [k.sym for k in module.walk() if isinstance(k, KernelOp)]


RNG = np.random.default_rng(6)
X48 = RNG.standard_normal((4, 8)).astype(np.float32)
C4 = np.array([1.0, -10.0, 0.5, -0.25], np.float32)

# ------------------------------------------------------ te-inline: fold into an epilogue

SUM_THEN = """
func.func @main(%x: tensor<4x8xf32>, %c: tensor<4xf32>) -> {out} {{
  %s = te.reduce "sum_0" (%i0) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<4xf32> {{
    %a = te.read %x[%i0, %r0] : tensor<4x8xf32>
    te.yield %a : f32
  }}{epilogue}
  {consumer}
  func.return {ret}
}}"""

BIAS = """ epilogue (%acc : f32, %j0 : index) {
    %cc = te.read %c[%j0] : tensor<4xf32>
    %t = arith.addf %acc, %cc : f32
    te.yield %t : f32
  }"""

RELU = """%y = te.compute "relu_1" (%i0) : tensor<4xf32> {
    %v = te.read %s[%i0] : tensor<4xf32>
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %z : f32
    te.yield %r : f32
  }"""


def _fold_src(epilogue: str = BIAS, consumer: str = RELU, out: str = "tensor<4xf32>", ret=None):
    return SUM_THEN.format(out=out, epilogue=epilogue, consumer=consumer, ret=ret or f"%y : {out}")


@pytest.mark.parametrize("bias", [True, False], ids=["with-epilogue", "plain"])
def test_a_pointwise_reader_becomes_the_reductions_epilogue(bias):
    """relu(sum(x) + c): the relu is composed after the reduction's own epilogue (the bias)
    into one te.reduce named after the consumer; without an epilogue it is the whole one."""
    module = parse_module(_fold_src(BIAS if bias else ""))
    ops = te_ops(module)
    fused = fold_into_epilogue(ops["sum_0"], ops["relu_1"])
    assert fused is not None and fused.compute_name == "relu_1" and fused.has_epilogue
    assert list(te_ops(module)) == ["relu_1"]
    (got,) = run_te(module, [X48, C4])
    np.testing.assert_allclose(got, np.maximum(X48.sum(1) + (C4 if bias else 0), 0), rtol=1e-6)
    (k,) = kernels(lower(module))
    assert k == "relu_1"
    (got,) = CFunction(module, name="looppasses6_fold")(X48, C4)
    np.testing.assert_allclose(got, np.maximum(X48.sum(1) + (C4 if bias else 0), 0), rtol=1e-6)


def test_the_fused_reduction_keeps_its_symbolic_and_nsw_marks():
    module = parse_module(_fold_src())
    ops = te_ops(module)
    ops["sum_0"].attributes[te.NSW_SUM] = UnitAttr()
    ops["sum_0"].attributes[te.SYMBOLIC_OVER] = IntegerAttr(7, 64)  # (any attribute)
    fused = fold_into_epilogue(ops["sum_0"], ops["relu_1"])
    assert fused is not None
    assert fused.attributes[te.NSW_SUM] == UnitAttr()
    assert fused.attributes[te.SYMBOLIC_OVER] == IntegerAttr(7, 64)
    plain = parse_module(_fold_src())
    ops = te_ops(plain)
    fused = fold_into_epilogue(ops["sum_0"], ops["relu_1"])
    assert fused is not None
    assert te.NSW_SUM not in fused.attributes and te.SYMBOLIC_OVER not in fused.attributes


TRANSPOSED = """%y = te.compute "flip_1" (%i0) : tensor<4xf32> {
    %c3 = arith.constant 3 : index
    %j = arith.subi %c3, %i0 : index
    %v = te.read %s[%j] : tensor<4xf32>
    te.yield %v : f32
  }"""
BROADCAST = """%y = te.compute "flip_1" (%i0, %i1) : tensor<4x8xf32> {
    %v = te.read %s[%i0] : tensor<4xf32>
    %w = te.read %x[%i0, %i1] : tensor<4x8xf32>
    %r = arith.subf %w, %v : f32
    te.yield %r : f32
  }"""
TWICE = """%y = te.compute "flip_1" (%i0) : tensor<4xf32> {
    %v = te.read %s[%i0] : tensor<4xf32>
    te.yield %v : f32
  }
  %u = te.compute "other_2" (%i0) : tensor<4xf32> {
    %v = te.read %s[%i0] : tensor<4xf32>
    %r = arith.negf %v : f32
    te.yield %r : f32
  }"""

S = X48.sum(1) + C4
REFUSED = [
    ("another-index", TRANSPOSED, "tensor<4xf32>", None, [S[::-1]]),
    ("another-shape", BROADCAST, "tensor<4x8xf32>", None, [X48 - S[:, None]]),
    (
        "read-elsewhere",
        TWICE,
        "(tensor<4xf32>, tensor<4xf32>)",
        "%y, %u : tensor<4xf32>, tensor<4xf32>",
        [S, -S],
    ),
    (
        "returned",
        RELU,
        "(tensor<4xf32>, tensor<4xf32>)",
        "%y, %s : tensor<4xf32>, tensor<4xf32>",
        [np.maximum(S, 0), S],
    ),
]


@pytest.mark.parametrize("name,consumer,out,ret,want", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_reader_that_is_not_pointwise_is_no_epilogue(name, consumer, out, ret, want):
    """Read at another index, of another shape, the reduction read by another op too or
    returned: no fold (None), the module as it was, and its answers."""
    module = parse_module(_fold_src(consumer=consumer, out=out, ret=ret))
    before = str(module)
    ops = te_ops(module)
    consumer_name = [n for n in ops if n != "sum_0" and n != "other_2"][0]
    assert fold_into_epilogue(ops["sum_0"], ops[consumer_name]) is None  # type: ignore[arg-type]
    assert str(module) == before
    got = run_te(module, [X48, C4])
    for g_, w in zip(got, want):
        np.testing.assert_allclose(g_, w, rtol=1e-6)


# ------------------------------------------------------------ te-to-loop: row groups

ROWS = """
func.func @main(%x: tensor<32x8xf32>) -> tensor<32x8xf32> {{
  %s = te.reduce "sum_0" (%i0) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<32xf32> {{
    %a = te.read %x[%i0, %r0] : tensor<32x8xf32>
    te.yield %a : f32
  }}{second}
  %y = te.compute "sub_1" (%i0, %i1) : tensor<32x8xf32> {{
    %v = te.read %x[%i0, %i1] : tensor<32x8xf32>
    {read}
    %r = arith.subf %v, %m : f32
    te.yield %r : f32
  }}
  func.return %y : tensor<32x8xf32>
}}"""
X328 = RNG.standard_normal((32, 8)).astype(np.float32)


def _rows(read: str, second: str = ""):
    module = lower(parse_module(ROWS.format(read=read, second=second)))
    (y,) = CFunction(module, name="looppasses6_rows")(X328)
    return kernels(module), module, y


def test_a_member_read_at_its_own_row_makes_one_blocked_kernel():
    names, module, y = _rows("%m = te.read %s[%i0] : tensor<32xf32>")
    assert names == ["sub_1"]
    assert [lp.upper for lp in module.walk() if isinstance(lp, ForOp) and lp.loop_name == "b"][
        :1
    ] == [16]
    np.testing.assert_allclose(y, X328 - X328.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_member_read_at_another_row_is_no_group():
    """sub_1 reads the sum of row 0 for every row: a block's buffer holds its own rows'
    sums only, so the two stay kernels of their own (te_to_loop.py `_group_ok`)."""
    names, _, y = _rows("%c0 = arith.constant 0 : index\n    %m = te.read %s[%c0] : tensor<32xf32>")
    assert names == ["sum_0", "sub_1"]
    np.testing.assert_allclose(y, X328 - X328[0].sum(), rtol=1e-5, atol=1e-6)


def test_a_guarded_read_at_its_own_row_stays_in_the_group():
    """The read sits in an scf.if of the compute's body: its owner is found through it."""
    read = """%c0 = arith.constant 0 : index
    %pos = arith.cmpi sge, %i1, %c0 : index
    %m = scf.if %pos -> (f32) {
      %q = te.read %s[%i0] : tensor<32xf32>
      scf.yield %q : f32
    } else {
      %z = arith.constant 0.0 : f32
      scf.yield %z : f32
    }"""
    names, _, y = _rows(read)
    assert names == ["sub_1"]
    np.testing.assert_allclose(y, X328 - X328.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_reduction_epilogue_reading_the_statistic_at_its_row_joins_the_group():
    """t = sum(x * s) + s by rows: t's epilogue reads s at its output index (after the
    accumulator argument), so sum, t and the last compute are one kernel."""
    second = """
  %t = te.reduce "dot_2" (%i0) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<32xf32> {
    %a = te.read %x[%i0, %r0] : tensor<32x8xf32>
    %b = te.read %s[%i0] : tensor<32xf32>
    %p = arith.mulf %a, %b : f32
    te.yield %p : f32
  } epilogue (%acc : f32, %j0 : index) {
    %b = te.read %s[%j0] : tensor<32xf32>
    %q = arith.addf %acc, %b : f32
    te.yield %q : f32
  }"""
    names, _, y = _rows("%m = te.read %t[%i0] : tensor<32xf32>", second)
    assert names == ["sub_1"]
    s = X328.sum(1, keepdims=True)
    np.testing.assert_allclose(y, X328 - ((X328 * s).sum(1, keepdims=True) + s), rtol=1e-4)


SOFTMAX_ROWS = """
func.func @main(%x: tensor<?x12xf32, ["b"]>) -> tensor<?x12xf32, ["b"]> {
  %y = graph.softmax %x {axis = -1 : i64} : (tensor<?x12xf32, ["b"]>) -> tensor<?x12xf32, ["b"]>
  func.return %y : tensor<?x12xf32, ["b"]>
}"""


def test_a_row_group_over_a_symbolic_number_of_rows():
    """Softmax over b rows, b symbolic: the block loop steps by the block and each row loop
    stops at the call's b (te_to_loop.py `row_group`'s split); any b, one program."""
    c = dlpc.compile(Model(pipeline.parse_module(SOFTMAX_ROWS)))
    for b in (1, 3, 16, 17, 40):
        x = np.random.default_rng(b).standard_normal((b, 12)).astype(np.float32)
        (y,) = c(x)
        e = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert c.function.stats["compiles"] == 1


# ------------------------------------------------------- te-to-loop: integer reductions


@pytest.mark.parametrize(
    "width,lo,hi", [(8, 0, 255), (16, 0, 65535), (32, 0, 2**32 - 1), (64, 0, 2**64 - 1)]
)
def test_unsigned_max_and_min_start_at_the_unsigned_bounds(width, lo, hi):
    ty = IntegerType(width, Signedness.UNSIGNED)
    assert init_attr(float("-inf"), ty) == IntegerAttr(lo, ty)
    assert init_attr(float("inf"), ty) == IntegerAttr(hi, ty)
    assert init_attr(5.0, ty) == IntegerAttr(5, ty)


NSW = """
func.func @main(%x: tensor<2x3xi32>) -> tensor<2xi32> {{
  %s = te.reduce "sum_0" (%i0) reduce (%r0) over [3] combiner "{combiner}" init {init} : tensor<2xi32> {{
    %a = te.read %x[%i0, %r0] : tensor<2x3xi32>
    te.yield %a : i32
  }} attributes {{dlpc.nsw_sum}}
  func.return %s : tensor<2xi32>
}}"""


def test_an_nsw_sum_is_a_signed_add_in_the_loop_ir():
    module = lower(parse_module(NSW.format(combiner="add", init=0)))
    (add,) = [op for op in module.walk() if isinstance(op, arith.AddiOp)]
    assert "nsw" in str(add.properties["overflowFlags"])
    x = np.array([[1, -2, 3], [2**30, 2**29, -5]], np.int32)
    (got,) = CFunction(module, name="looppasses6_nsw")(x)
    np.testing.assert_array_equal(got, x.sum(1))
    with pytest.raises(DiagnosticException, match='te.reduce "sum_0" has dlpc.nsw_sum but is no'):
        lower(parse_module(NSW.format(combiner="max", init=0)))


# ------------------------------------------------- loop-prepack-weights: which packs

PACK = """
func.func @main(%x: memref<2x4xf32>, %w: memref<4xf32>, %y: memref<2x4xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64}} {{
  %arena = memref.alloc() {{dlpc.arena}} : memref<64xi8>{main}
  loop.kernel "scale" {{{pre}
    %Cp = memref.alloca({n}) : {ty}{before}
    loop.for %j = 0 to 4 step 1 {{name = "Cp_j"}} {{
      %v0 = memref.load %w[%j] : memref<4xf32>
      {fill}
      memref.store %v, %Cp[%j] : {ty}{inside}
    }}{after}
    loop.for %i = 0 to 2 step 1 {{name = "si"}} {{
      loop.for %j2 = 0 to 4 step 1 {{name = "sj"}} {{
        %a = memref.load %x[%i, %j2] : memref<2x4xf32>
        %c = memref.load %Cp[%j2] : {ty}
        %p = arith.mulf %a, %c : f32
        memref.store %p, %y[%i, %j2] : memref<2x4xf32>
      }}
    }}
  }}
  func.return
}}"""
PX = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
PW = np.array([1, 2, 3, 4], np.float32)
PACK_DEFAULT = dict(
    main="",
    pre="",
    n="",
    ty="memref<4xf32>",
    before="",
    fill="%v = arith.addf %v0, %v0 : f32",
    inside="",
    after="",
)
TWICE_NEST = """
    loop.for %k = 0 to 4 step 1 {name = "Cp_k"} {
      %u = memref.load %Cp[%k] : memref<4xf32>
      %u2 = arith.addf %u, %u : f32
      memref.store %u2, %Cp[%k] : memref<4xf32>
    }"""
# name -> (the template's parts, packed bytes, y / x as a function of x)
PACKS = {
    "weights": ({}, 64, lambda x: 2 * PW),
    "an-input": (
        dict(
            fill="%c0 = arith.constant 0 : index\n      "
            "%xv = memref.load %x[%c0, %j] : memref<2x4xf32>\n      %v = arith.addf %v0, %xv : f32"
        ),
        0,
        lambda x: PW + x[0],
    ),
    "dynamic-size": (
        dict(pre="\n    %n4 = arith.constant 4 : index", n="%n4", ty="memref<?xf32>"),
        0,
        None,
    ),
    "strided": (dict(ty="memref<4xf32, strided<[1]>>"), 0, None),
    "filled-twice": (dict(after=TWICE_NEST), 0, lambda x: 4 * PW),
    "read-in-its-nest": (
        dict(inside="\n      %r = memref.load %Cp[%j] : memref<4xf32>"),
        0,
        lambda x: 2 * PW,
    ),
    "read-before-filled": (
        dict(
            before="\n    %c0b = arith.constant 0 : index\n    %r = memref.load %Cp[%c0b] : memref<4xf32>"
        ),
        0,
        lambda x: 2 * PW,
    ),
    "a-kernel-constant": (
        dict(pre="\n    %k3 = arith.constant 3.0 : f32", fill="%v = arith.mulf %v0, %k3 : f32"),
        64,
        lambda x: 3 * PW,
    ),
    "a-kernel-load": (
        dict(
            pre="\n    %c0l = arith.constant 0 : index\n    %s = memref.load %x[%c0l, %c0l] : memref<2x4xf32>",
            fill="%v = arith.mulf %v0, %s : f32",
        ),
        0,
        lambda x: PW * x[0, 0],
    ),
    "a-main-scalar": (
        dict(
            main="\n  %one = arith.constant 1.5 : f32\n  %s = arith.addf %one, %one : f32",
            fill="%v = arith.mulf %v0, %s : f32",
        ),
        0,
        lambda x: 3 * PW,
    ),
    "a-main-constant": (
        dict(main="\n  %s = arith.constant 1.5 : f32", fill="%v = arith.mulf %v0, %s : f32"),
        64,
        lambda x: 1.5 * PW,
    ),
    # loop-passes seed 45's prepack.py:131 (`_pure`'s `and` -> `or`: every op without
    # regions counted pure): an allocation in the nest is no plain pack (written after it)
    "an-allocation-in-its-nest": (
        dict(inside="\n      %tmp = memref.alloca() : memref<1xf32>"),
        0,
        lambda x: 2 * PW,
    ),
    "stores-elsewhere": (
        dict(
            inside="\n      %c0o = arith.constant 0 : index\n      "
            "memref.store %v, %y[%c0o, %j] : memref<2x4xf32>"
        ),
        0,
        lambda x: 2 * PW,
    ),
}


@pytest.mark.parametrize("name", list(PACKS))
def test_a_kernel_local_pack_is_resident_only_when_it_is_a_plain_weight_pack(name):
    """A local buffer filled by one nest from weights (and constants, and pure ops of the
    kernel) then only read is packed once (64 bytes: 16 rounded up to ALIGN); one filled
    from an input or from a load in the kernel, of a dynamic size or a strided layout,
    written by two nests, read inside or before its nest, filled from a scalar @main
    computes, or whose nest stores elsewhere too, stays in the call. Each in C."""
    from dlpc.passes.lower.prepack import PREPARE, prepack

    parts, nbytes, scale = PACKS[name]
    module = parse_module(PACK.format(**{**PACK_DEFAULT, **parts}))
    assert prepack(module) == nbytes
    prepared = [k.sym for k in module.walk() if isinstance(k, KernelOp) and PREPARE in k.attributes]
    assert prepared == (["Cp_prepack"] if nbytes else [])
    if scale is None:
        return
    (y,) = CFunction(module, name="looppasses6_pack")(PX, params={"w": PW})
    np.testing.assert_array_equal(y, PX * scale(PX))
    x = PX + 1  # another input: the pack of an input follows it
    (y,) = CFunction(module, name="looppasses6_pack")(x, params={"w": PW})
    np.testing.assert_array_equal(y, x * scale(x))
    w2 = PW[::-1].copy()  # other weights: packed again for them
    (y2,) = CFunction(module, name="looppasses6_pack")(x, params={"w": w2})
    assert not np.array_equal(y2, y)


ROWS_PACK = """
func.func @main(%x: memref<3x4xf32>, %w: memref<3x4xf32>, %y: memref<3x4xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64}} {{
  %arena = memref.alloc() {{dlpc.arena}} : memref<64xi8>
  loop.kernel "rows" {{
    loop.for %i = {lo} to {hi} step {st} {{name = "ri"}} {{
      %lo = arith.constant {lo} : index
      %st = arith.constant {st} : index
      %d = arith.subi %i, %lo : index
      %r = arith.divsi %d, %st : index
      %Cp = memref.alloca() : memref<4xf32>
      loop.for %j = 0 to 4 step 1 {{name = "Cp_j"}} {{
        %v = memref.load %w[%r, %j] : memref<3x4xf32>
        memref.store %v, %Cp[%j] : memref<4xf32>
      }}
      loop.for %j2 = 0 to 4 step 1 {{name = "sj"}} {{
        %a = memref.load %x[%r, %j2] : memref<3x4xf32>
        %c = memref.load %Cp[%j2] : memref<4xf32>
        %p = arith.mulf %a, %c : f32
        memref.store %p, %y[%r, %j2] : memref<3x4xf32>
      }}
    }}
  }}
  func.return
}}"""


@pytest.mark.parametrize("lo,hi,st", [(0, 3, 1), (2, 5, 1), (0, 6, 2), (1, 7, 2)])
def test_a_pack_per_iteration_of_a_loop_is_at_its_trip_index(lo, hi, st):
    """The pack depends on the row loop (lower bound lo, step st): the resident block holds
    one pack a row, stored and loaded at (i - lo) / st, filled by the kernel's own pure
    index ops cloned into the packing kernel."""
    from dlpc.passes.lower.prepack import PREPARE, prepack

    module = parse_module(ROWS_PACK.format(lo=lo, hi=hi, st=st))
    assert prepack(module) == 64  # 3 x 4 floats, rounded up to ALIGN
    prepared = [k for k in module.walk() if isinstance(k, KernelOp) and PREPARE in k.attributes]
    assert [k.sym for k in prepared] == ["Cp_prepack"]
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    w = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1].copy()
    (y,) = CFunction(module, name="looppasses6_rowpack")(x, params={"w": w})
    np.testing.assert_array_equal(y, x * w)


# ------------------------------------------------ loop-memory-plan: bytes per element

ELT_GRAPH = """
func.func @main(%x: tensor<4x8x{t}>) -> tensor<4x8x{t}> {{
  %a = graph.add %x, %x : (tensor<4x8x{t}>, tensor<4x8x{t}>) -> tensor<4x8x{t}>
  %p = graph.transpose %a {{perm = array<i64: 1, 0>}} : (tensor<4x8x{t}>) -> tensor<8x4x{t}>
  %b = graph.transpose %p {{perm = array<i64: 1, 0>}} : (tensor<8x4x{t}>) -> tensor<4x8x{t}>
  %c = graph.add %b, %x : (tensor<4x8x{t}>, tensor<4x8x{t}>) -> tensor<4x8x{t}>
  func.return %c : tensor<4x8x{t}>
}}"""


@pytest.mark.parametrize(
    "t,size",
    [("ui8", 1), ("i8", 1), ("ui16", 2), ("i16", 2), ("f16", 2), ("ui32", 4), ("f32", 4)]
    + [("ui64", 8), ("i64", 8), ("f64", 8)],
)
def test_the_plan_sizes_each_element_type_by_its_bytes(t, size):
    """Three 32-element intermediates (a, its transpose, b; two live at once): the arena
    holds two, each rounded up to ALIGN, and the intermediates add up to 96 elements. An
    unsigned type takes its width, as the signless one (it took 8 bytes each: ui8's plan
    was 8 times its bytes). In C against numpy, wrapping in the type."""
    from dlpc.passes.lower.memory_plan import ALIGN

    module = lower(parse_module(ELT_GRAPH.format(t=t)), "graph-to-te,te-to-loop,loop-memory-plan")
    fn = next(op for op in module.walk() if op.name == "func.func")
    arena = fn.attributes["dlpc.arena_bytes"].value.data  # type: ignore[union-attr]
    total = fn.attributes["dlpc.intermediate_bytes"].value.data  # type: ignore[union-attr]
    assert total == 96 * size
    assert arena == 2 * -(-32 * size // ALIGN) * ALIGN
    dtype = {"ui": "uint", "i": "int", "f": "float"}[t.rstrip("0123456789")] + t.lstrip("uif")
    x = (np.arange(32) * 37 % 251).astype(dtype).reshape(4, 8)
    (got,) = CFunction(module, name="looppasses6_elt")(x)
    np.testing.assert_array_equal(got, x + x + x)


# ------------------------------------------------ loop-views: which copies become views

VA = "memref<2x3x4xf32>"
VT = "memref<3x2x4xf32>"


def _nest(v, shape, body):
    head = "".join(
        f'loop.for %{v}{d} = 0 to {n} step 1 {{name = "{v}{d}"}} {{\n' for d, n in enumerate(shape)
    )
    return head + body + "\n" + "}\n" * len(shape)


EXP = _nest(
    "i",
    (2, 3, 4),
    f"%v = memref.load %x[%i0, %i1, %i2] : {VA}\n%e = math.exp %v : f32\nmemref.store %e, %a[%i0, %i1, %i2] : {VA}",
)
BACK = _nest(
    "b",
    (2, 3, 4),
    f"%v = memref.load %a[%b0, %b1, %b2] : {VA}\n%c1 = arith.constant 1.0 : f32\n%s = arith.addf %v, %c1 : f32\nmemref.store %s, %a[%b0, %b1, %b2] : {VA}",
)


def _copy(value="%v"):
    return _nest(
        "j",
        (3, 2, 4),
        f"%v = memref.load %a[%j1, %j0, %j2] : {VA}\n{'' if value == '%v' else value}\nmemref.store {'%v' if value == '%v' else '%w'}, %t[%j0, %j1, %j2] : {VT}",
    )


NEG = _nest(
    "k",
    (3, 2, 4),
    f"%v = memref.load %t[%k0, %k1, %k2] : {VT}\n%n = arith.negf %v : f32\nmemref.store %n, %out[%k0, %k1, %k2] : {VT}",
)
OVERWRITE_A = (
    '\nloop.kernel "again_3" {\n'
    + _nest(
        "o", (2, 3, 4), f"%z = arith.constant 0.0 : f32\nmemref.store %z, %a[%o0, %o1, %o2] : {VA}"
    )
    + "}"
)
STORE_T = (
    '\nloop.kernel "poke_4" {\n%c0 = arith.constant 0 : index\n%five = arith.constant 5.0 : f32\nmemref.store %five, %t[%c0, %c0, %c0] : '
    + VT
    + "\n}"
)
READ_A_AFTER = (
    '\nloop.kernel "sum_5" {\n%c0 = arith.constant 0 : index\n%r = memref.load %a[%c0, %c0, %c0] : '
    + VA
    + "\nmemref.store %r, %s1[%c0] : memref<1xf32>\n}"
)


def _views_module(back="", copy="%v", before="", after="", free_a=True, extra_out=False):
    outs = f"%out: {VT}" + (", %s1: memref<1xf32>" if extra_out else "")
    return f"""
func.func @main(%x: {VA}, {outs}) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = {2 if extra_out else 1} : i64}} {{
  %a = memref.alloc() : {VA}
  %t = memref.alloc() : {VT}
  loop.kernel "exp_0" attributes {{origin = "graph.exp"}} {{
{EXP}{back}
  }}{before}
  loop.kernel "t_1" attributes {{origin = "graph.transpose"}} {{
{_copy(copy)}
  }}{after}
  loop.kernel "neg_2" attributes {{origin = "graph.neg"}} {{
{NEG}
  }}
  memref.dealloc %t : {VT}{(chr(10) + "  memref.dealloc %a : " + VA) if free_a else ""}
  func.return
}}"""


VX = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
VE = np.exp(VX)
VIEWS = {
    "written-through": ({}, ["exp_0", "neg_2"]),
    "source-never-freed": (dict(free_a=False), ["exp_0", "neg_2"]),
    "producer-reads-back": (dict(back=BACK), ["exp_0", "neg_2"]),
    "not-a-copy": (dict(copy="%w = arith.negf %v : f32"), ["exp_0", "t_1", "neg_2"]),
    "source-written-after": (dict(after=OVERWRITE_A), ["exp_0", "t_1", "again_3", "neg_2"]),
    "copy-stored-into-after": (dict(after=STORE_T), ["exp_0", "poke_4", "neg_2"]),
    "copy-stored-into-before": (dict(before=STORE_T), ["exp_0", "poke_4", "t_1", "neg_2"]),
    "source-read-after": (dict(after=READ_A_AFTER, extra_out=True), ["exp_0", "sum_5", "neg_2"]),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_a_transpose_copy_is_a_view_only_where_its_values_stay(name):
    """a = exp(x) (2x3x4), t = a transposed (1, 0, 2) by a copy kernel, out = -t: the copy
    is written through (exp stores t; its own read-back of a too) or read through, and
    stays where a value it copies would change: the copy kernel computes, a is written
    after it, t is written before it. In C against numpy."""
    kw, kernels_left = VIEWS[name]
    module = parse_module(_views_module(**kw))
    fn = next(op for op in module.walk() if op.name == "func.func")
    from dlpc.passes.lower.memory_plan import view_copies

    assert view_copies(fn) == (1 if "t_1" not in kernels_left else 0)
    assert kernels(module) == kernels_left
    outs = CFunction(module, name="looppasses6_views")(VX)
    want = -(VE + (1 if name == "producer-reads-back" else 0)).transpose(1, 0, 2)
    if name == "not-a-copy":
        want = -want
    if name == "copy-stored-into-after":
        want[0, 0, 0] = -5
    np.testing.assert_allclose(outs[0], want, rtol=1e-6)
    if name == "source-read-after":
        np.testing.assert_allclose(outs[1], VE[0, 0, 0:1], rtol=1e-6)


# ------------------------------------------------ loop-memory-plan: in place or not

IP = "memref<64xf32>"


def _in_place_module(k2):
    return f"""
func.func @main(%x: {IP}, %out: {IP}) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  %a = memref.alloc() : {IP}
  loop.kernel "exp_0" {{
    loop.for %i = 0 to 64 step 1 {{name = "i"}} {{
      %v = memref.load %x[%i] : {IP}
      %e = math.exp %v : f32
      memref.store %e, %a[%i] : {IP}
    }}
  }}
  %b = memref.alloc() : {IP}
  loop.kernel "k_1" {{
    {k2}
  }}
  memref.dealloc %a : {IP}
  loop.kernel "inc_2" {{
    loop.for %i = 0 to 64 step 1 {{name = "i"}} {{
      %v = memref.load %b[%i] : {IP}
      %one = arith.constant 1.0 : f32
      %s = arith.addf %v, %one : f32
      memref.store %s, %out[%i] : {IP}
    }}
  }}
  memref.dealloc %b : {IP}
  func.return
}}"""


IP_NEG = """loop.for %i = 0 to 64 step 1 {name = "i"} {
      %v = memref.load %a[%i] : memref<64xf32>
      %n = arith.negf %v : f32
      memref.store %n, %b[%i] : memref<64xf32>
    }"""
IN_PLACE = {
    "in-place": (IP_NEG, 256, lambda e: -e + 1),
    "writes-its-source": (
        IP_NEG.replace(
            "memref.store %n, %b[%i] : memref<64xf32>",
            "memref.store %n, %b[%i] : memref<64xf32>\n      %z = arith.constant 0.0 : f32\n      memref.store %z, %a[%i] : memref<64xf32>",
        ),
        512,
        lambda e: -e + 1,
    ),
    "two-blocks": (
        """loop.for %i = 0 to 64 step 1 {name = "i"} {
      %v = memref.load %a[%i] : memref<64xf32>
      %c = arith.constant 1.5 : f32
      %big = arith.cmpf ogt, %v, %c : f32
      scf.if %big {
        %n = arith.negf %v : f32
        memref.store %n, %b[%i] : memref<64xf32>
      } else {
        memref.store %v, %b[%i] : memref<64xf32>
      }
    }""",
        512,
        lambda e: np.where(e > 1.5, -e, e) + 1,
    ),
    "a-copy": (
        '"memref.copy"(%a, %b) : (memref<64xf32>, memref<64xf32>) -> ()',
        512,
        lambda e: e + 1,
    ),
}


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_an_output_goes_over_its_dying_input_only_for_plain_reads(name):
    """b = f(a), a dying there: b takes a's slot (one 256-byte buffer) when the kernel
    reads each a[i] before storing b[i], in one block; not when it also stores into a,
    when its accesses sit in different blocks (an scf.if), or for a memref.copy (two
    buffers, 512 bytes). In C against numpy."""
    k2, arena, want = IN_PLACE[name]
    module = lower(parse_module(_in_place_module(k2)), "loop-memory-plan")
    fn = next(op for op in module.walk() if op.name == "func.func")
    assert fn.attributes["dlpc.arena_bytes"].value.data == arena  # type: ignore[union-attr]
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    (y,) = CFunction(module, name="looppasses6_in_place")(x)
    np.testing.assert_allclose(y, want(np.exp(x)), rtol=1e-6, atol=1e-6)


# ------------------------------------------- loop-views: reshape copies become aliases

RA = "memref<4x8xf32>"
RR = "memref<2x16xf32>"


def _nest2(v, shape, body):
    return (
        f'loop.for %{v}0 = 0 to {shape[0]} step 1 {{name = "{v}0"}} {{\n'
        f'loop.for %{v}1 = 0 to {shape[1]} step 1 {{name = "{v}1"}} {{\n{body}\n}}\n}}'
    )


R_EXP = _nest2(
    "i",
    (4, 8),
    f"%v = memref.load %x[%i0, %i1] : {RA}\n%e = math.exp %v : f32\nmemref.store %e, %a[%i0, %i1] : {RA}",
)
RESHAPE = _nest2(
    "j",
    (2, 16),
    f"%c16 = arith.constant 16 : index\n%c8 = arith.constant 8 : index\n%f = arith.muli %j0, %c16 : index\n%g = arith.addi %f, %j1 : index\n%p = arith.divui %g, %c8 : index\n%q = arith.remui %g, %c8 : index\n%v = memref.load %a[%p, %q] : {RA}\nmemref.store %v, %r[%j0, %j1] : {RR}",
)
R_NEG = _nest2(
    "k",
    (2, 16),
    f"%v = memref.load %r[%k0, %k1] : {RR}\n%n = arith.negf %v : f32\nmemref.store %n, %out0[%k0, %k1] : {RR}",
)
DBL = _nest2(
    "d",
    (2, 16),
    f"%v = memref.load %out0[%d0, %d1] : {RR}\n%two = arith.constant 2.0 : f32\n%m = arith.mulf %v, %two : f32\nmemref.store %m, %c[%d0, %d1] : {RR}",
)
SUM = _nest2(
    "s",
    (2, 16),
    f"%v = memref.load %r[%s0, %s1] : {RR}\n%w = memref.load %c[%s0, %s1] : {RR}\n%m = arith.addf %v, %w : f32\nmemref.store %m, %out1[%s0, %s1] : {RR}",
)
POKE = f"%z = arith.constant 0 : index\n%seven = arith.constant 7.0 : f32\nmemref.store %seven, %r[%z, %z] : {RR}"


def _alias_module(poke=False, free_r=True):
    poke_text = ('\n  loop.kernel "poke_5" {\n' + POKE + "\n  }") if poke else ""
    return f"""
func.func @main(%x: {RA}, %out0: {RR}, %out1: {RR}) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64}} {{
  %a = memref.alloc() : {RA}
  loop.kernel "exp_0" attributes {{origin = "graph.exp"}} {{
{R_EXP}
  }}
  %r = memref.alloc() : {RR}
  loop.kernel "reshape_1" attributes {{origin = "graph.reshape"}} {{
{RESHAPE}
  }}
  loop.kernel "neg_2" attributes {{origin = "graph.neg"}} {{
{R_NEG}
  }}
  memref.dealloc %a : {RA}{poke_text}
  %c = memref.alloc() : {RR}
  loop.kernel "dbl_3" attributes {{origin = "graph.mul"}} {{
{DBL}
  }}
  loop.kernel "sum_4" attributes {{origin = "graph.add"}} {{
{SUM}
  }}
  memref.dealloc %c : {RR}{(chr(10) + "  memref.dealloc %r : " + RR) if free_r else ""}
  func.return
}}"""


ALIASES = {
    # name -> (the module's options, kernels and deallocs after loop-views)
    "alias": (
        {},
        ["exp_0", "neg_2", "dbl_3", "sum_4", "free c", "free a"],
    ),
    "alias-never-freed": (
        dict(free_r=False),
        ["exp_0", "neg_2", "dbl_3", "sum_4", "free c"],
    ),
    "written-again": (
        dict(poke=True),
        ["exp_0", "reshape_1", "neg_2", "free a", "poke_5", "dbl_3", "sum_4", "free c", "free r"],
    ),
}


@pytest.mark.parametrize("name", list(ALIASES))
def test_a_reshape_copy_is_an_alias_freed_with_it_unless_written_again(name):
    """r = a reshaped 4x8 -> 2x16 by a copy kernel, read after a's dealloc: the kernel
    becomes a reinterpret_cast of a, and a is freed where r was (after the last reader),
    or never when r never is; a reshape written again later stays a copy. The plan
    afterwards in C against numpy (r + 2 * -r, c placed while r lives)."""
    options, order = ALIASES[name]
    module = lower(parse_module(_alias_module(**options)), "loop-views")
    fn = next(op for op in module.walk() if op.name == "func.func")
    got = [
        op.sym if isinstance(op, KernelOp) else f"free {op.operands[0].name_hint}"
        for op in fn.body.block.ops  # type: ignore[union-attr]
        if isinstance(op, KernelOp) or op.name == "memref.dealloc"
    ]
    assert got == order
    lower(module, "loop-memory-plan")
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    y0, y1 = CFunction(module, name="looppasses6_alias")(x)
    r = np.exp(x).reshape(2, 16)
    np.testing.assert_allclose(y0, -r, rtol=1e-6)
    if options.get("poke"):
        r = r.copy()
        r[0, 0] = 7
    np.testing.assert_allclose(y1, r - 2 * np.exp(x).reshape(2, 16), rtol=1e-6, atol=1e-6)


# ------------------------------------------- loop-opencl-winograd: which chains fuse

WINOGRAD = {
    # name -> (c, o, h, w, the returned expression, batch, fused kernel or None)
    "residual-relu": (8, 8, 2, 32, "relu(conv2d(x, k, b, padding=1) + x)", 1, "add_relu"),
    "residual": (8, 8, 2, 32, "conv2d(x, k, b, padding=1) + x", 1, "add"),
    "no-epilogue": (8, 8, 2, 32, "conv2d(x, k, b, padding=1)", 1, ""),
    "batch-2": (8, 8, 2, 32, "relu(conv2d(x, k, b, padding=1))", 2, "relu"),
    "four-channels-out": (8, 4, 2, 32, "relu(conv2d(x, k, b, padding=1))", 1, None),
    "odd-rows": (8, 8, 3, 32, "relu(conv2d(x, k, b, padding=1))", 1, None),
    "no-padding": (8, 8, 4, 34, "relu(conv2d(x, k, b))", 1, None),
    "sigmoid": (8, 8, 2, 32, "sigmoid(conv2d(x, k, b, padding=1))", 1, None),
}


@pytest.mark.parametrize("name", list(WINOGRAD))
def test_a_winograd_chain_fuses_only_in_the_shapes_and_epilogues_it_writes(tmp_path, name):
    """The fused kernel (input transform, products and output transform in one launch)
    for a residual add, with or without relu, no epilogue, a batch of 2; the three
    kernels for 4 output channels (not a multiple of 8), an odd output height, no
    padding (the input transform's pads are not 1) and an epilogue it has no code for.
    On OpenCL against the reference."""
    pytest.importorskip("pyopencl")
    from dlpc.passes.lower.opencl_winograd import is_fused

    c, o, h, w, body, batch, fused = WINOGRAD[name]
    path = tmp_path / "wconv.dlpc"
    path.write_text(
        f"model wconv(x: f32[B, {c}, {h}, {w}]) {{\n"
        f"  param k: f32[{o}, {c}, 3, 3] = kaiming(seed=5)\n"
        f"  param b: f32[{o}] = normal(seed=6, std=0.1)\n"
        f"  return {body}\n}}\n"
    )
    model = dlpc.load(str(path), batch=batch)
    xs = api.random_inputs(model)
    compiled = dlpc.compile(model, target="opencl", graph_winograd={"where": "all"})
    for got, want in zip(compiled(*xs), api.reference(model, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    kernels_ = list(compiled.artifact.kernel_ops)
    if fused is None:
        assert not any(is_fused(k) for k in kernels_) and len(kernels_) == 3
    else:
        (k,) = kernels_
        assert is_fused(k) and k.sym.startswith("winograd_output_transform")
        assert ("_" + fused if fused else "") in k.sym


# ------------------------------------------------------ te-to-loop: a kernel's origin

ORIGIN = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %y = te.compute "{name}" (%i0) : tensor<4xf32> {{
    %v = te.read %x[%i0] : tensor<4xf32>
    te.yield %v : f32
  }}{attrs}
  func.return %y : tensor<4xf32>
}}"""


@pytest.mark.parametrize(
    "name,attrs,origin",
    [
        ("relu_0", "", "graph.relu"),
        ("softmax_12_max", "", "graph.softmax"),
        ("layer_norm_3_mean", "", "graph.layer_norm"),
        ("relu_0", ' attributes {origin = "graph.exp"}', "graph.exp"),
        ("frobnicate_1", "", None),
        ("relu", "", None),
        ("relu_x", "", None),
    ],
)
def test_a_kernels_origin_is_its_graph_op(name, attrs, origin):
    """The kernel's `origin`: the te op's attribute, else its name's stem when that names a
    graph op (`softmax_12_max` -> graph.softmax), else none."""
    (k,) = [
        op
        for op in lower(parse_module(ORIGIN.format(name=name, attrs=attrs))).walk()
        if isinstance(op, KernelOp)
    ]
    assert k.sym == name
    assert (k.origin.data if k.origin is not None else None) == origin


# --------------------------------------- loop-prepack-weights: weight-only kernels

HOIST = """
func.func @main(%x: memref<16xf32>, %b: memref<16xf32>, %y: memref<16xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = ["b"], dlpc.num_outputs = 1 : i64}} {{
  %arena = memref.alloc() {{dlpc.arena}} : memref<64xi8>
  %c0 = arith.constant 0 : index
  %bs = memref.view %arena[%c0][] : memref<64xi8> to memref<16xf32>{main}
  loop.kernel "bscale" {{
    loop.for %j = 0 to 16 step 1 {{name = "j"}} {{
      %bv0 = memref.load %b[%j] : memref<16xf32>
      {scale}
      memref.store %bv2, %bs[%j] : memref<16xf32>
    }}{inside}
  }}{between}
  loop.kernel "mul" {{
    loop.for %i = 0 to 16 step 1 {{name = "i"}} {{
      %xv = memref.load %x[%i] : memref<16xf32>
      %sv = memref.load %bs[%i] : memref<16xf32>
      %p = arith.mulf %xv, %sv : f32
      memref.store %p, %y[%i] : memref<16xf32>
    }}
  }}
  func.return
}}"""
HOIST_DEFAULT = dict(
    main="",
    scale="%two = arith.constant 2.0 : f32\n      %bv2 = arith.mulf %bv0, %two : f32",
    inside="",
    between="",
)
HOISTS = {
    "weights": ({}, 64, lambda x, b: x * 2 * b),
    "an-input": (
        dict(
            scale="%c0i = arith.constant 0 : index\n      %xi = memref.load %x[%c0i] : memref<16xf32>\n      %bv2 = arith.mulf %bv0, %xi : f32"
        ),
        0,
        lambda x, b: x * b * x[0],
    ),
    "a-main-scalar": (
        dict(
            main="\n  %one = arith.constant 1.0 : f32\n  %two = arith.addf %one, %one : f32",
            scale="%bv2 = arith.mulf %bv0, %two : f32",
        ),
        0,
        lambda x, b: x * 2 * b,
    ),
    "a-main-constant": (
        dict(
            main="\n  %two = arith.constant 2.0 : f32", scale="%bv2 = arith.mulf %bv0, %two : f32"
        ),
        64,
        lambda x, b: x * 2 * b,
    ),
    "a-copy-inside": (
        dict(inside='\n    "memref.copy"(%b, %bs) : (memref<16xf32>, memref<16xf32>) -> ()'),
        0,
        lambda x, b: x * b,
    ),
    "written-again": (
        dict(
            between='\n  loop.kernel "bump" {\n    loop.for %k = 0 to 16 step 1 {name = "k"} {\n      %u = memref.load %bs[%k] : memref<16xf32>\n      %u1 = arith.addf %u, %u : f32\n      memref.store %u1, %bs[%k] : memref<16xf32>\n    }\n  }'
        ),
        0,
        lambda x, b: x * 4 * b,
    ),
}


@pytest.mark.parametrize("name", list(HOISTS))
def test_a_kernel_over_weights_alone_runs_once_per_binding(name):
    """bs = 2 * b (b a param) into an arena view, then y = x * bs: the kernel is a
    `dlpc.prepare` kernel writing the packed block (64 bytes) when it reads weights and
    @main's constants only; not when it reads an input, a scalar @main computes, holds a
    memref.copy, or another kernel writes its view again. In C against numpy, for two
    inputs and two weights."""
    from dlpc.passes.lower.prepack import PREPARE, prepack

    parts, nbytes, want = HOISTS[name]
    module = parse_module(HOIST.format(**{**HOIST_DEFAULT, **parts}))
    assert prepack(module) == nbytes
    prepared = [k.sym for k in module.walk() if isinstance(k, KernelOp) and PREPARE in k.attributes]
    assert prepared == (["bscale"] if nbytes else [])
    x = np.arange(16, dtype=np.float32) - 4
    b = np.linspace(-1, 1, 16, dtype=np.float32)
    for x_, b_ in ((x, b), (x + 1, b[::-1].copy())):
        (y,) = CFunction(module, name="looppasses6_hoist")(x_, params={"b": b_})
        np.testing.assert_allclose(y, want(x_, b_), rtol=1e-6)


# ------------------------------------------ unsigned max / min: their initial values


@pytest.mark.parametrize("t", ["ui8", "ui16", "ui32", "ui64"])
@pytest.mark.parametrize("op", ["reduce_min", "reduce_max"])
@pytest.mark.parametrize("target", ["c", "opencl"])
def test_unsigned_min_and_max_over_the_upper_half_of_the_range(target, op, t):
    """Values at and above 2**(w-1): a min starts at 2**w - 1, not at the signed maximum
    (graph-to-te gave ui8's min 127 for [250, 255, 254]), a max at 0; against numpy."""
    if target == "opencl":
        pytest.importorskip("pyopencl")
    src = f"""
func.func @main(%x: tensor<2x3x{t}>) -> tensor<2x{t}> {{
  %y = graph.{op} %x {{axes = array<i64: 1>}} : (tensor<2x3x{t}>) -> tensor<2x{t}>
  func.return %y : tensor<2x{t}>
}}"""
    dtype = np.dtype("uint" + t[2:])
    hi = int(np.iinfo(dtype).max)
    x = np.array([[hi - 5, hi, hi - 1], [hi // 2 + 1, 7, hi // 2]], dtype)
    (got,) = dlpc.compile(Model(pipeline.parse_module(src)), target=target)(x)
    want = x.min(1) if op == "reduce_min" else x.max(1)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


def test_unsigned_min_and_max_inits_in_te():
    """graph-to-te's te.reduce init for an unsigned min is 2**w - 1, for a max 0."""
    for op, init in (("reduce_min", 255.0), ("reduce_max", 0.0)):
        module = lower(
            parse_module(
                f"""
func.func @main(%x: tensor<3xui8>) -> tensor<ui8> {{
  %y = graph.{op} %x {{axes = array<i64: 0>}} : (tensor<3xui8>) -> tensor<ui8>
  func.return %y : tensor<ui8>
}}"""
            ),
            "graph-to-te",
        )
        (r,) = [o for o in module.walk() if isinstance(o, te.ReduceOp)]
        assert r.init_value == init


TWO_PACKS = """
func.func @main(%x: memref<4xf32>, %w: memref<4xf32>, %y: memref<4xf32>, %z: memref<4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 2 : i64} {
  %arena = memref.alloc() {dlpc.arena} : memref<64xi8>
  KERNEL(first, y, addf)
  KERNEL(second, z, mulf)
  func.return
}"""


def _pack_kernel(name: str, out: str, combine: str) -> str:
    return f"""loop.kernel "{name}" {{
    %Cp = memref.alloca() : memref<4xf32>
    loop.for %j = 0 to 4 step 1 {{name = "Cp_j"}} {{
      %v = memref.load %w[%j] : memref<4xf32>
      memref.store %v, %Cp[%j] : memref<4xf32>
    }}
    loop.for %i = 0 to 4 step 1 {{name = "i"}} {{
      %a = memref.load %x[%i] : memref<4xf32>
      %c = memref.load %Cp[%i] : memref<4xf32>
      %p = arith.{combine} %a, %c : f32
      memref.store %p, %{out}[%i] : memref<4xf32>
    }}
  }}"""


def test_two_packs_of_one_name_get_kernels_of_their_own():
    """Each kernel's %Cp gets its packing kernel, named Cp_prepack and Cp_prepack_1, and
    its own 64 bytes of the block."""
    import re

    from dlpc.passes.lower.prepack import PREPARE, prepack

    text = re.sub(r"KERNEL\((\w+), (\w+), (\w+)\)", lambda m: _pack_kernel(*m.groups()), TWO_PACKS)
    module = parse_module(text)
    assert prepack(module) == 128
    module.verify()
    prepared = [k.sym for k in module.walk() if isinstance(k, KernelOp) and PREPARE in k.attributes]
    assert prepared == ["Cp_prepack", "Cp_prepack_1"]
    x = np.array([1, 2, 3, 4], np.float32)
    w = np.array([10, 20, 30, 40], np.float32)
    y, z = CFunction(module, name="looppasses6_two_packs")(x, params={"w": w})
    np.testing.assert_array_equal(y, x + w)
    np.testing.assert_array_equal(z, x * w)


# ------------------------------- loop-opencl-winograd: folding the unrolled points' index


def _int_op(name: str, a: int, b: int):
    from xdsl.dialects.builtin import IndexType

    ca = arith.ConstantOp(IntegerAttr(a, IndexType()))
    cb = arith.ConstantOp(IntegerAttr(b, IndexType()))
    ops = {
        "arith.addi": arith.AddiOp,
        "arith.subi": arith.SubiOp,
        "arith.muli": arith.MuliOp,
        "arith.divsi": arith.DivSIOp,
        "arith.remsi": arith.RemSIOp,
    }
    return ops[name](ca.result, cb.result)


@pytest.mark.parametrize(
    "name,a,b,want",
    [
        ("arith.addi", 7, -3, 4),
        ("arith.subi", 7, -3, 10),
        ("arith.muli", 7, -3, -21),
        ("arith.divsi", 7, 2, 3),
        ("arith.divsi", -7, 2, -3),  # C's division: towards zero
        ("arith.divsi", 7, 0, None),  # (not folded: the program's own behaviour)
        ("arith.remsi", 7, 2, 1),
        ("arith.remsi", -7, 2, -1),  # the sign of the dividend, as C
        ("arith.remsi", 7, -2, 1),
        ("arith.remsi", 7, 0, None),
    ],
)
def test_the_unrolled_points_integer_ops_fold_as_c_computes_them(name, a, b, want):
    from dlpc.passes.lower.opencl_winograd import _fold

    assert _fold(_int_op(name, a, b)) == want


@pytest.mark.parametrize(
    "predicate,want",
    [("eq", [0, 1, 0]), ("ne", [1, 0, 1]), ("slt", [1, 0, 0]), ("sle", [1, 1, 0])]
    + [("sgt", [0, 0, 1]), ("sge", [0, 1, 1])],
)
def test_integer_comparisons_and_selects_fold(predicate, want):
    """cmpi of two constants folds to 0 / 1 for each predicate ((2, 3), (3, 3), (4, 3));
    a select on a constant condition to the operand it picks; one on a computed
    condition, or a cmpi of a non-constant, stays."""
    from xdsl.dialects.builtin import IndexType, i1

    from dlpc.passes.lower.opencl_winograd import _fold

    three = arith.ConstantOp(IntegerAttr(3, IndexType()))
    got = []
    for a in (2, 3, 4):
        ca = arith.ConstantOp(IntegerAttr(a, IndexType()))
        got.append(_fold(arith.CmpiOp(ca.result, three.result, predicate)))
    assert got == want
    lhs, rhs = arith.ConstantOp(IntegerAttr(5, IndexType())), three
    for cond, picked in ((1, lhs.result), (0, rhs.result)):
        c = arith.ConstantOp(IntegerAttr(cond, i1))
        assert _fold(arith.SelectOp(c.result, lhs.result, rhs.result)) is picked
    block_arg = Block(arg_types=[i1, IndexType()]).args
    assert _fold(arith.SelectOp(block_arg[0], lhs.result, rhs.result)) is None
    assert _fold(arith.CmpiOp(block_arg[1], three.result, predicate)) is None
    assert _fold(arith.AddiOp(block_arg[1], three.result)) is None


# ------------------------------------------------ te-to-loop: the function's signature

SIGNATURE = """
"memref.global"() <{sym_name = "__constant_0", type = memref<1xf32>, initial_value = dense<9.0> : tensor<1xf32>, sym_visibility = "private", constant}> : () -> ()
func.func @main(%x: tensor<4xf32> {dlpc.name = "input.x"}) -> (tensor<4xf32> {dlpc.name = "y"}, tensor<4xf32>, tensor<4xf32>) {
  %w = graph.param "w" : tensor<4xf32>
  %w2 = graph.param "w" : tensor<4xf32>
  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %d = graph.constant dense<[0.5, 0.5, 0.5, 0.5]> : tensor<4xf32>
  %y = te.compute "add_0" (%i0) : tensor<4xf32> {
    %a = te.read %x[%i0] : tensor<4xf32>
    %b = te.read %w[%i0] : tensor<4xf32>
    %e = te.read %w2[%i0] : tensor<4xf32>
    %f = te.read %c[%i0] : tensor<4xf32>
    %g = te.read %d[%i0] : tensor<4xf32>
    %s = arith.addf %a, %b : f32
    %t = arith.mulf %e, %f : f32
    %u = arith.addf %s, %t : f32
    %v = arith.addf %u, %g : f32
    te.yield %v : f32
  }
  func.return %y, %y, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}"""


def test_the_loop_signature_params_outputs_and_constants():
    """One argument per param name (read twice), the names of inputs, params and outputs
    as dlpc.name (a result's moves to its output argument), a value returned twice stored
    directly into the first output and copied to the second, an input returned copied;
    constants become globals with the first free __constant_<k> names."""
    module = lower(parse_module(SIGNATURE))
    fn = next(op for op in module.walk() if op.name == "func.func")
    head = str(fn).splitlines()[0]
    assert head.startswith(
        'func.func @main(%x: memref<4xf32> {dlpc.name = "input.x"}, %w: memref<4xf32> '
        '{dlpc.name = "w"}, %out0: memref<4xf32> {dlpc.name = "y"}, %out1: memref<4xf32>, '
        "%out2: memref<4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = "
        '["w"], dlpc.num_outputs = 3 : i64}'
    ), head
    assert kernels(module) == ["add_0", "copy_out1", "copy_out2"]
    globals_ = {
        op.sym_name.data: op.type.get_shape() for op in module.walk() if op.name == "memref.global"
    }
    assert globals_ == {"__constant_0": (1,), "__constant_1": (4,), "__constant_2": (4,)}
    x = np.arange(4, dtype=np.float32)
    w = np.array([10, 20, 30, 40], np.float32)
    y0, y1, y2 = CFunction(module, name="looppasses6_signature")(x, params={"w": w})
    want = x + w + w * np.array([1, 2, 3, 4], np.float32) + 0.5
    np.testing.assert_array_equal(y0, want)
    np.testing.assert_array_equal(y1, want)
    np.testing.assert_array_equal(y2, x)


@pytest.mark.parametrize(
    "shape,axis", [((2, 3, 4, 5), 2), ((3, 32, 8), 2), ((2, 6, 8), -1), ((4, 20, 3, 2), 2)]
)
def test_row_groups_over_several_row_dims_and_two_tail_dims(shape, axis):
    """Layer norm over the trailing dims from `axis` (a tail of one or two dims) and
    softmax over the last, with rows of one to three dims: each one row-group kernel,
    compiled for C, against the reference."""
    t = "tensor<" + "x".join(map(str, shape)) + "xf32>"
    tail = shape[axis:]
    tt = "tensor<" + "x".join(map(str, tail)) + "xf32>"
    src = f"""
func.func @main(%x: {t}) -> ({t}, {t}) {{
  %g = graph.param "g" : {tt}
  %b = graph.param "b" : {tt}
  %y = graph.layer_norm %x, %g, %b {{axis = {axis} : i64, epsilon = 1.0e-05 : f64}} : ({t}, {tt}, {tt}) -> {t}
  %s = graph.softmax %x {{axis = -1 : i64}} : ({t}) -> {t}
  func.return %y, %s : {t}, {t}
}}"""
    n = int(np.prod(tail))
    weights = {
        "g": np.linspace(0.5, 1.5, n, dtype=np.float32).reshape(tail),
        "b": np.linspace(-1, 1, n, dtype=np.float32).reshape(tail),
    }
    model = Model(pipeline.parse_module(src), weights=weights)
    xs = api.random_inputs(model, seed=3)
    compiled = dlpc.compile(model)
    for got, want in zip(compiled(*xs), api.reference(model, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
    assert kernels(compiled.lowered) == ["layer_norm_0", "softmax_1"]


# ------------------------------------------ loop-passes seed 46's survivors (after it)

THREE_OPERAND_PRODUCT = """
func.func @main(%a: memref<16xf32>, %b: memref<16xf32>, %c: memref<16xf32>, %y: memref<1x1x2x2xf32>)
    attributes {dlpc.num_inputs = 3 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %m = memref.alloc() : memref<16xf32>
  loop.kernel "mm_0" attributes {origin = "graph.matmul"} {
    loop.for %k = 0 to 16 step 1 {name = "k"} {
      %u = memref.load %a[%k] : memref<16xf32>
      %v = memref.load %b[%k] : memref<16xf32>
      %w = memref.load %c[%k] : memref<16xf32>
      %p = arith.mulf %u, %v : f32
      %q = arith.addf %p, %w : f32
      memref.store %q, %m[%k] : memref<16xf32>
    }
  }
  loop.kernel "ot_1" attributes {origin = "graph.winograd_output_transform"} {
    loop.for %i = 0 to 2 step 1 {name = "i0"} {
      loop.for %j = 0 to 2 step 1 {name = "i1"} {
        %c0 = arith.constant 0 : index
        %v = memref.load %m[%i] : memref<16xf32>
        memref.store %v, %y[%c0, %c0, %i, %j] : memref<1x1x2x2xf32>
      }
    }
  }
  memref.dealloc %m : memref<16xf32>
  func.return
}"""


def test_a_product_kernel_of_three_operands_is_no_winograd_chain():
    """The output transform's product comes from a matmul kernel loading three buffers:
    no chain (U and V are two), nothing fused, no error (seed 46's opencl_winograd.py:363,
    `!= 2` -> `< 2` unpacked three operands into two; hand-written loop IR)."""
    from dlpc.passes.lower.opencl_winograd import is_fused

    module = lower(parse_module(THREE_OPERAND_PRODUCT), "loop-opencl-winograd")
    found = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert [k.sym for k in found] == ["mm_0", "ot_1"]
    assert not any(is_fused(k) for k in found)


def test_check_plan_names_both_overlapping_views_with_their_byte_ranges():
    """loop-memory-plan's checker (for tests) reports an overlap as two views' byte
    ranges [offset, offset + size) and lifetimes (seed 46's memory_plan.py:777: the
    second view's end printed as offset ^ size)."""
    from dlpc.passes.lower.memory_plan import check_plan

    src = """
func.func @main(%x: memref<16xf32>, %y: memref<16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %arena = memref.alloc() {dlpc.arena} : memref<192xi8>
  %o1 = arith.constant 64 : index
  %o2 = arith.constant 64 : index
  %a = memref.view %arena[%o1][] : memref<192xi8> to memref<16xf32>
  %b = memref.view %arena[%o2][] : memref<192xi8> to memref<16xf32>
  loop.kernel "k_0" {
    loop.for %i = 0 to 16 step 1 {name = "i"} {
      %v = memref.load %x[%i] : memref<16xf32>
      memref.store %v, %a[%i] : memref<16xf32>
      memref.store %v, %b[%i] : memref<16xf32>
    }
  }
  loop.kernel "k_1" {
    loop.for %i = 0 to 16 step 1 {name = "i"} {
      %v = memref.load %a[%i] : memref<16xf32>
      %w = memref.load %b[%i] : memref<16xf32>
      %s = arith.addf %v, %w : f32
      memref.store %s, %y[%i] : memref<16xf32>
    }
  }
  func.return
}"""
    fn = next(op for op in parse_module(src).walk() if op.name == "func.func")
    assert check_plan(fn) == ["%a [64, 128) live 5..6 overlaps %b [64, 128) live 5..6"]
