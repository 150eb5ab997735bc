"""Matrix products tiled through `__local` memory with register blocking under the GPU
plans (`backends/opencl/gpu_tile.py`), checked on the CPU OpenCL platform: the examples
whose linears take the tile and products of odd shapes (M, N, K past the tiles, K below
TK, one row) against the numpy reference; where the rule tiles and where not; the
launch and the emitted text of a tiled kernel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.passes import pipeline

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.opencl import OpenCLEmitter, gpu_tile  # noqa: E402
from dlpc.backends.opencl.gpu_launch import GpuProfile  # noqa: E402
from dlpc.backends.opencl.gpu_tile import TILES, TileParams, match_product  # noqa: E402
from dlpc.backends.runtime.opencl_rt import compile_opencl  # noqa: E402
from dlpc.dialects.loop import KernelOp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OPENCL = pipeline.PipelineOptions(target="opencl")
H200 = GpuProfile(max_group=1024, units=132)


def _lower(model):
    return pipeline.lower(model.module.clone(), "loop", OPENCL)


def _check(model, f) -> None:
    f.bind_params(dlpc.api.check_weights(model))
    inputs = dlpc.api.random_inputs(model, seed=0)
    for out, ref in zip(f(*inputs), dlpc.api.reference(model, inputs)):
        np.testing.assert_allclose(
            out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max()))
        )


def _model(tmp_path, text: str):
    path = tmp_path / "m.dlpc"
    path.write_text(text)
    return dlpc.load(path)


def _linear(m: int, n: int, k: int) -> str:
    return (
        f"model lin(x: f32[{m}, {k}]) {{\n"
        f"  param w: f32[{n}, {k}] = kaiming(seed=1)\n"
        f"  param b: f32[{n}] = normal(seed=2, std=0.1)\n"
        "  return relu(linear(x, w, b))\n}\n"
    )


def _matmul(m: int, n: int, k: int) -> str:
    return (
        f"model mm(x: f32[{m}, {k}]) {{\n"
        f"  param w: f32[{k}, {n}] = kaiming(seed=3)\n"
        "  return matmul(x, w)\n}\n"
    )


def _conv1x1(n: int, c: int, co: int, hw: int, stride: int) -> str:
    return (
        f"model pw(x: f32[{n}, {c}, {hw}, {hw}]) {{\n"
        f"  param w: f32[{co}, {c}, 1, 1] = kaiming(seed=4)\n"
        f"  param b: f32[{co}] = normal(seed=5, std=0.1)\n"
        f"  return clip(conv2d(x, w, b, stride={stride}), min=0, max=6)\n}}\n"
    )


@pytest.fixture
def always_tile(monkeypatch):
    """Every product tiles, whatever its size (the writer's edges on small shapes)."""
    monkeypatch.setattr(gpu_tile, "MIN_SIDE", 1)
    monkeypatch.setattr(gpu_tile, "OUTPUTS_PER_UNIT", 0)


def _tiled(f) -> list:
    return [launch for launch in f.plan.launches.values() if launch.tile is not None]


@pytest.mark.parametrize(
    "m, n, k",
    [(70, 67, 5), (1, 100, 33), (64, 64, 16), (129, 3, 300), (5, 1, 1)],
)
@pytest.mark.parametrize("kind", ["linear", "matmul"])
def test_tiled_products_of_odd_shapes_match_reference(tmp_path, always_tile, kind, m, n, k):
    """M, N, K not multiples of the tiles, K below TK, a 1-row and a 1-column product;
    a linear (B = W[n, k], loaded along k) and a matmul (B = W[k, n], along n)."""
    text = _linear(m, n, k) if kind == "linear" else _matmul(m, n, k)
    model = _model(tmp_path, text)
    f = compile_opencl(_lower(model), name="t", profile="gpu")
    assert len(_tiled(f)) == 1
    _check(model, f)


@pytest.mark.parametrize(
    "n, c, co, hw, stride", [(2, 5, 7, 9, 1), (1, 20, 70, 5, 2), (3, 1, 65, 4, 1)]
)
def test_tiled_1x1_convs_match_reference(tmp_path, always_tile, n, c, co, hw, stride):
    """A 1x1 conv is a product: A = W[co, ci, 0, 0] (rows: the output channels), B = the
    input (columns: images x rows x columns, strided or not; k: the input channels)."""
    model = _model(tmp_path, _conv1x1(n, c, co, hw, stride))
    f = compile_opencl(_lower(model), name="t", profile="gpu")
    (launch,) = _tiled(f)
    tile = launch.tile
    out_hw = -(-hw // stride)
    assert (tile.m, tile.n, tile.k) == (co, n * out_hw * out_hw, c)
    assert [lp.trip_count for lp in tile.inner] == [1, 1]
    _check(model, f)


@pytest.mark.parametrize("tile", TILES)
def test_both_tiles_match_reference(tmp_path, monkeypatch, tile):
    """The 64 x 64 (4 x 4 blocks) and 32 x 32 (2 x 2) tiles, chosen by the units."""
    model = _model(tmp_path, _linear(100, 90, 40))
    monkeypatch.setattr(gpu_tile, "MIN_SIDE", 1)
    monkeypatch.setattr(gpu_tile, "OUTPUTS_PER_UNIT", 0)
    monkeypatch.setattr(gpu_tile, "TILES", (tile,))
    f = compile_opencl(_lower(model), name="t", profile="gpu")
    (launch,) = _tiled(f)
    assert launch.tile.params == tile
    _check(model, f)


@pytest.mark.parametrize("batch", [1, 4, 32, 3])
@pytest.mark.parametrize("name", ["mlp", "lenet", "transformer", "mobilenet", "resnet"])
def test_examples_with_tiled_products_match_reference(name, batch, always_tile):
    """The examples whose linears and 1x1 convs tile (every one, the rule set aside) at
    batch 1, 4, 32 and 3, against the reference."""
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
    f = compile_opencl(_lower(model), name=name, profile="gpu")
    assert _tiled(f)
    _check(model, f)


def test_transformer_tiles_by_the_rule_on_an_h200(monkeypatch):
    """The rule on an H200 (132 units): transformer at batch 32 tiles its linears of 512
    rows and 128 or more features (32 x 32 tiles: the 64 x 64 ones make fewer groups
    than units), not its 64-feature ones (fewer outputs than 256 a unit) nor its batched
    matmuls; mlp at batch 32 (32 rows) tiles none, and on one unit neither."""
    model = dlpc.load(ROOT / "examples" / "transformer.dlpc", batch=32)
    emitter = OpenCLEmitter(_lower(model), gpu=H200)
    source = emitter.emit()
    tiled = {k.sym: launch for k, launch in emitter.launches.items() if launch.tile is not None}
    assert tiled and all(k.startswith("linear") for k in tiled)
    for sym, launch in tiled.items():
        tile = launch.tile
        assert tile.params == TILES[-1] and tile.m == 512 and tile.n >= 128
        assert launch.local_size == tile.params.group == (16, 16)
        assert launch.global_size == (-(-tile.n // 32) * 16, 512 // 32 * 16)
        body = source[source.index(f"kernel_{sym}(") :]
        body = body[: body.index("\n}\n")]
        assert body.count("__local float") == 2 and body.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    untiled = [k for k, launch in emitter.launches.items() if launch.tile is None]
    assert any(k.sym.startswith("linear") and match_product(k) for k in untiled)
    assert any(k.sym.startswith("matmul") for k in untiled)
    for units in (132, 1):
        mlp = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=32)
        emitter = OpenCLEmitter(_lower(mlp), gpu=GpuProfile(1024, units))
        emitter.emit()
        assert all(launch.tile is None for launch in emitter.launches.values())


def test_mobilenet_pointwise_conv_tiles_by_the_rule_on_an_h200():
    """mobilenet's pointwise conv at batch 32 on an H200: 64 channels x 32768 pixels,
    64 x 64 tiles (512 groups), the input read along its pixels (B unpadded), the
    weight along its input channels (A's rows padded); the depthwise 3x3 stays."""
    model = dlpc.load(ROOT / "examples" / "mobilenet.dlpc", batch=32)
    emitter = OpenCLEmitter(_lower(model), gpu=H200)
    source = emitter.emit()
    tiled = {k.sym: launch for k, launch in emitter.launches.items() if launch.tile is not None}
    assert list(tiled) == ["conv2d_clip_1"]
    launch = tiled["conv2d_clip_1"]
    assert launch.tile.params == TileParams() and (launch.tile.m, launch.tile.n) == (64, 32768)
    assert launch.global_size == (512 * 16, 16) and launch.local_size == (16, 16)
    assert "__local float v_a_tile[1040];" in source  # (16 x (64 + 1))
    assert "__local float v_b_tile[1024];" in source
    assert "v_conv2d_clip[(v_at_2 / 1024) * 32768 + v_k_2 * 1024 + " in source


def test_large_product_takes_the_64_tile_and_env_turns_it_off(tmp_path, monkeypatch):
    """A 1024 x 1024 product on 132 units: 256 groups of 64 x 64 outputs, 4 x 4 each;
    `DLPC_OPENCL_TILES=0` leaves it to `plan_gpu_launch`."""
    model = _model(tmp_path, _linear(1024, 1024, 8))
    module = _lower(model)
    emitter = OpenCLEmitter(module, gpu=H200)
    source = emitter.emit()
    (launch,) = emitter.launches.values()
    assert launch.tile is not None and launch.tile.params == TileParams()
    assert launch.global_size == (16 * 16, 16 * 16) and launch.local_size == (16, 16)
    assert "v_c3_3 = v_c3_3 + v_a3 * v_b3;" in source
    assert "if (v_row_16 < 1024 && v_col_16 < 1024) {" in source
    monkeypatch.setenv("DLPC_OPENCL_TILES", "0")
    emitter = OpenCLEmitter(module, gpu=H200)
    source = emitter.emit()
    (launch,) = emitter.launches.values()
    assert launch.tile is None and "__local" not in source


@pytest.mark.parametrize(
    "m, n, units, tiled",
    [(64, 64, 16, True), (63, 64, 1, False), (64, 63, 1, False), (64, 64, 17, False)],
)
def test_rule_edges(tmp_path, m, n, units, tiled):
    """Tiled from 64 rows and 64 columns and 256 outputs a unit on: 64 x 64 on 16 units
    (4096 outputs) is, 63 rows or columns or 17 units are not."""
    model = _model(tmp_path, _linear(m, n, 8))
    emitter = OpenCLEmitter(_lower(model), gpu=GpuProfile(max_group=1024, units=units))
    emitter.emit()
    (launch,) = emitter.launches.values()
    assert (launch.tile is not None) == tiled


def test_env_tiles_every_product_or_none(monkeypatch):
    """`DLPC_OPENCL_TILES=all`: mlp at batch 32 on an H200 tiles its three linears (32
    rows: the rule alone tiles none), each in 32 x 32 tiles (fewer groups than units
    either way); `0`: no kernel of the transformer at batch 32 tiles."""
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    mlp = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=32)
    emitter = OpenCLEmitter(_lower(mlp), gpu=H200)
    emitter.emit()
    tiles = [launch.tile for launch in emitter.launches.values()]
    assert len(tiles) == 3 and all(t is not None and t.params == TILES[-1] for t in tiles)
    monkeypatch.setenv("DLPC_OPENCL_TILES", "0")
    model = dlpc.load(ROOT / "examples" / "transformer.dlpc", batch=32)
    module = _lower(model)
    emitter = OpenCLEmitter(module, gpu=H200)
    emitter.emit()
    assert all(launch.tile is None for launch in emitter.launches.values())
    monkeypatch.setenv("DLPC_OPENCL_TILES", "yes")
    with pytest.raises(
        DlpcError,
        match=r"^error: opencl: DLPC_OPENCL_TILES='yes' is no tiling mode \(0, 1 or all\)$",
    ):
        OpenCLEmitter(module, gpu=H200).emit()


def test_not_products_are_not_tiled(tmp_path, always_tile):
    """A batched matmul (its batch indexes both operands), a max pool and an elementwise
    kernel are no products the tile writes (lenet's convs are: implicit GEMMs); nor is a
    product whose tile is larger than the device's work-group."""
    text = "model bm(x: f32[4, 8, 16], y: f32[4, 16, 8]) {\n  return relu(matmul(x, y))\n}\n"
    model = _model(tmp_path, text)
    kernels = [k for k in _lower(model).walk() if isinstance(k, KernelOp)]
    assert kernels and not any(match_product(k) for k in kernels)
    lenet = dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=2)
    kernels = [k for k in _lower(lenet).walk() if isinstance(k, KernelOp)]
    assert not any(match_product(k) for k in kernels if not k.sym.startswith(("linear", "conv")))
    model = _model(tmp_path, _linear(64, 64, 64))
    emitter = OpenCLEmitter(_lower(model), gpu=GpuProfile(max_group=128, units=1))
    emitter.emit()
    assert all(launch.tile is None for launch in emitter.launches.values())
