"""The tuner's log, cost model and the dlpc-tune tool (search: test_tuner_search.py,
measurement: test_tuner_measure.py, spaces: test_tuner_space.py). Budgets are tiny:
this checks the machinery, not speed."""

from __future__ import annotations

import json

import pytest
from test_schedule import MATMUL

from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import kernels
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule.tuning_log import TuningLog, kernel_signature, rename_script
from dlpc.tune.model import RidgeCostModel


def test_cost_model_learns_a_trend():
    model = RidgeCostModel(alpha=0.1)
    for x in range(1, 9):
        model.update([float(x), 1.0], 1e-3 * x)
    assert model.trained
    assert model.predict([2.0, 1.0]) < model.predict([7.0, 1.0])


def test_signature_ignores_kernel_name_and_rename_retargets():
    a = parse_module(MATMUL)
    b = parse_module(MATMUL.replace('"mm"', '"other_3"'))
    assert kernel_signature(next(kernels(a))) == kernel_signature(next(kernels(b)))
    assert (
        rename_script("split mm/i1 by 4\nreorder mm: a, b", "mm", "k")
        == "split k/i1 by 4\nreorder k: a, b"
    )


def test_dlpc_tune_tool_logs_and_plots(tmp_path, capsys):
    from dlpc.tools import dlpc_tune

    model = tmp_path / "mm.dlpc"
    model.write_text("model mm(a: f32[16, 32], b: f32[32, 64]) {\n  return matmul(a, b)\n}\n")
    log, png = tmp_path / "tune.jsonl", tmp_path / "best.png"
    code = dlpc_tune.main(
        [str(model), "--trials", "2", "--log", str(log), "--plot", str(png), "--quiet"]
    )
    assert code == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len({r["script"] for r in records}) == 2  # two trials ...
    assert len(records) > 2  # ... then the best ones re-measured (--verify 2)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "matmul_0" in capsys.readouterr().out


def test_dlpc_tune_reports_a_missing_model(tmp_path, capsys):
    from dlpc.tools import dlpc_tune

    assert dlpc_tune.main([str(tmp_path / "nope.dlpc"), "--trials", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("dlpc-tune: ") and "Traceback" not in err


def test_best_ranks_scripts_by_median(tmp_path):
    from dlpc.passes.schedule.tuning_log import Record

    log = TuningLog(str(tmp_path / "t.jsonl"))
    for script, t in [("a", 1.0), ("b", 0.5), ("b", 3.0), ("b", 2.0), ("a", 1.2)]:
        log.append(Record("s", "k", "c", script, t, True))
    best = TuningLog(str(tmp_path / "t.jsonl")).best("s", "c")
    assert best.script == "a" and best.time == 1.1  # b's lucky 0.5 does not win


def _log_line(**fields) -> str:
    record = {"sig": "s", "kernel": "k", "target": "c", "script": "a", "time": 1.0, "ok": True}
    return json.dumps({**record, **fields}) + "\n"


@pytest.mark.parametrize("time", [None, 0, -1.0, "fast", True])
def test_log_refuses_an_ok_record_without_a_positive_time(tmp_path, time):
    # found by pyright (Record.time is float | None): the tuner resuming from a log took
    # log(time) of every ok record, a traceback for a hand-edited or damaged line
    path = tmp_path / "t.jsonl"
    path.write_text(_log_line() + _log_line(time=time))
    with pytest.raises(DlpcError, match=r"t\.jsonl line 2: not a tuning record"):
        TuningLog(str(path))


def test_log_refuses_fields_of_the_wrong_type(tmp_path):
    path = tmp_path / "t.jsonl"
    for bad in ({"params": [1]}, {"ok": "yes"}, {"script": 3}, {"flops": 1.5}):
        path.write_text(_log_line(**bad))
        with pytest.raises(DlpcError, match="line 1: not a tuning record"):
            TuningLog(str(path))
    path.write_text("[1, 2]\n")
    with pytest.raises(DlpcError, match="line 1: not a tuning record"):
        TuningLog(str(path))


def test_log_keeps_failed_records_without_a_time(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(_log_line(time=None, ok=False, error="boom") + _log_line(time=2))
    records = TuningLog(str(path)).records
    assert [(r.ok, r.time, r.error) for r in records] == [(False, None, "boom"), (True, 2, None)]


def test_tuner_resumes_from_a_log_with_a_damaged_time(tmp_path):
    from dlpc.tune.search import Tuner

    module = parse_module(MATMUL)
    sig = kernel_signature(next(kernels(module)))
    default = Tuner(module, log=None).tasks[0].space.default()
    path = tmp_path / "t.jsonl"
    path.write_text(_log_line(sig=sig, kernel="mm", time=None, params=default))
    with pytest.raises(DlpcError, match="line 1: not a tuning record"):
        list(Tuner(parse_module(MATMUL), log=str(path), strategy="random", seed=1).run(1))


# dlpc-tune lowers as dlpc.compile does for the C target (weights folded, graph-winograd)

WCONV = """model wconv(x: f32[B, 32, 8, 8]) {
  param k: f32[32, 32, 3, 3] = kaiming(seed=5)
  param b: f32[32] = normal(seed=6, std=0.1)
  return relu(conv2d(x, k, b, padding=1))
}
"""


def _lowered_like_tune(path, batch):
    import dlpc
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.tools.dlpc_tune import bound_weights

    model = dlpc.load(str(path), batch=batch)
    module = model.module.clone()
    lower(
        module,
        "loop",
        PipelineOptions(opt_level=2, schedule=True),
        weights=bound_weights(model),
        unscheduled=True,
    )
    return model, module


def test_dlpc_tune_tunes_the_kernels_a_compile_runs(tmp_path, capsys):
    """A 32 -> 32 conv graph-winograd takes (fused): dlpc-tune sees the Winograd chain a
    compile runs, not a direct conv, and tasks none of the kernels computed inside the
    output transform; `--batch` binds the batch dim."""
    from dlpc.tools import dlpc_tune
    from dlpc.tune.search import tasks_of

    path = tmp_path / "wconv.dlpc"
    path.write_text(WCONV)
    _, module = _lowered_like_tune(path, 2)
    names = [k.sym for k in kernels(module)]
    assert any(n.startswith("winograd_output_transform") for n in names)
    assert not any(n.startswith("conv2d") for n in names)  # rewritten, as compile does
    assert any(n.startswith("matmul") for n in names)  # computed inside the output transform
    assert not any(t.kernel.startswith(("matmul", "winograd")) for t in tasks_of(module))
    log = tmp_path / "tune.jsonl"
    code = dlpc_tune.main([str(path), "--batch", "2", "--trials", "1", "--log", str(log)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "no tunable kernels" in err  # the fused chain is the only kernel: not tunable
    assert "conv2d" not in out


def test_dlpc_tune_rejects_a_bad_batch_and_a_missing_weights_file(tmp_path, capsys):
    from dlpc.tools import dlpc_tune

    path = tmp_path / "wconv.dlpc"
    path.write_text(WCONV)
    assert dlpc_tune.main([str(path), "--batch", "0", "--log", str(tmp_path / "t.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "--batch must be >= 1" in err and "Traceback" not in err
    missing = str(tmp_path / "none.npz")
    assert dlpc_tune.main([str(path), "--weights", missing]) == 1
    err = capsys.readouterr().err
    assert f"no such weights file: {missing}" in err and len(err.strip().splitlines()) == 1


def test_a_record_for_a_fused_matmul_does_not_break_the_fusion(tmp_path):
    """A log record whose signature is the Winograd chain's matmul (tuned standalone, as
    an older dlpc-tune or another model's matmul would log it) is not applied to the
    matmul the output transform computes: the compile stays fused and correct."""
    import numpy as np

    import dlpc
    from dlpc import api
    from dlpc.passes.schedule.default import default_scripts
    from dlpc.passes.schedule.tuning_log import Record, schedule_digest

    path = tmp_path / "wconv.dlpc"
    path.write_text(WCONV)
    model, module = _lowered_like_tune(path, 2)
    (mm,) = [k for k in kernels(module) if k.sym.startswith("matmul")]
    standalone = default_scripts(module, mm.sym, winograd_fuse=False)
    assert standalone  # the gemm template of the same kernel on its own
    log = TuningLog(tmp_path / "tune.jsonl")
    log.append(
        Record(
            sig=kernel_signature(mm),
            kernel=mm.sym,
            target="c",
            script=standalone[0],
            time=1e-6,
            ok=True,
            default=schedule_digest(default_scripts(module, mm.sym), mm.sym),
        )
    )
    compiled = dlpc.compile(model, target="c", tuning_log=str(tmp_path / "tune.jsonl"))
    lowered = str(compiled.lowered)
    assert 'loop.kernel "matmul' not in lowered  # still inside the output transform
    assert '{name = "winograd_input_transform_' in lowered
    xs = api.random_inputs(model)
    np.testing.assert_allclose(compiled(*xs)[0], api.reference(model, xs)[0], rtol=1e-4, atol=1e-4)
