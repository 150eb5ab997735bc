"""passes/schedule/nest.py: the read-only nest analysis the default schedules and the
tuner share (loop structure, work, divisors, buffer tokens, conv facts)."""

from __future__ import annotations

import pytest
from test_schedule import _conv_case

from dlpc.dialects.loop import kernels
from dlpc.passes.pipeline import PipelineOptions, lower, parse_module
from dlpc.passes.schedule import nest as nest_mod
from dlpc.passes.schedule.nest import (
    analyse,
    buffer_token,
    conv_input,
    conv_load,
    conv_output,
    first_divisor,
    is_strided,
    kernel_work,
    largest_divisor,
    parallel_pays,
)


def _conv_kernel(case):
    """A one-conv model lowered to loops without schedules, and its conv kernel."""
    module = parse_module(_conv_case(*case))
    lower(module, "loop", PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if k.sym.startswith("conv")]
    return module, kernel


def test_divisor_choices():
    assert largest_divisor(32, 24) == 16
    assert largest_divisor(28, 64, multiple_of=16) == 1  # no multiple of 16 divides 28
    assert largest_divisor(96, 64, multiple_of=16) == 48
    assert largest_divisor(7, 4) == 1
    assert first_divisor(12, (8, 6, 4)) == 6
    assert first_divisor(7, (8, 6, 4)) == 1


@pytest.mark.parametrize(
    "case,strided",
    [
        ((1, 3, 13, 17, 6, 3, 1, 1, 1, False), False),
        ((2, 5, 11, 9, 7, 3, 2, 1, 1, False), True),
        ((1, 4, 10, 21, 12, 1, 1, 0, 1, False), False),
    ],
)
def test_a_conv_nest(case, strided):
    """A conv's nest: spatial n, c, h, w then the reductions ci, kh, kw with their trip
    counts; its input, output and load; strided or not; its work; stable tokens."""
    n, c, h, w, o, k, stride, pad, _, _ = case
    _, kernel = _conv_kernel(case)
    nest = analyse(kernel)
    assert nest is not None
    ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    assert [nest.trips[s] for s in nest.spatial] == [n, o, ho, wo]
    assert sorted(nest.trips[r] for r in nest.reduce) == sorted([c, k, k])
    x, out = conv_input(kernel, nest), conv_output(kernel)
    assert x is not None and out is not None and x is not out
    load = conv_load(kernel, x)
    assert load is not None and load.memref is x
    assert is_strided(kernel, nest) is strided
    assert kernel_work(kernel) >= n * o * ho * wo * c * k * k
    assert buffer_token(kernel, x) != buffer_token(kernel, out)
    assert buffer_token(kernel, x).startswith("@")


def test_parallel_pays_follows_the_threshold(monkeypatch):
    _, kernel = _conv_kernel((1, 4, 10, 21, 12, 1, 1, 0, 1, False))
    nest = analyse(kernel)
    assert nest is not None
    macs = 1 * 12 * 10 * 21 * 4
    monkeypatch.setattr(nest_mod, "CONV_PARALLEL_MACS", macs)
    assert parallel_pays(nest)
    monkeypatch.setattr(nest_mod, "CONV_PARALLEL_MACS", macs + 1)
    assert not parallel_pays(nest)


def test_an_elementwise_kernel_has_spatial_loops_only():
    """An elementwise kernel is one nest of spatial loops and no reduction."""
    module = parse_module("""
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}""")
    lower(module, "loop", PipelineOptions(opt_level=0))
    (kernel,) = list(kernels(module))
    nest = analyse(kernel)
    assert nest is not None and not nest.reduce and len(nest.spatial) >= 1
