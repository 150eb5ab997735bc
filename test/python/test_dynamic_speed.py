"""The one-compile program's kernels at short extents (issue 29, docs/dynamic.md): register
tiles over a symbolic extent run in two versions (static when the tile lies inside the
extent, stopped at the extent otherwise), packing stops at the extent, and a parallel
loop over a runtime extent keeps its serial copy; each checked against numpy at the
extents around a tile's edge (1, 7, 8, 9) and at the maximum."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr

from dlpc.api import compile as dlpc_compile
from dlpc.api import reference
from dlpc.backends.c import emit_c
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.dialects.loop import KernelOp
from dlpc.frontends.text import parse_model
from dlpc.passes.lower.runtime_extents import LoopRuntimeExtents
from dlpc.passes.pipeline import parse_module

# one attention head over a symbolic length: linears (8-row register tiles over B*S),
# q k^T (a tile over S by S), softmax over S and layer norm (row groups: blocks of 16
# rows over S), and att @ v (a reduction over S)
SOURCE = """
model t(x: f32[B, S, 32]) {
  param wq: f32[32, 32] = normal(seed=1, std=0.2)
  param wk: f32[32, 32] = normal(seed=2, std=0.2)
  param wv: f32[32, 32] = normal(seed=3, std=0.2)
  param b: f32[32] = normal(seed=4, std=0.1)
  param g: f32[32] = normal(seed=5, std=1.0)
  let q = linear(x, wq, b)
  let k = linear(x, wk, b)
  let v = linear(x, wv, b)
  let a = softmax(matmul(q, k, transpose_b=true) * 0.25, axis=-1)
  return a @ v, linear(relu(a @ v), wq, b), layer_norm(a @ v, g, b)
}
"""


@pytest.fixture(scope="module")
def head():
    model = parse_model(SOURCE, dims="symbolic")
    # (short=0: the generic kernels at every extent; test_dynamic_short checks the copies)
    return model, dlpc_compile(model, target="c", max_dims={"B": 2, "S": 32}, short=0)


@pytest.mark.parametrize("b", [1, 2])
def test_remainder_tiles_match_numpy(head, b):
    model, fn = head
    rng = np.random.default_rng(b)
    for s in (1, 7, 8, 9, 15, 16, 17, 32, 9, 1):
        x = rng.standard_normal((b, s, 32)).astype(np.float32)
        got, want = fn(x), reference(model, [x])
        for y, w in zip(got, want):
            assert y.shape == w.shape
            np.testing.assert_allclose(y, w, rtol=1e-4, atol=1e-5)
    assert fn.stats["compiles"] == 1


def test_tiles_run_in_two_versions(head):
    """The lowered program holds the static copies (`_tile` loops) beside the remainder,
    and softmax and layer norm over the symbolic rows are one row kernel each."""
    model, fn = head
    fn(np.zeros((1, 3, 32), np.float32))
    text = str(fn.lowered)
    assert '_tile"' in text and "dlpc.extent" not in text
    kernels = [op.sym for op in fn.lowered.walk() if isinstance(op, KernelOp)]
    for origin in ("softmax", "layer_norm"):
        assert len([k for k in kernels if k.startswith(origin)]) == 1, kernels


# a parallel loop over a runtime extent whose static work (the maxima's) is large
BIG = """
func.func @main(%x: memref<1024x1024xf32>, %dlpc_dims: memref<1xi64>,
    %out0: memref<1024x1024xf32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64,
    dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "neg_0" {
    loop.for %i0 = 0 to 1024 step 1 {name = "i0", parallel, dlpc.extent = "seq"} {
      loop.for %i1 = 0 to 1024 step 1 {name = "i1", vectorize} {
        %v = memref.load %x[%i0, %i1] : memref<1024x1024xf32>
        %n = arith.negf %v : f32
        memref.store %n, %out0[%i0, %i1] : memref<1024x1024xf32>
      }
    }
  }
  func.return
}
"""


def test_parallel_loop_over_a_runtime_extent_keeps_its_serial_copy():
    """A call of seq 1 does not open a one-thread OpenMP region: the serial copy runs."""
    module = parse_module(BIG)
    LoopRuntimeExtents().apply(Context(), module)
    source = emit_c(module)
    kernel = source[source.index("kernel_neg_0(") : source.index("int dlpc_main")]
    assert "if (dlpc_parallel()) {" in kernel and "} else {" in kernel
    assert "if(parallel:" not in kernel


# a loop over seq split by 4 (i0o, i0i), i0i to be fused with the static i1
SPLIT = """
func.func @main(%x: memref<16x8xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<16x8xf32>)
    attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [],
    dlpc.num_outputs = 1 : i64} {
  loop.kernel "neg_0" {
    loop.for %i0o = 0 to 16 step 4 {name = "i0o", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %i0i = 0 to 4 step 1 {name = "i0i", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
          %i0 = arith.addi %i0o, %i0i : index
          %v = memref.load %x[%i0, %i1] : memref<16x8xf32>
          %n = arith.negf %v : f32
          memref.store %n, %out0[%i0, %i1] : memref<16x8xf32>
        }
      }
    }
  }
  func.return
}
"""


def test_a_fused_loop_keeps_its_extent():
    """fuse(i0i, i1) keeps i0i's mark with the scale 8, so the fused loop stops at
    8 * (seq - i0o): the rows below seq are computed, at every seq (the conv's batch tile
    fused with its rows computed 32 images at batch 1 before)."""
    from dlpc.passes.schedule.fuse import fuse

    module = parse_module(SPLIT)
    fused = fuse(module, "neg_0", "i0i", "i1", "f")
    assert fused.attributes["dlpc.extent_scale"] == IntegerAttr(8, 64)
    LoopRuntimeExtents().apply(Context(), module)
    source = emit_c(module)
    assert source[source.index("kernel_neg_0(") :].count(" ? ") >= 2  # (i0o and f clamped)
    f = CFunction(module, name="dyn_fused")
    x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    for n in (1, 3, 4, 5, 7, 8, 9, 16):
        (out,) = f(x, np.array([n], np.int64))
        np.testing.assert_array_equal(out[:n], -x[:n])
