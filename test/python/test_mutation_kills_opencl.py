"""Tests written against surviving mutants of the OpenCL backend's lane plan, launch and
chains (issue 35, bench/mutation.py --area opencl): hand-written loop IR, the plan
object a heuristic returns (`plan_launch`'s Launch, `_ragged`) or the emitted source,
the expected choice read off the heuristic's documented rule."""

from __future__ import annotations

import math
import re

import pytest

from dlpc.backends.opencl import OpenCLEmitter, emit_opencl, plan_launch
from dlpc.backends.opencl.lanes import _ragged
from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.passes.pipeline import parse_module


def _kernels(text: str) -> list[KernelOp]:
    return [k for k in parse_module(text).walk() if isinstance(k, KernelOp)]


def _lanes(kernel: KernelOp) -> dict[str, int]:
    return {lp.loop_name or "": u for lp, u in plan_launch(kernel, "k").lanes.items()}


# out[b, h, m, n] = sum_r a[b, h, m, r] * w[b, h, r, n]: the attention's batched matmul,
# batch b (parallel) and heads h on the NDRange, rows m between them and the columns n
# (the inner lanes, whose loads of w the rows share: the middle lanes)
BMM = """
func.func @main(%a: memref<2xHx12x8xf32>, %w: memref<2xHx8x16xf32>, %out: memref<2xHx12x16xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "bmm" {
    loop.for %b = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %h = 0 to H step 1 {name = "i1"} {
        loop.for %m = 0 to 12 step 1 {name = "i2"} {
          loop.for %n = 0 to 16 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %r = 0 to 8 step 1 {name = "r0", reduction} {
              %x = memref.load %a[%b, %h, %m, %r] : memref<2xHx12x8xf32>
              %y = memref.load %w[%b, %h, %r, %n] : memref<2xHx8x16xf32>
              %p = arith.mulf %x, %y : f32
              %o = memref.load %acc[] : memref<f32>
              %s = arith.addf %o, %p : f32
              memref.store %s, %acc[] : memref<f32>
            }
            %v = memref.load %acc[] : memref<f32>
            memref.store %v, %out[%b, %h, %m, %n] : memref<2xHx12x16xf32>
          }
        }
      }
    }
  }
  func.return
}"""


def _bmm(heads: int) -> KernelOp:
    (kernel,) = _kernels(BMM.replace("H", str(heads)))
    return kernel


def test_middle_lanes_take_no_three_step_count():
    """lanes.py:336: the rows' (middle) lanes are the widest of the profile's inner counts
    within the budget whose step count is 1, 2, 4, 5 or 6 (3 steps: slow code from PoCL's
    LLVM). 2 heads give no mapped lanes (2 would leave one work-item), the 16 columns take
    8 lanes, 64 / 8 = 8 are left: 12 rows are 0 steps of 8, 3 steps of 4, 6 of 2 -> 2."""
    assert _lanes(_bmm(2)) == {"i3": 8, "i2": 2}


def test_inner_lanes_stay_8_wide_while_middle_lanes_remain():
    """lanes.py:204: the inner lanes widen to 16 only when the middle loop would get no
    lanes: with 4 heads as 2 mapped lanes and 8 column lanes, 64 / (8 * 2) = 4 lanes are
    left (> 1) for the rows, so the columns stay 8 wide; the 12 rows take 2 (4 would be
    3 steps)."""
    assert _lanes(_bmm(4)) == {"i1": 2, "i3": 8, "i2": 2}


def _loop(trips: int) -> ForOp:
    text = f"""
func.func @main(%x: memref<{trips}xf32>, %y: memref<{trips}xf32>)
    attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  loop.kernel "k" {{
    loop.for %i = 0 to {trips} step 1 {{name = "i0"}} {{
      %v = memref.load %x[%i] : memref<{trips}xf32>
      memref.store %v, %y[%i] : memref<{trips}xf32>
    }}
  }}
  func.return
}}"""
    (kernel,) = _kernels(text)
    return next(op for op in kernel.walk() if isinstance(op, ForOp))


@pytest.mark.parametrize("trips, lanes, ragged", [(32, 16, False), (48, 16, False), (28, 16, True)])
def test_ragged_lanes_are_lanes_that_do_not_divide(trips, lanes, ragged):
    """lanes.py:282: `_ragged` is for lane counts that do not divide the loop (lenet's 28
    columns as 16 + 16 from column 12: 2 steps, 4 of 28 redone); 16 lanes dividing 32 or
    48 are plain lanes, not ragged ones."""
    assert _ragged(_loop(trips), lanes) is ragged


# a __local stage (a row of a) inside the parallel rows i0 of each image b: the NDRange
# is (images, rows x columns), work-groups over the rows and work-items over the columns
STAGED = """
func.func @main(%a: memref<3x4x8xf32>, %bm: memref<8x16xf32>, %out0: memref<3x4x16xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "mm_0" {
    loop.for %b = 0 to 3 step 1 {name = "ib", parallel} {
      loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
        %al = memref.alloca() : memref<8xf32>
        loop.for %c0 = 0 to 8 step 1 {name = "al_0"} {
          %v = memref.load %a[%b, %i0, %c0] : memref<3x4x8xf32>
          memref.store %v, %al[%c0] : memref<8xf32>
        }
        loop.for %i1 = 0 to 16 step 1 {name = "i1", parallel} {
          %acc = memref.alloca() : memref<f32>
          %zero = arith.constant 0.000000e+00 : f32
          memref.store %zero, %acc[] : memref<f32>
          loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
            %x = memref.load %al[%r0] : memref<8xf32>
            %y = memref.load %bm[%r0, %i1] : memref<8x16xf32>
            %p = arith.mulf %x, %y : f32
            %o = memref.load %acc[] : memref<f32>
            %q = arith.addf %o, %p : f32
            memref.store %q, %acc[] : memref<f32>
          }
          %s = memref.load %acc[] : memref<f32>
          memref.store %s, %out0[%b, %i0, %i1] : memref<3x4x16xf32>
        }
      }
    }
  }
  func.return
}"""


def test_a_staged_launch_keeps_its_leading_ndrange_dims():
    """launch.py:122: a kernel with a __local stage under two NDRange loops: the leading
    dim keeps its 3 images, the last is the 4 rows' groups x 16 columns each."""
    (kernel,) = _kernels(STAGED)
    launch = plan_launch(kernel, "mm_0")
    assert launch.global_size == (3, 4 * 16)
    assert launch.local_size == (1, 16)


def test_a_buffer_no_chain_member_writes_stays_const():
    """chains.py:145: two kernels of a chain both read x and write their own outputs: x's
    chain parameter keeps `const` (only a buffer some member writes loses it), the
    outputs do not have it."""
    kernel = """loop.kernel "NAME" {
    loop.for %i = 0 to 8 step 1 {name = "i0", parallel} {
      %v = memref.load %x[%i] : memref<8xf32>
      %w = arith.negf %v : f32
      memref.store %w, %DST[%i] : memref<8xf32>
    }
  }"""
    text = f"""
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>)
    attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64}} {{
  {kernel.replace("NAME", "neg_0").replace("DST", "y")}
  {kernel.replace("NAME", "neg_1").replace("DST", "z")}
  func.return
}}"""
    module = parse_module(text)
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    emitter = OpenCLEmitter(module)
    source = emitter.emit([kernels])
    assert len(emitter.chains) == 1
    (head,) = re.findall(r"__kernel void kernel_chain\w*\(([^)]*)\)", source)
    params = [p.strip() for p in head.split(",")]
    xs = [p for p in params if re.search(r"\bv_x\b", p)]
    assert len(xs) == 1 and "const float" in xs[0], params
    assert all("const" not in p for p in params if re.search(r"\bv_[yz]\b", p)), params


# y[i, j] = -x[i, j, j]: the 16 columns j are one float16 vector (8 inner lanes widened:
# no middle loop, 2 mapped lanes over the 4 rows i)
DIAGONAL = """
func.func @main(%x: memref<4x16x16xf32>, %y: memref<4x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "diag" {
    loop.for %i = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %v = memref.load %x[%i, %j, %j] : memref<4x16x16xf32>
        %w = arith.negf %v : f32
        memref.store %w, %y[%i, %j] : memref<4x16xf32>
      }
    }
  }
  func.return
}"""


def test_a_diagonal_read_is_no_contiguous_vector_access():
    """kernel_writer.py:240: a 16-lane access is one unaligned vector load or store only
    when the vector loop's variable is in the last index and in no other: y[i, j] is
    (one dlpc_float16u store per mapped lane), x[i, j, j] is not (the middle index moves
    with j too: 16 scalar loads per mapped lane)."""
    module = parse_module(DIAGONAL)
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    launch = plan_launch(kernel, "diag")
    assert launch.vector is not None and launch.lanes[launch.vector] == 16
    source = emit_opencl(module)
    assert source.count("*(__global dlpc_float16u *)&v_y[") == 2
    assert "dlpc_float16u *)&v_x[" not in source
    assert len(re.findall(r"= v_x\[", source)) == 2 * 16


# y[i, j] = x[i, j] where it is positive: an scf.if with no result under 8 vector lanes
GUARDED_STORE = """
func.func @main(%x: memref<4x8xf32>, %y: memref<4x8xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "pos" {
    loop.for %i = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i, %j] : memref<4x8xf32>
        %z = arith.constant 0.000000e+00 : f32
        %c = arith.cmpf ogt, %v, %z : f32
        scf.if %c {
          memref.store %v, %y[%i, %j] : memref<4x8xf32>
        }
      }
    }
  }
  func.return
}"""


def test_a_guarded_store_under_vector_lanes_is_no_masked_load():
    """kernel_writer.py:283: only an scf.if yielding one f32 (a padded read) is a masked
    load; a guarded store under the 8 vector lanes (no result) is written per lane, one
    `if` around each lane's store."""
    module = parse_module(GUARDED_STORE)
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    launch = plan_launch(kernel, "pos")
    assert launch.vector is not None and launch.lanes[launch.vector] == 8
    source = emit_opencl(module)
    lanes = math.prod(launch.lanes.values())
    assert len(re.findall(r"if \(v_c\w*\) \{\n\s*v_y\[", source)) == lanes


def test_ragged_lanes_may_redo_exactly_a_quarter():
    """lanes.py:284: `_ragged` allows up to RAGGED_WASTE (1/4) of the iterations redone,
    the bound included: 5 lanes over 8 iterations are 2 steps redoing 2 = 8 / 4."""
    assert _ragged(_loop(8), 5)


@pytest.mark.parametrize("n, pow2", [(0, 1), (1, 1), (2, 2), (3, 4), (5, 8), (64, 64), (65, 128)])
def test_gpu_group_sizes_round_up_to_a_power_of_two(n, pow2):
    """gpu_launch.py:72: a work-group's extent is the least power of two >= the loop's."""
    from dlpc.backends.opencl.gpu_launch import _pow2_at_least

    assert _pow2_at_least(n) == pow2


# y[i, j] = -x[i, j] over the odd rows i = 1, 3, 5 (the NDRange, 8 inner lanes on j)
ODD_ROWS = """
func.func @main(%x: memref<7x8xf32>, %y: memref<7x8xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "odd" {
    loop.for %i = 1 to 7 step 2 {name = "i0", parallel} {
      loop.for %j = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i, %j] : memref<7x8xf32>
        %w = arith.negf %v : f32
        memref.store %w, %y[%i, %j] : memref<7x8xf32>
      }
    }
  }
  func.return
}"""


def test_a_mapped_loop_not_from_zero_step_one_offsets_its_global_id():
    """kernel_writer.py:760: a mapped loop (no lanes of its own) from 1 step 2 reads its
    variable as 1 + 2 * the global id, not the id itself."""
    module = parse_module(ODD_ROWS)
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    launch = plan_launch(kernel, "odd")
    assert launch.global_size == (3,) and "i0" not in _lanes(kernel)
    assert "const long v_i0 = (long)1 + 2 * (long)get_global_id(0);" in emit_opencl(module)


# a sum whose accumulator is read twice per step (acc = acc + acc * x): no `acc = acc + x`
TWICE_READ = """
func.func @main(%x: memref<8xf32>, %y: memref<f32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %r = 0 to 8 step 1 {name = "r0", reduction} {
      %v = memref.load %x[%r] : memref<8xf32>
      %a = memref.load %y[] : memref<f32>
      %b = memref.load %y[] : memref<f32>
      %p = arith.mulf %b, %v : f32
      %s = arith.addf %a, %p : f32
      memref.store %s, %y[] : memref<f32>
    }
  }
  func.return
}"""


def test_an_accumulator_read_twice_takes_no_partials():
    """lanes.py:153: a reduction's accumulator qualifies for partials only when the loop
    touches it exactly twice (one load, one store); read twice, it is none."""
    from dlpc.backends.opencl.lanes import accumulators

    (kernel,) = _kernels(TWICE_READ)
    loop = next(op for op in kernel.walk() if isinstance(op, ForOp))
    assert accumulators(loop) is None


# y[i, j] = -x[i, j] over 4 x W: i the NDRange, j inner lanes
ROWS = """
func.func @main(%x: memref<4xWxf32>, %y: memref<4xWxf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to W step 1 {name = "i1"} {
        %w0 = memref.load %x[%i, %j] : memref<4xWxf32>
BODY
        memref.store %wN, %y[%i, %j] : memref<4xWxf32>
      }
    }
  }
  func.return
}"""


def _rows(width: int, ops: int, rows: int = 4) -> str:
    """ROWS (`rows` of them) with `ops` negations chained between the load and the store."""
    chain = "\n".join(f"        %w{k + 1} = arith.negf %w{k} : f32" for k in range(ops))
    text = ROWS.replace("W", str(width)).replace("BODY", chain).replace("%wN", f"%w{ops}")
    return text.replace("0 to 4 step", f"0 to {rows} step").replace("<4x", f"<{rows}x")


def test_ragged_inner_lanes_end_their_last_step_at_the_loops_end():
    """kernel_writer.py:496: on a 16-wide device 28 columns take 16 ragged inner lanes (not
    mapped): 2 steps, the second clamped to start at column 28 - 16 = 12."""
    from dlpc.backends.opencl.lanes import LANES_16

    module = parse_module(_rows(28, 1))
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    lanes = plan_launch(kernel, "k", profile=LANES_16).lanes
    assert {lp.loop_name: u for lp, u in lanes.items()}["i1"] == 16
    source = OpenCLEmitter(module, vector_width=16).emit()
    assert "const long v_i1 = DLPC_MIN(v_i1_step, 12);" in source


def test_a_long_body_halves_its_widest_lanes_until_it_fits():
    """lanes.py:353: a body of ~600 ops under 16 x 2 lanes is over MAX_LANE_OPS (8000):
    the widest lanes are halved, 16 -> 8 -> 4 (4 x 2 x 603 fits), never cut to a third."""
    (kernel,) = _kernels(_rows(16, 600))
    assert _lanes(kernel) == {"i1": 4, "i0": 2}
    (kernel,) = _kernels(_rows(16, 10))
    assert _lanes(kernel) == {"i1": 16, "i0": 2}


@pytest.mark.parametrize("rows, mapped, inner", [(10, 5, 16), (12, 6, 8)])
def test_inner_lanes_widen_to_16_under_at_most_5_mapped_lanes(rows, mapped, inner):
    """lanes.py:191: 8 inner lanes widen to 16 (a float16) while the mapped lanes are at
    most WIDE_MAPPED (5): 10 rows take 5 mapped lanes and 16 columns as 16 inner lanes,
    12 rows take 6 and the columns stay 8."""
    (kernel,) = _kernels(_rows(16, 1, rows))
    assert _lanes(kernel) == {"i1": inner, "i0": mapped}


# a pointwise conv, out[n, c, h, q] = sum_k w[c, k] * x[n, k, h, q]: the channels c
# the last NDRange dim (after the batch n), the rows h between them and the 16 columns q
POINTWISE = """
func.func @main(%x: memref<Nx8x4x16xf32>, %w: memref<Cx8xf32>, %out: memref<NxCx4x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "pw" {
    loop.for %n = 0 to N step 1 {name = "b0", parallel} {
      loop.for %c = 0 to C step 1 {name = "i0"} {
        loop.for %h = 0 to 4 step 1 {name = "i1"} {
          loop.for %q = 0 to 16 step 1 {name = "i2"} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %k = 0 to 8 step 1 {name = "r0", reduction} {
              %a = memref.load %x[%n, %k, %h, %q] : memref<Nx8x4x16xf32>
              %b = memref.load %w[%c, %k] : memref<Cx8xf32>
              %p = arith.mulf %a, %b : f32
              %o = memref.load %acc[] : memref<f32>
              %s = arith.addf %o, %p : f32
              memref.store %s, %acc[] : memref<f32>
            }
            %v = memref.load %acc[] : memref<f32>
            memref.store %v, %out[%n, %c, %h, %q] : memref<NxCx4x16xf32>
          }
        }
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "batch, channels, mapped, inner", [(1, 12, 6, 16), (1, 16, 8, 8), (2, 6, 6, 8)]
)
def test_a_pointwise_conv_takes_the_wide_tile_when_6_lanes_cover_its_channels(
    batch, channels, mapped, inner
):
    """lanes.py:264: the pointwise conv's WIDE_TILE (6 channels x 16 columns) needs at
    least 12 channels with at most 1/16 of the last work-item's lanes spare: 12 channels
    (2 x 6, none spare) take it, 16 (3 x 6 with 2 spare, 2 * 16 > 16) keep 8 x 8, and so
    do 6 channels at batch 2 (6 mapped lanes, fewer than 2 x 6 channels: seed 41's
    lanes.py:264 2 * u -> 2 | u)."""
    (kernel,) = _kernels(POINTWISE.replace("C", str(channels)).replace("N", str(batch)))
    assert _lanes(kernel) == {"i2": inner, "i0": mapped}


# y[i, j] = -x[i, j] through a private array t, declared in the vector loop's body (one
# per lane) and accessed in a loop below it
PRIVATE = """
func.func @main(%x: memref<4x16xf32>, %y: memref<4x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "priv" {
    loop.for %i = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %t = memref.alloca() : memref<16xf32>
        loop.for %r = 0 to 1 step 1 {name = "i2"} {
          %v = memref.load %x[%i, %j] : memref<4x16xf32>
          memref.store %v, %t[%j] : memref<16xf32>
          %w = memref.load %t[%j] : memref<16xf32>
          %n = arith.negf %w : f32
          memref.store %n, %y[%i, %j] : memref<4x16xf32>
        }
      }
    }
  }
  func.return
}"""


def test_a_private_array_is_no_global_vector_access():
    """kernel_writer.py:244: an access is a global vector access only for a buffer not
    defined in the kernel: the private array t (one per lane of the 16 vector lanes),
    though defined outside the access's own loop, is written lane by lane, never through
    a `__global dlpc_float16u *` (x and y still are)."""
    module = parse_module(PRIVATE)
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert _lanes(kernel)["i1"] == 16
    source = emit_opencl(module)
    assert "dlpc_float16u *)&v_t" not in source
    assert "v_t_2[(v_i1 + 1)] = " in source
    assert "*(__global dlpc_float16u *)&v_y[" in source


def test_ragged_lanes_take_at_most_6_steps():
    """lanes.py:281 (opencl --seed 41): `_ragged` counts the steps as ceil(n / lanes): 97
    iterations at 16 lanes are 7 steps, over the 6 allowed (81 are 6: allowed)."""
    assert not _ragged(_loop(97), 16)
    assert _ragged(_loop(81), 16)


def test_two_vector_lanes_are_a_float2():
    """lanes.py:361 (opencl --seed 41): 2 lanes are a vector width (VECTOR_WIDTHS): rows of
    2 columns under 2 vector lanes negate one float2 per row (the loads gathered into it)."""
    module = parse_module(_rows(2, 1, 3))
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    launch = plan_launch(kernel, "k")
    assert launch.vector is not None and launch.lanes[launch.vector] == 2
    source = emit_opencl(module)
    body = source[source.index("__kernel") :]
    assert "const float2 v_w1 = -(float2)(v_w0, v_w0_2);" in body, body


def test_a_team_chain_splits_each_member_into_chunks_of_its_work_items():
    """chains.py:284 (opencl --seed 41): a team chain (team > 1) hands out each member's
    work-items in chunks of ceil(total / TEAM_CHUNKS): 2 negations of 320 floats are 40
    work-items each (8 lanes), chunks of 3, so 14 chunks a member."""
    kernel = """loop.kernel "NAME" {
    loop.for %i = 0 to 320 step 1 {name = "i0", parallel} {
      %v = memref.load %x[%i] : memref<320xf32>
      %w = arith.negf %v : f32
      memref.store %w, %DST[%i] : memref<320xf32>
    }
  }"""
    text = f"""
func.func @main(%x: memref<320xf32>, %y: memref<320xf32>, %z: memref<320xf32>)
    attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64}} {{
  {kernel.replace("NAME", "neg_0").replace("DST", "y")}
  {kernel.replace("NAME", "neg_1").replace("DST", "z")}
  func.return
}}"""
    module = parse_module(text)
    members = [k for k in module.walk() if isinstance(k, KernelOp)]
    emitter = OpenCLEmitter(module)
    emitter.emit([members], team=2)
    assert [emitter.launches[k].global_size for k in members] == [(40,), (40,)]
    (chain,) = emitter.chains
    assert chain.team == 2 and chain.chunks == (14, 14)


# out[i, j] = sum_r a[i, r] * w[j, r]: 4 x 8 outputs, each a sum of 256 terms
SHORT_ROWS = """
func.func @main(%a: memref<4x256xf32>, %w: memref<8x256xf32>, %out: memref<4x8xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "mm" {
    loop.for %i = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 8 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r = 0 to 256 step 1 {name = "r0", reduction} {
          %x = memref.load %a[%i, %r] : memref<4x256xf32>
          %y = memref.load %w[%j, %r] : memref<8x256xf32>
          %p = arith.mulf %x, %y : f32
          %o = memref.load %acc[] : memref<f32>
          %s = arith.addf %o, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %out[%i, %j] : memref<4x8xf32>
      }
    }
  }
  func.return
}"""


def test_a_split_reduction_launch_has_groups_of_one_above_dimension_0():
    """gpu_launch.py:220 (opencl --seed 41): 32 sums of 256 terms on a 132-unit GPU are
    split over work-groups of SPLIT_ITEMS (64) on dimension 0, one group per column j;
    the rows i on dimension 1 in groups of 1 (not 0, which no device takes)."""
    from dlpc.backends.opencl.gpu_launch import SPLIT_ITEMS, GpuProfile, plan_gpu_launch

    (kernel,) = _kernels(SHORT_ROWS)
    launch = plan_gpu_launch(kernel, "mm", GpuProfile(max_group=1024, units=132))
    assert launch.split is not None
    assert launch.global_size == (8 * SPLIT_ITEMS, 4)
    assert launch.local_size == (SPLIT_ITEMS, 1)


# z = -(-x) through an intermediate t, two kernels over a batch of B images of C floats
BATCH_CHAIN = """
func.func @main(%x: memref<BxCxf32>, %z: memref<BxCxf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %t = memref.alloc() : memref<BxCxf32>
  KERNEL(neg_0, x, t)
  KERNEL(neg_1, t, z)
  memref.dealloc %t : memref<BxCxf32>
  func.return
}"""


def _batch_kernel(match) -> str:
    name, src, dst = (p.strip() for p in match.group(1).split(","))
    return f"""loop.kernel "{name}" {{
    loop.for %b = 0 to B step 1 {{name = "i0", parallel}} {{
      loop.for %c = 0 to C step 1 {{name = "i1"}} {{
        %v = memref.load %{src}[%b, %c] : memref<BxCxf32>
        %w = arith.negf %v : f32
        memref.store %w, %{dst}[%b, %c] : memref<BxCxf32>
      }}
    }}
  }}"""


def test_a_split_chain_takes_8_4_2_or_1_groups_per_unit():
    """chains.py:89 (opencl --seed 41, twice): a chain split over 2 compute units runs
    2 x m work-groups, m the first of SPLIT_GROUPS_PER_UNIT (8, 4, 2, 1) that every
    member's batch and first NDRange dimension divide into: 48 images as 6 work-items (8
    mapped lanes) take 2 x 1 (6 groups, 3 per unit, is not one of them)."""
    text = re.sub(r"KERNEL\(([^)]*)\)", _batch_kernel, BATCH_CHAIN)
    module = parse_module(text.replace("B", "48").replace("C", "3"))
    members = [k for k in module.walk() if isinstance(k, KernelOp)]
    emitter = OpenCLEmitter(module)
    emitter.emit([members], parts=2)
    assert [emitter.launches[k].global_size for k in members] == [(6,), (6,)]
    (chain,) = emitter.chains
    assert chain.parts == 2


def test_a_team_chain_by_images_counts_its_ranges_in_their_own_counters():
    """chains.py:341 (opencl --seed 41): a team chain split by images takes its ranges
    from sync[TEAM_COUNTERS] (8) and counts the ranges done in sync[TEAM_COUNTERS + 1]
    (9), not in sync[4], the count of ranges helpers ran (TEAM_HELPED)."""
    from dlpc.backends.opencl.chains import TEAM_COUNTERS, TEAM_HELPED

    text = re.sub(r"KERNEL\(([^)]*)\)", _batch_kernel, BATCH_CHAIN)
    module = parse_module(text.replace("B", "48").replace("C", "3"))
    members = [k for k in module.walk() if isinstance(k, KernelOp)]
    emitter = OpenCLEmitter(module)
    source = emitter.emit([members], parts=2, team=2)
    (chain,) = emitter.chains
    assert chain.parts == 2 and chain.team == 2
    taken, done = TEAM_COUNTERS, TEAM_COUNTERS + 1
    assert done != TEAM_HELPED
    assert f"atom_cmpxchg(&v_sync[{taken}]," in source
    assert f"atom_inc(&v_sync[{done}]);" in source
    assert f"(ulong)v_sync[{done}];" in source
