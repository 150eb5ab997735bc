"""dlp-pack-params (passes/lower/dlp_pack_params.py) and loop-to-dlp's one copy of a
kernel's adjacent packed views (passes/lower/_dlp_pack.py), on the simulator against the
numpy reference."""

from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import DlpFunction
from dlpc.dialects import dlp
from dlpc.passes import pipeline
from dlpc.passes.lower.dlp_pack_params import pack_params

ROOT = Path(__file__).resolve().parents[2]
LIT = ROOT / "test" / "passes" / "dlp-pack-params.mlir"

# out = layer_norm(x * s + b, g, beta) + c over 16 rows of 64: five 64-float params
MODEL = """model m(x: f32[16, 64]) {
  param s: f32[64] = normal(seed=1)
  param b: f32[64] = normal(seed=2)
  param g: f32[64] = normal(seed=3)
  param beta: f32[64] = normal(seed=4)
  param c: f32[64] = normal(seed=5)
  return layer_norm(x * s + b, g, beta, eps=1e-5) + c
}
"""


def _parse(path: Path):
    return pipeline.parse_module(path.read_text(), str(path))


def _gdram_reads(module) -> dict[str, list[str]]:
    """Per dlp kernel: the names of the GDRAM buffers it copies from, in order."""
    out = {}
    for k in module.walk():
        if isinstance(k, dlp.KernelOp):
            out[k.sym] = [
                op.operands[2].name_hint or "?"
                for op in k.walk()
                if isinstance(op, dlp.MemcpyAsyncOp | dlp.MemcpyOp)
                and dlp.space_of(op.operands[2].type) == "gdram"
            ]
    return out


@pytest.mark.parametrize("fuse", [True, False])
def test_packed_views_match_numpy(fuse):
    module = _parse(LIT)
    rng = np.random.default_rng(0)
    weights = {n: rng.standard_normal(16).astype(np.float32) for n in ("s", "b", "c")}
    weights["w"] = rng.standard_normal((8, 16)).astype(np.float32)
    assert pack_params(module, 64, 64, weights) == ["packed.0"]
    # folded at compile time: s, b and c at 64-byte offsets
    np.testing.assert_array_equal(
        weights["packed.0"], np.concatenate([weights["s"], weights["b"], weights["c"]])
    )
    x = rng.standard_normal((8, 16)).astype(np.float32)
    lowered = lower_to_dlp(module.clone(), None, fuse=fuse)
    reads = _gdram_reads(lowered)
    if fuse:  # one chain: the pack once, then the tiles
        assert reads == {"add_1": ["packed", "x", "w"]}
    else:
        assert reads == {"scale_0": ["packed", "x"], "add_1": ["c", "t", "w"]}
    (out,) = DlpFunction(lowered, name=f"pack_{fuse}")(x, params=weights)
    ref = (x * weights["s"] + weights["b"]) + weights["c"] + weights["w"]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_without_weights_only_the_recipe():
    module = _parse(LIT)
    assert pack_params(module, 64, 64) == ["packed.0"]
    assert pack_params(module, 64, 64) == []  # the views are no params: nothing left


def test_compile_folds_the_pack_and_copies_it_once(tmp_path):
    path = tmp_path / "m.dlpc"
    path.write_text(MODEL)
    model = dlpc.load(path)
    compiled = dlpc.compile(model, target="dlp")
    inputs = dlpc.api.random_inputs(model)
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    reads = [n for names in _gdram_reads(compiled.lowered).values() for n in names]
    assert "packed" in reads
    assert not {"s", "b", "g", "beta", "c"} & set(reads)


def test_transformer_feed_forward_chain_copies_its_pack_once():
    model = dlpc.load(ROOT / "examples" / "transformer.dlpc", batch=1)
    compiled = dlpc.compile(model, target="dlp")
    inputs = dlpc.api.random_inputs(model)
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    reads = _gdram_reads(compiled.lowered)["layer_norm_23"]
    assert reads.count("packed") == 1  # (staged: each core of a cluster its share)
    assert not {"ln1.scale_1", "ffn.b1_1", "ln2.bias_1"} & set(reads)
