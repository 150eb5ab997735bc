"""passes/lower/_dlp_fuse.py: chains of kernels passing tiles along become one dlp kernel
(on the simulator against the numpy reference)."""

import numpy as np
from dlp_select_cases import lowered, matches_reference

from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.passes import pipeline


def fused(module) -> dict[str, list[str]]:
    """Per dlp kernel of the lowered module: the loop kernels it fuses (itself alone)."""
    out = {}
    for k in lower_to_dlp(module.clone()).walk():
        if k.name == "dlp.kernel":
            members = k.attributes.get("dlpc.fused")
            out[k.sym] = members.data.split(",") if members is not None else [k.sym]
    return out


def test_softmax_is_one_kernel(tmp_path):
    text = "model m(x: f32[64, 32]) {\n  return softmax(x, axis=-1)\n}\n"
    model, module, ops = lowered(tmp_path, text)
    assert fused(module) == {
        "softmax_0": ["softmax_0_max", "softmax_0_exp", "softmax_0_sum", "softmax_0"]
    }
    assert ops["dlp.reduce_max"] == ops["dlp.reduce_sum"] == 1
    matches_reference(model, module)


def test_layer_norm_is_one_kernel(tmp_path):
    text = (
        "model m(x: f32[32, 64]) {\n"
        "  param g: f32[64] = normal(seed=1)\n  param b: f32[64] = normal(seed=2)\n"
        "  return layer_norm(x, g, b, eps=1e-5)\n}\n"
    )
    model, module, _ = lowered(tmp_path, text)
    assert list(fused(module).values()) == [
        ["layer_norm_0_mean", "layer_norm_0_rstd", "layer_norm_0"]
    ]
    # rstd's epilogue (1 / sqrt(var + eps)) stays scalar loops: `--stats` still says so,
    # naming the member
    ((kernel, why),) = pipeline.dlp_scalar_kernels(lower_to_dlp(module.clone()))
    assert kernel == "layer_norm_0" and why.startswith("layer_norm_0_rstd: its epilogue")
    matches_reference(model, module)


def test_conv_and_its_pooling_are_one_kernel(tmp_path):
    text = (
        "model m(x: f32[1, 3, 16, 16]) {\n"
        "  param w: f32[8, 3, 3, 3] = kaiming(seed=1)\n  param b: f32[8] = normal(seed=2)\n"
        "  return max_pool2d(relu(conv2d(x, w, b, padding=1)), kernel=2, stride=2)\n}\n"
    )
    model, module, ops = lowered(tmp_path, text)
    (members,) = fused(module).values()
    assert len(members) == 2 and members[-1].startswith("max_pool2d")
    assert ops["dlp.conv2d"] == ops["dlp.pool"] == 1
    matches_reference(model, module)


# relu(x + 1) rows -> y; z = y * 2 at the same rows (joins y's chain); w = y transposed
# (reads y by columns: not a member), so y, an intermediate of the chain, is still stored
CHAIN = """
func.func @main(%x: memref<16x64xf32> {dlpc.name = "x"}, %z: memref<16x64xf32>, %w: memref<64x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  %y = memref.alloc() : memref<16x64xf32>
  loop.kernel "k1" attributes {origin = "graph.relu"} {
    loop.for %i = 0 to 16 step 1 {name = "i", parallel} {
      loop.for %j = 0 to 64 step 1 {name = "j"} {
        %v = memref.load %x[%i, %j] : memref<16x64xf32>
        %one = arith.constant 1.000000e+00 : f32
        %s = arith.addf %v, %one : f32
        memref.store %s, %y[%i, %j] : memref<16x64xf32>
      }
    }
  }
  loop.kernel "k2" attributes {origin = "graph.mul"} {
    loop.for %i = 0 to 16 step 1 {name = "i", parallel} {
      loop.for %j = 0 to 64 step 1 {name = "j"} {
        %v = memref.load %y[%i, %j] : memref<16x64xf32>
        %two = arith.constant 2.000000e+00 : f32
        %s = arith.mulf %v, %two : f32
        memref.store %s, %z[%i, %j] : memref<16x64xf32>
      }
    }
  }
  loop.kernel "k3" attributes {origin = "graph.transpose"} {
    loop.for %j = 0 to 64 step 1 {name = "j", parallel} {
      loop.for %i = 0 to 16 step 1 {name = "i"} {
        %v = memref.load %y[%i, %j] : memref<16x64xf32>
        memref.store %v, %w[%j, %i] : memref<64x16xf32>
      }
    }
  }
  memref.dealloc %y : memref<16x64xf32>
  func.return
}
"""  # noqa: E501


def test_an_intermediate_read_after_the_chain_is_stored():
    module = pipeline.parse_module(CHAIN)
    assert fused(module)["k2"] == ["k1", "k2"]
    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    z, w = compile_dlp(module, name="chain_stored")(x)
    np.testing.assert_allclose(z, (x + 1) * 2, rtol=1e-6)
    np.testing.assert_allclose(w, (x + 1).T, rtol=1e-6)


def test_a_chain_is_kept_apart_with_fuse_off():
    module = pipeline.parse_module(CHAIN)
    kernels = [k for k in lower_to_dlp(module.clone(), fuse=False).walk() if k.name == "dlp.kernel"]
    assert [k.sym for k in kernels] == ["k1", "k2", "k3"]


def test_a_chain_stages_its_weights_in_sram(tmp_path):
    """A linear (its 16 KiB weight whole, 16 tasks of 16 rows) and the layer norm of its
    rows: one kernel whose weight crosses GDRAM once per cluster (staged in SRAM, every
    core a share) rather than once per task."""
    text = (
        "model m(x: f32[256, 64]) {\n"
        "  param w: f32[64, 64] = kaiming(seed=1)\n  param b: f32[64] = normal(seed=2)\n"
        "  param g: f32[64] = normal(seed=3)\n  param beta: f32[64] = normal(seed=4)\n"
        "  return layer_norm(linear(x, w, b), g, beta, eps=1e-5)\n}\n"
    )
    model, module, ops = lowered(tmp_path, text)
    (members,) = fused(module).values()
    assert members[0] == "linear_0" and len(members) == 4
    assert ops["dlp.sync_cluster"] == 1
    matches_reference(model, module)
