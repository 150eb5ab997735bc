"""dlp-lowering's code since seed 45 (e4a6bb0), pinned (issue 35): the attention fold
(passes/lower/_dlp_attn.py) is taken on exactly its pattern and on no near miss (each near
miss one edit of the real loop IR, each reaching another of the matcher's refusals), and
dlp-pack-params' choices (which params, which name, which offsets, the values made from a
recipe) exactly."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
from dlp_select_cases import lowered, matches_reference
from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, Float32Type, MemRefType, StringAttr

import dlpc
from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.dialects.loop import KernelOp
from dlpc.passes import pipeline
from dlpc.passes.lower import _dlp_attn, _dlp_fuse
from dlpc.passes.lower.dlp_pack_params import pack_params, packed_values
from dlpc.passes.lower.dlp_reshape_aliases import DlpReshapeAliases
from dlpc.targets.dlp import resolve

# test_dlp_attn's model (scaled scores): two heads of 16 rows of 16
ATTN = """model attn(x: f32[1, 16, 32]) {
  param wq: f32[32, 32] = kaiming(seed=1, gain=1.0)
  param wk: f32[32, 32] = kaiming(seed=2, gain=1.0)
  param wv: f32[32, 32] = kaiming(seed=3, gain=1.0)
  param wo: f32[32, 32] = kaiming(seed=4, gain=1.0)
  param bo: f32[32] = normal(seed=5, std=0.1)
  param g: f32[32] = normal(seed=6)
  param beta: f32[32] = normal(seed=7)
  let q = transpose(reshape(matmul(x, wq), shape=[1, 16, 2, 16]), perm=[0, 2, 1, 3])
  let k = transpose(reshape(matmul(x, wk), shape=[1, 16, 2, 16]), perm=[0, 2, 1, 3])
  let v = transpose(reshape(matmul(x, wv), shape=[1, 16, 2, 16]), perm=[0, 2, 1, 3])
  let a = softmax(matmul(q, k, transpose_b=true) * (1 / 4), axis=-1) @ v
  let a = reshape(transpose(a, perm=[0, 2, 1, 3]), shape=[1, 16, 32])
  return layer_norm(x + linear(a, wo, bo), g, beta, eps=1e-5)
}
"""


@pytest.fixture(scope="module")
def attn_loop(tmp_path_factory) -> str:
    """The loop IR loop-to-dlp receives for ATTN (weights folded, reshapes as aliases)."""
    path = tmp_path_factory.mktemp("attn") / "m.dlpc"
    path.write_text(ATTN)
    model = dlpc.load(path)
    weights = dict(model.weights)
    opts = pipeline.PipelineOptions(target="dlp")
    module = pipeline.lower(model.module.clone(), "loop", opts, weights=weights)
    DlpReshapeAliases().apply(Context(), module)
    return str(module)


def _fused(text: str) -> list[str]:
    lowered = lower_to_dlp(pipeline.parse_module(text), None)
    out = []
    for k in lowered.walk():
        if k.name == "dlp.kernel":
            f = k.attributes.get("dlpc.fused")
            out.append(f.data if isinstance(f, StringAttr) else "")
    return out


def _row_chain_folds(fused: list[str]) -> bool:
    return any("linear_add_1" in f and "matmul_13" in f for f in fused)


def test_attention_folded_into_the_row_chain(attn_loop):
    fused = _fused(attn_loop)
    assert fused[-1] == (
        "linear_add_1,layer_norm_18_mean,layer_norm_18_rstd,layer_norm_18,matmul_mul_0,"
        "softmax_12_max,softmax_12_exp,softmax_12_sum,softmax_12,matmul_13,transpose_14"
    )


# (old, new): one edit of the loop IR each; the chain is then no attention the fold computes
NEAR_MISSES = {
    "sum starts at one": (
        "%16 = arith.constant 0.000000e+00 : f32",
        "%16 = arith.constant 1.000000e+00 : f32",
    ),
    "scores k not transposed": (
        "%transpose_1[%i0_7, %i1_7, %i3_3, %r0_1]",
        "%transpose_1[%i0_7, %i1_7, %r0_1, %i3_3]",
    ),
    "scores q read by columns": (
        "%transpose[%i0_7, %i1_7, %i2_7, %r0_1]",
        "%transpose[%i0_7, %i1_7, %r0_1, %i2_7]",
    ),
    "scores k without the reduction": (
        "%transpose_1[%i0_7, %i1_7, %i3_3, %r0_1]",
        "%transpose_1[%i0_7, %i1_7, %i3_3, %i3_3]",
    ),
    "difference, not product": (
        "%19 = arith.mulf %17, %18 : f32",
        "%19 = arith.subf %17, %18 : f32",
    ),
    "square of q": ("%19 = arith.mulf %17, %18 : f32", "%19 = arith.mulf %17, %17 : f32"),
    "maximum, not sum": ("%21 = arith.addf %20, %19 : f32", "%21 = arith.maximumf %20, %19 : f32"),
    "sum of q, not of the products": (
        "%21 = arith.addf %20, %19 : f32",
        "%21 = arith.addf %20, %17 : f32",
    ),
    "scores stored transposed": (
        "memref.store %23, %matmul_mul[%i0_7, %i1_7, %i2_7, %i3_3]",
        "memref.store %23, %matmul_mul[%i0_7, %i1_7, %i3_3, %i2_7]",
    ),
    "squared, not scaled": (
        "%23 = arith.mulf %sum_1, %22 : f32",
        "%23 = arith.mulf %sum_1, %sum_1 : f32",
    ),
    "shifted, not scaled": (
        "%23 = arith.mulf %sum_1, %22 : f32",
        "%23 = arith.addf %sum_1, %22 : f32",
    ),
    "reduction from 1": ("loop.for %r0_1 = 0 to 16 step 1", "loop.for %r0_1 = 1 to 16 step 1"),
    "keys from 1": ("loop.for %i3_3 = 0 to 16 step 1", "loop.for %i3_3 = 1 to 16 step 1"),
    "every other query": ("loop.for %i2_7 = 0 to 16 step 1", "loop.for %i2_7 = 0 to 16 step 2"),
    "product with v transposed": (
        "%transpose_2[%i0_12, %i1_12, %r0_4, %i3_6]",
        "%transpose_2[%i0_12, %i1_12, %i3_6, %r0_4]",
    ),
    "product with v scaled": (
        "memref.store %sum_3, %matmul[",
        "%vs = memref.load %__constant[] : memref<f32>\n%vs3 = arith.mulf %sum_3, %vs : f32\nmemref.store %vs3, %matmul[",
    ),
    "row sum no softmax": (
        'loop.kernel "softmax_12_sum" attributes {origin = "graph.softmax"}',
        'loop.kernel "softmax_12_sum" attributes {origin = "graph.reduce_sum"}',
    ),
    "row sum reads the scale": (
        "%35 = arith.addf %34, %33 : f32",
        "%s9 = memref.load %__constant[] : memref<f32>\n%35 = arith.addf %34, %s9 : f32",
    ),
    "quotient reads the scale": (
        "%38 = arith.constant 1.000000e+00 : f32",
        "%38 = memref.load %__constant[] : memref<f32>",
    ),
}


@pytest.mark.parametrize("case", list(NEAR_MISSES))
def test_near_misses_are_not_folded(attn_loop, case):
    old, new = NEAR_MISSES[case]
    assert attn_loop.count(old) == 1, old  # (the loop IR this edit was written for)
    fused = _fused(attn_loop.replace(old, new))
    assert not _row_chain_folds(fused), fused
    assert any(f.startswith("linear_add_1") for f in fused)  # (the row chain itself stays)


CHAIN = [
    "matmul_mul_0",
    "softmax_12_max",
    "softmax_12_exp",
    "softmax_12_sum",
    "softmax_12",
    "matmul_13",
]


def _parse_chain(text: str):
    module = pipeline.parse_module(text)
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    return kernels, {k.sym: k for k in kernels}


def _match(text: str):
    """The matcher on the attention chain's six kernels of `text`."""
    kernels, by_name = _parse_chain(text)
    return _dlp_attn.match([by_name[n] for n in CHAIN], _dlp_fuse.swaps(kernels))


def _loads(k: KernelOp) -> list:
    return [op.memref for op in k.walk() if isinstance(op, memref.LoadOp) and op.indices]


def test_matcher_reads_heads_rows_depth_and_scale(attn_loop):
    kernels, by_name = _parse_chain(attn_loop)
    got = _dlp_attn.match([by_name[n] for n in CHAIN], _dlp_fuse.swaps(kernels))
    assert got is not None
    assert (got.heads, got.rows, got.depth) == (2, 16, 16)
    assert [k.sym for k in got.kernels] == [*CHAIN, "transpose_14"]
    q, k = _loads(by_name["matmul_mul_0"])
    _, v = _loads(by_name["matmul_13"])
    assert got.q is q and got.k is k and got.v is v
    assert got.scale is not None and got.scale.type == MemRefType(Float32Type(), [])
    (merge,) = [
        op.memref for op in by_name["transpose_14"].walk() if isinstance(op, memref.StoreOp)
    ]
    # the merge's destination and its row-major alias [1, 16, 32]
    assert merge in got.merged and len(got.merged) == 2
    (alias,) = got.merged - {merge}
    assert alias.type == MemRefType(Float32Type(), [1, 16, 32])


def test_matcher_without_the_scale(attn_loop):
    # the scores stored as the sum itself (the scale's load then unused)
    got = _match(
        attn_loop.replace("memref.store %23, %matmul_mul[", "memref.store %sum_1, %matmul_mul[")
    )
    assert got is not None and got.scale is None


@pytest.mark.parametrize("case", list(NEAR_MISSES))
def test_matcher_refuses_near_misses(attn_loop, case):
    old, new = NEAR_MISSES[case]
    assert _match(attn_loop.replace(old, new)) is None


# ---- dlp-pack-params

PACK = """
builtin.module {{
  func.func @main(%x: memref<8x16xf32> {{dlpc.name = "x"}}, %s: memref<{n}xf32> {{dlpc.name = "s"}}, %w: memref<8x16xf32> {{dlpc.name = "w"}}, %b: memref<16xf32> {{dlpc.name = "b"}}, %i: memref<16xi32> {{dlpc.name = "i"}}, %j: memref<16xi32> {{dlpc.name = "j"}}, %d: memref<16xf64> {{dlpc.name = "d"}}, %out0: memref<8x16xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = ["s", "w", "b", "i", "j", "d"], dlpc.num_outputs = 1 : i64}} {{
    {outside}
    loop.kernel "k_0" attributes {{origin = "graph.mul"}} {{
      loop.for %i0 = 0 to 8 step 1 {{name = "i0", parallel}} {{
        loop.for %i1 = 0 to 16 step 1 {{name = "i1"}} {{
          %0 = memref.load %x[%i0, %i1] : memref<8x16xf32>
          %1 = memref.load %b[%i1] : memref<16xf32>
          %2 = memref.load %s[%i1] : memref<{n}xf32>
          %3 = arith.mulf %0, %2 : f32
          %4 = arith.addf %3, %1 : f32
          %5 = memref.load %w[%i0, %i1] : memref<8x16xf32>
          %6 = arith.addf %4, %5 : f32
          %7 = memref.load %j[%i1] : memref<16xi32>
          %8 = memref.load %i[%i1] : memref<16xi32>
          %9 = arith.addi %7, %8 : i32
          %10 = arith.sitofp %9 : i32 to f32
          %11 = arith.addf %6, %10 : f32
          %12 = memref.load %d[%i1] : memref<16xf64>
          %13 = arith.truncf %12 : f64 to f32
          %14 = arith.addf %11, %13 : f32
          memref.store %14, %out0[%i0, %i1] : memref<8x16xf32>
        }}
      }}
    }}
    func.return
  }}
}}
"""


def _pack_module(n: int = 16, outside: str = ""):
    return pipeline.parse_module(PACK.format(n=n, outside=outside))


def _main(module) -> func.FuncOp:
    (fn,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    return fn


def _recipes(module) -> dict[str, list[tuple[str, int]]]:
    fn = _main(module)
    out = {}
    for attrs in fn.arg_attrs.data if fn.arg_attrs else ():
        assert isinstance(attrs, DictionaryAttr)
        recipe = attrs.data.get("dlpc.pack")
        if isinstance(recipe, ArrayAttr):
            name = attrs.data["dlpc.name"]
            assert isinstance(name, StringAttr)
            out[name.data] = [(m.data, o.value.data) for m, o in (e.data for e in recipe.data)]  # type: ignore[attr-defined]
    return out


def test_each_element_type_packed_apart_in_first_read_order():
    module = _pack_module()
    assert pack_params(module, 64, 64) == ["packed.0", "packed.1"]
    # f32: b then s (the kernel reads b first), 64 bytes = 16 floats apart; i32: j then i;
    # the lone f64 and the 8x16 matrix stay their own params
    assert _recipes(module) == {
        "packed.0": [("b", 0), ("s", 16)],
        "packed.1": [("j", 0), ("i", 16)],
    }
    fn = _main(module)
    assert [a.data for a in fn.attributes["dlpc.params"].data] == [  # type: ignore[attr-defined]
        "s",
        "w",
        "b",
        "i",
        "j",
        "d",
        "packed.0",
        "packed.1",
    ]
    assert [str(t) for t in fn.function_type.inputs.data][7:9] == [
        "memref<32xf32>",
        "memref<32xi32>",
    ]


def test_offsets_rounded_up_to_the_alignment():
    module = _pack_module(n=5)  # s of 5 floats: b at 0, s at 16 (64 bytes); 128 bytes: 32
    pack_params(module, 64, 128)
    assert _recipes(module)["packed.0"] == [("b", 0), ("s", 32)]
    module = _pack_module(n=20)
    pack_params(module, 64, 4)  # (4 bytes: one float, no padding)
    assert _recipes(module)["packed.0"] == [("b", 0), ("s", 16)]
    fn = _main(module)
    assert str(fn.body.block.args[7].type) == "memref<36xf32>"


def test_over_max_elements_stays():
    module = _pack_module(n=17)  # s over 16: only b left of the f32s, no f32 pack
    assert pack_params(module, 16, 64) == ["packed.0"]
    assert _recipes(module) == {"packed.0": [("j", 0), ("i", 16)]}


def test_param_read_outside_a_kernel_stays():
    outside = "%c0 = arith.constant 0 : index\n    %r = memref.load %b[%c0] : memref<16xf32>"
    module = _pack_module(outside=outside)
    pack_params(module, 64, 64)
    assert all(m != "b" for r in _recipes(module).values() for m, _ in r)


def test_param_with_another_use_stays():
    outside = '"memref.copy"(%b, %b) : (memref<16xf32>, memref<16xf32>) -> ()'
    module = _pack_module(outside=outside)
    pack_params(module, 64, 64)
    assert all(m != "b" for r in _recipes(module).values() for m, _ in r)


def test_with_weights_only_bound_params_and_a_free_name():
    rng = np.random.default_rng(3)
    weights = {
        "s": rng.standard_normal(16).astype(np.float32),
        "b": rng.standard_normal(16).astype(np.float32),
        "j": np.arange(16, dtype=np.int32),
        "packed.0": np.zeros(1, np.float32),  # (taken: the pack is named packed.1)
    }
    module = _pack_module()
    assert pack_params(module, 64, 64, weights) == ["packed.1"]  # i unbound: no i32 pack
    assert _recipes(module) == {"packed.1": [("b", 0), ("s", 16)]}
    np.testing.assert_array_equal(weights["packed.1"], np.concatenate([weights["b"], weights["s"]]))
    assert weights["packed.1"].dtype == np.float32


def test_packed_values_from_the_recipe():
    module = _pack_module(n=5)
    pack_params(module, 64, 64)
    fn = _main(module)
    rng = np.random.default_rng(4)
    values = {
        "s": rng.standard_normal(5).astype(np.float32),
        "b": rng.standard_normal(16).astype(np.float32),
        "j": np.arange(16, dtype=np.int32),
    }
    got = packed_values(fn, values)  # i missing: packed.1 cannot be made
    assert list(got) == ["packed.0"]
    expect = np.zeros(32, np.float32)  # (s's 5 floats rounded up to 16 too)
    expect[:16], expect[16:21] = values["b"], values["s"]
    np.testing.assert_array_equal(got["packed.0"], expect)
    assert got["packed.0"].dtype == np.float32
    values["i"] = np.full(16, 7, np.int32)
    both = packed_values(fn, values)
    assert list(both) == ["packed.0", "packed.1"]
    np.testing.assert_array_equal(both["packed.1"], np.concatenate([values["j"], values["i"]]))
    assert math.prod(both["packed.1"].shape) == 32


def test_alias_at_an_offset_is_not_the_merge(attn_loop):
    """A view of the merged heads that does not start at 0 is no alias of them: the row
    chain reading it does not get the attention computed."""
    old = "%reshape_3 = memref.reinterpret_cast %transpose_3 to offset: [0]"
    assert attn_loop.count(old) == 1
    text = attn_loop.replace(
        old, "%reshape_3 = memref.reinterpret_cast %transpose_3 to offset: [16]"
    )
    got = _match(text)
    assert got is not None and len(got.merged) == 1
    assert not _row_chain_folds(_fused(text))


# ---- window selection (dlp_select/window.py)


@pytest.mark.parametrize("kernel", [(3, 1), (1, 3)])
def test_window_with_a_pad_as_wide_as_the_kernel_stays_scalar(tmp_path, kernel):
    """A conv whose left (3x1) or top (1x3) padding of 1 equals the kernel's width or
    height is left to scalar loops (a window would start on padding only); a pad below the
    kernel (3x3, padding 1) takes the intrinsic. Numerics against the reference either way."""
    kh, kw = kernel
    text = f"""
model m(x: f32[1, 16, 6, 6]) {{
  param w: f32[16, 16, {kh}, {kw}] = kaiming(seed=1)
  return conv2d(x, w, padding=1)
}}
"""
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.conv2d"] == 0 and ops["arith.mulf"] == 1, dict(ops)
    matches_reference(model, module)


def test_fold_bytes_and_cycles_of_the_rough_model(attn_loop):
    """extra_bytes and added_cycles (the fold's cost the pass compares), exactly, on a
    description with a 2 GHz clock and 4-byte alignment (no rounding hides a term): 2 heads
    of 16 rows of 16, 4 or 8 tasks of 4 or 2 rows."""
    attn = _match(attn_loop)
    assert attn is not None
    desc = dataclasses.replace(resolve(None), clock_ghz=2.0, dma_align=4)
    # q tile 512 + 5 score tiles 2560 + 2 row vectors 64 + the scale 4; K and V 2 x 2048
    assert _dlp_attn.extra_bytes(attn, 4, desc) == {"nram": 3140, "wram": 4096, "sram": 4096}
    assert _dlp_attn.extra_bytes(attn, 2, desc) == {"nram": 1572, "wram": 4096, "sram": 4096}
    # 4 tasks, one cluster: the task's 76 cycles of compute + K/V 32 (SRAM) + 20 (staging
    # share) + q's rows 10 = 138 over the port's 80
    assert _dlp_attn.added_cycles(attn, SimpleNamespace(tile=4, tasks=4), desc) == 138.0
    # 8 tasks, two clusters: the port's K and V twice, 160, over the task's 95
    assert _dlp_attn.added_cycles(attn, SimpleNamespace(tile=2, tasks=8), desc) == 160.0


def test_batched_conv_tiles_several_aligned_images(tmp_path):
    """64 images of 16 x 4 x 5 (320 floats: a multiple of the 64-byte vector alignment in
    bytes, not in elements) are tiled 8 images a task step (2560 floats in NRAM), not one
    (window.py's BatchConvSelection.max_tile); numerics against the reference."""
    path = tmp_path / "m.dlpc"
    path.write_text(
        """
model m(x: f32[64, 16, 4, 5]) {
  param w: f32[16, 16, 3, 3] = kaiming(seed=1)
  return relu(conv2d(x, w, padding=1))
}
"""
    )
    model = dlpc.load(path)
    compiled = dlpc.compile(model, target="dlp")
    nram = {
        str(op.memref.type)
        for op in compiled.lowered.walk()
        if isinstance(op, memref.AllocOp) and "nram" in str(op.memref.type)
    }
    assert nram == {
        "memref<2560xf32, #dlp.space<nram>>",
        "memref<320xf32, #dlp.space<nram>>",
    }
    inputs = dlpc.api.random_inputs(model)
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
