"""The OpenCL backend on PoCL (or any OpenCL platform): every example against the numpy
reference, the NDRange mapping, and __local cache stages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.passes import pipeline

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.opencl import emit_opencl, plan_launch  # noqa: E402
from dlpc.backends.runtime.opencl_rt import compile_opencl  # noqa: E402
from dlpc.dialects.loop import ForOp, KernelOp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# what the runtime takes: a module lowered for the OpenCL target (its views and Winograd
# kernels, pipeline.TARGET_PASSES)
OPENCL = pipeline.PipelineOptions(target="opencl")
EXAMPLES = ["mlp", "lenet", "resnet", "transformer", "mobilenet"]


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("width", [None, 8, 16])
def test_example_matches_reference(name, width):
    """Every example on this device, with its own lanes (`device_vector_width`) and
    with the plans of an 8- and a 16-wide device (`backends.opencl.lane_profile`)."""
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=1)
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    f = compile_opencl(module, name=name, vector_width=width)
    (out,) = f(*inputs, params=weights)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert f.source.count("__kernel void") == len(kernels) + len(f.chains)


def test_local_cache_stage_runs():
    module = pipeline.parse_module((ROOT / "test" / "e2e" / "emit-opencl-local.mlir").read_text())
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    launch = plan_launch(kernel, "mm_0")
    assert launch.global_size == (64,) and launch.local_size == (16,) and len(launch.shared) == 1
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((4, 8), dtype=np.float32),
        rng.standard_normal((8, 16), dtype=np.float32),
    )
    (out,) = compile_opencl(module, name="mm")(a, b)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_ndrange_and_single_work_item():
    module = pipeline.parse_module((ROOT / "test" / "e2e" / "emit-opencl.mlir").read_text())
    k0, k1 = [k for k in module.walk() if isinstance(k, KernelOp)]
    launch = plan_launch(k0, "k0")  # i1 x i2 on the NDRange, all 8 of i2 per item (i1: 4)
    assert launch.global_size == (4, 1)
    assert sorted((lp.loop_name, u) for lp, u in launch.lanes.items()) == [("i2", 8), ("i3", 2)]
    assert plan_launch(k1, "k1").global_size == (1,)
    assert "get_global_id(1)" in emit_opencl(module)
    rng = np.random.default_rng(1)
    x, bias = (
        rng.standard_normal((1, 4, 8, 2), dtype=np.float32),
        rng.standard_normal(2, dtype=np.float32),
    )
    out, total = compile_opencl(module, name="ndrange")(x, params={"fc.bias": bias})
    np.testing.assert_allclose(out, np.maximum(x + bias, 0), rtol=1e-6)
    np.testing.assert_allclose(total, [bias.sum()], rtol=1e-6)


def test_wrong_shape_is_a_one_line_error():
    module = pipeline.parse_module((ROOT / "test" / "e2e" / "emit-opencl-local.mlir").read_text())
    f = compile_opencl(module, name="mm")
    with pytest.raises(
        dlpc.diagnostics.DlpcError, match=r"input 0 has shape \(3, 8\), expected \(4, 8\)"
    ):
        f(np.zeros((3, 8), np.float32), np.zeros((8, 16), np.float32))


F64 = """
func.func @main(%x: memref<8xf64>, %out0: memref<8xf64>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "exp_0" {
    loop.for %i = 0 to 8 step 1 {name = "i0", parallel} {
      %v = memref.load %x[%i] : memref<8xf64>
      %e = math.exp %v : f64
      memref.store %e, %out0[%i] : memref<8xf64>
    }
  }
  func.return
}
"""


def test_double_precision_kernel():
    module = pipeline.parse_module(F64)
    f = compile_opencl(module, name="f64")
    assert "cl_khr_fp64" in f.source
    x = np.linspace(-1, 1, 8)
    (y,) = f(x)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-12)


def test_integer_pow():
    """math.ipowi through the prelude's dlpc_ipowi (the C backend's semantics)."""
    module = pipeline.parse_module("""
func.func @main(%a: memref<9xi32>, %b: memref<9xi32>, %y: memref<9xi32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 9 step 1 {name = "i0", parallel} {
      %x = memref.load %a[%i] : memref<9xi32>
      %e = memref.load %b[%i] : memref<9xi32>
      %p = math.ipowi %x, %e : i32
      memref.store %p, %y[%i] : memref<9xi32>
    }
  }
  func.return
}""")
    a = np.array([2, -3, 5, 0, 7, 1, -1, -1, 3], np.int32)
    b = np.array([10, 3, 0, 0, 20, -4, -3, -2, -1], np.int32)
    (y,) = compile_opencl(module, name="ipowi")(a, b)
    want = [1024, -27, 1, 1, 7**20 % 2**32, 1, -1, 1, 0]
    np.testing.assert_array_equal(y, np.array(want, np.int64).astype(np.int32))


def test_build_failure_names_the_compiler_error():
    """A program PoCL refuses is one line that carries the build log's first error, not
    the status code alone (CI once showed only BUILD_PROGRAM_FAILURE)."""
    import pyopencl as cl

    from dlpc.backends.runtime.opencl_rt import _build_failure, context

    ctx, _ = context()
    with pytest.raises(cl.Error) as info:
        cl.Program(ctx, "__kernel void f(__global float *a) { a[0] = no_such_name; }").build()
    message = _build_failure(info.value)
    assert "\n" not in message
    assert message.startswith("clBuildProgram failed: BUILD_PROGRAM_FAILURE: ")
    assert "no_such_name" in message


def test_pocl_cache_moves_off_an_unwritable_home(tmp_path, monkeypatch):
    from dlpc.backends.runtime import opencl_rt

    blocked = tmp_path / "home-file"
    blocked.write_text("a file where the cache directory would go")
    monkeypatch.delenv("POCL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path / "dlpc-cache"))
    opencl_rt._pocl_cache()
    import os

    assert os.environ["POCL_CACHE_DIR"].startswith(str(tmp_path / "dlpc-cache"))
    monkeypatch.delenv("POCL_CACHE_DIR")


def test_lanes_and_partials_run():
    """Register blocking, partial sums and vector math (emit-opencl-lanes.mlir) compute
    what numpy and torch do; the partial sums reassociate, so within float32 rounding."""
    module = pipeline.parse_module((ROOT / "test" / "e2e" / "emit-opencl-lanes.mlir").read_text())
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 16), dtype=np.float32)
    w = rng.standard_normal((8, 2), dtype=np.float32)
    v = rng.standard_normal((7, 16), dtype=np.float32)
    v[3, 5] = np.nan  # a NaN survives the max partials
    v[0, :4] = [np.inf, -np.inf, -0.0, 100.0]  # exp -> inf, 0, 1, inf through float4 lanes
    y, z, _, e = compile_opencl(module, name="lanes")(x, w, v)
    np.testing.assert_allclose(y, w @ x, rtol=1e-6)
    np.testing.assert_array_equal(z, np.max(v, axis=1))
    import torch

    want = torch.erf(torch.exp(torch.from_numpy(v))).numpy()
    np.testing.assert_allclose(e, want, rtol=1e-6, atol=1e-7)
    assert np.isnan(e[3, 5]) and e[0, 0] == 1.0 and e[0, 1] == 0.0


def test_independent_loops():
    from dlpc.backends.opencl import independent

    module = pipeline.parse_module((ROOT / "test" / "e2e" / "emit-opencl-lanes.mlir").read_text())
    loops = {
        (k.sym, lp.loop_name): lp
        for k in module.walk()
        if isinstance(k, KernelOp)
        for lp in k.walk()
        if isinstance(lp, ForOp)
    }
    assert independent(loops[("mix_0", "i1")])  # stores y[i0, i1], reads no y
    assert not independent(loops[("mix_0", "r0")])  # a reduction
    assert not independent(loops[("prefix_2", "i1")])  # reads s, which it stores


def test_resident_params_and_explicit_params():
    """Bound parameters are uploaded once; a call with `params=` uses those values, and
    the next call without them the bound ones again."""
    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=1)
    compiled = dlpc.compile(model, target="opencl")
    f = compiled.artifact
    (x,) = dlpc.api.random_inputs(model)
    (ref,) = dlpc.api.reference(model, [x])
    tol = dict(rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    np.testing.assert_allclose(f(x)[0], ref, **tol)
    other = {k: np.zeros_like(a) for k, a in dlpc.api.check_weights(model).items()}
    np.testing.assert_array_equal(f(x, params=other)[0], np.zeros_like(ref))
    np.testing.assert_allclose(f(x)[0], ref, **tol)
    assert len(f.kernel_ops) == 3
    assert f.num_launches == (1 if f.chains else 3)  # (one chain on a serial device)


def test_profile_rows():
    from dlpc.backends.runtime.opencl_rt import opencl_profile

    model = dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=1)
    compiled = dlpc.compile(model, target="opencl")
    rows, call = opencl_profile(
        compiled.artifact, compiled.lowered, dlpc.api.random_inputs(model), repeat=3
    )
    assert [r.name for r in rows] == [k.sym for k in compiled.artifact.kernel_ops]
    assert all(r.seconds > 0 for r in rows) and call > 0
    conv = next(r for r in rows if r.name.startswith("conv2d"))
    assert conv.flops > 0 and conv.bytes > 0


RESHAPE = """
func.func @main(%x: memref<2x3xf32>, %out0: memref<3x2xf32>, %out1: memref<2x3xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  %a = memref.alloc() : memref<2x3xf32>
  loop.kernel "neg_0" {
    loop.for %i = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 3 step 1 {name = "i1"} {
        %v = memref.load %x[%i, %j] : memref<2x3xf32>
        %n = arith.negf %v : f32
        memref.store %n, %a[%i, %j] : memref<2x3xf32>
      }
    }
  }
  %r = memref.alloc() : memref<3x2xf32>
  loop.kernel "reshape_1" attributes {origin = "graph.reshape"} {
    loop.for %f = 0 to 6 step 1 {name = "i0", parallel} {
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %ri = arith.divsi %f, %c2 : index
      %rj = arith.remsi %f, %c2 : index
      %ai = arith.divsi %f, %c3 : index
      %aj = arith.remsi %f, %c3 : index
      %v = memref.load %a[%ai, %aj] : memref<2x3xf32>
      memref.store %v, %r[%ri, %rj] : memref<3x2xf32>
    }
  }
  LATER
  loop.kernel "copy_2" {
    loop.for %i = 0 to 3 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 2 step 1 {name = "i1"} {
        %v = memref.load %r[%i, %j] : memref<3x2xf32>
        memref.store %v, %out0[%i, %j] : memref<3x2xf32>
      }
    }
  }
  memref.dealloc %r : memref<3x2xf32>
  memref.dealloc %a : memref<2x3xf32>
  func.return
}
"""
LATER = """loop.kernel "twice_2" {
    loop.for %i = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 3 step 1 {name = "i1"} {
        %v = memref.load %x[%i, %j] : memref<2x3xf32>
        %t = arith.addf %v, %v : f32
        memref.store %t, %a[%i, %j] : memref<2x3xf32>
        memref.store %t, %out1[%i, %j] : memref<2x3xf32>
      }
    }
  }"""


@pytest.mark.parametrize("later", [False, True])
def test_reshape_kernel_is_an_alias_unless_its_operand_changes(later):
    """A reshape's result is its operand's buffer (no launch), but not when a later kernel
    writes the operand (twice_2 overwrites `a` before `r` is read: an alias would read 2x)."""
    from dlpc.backends.c import find_main
    from dlpc.backends.runtime.opencl_rt import reshape_aliases

    text = RESHAPE.replace("LATER", LATER if later else "")
    if not later:
        text = text.replace(", %out1: memref<2x3xf32>)", ")").replace(
            "num_outputs = 2", "num_outputs = 1"
        )
    module = pipeline.parse_module(text)
    aliased = [k.sym for k in reshape_aliases(find_main(module))]
    assert aliased == ([] if later else ["reshape_1"])
    f = compile_opencl(module, name="reshape")
    assert len(f.kernel_ops) == (4 if later else 2)  # kernels launched (or chained)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    outputs = f(x)
    np.testing.assert_array_equal(outputs[0], (-x).reshape(3, 2))
    if later:
        np.testing.assert_array_equal(outputs[1], 2 * x)


ROW_BUFFER = """
func.func @main(%x: memref<8x64xf32>, %y: memref<8x64xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "rows_0" {
    loop.for %i = 0 to 8 step 1 {name = "i0", parallel} {
      %row = memref.alloca() : memref<64xf32>
      loop.for %j = 0 to 64 step 1 {name = "i1"} {
        %v = memref.load %x[%i, %j] : memref<8x64xf32>
        memref.store %v, %row[%j] : memref<64xf32>
      }
      loop.for %j = 0 to 64 step 1 {name = "i2"} {
        %v = memref.load %row[%j] : memref<64xf32>
        %w = arith.addf %v, %v : f32
        memref.store %w, %y[%i, %j] : memref<8x64xf32>
      }
    }
  }
  func.return
}
"""


def test_no_lanes_over_a_private_row():
    """A private buffer allocated in a laned body would be one per lane: lanes only when
    it is small (MAX_LANE_BUFFER elements)."""
    module = pipeline.parse_module(ROW_BUFFER)
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    launch = plan_launch(kernel, "rows_0")
    assert launch.lanes == {} and launch.global_size == (8,)
    x = np.arange(512, dtype=np.float32).reshape(8, 64)
    (y,) = compile_opencl(module, name="rows")(x)
    np.testing.assert_array_equal(y, 2 * x)


UNINITIALIZED_GLOBAL = """
"memref.global"() <{sym_name = "acc", type = memref<4xf32>, initial_value, sym_visibility = "private"}> : () -> ()
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %g = memref.get_global @acc : memref<4xf32>
  loop.kernel "add_0" {
    loop.for %i = 0 to 4 step 1 {name = "i0", parallel} {
      %a = memref.load %x[%i] : memref<4xf32>
      %b = memref.load %g[%i] : memref<4xf32>
      %c = arith.addf %a, %b : f32
      memref.store %c, %y[%i] : memref<4xf32>
    }
  }
  func.return
}
"""


def test_uninitialized_global_is_zeros():
    """An uninitialized memref.global is a zeroed buffer, as the C target's static array
    (the runtime read its initial value's elements: AttributeError on a UnitAttr)."""
    f = compile_opencl(pipeline.parse_module(UNINITIALIZED_GLOBAL), name="uninit")
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(f(x)[0], x)


def test_cpu_local_size_splits_the_ndrange_into_groups():
    from dlpc.backends.runtime.opencl_rt import cpu_local_size

    assert cpu_local_size((32,), 2) == (8,)  # 4 groups for 2 compute units
    assert cpu_local_size((4,), 2) == (1,)
    assert cpu_local_size((3,), 2) == (1,)  # fewer work-items than groups: one each
    assert cpu_local_size((2, 6), 2) == (1, 3)  # the outer dimension first, then the next
    assert cpu_local_size((8, 6, 5), 1) == (4, 6, 5)
    assert cpu_local_size((1,), 4) == (1,)


def test_svm_arguments_see_each_call_and_copied_ones_keep_their_buffers(monkeypatch):
    """Inputs and outputs live in fine-grained SVM where the device has it (PoCL): every
    call writes the inputs before its kernels and reads the outputs after; an argument a
    `memref.copy` reads or writes keeps a device buffer. With DLPC_OPENCL_SVM=0 every
    input is uploaded and every output read back, with the same results."""
    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=1)
    weights = dlpc.api.check_weights(model)
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    f = compile_opencl(module, name="mlp")
    f.bind_params(weights)
    monkeypatch.setenv("DLPC_OPENCL_SVM", "0")
    g = compile_opencl(module, name="mlp")
    g.bind_params(weights)
    assert not g.svm_args
    assert sorted(f.svm_args) == [0, len(f.arg_specs) - 1]  # x and the output
    rng = np.random.default_rng(3)
    for _ in range(3):  # a new input each call: no call sees the last one's
        x = rng.standard_normal((1, 784), dtype=np.float32)
        (ref,) = dlpc.api.reference(model, [x])
        tol = dict(rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
        np.testing.assert_allclose(f(x)[0], ref, **tol)
        np.testing.assert_array_equal(g(x)[0], f(x)[0])
    copy = pipeline.parse_module(
        """
        func.func @main(%x: memref<4xf32>, %y: memref<4xf32>)
            attributes {dlpc.num_inputs = 1 : i64, dlpc.num_outputs = 1 : i64} {
          "memref.copy"(%x, %y) : (memref<4xf32>, memref<4xf32>) -> ()
          func.return
        }
        """
    )
    h = compile_opencl(copy, name="copy")
    assert not h.svm_args
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(h(x)[0], x)


def test_svm_outputs_are_handed_over_and_never_rewritten_while_held():
    """An output in SVM is returned as a view of an SVM array of its pool (no copy out):
    a later call writes an array no earlier result still holds (a dropped result's array
    is written again, in place), at most SVM_POOL of them; with all of them held, a call
    writes the output's own array and returns a copy. Every result held keeps its
    values, whichever way it was made, and matches the reference."""
    from dlpc.backends.runtime.opencl_rt import SVM_POOL

    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=1)
    weights = dlpc.api.check_weights(model)
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    f = compile_opencl(module, name="mlp")
    f.bind_params(weights)
    last = len(f.arg_specs) - 1
    if last not in f.svm_args:
        pytest.skip("the OpenCL device has no fine-grained SVM buffers")
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((1, 784), dtype=np.float32) for _ in range(SVM_POOL + 3)]
    refs = [dlpc.api.reference(model, [x])[0] for x in xs]
    tol = dict(rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(refs[0]).max())))
    held = [f(x)[0] for x in xs]  # all held: the pool's arrays, then copies
    pooled = [y for y in held if y.base is not None and y.base is not f.svm_args[last]]
    assert len({id(y.base) for y in pooled}) == SVM_POOL == len(f.svm_pools[last])
    assert all(y.base is None or y.base.base is None for y in held[SVM_POOL:])  # copies
    for y, ref in zip(held, refs):  # no later call wrote over an earlier result
        np.testing.assert_allclose(y, ref, **tol)
    first = held[0].base
    del held, y, pooled
    again = f(xs[1])[0]  # the dropped results' arrays are written again: no new one
    assert again.base is first and len(f.svm_pools[last]) == SVM_POOL
    np.testing.assert_allclose(again, refs[1], **tol)
    kept = again
    for x, ref in zip(xs[2:5], refs[2:5]):  # the result held is not one of these
        y = f(x)[0]
        assert y.base is not kept.base
        np.testing.assert_allclose(y, ref, **tol)
    np.testing.assert_allclose(kept, refs[1], **tol)


def test_masked_guarded_loads_match_a_padded_conv():
    """emit-opencl-masked-load.mlir's two padded 3x3 convs (one masked, `masked_load`,
    one per-lane guarded) against numpy: the masked tiles, and the first tile of the
    buffer, whose left taps' flat index is -1 and take the per-lane loads, hold the same
    values as the zero-padded convolution (a masked lane loads its neighbour row's last
    element: a wrong mask would add it)."""
    module = pipeline.parse_module(
        (ROOT / "test" / "e2e" / "emit-opencl-masked-load.mlir").read_text()
    )
    source = emit_opencl(module)
    assert source.count("? ((int8)(") == 1  # conv2d_0 only
    f = compile_opencl(module, name="masked")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 1, 6, 16), dtype=np.float32)
    y = rng.standard_normal((2, 4, 6, 16), dtype=np.float32)
    w = rng.standard_normal((8, 1, 3, 3), dtype=np.float32)
    v = rng.standard_normal((8, 4, 3, 3), dtype=np.float32)

    def conv(a, k):
        p = np.pad(a.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((a.shape[0], k.shape[0], 6, 16))
        for kh in range(3):
            for kw in range(3):
                out += np.einsum(
                    "nchw,oc->nohw", p[:, :, kh : kh + 6, kw : kw + 16], k[:, :, kh, kw]
                )
        return out

    out0, out1 = f(x, y, params={"w": w, "v": v})
    np.testing.assert_allclose(out0, conv(x, w), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out1, conv(y, v), rtol=1e-5, atol=1e-5)


def test_copy_kernels_become_views():
    """The OpenCL target's strided views (`loop-view-copies`, pipeline.TARGET_PASSES):
    the transformer's head split/merge transposes and slices are no launches."""
    model = dlpc.load(ROOT / "examples" / "transformer.dlpc", batch=1)
    plain = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions())
    before = [k for k in plain.walk() if isinstance(k, KernelOp)]
    copies = [k for k in before if k.origin is not None and k.origin.data == "graph.transpose"]
    assert copies
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    f = compile_opencl(module, name="transformer")
    after = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert len(f.kernel_ops) == len(after) - len(f.aliased) < len(before)
    assert not [k for k in after if k.origin is not None and k.origin.data == "graph.transpose"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_at_batch_3_matches_reference(name):
    """At batch > 1 the batch is the first NDRange dimension; a conv's channels (an
    independent loop with vector lanes below it) are the second, as at batch 1."""
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=3)
    compiled = dlpc.compile(model, target="opencl")
    inputs = dlpc.api.random_inputs(model)
    for out, ref in zip(compiled(*inputs), dlpc.api.reference(model, inputs)):
        np.testing.assert_allclose(
            out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max()))
        )
    if name == "resnet":
        kernels = [k for k in compiled.lowered.walk() if isinstance(k, KernelOp)]
        # (its stride-2 conv: the 3x3 stride-1 convs are graph-winograd's fused kernels)
        conv = next(k for k in kernels if k.sym == "conv2d_relu_3")
        launch = plan_launch(conv, "conv")
        assert [lp.loop_name for lp in launch.mapped] == ["i0", "i1"]
        assert launch.global_size[0] == 3 and launch.vector is not None


def test_weights_read_transposed_by_vector_lanes():
    """At batch 32 a linear's lanes over its features are a vector: its weight `W[f, k]`
    is read from a transposed copy `W^T[k, f]` (`Launch.relayout`), made when the
    parameters are uploaded: once for the bound ones, on every call given `params=`."""
    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=32)
    compiled = dlpc.compile(model, target="opencl")
    f = compiled.artifact
    assert "v_fc1_weight[v_r0 * 256 + v_i1]" in f.source  # consecutive over the lanes
    assert f.param_copies  # (per parameter: its permutation and device copy)
    (x,) = dlpc.api.random_inputs(model)
    (ref,) = dlpc.api.reference(model, [x])
    tol = dict(rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    np.testing.assert_allclose(f(x)[0], ref, **tol)
    rng = np.random.default_rng(3)
    weights = dlpc.api.check_weights(model)
    other = {k: rng.standard_normal(a.shape).astype(a.dtype) for k, a in weights.items()}
    (other_ref,) = dlpc.api.reference(
        dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=32, weights=other), [x]
    )
    other_tol = dict(rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(other_ref).max())))
    np.testing.assert_allclose(f(x, params=other)[0], other_ref, **other_tol)
    np.testing.assert_allclose(f(x)[0], ref, **tol)  # the bound ones again


def test_relayout_plan_needs_a_resident_unstored_buffer():
    from dlpc.backends.opencl import resident_values

    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=32)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions())
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    resident = resident_values(module)
    first = plan_launch(kernels[0], "k", resident=resident)
    assert [perm for perm in first.relayout.values()] == [(1, 0)]
    assert not plan_launch(kernels[0], "k").relayout  # nothing resident: nothing transposed


def test_erf_is_within_a_few_ulp_and_exact_where_float_erf_is_one(tmp_path):
    """OpenCL's erf is dlpc's rational function (`backends.opencl.ERF`), on scalars and
    vectors: within 8 ulp of erf in float64 over [-6, 6] and at tiny and subnormal x,
    exactly +-1 where the float erf is (so gelu's far left is -0.0), NaN and infinities
    as erf's."""
    import math

    src = tmp_path / "erf.dlpc"
    n = 40000
    src.write_text(f"model e(x: f32[{n}], y: f32[8]) {{\n  return erf(x), erf(y), gelu(x)\n}}\n")
    model = dlpc.load(src)
    x = np.linspace(-6, 6, n, dtype=np.float32)
    x[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, -3e-39]
    x[6:12] = [3.85, -3.85, 3.8, 3.9, -4.0, 1e-20]
    y = x[:8].copy()  # (8 lanes at most: one more shape of the vector path)
    erf_x, erf_y, gelu_x = dlpc.compile(model, target="opencl")(x, y)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    finite = np.isfinite(x)
    ulp = np.abs(erf_x[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype(np.float32))
    assert ulp.max() <= 8
    assert np.isnan(erf_x[0]) and erf_x[1] == 1.0 and erf_x[2] == -1.0
    assert erf_x[3] == 0 and np.signbit(erf_x[3])  # erf(-0.0) = -0.0
    assert erf_x[4] != 0 and erf_x[5] != 0  # subnormals are not flushed
    np.testing.assert_array_equal(erf_y, erf_x[:8])
    rounded = want.astype(np.float32)
    one = np.abs(rounded) == 1.0  # where the float erf is +-1 exactly
    np.testing.assert_array_equal(erf_x[one & finite], rounded[one & finite])
    far_left = (x < -6 * 0.999) & finite  # (gelu(-inf) is NaN: -inf * 0)
    assert (gelu_x[far_left] == 0).all() and np.signbit(gelu_x[far_left]).all()


def test_batched_matmul_lanes_rows_too():
    """A batched matmul (the transformer's attention at batch 32): after the vector lanes
    over the columns and the mapped lanes over the heads, the lanes left go to the rows
    between them, which share the columns' loads."""
    model = dlpc.load(ROOT / "examples" / "transformer.dlpc", batch=32)
    compiled = dlpc.compile(model, target="opencl")
    kernels = [k for k in compiled.lowered.walk() if isinstance(k, KernelOp)]
    kernel = next(k for k in kernels if k.sym == "matmul_13")
    launch = plan_launch(kernel, "k")
    laned = {lp.loop_name: u for lp, u in launch.lanes.items()}
    assert laned == {"i1": 2, "i2": 4, "i3": 8}  # heads, rows, columns (the vector)
    assert launch.vector is not None and launch.vector.loop_name == "i3"


def test_conv_rows_get_no_lanes_of_their_own():
    """A conv's output rows share none of the inner lanes' input loads (each row reads
    its own input rows): no lanes for them (lenet's first conv at batch 32 went 497 ->
    646 us with them)."""
    model = dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=32)
    compiled = dlpc.compile(model, target="opencl")
    kernels = [k for k in compiled.lowered.walk() if isinstance(k, KernelOp)]
    conv = next(k for k in kernels if k.sym == "conv2d_relu_0")
    launch = plan_launch(conv, "k")
    laned = {lp.loop_name: u for lp, u in launch.lanes.items()}
    assert "i2" not in laned and launch.vector is not None


def test_f64_erf_keeps_the_builtin(tmp_path):
    """dlpc's erf is f32 only (`OWN_F32`): an f64 erf is OpenCL's, in double precision
    (an overload set without a double member took f64 through the float one)."""
    import math

    src = tmp_path / "erf64.dlpc"
    src.write_text("model e(x: f64[5, 3]) {\n  return erf(x)\n}\n")
    model = dlpc.load(src)
    x = np.linspace(-3, 3, 15).reshape(5, 3)
    (y,) = dlpc.compile(model, target="opencl")(x)
    want = np.vectorize(math.erf)(x)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-15)


def test_global_weights_read_transposed():
    """A constant weight (`memref.global`) read by vector lanes over its first dim is
    passed as a transposed copy made when the program is built."""
    from dlpc.backends.opencl import resident_values

    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 24)).astype(np.float32)
    rows = ", ".join("[" + ", ".join(f"{v:.9e}" for v in row) + "]" for row in w)
    text = f"""
func.func @main(%x: tensor<32x24xf32>) -> tensor<32x16xf32> {{
  %w = graph.constant dense<[{rows}]> : tensor<16x24xf32>
  %b = graph.constant dense<0.0> : tensor<16xf32>
  %y = graph.linear %x, %w, %b : (tensor<32x24xf32>, tensor<16x24xf32>, tensor<16xf32>) -> tensor<32x16xf32>
  func.return %y : tensor<32x16xf32>
}}
"""
    module = pipeline.lower(pipeline.parse_module(text), "loop", OPENCL)
    f = compile_opencl(module, name="global_weights")
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    relayout = plan_launch(kernel, "k", resident=resident_values(module)).relayout
    assert list(relayout.values()) == [(1, 0)] and not f.param_copies  # (a global's copy)
    x = rng.standard_normal((32, 24)).astype(np.float32)
    (y,) = f(x)
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-5 * float(np.abs(x @ w.T).max()))


PADDED_CONVS = """\
model padded(x: f32[B, 3, 13, 11]) {
  param c1.weight: f32[8, 3, 5, 5] = kaiming(seed=1)
  param c1.bias: f32[8] = normal(seed=2, std=0.1)
  param c2.weight: f32[10, 8, 3, 3] = kaiming(seed=3)
  param dw.weight: f32[10, 1, 3, 3] = kaiming(seed=4)
  let h = relu(conv2d(x, c1.weight, c1.bias, padding=2))
  let h = conv2d(h, c2.weight, stride=2, padding=1)
  return conv2d(h, dw.weight, padding=1, groups=10)
}
"""


@pytest.mark.parametrize("batch", [1, 5])
def test_padded_convs_split_interior_and_border(tmp_path, batch):
    """A reduction nest whose loads are guarded by padding tests is written twice
    (`padding_guards`, `KernelWriter.split_interior`): the guards tested at the corners
    of the nest's box, the interior copy without them. Odd sizes (13 x 11, a 5x5 kernel
    with padding 2, a strided conv, a depthwise one) put tiles on every border."""
    from dlpc.backends.opencl import padding_guards

    path = tmp_path / "padded.dlpc"
    path.write_text(PADDED_CONVS)
    model = dlpc.load(path, batch=batch)
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    nests = [
        next(lp for lp in k.walk() if isinstance(lp, ForOp) and lp.reduction)
        for k in module.walk()
        if isinstance(k, KernelOp)
        and any(isinstance(lp, ForOp) and lp.reduction for lp in k.walk())
    ]
    assert len(nests) == 3  # the three convs
    for nest in nests:
        guards = padding_guards(nest)
        assert guards is not None
        ifs, _, loops = guards
        # the window's loops (kh, kw: 5 x 5 or 3 x 3; the channels' loop is no part of it)
        assert len(ifs) == 1 and [lp.trip_count for lp in loops] in ([5, 5], [3, 3])
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    f = compile_opencl(module, name="padded")
    assert f.source.count("} else {") >= 3  # an interior and a border copy per conv
    (out,) = f(*inputs, params=weights)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


def test_padding_guards_need_affine_inequalities():
    """Only conjunctions of signed inequalities of affine functions of the nest's loops
    of the nest's loops and of the loops' around it are guards (the set where they hold
    is convex, so its corners decide it): a conv without padding has none, nor one whose
    test reads a value computed outside the nest, nor one with its `sge` tests made `ne`
    (not convex)."""
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IndexType, IntegerAttr
    from xdsl.ir import Block

    from dlpc.backends.opencl import padding_guards
    from dlpc.dialects.loop import defined_inside

    def first_nest(module, sym):
        kernel = next(k for k in module.walk() if isinstance(k, KernelOp) and k.sym == sym)
        return next(lp for lp in kernel.walk() if isinstance(lp, ForOp) and lp.reduction)

    lenet = dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=1)
    module = pipeline.lower(lenet.module.clone(), "loop", pipeline.PipelineOptions())
    assert padding_guards(first_nest(module, "conv2d_relu_0")) is not None  # padding=2
    assert padding_guards(first_nest(module, "conv2d_relu_1")) is None  # no padding
    # a value computed outside the nest (here i2 + 0) need not be affine in the lanes
    nest = first_nest(module, "conv2d_relu_0")
    add = next(
        o
        for o in nest.walk()
        if o.name == "arith.addi" and any(isinstance(v.owner, Block) for v in o.operands)
    )
    outer = next(v for v in add.operands if not defined_inside(v, nest))
    zero = arith.ConstantOp.from_int_and_width(0, IndexType())
    moved = arith.AddiOp(outer, zero.result)
    block = nest.parent_block()
    assert block is not None
    block.insert_ops_before([zero, moved], nest)
    add.operands = [moved.result if v is outer else v for v in add.operands]
    assert padding_guards(nest) is None
    module = pipeline.lower(lenet.module.clone(), "loop", pipeline.PipelineOptions())
    nest = first_nest(module, "conv2d_relu_0")
    for cmp in [o for o in nest.walk() if isinstance(o, arith.CmpiOp)]:
        if arith.CMPI_COMPARISON_OPERATIONS[cmp.predicate.value.data] == "sge":
            cmp.predicate = IntegerAttr(1, 64)  # ne
    assert padding_guards(nest) is None


def test_strided_vector_lanes_give_way_to_long_partial_sums():
    """A vector whose every load strides by a row (resnet's global average pool at batch
    32: lanes over channels, 256 floats apart) gives way to partial sums over the
    contiguous reduction when it is long (>= `LONG_REDUCTION`); the transformer's
    layer-norm means (64 a row) keep their vector lanes over rows."""
    from dlpc.backends.opencl import LONG_REDUCTION, resident_values

    model = dlpc.load(ROOT / "examples" / "resnet.dlpc", batch=32)
    compiled = dlpc.compile(model, target="opencl")
    pool = next(
        k for k in compiled.lowered.walk() if isinstance(k, KernelOp) and "avg_pool" in k.sym
    )
    launch = plan_launch(pool, "k", resident=resident_values(compiled.lowered))
    assert launch.vector is None
    assert [lp.loop_name for lp in launch.partials] == ["r1"]
    assert 16 * 16 >= LONG_REDUCTION
    model = dlpc.load(ROOT / "examples" / "transformer.dlpc", batch=32)
    compiled = dlpc.compile(model, target="opencl")
    mean = next(
        k for k in compiled.lowered.walk() if isinstance(k, KernelOp) and k.sym.endswith("_mean")
    )
    launch = plan_launch(mean, "k", resident=resident_values(compiled.lowered))
    assert launch.vector is not None and not launch.partials


@pytest.mark.parametrize("team", ["1", "0"])
def test_small_models_run_on_the_serial_cpu_device_and_large_ones_on_the_parallel(
    team, monkeypatch
):
    """Both of PoCL's CPU drivers are enumerated (POCL_DEVICES unset again after): a
    model whose estimated one-core time is under PARALLEL_SECONDS runs where the kernels
    run in the calling thread (no hand-off to worker threads), a larger one on the
    parallel device; from TEAM_SECONDS to TEAM_MAX_SECONDS on a team of two serial
    devices (`opencl_rt.Team`) unless teams are off (DLPC_OPENCL_TEAM=0); all compute
    what numpy does."""
    import os

    from dlpc.backends.runtime import opencl_rt
    from dlpc.backends.runtime.profile import KernelCost

    monkeypatch.setenv("DLPC_OPENCL_TEAM", team)
    serial = opencl_rt.serial_device()
    if serial is None:
        pytest.skip("the OpenCL platform has no serial CPU device beside a parallel one")
    assert os.environ.get("POCL_DEVICES") != opencl_rt.POCL_CPU_DRIVERS
    assert opencl_rt.default_device().max_compute_units > 1
    small = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=1)
    medium = dlpc.load(ROOT / "examples" / "resnet.dlpc", batch=1)
    large = dlpc.load(ROOT / "examples" / "resnet.dlpc", batch=32)
    teams = opencl_rt.team_devices()
    assert (teams is not None) == (team == "1")
    for model, device in ((small, serial), (medium, serial), (large, opencl_rt.default_device())):
        compiled = dlpc.compile(model, target="opencl")
        if model is medium and teams is not None:
            assert compiled.artifact.team_devices == teams and compiled.artifact.device == teams[0]
        else:
            assert compiled.artifact.device == device and compiled.artifact.team is None
        inputs = dlpc.api.random_inputs(model)
        (out,) = compiled(*inputs)
        (ref,) = dlpc.api.reference(model, inputs)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))
    flops = int(opencl_rt.PARALLEL_SECONDS * opencl_rt.ESTIMATED_FLOPS)
    assert opencl_rt.estimate_seconds([KernelCost("k", "", flops // 2, 0)]) < (
        opencl_rt.PARALLEL_SECONDS
    )
    assert opencl_rt.estimate_seconds([KernelCost("k", "", flops, 0)]) > (
        opencl_rt.PARALLEL_SECONDS
    )


def test_a_serial_device_runs_consecutive_kernels_as_one_launch():
    """On a device whose launches run in the calling thread (PoCL basic) the kernels
    between two copies are one chain launch (`backends.opencl.Chain`): the examples'
    kernels are one launch per call and compute what numpy does; the profile still
    times each kernel on its own launch."""
    from dlpc.backends.runtime import opencl_rt

    serial = opencl_rt.serial_device()
    if serial is None:
        pytest.skip("the OpenCL platform has no serial CPU device beside a parallel one")
    for name in ("lenet", "transformer"):
        model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=1)
        module = pipeline.lower(model.module.clone(), "loop", OPENCL)
        f = opencl_rt.OpenCLFunction(module, name=name, device=serial)
        assert [c.kernels for c in f.chains] == [f.kernel_ops]
        assert f.num_launches == 1 < len(f.kernel_ops)
        assert f.source.count("__kernel void kernel_chain(") == 1
        inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
        (out,) = f(*inputs, params=weights)
        (ref,) = dlpc.api.reference(model, inputs)
        tol = 1e-5 * max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=tol)
        f.bind_params(weights)
        seconds, _ = f.profile_kernels(inputs, repeat=2, warmup=1)
        assert len(seconds) == len(f.kernel_ops) and all(t > 0 for t in seconds)
    parallel = opencl_rt.default_device()
    model = dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=1)
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    f = opencl_rt.OpenCLFunction(module, name="lenet", device=parallel)
    assert not f.chains and f.num_launches == len(f.kernel_ops)


CHAINED = """
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %a = memref.alloc() : memref<8xf32>
  %b = memref.alloc() : memref<8xf32>
  KERNEL(neg_0, x, a, negf)
  KERNEL(neg_1, a, b, negf)
  "memref.copy"(%b, %a) : (memref<8xf32>, memref<8xf32>) -> ()
  KERNEL(twice_2, a, b, twice)
  KERNEL(twice_3, b, y, twice)
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  func.return
}
"""


def _chained_kernel(match, n: int = 8) -> str:
    """`KERNEL(name, src, dst, negf|twice)`: an elementwise kernel over n floats."""
    name, src, dst, op = (part.strip() for part in match.group(1).split(","))
    value = "%w = arith.negf %v : f32" if op == "negf" else "%w = arith.addf %v, %v : f32"
    return f"""loop.kernel "{name}" {{
    loop.for %i = 0 to {n} step 1 {{name = "i0", parallel}} {{
      %v = memref.load %{src}[%i] : memref<{n}xf32>
      {value}
      memref.store %w, %{dst}[%i] : memref<{n}xf32>
    }}
  }}"""


def test_a_chain_is_cut_at_copies_and_at_kernels_with_local_stages():
    """`kernel_runs` ends a run at a `memref.copy` (two chains of two kernels, the copy
    between them, the same result as kernel by kernel); a kernel with `__local` stages
    gets no body and is in no chain."""
    import re

    from dlpc.backends.c import find_main
    from dlpc.backends.opencl import OpenCLEmitter
    from dlpc.backends.runtime import opencl_rt

    module = pipeline.parse_module(re.sub(r"KERNEL\(([^)]*)\)", _chained_kernel, CHAINED))
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert opencl_rt.kernel_runs(find_main(module), {}) == [kernels[:2], kernels[2:]]
    x = np.arange(8, dtype=np.float32) - 3
    serial = opencl_rt.serial_device()
    if serial is not None:
        f = opencl_rt.OpenCLFunction(module, name="chained", device=serial)
        assert [c.kernels for c in f.chains] == [kernels[:2], kernels[2:]]
        assert f.num_launches == 2
        np.testing.assert_array_equal(f(x)[0], 4 * x)
    parallel = opencl_rt.default_device()
    g = opencl_rt.OpenCLFunction(module, name="chained", device=parallel)
    np.testing.assert_array_equal(g(x)[0], 4 * x)
    if parallel.max_compute_units > 1:  # work-groups of 8 / units images each
        assert [(c.kernels, c.parts) for c in g.chains] == [
            (kernels[:2], parallel.max_compute_units),
            (kernels[2:], parallel.max_compute_units),
        ]
        assert g.num_launches == 2
        assert g.source.count("(long)get_global_id(0);") >= 2  # (the chains' part ids)

    local = (ROOT / "test" / "e2e" / "emit-opencl-local.mlir").read_text()
    module = pipeline.parse_module(local)
    (staged,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    emitter = OpenCLEmitter(module)
    emitter.emit([[staged, staged]])
    assert not emitter.chains and not emitter.bodies


def test_a_split_chain_takes_only_kernels_that_keep_to_their_images():
    """`batch_split`: a kernel that reads another image than its own (x[7 - i]) or whose
    NDRange does not split evenly is launched on its own; the rest still computes what
    numpy does on a device with several compute units."""
    import re

    from dlpc.backends.opencl import Launch, batch_split, plan_launch, resident_values
    from dlpc.backends.runtime import opencl_rt

    reverse = CHAINED.replace("KERNEL(neg_1, a, b, negf)", "REVERSED")
    text = re.sub(r"KERNEL\(([^)]*)\)", _chained_kernel, reverse).replace(
        "REVERSED",
        """loop.kernel "rev_1" {
    loop.for %i = 0 to 8 step 1 {name = "i0", parallel} {
      %c7 = arith.constant 7 : index
      %j = arith.subi %c7, %i : index
      %v = memref.load %a[%j] : memref<8xf32>
      %w = arith.negf %v : f32
      memref.store %w, %b[%i] : memref<8xf32>
    }
  }""",
    )
    module = pipeline.parse_module(text)
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    resident = resident_values(module)
    launches = [plan_launch(k, k.sym, resident=resident) for k in kernels]
    assert [batch_split(k, lc, 2, resident) for k, lc in zip(kernels, launches)] == [
        8,
        None,
        8,
        8,
    ]
    assert batch_split(kernels[0], launches[0], 3, resident) is None  # (8 images, 3 groups)
    assert batch_split(kernels[0], Launch("k", (1,), None), 2, resident) is None
    # mlp at batch 32: its first two linears read 785 and 257 KiB of weights, every
    # group would read them again (MAX_SPLIT_RESIDENT); the last one reads 10 KiB
    mlp = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=32)
    lowered = pipeline.lower(mlp.module.clone(), "loop", pipeline.PipelineOptions())
    mlp_resident = resident_values(lowered)
    linears = [k for k in lowered.walk() if isinstance(k, KernelOp)]
    splits = [
        batch_split(k, plan_launch(k, k.sym, resident=mlp_resident), 2, mlp_resident)
        for k in linears
    ]
    assert splits == [None, None, 32]
    parallel = opencl_rt.default_device()
    f = opencl_rt.OpenCLFunction(module, name="reversed", device=parallel)
    x = np.arange(8, dtype=np.float32) - 3
    np.testing.assert_array_equal(f(x)[0], 4 * x[::-1])
    if parallel.max_compute_units > 1:
        assert [c.kernels for c in f.chains] == [kernels[2:]]
        assert f.num_launches == 3


def test_the_plan_is_data_the_binding_makes_the_objects():
    """`plan_function` decides the device, the program and where every buffer of @main
    lives as plain data (a frozen `OpenCLPlan`, no OpenCL object made); `OpenCLFunction`
    binds it: one kernel object per planned kernel, intermediates in the planned slots."""
    import dataclasses

    from dlpc.backends.c import find_main
    from dlpc.backends.runtime import opencl_rt

    model = dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=1)
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    device = opencl_rt.serial_device() or opencl_rt.default_device()
    f = opencl_rt.OpenCLFunction(module, name="lenet", device=device)
    plan = f.plan
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.source = ""  # type: ignore[misc]
    again = opencl_rt.plan_function(module, find_main(module), f.arg_specs, device=device)
    assert (again.source, again.slots, again.steps) == (plan.source, plan.slots, plan.steps)
    assert [s[1] for s in plan.steps if s[0] == "kernel"] == f.kernel_ops
    assert {kind for kind, _ in plan.homes.values()} <= {"arg", "global", "slot"}
    assert len(plan.slots) < sum(1 for op in module.walk() if op.name == "memref.alloc")
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    (out,) = f(*inputs, params=weights)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
