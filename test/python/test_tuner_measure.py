"""Candidates are measured in a subprocess: a crash or a hang is recorded as a failed
trial and tuning continues."""

from __future__ import annotations

import json

from test_schedule import MATMUL

from dlpc.passes.pipeline import parse_module
from dlpc.tune import measure as measure_mod
from dlpc.tune.search import Tuner


def test_crashing_candidate_is_recorded_and_tuning_continues(tmp_path):
    log = tmp_path / "tune.jsonl"
    calls = []

    def flaky(ir, script, **kw):
        calls.append(script)
        return measure_mod.measure(ir, script, crash=len(calls) == 1, **kw)

    tuner = Tuner(
        parse_module(MATMUL),
        log=str(log),
        strategy="evolutionary",
        seed=0,
        repeat=2,
        measure_fn=flaky,
    )
    events = list(tuner.run(trials=3))
    assert not events[0].ok and "crashed" in events[0].error
    assert any(e.ok for e in events[1:])
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records[0]["ok"] is False and "crashed (signal" in records[0]["error"]


def test_hanging_candidate_times_out():
    res = measure_mod.measure(MATMUL, "", timeout=0.05)
    assert not res.ok and "timed out" in res.error
