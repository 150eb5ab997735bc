"""ONNX operator conformance: run onnx's own backend node tests through dlpc.

    python bench/onnx_conformance.py                 # table on stdout
    python bench/onnx_conformance.py --backends numpy,c --write docs/onnx-conformance.md

The node test cases come from the installed `onnx` package
(`onnx.backend.test.case.node.collect_testcases`: a one-node model, or the node's function
expansion for `*_expanded` cases, with inputs and expected outputs). Each case is imported
with `dlpc.frontends.onnx.load_model`, run on a dlpc backend, and compared with the
expected outputs at onnx's backend tolerances (rtol 1e-3, atol 1e-7).

A case's *operator* is its node's op type (for an expanded case, that of the case it
expands). Operators without an importer handler are reported as unsupported; their cases
are not run.

Inputs that fix a shape (Reshape's `shape`, Slice's `starts`, ...) are graph inputs in
these tests; the harness binds them with `freeze_inputs` (the importer says which), so
the model is specialised on those values and the other inputs stay run-time inputs.

This module is also the harness of `test/python/test_onnx_conformance.py`.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

RTOL, ATOL = 1e-3, 1e-7
BATCH = 12  # cases per merged C build


@dataclass
class Case:
    name: str
    op: str
    model: object
    inputs: list
    outputs: list


@dataclass
class Result:
    status: str  # "pass", "fail" (wrong numbers), "error" (import/compile/run error)
    detail: str = ""
    frozen: list[str] = field(default_factory=list)


@functools.cache
def collect() -> tuple[Case, ...]:
    """All node test cases of the installed onnx, with their operator."""
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = [c for c in node_cases.collect_testcases(None) if c.kind == "node"]
    single = {c.name: c.model.graph.node[0].op_type for c in raw if len(c.model.graph.node) == 1}
    cases = []
    for c in raw:
        nodes = c.model.graph.node
        if len(nodes) == 1:
            op = nodes[0].op_type
        else:
            base = c.name.split("_expanded")[0]
            op = single.get(base) or Counter(n.op_type for n in nodes).most_common(1)[0][0]
        if not c.data_sets:
            continue
        inputs, outputs = c.data_sets[0]
        cases.append(
            Case(c.name, op, c.model, [_array(a) for a in inputs], [_array(a) for a in outputs])
        )
    return tuple(sorted(cases, key=lambda c: c.name))


def _array(a):
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(a) if isinstance(a, TensorProto) else a


def supported_ops() -> set[str]:
    from dlpc.frontends.onnx_ops import HANDLERS

    # operators handled by import-time folding only still need a handler to be "supported"
    return set(HANDLERS) | {"Constant"}


def missing_ops(case: Case) -> set[str]:
    """Operators of the case's nodes that dlpc does not support."""
    return {n.op_type for n in case.model.graph.node} - supported_ops()


def runnable(case: Case) -> bool:
    return not missing_ops(case)


def by_operator() -> dict[str, list[Case]]:
    out: dict[str, list[Case]] = defaultdict(list)
    for c in collect():
        out[c.op].append(c)
    return dict(sorted(out.items()))


def import_case(case: Case):
    """(model, run-time inputs, frozen input names); retries with freeze_inputs as needed."""
    from dlpc.frontends.onnx import NeedsConstantInput, load_model
    from dlpc.reference.graph import input_names, main_func

    graph_inputs = [
        vi.name
        for vi in case.model.graph.input
        if vi.name not in {i.name for i in case.model.graph.initializer}
    ]
    feeds = dict(zip(graph_inputs, case.inputs))
    frozen: dict[str, np.ndarray] = {}
    while True:
        try:
            model = load_model(case.model, freeze_inputs=frozen)
            break
        except NeedsConstantInput as e:
            if e.input_name in frozen or e.input_name not in feeds:
                raise
            frozen[e.input_name] = np.asarray(feeds[e.input_name])
    # the arguments of @main: graph inputs less frozen and empty ones
    runtime = [np.asarray(feeds[n]) for n in input_names(main_func(model.module))]
    return model, runtime, sorted(frozen)


def compare(case: Case, got: list) -> str:
    """'' when got matches the expected outputs, else what differs."""
    if len(got) != len(case.outputs):
        return f"{len(got)} outputs, expected {len(case.outputs)}"
    for k, (g, e) in enumerate(zip(got, case.outputs)):
        g, e = np.asarray(g), np.asarray(e)
        if g.shape != e.shape:
            return f"output {k}: shape {g.shape}, expected {e.shape}"
        if g.dtype != e.dtype:
            return f"output {k}: dtype {g.dtype}, expected {e.dtype}"
        if e.dtype.kind in "fc":
            ok = np.allclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            ok = np.array_equal(g, e)
        if not ok:
            err = np.max(np.abs(g.astype(np.float64) - e.astype(np.float64)))
            return f"output {k}: max abs error {err:.3g}"
    return ""


def run_numpy(model, inputs):
    from dlpc.reference.graph import run_reference

    return run_reference(model.module, inputs, model.weights)


def run_c(model, inputs):
    import dlpc

    return dlpc.compile(model, target="c")(*inputs)


BACKENDS = {"numpy": run_numpy, "c": run_c}


def merge(models: list) -> tuple[object, list[tuple[int, int]], list[tuple[int, int]]]:
    """One model whose @main runs all `models` side by side (inputs and outputs
    concatenated, parameters prefixed `<k>/`), so one C build serves a whole batch.
    Returns (model, input ranges, output ranges)."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr
    from xdsl.ir import Block, Region

    from dlpc.api import Model
    from dlpc.dialects import graph

    block, results, weights = Block(), [], {}
    in_ranges, out_ranges, arg_attrs = [], [], []
    for k, m in enumerate(models):
        main = next(op for op in m.module.ops if isinstance(op, func.FuncOp))
        mapping = {}
        start = len(block.args)
        for arg in main.body.block.args:
            mapping[arg] = block.insert_arg(arg.type, len(block.args))
            arg_attrs.append(DictionaryAttr({"dlpc.name": StringAttr(f"c{k}_{arg.index}")}))
        in_ranges.append((start, len(block.args)))
        first = len(results)
        for op in main.body.block.ops:
            if isinstance(op, func.ReturnOp):
                results += [mapping[v] for v in op.operands]
                continue
            new = op.clone(value_mapper=mapping)
            if isinstance(new, graph.ParamOp):
                new.attributes["name"] = StringAttr(f"{k}/{op.pname}")
                weights[f"{k}/{op.pname}"] = m.weights[op.pname]
            for old, res in zip(op.results, new.results):
                mapping[old] = res
            block.add_op(new)
        out_ranges.append((first, len(results)))
    block.add_op(func.ReturnOp(*results))
    ftype = func.FunctionType.from_lists([a.type for a in block.args], [r.type for r in results])
    main = func.FuncOp("main", ftype, Region(block), arg_attrs=ArrayAttr(arg_attrs))
    return Model(ModuleOp([main]), weights, "onnx_batch", None), in_ranges, out_ranges


def run_batch(cases: list[Case], backend: str = "c") -> dict[str, Result]:
    """Run `cases` as one merged model (one C build); cases whose merged run fails are
    run alone, so one bad case does not hide the others."""
    from dlpc.diagnostics import DlpcError

    results: dict[str, Result] = {}
    ready = []
    for case in cases:
        try:
            ready.append((case, *import_case(case)))
        except DlpcError as e:
            results[case.name] = Result("error", f"import: {e}".replace("<onnx>: ", ""))
    # merged builds pay off up to a dozen cases; beyond, the pipeline's cost on the big
    # module grows faster than the C compiler's start-up cost shrinks
    for i in range(0, len(ready), BATCH):
        _run_merged(ready[i : i + BATCH], backend, results)
    return results


def _run_merged(ready: list, backend: str, results: dict[str, Result]) -> None:
    """Run imported cases as one merged build; on failure, bisect down to single cases."""
    if len(ready) == 1:
        results[ready[0][0].name] = run_case(ready[0][0], backend)
        return
    if not ready:
        return
    try:
        model, _, out_r = merge([m for _, m, _, _ in ready])
        flat = [x for _, _, inputs, _ in ready for x in inputs]
        with np.errstate(all="ignore"):
            got = list(BACKENDS[backend](model, flat))
    except Exception:  # noqa: BLE001 - some case breaks the build: find it
        half = len(ready) // 2
        _run_merged(ready[:half], backend, results)
        _run_merged(ready[half:], backend, results)
        return
    for (case, _, _, frozen), (lo, hi) in zip(ready, out_r):
        diff = compare(case, got[lo:hi])
        results[case.name] = Result("fail" if diff else "pass", diff, frozen)


def run_case(case: Case, backend: str) -> Result:
    from dlpc.diagnostics import DlpcError, format_exception

    try:
        model, inputs, frozen = import_case(case)
    except DlpcError as e:
        return Result("error", f"import: {e}".replace("<onnx>: ", ""))
    try:
        with np.errstate(all="ignore"):
            got = BACKENDS[backend](model, inputs)
    except Exception as e:  # noqa: BLE001 - every failure is reported, per case
        return Result("error", f"{backend}: {format_exception(e)}", frozen)
    diff = compare(case, list(got))
    return Result("fail" if diff else "pass", diff, frozen)


def run_all(backends: list[str]) -> dict[str, dict[str, Result]]:
    """{backend: {case name: Result}} for the cases of supported operators; a progress
    bar (cases run, rate, ETA) on stderr when it is a terminal."""
    from dlpc.diagnostics import progress

    out: dict[str, dict[str, Result]] = {b: {} for b in backends}
    groups = [[c for c in cases if runnable(c)] for cases in by_operator().values()]
    total = sum(len(cases) for cases in groups) * len(backends)
    with progress(total=total, desc="onnx node tests", unit="case") as bar:
        for cases in groups:
            for b in backends:
                if b == "numpy":
                    out[b].update({c.name: run_case(c, b) for c in cases})
                else:
                    out[b].update(run_batch(cases, b))
                bar.update(len(cases))
    return out


def table(results: dict[str, dict[str, Result]]) -> str:
    """Markdown: per operator, passed/run per backend; failures; unsupported operators."""
    backends = list(results)
    lines = [
        "| operator | cases | run | " + " | ".join(f"{b} pass" for b in backends) + " |",
        "|---|---:|---:|" + "---:|" * len(backends),
    ]
    totals = Counter()
    for op, cases in by_operator().items():
        run = [c for c in cases if runnable(c)]
        if not run:
            continue
        cells = []
        for b in backends:
            n = sum(results[b][c.name].status == "pass" for c in run)
            totals[b] += n
            cells.append(f"{n}/{len(run)}")
        totals["cases"] += len(cases)
        totals["run"] += len(run)
        lines.append(f"| {op} | {len(cases)} | {len(run)} | " + " | ".join(cells) + " |")
    lines.append(
        f"| **all** | {totals['cases']} | {totals['run']} | "
        + " | ".join(f"**{totals[b]}/{totals['run']}**" for b in backends)
        + " |"
    )
    lines += ["", "## Failures, grouped by reason", ""]
    for b in backends:
        bad = {n: r for n, r in results[b].items() if r.status != "pass"}
        lines += [f"### {b} ({len(bad)} cases)", ""]
        groups: dict[str, list[str]] = defaultdict(list)
        for name, r in sorted(bad.items()):
            groups[_reason(r)].append(name)
        for reason, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"- {reason} ({len(names)}): " + ", ".join(f"`{n}`" for n in names))
        lines.append("")
    missing = Counter()
    for c in collect():
        for op in missing_ops(c):
            missing[op] += 1
    lines += [
        "## Unsupported operators",
        "",
        f"Cases with a node of these operators are not run ({len(missing)} operators, "
        f"{sum(not runnable(c) for c in collect())} cases; in parentheses the cases "
        f"that contain the operator): "
        + ", ".join(f"{op} ({n})" for op, n in sorted(missing.items())),
        "",
    ]
    return "\n".join(lines)


def _reason(r: Result) -> str:
    """A failure's detail without the node and value names, to group cases by."""
    text = re.sub(r"node [^:]*\): ", "", r.detail)
    text = re.sub(r"graph input '[^']*'", "a graph input", text)
    text = re.sub(r"'[^']*_expanded_function_[^']*'", "'…'", text)
    text = re.sub(r"max abs error [0-9.e+-]+", "max abs error above tolerance", text)
    text = re.sub(r"shape \[[^\]]*\]", "shape […]", text)
    return f"{r.status}: {text}"


HEADER = """# ONNX operator conformance

Generated by `python bench/onnx_conformance.py --write docs/onnx-conformance.md`
from the node test cases of onnx {version} (opsets up to {opset}); tolerances rtol {rtol},
atol {atol}. `pytest test/python/test_onnx_conformance.py` checks the same cases.

"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="numpy,c")
    p.add_argument("--write", help="also write the markdown report to this file")
    args = p.parse_args(argv)
    import onnx

    results = run_all(args.backends.split(","))
    text = HEADER.format(
        version=onnx.__version__, opset=onnx.defs.onnx_opset_version(), rtol=RTOL, atol=ATOL
    ) + table(results)
    print(text)
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
