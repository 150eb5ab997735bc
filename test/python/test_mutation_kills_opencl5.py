"""Tests for the OpenCL backend written after opencl seed 43's re-timed survivors (issue 35,
eighth round, bench/mutation.py --area opencl): a padding guard's product of two loop
variables next to an affine term, and an NDRange of at most three loops. Hand-written loop
IR, the plan object checked against the documented rule."""

from __future__ import annotations

import pytest

from dlpc.dialects.loop import KernelOp
from dlpc.passes.pipeline import parse_module

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.opencl import plan_launch  # noqa: E402
from dlpc.backends.opencl.guards import padding_guards  # noqa: E402

# y[i, j] = x[i] where COND holds, else 0
GUARDED = """
func.func @main(%x: memref<16xf32>, %y: memref<8x8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      loop.for %j = 0 to 8 step 1 {name = "i1"} {
        %c2 = arith.constant 2 : index
        %d = arith.muli %i, MUL : index
        %e = arith.addi %d, %i : index
        %g = arith.cmpi slt, %e, %c2 : index
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
def test_a_product_of_loop_variables_is_no_padding_guard_next_to_an_affine_term(mul, guard):
    """guards.padding_guards: 2 i + i < 2 is affine (a guard: its ops, in order, and loop
    i); i j + i < 2 is not, even though its other term (i) is a loop variable."""
    module = parse_module(GUARDED.replace("MUL", mul))
    nest = next(op for op in module.walk() if op.name == "loop.for")
    found = padding_guards(nest)
    assert (found is not None) is guard
    if found is not None:
        ifs, order, loops = found
        assert len(ifs) == 1
        assert [op.name for op in order] == [
            "arith.constant",
            "arith.muli",
            "arith.addi",
            "arith.cmpi",
        ]
        assert [lp.loop_name for lp in loops] == ["i0"]


# y[a, b, c, d] = x[a, b, c, d] + 1, N of the four loops parallel
COPY = """
func.func @main(%x: memref<2x3x4x5xf32>, %y: memref<2x3x4x5xf32>) {
  loop.kernel "k" {
    loop.for %a = 0 to 2 step 1 {name = "i0"P0} {
      loop.for %b = 0 to 3 step 1 {name = "i1"P1} {
        loop.for %c = 0 to 4 step 1 {name = "i2"P2} {
          loop.for %d = 0 to 5 step 1 {name = "i3"P3} {
            %v = memref.load %x[%a, %b, %c, %d] : memref<2x3x4x5xf32>
            %one = arith.constant 1.000000e+00 : f32
            %s = arith.addf %v, %one : f32
            memref.store %s, %y[%a, %b, %c, %d] : memref<2x3x4x5xf32>
          }
        }
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize("parallel, dims", [(4, 3), (3, 3), (2, 2)])
def test_the_ndrange_takes_at_most_three_parallel_loops(parallel, dims):
    """launch.plan_launch: the leading parallel loops make the NDRange, at most three (an
    OpenCL NDRange has three dimensions; the last one's extent divided by its lanes); the
    rest run inside each work-item."""
    text = COPY
    for k in range(4):
        text = text.replace(f"P{k}", ", parallel" if k < parallel else "")
    (kernel,) = [k for k in parse_module(text).walk() if isinstance(k, KernelOp)]
    launch = plan_launch(kernel, "k")
    names = ["i0", "i1", "i2"][:dims]
    assert {lp.loop_name: v for lp, v in launch.mapped.items()} == {
        n: f"get_global_id({k})" for k, n in enumerate(names)
    }
    assert len(launch.global_size) == dims
