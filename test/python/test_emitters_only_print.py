"""A backend only prints (docs/pipeline.md): every emitter takes a module lowered for its
target and returns text, leaving the module as it was. Each example, lowered to each
emitter's stage as `dlpc --emit=<emitter>` lowers it, is printed before and after the
emitter runs; the two texts are equal. The OpenCL emitter is also run as its runtime runs
it: a 16-lane device's plan, runs of kernels as chains, split by images and as a team."""

from __future__ import annotations

from pathlib import Path

import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.passes import pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["mlp", "lenet", "transformer", "mobilenet", "resnet"]
EMITTERS = ["numpy", "c", "opencl", "dlp-c"]


def _lowered(example: str, emitter: str, batch: int):
    """The module `dlpc --emit=<emitter>` gives its emitter (weights folded)."""
    model = dlpc.load(ROOT / "examples" / f"{example}.dlpc", batch=batch)
    target = pipeline.TARGET_OF_EMITTER.get(emitter)
    options = pipeline.PipelineOptions(schedule=pipeline.schedules_for(emitter), target=target)
    weights = dict(dlpc.api.check_weights(model))
    return pipeline.lower(
        model.module.clone(), pipeline.EMITTERS[emitter], options, weights=weights
    )


@pytest.mark.parametrize("emitter", EMITTERS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_emitter_leaves_the_module_unchanged(example, emitter):
    module = _lowered(example, emitter, batch=1)
    before = str(module)
    source = pipeline.emit(module, emitter)
    assert source  # (it printed something)
    assert str(module) == before


@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("batch", [1, 4])
def test_opencl_emitter_as_the_runtime_runs_it(example, batch):
    """`OpenCLEmitter.emit` with chains, parts and teams (what `OpenCLFunction` asks of
    it) changes nothing either, emitted twice from one module: the same program."""
    from dlpc.backends.c import find_main
    from dlpc.backends.opencl import OpenCLEmitter
    from dlpc.backends.runtime.opencl_rt import kernel_runs, reshape_aliases

    module = _lowered(example, "opencl", batch)
    before = str(module)
    fn = find_main(module)
    runs = kernel_runs(fn, reshape_aliases(fn))
    for parts, team in ((1, 1), (4, 1), (1, 2)):
        sources = [OpenCLEmitter(module, 16).emit(runs, parts=parts, team=team) for _ in "ab"]
        assert sources[0] == sources[1]
        assert str(module) == before


def test_an_unknown_target_is_one_line():
    with pytest.raises(DlpcError, match="unknown target 'tpu' \\(expected c, opencl, dlp\\)"):
        pipeline.PipelineOptions(target="tpu")
