"""Tests from a read of passes/schedule/*.py's lines new since the seed-44 sample (issue 35,
fifth round, before the seed-49 draw): slide.py's refusals and its padded source read in
place, int_conv.py's template, fuse's symbolic-extent mark, `_delinearized`'s whole
terms, and the symbolic-extent marks of cache_write's copies. Each checks a small
hand-written case: the exact loop IR or diagnostic, or numbers against numpy."""

from __future__ import annotations

from fractions import Fraction

import pytest
from xdsl.context import Context
from xdsl.dialects import vector
from xdsl.ir import BlockArgument

import dlpc
from dlpc.dialects.loop import ForOp, kernels
from dlpc.passes import pipeline
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule._common import ScheduleError, affine, memref_type
from dlpc.passes.schedule.fuse import fuse
from dlpc.passes.schedule.int_conv import int_conv_script
from dlpc.passes.schedule.nest import analyse
from dlpc.passes.schedule.slide import CPP_IF, VECTOR_ISA, LoopSlideRows, SlideMismatchError
from dlpc.passes.schedule.tensorize import tensorize

# ------------------------------------------------------------------ slide's refusals

# A depthwise 3x3 tile (2 rows x 16) over X's rows of 18; BODY is the innermost body
SLIDE_NEST = """
func.func @main(%X: memref<6x18xf32>, %K: memref<3x3xf32>, %C: memref<4x16xf32>,
                %E: memref<4x16xf32>) {
  loop.kernel "k" {
    loop.for %ho = 0 to 4 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
            loop.for %w = 0 to 16 step 1 {name = "w", vectorize} {
              %h = arith.addi %ho, %hi : index
              %row = arith.addi %h, %r1 : index
              %col = arith.addi %w, %r2 : index
BODY
            }
          }
        }
      }
    }
  }
  func.return
}"""

SUM = """
              %x = memref.load %X[%row, %col] : memref<6x18xf32>
              %k = memref.load %K[%r1, %r2] : memref<3x3xf32>
              %c = memref.load %C[%h, %w] : memref<4x16xf32>
              %p = arith.mulf %x, %k : f32
              %s = arith.addf %c, %p : f32
              memref.store %s, %C[%h, %w] : memref<4x16xf32>"""

NOT_A_SUM = "the nest at loop k/r1 does not store a sum C + X * K"


@pytest.mark.parametrize(
    "old, new, message",
    [
        # a column index that is a product of two loops: no affine form (slide.py:162, :171)
        (
            "%col = arith.addi %w, %r2",
            "%col = arith.muli %w, %r2",
            "the nest at loop k/r1 reads or writes at non-affine indices",
        ),
        # two stores; an op of another dialect in the body (:211)
        (
            "memref.store %s, %C[%h, %w] : memref<4x16xf32>",
            "memref.store %s, %C[%h, %w] : memref<4x16xf32>\n"
            "memref.store %s, %E[%h, %w] : memref<4x16xf32>",
            NOT_A_SUM,
        ),
        (
            "%p = arith.mulf %x, %k : f32",
            "%p0 = arith.mulf %x, %k : f32\n%p = math.sqrt %p0 : f32",
            NOT_A_SUM,
        ),
        # the sum reads another buffer than it stores (:220)
        ("%c = memref.load %C[%h, %w]", "%c = memref.load %E[%h, %w]", NOT_A_SUM),
        # a difference, not a product (:222)
        ("%p = arith.mulf %x, %k", "%p = arith.subf %x, %k", NOT_A_SUM),
        # a factor that is a constant, not a load (:225)
        (
            "%p = arith.mulf %x, %k : f32",
            "%two = arith.constant 2.0 : f32\n%p = arith.mulf %x, %two : f32",
            NOT_A_SUM,
        ),
        # both factors move with w, X * X (:229)
        ("%p = arith.mulf %x, %k", "%p = arith.mulf %x, %x", NOT_A_SUM),
        # C read at another element than it is stored (:242)
        (
            "%c = memref.load %C[%h, %w]",
            "%c = memref.load %C[%hi, %w]",
            "the nest at loop k/r1 does not accumulate into the element it stores",
        ),
    ],
)
def test_slide_refuses_a_nest_that_is_no_sliding_sum(old, new, message):
    """slide.match / _check_indices: each requirement of the module docstring's 2)-3) that
    the nest breaks, with its one-line diagnostic."""
    text = SLIDE_NEST.replace("BODY", SUM)
    assert old in text
    module = parse_module(text.replace(old, new))
    with pytest.raises(SlideMismatchError) as e:
        tensorize(module, "k", "r1", "slide")
    assert str(e.value) == message


@pytest.mark.parametrize("acc_first", [True, False])
@pytest.mark.parametrize("x_first", [True, False])
def test_slide_keeps_the_sums_operand_order(acc_first, x_first):
    """`acc_first` / `x_first` (slide.py:217, :231): the vector code multiplies and adds in
    the nest's operand order (`K * X`, `P + C` where the nest wrote them so), which is
    the same float result either way but the C compiler sees the same expression."""
    body = SUM
    if not x_first:
        body = body.replace("arith.mulf %x, %k", "arith.mulf %k, %x")
    if not acc_first:
        body = body.replace("arith.addf %c, %p", "arith.addf %p, %c")
    module = parse_module(SLIDE_NEST.replace("BODY", body))
    tensorize(module, "k", "r1", "slide")
    LoopSlideRows().apply(Context(), module)
    (vec,) = [lp for lp in module.walk() if isinstance(lp, ForOp) and _cpp_if(lp) == VECTOR_ISA]
    ops = list(vec.walk())
    muls = [op for op in ops if op.name == "arith.mulf"]
    adds = [op for op in ops if op.name == "arith.addf"]
    assert len(muls) == len(adds) == 36  # 2 merged tiles x 9 taps x 2 rows x one vector
    for mul in muls:
        window = mul.operands[0 if x_first else 1].owner
        assert isinstance(window, vector.LoadOp | vector.ShuffleOp)  # X's window
        assert isinstance(mul.operands[1 if x_first else 0].owner, vector.BroadcastOp)  # K
    for add in adds:
        assert add.operands[1 if acc_first else 0].owner.name == "arith.mulf"


def _cpp_if(lp: ForOp) -> str | None:
    attr = lp.attributes.get(CPP_IF)
    return getattr(attr, "data", None)


# ------------------------------------------------- slide: a padded copy's source in place

# X (%xp) a padded copy of S (zeros, then S's rows at [1, 9) x [1, 65)), read by the nest
# alone (test/passes/loop-slide-rows.mlir's "padded"); each case below edits one line
PADDED = """
func.func @main(%K: memref<3x3xf32>, %S: memref<8x64xf32>, %D: memref<8x64xf32>,
                %I: memref<index>) {
  loop.kernel "k" {
    %xp = memref.alloca() : memref<10x66xf32>
    loop.for %z0 = 0 to 10 step 1 {name = "z0"} {
      loop.for %z1 = 0 to 66 step 1 {name = "z1"} {
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %xp[%z0, %z1] : memref<10x66xf32>
      }
    }
    loop.for %c0 = 1 to 9 step 1 {name = "c0"} {
      loop.for %c1 = 1 to 65 step 1 {name = "c1"} {
        %m1 = arith.constant -1 : index
        %s0 = arith.addi %c0, %m1 : index
        %s1 = arith.addi %c1, %m1 : index
        %v = memref.load %S[%s0, %s1] : memref<8x64xf32>
        memref.store %v, %xp[%c0, %c1] : memref<10x66xf32>
      }
    }
    loop.for %ho = 0 to 8 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
            loop.for %w = 0 to 64 step 1 {name = "w", vectorize} {
              %h = arith.addi %ho, %hi : index
              %row = arith.addi %h, %r1 : index
              %col = arith.addi %w, %r2 : index
              %x = memref.load %xp[%row, %col] : memref<10x66xf32>
              %k = memref.load %K[%r1, %r2] : memref<3x3xf32>
              %c = memref.load %D[%h, %w] : memref<8x64xf32>
              %p = arith.mulf %x, %k : f32
              %s = arith.addf %c, %p : f32
              memref.store %s, %D[%h, %w] : memref<8x64xf32>
            }
          }
        }
      }
    }
    AFTER
  }
  func.return
}"""

STORE_V = "memref.store %v, %xp[%c0, %c1] : memref<10x66xf32>"
READ_XP = """loop.for %e = 0 to 4 step 1 {name = "e"CPP} {
      %e0 = arith.constant 0 : index
      %ex = memref.load %xp[%e, %e0] : memref<10x66xf32>
      memref.store %ex, %D[%e, %e0] : memref<8x64xf32>
    }"""


@pytest.mark.parametrize(
    "old, new, in_place",
    [
        ("AFTER", "", True),
        # the fill stores a sum, not S's element as loaded (slide.py:518)
        (STORE_V, "%v2 = arith.addf %v, %v : f32\n" + STORE_V.replace("%v,", "%v2,"), False),
        # the copy stores into another buffer too (:507)
        (STORE_V, STORE_V + "\nmemref.store %v, %D[%s0, %s1] : memref<8x64xf32>", False),
        # an op between X's allocation and the copy: no copy right after it (:498)
        (
            "%xp = memref.alloca() : memref<10x66xf32>",
            "%xp = memref.alloca() : memref<10x66xf32>\n%one = arith.constant 1 : index",
            False,
        ),
        # the copy's column loop steps by 2 (:529)
        (
            'loop.for %c1 = 1 to 65 step 1 {name = "c1"}',
            'loop.for %c1 = 1 to 65 step 2 {name = "c1"}',
            False,
        ),
        # a row offset known at run time only (a load of %I) in a dim of 10 rows (:555)
        (
            "%s0 = arith.addi %c0, %m1 : index",
            "%q = memref.load %I[] : memref<index>\n%s0 = arith.addi %c0, %q : index",
            False,
        ),
        # S written in the kernel (:564)
        (
            "AFTER",
            "%f0 = arith.constant 0.0 : f32\n%i0 = arith.constant 0 : index\n"
            "memref.store %f0, %S[%i0, %i0] : memref<8x64xf32>",
            False,
        ),
        # X read by another loop (:569), unless that loop is for compilers without AVX-512
        ("AFTER", READ_XP.replace("CPP", ""), False),
        ("AFTER", READ_XP.replace("CPP", ', dlpc.cpp_if = "!defined(__AVX512F__)"'), True),
        # the copy covers columns [1, 33) of S's 64: not S's whole row (:553)
        (
            'loop.for %c1 = 1 to 65 step 1 {name = "c1"}',
            'loop.for %c1 = 1 to 33 step 1 {name = "c1"}',
            False,
        ),
        # the copy's box starts at row 2 while S's row 0 lands at X's row 1: X[1] is no
        # row of S (:552 is the column's; rows may be any box)
        (
            'loop.for %c1 = 1 to 65 step 1 {name = "c1"}',
            'loop.for %c1 = 2 to 65 step 1 {name = "c1"}',
            False,
        ),
    ],
)
def test_slide_reads_a_padded_copys_source_in_place_only_where_it_may(old, new, in_place):
    """slide._padded_source: the vector code reads S in place (and the copy moves under
    `#if !defined(__AVX512F__)`) only where X is a padded copy of S's whole rows that
    nothing else reads but code for other compilers, and S is never written; each case
    breaks one requirement, and the vector code then reads X, the copy left in place."""
    text = PADDED.replace("AFTER", "") if old != "AFTER" else PADDED
    assert old in text
    module = parse_module(text.replace(old, new))
    tensorize(module, "k", "r1", "slide")
    LoopSlideRows().apply(Context(), module)
    vec = [lp for lp in module.walk() if isinstance(lp, ForOp) and _cpp_if(lp) == VECTOR_ISA]
    assert vec
    sources = {
        _name(op.operands[0]) for lp in vec for op in lp.walk() if isinstance(op, vector.LoadOp)
    }
    assert ("S" in sources) == in_place
    assert ("xp" in sources) == (not in_place)
    scalar = [lp.loop_name for lp in module.walk() if isinstance(lp, ForOp)]
    assert ("z0_scalar" in scalar) == in_place


def _name(value) -> str:
    """A buffer's name: the function's argument (`K, S, D, I`) or the local copy `xp`."""
    if isinstance(value, BlockArgument):
        return "KSDI"[value.index]
    return "xp"


# X one row (a 1 x 3 window along the row): a padded copy of row q of S, q loaded from %I
# before the copy (OUTSIDE) or inside its fill loop (INSIDE)
ONE_ROW = """
func.func @main(%K: memref<3xf32>, %S: memref<4x64xf32>, %D: memref<1x64xf32>, %I: memref<index>) {
  loop.kernel "k" {
    OUTSIDE
    %xp = memref.alloca() : memref<1x66xf32>
    loop.for %z1 = 0 to 66 step 1 {name = "z1"} {
      %zero = arith.constant 0.000000e+00 : f32
      %z0 = arith.constant 0 : index
      memref.store %zero, %xp[%z0, %z1] : memref<1x66xf32>
    }
    loop.for %c0 = 0 to 1 step 1 {name = "c0"} {
      loop.for %c1 = 1 to 65 step 1 {name = "c1"} {
        %m1 = arith.constant -1 : index
        INSIDE
        %s0 = arith.addi %c0, %q : index
        %s1 = arith.addi %c1, %m1 : index
        %v = memref.load %S[%s0, %s1] : memref<4x64xf32>
        memref.store %v, %xp[%c0, %c1] : memref<1x66xf32>
      }
    }
    loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
      loop.for %w = 0 to 64 step 1 {name = "w", vectorize} {
        %i0 = arith.constant 0 : index
        %col = arith.addi %w, %r2 : index
        %x = memref.load %xp[%i0, %col] : memref<1x66xf32>
        %k = memref.load %K[%r2] : memref<3xf32>
        %c = memref.load %D[%i0, %w] : memref<1x64xf32>
        %p = arith.mulf %x, %k : f32
        %s = arith.addf %c, %p : f32
        memref.store %s, %D[%i0, %w] : memref<1x64xf32>
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize("where", ["OUTSIDE", "INSIDE"])
def test_slide_reads_in_place_only_at_an_offset_known_before_the_copy(where):
    """slide._padded_source (fixed in 477fd7a): a row offset computed before the copy
    (a run-time value, in a dim of one row) is read in place, S's row q; one computed
    inside the copy's fill loop (its second loop; the check looked in the first only)
    is not: the vector code would use a value of a loop that moves under
    `#if !defined`, out of its scope. Then the vector code reads the copy."""
    load = "%q = memref.load %I[] : memref<index>"
    other = "OUTSIDE" if where == "INSIDE" else "INSIDE"
    module = parse_module(ONE_ROW.replace(where, load).replace(other, ""))
    tensorize(module, "k", "r2", "slide")
    LoopSlideRows().apply(Context(), module)
    (vec,) = [lp for lp in module.walk() if isinstance(lp, ForOp) and _cpp_if(lp) == VECTOR_ISA]
    loads = [op for op in vec.walk() if isinstance(op, vector.LoadOp)]
    sources = {_name(op.operands[0]) for op in loads}
    assert sources == ({"S", "D"} if where == "OUTSIDE" else {"xp", "D"})
    # every value the vector code uses is an argument, or defined in it or in its block
    for op in vec.walk():
        for value in op.operands:
            if isinstance(value, BlockArgument):
                parent = value.owner.parent_op()
                assert parent is not None
                assert parent.name == "func.func" or vec.is_ancestor(parent)
            else:
                assert (
                    vec.is_ancestor(value.owner) or value.owner.parent_block() is vec.parent_block()
                )


# ------------------------------------------------------------ int_conv.py's template


def _qdq_conv(tmp_path, n, c, h, w, o, pads=1, stride=1, groups=1) -> str:
    """dequantize -> conv2d -> relu -> quantize (graph-fold-qdq: one int8 kernel with i32
    sums requantized; test_int_conv's model), the weights all 1."""
    oh, ow = (h + 2 * pads - 3) // stride + 1, (w + 2 * pads - 3) // stride + 1
    x, wt, y = f"{n}x{c}x{h}x{w}", f"{o}x{c // groups}x3x3", f"{n}x{o}x{oh}x{ow}"
    attrs = f"strides = array<i64: {stride}, {stride}>, pads = array<i64: {pads}, {pads}, {pads}, {pads}>"
    if groups > 1:
        attrs += f", groups = {groups} : i64"
    path = tmp_path / "conv.mlir"
    path.write_text(f"""
func.func @main(%xq: tensor<{x}xi8>) -> tensor<{y}xi8> {{
  %sx = graph.constant dense<0.05> : tensor<f32>
  %zx = graph.constant dense<2> : tensor<i8>
  %wq = graph.constant dense<1> : tensor<{wt}xi8>
  %sw = graph.constant dense<0.02> : tensor<f32>
  %zw = graph.constant dense<0> : tensor<i8>
  %sy = graph.constant dense<0.1> : tensor<f32>
  %zy = graph.constant dense<-3> : tensor<i8>
  %x = graph.dequantize %xq, %sx, %zx : (tensor<{x}xi8>, tensor<f32>, tensor<i8>) -> tensor<{x}xf32>
  %w = graph.dequantize %wq, %sw, %zw : (tensor<{wt}xi8>, tensor<f32>, tensor<i8>) -> tensor<{wt}xf32>
  %c = graph.conv2d %x, %w {{{attrs}}} : (tensor<{x}xf32>, tensor<{wt}xf32>) -> tensor<{y}xf32>
  %r = graph.relu %c : (tensor<{y}xf32>) -> tensor<{y}xf32>
  %q = graph.quantize %r, %sy, %zy : (tensor<{y}xf32>, tensor<f32>, tensor<i8>) -> tensor<{y}xi8>
  func.return %q : tensor<{y}xi8>
}}
""")
    return str(path)


def _conv_kernel(path: str):
    """The loop kernel with a reduction (the conv) of the model at `path`, before any
    schedule, and its nest."""
    model = dlpc.load(path, batch=1) if path.endswith(".dlpc") else dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=3))
    (kernel,) = [k for k in kernels(module) if (m := analyse(k)) is not None and m.reduce]
    nest = analyse(kernel)
    assert nest is not None
    return kernel, nest


# (n, c, h, w, o[, pads]) -> the script (K the kernel), or "!" and the refusal
INT_CONV = {
    # a row of 10 (16-lane pieces: 8 + 2, 2 pieces), 8 channels of 24 // 2 = 12 at most:
    # one block, no split; padded: the padded copy per image; two small images: serial
    (2, 3, 9, 10, 8): """
        decompose K
        reorder K: i0, i2, r0, r1, r2, i1, i3
        cache_read K/i0 @0 -> K_xp
        cache_write K/i2 sums -> K_acc
        unroll K/i1
        vectorize K/i3
        serial K
    """,
    # unpadded: read in place, no copy
    (1, 3, 8, 12, 8, 0): """
        decompose K
        reorder K: i0, i2, r0, r1, r2, i1, i3
        cache_write K/i2 sums -> K_acc
        unroll K/i1
        vectorize K/i3
        serial K
    """,
    # 12 channels: a row of 24 (2 pieces) keeps them in one block of 12; a row of 28
    # (16 + 8 + 4: 3 pieces) takes blocks of 24 // 3 = 8 at most, so 6
    (1, 2, 4, 24, 12): """
        decompose K
        reorder K: i0, i2, r0, r1, r2, i1, i3
        cache_read K/i0 @0 -> K_xp
        cache_write K/i2 sums -> K_acc
        unroll K/i1
        vectorize K/i3
        serial K
    """,
    (1, 2, 4, 28, 12): """
        decompose K
        split K/i1 by 6 -> i1o, i1i
        reorder K: i0, i2, i1o, r0, r1, r2, i1i, i3
        cache_read K/i0 @0 -> K_xp
        cache_write K/i1o sums -> K_acc
        unroll K/i1i
        vectorize K/i3
        serial K
    """,
    # a row of 64 (4 vectors) is one tile; of 80, tiles of 16 (the largest multiple of 16
    # up to 64 dividing 80); of 96, tiles of 48
    (1, 2, 3, 64, 4): """
        decompose K
        reorder K: i0, i2, r0, r1, r2, i1, i3
        cache_read K/i0 @0 -> K_xp
        cache_write K/i2 sums -> K_acc
        unroll K/i1
        vectorize K/i3
        serial K
    """,
    (1, 2, 3, 80, 4): """
        decompose K
        split K/i3 by 16 -> i3o, i3i
        reorder K: i0, i2, i3o, r0, r1, r2, i1, i3i
        cache_read K/i0 @0 -> K_xp
        cache_write K/i3o sums -> K_acc
        unroll K/i1
        vectorize K/i3i
        serial K
    """,
    (1, 2, 3, 96, 4): """
        decompose K
        split K/i3 by 48 -> i3o, i3i
        reorder K: i0, i2, i3o, r0, r1, r2, i1, i3i
        cache_read K/i0 @0 -> K_xp
        cache_write K/i3o sums -> K_acc
        unroll K/i1
        vectorize K/i3i
        serial K
    """,
    # a row of 70: no multiple of 16 up to 64 divides it
    (1, 2, 3, 70, 4): "!kernel 'K': row of 70 does not tile by 16",
    # work enough for two threads: two images, one each; one image, its rows
    (2, 16, 18, 18, 32): """
        decompose K
        split K/i1 by 8 -> i1o, i1i
        reorder K: i0, i2, i1o, r0, r1, r2, i1i, i3
        cache_read K/i0 @0 -> K_xp
        cache_write K/i1o sums -> K_acc
        unroll K/i1i
        vectorize K/i3
        serial K
        parallel K/i0
    """,
    (1, 16, 34, 34, 32): """
        decompose K
        split K/i1 by 8 -> i1o, i1i
        reorder K: i0, i2, i1o, r0, r1, r2, i1i, i3
        cache_read K/i0 @0 -> K_xp
        cache_write K/i1o sums -> K_acc
        unroll K/i1i
        vectorize K/i3
        serial K
        parallel K/i2
    """,
}


@pytest.mark.parametrize("case", INT_CONV)
def test_int_conv_template_decisions(tmp_path, case):
    """int_conv.int_conv_script: the row tile (up to 4 vectors, whole vectors when
    split), the channel block (INT_TILE_VECTORS over the row's vector pieces), the
    padded copy, the parallel loop; each case's reason above."""
    n, c, h, w, o, pads = (*case, 1)[:6]
    kernel, nest = _conv_kernel(_qdq_conv(tmp_path, n, c, h, w, o, pads))
    _check_script(lambda: int_conv_script(kernel, nest), kernel, INT_CONV[case])


@pytest.mark.parametrize(
    "model, message",
    [
        # stride 2; depthwise (groups = channels)
        ("stride", "kernel 'K': a strided integer conv (no template)"),
        ("depthwise", "kernel 'K': a depthwise integer conv (no template)"),
        # float convs (a float product; stride 2's index products too); a float matmul
        ("float", "kernel 'K' is no integer product with requantized i32 sums"),
        ("float_stride", "kernel 'K' is no integer product with requantized i32 sums"),
        ("matmul", "kernel 'K' is not convolution-shaped"),
    ],
)
def test_int_conv_template_refusals(tmp_path, model, message):
    """int_conv_script's refusals (int_conv.py:54-70), each with its one-line message."""
    if model == "stride":
        path = _qdq_conv(tmp_path, 1, 4, 9, 9, 4, stride=2)
    elif model == "depthwise":
        path = _qdq_conv(tmp_path, 1, 4, 8, 16, 4, groups=4)
    elif model == "matmul":
        path = _text(
            tmp_path,
            "model f(x: f32[B, 64]) {\n  param m: f32[8, 64] = kaiming(seed=6)\n"
            "  return linear(x, m)\n}\n",
        )
    else:
        stride = ", stride=2" if model == "float_stride" else ""
        path = _text(
            tmp_path,
            "model f(x: f32[B, 4, 8, 8]) {\n"
            "  param k: f32[8, 4, 3, 3] = kaiming(seed=5)\n"
            f"  return conv2d(x, k, padding=1{stride})\n}}\n",
        )
    kernel, nest = _conv_kernel(path)
    with pytest.raises(ScheduleError) as e:
        int_conv_script(kernel, nest)
    assert str(e.value).replace(kernel.sym, "K") == message


def _text(tmp_path, source: str) -> str:
    path = tmp_path / "f.dlpc"
    path.write_text(source)
    return str(path)


def _check_script(make, kernel, expect: str) -> None:
    if expect.startswith("!"):
        with pytest.raises(ScheduleError) as e:
            make()
        assert str(e.value).replace(kernel.sym, "K") == expect[1:]
        return
    got = make().replace(kernel.sym, "K")
    assert got.split("\n") == [ln.strip() for ln in expect.strip().split("\n")]


# ----------------------------------------------------- fuse's symbolic-extent mark

FUSE = """
func.func @main(%y: memref<8x4xf32>) {
  loop.kernel "k" {
    loop.for %i = LO to 8 step ST {name = "i"OUT} {
      loop.for %j = 0 to 4 step 1 {name = "j"INN} {
        %z = arith.constant 1.0 : f32
        memref.store %z, %y[%i, %j] : memref<8x4xf32>
      }
    }
  }
  func.return
}"""
SEQ = ', dlpc.extent = "seq"'
BASE = ", dlpc.extent_base = [1 : i64]"


@pytest.mark.parametrize(
    "outer, inner, lo, step, marks",
    [
        # the outer loop over a symbolic extent: the fused loop keeps the mark, its limit 4
        # times the outer's (4 inner iterations)
        (SEQ, "", 0, 1, {"dlpc.extent": '"seq"', "dlpc.extent_scale": "4 : i64"}),
        # with its base and a scale already (a fused loop fused again): scales multiply
        (
            SEQ + BASE + ", dlpc.extent_scale = 2 : i64",
            "",
            0,
            1,
            {
                "dlpc.extent": '"seq"',
                "dlpc.extent_base": "[1 : i64]",
                "dlpc.extent_scale": "8 : i64",
            },
        ),
        # the inner loop marked too (either mark); the outer a split's outer loop
        # (`dlpc.extent_id`); not from 0 by 1; only a base, no extent: no marks
        (SEQ, SEQ, 0, 1, {}),
        (SEQ, BASE, 0, 1, {}),
        (SEQ + ", dlpc.extent_id = 1 : i64", "", 0, 1, {}),
        (SEQ, "", 1, 1, {}),
        (SEQ, "", 0, 2, {}),
        (BASE, "", 0, 1, {}),
    ],
)
def test_fuse_keeps_an_outer_symbolic_extents_mark_scaled(outer, inner, lo, step, marks):
    """fuse.fuse_extent (fuse.py:106-124): the marks the fused loop carries, exactly."""
    text = FUSE.replace("OUT", outer).replace("INN", inner)
    module = parse_module(text.replace("LO", str(lo)).replace("ST", str(step)))
    loop = fuse(module, "k", "i", "j", "f")
    got = {k: str(v) for k, v in loop.attributes.items() if k != "name"}
    assert got == marks


# -------------------------------------------- `_delinearized`'s whole terms (Fractions)

# y[jo + ji] = relu(x)[row, col], (row, col) = divmod(A jo + ji, 8), jo = 0, 8 (STEP 8)
RESHAPED = """
func.func @main(%x: memref<4x8xf32>, %y: memref<16xf32>) {
  %t = memref.alloc() : memref<4x8xf32>
  loop.kernel "relu" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %t[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  loop.kernel "use" {
    loop.for %jo = LO to HI step STEP {name = "jo"} {
      loop.for %ji = 0 to JI step 1 {name = "ji"} {
        %c8 = arith.constant 8 : index
        %ca = arith.constant A : index
        %a = arith.muli %jo, %ca : index
        %j = arith.addi %a, %ji : index
        %row = arith.divsi %j, %c8 : index
        %col = arith.remsi %j, %c8 : index
        %v = memref.load %t[%row, %col] : memref<4x8xf32>
        %o = arith.addi %jo, %ji : index
        memref.store %v, %y[%o] : memref<16xf32>
      }
    }
  }
  memref.dealloc %t : memref<4x8xf32>
  func.return
}"""


def _reshaped(a=1, lo=0, hi=16, step=8, ji=8):
    text = RESHAPED.replace("LO", str(lo)).replace("HI", str(hi)).replace("STEP", str(step))
    return parse_module(text.replace("JI", str(ji)).replace("A :", f"{a} :"))


@pytest.mark.parametrize("a", [1, 3])
def test_compute_at_over_a_whole_quotient_term_recomputes_the_rows_read(a):
    """`(a jo + ji) / 8` with jo = 0, 8 and ji in [0, 8) is `a (jo / 8)` (`_delinearized`'s
    whole term, a Fraction a / 8): compute_at recomputes row 0, then row a, of relu(x)
    per jo; the row index is emitted as `(jo / 8) * a` (fixed in the commit after
    477fd7a: it was `jo * a`, rows 0 and 24 of 4). Against numpy on the C target."""
    import numpy as np

    from dlpc.backends.runtime.evaluate import run_loop_c
    from dlpc.passes.schedule.compute_at import compute_at

    module = _reshaped(a)
    compute_at(module, "relu", "use", "jo")
    text = str(module)
    assert 'loop.kernel "relu"' not in text
    assert "arith.divsi %jo" in text  # the quotient jo / 8, once per recomputed row
    x = np.random.default_rng(a).standard_normal((4, 8)).astype(np.float32)
    y = np.zeros(16, np.float32)
    run_loop_c(module, [x, y])
    want = np.concatenate([np.maximum(x[0], 0), np.maximum(x[a], 0)])
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize(
    "kw, q, r",
    [
        # jo a multiple of 8 on every value: whole into the quotient, 1/8 and 3/8 of jo
        ({}, {"jo": Fraction(1, 8)}, {"ji": 1}),
        ({"a": 3}, {"jo": Fraction(3, 8)}, {"ji": 1}),
        # 16 jo: a multiple of 8 already, 2 jo in the quotient (an int, no Fraction)
        ({"a": 16, "hi": 2, "step": 1}, {"jo": 2}, {"ji": 1}),
        # jo steps by 4 (4 a multiple of 8? no), from 4 by 8 (4 is not): not exact
        ({"step": 4}, None, None),
        ({"lo": 4, "hi": 20}, None, None),
        # ji up to 8: the remainder still spills into the quotient after jo goes whole
        ({"ji": 9}, None, None),
    ],
)
def test_delinearized_takes_terms_whole_on_every_value_of_their_loop(kw, q, r):
    """_common._delinearized (`:360-378`): a term whose every value is a multiple of K goes
    whole into the quotient as a Fraction coefficient (an int when whole); the division
    stays non-affine where no term does or the rest still spills."""
    module = _reshaped(**kw)
    (div,) = [op for op in module.walk() if op.name == "arith.divsi"]
    (rem,) = [op for op in module.walk() if op.name == "arith.remsi"]
    for op, want in ((div, q), (rem, r)):
        form = affine(op.results[0], delinearize=True)
        if want is None:
            assert form is None
            continue
        assert form is not None and form.const == 0
        assert {v.name_hint: c for v, c in form.terms.items()} == want
        assert all(type(c) is type(want[v.name_hint]) for v, c in form.terms.items())


def test_slide_hoists_what_moves_with_no_loop_of_the_nest():
    """slide._emit's `hoist` (slide.py:597-608): index arithmetic inside the nest that moves
    with no loop of it (here `ho / 1`, a division no affine form takes) is computed once
    before the vector code, its ops cloned there; the vector code holds none of it. The
    rewritten kernel's sums equal the nest's on the C target (AVX-512 where the host has it)."""
    import numpy as np

    from dlpc.backends.runtime.evaluate import run_loop_c

    text = SLIDE_NEST.replace("BODY", SUM).replace(
        "%h = arith.addi %ho, %hi : index",
        "%one = arith.constant 1 : index\n%hq = arith.divui %ho, %one : index\n"
        "%h = arith.addi %hq, %hi : index",
    )
    rng = np.random.default_rng(7)
    x, k = (
        rng.standard_normal((6, 18)).astype(np.float32),
        rng.standard_normal((3, 3)).astype(np.float32),
    )
    c0 = rng.standard_normal((4, 16)).astype(np.float32)
    want = c0.copy()
    run_loop_c(parse_module(text), [x, k, want, np.zeros((4, 16), np.float32)])
    module = parse_module(text)
    tensorize(module, "k", "r1", "slide")
    LoopSlideRows().apply(Context(), module)
    inner = [lp for lp in module.walk() if isinstance(lp, ForOp) and lp.loop_name == "r1_v16"]
    assert len(inner) == 1  # (in the merged tile loop, under `#if defined(__AVX512F__)`)
    assert not [op for op in inner[0].walk() if op.name == "arith.divui"]
    before = []
    op = inner[0].prev_op
    while op is not None:
        before.append(op.name)
        op = op.prev_op
    assert before.count("arith.divui") == 2  # one per merged tile (ho, ho + 2)
    got = c0.copy()
    run_loop_c(module, [x, k, got, np.zeros((4, 16), np.float32)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name, folds", [("sums", True), ("part", False)])
def test_fold_init_epilogue_takes_only_decompose_s_sums_buffer(name, folds):
    """fold_init_epilogue._epilogue / _sums_to (fold_init_epilogue.py:143): an epilogue
    that stores into another buffer than the one summed folds only where the summed
    buffer is decompose's kernel-local `sums` (an integer sum requantized); the same
    kernel with the buffer named otherwise is left as it is (init and epilogue nests,
    the buffer kept). test/passes/loop-fold-init-epilogue-sums.mlir's kernel."""
    from pathlib import Path

    from dlpc.passes.schedule.fold_init_epilogue import LoopFoldInitEpilogue

    text = (
        Path(__file__).parents[1].joinpath("passes/loop-fold-init-epilogue-sums.mlir").read_text()
    )
    text = "\n".join(ln for ln in text.split("\n") if not ln.startswith("//"))
    module = parse_module(text.replace("%sums", f"%{name}"))
    LoopFoldInitEpilogue().apply(Context(), module)
    out = str(module)
    assert ("_post" not in out and "_init" not in out and f"%{name}" not in out) == folds
    assert ("_post" in out and "_init" in out and f"%{name} = memref.alloca()" in out) == (
        not folds
    )


# ------------------------------------------ conv.py: a 1x1 conv's rows, at the thresholds

# (c, o, h, w) of an unpadded 1x1 stride-1 conv -> its script after `decompose`
POINTWISE = {
    # one-vector rows whose 8-row tile reads 32 x 8 x 16 floats = 16 KB, exactly
    # CONV_ROWS_PANEL_BYTES: 8 rows a tile (2 channels: 24 // 8 = 3, the largest divisor of
    # 8 within); 8 channels = 4 blocks of 2, exactly CONV_ROW_STAGE_BLOCKS: staged (xr)
    (32, 8, 8, 16): [
        "split K/i1 by 2 -> i1o, i1i",
        "split K/i2 by 8 -> i2o, i2i",
        "reorder K: i0, i2o, i1o, r0, r1, r2, i2i, i1i, i3",
        "cache_read K/i2o @0 -> K_xr",
        "cache_write K/i1o @2 -> K_acc",
        "unroll K/i2i",
        "unroll K/i1i",
        "vectorize K/i3",
        "serial K",
    ],
    # 33 channels in: 16.5 KB, one row a tile, one block of all 8 outputs: nothing staged
    (33, 8, 8, 16): [
        "reorder K: i0, i2, r0, r1, r2, i1, i3",
        "cache_write K/i2 @2 -> K_acc",
        "unroll K/i1",
        "vectorize K/i3",
        "serial K",
    ],
    # 6 outputs in blocks of 3: 2 blocks, under 4: 8 rows a tile, not staged
    (32, 6, 8, 16): [
        "split K/i1 by 3 -> i1o, i1i",
        "split K/i2 by 8 -> i2o, i2i",
        "reorder K: i0, i2o, i1o, r0, r1, r2, i2i, i1i, i3",
        "cache_write K/i1o @2 -> K_acc",
        "unroll K/i2i",
        "unroll K/i1i",
        "vectorize K/i3",
        "serial K",
    ],
    # two-vector rows, one a tile: a row's 128 input rows of 32 are 16 KB, exactly the
    # bound; 44 outputs in blocks of 11 (24 // 2 = 12 at most): 4 blocks, staged
    (128, 44, 2, 32): [
        "split K/i1 by 11 -> i1o, i1i",
        "reorder K: i0, i2, i1o, r0, r1, r2, i1i, i3",
        "cache_read K/i2 @0 -> K_xr",
        "cache_write K/i1o @2 -> K_acc",
        "unroll K/i1i",
        "vectorize K/i3",
        "serial K",
        "parallel K/i2",
    ],
    # ... 129 input rows: past the bound, not staged
    (129, 44, 2, 32): [
        "split K/i1 by 11 -> i1o, i1i",
        "reorder K: i0, i2, i1o, r0, r1, r2, i1i, i3",
        "cache_write K/i1o @2 -> K_acc",
        "unroll K/i1i",
        "vectorize K/i3",
        "serial K",
        "parallel K/i2",
    ],
}


@pytest.mark.parametrize("case", POINTWISE)
def test_a_pointwise_convs_row_tile_and_row_copy_at_their_thresholds(tmp_path, case):
    """conv.conv_tile_script's 1x1 rules (conv.py:138-146, :214-223): rows per tile for
    one-vector rows up to CONV_ROWS_PANEL_BYTES, the row copy (`K_xr`) from
    CONV_ROW_STAGE_BLOCKS channel blocks where a tile's input rows fit the same bound;
    each case at or one past a threshold (reasons above)."""
    from dlpc.passes.schedule.conv import conv_tile_script

    c, o, h, w = case
    path = _text(
        tmp_path,
        f"model c(x: f32[B, {c}, {h}, {w}]) {{\n"
        f"  param k: f32[{o}, {c}, 1, 1] = kaiming(seed=5)\n"
        "  return conv2d(x, k, strides=1, padding=0)\n}\n",
    )
    model = dlpc.load(path, batch=1)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (m := analyse(k)) is not None and m.reduce]
    nest = analyse(kernel)
    assert nest is not None
    script = conv_tile_script(kernel, nest, threads=2).replace(kernel.sym, "K").split("\n")
    assert script == ["decompose K", *POINTWISE[case]]


# ------------------------------------------------- winograd: blocks of two tile rows


@pytest.mark.parametrize(
    "w, h, co, two",
    [
        # 16 wide: 8 tiles a row (half a vector), 8 tile rows (pairs): two-row blocks, the
        # rows split by 2 (i2tb, i2tk) and V's reshape copied per block, split per row
        (16, 16, 8, True),
        (16, 16, 32, True),  # 32 outputs: blocks of CO_BLOCK = 16 rows, 16 x 16 tiles fit
        (32, 32, 8, False),  # 16 tiles a row: a whole vector already
        (16, 10, 8, False),  # 5 tile rows: they do not pair up
        (8, 8, 8, False),  # 4 tiles a row: a quarter vector
    ],
)
def test_fused_winograd_takes_two_tile_rows_where_a_row_is_half_a_vector(tmp_path, w, h, co, two):
    """winograd._two_rows and fused_script(two=True) (winograd.py:142, :241-255, :301-313):
    the loops of the scheduled output transform, with or without the two-row split."""
    from dlpc import api

    path = _text(
        tmp_path,
        f"model w(x: f32[B, 4, {h}, {w}]) {{\n  param k: f32[{co}, 4, 3, 3] = kaiming(seed=5)\n"
        "  return relu(conv2d(x, k, padding=1))\n}\n",
    )
    model = dlpc.load(path, batch=1)
    opts = pipeline.PipelineOptions(
        opt_level=3,
        schedule=True,
        extra={
            "graph-winograd": {"where": "all"},
            "loop-default-schedule": {"winograd_fuse": True},
        },
    )
    module = pipeline.lower(
        model.module.clone(), "loop", opts, weights=dict(api.check_weights(model))
    )
    names = {lp.loop_name for lp in module.walk() if isinstance(lp, ForOp) and lp.loop_name}
    split = {"i2tb", "i2tk", "reshape_1_i3o", "reshape_1_i3i"}
    assert (split & names) == (split if two else set())


# ------------------------------------------------------------- decompose's `sums` buffer


def _requant(rows: int = 4, cols: int = 8, lower: int = 0) -> str:
    """test/passes/loop-decompose-reduction-sums.mlir's kernel (an i32 sum requantized to
    i8) over `rows` x `cols` outputs, its column loop from `lower`."""
    from pathlib import Path

    text = (
        Path(__file__).parents[1].joinpath("passes/loop-decompose-reduction-sums.mlir").read_text()
    )
    text = "\n".join(ln for ln in text.split("\n") if not ln.startswith("//"))
    text = text.replace("4x16xi8", f"{rows}x16xi8").replace("8x16xi8", f"{cols}x16xi8")
    text = text.replace("4x8xi8", f"{rows}x{cols}xi8").replace("0 to 4 step", f"0 to {rows} step")
    return text.replace("0 to 8 step", f"{lower} to {cols} step")


@pytest.mark.parametrize(
    "rows, cols, alloc",
    [
        # 512 x 512 i32 sums: 1 MiB, exactly LOCAL_SUMS_BYTES: on the stack; one more
        # column: on the heap (an alloc and its dealloc)
        (512, 512, "memref.alloca"),
        (512, 513, "memref.alloc"),
    ],
)
def test_decompose_puts_sums_over_a_mib_on_the_heap(rows, cols, alloc):
    """decompose._sums_buffer (decompose.py:274-281): the kernel-local buffer of i32 sums
    is an alloca up to LOCAL_SUMS_BYTES, an alloc beyond."""
    from dlpc.passes.schedule.decompose import decompose_reduction

    module = parse_module(_requant(rows, cols))
    decompose_reduction(module, "requant")
    (sums,) = [op for op in module.walk() if op.results and op.results[0].name_hint == "sums"]
    assert sums.name == alloc
    assert str(sums.results[0].type) == f"memref<{rows}x{cols}xi32>"


def test_decompose_refuses_sums_over_a_loop_not_from_zero():
    """decompose._local_sums (decompose.py:265-271): the sums buffer is indexed by the
    spatial loops' ivs, so each must run from 0 by 1; a column loop from 1 keeps the
    refusal of a sum stored as another type."""
    from dlpc.passes.schedule.decompose import decompose_reduction

    module = parse_module(_requant(lower=1))
    with pytest.raises(ScheduleError) as e:
        decompose_reduction(module, "requant")
    assert str(e.value) == (
        "the accumulator of loop requant/i1 has type i32, its output element i8: it cannot "
        "accumulate in the output"
    )


def test_decomposed_integer_sums_give_the_kernels_numbers():
    """decompose over `sums`: the hand-written kernel's requantized outputs (i32 sums
    scaled, rounded half to even, wrapped to i8) equal numpy's on the C target."""
    import numpy as np

    from dlpc.backends.runtime.evaluate import run_loop_c
    from dlpc.passes.schedule.decompose import decompose_reduction

    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (4, 16)).astype(np.int8)
    w = rng.integers(-128, 128, (8, 16)).astype(np.int8)
    sums = a.astype(np.int32) @ w.astype(np.int32).T
    want = np.round(sums.astype(np.float32) * np.float32(0.125)).astype(np.int32).astype(np.int8)
    module = parse_module(_requant())
    decompose_reduction(module, "requant")
    assert "%sums = memref.alloca()" in str(module)
    got = np.zeros((4, 8), np.int8)
    run_loop_c(module, [a, w, got])
    np.testing.assert_array_equal(got, want)


# ------------------------------------------ cache_write's copies of a symbolic extent

I0I = 'dlpc.extent = "seq", dlpc.extent_base = [1 : i64]'


@pytest.mark.parametrize(
    "marks, copied",
    [
        (I0I, True),  # test/passes/loop-cache-write-symbolic.mlir's case
        ('dlpc.extent = "seq"', True),  # no base: nothing to enclose
        # its base names split id 2, not i0o's 1 (no loop around the copies has it)
        ('dlpc.extent = "seq", dlpc.extent_base = [2 : i64]', False),
        # a fused loop's scaled extent (`dlpc.extent_scale`): not the box's rows
        (I0I + ", dlpc.extent_scale = 2 : i64", False),
        ("dlpc.extent_base = [1 : i64]", False),  # no extent
    ],
)
def test_cache_write_copies_take_the_tile_loops_extent_marks(marks, copied):
    """cache._write_marks (cache.py:516-556): the copy loops of the rows take the marks of
    the tile's row loop i0i only where it is marked over a symbolic extent, unscaled, its
    base split loops enclosing the copies; the columns' copies never."""
    from pathlib import Path

    from dlpc.passes.schedule.cache import cache_write

    text = Path(__file__).parents[1].joinpath("passes/loop-cache-write-symbolic.mlir").read_text()
    text = "\n".join(ln for ln in text.split("\n") if not ln.startswith("//"))
    assert I0I in text
    module = parse_module(text.replace(I0I, marks))
    cache_write(module, "mm", "i0o", "C", "acc")
    loops = {lp.loop_name: lp for lp in module.walk() if isinstance(lp, ForOp)}
    for name in ("acc_in0", "acc_out0", "acc_in1", "acc_out1"):
        got = {k: str(v) for k, v in loops[name].attributes.items() if k.startswith("dlpc.extent")}
        want = {
            k: str(v)
            for k, v in loops["i0i"].attributes.items()
            if k in ("dlpc.extent", "dlpc.extent_base")
        }
        assert got == (want if copied and name.endswith("0") else {})


# ------------------------------------------------ default.py: a weight seen from an scf.if

MM_BODY = """loop.kernel "mm" {
    loop.for %i = 0 to 64 step 1 {name = "i0"} {
      loop.for %j = 0 to 64 step 1 {name = "i1"} {
        loop.for %r = 0 to 64 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i, %r] : memref<64x64xf32>
          %b = memref.load %B[%r, %j] : memref<64x64xf32>
          %c = memref.load %C[%i, %j] : memref<64x64xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i, %j] : memref<64x64xf32>
        }
      }
    }
  }"""


@pytest.mark.parametrize("wrapped", [False, True])
@pytest.mark.parametrize(
    "n_in, params, packed",
    [
        (1, '["w"]', True),  # B (argument 1) is the one param after one input
        (1, "[]", False),  # no params
        (2, '["w"]', False),  # two inputs: B is an input, the param is C
    ],
)
def test_a_gemm_packs_its_weight_also_in_a_kernel_under_an_scf_if(wrapped, n_in, params, packed):
    """default._is_weight (default.py:665-673): B counts as a weight (packed once per binding
    of the weights: `cache_read ... pack`) where it is one of @main's params, looked up
    from the kernel through an enclosing scf.if too (a short binding's kernels)."""
    from dlpc.passes.schedule.default import default_script

    body = (
        MM_BODY if not wrapped else f"%t = arith.constant true\n  scf.if %t {{\n  {MM_BODY}\n  }}"
    )
    module = parse_module(
        "func.func @main(%A: memref<64x64xf32>, %B: memref<64x64xf32>, %C: memref<64x64xf32>)\n"
        f"    attributes {{dlpc.num_inputs = {n_in} : i64, dlpc.params = {params}, "
        f"dlpc.num_outputs = 1 : i64}} {{\n  {body}\n  func.return\n}}"
    )
    script = default_script(module, "mm").split("\n")
    assert ("cache_read mm/i1c @1 -> mm_Bp pack" in script) == packed
    assert script[:8] == [
        "decompose mm",
        "split mm/i1 by 64 -> i1c, i11",
        "split mm/i0 by 64 -> i0c, i01",
        "split mm/i11 by 32 -> i1r, i1j",
        "split mm/i01 by 8 -> i0r, i0i",
        "reorder mm: i1c, i0c, i1r, i0r, i0i, i1j, r0",
        "tensorize mm/i0i gemm",
        "cache_read mm/i1c @1 -> mm_Bp pack" if packed else "serial mm",
    ]


# ------------------------------------------------------ slide: merging consecutive tiles

TILES = """
func.func @main(%X: memref<6x18xf32>, %K: memref<3x3xf32>, %C: memref<4x16xf32>,
                %E: memref<4x16xf32>) {
  loop.kernel "k" {
    loop.for %ho = 0 to 4 step 2 {name = "ho"ATTR} {
      PRE
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
            loop.for %w = 0 to 16 step 1 {name = "w", vectorize} {
              %h = arith.addi %ho, %hi : index
              %row = arith.addi %h, %r1 : index
              %col = arith.addi %w, %r2 : index
SUM
            }
          }
        }
      }
      POST
    }
  }
  func.return
}"""

LOCAL = """%t = memref.alloca() : memref<16xf32>
      loop.for %l = 0 to 16 step 1 {name = "l"} {
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %t[%l] : memref<16xf32>
      }"""


def _store(buf: str, shape: str) -> str:
    """A loop storing ones into row 0 of `buf` (the tile's setup or epilogue: loops,
    allocas and arith only)."""
    return (
        f'loop.for %e = 0 to 16 step 1 {{name = "e_{buf}"}} {{\n'
        "%f = arith.constant 1.000000e+00 : f32\n%j0 = arith.constant 0 : index\n"
        f"memref.store %f, %{buf}[%j0, %e] : memref<{shape}xf32>\n}}"
    )


@pytest.mark.parametrize(
    "attr, pre, post, merged",
    [
        ("", "", "", True),
        # a setup writing a local buffer and an epilogue writing what nothing reads: merged
        ("", LOCAL, _store("E", "4x16"), True),
        # the tile loop parallel, shared by a team (`dlpc.team`), or unrolled: not merged
        (", parallel", "", "", False),
        (", dlpc.team", "", "", False),
        (", unroll = 2", "", "", False),
        # a setup writing a buffer of the kernel's (E), an epilogue writing X or C (what
        # the nest reads): not merged
        ("", _store("E", "4x16"), "", False),
        ("", "", _store("X", "6x18"), False),
        ("", LOCAL, _store("C", "4x16"), False),
        # a setup with a store outside any loop (not loops, allocas and arith): not merged
        (
            "",
            "%t = memref.alloca() : memref<16xf32>\n%z = arith.constant 0.000000e+00 : f32\n"
            "%i0 = arith.constant 0 : index\nmemref.store %z, %t[%i0] : memref<16xf32>",
            "",
            False,
        ),
    ],
)
def test_slide_merges_tiles_only_where_their_iterations_are_independent(attr, pre, post, merged):
    """slide._merged (slide.py:706-716): two tiles (2 accumulator vectors each) merge into
    one straight-line code per two (a tile loop `ho_v16` stepping by 4) unless the tile
    loop may run on several threads or is unrolled, or the setup / epilogue could see the
    other tile's writes; else the nest is rewritten in place (`r1_v16` in `ho`)."""
    text = TILES.replace("ATTR", attr).replace("PRE", pre).replace("POST", post)
    module = parse_module(text.replace("SUM", SUM))
    tensorize(module, "k", "r1", "slide")
    LoopSlideRows().apply(Context(), module)
    loops = {lp.loop_name: lp for lp in module.walk() if isinstance(lp, ForOp)}
    assert ("ho_v16" in loops) == merged
    if merged:
        assert (loops["ho_v16"].stride, _cpp_if(loops["ho_v16"])) == (4, VECTOR_ISA)
    else:
        assert loops["r1_v16"].parent_op() is loops["ho"]
        assert _cpp_if(loops["r1_v16"]) == VECTOR_ISA


# ------------------------------------------- schedule seed 49's survivors (after the draw)


def test_slide_refuses_a_c_whose_row_index_moves_with_w():
    """slide._check_indices (slide.py:252, `acc[:-1]` -> `acc[:-2]`, seed 49): C's indices
    other than the last must not move with the vectorized loop; C[w, w] is refused (a 2-D
    C's only other index is its first)."""
    text = SLIDE_NEST.replace("BODY", SUM).replace("%C[%h, %w]", "%C[%w, %w]")
    module = parse_module(text)
    with pytest.raises(SlideMismatchError) as e:
        tensorize(module, "k", "r1", "slide")
    assert str(e.value) == (
        "the nest at loop k/r1 must read X's row along its vectorized loop (by 1, inside the "
        "nest and the row, rows of at least 16) and write a distinct C's row by 1"
    )


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
flags\t\t: fpu sse4_2 avx avx2

processor\t: 1
vendor_id\t: OtherVendor
"""


def test_cpuinfo_fingerprint_skips_leading_blank_lines(tmp_path):
    """tuning_log._cpuinfo_fingerprint (tuning_log.py:109, `continue` -> `break`, seed 49):
    blank lines before the first processor's block are skipped, not taken as its end."""
    from dlpc.passes.schedule.tuning_log import _cpuinfo_fingerprint

    path = tmp_path / "cpuinfo"
    path.write_text("\n\n" + CPUINFO)
    assert _cpuinfo_fingerprint(str(path)) == "GenuineIntel family 6 model 85 avx2"


def test_a_deinterleaved_phase_of_one_column_is_not_vectorized():
    """deinterleave.py:262 (`hi - lo > 1` -> `> 0`, seed 49): a phase's copy loop is
    vectorized only over 2 or more columns. The 3x3 stride-2 padded read of
    test/passes/loop-cache-read-deinterleave.mlir, one output column wide: the box's
    columns -1..1 give each phase one in-bounds column (phase 0 column 1, phase 1 column
    0), two wide: two each. The staged kernel's sums equal the unstaged one's on C."""
    from pathlib import Path

    import numpy as np

    from dlpc.backends.runtime.evaluate import run_loop_c
    from dlpc.passes.schedule.cache import cache_read

    text = (
        Path(__file__).parents[1].joinpath("passes/loop-cache-read-deinterleave.mlir").read_text()
    )
    text = text[text.index("func.func @main") : text.index("func.func @split")]
    for w in (1, 2):
        src = text.replace("loop.for %i3 = 0 to 4 step 1", f"loop.for %i3 = 0 to {w} step 1")
        src = src.replace("1x2x3x4xf32", f"1x2x3x{w}xf32")
        module = parse_module(src)
        cache_read(module, "cs", "i0", "x", "xq", deinterleave=True)
        phases = [
            (lp.loop_name, lp.lower, lp.upper, lp.vectorize is not None)
            for lp in module.walk()
            if isinstance(lp, ForOp) and lp.loop_name.startswith("xq_in3")
        ]
        assert phases == [("xq_in3p0", 1, 1 + w, w > 1), ("xq_in3p1", 0, w, w > 1)]
        rng = np.random.default_rng(w)
        x = rng.standard_normal((1, 2, 5, 7)).astype(np.float32)
        k = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
        want = np.zeros((1, 2, 3, w), np.float32)
        run_loop_c(parse_module(src), [x, k, want])
        got = np.zeros((1, 2, 3, w), np.float32)
        run_loop_c(module, [x, k, got])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


FLAT3 = """
func.func @main(%x: memref<2x4x6x8xf32>, %y: memref<4xf32>) {
  loop.kernel "k" {
    loop.for %c = 0 to 4 step 1 {name = "i0"} {
      loop.for %r0 = 0 to 2 step 1 {name = "r0", reduction} {
        loop.for %r1 = 0 to 6 step 1 {name = "r1", reduction} {
          loop.for %r2 = 0 to 8 step 1 {name = "r2", reduction} {
            %v = memref.load %x[%r0, %c, %r1, %r2] : memref<2x4x6x8xf32>
            %a = memref.load %y[%c] : memref<4xf32>
            %s = arith.addf %a, %v : f32
            memref.store %s, %y[%c] : memref<4xf32>
          }
        }
      }
    }
  }
  func.return
}"""


def test_a_flat_reduction_of_three_loops_rfactors_the_innermost():
    """default.flat_reduction_script (default.py:249, `reduce[-1]` -> `reduce[1]`, seed 49):
    batch norm's statistics, x[r0, c, r1, r2] summed over three reduction loops (a block
    per sample and channel): the innermost, r2 (8), is vectorized by rfactor, not r1 (6)."""
    from dlpc.passes.schedule.default import flat_reduction, flat_reduction_script

    module = parse_module(FLAT3)
    (kernel,) = kernels(module)
    nest = analyse(kernel)
    assert nest is not None and nest.reduce == ["r0", "r1", "r2"]
    assert flat_reduction(kernel, nest)
    assert flat_reduction_script(kernel, nest) == "decompose k\nrfactor k/r2 by 8"


def test_a_gemm_of_two_row_blocks_runs_them_in_parallel():
    """default.gemm_script (default.py:447, `nc // nr` -> `nc - nr`, seed 49): the parallel
    loop is the first candidate of 4+ trips (2 per thread), else the one of most trips.
    C = A B, 320 x 64 x 64: two row blocks of 160 (i0c), one column block, its 64 columns
    two panels of 32 (i1r): no candidate of 4, i0c the first of the most (2); B's pack
    (its panel loop inside i0c) is parallel too, A's (at i0c itself) not. (`nc - nr` = 32
    panels would take i1r.)"""
    from test_mutation_kills_schedule4 import _mm

    from dlpc.passes.schedule.default import gemm_scripts

    module = parse_module(_mm(320, 64, 64))
    (kernel,) = kernels(module)
    nest = analyse(kernel)
    assert nest is not None
    assert gemm_scripts(kernel, nest)[0].split("\n") == [
        "decompose mm",
        "split mm/i1 by 64 -> i1c, i11",
        "split mm/i0 by 160 -> i0c, i01",
        "split mm/i11 by 32 -> i1r, i1j",
        "split mm/i01 by 8 -> i0r, i0i",
        "reorder mm: i1c, i0c, i1r, i0r, i0i, i1j, r0",
        "tensorize mm/i0i gemm",
        "cache_read mm/i1c @1 -> mm_Bp pack",
        "cache_read mm/i0c @0 -> mm_Ap pack",
        "serial mm",
        "parallel mm/i0c",
        "parallel mm/mm_Bp_i1r",
    ]


# ------------------------------------------- schedule seed 50's survivors (after the draw)

NEST3 = """
func.func @main(%y: memref<4x32x8xf32>) {
  loop.kernel "k" {
    loop.for %a = 0 to 4 step 1 {name = "a"} {
      loop.for %b = 0 to 32 step 1 {name = "b"} {
        loop.for %c = 0 to 8 step 1 {name = "c"} {
          %z = arith.constant 0.0 : f32
          memref.store %z, %y[%a, %b, %c] : memref<4x32x8xf32>
        }
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "used, rows, cols, order",
    [
        # the innermost (c) reads 64 apart; b reads contiguously over 32 (>= ROW): b goes
        # innermost, though a (also step 1, also 64 apart) comes first
        ("abc", "ac", "b", "acb"),
        # a reads contiguously but over 4 iterations (< ROW): the order is kept
        ("ac", "c", "a", "ac"),
    ],
)
def test_a_transposed_packs_copy_streams_along_a_long_contiguous_loop(used, rows, cols, order):
    """cache._copy_order (cache.py:214, `and` -> `or`, seed 50): the loop moved innermost
    must be of unit step, read the source contiguously (stride 1) and run ROW (8) or more
    iterations; the source is [64][64], read at [sum of `rows`' ivs][sum of `cols`']."""
    from dlpc.passes.schedule._common import Affine
    from dlpc.passes.schedule.cache import _copy_order

    module = parse_module(NEST3)
    loops = {lp.loop_name: lp for lp in module.walk() if isinstance(lp, ForOp)}
    form = [Affine(0, {loops[n].induction_var: 1 for n in names}) for names in (rows, cols)]
    got = _copy_order([loops[n] for n in used], form, [64, 64])
    assert "".join(lp.loop_name for lp in got) == order


def test_a_tail_gemm_runs_its_column_panels_in_parallel():
    """default._gemm_tail_script (default.py:484, `// nc` -> `<< nc`, seed 50): M = 29 (a
    prime above 24: all rows in one block, gemm8 tiles and a remainder), 64 columns: one
    column block (i1c), two panels of 32 (i1r); no candidate of 4 trips, so the one of
    most, i1r, is parallel."""
    from test_mutation_kills_schedule4 import _mm

    from dlpc.passes.schedule.default import gemm_scripts

    module = parse_module(_mm(29, 64, 64))
    (kernel,) = kernels(module)
    nest = analyse(kernel)
    assert nest is not None
    assert gemm_scripts(kernel, nest)[0].split("\n") == [
        "decompose mm",
        "split mm/i1 by 64 -> i1c, i11",
        "split mm/r0 by 64 -> r0c, r01",
        "split mm/i11 by 32 -> i1r, i1j",
        "reorder mm: i1c, r0c, i1r, i0, r01, i1j",
        "tensorize mm/i0 gemm8",
        "serial mm",
        "parallel mm/i1r",
    ]


def test_a_conv_storing_a_second_copy_of_its_sum_keeps_its_first_output(tmp_path):
    """nest.conv_output (nest.py:141, `stores[0]` -> `stores[-1]`, seed 50): the conv's
    output is the first buffer from outside the kernel it stores to. A conv kernel that
    also stores each sum into a second buffer (allocated before it, the store after the
    first) keeps its accumulator tile on the first (`cache_write ... @2`, not @3)."""
    from xdsl.dialects import memref

    from dlpc.passes.schedule._common import buffers_accessed
    from dlpc.passes.schedule.conv import conv_tile_script
    from dlpc.passes.schedule.nest import conv_output

    kernel, nest = _conv_kernel_o0(
        _text(
            tmp_path,
            "model c(x: f32[B, 4, 8, 16]) {\n  param k: f32[8, 4, 3, 3] = kaiming(seed=5)\n"
            "  return conv2d(x, k, padding=1)\n}\n",
        )
    )
    external = buffers_accessed(kernel, external=True)
    (store,) = [
        op for op in kernel.walk() if isinstance(op, memref.StoreOp) and op.memref in external
    ]
    out = store.memref
    shape = memref_type(out)
    copy = memref.AllocOp.get(shape.get_element_type(), shape=shape.get_shape())
    block = kernel.parent_block()
    assert block is not None
    block.insert_op_before(copy, kernel)
    store.parent_block().insert_op_after(
        memref.StoreOp.get(store.value, copy.memref, list(store.indices)), store
    )
    assert conv_output(kernel) is out
    script = conv_tile_script(kernel, nest, threads=2).replace(kernel.sym, "K").split("\n")
    assert "cache_write K/i2 @2 -> K_acc" in script


def _conv_kernel_o0(path: str):
    model = dlpc.load(path, batch=1)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (m := analyse(k)) is not None and m.reduce]
    nest = analyse(kernel)
    assert nest is not None
    return kernel, nest


# ------------------------------------------- schedule seed 51's survivor (after the draw)

LATE_INDEX = """
func.func @main(%x: memref<4x8xf32>, %y: memref<5xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      %acc = memref.alloca() : memref<f32>
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %acc[] : memref<f32>
      loop.for %r = 0 to 8 step 1 {name = "r0", reduction} {
        %v = memref.load %x[%i, %r] : memref<4x8xf32>
        %a = memref.load %acc[] : memref<f32>
        %s = arith.addf %a, %v : f32
        memref.store %s, %acc[] : memref<f32>
      }
      %one = arith.constant 1 : index
      %o = arith.addi %i, %one : index
      %f = memref.load %acc[] : memref<f32>
      memref.store %f, %y[%o] : memref<5xf32>
    }
  }
  func.return
}"""


def test_decompose_hoists_the_output_index_computed_after_the_reduction():
    """decompose._hoist_index_ops (decompose.py:107, `for op in hoisted` -> `in []`, seed
    51): the output index `i + 1`, computed after the reduction loop, moves to the front
    of the body, so the update nest that now accumulates in y[i + 1] sees it; y[1:] are
    x's row sums on the C target (without the move the C uses it before its definition)."""
    import numpy as np

    from dlpc.backends.runtime.evaluate import run_loop_c
    from dlpc.passes.schedule.decompose import decompose_reduction

    module = parse_module(LATE_INDEX)
    decompose_reduction(module, "k")
    (update,) = [lp for lp in module.walk() if isinstance(lp, ForOp) and lp.loop_name == "i0"]
    ops = [op.name for op in update.block.ops]
    assert ops.index("arith.addi") < ops.index("loop.for")
    x = np.random.default_rng(9).standard_normal((4, 8)).astype(np.float32)
    y = np.full(5, 7.0, np.float32)
    run_loop_c(module, [x, y])
    np.testing.assert_allclose(y[1:], x.sum(axis=1), rtol=1e-5, atol=1e-5)
