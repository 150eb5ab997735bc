"""Search: the tuner finds, logs and reuses a schedule, and resumes from its log."""

from __future__ import annotations

import json

import numpy as np
from test_schedule import MATMUL, run_c

from dlpc.dialects.loop import kernels
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule.default import apply_tuned_or_default
from dlpc.passes.schedule.tuning_log import TuningLog, kernel_signature
from dlpc.tune.search import Tuner


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
    np.testing.assert_allclose(
        run_c(fresh)[-1], run_c(parse_module(MATMUL))[-1], rtol=1e-5, atol=1e-5
    )

    # resuming skips what is logged and appends new trials only
    again = Tuner(parse_module(MATMUL), log=str(log), strategy="random", seed=1, repeat=2)
    new = list(again.run(trials=2))
    scripts = [json.loads(line)["script"] for line in log.read_text().splitlines()]
    assert len(scripts) == 3 + len(new) and len(set(scripts)) == len(scripts)


def test_records_carry_the_default_they_were_tuned_against(tmp_path):
    """Each record says which default schedule it was tuned against; a log whose records
    name another default is stale: compiling takes today's default, and resuming the tuner
    measures the schedules again (the default first) instead of skipping them as seen."""
    from dlpc.passes.schedule.default import default_scripts
    from dlpc.passes.schedule.tuning_log import schedule_digest

    log = tmp_path / "tune.jsonl"
    tuner = Tuner(parse_module(MATMUL), log=str(log), strategy="random", seed=1, repeat=2)
    list(tuner.run(trials=2))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    today = schedule_digest(default_scripts(parse_module(MATMUL), "mm"), "mm")
    assert [r["default"] for r in records] == [today, today]

    for r in records:
        r["default"] = "another-default"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert apply_tuned_or_default(parse_module(MATMUL), str(log)) == {"mm": "default"}
    again = Tuner(parse_module(MATMUL), log=str(log), strategy="random", seed=1, repeat=2)
    new = list(again.run(trials=1))
    assert [e.script for e in new] == [records[0]["script"]]  # the default, measured again
    rewritten = [json.loads(line) for line in log.read_text().splitlines()]
    assert rewritten[-1]["default"] == today
    assert apply_tuned_or_default(parse_module(MATMUL), str(log)) == {"mm": "tuned"}
