"""Differential tests against an oracle that is not dlpc (issue 18): random well-typed
`.dlpc` programs (hypothesis, `programs.py`) are interpreted by torch from their AST and
compiled on every backend at -O0 and -O3; and every graph rewrite keeps the results of
random programs (numpy reference before and after the pass, `dlpc.passes.check`).

A bounded, derandomized number of cases here (CI); `bench/differential.py` runs the long
search with fresh seeds."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.frontends.text import parse_model
from dlpc.passes import pipeline
from dlpc.passes.check import Checker

sys.path.insert(0, str(Path(__file__).parent))
from programs import assert_matches, programs, torch_eval  # noqa: E402


def ci(max_examples: int) -> settings:
    """Bounded and reproducible: the same cases on every run, no example database."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def _compare_backends(program, targets, levels=(0, 3)):
    want = torch_eval(program)
    model = program.model()
    for target in targets:
        for level in levels:
            # -O3 with graph-layout forced on every conv (alone it converts only where
            # NHWC pays): every rewrite
            options = {"graph_layout": {"where": "all"}} if level == 3 else {}
            with np.errstate(all="ignore"):
                got = dlpc.compile(model, target, opt_level=level, **options)(*program.inputs)
            assert_matches(got, want, what=f"{target} -O{level}\n{program.source}")


@ci(30)
@given(programs())
def test_programs_match_torch_numpy_and_c(program):
    _compare_backends(program, ["numpy", "c"])


@ci(6)
@given(programs(max_steps=3))
def test_programs_match_torch_opencl_and_dlp(program):
    pytest.importorskip("pyopencl")
    _compare_backends(program, ["opencl", "dlp"])


# ------------------------------------------- literal arithmetic folded by the text frontend

_NUMBERS = st.sampled_from(["1", "2", "3", "0.5", "2.5", "4.0", "10", "0.25"])


@st.composite
def _literal_expr(draw, depth: int = 3) -> str:
    """A number expression in the shared syntax of .dlpc and Python: + - * / ( ) unary -."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(_NUMBERS)
    kind = draw(st.sampled_from(["+", "-", "*", "/", "neg"]))
    if kind == "neg":
        return f"-({draw(_literal_expr(depth - 1))})"
    return f"({draw(_literal_expr(depth - 1))} {kind} {draw(_literal_expr(depth - 1))})"


@ci(60)
@given(_literal_expr(), st.sampled_from(["x * {}", "{} - x", "x / {}", "{} + x * 2.0"]))
def test_literal_arithmetic_folds_like_python(expr, template):
    """The frontend folds arithmetic on numbers (`x * (3.0 - 1.0)`); Python's own
    evaluation of the same text is the oracle."""
    src = f"model m(x: f32[3, 4]) {{\n  return {template.format(expr)}\n}}\n"
    try:
        value = eval(expr)  # noqa: S307 - numbers and + - * / only, generated above
    except ZeroDivisionError:  # the frontend says so too, at the division
        with pytest.raises(DlpcError, match="division by zero"):
            parse_model(src, "<literal>")
        return
    if not np.isfinite(value) or abs(value) > 1e6:
        return
    x = np.linspace(-2.0, 2.0, 12, dtype=np.float32).reshape(3, 4) + 0.1
    (got,) = dlpc.compile(parse_model(src, "<literal>"), "numpy", opt_level=0)(x)
    want = eval(template.format(f"({value!r})"), {"x": x.astype(np.float64)})  # noqa: S307
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=expr)


# --------------------------------------------------- every graph rewrite: before == after

REWRITES = [
    ("graph-simplify", {}),
    ("graph-simplify", {"assume_finite": False}),
    ("graph-fold-constants", {}),
    ("graph-layout", {"to": "nhwc"}),
    ("graph-fuse", {}),
    *[
        ("graph-substitute", {"rules": (rule,)})
        for rule in (
            "add-constants",
            "conv-input-scale",
            "concat-constants",
            "matmul-transpose",
            "cast-cast",
            "reshape-reshape",
            "factor-common",
            "regroup-scalars",
            "fold-batch-norm",
        )
    ],
]


def _rewrite_keeps_results(name: str, options: dict, fired: Counter, program) -> None:
    module = program.model().module
    checker = Checker(rtol=1e-4, atol=1e-5)
    opts = pipeline.PipelineOptions(opt_level=0, extra={name: options}, checker=checker)
    pipeline.run("graph-infer-shapes", module, opts)
    checker.start(module, dict(program.weights))
    before = str(module)
    pipeline.run(name, module, opts)  # the checker raises on a changed result
    fired[str(module) != before] += 1
    assert checker.notes == []


@pytest.mark.parametrize(
    "name, options", REWRITES, ids=[f"{n}{o.get('rules', [''])[0] or ''}" for n, o in REWRITES]
)
def test_graph_rewrite_keeps_results(name, options):
    """Random programs (with the patterns each rewrite looks for mixed in), the numpy
    reference before and after the pass: equal within rtol 1e-4. The rewrite must fire
    on some of them, or the test proves nothing."""
    fired: Counter = Counter()

    @ci(40)
    @given(programs(max_steps=4))
    def check(program):
        _rewrite_keeps_results(name, options, fired, program)

    check()
    assert fired[True] >= 1, f"{name} {options} never changed a program: {fired}"
