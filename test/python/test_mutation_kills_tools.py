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
