"""Tuning the GPU launch plans (issue 33; `gpu_launch.GpuParams`, `tune/gpu.py`,
`dlpc-tune --target opencl`), on the CPU OpenCL platform: the params change the launch
as asked, a search logs records keyed by the device's name, their replay changes the
launch and keeps the reference's numbers, another device's records are ignored, bad
params and bad options are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.opencl import OpenCLEmitter  # noqa: E402
from dlpc.backends.opencl.gpu_launch import (  # noqa: E402
    DEFAULT_PARAMS,
    GpuParams,
    GpuProfile,
    group_shape,
)
from dlpc.backends.runtime.opencl_rt import default_device, device_key  # noqa: E402
from dlpc.passes import pipeline  # noqa: E402
from dlpc.tools import dlpc_tune  # noqa: E402
from dlpc.tune import gpu  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "examples" / "mlp.dlpc"
H200 = GpuProfile(max_group=1024, units=132, local_mem_size=48 * 1024)


@pytest.fixture(scope="module")
def mlp4():
    model = dlpc.load(MLP, batch=4)
    return model, pipeline.lower(
        model.module.clone(), "loop", pipeline.PipelineOptions(target="opencl")
    )


def _launches(module, profile, params) -> dict:
    emitter = OpenCLEmitter(module, gpu=profile, gpu_params=params)
    emitter.emit()
    return {k.sym: launch for k, launch in emitter.launches.items()}


def test_defaults_are_the_constants(mlp4):
    """No params and the default params plan alike (today's constants)."""
    _, module = mlp4
    plain = _launches(module, H200, {})
    given = _launches(module, H200, {name: DEFAULT_PARAMS for name in plain})
    assert [gpu.launch_key(a) for a in plain.values()] == [
        gpu.launch_key(b) for b in given.values()
    ]


def test_params_change_the_launch(mlp4):
    """On the H200's figures: mlp's linears at batch 4 split each sum over 64 work-items
    by default; split_items 128 makes groups of 128, 0 no split (a work-item per output,
    the batch in lanes: row_lanes 4, or 2, or none); group_items sizes the groups."""
    _, module = mlp4
    name = "linear_relu_0"
    default = _launches(module, H200, {})[name]
    assert default.split is not None and default.local_size == (64, 1)
    assert default.global_size == (256 * 64, 4)  # (256 features, the batch's 4 rows)
    wide = _launches(module, H200, {name: GpuParams(split_items=128)})[name]
    assert wide.split is not None and wide.local_size == (128, 1)
    assert wide.global_size == (256 * 128, 4)
    for lanes, rows in ((4, 1), (2, 2), (1, 4)):
        p = GpuParams(group_items=64, row_lanes=lanes, split_items=0)
        launch = _launches(module, H200, {name: p})[name]
        assert launch.split is None
        assert launch.global_size == (256, rows) and np.prod(launch.local_size) <= 64
        assert sorted(launch.lanes.values()) == ([lanes] if lanes > 1 else [])
    other = _launches(module, H200, {name: GpuParams(split_items=128)})
    assert other["linear_relu_1"].local_size == default.local_size  # (by name: this one)


def test_group_shape_follows_the_params():
    assert group_shape((1 << 20,), H200, GpuParams(group_items=1024)) == (1024,)
    assert group_shape((65536,), H200, GpuParams(group_items=1024)) == (256,)  # (132 units)
    assert group_shape((4096,), H200, GpuParams(group_items=1024, min_group_items=32)) == (32,)
    assert group_shape((4096,), H200) == (64,)


@pytest.mark.parametrize(
    "params, message",
    [
        (GpuParams(group_items=96), "group_items must be a power of two, got 96"),
        (GpuParams(group_items=2048), "group_items 2048 is over the device's largest"),
        (GpuParams(split_items=48), "split_items must be a power of two, got 48"),
        (GpuParams(row_lanes=0), "row_lanes must be an integer from 1 to 16, got 0"),
        (GpuParams(min_group_items=512), "min_group_items 512 is over group_items 256"),
    ],
)
def test_bad_params_are_one_line(mlp4, params, message):
    _, module = mlp4
    with pytest.raises(DlpcError) as e:
        _launches(module, H200, {"linear_relu_0": params})
    assert message in str(e.value) and "\n" not in str(e.value)
    assert "kernel 'linear_relu_0'" in str(e.value)


def test_bad_record_params_are_one_line():
    with pytest.raises(DlpcError, match=r"unknown key 'tiles'"):
        GpuParams.from_dict({"tiles": 4})
    with pytest.raises(DlpcError, match=r"tile must be text, got 4"):
        GpuParams.from_dict({"tile": 4})
    with pytest.raises(DlpcError, match=r"row_lanes must be an integer, got '4'"):
        GpuParams.from_dict({"row_lanes": "4"})


def _mlp(batch: int):
    model = dlpc.load(MLP, batch=batch)
    return model, pipeline.lower(
        model.module.clone(), "loop", pipeline.PipelineOptions(target="opencl")
    )


def test_a_named_tile_is_taken_whatever_the_rule():
    """`tile`: mlp at batch 4 (4 rows: the rule never tiles it) tiled with the named
    tile; "off" leaves a product the rule tiles (mlp at batch 64 on one unit) to the
    split sums / row lanes; the text form round-trips through a record."""
    _, module = _mlp(4)
    tiled = GpuParams(tile="32x32x16/2x2")
    got = _launches(module, H200, {"linear_relu_0": tiled})
    assert got["linear_relu_0"].tile is not None and got["linear_relu_1"].tile is None
    assert str(got["linear_relu_0"].tile.params) == "32x32x16/2x2"
    assert got["linear_relu_0"].local_size == (16, 16)
    assert GpuParams.from_dict(tiled.to_dict()) == tiled
    assert str(tiled).endswith(" tile=32x32x16/2x2") and "tile" not in str(DEFAULT_PARAMS)
    _, big = _mlp(64)
    one = GpuProfile(max_group=1024, units=1)
    assert _launches(big, one, {})["linear_relu_0"].tile is not None  # (the rule's)
    off = _launches(big, one, {"linear_relu_0": GpuParams(tile="off")})["linear_relu_0"]
    assert off.tile is None and off.global_size != (0,)


def test_a_named_tile_matches_the_reference():
    """A forced tile through the runtime (as a tuning record gives it) on this device."""
    from dlpc.backends.runtime.opencl_rt import OpenCLFunction

    model = dlpc.load(MLP, batch=3)
    subject = dlpc_tune.gpu_subject(model)
    params = {"linear_relu_0": GpuParams(tile="32x64x16/2x4"), "linear_4": GpuParams(tile="off")}
    f = OpenCLFunction(subject.lowered, name="mlp", profile="gpu", gpu_params=params)
    f.bind_params(subject.weights)
    assert [launch.tile is not None for launch in f.plan.launches.values()] == [True, False, False]
    (out,) = f(*subject.inputs)
    assert gpu.close(out, subject.expected[0])


@pytest.mark.parametrize(
    "tile, message",
    [
        ("banana", "tile must be '', 'off' or TMxTNxTK/RMxRN, got 'banana'"),
        ("64x64x16/3x4", "tile 64x64x16/3x4: positive sizes, RM dividing TM and RN dividing TN"),
        ("64x64x16/0x4", "tile 64x64x16/0x4: positive sizes"),
        ("128x128x16/1x1", "tile 128x128x16/1x1: 16384 work-items, over the device's largest"),
        (
            "64x64x128/4x4",
            "tile 64x64x128/4x4: its __local tiles (66560 bytes) are over the device's local "
            "memory (49152 bytes)",
        ),
    ],
)
def test_bad_tiles_are_one_line(mlp4, tile, message):
    _, module = mlp4
    with pytest.raises(DlpcError) as e:
        _launches(module, H200, {"linear_relu_0": GpuParams(tile=tile)})
    assert message in str(e.value) and "\n" not in str(e.value)


def test_tiles_are_searched_for_products():
    """The space has the tiles of `gpu.TILES` (those fitting the device) and every point
    untiled; a product's candidates include tiled launches, another kernel's none."""
    points = gpu.space(H200)
    tiles = {p.tile for p in points}
    assert tiles == {"", "off", *(str(t) for t in gpu.TILES)}
    small = gpu.space(GpuProfile(max_group=128, units=4))
    assert "64x64x16/4x4" not in {p.tile for p in small}  # (256 work-items)
    _, module = _mlp(4)
    tasks = {t.kernels[0]: t for t in gpu.tasks_of(module, H200)}
    first = tasks["linear_relu_0"]
    assert {p.tile for p in first.candidates} >= {str(t) for t in gpu.TILES}


def test_space_is_capped_by_the_device():
    points = gpu.space(GpuProfile(max_group=128, units=4))
    assert points[0] == DEFAULT_PARAMS
    assert max(p.group_items for p in points[1:]) == 128
    assert all(p.split_items <= 128 for p in points)
    assert len(set(points)) == len(points)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A short search of mlp at batch 4 on this device: (log path, its records)."""
    log = tmp_path_factory.mktemp("tune") / "gpu.jsonl"
    rc = dlpc_tune.main(
        [str(MLP), "--target", "opencl", "--batch", "4", "--trials", "3", "--verify", "1"]
        + ["--log", str(log), "--quiet", "--strategy", "grid"]
    )
    assert rc == 0
    return log, [json.loads(line) for line in log.read_text().splitlines()]


def test_search_logs_records_keyed_by_the_device(tuned):
    _, records = tuned
    here = device_key(default_device())
    assert records and all(r["machine"] == here for r in records)
    assert all(r["target"] == "opencl-gpu" and r["template"] == "gpu-plan" for r in records)
    assert {r["kernel"] for r in records} == {"linear_relu_0", "linear_relu_1", "linear_4"}
    for r in records:  # every record's params are a valid point, its script their text
        p = GpuParams.from_dict(r["params"])
        assert r["script"] == str(p) and r["ok"] and r["time"] > 0
    first = [r for r in records if r["kernel"] == "linear_4"][0]
    assert first["params"] == DEFAULT_PARAMS.to_dict()  # (the defaults are measured first)
    tried = {json.dumps(r["params"], sort_keys=True) for r in records if r["kernel"] == "linear_4"}
    assert len(tried) >= 3  # (3 trials: 3 distinct candidates)


def _best_is_not_default(log: Path) -> Path:
    """The log with one more record making a non-default plan the best of linear_4."""
    records = [json.loads(line) for line in log.read_text().splitlines()]
    rec = dict([r for r in records if r["kernel"] == "linear_4"][0])
    rec.update(params=GpuParams(32, 32, 2, 0).to_dict(), time=1e-9)
    rec["script"] = str(GpuParams(32, 32, 2, 0))
    out = log.with_name("best.jsonl")
    out.write_text(log.read_text() + json.dumps(rec) + "\n")
    return out


def test_replay_applies_the_records_and_keeps_the_numbers(tuned):
    log, _ = tuned
    log = _best_is_not_default(log)
    model = dlpc.load(MLP, batch=4)
    plain = dlpc.compile(model, target="opencl", profile="gpu")
    replayed = dlpc.compile(model, target="opencl", profile="gpu", tuning_log=str(log))

    def launch(compiled, name):
        return next(v for k, v in compiled.artifact.plan.launches.items() if k.sym == name)

    assert launch(plain, "linear_4").split is not None
    tuned_launch = launch(replayed, "linear_4")
    assert tuned_launch.split is None and tuned_launch.local_size[0] <= 32
    assert list(tuned_launch.lanes.values()) == [2]
    inputs = dlpc.api.random_inputs(model, seed=5)
    for out, ref in zip(replayed(*inputs), dlpc.api.reference(model, inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_records_of_another_device_are_ignored(tuned, capsys):
    log, _ = tuned
    log = _best_is_not_default(log)
    other = log.with_name("other.jsonl")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    other.write_text("".join(json.dumps({**r, "machine": "NVIDIA H200"}) + "\n" for r in lines))
    model = dlpc.load(MLP, batch=4)
    compiled = dlpc.compile(model, target="opencl", profile="gpu", tuning_log=str(other))
    launch = next(v for k, v in compiled.artifact.plan.launches.items() if k.sym == "linear_4")
    assert launch.split is not None  # (the default plan)
    err = capsys.readouterr().err
    assert "3 kernel(s)" in err and "only for other devices" in err


def test_a_log_needs_the_gpu_plans(tuned):
    log, _ = tuned
    model = dlpc.load(MLP, batch=4)
    with pytest.raises(DlpcError, match=r"^error: a tuning log applies to target 'c' and to"):
        dlpc.compile(model, target="opencl", profile="cpu", tuning_log=str(log))


def test_tune_refuses_bad_options(capsys, tmp_path):
    log = str(tmp_path / "t.jsonl")
    assert dlpc_tune.main([str(MLP), "--target", "cuda", "--log", log]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("dlpc-tune: error: argument --target: invalid choice: 'cuda'")
    assert len(err.splitlines()) == 1
    assert dlpc_tune.main([str(MLP), "--target", "opencl", "--plot", "p.png", "--log", log]) != 0
    err = capsys.readouterr().err.strip()
    assert err == "dlpc-tune: error: --plot applies to --target c, not opencl"
    assert not Path(log).exists()


def test_a_wrong_candidate_is_rejected(tmp_path):
    """A candidate whose program differs from the reference is logged failed (found by
    measuring the trial's candidates one kernel at a time), never the best; the others of
    its trial keep their times."""

    class Wrong(gpu.GpuTuner):
        def measure(self, params):
            if params.get("linear_4", DEFAULT_PARAMS).split_items == 0:
                return "wrong result: differs from the numpy reference", {}
            return super().measure(params)

    model = dlpc.load(MLP, batch=4)
    tuner = Wrong(
        dlpc_tune.gpu_subject(model),
        log=str(tmp_path / "w.jsonl"),
        strategy="grid",
        repeat=2,
        verify=1,
    )
    events = list(tuner.run(trials=3))
    wrong = [e for e in events if not e.ok]
    assert wrong and {e.kernel for e in wrong} == {"linear_4"}
    assert all(e.params.split_items == 0 for e in wrong)
    others = [e for e in events if e.trial > 0 and e.kernel != "linear_4"]
    assert others and all(e.ok for e in others)
    task = next(t for t in tuner.tasks if "linear_4" in t.kernels)
    best = tuner.best(task)
    assert best is not None and best.split_items != 0
    logged = [json.loads(line) for line in (tmp_path / "w.jsonl").read_text().splitlines()]
    assert any(not r["ok"] and r["error"].startswith("wrong result") for r in logged)


def test_a_resumed_search_measures_only_new_candidates(tuned, tmp_path):
    log, records = tuned
    copy = tmp_path / "resume.jsonl"
    copy.write_text(log.read_text())
    model = dlpc.load(MLP, batch=4)
    tuner = gpu.GpuTuner(
        dlpc_tune.gpu_subject(model), log=str(copy), strategy="grid", repeat=2, verify=0
    )
    events = list(tuner.run(trials=1))
    before = {(r["kernel"], r["script"]) for r in records}
    assert events and all((e.kernel, str(e.params)) not in before for e in events)


def test_compare_prints_default_and_tuned(tuned):
    log, _ = tuned
    table = gpu.compare(dlpc_tune.gpu_subject(dlpc.load(MLP, batch=4), seed=1), str(log), 1)
    lines = table.splitlines()
    assert lines[0].startswith(f"mlp on {device_key(default_device())} (ms, median of 1)")
    assert [ln.split()[0] for ln in lines[2:5]] == ["linear_relu_0", "linear_relu_1", "linear_4"]
    assert lines[-1] == "vs reference: default ok, tuned ok"


def test_dlpc_tune_compare(tuned, capsys, tmp_path):
    """`dlpc-tune --target opencl --compare`: the same table from the tool, no search (the
    log unchanged); --compare needs --target opencl and an existing log; --repeat >= 1."""
    log, records = tuned
    before = log.read_text()
    argv = [str(MLP), "--batch", "4", "--log", str(log), "--compare"]
    assert dlpc_tune.main([*argv, "--target", "opencl", "--repeat", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("mlp on ") and out[-1] == "vs reference: default ok, tuned ok"
    assert log.read_text() == before
    assert dlpc_tune.main(argv) != 0
    assert capsys.readouterr().err.strip() == (
        "dlpc-tune: error: --compare applies to --target opencl, not c"
    )
    missing = str(tmp_path / "none.jsonl")
    assert dlpc_tune.main([str(MLP), "--target", "opencl", "--compare", "--log", missing]) != 0
    assert capsys.readouterr().err.strip() == (
        f"dlpc-tune: error: --compare reads --log: no file {missing}"
    )
    assert dlpc_tune.main([*argv, "--target", "opencl", "--repeat", "0"]) != 0
    assert capsys.readouterr().err.strip() == "dlpc-tune: error: --repeat must be >= 1, got 0"


def test_a_log_needs_a_static_model(tuned):
    log, _ = tuned
    model = dlpc.load(MLP, batch=4)
    with pytest.raises(DlpcError, match=r"^error: a tuning log for target 'opencl' applies to"):
        dlpc.compile(
            model, target="opencl", profile="gpu", tuning_log=str(log), max_dims={"batch": 4}
        )


def test_folded_weights_are_the_subjects(tmp_path):
    """A model whose batch norms fold into its convs (mobilenet: `folded.N` params that
    only the compile makes) is measured with them: no candidate fails for a missing
    parameter (every one did, before the subject took the compiled model's params)."""
    model = dlpc.load(ROOT / "examples" / "mobilenet.dlpc", batch=1)
    subject = dlpc_tune.gpu_subject(model)
    assert any(name.startswith("folded.") for name in subject.weights)
    tuner = gpu.GpuTuner(subject, log=str(tmp_path / "m.jsonl"), strategy="grid", repeat=1)
    events = list(tuner.run(trials=1))
    assert events and all(e.ok for e in events), [e.error for e in events if not e.ok]
