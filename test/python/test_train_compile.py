"""The training step's compile path: kernels alike up to names share one C function (a
backward repeats its kernels), and kernels that differ in anything else keep their own."""

import re

import numpy as np

import dlpc
from dlpc.frontends.text import parse_model


def _functions_and_calls(source: str) -> tuple[list[str], list[str]]:
    defined = re.findall(r"^__attribute__.*static \w+ (kernel_\w+)\(", source, re.M)
    called = re.findall(r"^  (kernel_\w+)\(", source, re.M)
    return defined, called


def test_kernels_alike_up_to_names_share_one_function():
    # x * 2 and y * 3 differ only in their buffers (the constants are arguments)
    model = parse_model(
        "model m(x: f32[4, 8], y: f32[4, 8]) {\n"
        "  return reduce_sum(x * 2.0, axes=[1]) * reduce_sum(y * 3.0, axes=[1])\n"
        "}",
        "<test>",
    )
    fn = dlpc.compile(model, target="c")
    defined, called = _functions_and_calls(fn.source)
    assert len(called) == 5 and len(defined) == 3  # mul, reduce_sum, the product
    assert called[0] == called[2] and called[1] == called[3]
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
    (out,) = fn(x, y)
    np.testing.assert_allclose(out, (2 * x).sum(1) * (3 * y).sum(1), rtol=1e-5)


def test_kernels_that_differ_keep_their_own_functions():
    model = parse_model(
        "model m(x: f32[4, 8], y: f32[4, 6]) {\n"
        "  return reduce_sum(x, axes=[1]) + reduce_sum(y, axes=[1])\n"
        "}",
        "<test>",
    )
    fn = dlpc.compile(model, target="c")
    defined, called = _functions_and_calls(fn.source)
    assert len(set(called)) == len(called) == len(defined)
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((4, n)).astype(np.float32) for n in (8, 6))
    (out,) = fn(x, y)
    np.testing.assert_allclose(out, x.sum(1) + y.sum(1), rtol=1e-5)
