"""Tests written against surviving mutants of the comm dialect and the dist passes
(issue 35, bench/mutation.py --area comm)."""

from __future__ import annotations

from pathlib import Path

import pytest

PIPELINE = Path(__file__).parent.parent / "passes" / "graph-pipeline.mlir"


@pytest.mark.parametrize("stages, ok", [(1, True), (0, False)])
def test_a_one_stage_pipeline_is_the_whole_step(stages, ok, capsys):
    """graph-pipeline with stages=1 makes @stage0 alone; stages=0 is one line, exit 1."""
    from dlpc.tools.dlpc_opt import main

    code = main([str(PIPELINE), "-p", f"graph-pipeline{{stages={stages} microbatches=2}}"])
    out, err = capsys.readouterr()
    if ok:
        assert code in (0, None) and "@stage0" in out and "@stage1" not in out
    else:
        assert code == 1 and "stages and microbatches must be >= 1, got 0 and 2" in err
