"""bench/mutation.py's scoring (issue 35): a mutant stopped at its timeout is scored killed,
so the count of timeouts is reported apart, and a run whose unmutated tests leave a mutant
less than twice their time is refused."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "dlpc_bench_mutation2", ROOT / "bench" / "mutation.py"
)
assert spec and spec.loader
mutation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation)


def session(tmp_path: Path, results: list[tuple[str, str, str]]) -> Path:
    """A cosmic-ray session with one mutant per (worker outcome, test outcome, output)."""
    path = tmp_path / "session.sqlite"
    db = sqlite3.connect(path)
    db.execute("create table work_items (job_id text)")
    db.execute(
        "create table mutation_specs (job_id text, module_path text, start_pos_row int, "
        "operator_name text, occurrence int)"
    )
    db.execute(
        "create table work_results (worker_outcome text, output text, test_outcome text, "
        "diff text, job_id text)"
    )
    for i, (worker, test, output) in enumerate(results):
        job = f"j{i}"
        db.execute("insert into work_items values (?)", (job,))
        db.execute("insert into mutation_specs values (?, 'dlpc/x.py', ?, 'Op', 0)", (job, i))
        db.execute(
            "insert into work_results values (?, ?, ?, '-a\n+b', ?)", (worker, output, test, job)
        )
    db.commit()
    db.close()
    return path


def test_summary_counts_timeouts_among_the_killed(tmp_path):
    s = mutation.summary(
        session(
            tmp_path,
            [
                ("NORMAL", "KILLED", "timeout"),
                ("NORMAL", "KILLED", "1 failed"),
                ("NORMAL", "KILLED", " timeout\n"),
                ("NORMAL", "SURVIVED", "3 passed"),
                ("NORMAL", "INCOMPETENT", ""),
            ],
        )
    )
    assert (s["total"], s["done"], s["killed"], s["timeouts"]) == (5, 5, 3, 2)
    assert [r[4] for r in s["survived"]] == [3]
    assert s["incompetent"] == 1


def test_report_shows_the_timeouts(tmp_path, capsys):
    (tmp_path / "comm").mkdir()
    session(tmp_path / "comm", [("NORMAL", "KILLED", "timeout"), ("NORMAL", "SURVIVED", "")])
    mutation.report(tmp_path, show_survivors=False)
    assert "| comm | 2 of 2 | 1 (1) | 1 | 0 | 50 % |" in capsys.readouterr().out


def test_a_baseline_over_half_the_timeout_is_refused():
    assert mutation.baseline_problem("api", 90.0, 180.0) is None
    assert mutation.baseline_problem("api", 90.5, 180.0) == (
        "api: the unmutated tests took 90 s, over half the 180 s timeout a mutant gets: "
        "raise --timeout or run on a quieter machine"
    )
