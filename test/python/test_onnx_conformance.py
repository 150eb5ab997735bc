"""ONNX operator conformance: onnx's own backend node tests, run through dlpc's public API.

Every node test case (from the installed `onnx` package) of every operator the importer
supports (a handler of its own, or its ONNX function body) runs as a user runs a model,
`dlpc.compile(dlpc.load("case.onnx"), target=...)(*inputs)` with every graph input of the
case (Reshape's `shape`, Slice's `starts`, ... included: the compiled model specialises on
their values), on numpy and on C, and is compared with onnx's expected outputs (rtol 1e-3,
atol 1e-7). The harness is `bench/onnx_conformance.py` (which also writes
docs/onnx-conformance.md); C cases of one operator are merged into one ONNX model, so one
C build serves them all.

Outcomes:
- a case passes, or it matches one of `EXPECTED_FAILURES` below, which says why: then it
  is reported as xfail with dlpc's own diagnostic (and a case that starts to pass, or that
  fails for another reason than its rule says, fails the test);
- the C backend runs the cases of the operators the importer handles itself; operators
  imported only through their function body (Attention's, RotaryEmbedding's, ...) run on
  numpy only here, since their C builds are large, and on C in the bench script;
- for each unsupported operator, one test checks that importing its first case is an
  error naming the operator (nothing is silently dropped); its cases are listed at the
  end of the session with the per-operator table.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip(
    "onnx", reason="onnx is not installed (pip install -e '.[onnx]' from the dlpc checkout)"
)

_HARNESS = Path(__file__).resolve().parents[2] / "bench" / "onnx_conformance.py"
_spec = importlib.util.spec_from_file_location("dlpc_onnx_conformance", _HARNESS)
H = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = H
_spec.loader.exec_module(H)

import dlpc  # noqa: E402
from dlpc.diagnostics import DlpcError  # noqa: E402

# (case-name regex, backends, regex the failure detail must match, why)
ALL = ("numpy", "c")  # a failure on the C backend only would list ("c",)
EXPECTED_FAILURES = [
    (
        r"(bfloat16|float8|float4|int4|int2|uint4|uint2)"
        r"|BFLOAT16|_bf16|FLOAT8|FLOAT4E2M1|INT4|INT2|UINT4|UINT2|_string",
        ALL,
        r"element type|attribute 'to' = \w+ is not supported",
        "the graph dialect has f16/f32/f64, i1, i8/i16/i32/i64 and ui8/ui16/ui32/ui64 only",
    ),
    (
        r"^test_training_dropout(_default|_mask|_default_mask)?$",
        ALL,
        r"training_mode = true",
        "training dropout with a non-zero ratio draws random numbers",
    ),
    (r"^test_identity_(opt|sequence)$|^test_sequence_map", ALL, r"is not a tensor", "sequences"),
    (r"^test_bernoulli", ALL, r"'RandomUniformLike'", "random number generation"),
    (
        r"^test_(loop13_seq|loop16_seq_none)$",
        ALL,
        r"is not a tensor but an? (sequence|optional) \(read by Loop",
        "Loop over sequences or optionals",
    ),
    (
        r"^test_(de)?quantizelinear_(e4m3fn|e5m2)",
        ALL,
        r"element type float8",
        "float8 quantization: the graph dialect has no float8 types",
    ),
    (
        r"^test_(de)?quantizelinear_blocked",
        ALL,
        r"blocked quantization \(block_size = \d+\) is not supported",
        "blocked quantization (a scale per block of an axis)",
    ),
    (
        r"^test_maxunpool_export_with_output_shape$",
        ALL,
        r"output 0: max abs error",
        "its expected output reads the indices as (row, col) of the 4x4 grid; dlpc takes them "
        "as offsets into the 5x5 output, as onnxruntime does (which fails the case too)",
    ),
]

CASES = [c for c in H.collect() if H.runnable(c)]
# C builds cost ~0.3 s a case and far more for the big function expansions of operators
# dlpc imports only through them (Attention's take minutes): those run on numpy here, on C
# in `python bench/onnx_conformance.py` (docs/onnx-conformance.md); the summary says so
C_CASES = [c for c in CASES if c.op in H.handled_ops()]
UNSUPPORTED: dict[str, list[H.Case]] = defaultdict(list)  # missing operator -> its cases
for _case in H.collect():
    for _op in H.missing_ops(_case):
        UNSUPPORTED[_op].append(_case)
RESULTS: dict[str, dict[str, H.Result]] = defaultdict(dict)


def expected_failure(name: str, backend: str):
    for pattern, backends, detail, why in EXPECTED_FAILURES:
        if backend in backends and re.search(pattern, name):
            return detail, why
    return None


def _c_results(case: H.Case, cache={}) -> H.Result:  # noqa: B006 - a per-session cache
    if case.op not in cache:
        cache[case.op] = H.run_batch([c for c in C_CASES if c.op == case.op], "c")
    return cache[case.op][case.name]


def _judge(case: H.Case, backend: str, result: H.Result) -> None:
    RESULTS[backend][case.name] = result
    rule = expected_failure(case.name, backend)
    if rule is None:
        assert result.status == "pass", f"{case.name} on {backend}: {result.detail}"
        return
    detail, why = rule
    assert result.status != "pass", f"{case.name} now passes on {backend}: drop its rule"
    assert re.search(detail, result.detail), (
        f"{case.name} on {backend} fails for another reason than '{why}': {result.detail}"
    )
    pytest.xfail(f"{why}: {result.detail}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_numpy(case):
    _judge(case, "numpy", H.run_case(case, "numpy"))


@pytest.mark.parametrize("case", C_CASES, ids=lambda c: c.name)
def test_c(case):
    _judge(case, "c", _c_results(case))


@pytest.mark.parametrize("op", sorted(UNSUPPORTED))
def test_unsupported_operator_is_an_error(op):
    """No case with an unsupported operator imports silently: each is a one-line error,
    or (when the operator's inputs are all known) it folds away at import time."""
    for case in UNSUPPORTED[op]:
        try:
            model = dlpc.load(H.save(case.model, case.name))
        except DlpcError as e:
            message = str(e)
            assert "error:" in message and "\n" not in message, message
            # the refusal names the operator (or, for a string / ml-domain / sequence case,
            # the operator reading the input dlpc refuses)
            assert any(re.search(rf"\b{o}\b", message) for o in H.missing_ops(case)), message
            if "unsupported operator" in message:
                assert re.search(r"unsupported operator '(\w+)'", message)[1] in H.missing_ops(
                    case
                ), message
            continue
        # imported: the importer dispatches every node it does not fold, so the unsupported
        # nodes were folded; the result must still be a verified module (or, when input
        # values decide its shapes, one per value)
        if model.ir is not None:
            model.ir.verify()


def test_rules_are_used():
    """Every expected-failure rule matches some case (stale rules are removed)."""
    names = [c.name for c in CASES]
    for pattern, _, _, why in EXPECTED_FAILURES:
        assert any(re.search(pattern, n) for n in names), f"rule '{why}' matches no case"


class _Summary:
    """A plugin registered by the module: per-operator table in pytest's terminal summary."""

    def pytest_terminal_summary(self, terminalreporter):
        if not RESULTS:
            return
        per_op: dict[str, list[H.Case]] = defaultdict(list)
        for c in CASES:
            per_op[c.op].append(c)
        backends = sorted(RESULTS)
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "ONNX conformance: passed/run per operator")
        cells = []
        for op, cs in sorted(per_op.items()):
            counts = []
            for b in backends:
                ran = [c for c in cs if c.name in RESULTS[b]]
                if ran:
                    ok = sum(RESULTS[b][c.name].status == "pass" for c in ran)
                    counts.append(f"{b} {ok}/{len(ran)}")
            if counts:
                cells.append(f"{op}: {', '.join(counts)}")
        for i in range(0, len(cells), 3):
            write("   ".join(f"{c:<40}" for c in cells[i : i + 3]).rstrip())
        for b in backends:
            ok = sum(r.status == "pass" for r in RESULTS[b].values())
            write(f"{b}: {ok}/{len(RESULTS[b])} cases pass")
        if "c" in RESULTS:
            write(
                f"c: {len(CASES) - len(C_CASES)} cases of operators imported only through "
                f"their function expansion run on numpy only here; "
                f"bench/onnx_conformance.py runs them on c"
            )
        write(
            f"unsupported: {len(UNSUPPORTED)} operators, "
            f"{sum(not H.runnable(c) for c in H.collect())} cases not run: "
            + ", ".join(sorted(UNSUPPORTED))
        )


@pytest.fixture(scope="module", autouse=True)
def _summary(request):
    name = "dlpc-onnx-conformance-summary"
    if not request.config.pluginmanager.has_plugin(name):
        request.config.pluginmanager.register(_Summary(), name)
