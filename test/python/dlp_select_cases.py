"""Shared by test_dlp_select_*.py: a small model in the model language, lowered to dlp IR
and run on the simulator against the numpy reference."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

import dlpc
from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.passes import pipeline


def lowered(tmp_path: Path, text: str):
    """(model, loop module, the dlp ops loop-to-dlp selects for it)."""
    path = tmp_path / "m.dlpc"
    path.write_text(text)
    model = dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions())
    ops = Counter(op.name for op in lower_to_dlp(module.clone()).walk())
    return model, module, ops


def matches_reference(model, module) -> None:
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    (out,) = compile_dlp(module, name="m")(*inputs, params=weights)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
