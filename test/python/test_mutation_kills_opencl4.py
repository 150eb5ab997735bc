"""Tests written against surviving mutants of the OpenCL backend (issue 35,
bench/mutation.py --area opencl, fourth round), and from a read of backends/opencl/*.py
for the decisions no opencl-area test reached before the seed-43 draw: which loop bodies
can be laned, which reduction loops sum in partials, which reductions split over a
work-group. Each pins the rule on a small hand-written loop nest with its reason."""

from __future__ import annotations

import pytest

from dlpc.dialects.loop import kernels
from dlpc.passes.pipeline import parse_module

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.opencl.gpu_launch import SPLIT_ITEMS, GpuProfile, split_reduction  # noqa: E402
from dlpc.backends.opencl.lanes import MAX_LANE_BUFFER, _laneable, accumulators  # noqa: E402

H200 = GpuProfile(max_group=1024, units=132)


def _loops(text: str) -> dict:
    (kernel,) = kernels(parse_module(text))
    return {lp.loop_name: lp for lp in kernel.loops()}


# ------------------------------------------------------------------ accumulators

# y[i] = COMBINE over r < K of x[i, r], the accumulator a 0-d buffer set to INIT
SUM = """
func.func @main(%x: memref<4x128xTY>, %y: memref<4xTY>, %b: memref<TY>) {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      %acc = memref.alloca() : memref<TY>
      %z = arith.constant INIT : TY
      memref.store %z, %acc[] : memref<TY>
      loop.for %r = 0 to K step 1 {name = "r0", reduction} {
        %v = memref.load %x[%i, %r] : memref<4x128xTY>
        BODY
      }
      %res = memref.load %acc[] : memref<TY>
      memref.store %res, %y[%i] : memref<4xTY>
    }
  }
  func.return
}"""

UPDATE = """%o = memref.load %acc[] : memref<TY>
        %s = arith.COMBINE %o, %v : TY
        memref.store %s, %acc[] : memref<TY>"""


def _sum(ty="f32", init="0.000000e+00", combine="addf", k=128, body=UPDATE, extra="") -> dict:
    text = SUM.replace("BODY", body + extra).replace("COMBINE", combine)
    text = text.replace("INIT", init).replace("TY", ty).replace("to K step", f"to {k} step")
    return _loops(text)


@pytest.mark.parametrize(
    "ty, init, combine, acc, split",
    [
        # a float sum from 0 (or -0: the same total) splits over a work-group
        ("f32", "0.000000e+00", "addf", "arith.addf", True),
        ("f32", "-0.000000e+00", "addf", "arith.addf", True),
        ("f64", "0.000000e+00", "addf", "arith.addf", True),
        # a sum from 1: each work-item's partial would start at 1 too (one 1 a partial)
        ("f32", "1.000000e+00", "addf", "arith.addf", False),
        # a product from 1, a max from -inf: their identities
        ("f32", "1.000000e+00", "mulf", "arith.mulf", True),
        ("f32", "0xFF800000", "maximumf", "arith.maximumf", True),
        ("f32", "0.000000e+00", "maximumf", "arith.maximumf", False),
        # a difference does not reassociate: no partials
        ("f32", "0.000000e+00", "subf", None, False),
        # an f16 sum has partials but is not split (the split kernels are f32/f64)
        ("f16", "0.000000e+00", "addf", "arith.addf", False),
    ],
)
def test_partials_and_split_sums_need_a_reassociable_combine_from_its_identity(
    ty, init, combine, acc, split
):
    """lanes.accumulators (acc = acc <op> x on a 0-d buffer, op in PARTIAL_IDENTITY) and
    gpu_launch.split_reduction (one such float accumulator initialised to the op's
    identity, a reduction of at least SPLIT_ITEMS terms, too few work-items)."""
    loops = _sum(ty, init, combine)
    found = accumulators(loops["r0"])
    assert (found and [(a.name_hint, c) for a, c in found]) == (acc and [("acc", acc)])
    got = split_reduction([loops["i0"]], H200)
    assert (got is not None) == split
    if split:
        assert got is not None and (got[0].loop_name, got[2]) == ("r0", acc)


@pytest.mark.parametrize("k, split", [(SPLIT_ITEMS, True), (SPLIT_ITEMS - 1, False)])
def test_a_split_needs_split_items_terms(k, split):
    """gpu_launch.split_reduction: a reduction of SPLIT_ITEMS (64) terms fills a work-group
    of that many work-items, one fewer does not split."""
    loops = _sum(k=k)
    assert (split_reduction([loops["i0"]], H200) is not None) == split


BIAS_UPDATE = """%o = memref.load %acc[] : memref<f32>
        %bb = memref.load %b[] : memref<f32>
        %s = arith.addf %o, %v : f32
        memref.store %s, %acc[] : memref<f32>
        %t = arith.addf %bb, %v : f32
        memref.store %t, %b[] : memref<f32>"""


@pytest.mark.parametrize(
    "body, why",
    [
        # the accumulator's value read twice (acc + acc)
        (UPDATE.replace("%o, %v", "%o, %o"), "load used twice"),
        # the sum also squared: a second use of the combined value
        (UPDATE + "\n        %w = arith.mulf %s, %s : TY", "value used twice"),
        # the accumulator stored before it is read: x, not acc <op> x
        (
            "memref.store %v, %acc[] : memref<TY>\n"
            "        %o = memref.load %acc[] : memref<TY>\n"
            "        %w = arith.addf %o, %v : TY",
            "store before load",
        ),
        # the accumulator updated under a condition: not directly in the loop's body
        (
            """%c = arith.constant true
        scf.if %c {
          %o = memref.load %acc[] : memref<TY>
          %s = arith.addf %o, %v : TY
          memref.store %s, %acc[] : memref<TY>
        }""",
            "under an scf.if",
        ),
        # stored before it is loaded: a store of x, then acc + x stored again
        (
            "memref.store %v, %acc[] : memref<TY>\n        " + UPDATE,
            "three accesses",
        ),
    ],
)
def test_an_accumulator_is_one_load_one_combine_one_store(body, why):
    """lanes.accumulators: partial sums reassociate `acc = acc <op> x` only; any other
    access pattern of the 0-d buffer keeps the loop's order ({why})."""
    loops = _sum(body=body)
    assert accumulators(loops["r0"]) is None, why
    assert split_reduction([loops["i0"]], H200) is None


def test_two_accumulators_sum_in_partials_but_do_not_split():
    """A reduction updating two 0-d buffers (acc and b) sums both in partials
    (accumulators lists both), but a split work-group combines one accumulator only."""
    loops = _loops(
        SUM.replace("BODY", BIAS_UPDATE)
        .replace("INIT", "0.000000e+00")
        .replace("TY", "f32")
        .replace("to K step", "to 128 step")
    )
    found = accumulators(loops["r0"])
    assert found is not None and sorted((a.name_hint, c) for a, c in found) == [
        ("acc", "arith.addf"),
        ("b", "arith.addf"),
    ]
    assert split_reduction([loops["i0"]], H200) is None


def test_a_split_needs_a_constant_initial_value():
    """gpu_launch.split_reduction: an accumulator initialised from a buffer (not the
    combine's identity as a constant) cannot start each work-item's partial there."""
    text = (
        SUM.replace("%z = arith.constant INIT : TY", "%z = memref.load %b[] : memref<TY>")
        .replace("BODY", UPDATE)
        .replace("COMBINE", "addf")
        .replace("TY", "f32")
        .replace("to K step", "to 128 step")
    )
    loops = _loops(text)
    assert accumulators(loops["r0"]) is not None
    assert split_reduction([loops["i0"]], H200) is None


# ------------------------------------------------------------------------ laning

LANED = """
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      %v = memref.load %x[%i] : memref<8xf32>
      BODY
      memref.store %v, %y[%i] : memref<8xf32>
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "body, laneable",
    [
        ("", True),
        # a private buffer of MAX_LANE_BUFFER elements a lane, not one more
        (f"%t = memref.alloca() : memref<{MAX_LANE_BUFFER}xf32>", True),
        (f"%t = memref.alloca() : memref<{MAX_LANE_BUFFER + 1}xf32>", False),
        # a condition around plain ops is copied per lane; one around a loop is not
        (
            "%c = arith.constant true\n      scf.if %c {\n"
            "        memref.store %v, %y[%i] : memref<8xf32>\n      }",
            True,
        ),
        (
            "%c = arith.constant true\n      scf.if %c {\n"
            '        loop.for %j = 0 to 2 step 1 {name = "j"} {\n'
            "          memref.store %v, %y[%j] : memref<8xf32>\n        }\n      }",
            False,
        ),
        # an op with a region of its own (not a loop or a condition)
        (
            '"scf.execute_region"() ({\n'
            "        memref.store %v, %y[%i] : memref<8xf32>\n"
            '        "scf.yield"() : () -> ()\n      }) : () -> ()',
            False,
        ),
        # a whole-buffer copy is not a per-lane scalar op
        (
            "%t = memref.alloca() : memref<8xf32>\n"
            '      "memref.copy"(%x, %t) : (memref<8xf32>, memref<8xf32>) -> ()',
            False,
        ),
    ],
)
def test_a_laned_body_holds_scalar_ops_small_buffers_and_loop_free_ifs(body, laneable):
    """lanes._laneable: unroll-and-jam copies the body once per lane, so each copy's
    private buffers stay small (MAX_LANE_BUFFER) and a nested loop under a condition or
    a buffer copy (no scalar form) keeps the loop unlaned."""
    loops = _loops(LANED.replace("BODY", body))
    assert _laneable(loops["i0"]) is laneable


# ------------------------------------------------------------- GPU plans and guards

# y[j] = x[j] for every i: i writes no element of its own (not independent), j does
OUTER_DEPENDENT = """
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      loop.for %j = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%j] : memref<8xf32>
        memref.store %v, %y[%j] : memref<8xf32>
      }
    }
  }
  func.return
}"""


def test_work_items_stop_at_the_first_dependent_loop():
    """gpu_launch.work_items: the work-items are the leading independent loops of the
    nest, up to the first that is not (i rewrites all of y each iteration): an
    independent loop below it (j) runs inside each work-item, and a kernel without one
    is a single work-item (global and local size 1)."""
    from dlpc.backends.opencl.gpu_launch import plan_gpu_launch, work_items

    (kernel,) = kernels(parse_module(OUTER_DEPENDENT))
    assert work_items(kernel) == []
    launch = plan_gpu_launch(kernel, "k", H200)
    assert (launch.global_size, launch.local_size) == ((1,), (1,))
    assert not launch.mapped


GUARDED = """
func.func @main(%x: memref<16xf32>, %y: memref<8x8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      loop.for %j = 0 to 8 step 1 {name = "i1"} {
        %c2 = arith.constant 2 : index
        %d = arith.muli %i, MUL : index
        %g = arith.cmpi slt, %d, %c2 : index
        %v = scf.if %g -> (f32) {
          %l = memref.load %x[%i] : memref<16xf32>
          scf.yield %l : f32
        } else {
          %z = arith.constant 0.000000e+00 : f32
          scf.yield %z : f32
        }
        memref.store %v, %y[%i, %j] : memref<8x8xf32>
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize("mul, guard", [("%c2", True), ("%j", False)])
def test_a_padding_guard_multiplies_by_constants_only(mul, guard):
    """guards.padding_guards: 2 i < 2 is affine in the lanes (a padding guard, checked at
    the box's corners); i * j < 2 is not (its set is not convex in (i, j))."""
    from dlpc.backends.opencl.guards import padding_guards

    module = parse_module(GUARDED.replace("MUL", mul))
    nest = next(op for op in module.walk() if op.name == "loop.for")
    assert (padding_guards(nest) is not None) is guard


# ------------------------------------------------------------------- relayout plans

# y[f] = sum over k of LOADS (W an 8 x 8 x 8 parameter), the lanes over f
RELAYOUT = """
func.func @main(%W: memref<8x8x8xf32>, %y: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %f = 0 to 8 step 1 {name = "i0", parallel} {
      %acc = memref.alloca() : memref<f32>
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %acc[] : memref<f32>
      %c0 = arith.constant 0 : index
      loop.for %k = 0 to 8 step 1 {name = "r0", reduction} {
        %a = memref.load %W[A] : memref<8x8x8xf32>
        %b = memref.load %W[B] : memref<8x8x8xf32>
        %p = arith.addf %a, %b : f32
        %o = memref.load %acc[] : memref<f32>
        %s = arith.addf %o, %p : f32
        memref.store %s, %acc[] : memref<f32>
      }
      %r = memref.load %acc[] : memref<f32>
      memref.store %r, %y[%f] : memref<8xf32>
      STORE
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "a, b, store, perm",
    [
        # W[f, k, 0] twice: read as W^T with f last
        ("%f, %k, %c0", "%f, %k, %c0", "", (1, 2, 0)),
        # f as the last index already: nothing to transpose
        ("%k, %c0, %f", "%k, %c0, %f", "", None),
        # f in two indices: no single permutation makes it the last
        ("%f, %f, %c0", "%f, %f, %c0", "", None),
        # two loads wanting two layouts (f first, f second): neither
        ("%f, %k, %c0", "%k, %f, %c0", "", None),
        # a buffer the kernel stores to is not a fixed parameter copy
        (
            "%f, %k, %c0",
            "%f, %k, %c0",
            "memref.store %z, %W[%f, %c0, %c0] : memref<8x8x8xf32>",
            None,
        ),
    ],
)
def test_a_resident_buffer_is_read_transposed_only_for_one_layout(a, b, store, perm):
    """launch.plan_relayout: a resident, never-stored buffer loaded with the vector
    loop's variable as one index other than the last gets the permutation moving that
    index last (consecutive lanes read consecutive elements); none when the variable is
    already last or in two indices, when two loads want different permutations, or when
    the kernel stores to the buffer."""
    from dlpc.backends.opencl.launch import plan_relayout

    text = RELAYOUT.replace("[A]", f"[{a}]").replace("[B]", f"[{b}]").replace("STORE", store)
    module = parse_module(text)
    (kernel,) = kernels(module)
    (w,) = [arg for arg in module.walk() if arg.name == "func.func"][0].body.block.args[:1]
    vector = next(lp for lp in kernel.loops() if lp.loop_name == "i0")
    plan = plan_relayout(kernel, vector, {w})
    assert plan == ({w: perm} if perm else {})


@pytest.mark.parametrize(
    "ty, combine, init, lanes, vector",
    [
        # an f32 sum (or product) laned 8 wide: its partials are one float8
        ("f32", "addf", "0.000000e+00", 8, True),
        ("f32", "mulf", "1.000000e+00", 4, True),
        # 3 lanes are no OpenCL vector width
        ("f32", "addf", "0.000000e+00", 3, False),
        # a max's partials stay scalars (only sums and products are vector ops here)
        ("f32", "maximumf", "0xFF800000", 8, False),
        # f64 partials stay scalars
        ("f64", "addf", "0.000000e+00", 8, False),
    ],
)
def test_partials_become_one_vector_for_f32_sums_and_products(ty, combine, init, lanes, vector):
    """lanes.partial_vector: the only laned reduction loop, of a vector width, whose
    accumulators are all f32 sums or products, writes its partials as the lanes of one
    OpenCL vector; any other keeps scalar partials."""
    from dlpc.backends.opencl.lanes import partial_vector

    loops = _sum(ty, init, combine)
    red = loops["r0"]
    found = accumulators(red)
    assert found is not None
    got = partial_vector({red: lanes}, {red: found})
    assert (got is red) if vector else (got is None)


def test_partials_of_two_loops_are_not_one_vector():
    """lanes.partial_vector: with two reduction loops summing in partials neither is
    written as the vector (each accumulator is a scalar per partial)."""
    from dlpc.backends.opencl.lanes import partial_vector

    a, b = _sum()["r0"], _sum()["r0"]
    found_a, found_b = accumulators(a), accumulators(b)
    assert found_a is not None and found_b is not None
    assert partial_vector({a: 8, b: 8}, {a: found_a, b: found_b}) is None


# ------------------------------------------------------------------ ragged lanes

ROW = """
func.func @main(%x: memref<NxF32>, %y: memref<NxF32>) {
  loop.kernel "k" {
    loop.for %j = 0 to N step 1 {name = "i0"} {
      %v = memref.load %x[%j] : memref<NxF32>
      LOADY
      memref.store %w, %y[%j] : memref<NxF32>
    }
  }
  func.return
}"""


def _row(n: int, accumulate: bool = False):
    loady = (
        "%u = memref.load %y[%j] : memref<NxF32>\n      %w = arith.addf %u, %v : f32"
        if accumulate
        else "%w = arith.addf %v, %v : f32"
    )
    text = ROW.replace("LOADY", loady).replace("NxF32", f"{n}xf32").replace("to N", f"to {n}")
    return _loops(text)["i0"]


@pytest.mark.parametrize(
    "n, lanes, ragged",
    [
        (28, 16, True),  # lenet's 28 columns: 2 steps of 16, the second from column 12
        (24, 16, False),  # 2 steps redo 8 of 24: more than a quarter (6)
        (24, 10, True),  # 3 steps redo 6 of 24: exactly a quarter
        (32, 16, False),  # 16 divides 32: not ragged, plain lanes
        (12, 16, False),  # fewer iterations than lanes
        (15, 16, False),  # (one lane short: still fewer iterations than lanes)
        (90, 16, True),  # 6 steps, 6 redone of 90
        (97, 16, False),  # 7 steps: more than 6
        (40, 12, True),  # 4 steps, 8 redone of 40 (<= a quarter: 10)
        (20, 16, False),  # 2 steps redo 12 of 20 (more than a quarter: 5)
    ],
)
def test_ragged_lanes_redo_at_most_a_quarter_in_at_most_6_steps(n, lanes, ragged):
    """lanes._ragged: lanes that do not divide the loop are taken when the loop has at
    least as many iterations, at most 6 steps, at most RAGGED_WASTE (1/4) of them run
    twice, and running one twice is harmless (`clampable`)."""
    from dlpc.backends.opencl.lanes import _ragged

    assert _ragged(_row(n), lanes) is ragged


def test_a_loop_that_reads_what_it_writes_is_not_clampable():
    """lanes.clampable: y[j] = x[j] + x[j] may run an iteration twice (same bits stored);
    y[j] += x[j] may not (the second run adds x[j] again), so it takes no ragged lanes."""
    from dlpc.backends.opencl.lanes import _ragged, clampable

    assert clampable(_row(28)) and _ragged(_row(28), 16)
    assert not clampable(_row(28, accumulate=True)) and not _ragged(_row(28, True), 16)


# ------------------------------------------------------------ wide tiles and lanes

# y[c, h, w] = 2 x[c, h, w], c / h / w the nest; READ: y read at each channel too (its
# first element, then unused: the channel loop then reads what it writes)
TILE = """
func.func @main(%x: memref<CxHxWxf32>, %y: memref<CxHxWxf32>) {
  loop.kernel "k" {
    loop.for %c = 0 to C step 1 {name = "i0", parallel} {
      READ
      loop.for %h = 0 to H step 1 {name = "i1"} {
        loop.for %w = 0 to W step 1 {name = "i2"} {
          %v = memref.load %x[%c, %h, %w] : memref<CxHxWxf32>
          %s = arith.addf %v, %v : f32
          memref.store %s, %y[%c, %h, %w] : memref<CxHxWxf32>
        }
      }
    }
  }
  func.return
}"""


def _tile(c: int, h: int, w: int, read: bool = False) -> list:
    first = "%c0 = arith.constant 0 : index\n      %t = memref.load %y[%c, %c0, %c0] : memref<CxHxWxf32>"
    text = TILE.replace("READ", first if read else "").replace("CxHxW", f"{c}x{h}x{w}")
    text = (
        text.replace("to C ", f"to {c} ").replace("to H ", f"to {h} ").replace("to W ", f"to {w} ")
    )
    loops = _loops(text)
    return [loops["i0"], loops["i1"], loops["i2"]]


@pytest.mark.parametrize(
    "c, h, w, last_lanes, inner_lanes, read, wide",
    [
        (64, 2, 16, 8, 8, False, True),  # 64 channels as 11 x 6, the last redoing 2
        (12, 2, 16, 6, 8, False, True),  # 2 x 6 exactly
        (11, 2, 16, 8, 8, False, False),  # fewer than 2 x 6 channels
        (6, 2, 16, 6, 8, False, False),  # 6 channels: one work-item, none to share
        (32, 2, 16, 8, 8, False, False),  # 4 of 32 redone: more than 1/16
        (64, 2, 24, 8, 8, False, False),  # 16 columns do not divide 24
        (64, 1, 16, 8, 8, False, False),  # no row loop between channels and columns
        (64, 2, 16, 4, 8, False, False),  # 4 mapped lanes: not an 8 x 8 tile
        (64, 2, 16, 8, 4, False, False),  # 4 inner lanes
        (64, 2, 16, 8, 8, True, False),  # channels redone must be clampable (y read: not)
        (66, 2, 16, 8, 8, True, True),  # 66 = 11 x 6: nothing redone, clampable or not
    ],
)
def test_a_pointwise_tile_widens_to_6_by_16(c, h, w, last_lanes, inner_lanes, read, wide):
    """lanes._wide_tile: an 8 x 8 (or 6 x 8) tile of channels x columns becomes 6 x 16
    (WIDE_TILE) when a row loop lies between, 16 divides the columns, and the channels are
    at least 2 x 6 with at most 1/16 of them redone by the last work-item (clampable)."""
    from dlpc.backends.opencl.lanes import _wide_tile

    nest = _tile(c, h, w, read)
    last, _, inner = nest
    lanes = {last: last_lanes, inner: inner_lanes}
    assert _wide_tile(nest, last, inner, None, lanes, {}) is wide


@pytest.mark.parametrize(
    "w, last_lanes, wide",
    [
        (16, 4, True),  # one step of 16
        (32, 5, True),  # two steps; 5 mapped lanes x 16 = WIDE_MAPPED x 16
        (32, 6, False),  # 6 mapped lanes: too many registers
        (48, 4, False),  # 3 steps (slow code under PoCL's LLVM)
        (64, 4, True),  # 4 steps
    ],
)
def test_inner_lanes_widen_to_16_with_few_mapped_lanes(w, last_lanes, wide):
    """lanes._wide_inner: 8 inner lanes widen to 16 (a float16) when the steps are 1, 2,
    4, 5 or 6 and the mapped lanes are at most WIDE_MAPPED (5)."""
    from dlpc.backends.opencl.lanes import _wide_inner

    last, _, inner = _tile(8, 2, w)
    assert _wide_inner(inner, {last: last_lanes, inner: 8}, None, last) is wide


# ------------------------------------------------------------------ batch splits

IMAGES = """
func.func @main(%x: memref<8x4xf32>, %y: memref<8x4xf32>) {
  loop.kernel "k" {
    loop.for %i = LO to HI step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %x[%i, %j] : memref<8x4xf32>
        memref.store %v, %y[%i, %j] : memref<8x4xf32>
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize("lo, split", [(0, 8), (1, None)])
def test_a_batch_split_needs_the_image_loop_from_0(lo, split):
    """chains.batch_split: group g of a split chain runs images g * B / parts ...; that
    is the loop's range only when it counts the B images from 0 by 1 (8 images of
    x[i] / y[i] split into 2 groups; counted from 1 they are no such range)."""
    from dlpc.backends.opencl.chains import batch_split
    from dlpc.backends.opencl.launch import Launch

    (kernel,) = kernels(parse_module(IMAGES.replace("LO", str(lo)).replace("HI", str(lo + 8))))
    loop = next(lp for lp in kernel.loops() if lp.loop_name == "i0")
    launch = Launch("k", (8,), None, mapped={loop: "get_global_id(0)"})
    assert batch_split(kernel, launch, 2, set()) == split


OUTSIDE_SCALAR = """
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  %two = arith.constant 2.000000e+00 : f32
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0", parallel} {
      %v = memref.load %x[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %y[%i] : memref<8xf32>
    }
  }
  func.return
}"""


def test_a_kernel_using_a_scalar_from_outside_is_refused_by_name():
    """emitter.py: an OpenCL kernel's arguments are buffers; a scalar defined outside the
    kernel (here a constant of @main) has no argument to pass it, so the backend refuses
    the kernel with a diagnostic naming it."""
    from dlpc.backends.opencl import OpenCLEmitter
    from dlpc.diagnostics import DlpcError

    with pytest.raises(
        DlpcError, match=r"^error: opencl backend: kernel 'k' uses scalar .* from outside$"
    ):
        OpenCLEmitter(parse_module(OUTSIDE_SCALAR)).emit()


def test_the_vector_loop_is_the_innermost_laned_loop_of_a_vector_width():
    """lanes.plan_vector: the loop written as OpenCL vectors is the innermost laned loop
    below the NDRange whose lanes are a vector width (8 columns, not 3 rows); none
    without an NDRange loop, or when a reduction sums in partials (their accumulators
    are scalars per partial)."""
    from dlpc.backends.opencl.lanes import plan_vector

    nest = _tile(12, 3, 16)
    c, h, w = nest
    assert plan_vector(nest, [c], {h: 3, w: 8}, {}) is w
    assert plan_vector(nest, [c], {h: 4, w: 8}, {}) is w  # (both widths: the inner)
    assert plan_vector(nest, [c], {h: 4, w: 3}, {}) is h
    assert plan_vector(nest, [c], {h: 3, w: 3}, {}) is None
    assert plan_vector(nest, [], {h: 3, w: 8}, {}) is None
    red = _sum()["r0"]
    found = accumulators(red)
    assert found is not None
    assert plan_vector(nest, [c], {h: 3, w: 8}, {red: found}) is None


# y[a, d, b, i] = sum over r < 64 of x[a, d, b, i, r]: 120 work-items, too few for a GPU
SPLIT4 = """
func.func @main(%x: memref<2x5x3x4x64xf32>, %y: memref<2x5x3x4xf32>) {
  loop.kernel "k" {
    loop.for %a = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %d = 0 to 5 step 1 {name = "i1", parallel} {
        loop.for %b = 0 to 3 step 1 {name = "i2", parallel} {
          loop.for %i = 0 to 4 step 1 {name = "i3", parallel} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %r = 0 to 64 step 1 {name = "r0", reduction} {
              %v = memref.load %x[%a, %d, %b, %i, %r] : memref<2x5x3x4x64xf32>
              %o = memref.load %acc[] : memref<f32>
              %s = arith.addf %o, %v : f32
              memref.store %s, %acc[] : memref<f32>
            }
            %t = memref.load %acc[] : memref<f32>
            memref.store %t, %y[%a, %d, %b, %i] : memref<2x5x3x4xf32>
          }
        }
      }
    }
  }
  func.return
}"""


def test_a_split_reduction_collapses_the_outer_loops_into_dimension_2():
    """gpu_launch._split_launch: a work-group of SPLIT_ITEMS (64) per iteration of the
    innermost loop (group id 0), the loop above on dimension 1, the rest collapsed into
    dimension 2 with the outermost varying slowest (a = id / 5, d = id % 5)."""
    from dlpc.backends.opencl.gpu_launch import plan_gpu_launch

    (kernel,) = kernels(parse_module(SPLIT4))
    launch = plan_gpu_launch(kernel, "k", H200)
    assert launch.split is not None and launch.split[0].loop_name == "r0"
    assert {lp.loop_name: e for lp, e in launch.mapped.items()} == {
        "i3": "get_group_id(0)",
        "i2": "get_global_id(1)",
        "i1": "(get_global_id(2) % 5)",
        "i0": "(get_global_id(2) / 5)",
    }
    assert (launch.global_size, launch.local_size) == ((4 * 64, 3, 10), (64, 1, 1))


# ------------------------------------------------------------------ chain arguments


@pytest.mark.parametrize("second, chained", [(60, True), (61, False)])
def test_a_chain_takes_at_most_max_chain_args_parameters(second, chained):
    """chains.py:94 (MAX_CHAIN_ARGS = 120 -> 119, opencl seed 43): OpenCL guarantees 1024
    bytes of kernel arguments (128 pointers); a run of kernels is one chain while its
    distinct buffer parameters are at most 120: 60 + 60 chain, 60 + 61 do not (each
    kernel is then launched alone: a piece of one kernel is no chain)."""
    from types import SimpleNamespace

    from dlpc.backends.opencl.chains import ChainWriter

    keys = {"a": [("a", i) for i in range(60)], "b": [("b", i) for i in range(second)]}
    pieces = []
    writer = SimpleNamespace(
        bodies={k: ("", ["float *"] * len(v), v) for k, v in keys.items()},
        batches={},
        team=1,
        chain=lambda piece, args: pieces.append((list(piece), len(args))),
    )
    ChainWriter.chain_runs(writer, ["a", "b"])  # type: ignore[arg-type]
    assert pieces == ([(["a", "b"], 120)] if chained else [])
