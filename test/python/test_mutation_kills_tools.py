"""Tests written against surviving mutants of the tools' option handling and diagnostics
(issue 35, bench/mutation.py --area tools)."""

from __future__ import annotations

import pytest

from dlpc.diagnostics import one_line, stage_error


def test_one_line_cuts_long_text_with_an_ellipsis():
    assert one_line("a" * 50, limit=10) == "aaaaaaa..."
    assert one_line("first:\n  why\nrest") == "first: why"


def test_a_bare_exception_is_bad_input_and_a_type_error_a_bug():
    """xDSL's verifiers raise a bare Exception on purpose: its text, not an internal
    error; any other exception type is a dlpc bug."""
    plain = stage_error("pass p", Exception("the operand is wrong"))
    assert not plain.internal and "the operand is wrong" in str(plain)
    assert stage_error("pass p", TypeError("x")).internal


@pytest.mark.parametrize("flag", ["--timeout", "--time-budget"])
def test_dlpc_tune_takes_positive_seconds(tmp_path, flag, capsys):
    """--timeout / --time-budget: 0 is refused with one line, 5 gets past the check."""
    from dlpc.tools.dlpc_tune import main

    model = tmp_path / "missing.dlpc"
    assert main([str(model), flag, "0"]) != 0
    assert f"{flag} must be > 0 seconds, got 0" in capsys.readouterr().err
    assert main([str(model), flag, "5"]) != 0  # past the flag: the missing model
    assert "must be > 0" not in capsys.readouterr().err


def test_dlpc_run_verdict_names_the_worst_element_and_its_bound():
    """The element with the largest excess over atol + rtol * |ref|, and that bound."""
    import numpy as np

    from dlpc.tools.dlpc_run import verdict

    ref = np.array([1.0, 100.0, 2.0], np.float32)
    out = ref + np.array([0.0, 0.5, 0.25], np.float32)
    ok, what, worst = verdict(out, ref, rtol=1e-3, atol=0.01)
    assert not ok and what.startswith("MISMATCH (2 of 3 elements")
    assert (
        worst == "worst against its bound: [1] = 100.5 vs reference 100 (|diff| 0.5, allowed 0.11)"
    )


def test_dlpc_run_summary_shows_five_values_then_an_ellipsis():
    import numpy as np

    from dlpc.tools.dlpc_run import summary

    assert "  [0, 1, 2, 3, 4]  mean 2  " in summary(np.arange(5, dtype=np.float32))
    assert "  [0, 1, 2, 3, 4, ...]  mean 2.5  " in summary(np.arange(6, dtype=np.float32))
