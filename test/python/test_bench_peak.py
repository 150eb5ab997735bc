"""bench/peak.py's FLOP count (issue 31): 2 x the multiply-adds of every conv2d, linear
and matmul, exact for the examples (hand counts below, from their shapes), and for the
graph dlpc runs at -O2 (resnet's stride-1 3x3 convs become Winograd's 16 batched
matmuls); bench/models.py's bound columns. No test here asserts on a time: the peak
loop is only built and run once, for the shape of its output."""

import importlib.util
from pathlib import Path

import pytest

from dlpc import api

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peak = _load("peak")

# multiply-adds per sample, layer by layer (out elements x C/groups x KH x KW for a
# conv, out x in for a linear, out x K for a matmul)
MACS = {
    # conv1 6x28x28 x 1x5x5, conv2 16x10x10 x 6x5x5, fc 400->120->84->10
    "lenet": 6 * 28 * 28 * 25 + 16 * 10 * 10 * 6 * 25 + 120 * 400 + 84 * 120 + 10 * 84,
    # 784 -> 256 -> 256 -> 10
    "mlp": 256 * 784 + 256 * 256 + 10 * 256,
    # depthwise 32x32x32 x 1x3x3, pointwise 64x32x32 x 32
    "mobilenet": 32 * 32 * 32 * 9 + 64 * 32 * 32 * 32,
    # stem 16x32x32 x 3x3x3; block 1: two 16x32x32 x 16x3x3; block 2: 32x16x16 x 16x3x3,
    # 32x16x16 x 32x3x3, the 1x1 shortcut 32x16x16 x 16; fc 32 -> 10
    "resnet": 16 * 1024 * 27
    + 2 * 16 * 1024 * 144
    + 32 * 256 * 144
    + 32 * 256 * 288
    + 32 * 256 * 16
    + 320,
    # 16 tokens: q, k, v, o projections 64 -> 64, 4 heads of 16x16 scores (K 16) and
    # 16x16 values (K 16), feed-forward 64 -> 128 -> 64
    "transformer": 4 * 16 * 64 * 64 + 2 * 4 * 16 * 16 * 16 + 2 * 16 * 128 * 64,
}
# resnet at -O2: the stem (3 channels) and the stride-2 convs stay direct; b1.conv1,
# b1.conv2 (256 2x2 tiles) and b2.conv2 (64 tiles) become 16 matmuls of tiles x C x O
RESNET_O2 = (
    MACS["resnet"] - (2 * 16 * 1024 * 144 + 32 * 256 * 288) + 16 * (2 * 256 * 256 + 64 * 1024)
)


@pytest.mark.parametrize("name", sorted(MACS))
@pytest.mark.parametrize("batch", [1, 3])
def test_example_flops_are_exact(name, batch):
    model = api.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
    assert peak.graph_flops(model.module) == 2 * batch * MACS[name]


def test_the_o2_graph_counts_what_runs():
    """Where -O2 keeps the convs and linears (mlp), both counts agree; resnet's Winograd
    convs multiply 2.25x less."""
    mlp = api.load(ROOT / "examples" / "mlp.dlpc", batch=2)
    assert peak.program_flops(mlp) == (2 * 2 * MACS["mlp"],) * 2
    resnet = api.load(ROOT / "examples" / "resnet.dlpc", batch=1)
    assert peak.program_flops(resnet) == (2 * MACS["resnet"], 2 * RESNET_O2)


def test_matmul_operand_forms(tmp_path):
    """K is the lhs's last dim, its second last under transpose_a, its only dim when 1-D."""
    path = tmp_path / "mm.dlpc"
    path.write_text(
        "model mm(a: f32[2, 5, 3], b: f32[5, 4], v: f32[5]) {\n"
        "  let t = matmul(a, b, transpose_a=true)\n"
        "  let u = matmul(v, b)\n"
        "  return t, u\n"
        "}\n"
    )
    assert peak.graph_flops(api.load(path).module) == 2 * (2 * 3 * 4 * 5 + 4 * 5)


def test_symbolic_batch_has_no_count():
    assert peak.graph_flops(api.load(ROOT / "examples" / "mlp.dlpc").module) is None


def test_bound_columns():
    """bench/models.py's row tail: MFLOP (model/dlpc), the bound at the peak (ms) and each
    runner's share of the peak with its own FLOPs."""
    models = _load("models")
    # made-up inputs: 2 MFLOP in the model, 1 in dlpc's graph, a 100 GFLOP/s peak, dlpc
    # at 0.02 ms and onnxruntime at 0.04 ms give a 0.01 ms bound and 50 % each
    assert models.peak_columns((2_000_000, 1_000_000), 100.0, "0.020", "0.040") == [
        "2.00/1.00",
        "0.010",
        "50",
        "50",
    ]
    assert models.peak_columns((3_000_000,) * 2, 150.0, "wrong", "0.040") == [
        "3.00",
        "0.020",
        "-",
        "50",
    ]
    assert models.peak_columns((None, None), 100.0, "0.02", "0.04") == ["-"] * 4
    assert models.peak_columns((3_000_000,) * 2, None, "0.02", "0.04") == ["3.00", "-", "-", "-"]


def test_peak_prints_each_team(capsys):
    assert peak.main(["--threads", "1", "--seconds", "0.002", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 thread(s): wall " in out and "on core" in out


@pytest.mark.parametrize("threads", ["0", "two", ""])
def test_bad_thread_list_is_one_line(threads, capsys):
    with pytest.raises(SystemExit) as e:
        peak.main(["--threads", threads])
    assert e.value.code == 2
    assert "--threads expects positive integers" in capsys.readouterr().err
