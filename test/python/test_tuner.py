"""The tuner finds, logs and reuses a schedule; a crashing candidate is recorded as
failed and tuning continues. Budgets are tiny: this checks the machinery, not speed."""

from __future__ import annotations

import json

import numpy as np

from dlpc.dialects.loop import kernels
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule.default import apply_tuned_or_default
from dlpc.passes.schedule.tuner import measure as measure_mod
from dlpc.passes.schedule.tuner.log import TuningLog, kernel_signature, rename_script
from dlpc.passes.schedule.tuner.model import RidgeCostModel
from dlpc.passes.schedule.tuner.search import Tuner
from test_schedule import MATMUL, run_c


def test_tuner_finds_logs_and_reuses(tmp_path):
    log = tmp_path / "tune.jsonl"
    module = parse_module(MATMUL)
    tuner = Tuner(module, log=str(log), strategy="random", seed=1, repeat=2)
    assert [t.space.template for t in tuner.tasks] == ["gemm"]
    events = list(tuner.run(trials=3))
    assert len(events) == 3 and any(e.ok for e in events)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 3
    assert {"sig", "kernel", "target", "script", "time", "ok", "dlpc"} <= set(records[0])
    sig = kernel_signature(next(kernels(module)))
    best = TuningLog(str(log)).best(sig, "c")
    assert best is not None and best.time == min(r["time"] for r in records if r["ok"])

    # compile reuses it: the kernel gets the logged script and computes the same thing
    fresh = parse_module(MATMUL)
    how = apply_tuned_or_default(fresh, str(log))
    assert how == {"mm": "tuned"}
    np.testing.assert_allclose(run_c(fresh)[-1], run_c(parse_module(MATMUL))[-1], rtol=1e-5, atol=1e-5)

    # resuming skips what is logged and appends new trials only
    again = Tuner(parse_module(MATMUL), log=str(log), strategy="random", seed=1, repeat=2)
    new = list(again.run(trials=2))
    scripts = [json.loads(line)["script"] for line in log.read_text().splitlines()]
    assert len(scripts) == 3 + len(new) and len(set(scripts)) == len(scripts)


def test_crashing_candidate_is_recorded_and_tuning_continues(tmp_path):
    log = tmp_path / "tune.jsonl"
    calls = []

    def flaky(ir, script, **kw):
        calls.append(script)
        return measure_mod.measure(ir, script, crash=len(calls) == 1, **kw)

    tuner = Tuner(parse_module(MATMUL), log=str(log), strategy="evolutionary", seed=0,
                  repeat=2, measure_fn=flaky)
    events = list(tuner.run(trials=3))
    assert not events[0].ok and "crashed" in events[0].error
    assert any(e.ok for e in events[1:])
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records[0]["ok"] is False and "crashed (signal" in records[0]["error"]


def test_hanging_candidate_times_out():
    res = measure_mod.measure(MATMUL, "", timeout=0.05)
    assert not res.ok and "timed out" in res.error


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
    assert rename_script("split mm/i1 by 4\nreorder mm: a, b", "mm", "k") == \
        "split k/i1 by 4\nreorder k: a, b"


def test_dlpc_tune_tool_logs_and_plots(tmp_path, capsys):
    from dlpc.tools import dlpc_tune

    model = tmp_path / "mm.dlpc"
    model.write_text("model mm(a: f32[16, 32], b: f32[32, 64]) {\n  return matmul(a, b)\n}\n")
    log, png = tmp_path / "tune.jsonl", tmp_path / "best.png"
    code = dlpc_tune.main([str(model), "--trials", "2", "--log", str(log), "--plot", str(png),
                           "--quiet"])
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
    from dlpc.passes.schedule.tuner.log import Record

    log = TuningLog(str(tmp_path / "t.jsonl"))
    for script, t in [("a", 1.0), ("b", 0.5), ("b", 3.0), ("b", 2.0), ("a", 1.2)]:
        log.append(Record("s", "k", "c", script, t, True))
    best = TuningLog(str(tmp_path / "t.jsonl")).best("s", "c")
    assert best.script == "a" and best.time == 1.1  # b's lucky 0.5 does not win
