"""Evaluators of loop and dlp IR for the per-pass semantic check (`passes/check.py`),
which sits below the backends and is handed these:

    checker = make_checker(weights)          # graph/te in numpy, loop in C, dlp on the simulator
    pipeline.lower(module, "loop", PipelineOptions(checker=checker), weights=weights)

An evaluator runs the module's `@main` in place on all its argument buffers (inputs,
params, outputs). The C library is built with the usual flags and cached (cbuild), so
re-checking a module whose C is unchanged costs no compile.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from dlpc.diagnostics import DlpcError
from dlpc.passes.check import Checker


def run_loop_c(module: ModuleOp, arrays: list[np.ndarray]) -> None:
    """@main of a loop-level module, compiled to C, on `arrays` in place."""
    from dlpc.backends.c import emit_c
    from dlpc.backends.runtime.cbuild import build

    build(emit_c(module), name="check").call(arrays)


def run_dlp_sim(module: ModuleOp, arrays: list[np.ndarray]) -> None:
    """@main of a dlp-level module, as DLP C on the simulator, on `arrays` in place."""
    from dlpc.backends.runtime.dlp_sim import DlpFunction

    function = DlpFunction(module, name="check")
    if function.library.run(arrays) != 0:
        message = function.library.handle.dlp_error().decode(errors="replace")
        raise DlpcError(f"error: dlp simulator: {message or 'out of host memory'}")


def make_checker(weights: dict[str, np.ndarray] | None = None, **options) -> Checker:
    """A checker with every level's evaluator; `weights` (when given) are the params."""
    checker = Checker(evaluators={"loop": run_loop_c, "dlp": run_dlp_sim}, **options)
    if weights is not None:
        checker.weights = weights
    return checker
