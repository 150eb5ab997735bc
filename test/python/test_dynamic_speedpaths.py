"""The fast paths of the one-compile program (issue 29, docs/dynamic.md): loops over
runtime extents stop at the call's dims (loop-runtime-extents + the C printer's clamped
bound), checked numerically at several extents, including the padding left untouched."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from dlpc.api import compile as dlpc_compile
from dlpc.api import reference
from dlpc.backends.c import emit_c
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.frontends.text import parse_model
from dlpc.passes.lower.runtime_extents import LoopRuntimeExtents
from dlpc.passes.pipeline import parse_module

# a split row loop (i0o, i0i: index i0o + i0i) and an exact vector reduction over seq
NEST = """
func.func @main(%x: memref<16x8xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<16x8xf32>,
    %out1: memref<f32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64,
    dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  loop.kernel "neg_0" {
    loop.for %i0o = 0 to 16 step 4 {name = "i0o", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %i0i = 0 to 4 step 1 {name = "i0i", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i0 = arith.addi %i0o, %i0i : index
        loop.for %i1 = 0 to 8 step 1 {name = "i1", vectorize} {
          %v = memref.load %x[%i0, %i1] : memref<16x8xf32>
          %n = arith.negf %v : f32
          memref.store %n, %out0[%i0, %i1] : memref<16x8xf32>
        }
      }
    }
  }
  loop.kernel "sum_1" attributes {dlpc.exact = ["r0"]} {
    %z = arith.constant 0.0 : f32
    memref.store %z, %out1[] : memref<f32>
    loop.for %r0 = 0 to 16 step 1 {name = "r0", vectorize, dlpc.extent = "seq"} {
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%r0, %c0] : memref<16x8xf32>
      %a = memref.load %out1[] : memref<f32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %out1[] : memref<f32>
    }
  }
  func.return
}
"""


def test_loops_stop_at_the_calls_extent():
    module = parse_module(NEST)
    LoopRuntimeExtents().apply(Context(), module)
    source = emit_c(module)
    # every marked loop runs to min(its bound, its limit): no per-iteration guard left
    kernels = source[source.index("kernel_neg_0(") : source.index("int dlpc_main")]
    assert kernels.count(" ? ") == 3 and "if (" not in kernels
    f = CFunction(module, name="dyn_clamp")
    x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    for n in (0, 1, 3, 4, 5, 16):
        out0, out1 = f(x, np.array([n], np.int64))
        np.testing.assert_array_equal(out0[:n], -x[:n])
        np.testing.assert_allclose(out1, x[:n, 0].sum(), rtol=1e-5, atol=1e-6)


# a row of 64 whose length is the call's (seq): a vector map (marked) and a sum over it
# (guarded already, as loop-runtime-extents leaves an exact reduction)
ROW = """
func.func @main(%x: memref<64xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<64xf32>,
    %out1: memref<f32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64,
    dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  loop.kernel "exp_0" {
    loop.for %j = 0 to 64 step 1 {name = "j", vectorize, dlpc.extent = "seq"} {
      %v = memref.load %x[%j] : memref<64xf32>
      %e = math.exp %v : f32
      memref.store %e, %out0[%j] : memref<64xf32>
    }
  }
  loop.kernel "sum_1" {
    %c0 = arith.constant 0 : index
    %seq = memref.load %dlpc_dims[%c0] : memref<1xi64>
    %n = arith.index_cast %seq : i64 to index
    %acc = memref.alloca() : memref<f32>
    %z = arith.constant 0.0 : f32
    memref.store %z, %acc[] : memref<f32>
    loop.for %r0 = 0 to 64 step 1 {name = "r0", vectorize, reduction} {
      %in = arith.cmpi slt, %r0, %n : index
      scf.if %in {
        %v = memref.load %x[%r0] : memref<64xf32>
        %a = memref.load %acc[] : memref<f32>
        %s = arith.addf %a, %v : f32
        memref.store %s, %acc[] : memref<f32>
      }
    }
    %t = memref.load %acc[] : memref<f32>
    memref.store %t, %out1[] : memref<f32>
  }
  func.return
}
"""


def test_short_vector_loops_take_vectors_of_8():
    """A vector loop stopped at a runtime limit is printed twice: below SHORT_TRIP
    iterations in vectors of 8, else the widest; both give the same answers."""
    from dlpc.backends.c import SHORT_TRIP

    module = parse_module(ROW)
    LoopRuntimeExtents().apply(Context(), module)
    source = emit_c(module)
    kernels = source[source.index("kernel_exp_0(") : source.index("int dlpc_main")]
    assert kernels.count(f" < {SHORT_TRIP}) {{") == 2
    assert kernels.count("#pragma omp simd simdlen(8)") == 2
    assert kernels.count("#pragma omp simd simdlen(8) reduction(+:") == 1
    f = CFunction(module, name="dyn_short")
    x = np.random.default_rng(5).standard_normal(64).astype(np.float32)
    for n in (0, 1, 7, 8, 9, 15, 16, 17, 40, 64):
        out0, out1 = f(x, np.array([n], np.int64))
        np.testing.assert_allclose(out0[:n], np.exp(x[:n]), rtol=1e-5)
        np.testing.assert_allclose(out1, x[:n].sum(), rtol=1e-5, atol=1e-5)


SOURCE = """
model t(x: f32[B, S, 8]) {
  param w: f32[8, 8] = normal(seed=1, std=0.5)
  param b: f32[8] = normal(seed=2, std=0.1)
  param g: f32[8] = normal(seed=3, std=1.0)
  let h = linear(x, w, b)
  return softmax(h, axis=-1), reduce_sum(layer_norm(h, g, b), axis=1)
}
"""


@pytest.fixture(scope="module")
def small():
    """The text model above with B and S symbolic, compiled once on C (max B 8, S 16)."""
    model = parse_model(SOURCE, dims="symbolic")
    return model, dlpc_compile(model, target="c", max_dims={"B": 8, "S": 16})


def test_host_path_copies_and_slices_right(small):
    model, fn = small
    rng = np.random.default_rng(1)
    # alternating shapes (each binding's plan is reused), an inner dim (S) below and at
    # its maximum, the outermost (B) at 1 and above
    for b, s in ((1, 1), (1, 5), (3, 5), (1, 5), (8, 16), (2, 16), (1, 1), (3, 5)):
        x = rng.standard_normal((b, s, 8)).astype(np.float32)
        want = reference(model, [x])
        got = fn(x)
        again = fn(x)  # (the fast path: a call of the same shapes)
        assert [y.shape for y in got] == [(b, s, 8), (b, 8)]
        for y, z in zip(got, again):
            assert y.flags.c_contiguous
            np.testing.assert_array_equal(y, z)
        for y, w in zip(got, want):
            np.testing.assert_allclose(y, w, rtol=1e-4, atol=1e-5)
    assert fn.stats["compiles"] == 1


def test_numpy_program_binds_dims_per_call():
    """The numpy program's dims are locals of the call (passed on to the functions that
    use them): threads calling it with different shapes get their own."""
    import threading

    source = SOURCE.replace("softmax(h, axis=-1)", "reshape(softmax(h, axis=-1), shape=[-1, 8])")
    model = parse_model(source, dims="symbolic")
    fn = dlpc_compile(model, target="numpy")
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((b, s, 8)).astype(np.float32) for b, s in ((1, 2), (3, 7), (2, 5))]
    wants = [reference(model, [x]) for x in xs]
    fn(xs[0])
    assert "global" not in fn.function.last.source
    errors: list[str] = []

    def work(k: int) -> None:
        for _ in range(40):
            got = fn(xs[k])
            for y, w in zip(got, wants[k]):
                if y.shape != w.shape or not np.allclose(y, w, rtol=1e-5, atol=1e-6):
                    errors.append(f"thread {k}: {y.shape} against {w.shape}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert fn.stats["compiles"] == 1


def test_repeated_binding_runs_in_c_with_fresh_outputs(small):
    """A call of the previous call's shapes is one C call (fastcall.c's Bound: copy in,
    run, copy each output's block out); its outputs are new arrays of the binding's
    shape, not views of the buffers the next call overwrites."""
    from dlpc.backends.runtime import fastcall

    model, fn = small
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((3, 5, 8)).astype(np.float32) for _ in range(3)]
    got = [fn(x) for x in xs]  # (the first binds; the next two take the fast path)
    if fastcall.extension() is not None:
        assert type(fn.function._fast).__name__ == "Bound"
    for x, ys in zip(xs, got):
        for y, w in zip(ys, reference(model, [x])):
            assert y.base is None and y.flags.c_contiguous and y.shape == w.shape
            np.testing.assert_allclose(y, w, rtol=1e-4, atol=1e-5)
    # the fast path refuses what it does not take, and the guard still speaks
    y = fn(np.asfortranarray(xs[0]))[0]
    np.testing.assert_allclose(y, got[0][0], rtol=1e-6)
    with pytest.raises(Exception, match="input 'x'"):
        fn(xs[0].astype(np.float64))


WIDE = """
model w(x: f32[B, S, 64]) {
  param w1: f32[64, 64] = normal(seed=1, std=0.1)
  param w2: f32[64, 64] = normal(seed=2, std=0.1)
  param b: f32[64] = normal(seed=3, std=0.1)
  let h = relu(linear(relu(linear(x, w1, b)), w2, b))
  return linear(relu(linear(h, w1, b)), w2, b)
}
"""


def test_threads_share_one_bindings_c_call():
    """Threads calling one binding at once (calls long enough to overlap): the call that
    finds the program's max-shaped buffers in use takes its own, so every thread gets
    its own input's result."""
    from concurrent.futures import ThreadPoolExecutor

    model = parse_model(WIDE, dims="symbolic")
    fn = dlpc_compile(model, target="c", max_dims={"B": 4, "S": 64})
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((2, 48, 64)).astype(np.float32) for _ in range(4)] * 30
    wants = [reference(model, [x])[0] for x in xs[:4]]
    fn(xs[0])
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda x: fn(x)[0], xs))
    for k, y in enumerate(got):
        np.testing.assert_allclose(y, wants[k % 4], rtol=1e-4, atol=1e-4)
    assert fn.stats["compiles"] == 1
