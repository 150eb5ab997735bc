"""Matrix products tiled through `__local` memory with register blocking under the GPU
plans (`backends/opencl/gpu_tile.py`), checked on the CPU OpenCL platform: the examples
whose linears take the tile and products of odd shapes (M, N, K past the tiles, K below
TK, one row), batched matmuls (batch 1 and 3, broadcast batches, transposed operands,
fused epilogues) and KxK convs against the numpy reference; where the rule tiles and
where not; the device's local memory (`GpuProfile.local_mem_size`) bounding the rule's
and the tuner's tiles; the launch and the emitted text of a tiled kernel."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.passes import pipeline

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.opencl import OpenCLEmitter, gpu_tile  # noqa: E402
from dlpc.backends.opencl.gpu_launch import (  # noqa: E402
    TILE_LOCAL_BYTES,
    GpuParams,
    GpuProfile,
    tile_local_bytes,
)
from dlpc.backends.opencl.gpu_tile import TILES, TileParams, match_product  # noqa: E402
from dlpc.backends.runtime.opencl_rt import compile_opencl  # noqa: E402
from dlpc.dialects.loop import KernelOp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OPENCL = pipeline.PipelineOptions(target="opencl")
H200 = GpuProfile(max_group=1024, units=132, local_mem_size=48 * 1024)
NARROW = [p for tiles in gpu_tile.NARROW_TILES.values() for p in tiles]


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


def _narrow(params: TileParams) -> bool:
    """Is `params` one of `NARROW_TILES`, or one turned (few columns)?"""
    p = params
    return p in NARROW or TileParams(p.tn, p.tm, p.tk, p.rn, p.rm) in NARROW


@pytest.mark.parametrize("batch", [1, 4, 32, 3])
@pytest.mark.parametrize("name", ["mlp", "lenet", "transformer", "mobilenet", "resnet"])
def test_examples_with_tiled_products_match_reference(monkeypatch, name, batch):
    """The examples with every product tiled (`DLPC_OPENCL_TILES=all`, the rule set
    aside): linears, 1x1 convs, and resnet's five and lenet's two KxK convs as implicit
    GEMMs in `NARROW_TILES` (lenet's second keeps its channels last: 16 columns, the
    tile turned), at batch 1, 4, 32 and 3, against the reference."""
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
    f = compile_opencl(_lower(model), name=name, profile="gpu")
    tiles = {k.sym: launch.tile for k, launch in f.plan.launches.items() if launch.tile}
    assert tiles
    convs = {sym: tile for sym, tile in tiles.items() if tile.implicit}
    assert len(convs) == {"resnet": 5, "lenet": 2}.get(name, 0)
    assert all(_narrow(tile.params) for tile in convs.values())
    if name == "lenet":
        assert convs["conv2d_relu_1"].n == 16 and convs["conv2d_relu_1"].params.tn == 16
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
    """A max pool and an elementwise kernel are no products the tile writes (lenet's
    convs are: implicit GEMMs); nor is a product whose tile is larger than the device's
    work-group. (A batched matmul is: `test_batched_matmuls_*`.)"""
    lenet = dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=2)
    kernels = [k for k in _lower(lenet).walk() if isinstance(k, KernelOp)]
    assert not any(match_product(k) for k in kernels if not k.sym.startswith(("linear", "conv")))
    model = _model(tmp_path, _linear(64, 64, 64))
    emitter = OpenCLEmitter(_lower(model), gpu=GpuProfile(max_group=128, units=1))
    emitter.emit()
    assert all(launch.tile is None for launch in emitter.launches.values())


def _conv(
    n: int,
    c: int,
    co: int,
    hw: int,
    k: int,
    stride: int = 1,
    padding: int = 0,
    dilation: int = 1,
    residual: bool = False,
) -> str:
    """A KxK conv with bias and relu (and a residual added before the relu)."""
    out = (hw + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    extra = f", r: f32[{n}, {co}, {out}, {out}]" if residual else ""
    conv = f"conv2d(x, w, b, stride={stride}, padding={padding}, dilation={dilation})"
    return (
        f"model cv(x: f32[{n}, {c}, {hw}, {hw}]{extra}) {{\n"
        f"  param w: f32[{co}, {c}, {k}, {k}] = kaiming(seed=6)\n"
        f"  param b: f32[{co}] = normal(seed=7, std=0.1)\n"
        f"  return relu({conv}{' + r' if residual else ''})\n}}\n"
    )


def _kernel_text(source: str, sym: str) -> str:
    body = source[source.index(f"kernel_{sym}(") :]
    return body[: body.index("\n}\n")]


@pytest.mark.parametrize(
    "n, c, co, hw, k, stride, padding, dilation, residual",
    [
        (1, 3, 5, 9, 3, 1, 1, 1, False),  # 3x3 padded, 3 -> 5 channels
        (3, 4, 16, 11, 3, 2, 1, 1, True),  # strided, padded, a residual add
        (3, 3, 5, 8, 3, 1, 0, 1, False),  # no padding
        (1, 1, 6, 12, 5, 1, 2, 1, False),  # lenet's first: 5x5 padded by 2
        (2, 3, 33, 7, 3, 1, 2, 2, True),  # dilated; 33 rows: two tiles of 32
        (3, 2, 7, 13, 5, 2, 0, 1, False),  # 5x5, stride 2, no padding
    ],
)
def test_kxk_convs_tile_as_implicit_gemms(
    tmp_path, monkeypatch, n, c, co, hw, k, stride, padding, dilation, residual
):
    """KxK convs (padded or not, strided, dilated, odd channel counts, batch 1 to 3,
    bias and relu, a residual add) tile as implicit GEMMs (`DLPC_OPENCL_TILES=all`:
    whatever their size) and match the reference: M x N the output channels x the
    output pixels (either way round), K input channels x kernel rows x columns; two
    `__local` tiles, two barriers a step."""
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    model = _model(tmp_path, _conv(n, c, co, hw, k, stride, padding, dilation, residual))
    f = compile_opencl(_lower(model), name="t", profile="gpu")
    (launch,) = _tiled(f)
    tile = launch.tile
    out = (hw + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    assert tile.implicit and {tile.m, tile.n} == {co, n * out * out} and tile.k == c * k * k
    assert [lp.trip_count for lp in (tile.red, *tile.inner)] in ([c, k, k], [k, k, c])
    assert launch.local_size == tile.params.group
    body = _kernel_text(f.source, launch.name[len("kernel_") :])
    assert body.count("__local float") == 2 and body.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    guard = re.search(r"\n +if \(v_\w+\) \{\n", body)  # (the loop IR's own `scf.if`)
    assert (guard is not None) == bool(padding)
    _check(model, f)


@pytest.mark.parametrize("params", [*NARROW, *TILES, TileParams(4, 32, 8, 2, 4)])
def test_each_narrow_tile_matches_reference(tmp_path, monkeypatch, params):
    """Each of `NARROW_TILES` and `TILES` (a conv of 64 channels or more takes those)
    and a tile whose group is no multiple of TN (B's column split inside each step), on
    a padded 3x3 conv of 20 output channels, 162 pixels and K = 27 (none a multiple of a
    tile): the launch and the reference."""
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    monkeypatch.setattr(gpu_tile, "NARROW_TILES", {16: (params,), 32: (params,)})
    model = _model(tmp_path, _conv(2, 3, 20, 9, 3, padding=1))
    f = compile_opencl(_lower(model), name="t", profile="gpu")
    (launch,) = _tiled(f)
    assert launch.tile.params == params and (launch.tile.m, launch.tile.n) == (20, 162)
    gx, gy = params.group
    assert launch.global_size == (-(-162 // params.tn) * gx, -(-20 // params.tm) * gy)
    _check(model, f)


def test_resnet_convs_tile_by_the_rule_on_an_h200():
    """The rule on an H200 (132 units): resnet at batch 32 tiles its five 3x3 convs, the
    16-channel ones (16 x 32768) in 16 x 128 tiles of 2 x 4 blocks (256 groups), the
    32-channel ones (32 x 8192) in 32 x 32 tiles of 2 x 2 (32 x 64 would make 128 groups,
    fewer than the units); not its 1x1 shortcut (32 rows, a plain product). At batch 1
    (16384 and 8192 outputs, under 512 a unit) none; lenet at batch 32 (6 channels;
    16 x 3200 outputs) none."""
    model = dlpc.load(ROOT / "examples" / "resnet.dlpc", batch=32)
    emitter = OpenCLEmitter(_lower(model), gpu=H200)
    source = emitter.emit()
    tiled = {k.sym: launch for k, launch in emitter.launches.items() if launch.tile is not None}
    assert sorted(tiled) == [
        "conv2d_add_relu_2",
        "conv2d_add_relu_4",
        "conv2d_relu_0",
        "conv2d_relu_1",
        "conv2d_relu_3",
    ]
    for sym, launch in tiled.items():
        tile = launch.tile
        wide = tile.m == 16
        assert tile.implicit and (tile.m, tile.n) == ((16, 32768) if wide else (32, 8192))
        assert tile.k == {"conv2d_relu_0": 27, "conv2d_add_relu_4": 288}.get(sym, 144)
        params = TileParams(16, 128, 16, 2, 4) if wide else TileParams(32, 32, 16, 2, 2)
        assert tile.params == params
        assert launch.local_size == params.group == ((32, 8) if wide else (16, 16))
        assert launch.global_size == ((256 * 32, 8) if wide else (256 * 16, 16))
        body = _kernel_text(source, launch.name[len("kernel_") :])
        assert body.count("__local float") == 2 and body.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    body = _kernel_text(source, tiled["conv2d_relu_1"].name[len("kernel_") :])
    assert "__local float v_a_tile[272];" in body  # (16 k x (16 + 1): along k)
    assert "__local float v_b_tile[2048];" in body  # (16 k x 128 columns)
    assert "const int v_mm = (v_ty * 32 + v_tx) % 128;" in body  # (the column: once)
    assert "v_k < " not in body and "v_at < " not in body  # (K, N: whole tiles)
    for name, batch in (("resnet", 1), ("lenet", 32)):
        model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
        emitter = OpenCLEmitter(_lower(model), gpu=H200)
        emitter.emit()
        assert all(launch.tile is None for launch in emitter.launches.values())


@pytest.mark.parametrize(
    "co, units, tiled",
    [(16, 4, True), (15, 4, False), (16, 5, False), (32, 8, True), (32, 9, False)],
)
def test_conv_rule_edges(tmp_path, co, units, tiled):
    """A narrow conv tiles from 16 output channels and 512 outputs a unit on: 16 x 128
    (2048 outputs) on 4 units is, 15 channels or 5 units are not; 32 x 128 on 8 units
    is, on 9 not."""
    model = _model(tmp_path, _conv(2, 3, co, 8, 3, padding=1))
    emitter = OpenCLEmitter(_lower(model), gpu=GpuProfile(max_group=1024, units=units))
    emitter.emit()
    (launch,) = emitter.launches.values()
    assert (launch.tile is not None) == tiled


def test_convs_left_untiled(tmp_path, monkeypatch):
    """A depthwise conv (mobilenet's: its channel loop indexes both factors) is no
    product, even with `DLPC_OPENCL_TILES=all`; `0` leaves resnet's convs to
    `plan_gpu_launch` on an H200 at batch 32; an implicit GEMM whose side reaches
    `INDEX_LIMIT` (its split indices are ints) is not tiled."""
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    model = dlpc.load(ROOT / "examples" / "mobilenet.dlpc", batch=2)
    module = _lower(model)
    (depthwise,) = [
        k for k in module.walk() if isinstance(k, KernelOp) and k.sym.startswith("conv2d_clip_0")
    ]
    assert match_product(depthwise) is None
    emitter = OpenCLEmitter(module, gpu=H200)
    emitter.emit()
    assert emitter.launches[depthwise].tile is None
    monkeypatch.setenv("DLPC_OPENCL_TILES", "0")
    emitter = OpenCLEmitter(
        _lower(dlpc.load(ROOT / "examples" / "resnet.dlpc", batch=32)), gpu=H200
    )
    source = emitter.emit()
    assert all(launch.tile is None for launch in emitter.launches.values())
    assert "__local float v_a_tile" not in source
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    monkeypatch.setattr(gpu_tile, "INDEX_LIMIT", 288)
    model = _model(tmp_path, _conv(2, 32, 16, 8, 3, padding=1))  # (K = 288)
    emitter = OpenCLEmitter(_lower(model), gpu=H200)
    emitter.emit()
    (launch,) = emitter.launches.values()
    assert launch.tile is None
    monkeypatch.setattr(gpu_tile, "INDEX_LIMIT", 289)
    emitter = OpenCLEmitter(_lower(model), gpu=H200)
    emitter.emit()
    (launch,) = emitter.launches.values()
    assert launch.tile is not None


def _bmm(a: list[int], b: list[int], extra: str = "", **attrs: bool) -> str:
    """A batched matmul of inputs shaped `a` and `b` (`attrs`: transpose_a/_b), its
    output through `extra` (an epilogue the matmul's kernel fuses: ' * 0.25')."""
    opts = "".join(f", {key}=true" for key, on in attrs.items() if on)
    return (
        f"model bm(x: f32[{', '.join(map(str, a))}], y: f32[{', '.join(map(str, b))}]) {{\n"
        f"  return matmul(x, y{opts}){extra}\n}}\n"
    )


@pytest.mark.parametrize(
    "a, b, attrs, extra, batch, mnk",
    [
        ([1, 70, 33], [1, 33, 67], {}, "", [1], (70, 67, 33)),  # batch 1
        ([3, 70, 33], [3, 33, 67], {}, "", [3], (70, 67, 33)),  # batch 3
        ([3, 9, 20], [1, 20, 10], {}, "", [], (27, 10, 20)),  # B broadcast: rows 3 x 9
        ([1, 9, 20], [3, 20, 10], {}, "", [], (9, 30, 20)),  # A broadcast: columns 3 x 10
        ([2, 1, 9, 20], [1, 3, 20, 10], {}, "", [], (18, 30, 20)),  # both, rank 4
        ([2, 3, 17, 5], [2, 3, 19, 5], {"transpose_b": True}, " * 0.25", [2, 3], (17, 19, 5)),
        ([2, 3, 5, 17], [2, 3, 5, 19], {"transpose_a": True}, "", [2, 3], (17, 19, 5)),
        ([3, 66, 40], [3, 40, 65], {}, "", [3], (66, 65, 40)),  # two tiles a side
    ],
)
def test_batched_matmuls_of_odd_shapes_match_reference(
    tmp_path, monkeypatch, a, b, attrs, extra, batch, mnk
):
    """Batched matmuls under the GPU plan with every product tiled: batch 1 and 3, M, N,
    K no multiples of the tiles, transposed operands (B read along k, A along m), a
    fused epilogue (matmul_mul), against the reference. A batch of both operands is
    NDRange dimension 2 (`batch`, groups of one there; a batch of 1: a 2-d launch); a
    batch of one operand alone (broadcast) is the other's rows or columns, a plain
    product."""
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    model = _model(tmp_path, _bmm(a, b, extra, **attrs))
    f = compile_opencl(_lower(model), name="t", profile="gpu")
    (launch,) = _tiled(f)
    tile = launch.tile
    assert [lp.trip_count for lp in tile.batch] == batch
    assert (tile.m, tile.n, tile.k) == mnk and not tile.implicit
    gx, gy = tile.params.group
    sizes = (-(-tile.n // tile.params.tn) * gx, -(-tile.m // tile.params.tm) * gy)
    batches = int(np.prod(batch))
    if batches > 1:
        assert launch.global_size == (*sizes, batches) and launch.local_size == (gx, gy, 1)
    else:  # (no batch, or a batch of one: a 2-d launch)
        assert launch.global_size == sizes and launch.local_size == (gx, gy)
    body = _kernel_text(f.source, launch.name[len("kernel_") :])
    assert body.count("__local float") == 2 and body.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    assert ("get_group_id(2)" in body) == (batches > 1)
    if extra:
        assert launch.name.startswith("kernel_matmul_mul")
    _check(model, f)


@pytest.mark.parametrize("batch, heads", [(1, [4]), (4, [4, 4])])
def test_transformer_attention_tiles_when_forced(monkeypatch, batch, heads):
    """The transformer with every product tiled (`DLPC_OPENCL_TILES=all`) at batch 1
    and 4: attention's Q K^T (with its scale fused: matmul_mul) and P V are batched
    products over the heads (and the batch): 16 x 16, K 16, one group a head, each
    kernel two `__local` tiles; the outputs match the reference."""
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    model = dlpc.load(ROOT / "examples" / "transformer.dlpc", batch=batch)
    f = compile_opencl(_lower(model), name="transformer", profile="gpu")
    products = {
        k.sym: launch for k, launch in f.plan.launches.items() if k.sym.startswith("matmul")
    }
    assert len(products) == 2 and any(sym.startswith("matmul_mul") for sym in products)
    for launch in products.values():
        tile = launch.tile
        assert tile is not None and [lp.trip_count for lp in tile.batch] == heads
        assert (tile.m, tile.n, tile.k) == (16, 16, 16)
        assert launch.global_size[2] == 4 * batch and launch.local_size[2] == 1
        body = _kernel_text(f.source, launch.name[len("kernel_") :])
        assert body.count("__local float") == 2 and "get_group_id(2)" in body
    _check(model, f)


def test_batched_matmul_tiles_by_the_rule_on_an_h200(tmp_path):
    """The rule counts a batched product's outputs and groups over its batches: 40
    products of 128 x 128 on an H200 take 64 x 64 tiles (160 groups, over 132 units), 12
    take 32 x 32 (192 groups; 64 x 64 would make 48); 2 of 128 x 128 (32768 outputs,
    under 256 a unit) and 40 of 16 x 16 (a side under 64: transformer's attention) are
    not tiled."""
    for n, side, params in (
        (40, 128, TileParams()),
        (12, 128, TILES[-1]),
        (2, 128, None),
        (40, 16, None),
    ):
        model = _model(tmp_path, _bmm([n, side, 64], [n, 64, side]))
        emitter = OpenCLEmitter(_lower(model), gpu=H200)
        emitter.emit()
        (launch,) = emitter.launches.values()
        assert (launch.tile and launch.tile.params) == params
        if params is not None:
            tiles = -(-side // params.tm)
            assert launch.global_size == (tiles * 16, tiles * 16, n)


def test_batched_grouped_conv_is_refused(tmp_path, monkeypatch):
    """A loop of both factors in a conv's window (a grouped conv: its groups index the
    weight and the input) is no batched product the tile writes, even with
    `DLPC_OPENCL_TILES=all`: `plan_gpu_launch`'s plan, the reference's outputs."""
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    text = (
        "model gc(x: f32[2, 4, 8, 8]) {\n"
        "  param w: f32[6, 2, 3, 3] = kaiming(seed=8)\n"
        "  return conv2d(x, w, padding=1, groups=2)\n}\n"
    )
    model = _model(tmp_path, text)
    f = compile_opencl(_lower(model), name="t", profile="gpu")
    assert not _tiled(f)
    _check(model, f)


def _fits(params: TileParams, local: int) -> bool:
    return tile_local_bytes(params) <= local


def test_local_memory_bounds_the_rules_tile(tmp_path):
    """A 1024 x 1024 product on an H200 takes 64 x 64 tiles (8320 `__local` bytes at
    most: (64 + 64 + 2) x 16 floats) with the device's 48 KB or exactly 8320; with a byte
    fewer the 32 x 32 tile (4224 bytes), with fewer than that none (the plain plan). A
    batched product's rule too."""
    assert tile_local_bytes(TileParams()) == 8320 and tile_local_bytes(TILES[-1]) == 4224
    module = _lower(_model(tmp_path, _linear(1024, 1024, 8)))
    batched = _lower(_model(tmp_path, _bmm([40, 128, 64], [40, 64, 128])))
    for local, params in (
        (48 * 1024, TileParams()),
        (8320, TileParams()),
        (8319, TILES[-1]),
        (4224, TILES[-1]),
        (4223, None),
    ):
        profile = GpuProfile(max_group=1024, units=132, local_mem_size=local)
        for mod in (module, batched):
            emitter = OpenCLEmitter(mod, gpu=profile)
            source = emitter.emit()
            (launch,) = emitter.launches.values()
            assert (launch.tile and launch.tile.params) == params
            assert ("__local" in source) == (params is not None)


def test_local_memory_refuses_tuned_tiles_over_it(tmp_path, monkeypatch):
    """A named tile (a tuning record's) over the device's local memory is a one-line
    error (`GpuParams.check`); `plan_tiled` given one refuses it (None: the plain plan).
    A profile that names no local memory has OpenCL's 32 KB."""
    assert GpuProfile(1024, 132).local_mem_size == TILE_LOCAL_BYTES == 32 * 1024
    small = GpuProfile(max_group=1024, units=1, local_mem_size=8000)
    params = GpuParams(tile=str(TileParams()))
    with pytest.raises(
        DlpcError,
        match=r"^error: opencl: GPU plan params \(kernel 'linear_relu_0'\): tile "
        r"64x64x16/4x4: its __local tiles \(8320 bytes\) are over the device's local "
        r"memory \(8000 bytes\)$",
    ):
        params.check(small, "kernel 'linear_relu_0'")
    GpuParams(tile=str(TILES[-1])).check(small)
    module = _lower(_model(tmp_path, _linear(100, 100, 8)))
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert gpu_tile.plan_tiled(kernel, "k", small, params=TileParams(), force=True) is None
    launch = gpu_tile.plan_tiled(kernel, "k", small, params=TILES[-1], force=True)
    assert launch is not None and launch.tile.params == TILES[-1]


def test_runtime_reads_the_devices_local_memory(tmp_path, monkeypatch):
    """`GpuProfile.of_device` reads CL_DEVICE_LOCAL_MEM_SIZE (with the largest group and
    the units), and the runtime's GPU plan is sized by it: a device of 4 KB has no tile
    to give a product `DLPC_OPENCL_TILES=all` tiles on the real device."""
    from dlpc.backends.opencl import gpu_launch
    from dlpc.backends.runtime.opencl_rt import default_device

    device = default_device()
    profile = GpuProfile.of_device(device)
    assert profile == GpuProfile(
        device.max_work_group_size, device.max_compute_units, device.local_mem_size
    )
    monkeypatch.setenv("DLPC_OPENCL_TILES", "all")
    module = _lower(_model(tmp_path, _bmm([3, 70, 33], [3, 33, 67])))
    assert _tiled(compile_opencl(module, name="t", profile="gpu"))
    small = gpu_launch.GpuProfile(profile.max_group, profile.units, 4096)
    monkeypatch.setattr(gpu_launch.GpuProfile, "of_device", classmethod(lambda cls, d: small))
    assert not _tiled(compile_opencl(module, name="t", profile="gpu"))


def test_tuner_never_proposes_a_tile_over_the_local_memory(tmp_path):
    """The tuner's space holds a tile only where its `__local` tiles fit the device's
    local memory (all five in 48 KB; 5000 bytes: the 32 x 32 alone; 4000: none), and a
    product's candidates (`tasks_of`: the launches the points make) never hold one over
    it."""
    from dlpc.tune import gpu

    def tiles(profile: GpuProfile) -> list[TileParams]:
        found = [TileParams.parse(p.tile) for p in gpu.space(profile)]
        return [t for t in found if t is not None]

    assert tiles(GpuProfile(1024, 4, 48 * 1024)) == list(gpu.TILES)
    assert tiles(GpuProfile(1024, 4, 5000)) == [TileParams(32, 32, 16, 2, 2)]
    assert tiles(GpuProfile(1024, 4, 4000)) == []
    module = _lower(_model(tmp_path, _bmm([3, 70, 33], [3, 33, 67])))
    for local in (48 * 1024, 5000, 4000):
        profile = GpuProfile(1024, 4, local)
        (task,) = gpu.tasks_of(module, profile)
        named = [TileParams.parse(p.tile) for p in task.candidates]
        assert all(_fits(t, local) for t in named if t is not None)
        launches = [
            gpu._launches(module, profile, {k: p for k in task.kernels}) for p in task.candidates
        ]
        used = [launch.tile.params for ls in launches for launch in ls.values() if launch.tile]
        assert all(_fits(t, local) for t in used)
        assert any(used) == (local >= 4224)


def test_profile_field_keeps_tuning_records_readable(tmp_path):
    """The profile's local memory is a device fact, no plan param: the records' default
    digest (what a log was tuned against) is the one logs written before it carry, and
    such a record (a tile named) replays as it did."""
    from dlpc.backends.opencl.gpu_launch import DEFAULT_DIGEST, TUNING_TARGET, logged_params
    from dlpc.passes.schedule.tuning_log import Record, kernel_signature

    assert DEFAULT_DIGEST == "6244c6450462d62a"
    module = _lower(_model(tmp_path, _linear(100, 100, 8)))
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    record = Record(
        kernel_signature(kernel),
        kernel.sym,
        TUNING_TARGET,
        "",
        1e-5,
        True,
        params={"tile": "32x32x16/2x2"},
        template="gpu-plan",
        default=DEFAULT_DIGEST,
        machine="dev",
    )
    log = tmp_path / "gpu.jsonl"
    log.write_text(record.to_json() + "\n")
    assert logged_params(str(log), module, "dev") == {kernel.sym: GpuParams(tile="32x32x16/2x2")}
