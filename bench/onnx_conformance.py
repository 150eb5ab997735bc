"""ONNX operator conformance: run onnx's own backend node tests through dlpc's public API.

    python bench/onnx_conformance.py                 # table on stdout
    python bench/onnx_conformance.py --backends numpy,c,onnxruntime --write docs/onnx-conformance.md

The node test cases are the whole generated node suite of the installed `onnx` package
(`onnx.backend.test.loader.load_model_tests(kind="node")`: a one-node model, or the node's
function expansion for `*_expanded` cases, with inputs and expected outputs); every case
runs, those with an operator dlpc does not support too (they fail at import, with the
importer's one-line diagnostic). Each case runs the way
a user runs a model: its model is saved as an `.onnx` file, then
`dlpc.compile(dlpc.load(path), target=...)(*inputs)` with every graph input of the case
(shape-deciding inputs such as Reshape's `shape` included: the compiled model specialises
on their values), and the outputs are compared with the expected ones at onnx's backend
tolerances (rtol 1e-3, atol 1e-7). The `onnxruntime` backend runs the same cases in
onnxruntime, for comparison.

A case's *operator* is its node's op type (for an expanded case, that of the case it
expands); its *element types* are the dtypes of its input and output tensors (a case
counts once under each). Besides the per-operator and per-element-type tables, the report
lists the cases onnxruntime passes and a dlpc backend fails.

Two summary sets: the *core* operators (those of MLPs, CNNs and transformers as PyTorch
exports them) and a *wider* set (the core, every other operator the importer documents, and
the ones issue #9 asked for); each counts the cases whose float tensors are all float32.

This module is also the harness of `test/python/test_onnx_conformance.py`.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass

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


@functools.cache
def collect() -> tuple[Case, ...]:
    """All node test cases of the installed onnx, with their operator."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = list(load_model_tests(kind="node"))
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


@functools.cache
def supported_ops() -> frozenset[str]:
    """Operators with an importer handler, and those the importer expands into their ONNX
    function body (which may still use an unsupported operator: then its cases fail)."""
    from onnx import defs

    from dlpc.frontends.onnx_ops import HANDLERS

    ops = set(HANDLERS) | {"Constant"}
    for schema in defs.get_all_schemas():
        if schema.domain in ("", "ai.onnx") and (
            schema.function_opset_versions or schema.context_dependent_function_opset_versions
        ):
            ops.add(schema.name)
    return frozenset(ops)


def handled_ops() -> frozenset[str]:
    """Operators with an importer handler of their own (not imported by expansion)."""
    from dlpc.frontends.onnx_ops import HANDLERS

    return frozenset(HANDLERS) | {"Constant"}


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


CORE_OPS = frozenset(
    """Add Sub Mul Div Pow Sqrt Erf Exp Neg Tanh Relu Sigmoid Gelu LeakyRelu Clip MatMul Gemm
    Conv ConvTranspose MaxPool AveragePool GlobalAveragePool BatchNormalization
    LayerNormalization Softmax LogSoftmax Reshape Flatten Squeeze Unsqueeze Transpose Concat
    Split Slice Gather Expand Where Equal Cast Dropout Identity ReduceMean ReduceSum Shape
    Constant ConstantOfShape Range Pad""".split()
)
WIDER_OPS = CORE_OPS | frozenset(
    """Abs Log Reciprocal PRelu Elu Selu Celu HardSigmoid HardSwish Softplus Softsign Mish
    Swish ThresholdedRelu Shrink Sign IsNaN IsInf Mod Max Min Sum Mean Less LessOrEqual
    Greater GreaterOrEqual Not And Or Xor CastLike GlobalMaxPool InstanceNormalization
    GroupNormalization RMSNormalization LpNormalization ReduceMax ReduceMin ReduceProd
    ReduceL1 ReduceL2 ReduceSumSquare ReduceLogSum ReduceLogSumExp Tile Resize DepthToSpace
    SpaceToDepth Trilu Size ArgMax ArgMin GatherElements Attention RotaryEmbedding
    SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss""".split()
)


def is_float32(case: Case) -> bool:
    """Every input and output is a float32 tensor or an index/mask (int64, int32, bool)
    one, and some are float32."""
    arrays = case.inputs + case.outputs
    if not all(isinstance(a, np.ndarray | np.generic) for a in arrays):
        return False
    kinds = {np.asarray(a).dtype for a in arrays}
    return np.dtype(np.float32) in kinds and kinds <= {
        np.dtype(t) for t in (np.float32, np.int64, np.int32, np.bool_)
    }


def in_set(case: Case, ops: frozenset[str]) -> bool:
    return case.op in ops and is_float32(case)


_DIR: list[str] = []


def save(model, name: str) -> str:
    """Write an onnx ModelProto to a file of the session's temporary directory."""
    import atexit
    import os
    import shutil
    import tempfile

    if not _DIR:
        _DIR.append(tempfile.mkdtemp(prefix="dlpc-onnx-conformance-"))
        atexit.register(shutil.rmtree, _DIR[0], True)
    path = os.path.join(_DIR[0], f"{name}.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def graph_inputs(model) -> list[str]:
    """The inputs a call passes: graph inputs that are not initializers."""
    inits = {i.name for i in model.graph.initializer}
    return [vi.name for vi in model.graph.input if vi.name not in inits]


def run_dlpc(model_proto, name: str, inputs: list, backend: str) -> list:
    """`dlpc.compile(dlpc.load(path), target=backend)(*inputs)`: the public API."""
    import dlpc

    model = dlpc.load(save(model_proto, name))
    return dlpc.compile(model, target=backend)(*inputs)


def run_onnxruntime(model_proto_in, name: str, inputs: list, backend: str) -> list:
    import onnxruntime as ort

    model_proto = model_proto_in
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    if model_proto.ir_version > 13:  # (this onnxruntime reads IR versions up to 13)
        model_proto = type(model_proto)()
        model_proto.CopyFrom(model_proto_in)
        model_proto.ir_version = 13
    try:
        sess = ort.InferenceSession(
            model_proto.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
    except Exception as e:  # noqa: BLE001 - only a newer opset stamp than it reads is retried
        newest = re.search(r"support for domain ai.onnx is till opset (\d+)", str(e))
        restamped = newest and _restamp(model_proto, int(newest[1]))
        if not restamped:
            raise
        sess = ort.InferenceSession(
            restamped.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
    feeds = {n: np.asarray(x) for n, x in zip(graph_inputs(model_proto_in), inputs)}
    return sess.run(None, feeds)


def _restamp(model_proto, opset: int):
    """The model stamped with default-domain opset `opset` when every node's operator has
    the same schema version there as under its own stamp (the newest onnx generates its
    cases at an opset onnxruntime refuses to load); else None."""
    from onnx import defs

    own = next((o.version for o in model_proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    if own <= opset:
        return None
    for node in model_proto.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            same = (
                defs.get_schema(node.op_type, own).since_version
                == defs.get_schema(node.op_type, opset).since_version
            )
        except Exception:  # noqa: BLE001 - an operator newer than `opset`
            return None
        if not same:
            return None
    new = type(model_proto)()
    new.CopyFrom(model_proto)
    for o in new.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = opset
    return new


def runner(backend: str):
    return run_onnxruntime if backend == "onnxruntime" else run_dlpc


def compare(case: Case, got: list) -> str:
    """'' when got matches the expected outputs, else what differs."""
    try:
        return _compare(case, got)
    except Exception as e:  # noqa: BLE001 - an output numpy cannot compare is a failure
        return f"outputs not comparable: {type(e).__name__}: {e}"


def _compare(case: Case, got: list) -> str:
    if len(got) != len(case.outputs):
        return f"{len(got)} outputs, expected {len(case.outputs)}"
    for k, (g, e) in enumerate(zip(got, case.outputs)):
        if isinstance(e, list) and isinstance(g, list):  # sequences: element by element
            if len(g) == len(e):
                parts = [Case(case.name, case.op, None, [], [x]) for x in e]
                diffs = [_compare(p, [y]) for p, y in zip(parts, g)]
                if any(diffs):
                    return f"output {k}: {next(d for d in diffs if d)}"
                continue
            return f"output {k}: {len(g)} tensors, expected {len(e)}"
        if e is None or g is None:  # an optional
            if e is None and g is None:
                continue
            return f"output {k}: {type(g).__name__}, expected {type(e).__name__}"
        g, e = np.asarray(g), np.asarray(e)  # (a one-tensor sequence compares as its stack)
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


def _mergeable(case: Case) -> bool:
    m = case.model
    return not m.functions and not any(
        a.type in (5, 10) for n in m.graph.node for a in n.attribute
    )  # (no local functions, no subgraphs: names stay local to the graph)


def merge(cases: list[Case]):
    """One ONNX model that runs `cases` side by side (every name prefixed `c<k>_`, inputs
    and outputs concatenated), so one C build serves a whole batch; the cases share their
    opset imports. Returns (model, output ranges)."""
    from onnx import helper

    nodes, inputs, outputs, inits, infos, out_ranges = [], [], [], [], [], []
    for k, case in enumerate(cases):
        g = case.model.graph

        def ren(name: str, p: str = f"c{k}_") -> str:
            return p + name if name else name

        for node in g.node:
            new = type(node)()
            new.CopyFrom(node)
            new.name = ren(node.name)
            new.input[:] = [ren(n) for n in node.input]
            new.output[:] = [ren(n) for n in node.output]
            nodes.append(new)
        for src, dst in ((g.input, inputs), (g.output, outputs), (g.value_info, infos)):
            for vi in src:
                new = type(vi)()
                new.CopyFrom(vi)
                new.name = ren(vi.name)
                dst.append(new)
        for init in g.initializer:
            new = type(init)()
            new.CopyFrom(init)
            new.name = ren(init.name)
            inits.append(new)
        out_ranges.append((len(outputs) - len(g.output), len(outputs)))
    graph = helper.make_graph(nodes, "onnx_batch", inputs, outputs, inits, value_info=infos)
    first = cases[0].model
    model = helper.make_model(
        graph, opset_imports=list(first.opset_import), ir_version=first.ir_version
    )
    return model, out_ranges


def run_batch(cases: list[Case], backend: str = "c") -> dict[str, Result]:
    """Run `cases` as merged models (one C build per batch of cases with the same opset
    imports); cases whose merged run fails are bisected, so one bad case does not hide the
    others. Cases that fail at load are not merged."""
    import dlpc
    from dlpc.diagnostics import DlpcError

    results: dict[str, Result] = {}
    groups: dict[tuple, list[Case]] = defaultdict(list)
    for case in cases:
        if not _mergeable(case):
            results[case.name] = run_case(case, backend)
            continue
        try:
            dlpc.load(save(case.model, case.name))
        except DlpcError as e:
            results[case.name] = Result("error", f"import: {_plain(e)}")
            continue
        m = case.model
        key = (m.ir_version, tuple(sorted((o.domain, o.version) for o in m.opset_import)))
        groups[key].append(case)
    # merged builds pay off up to a dozen cases; beyond, the pipeline's cost on the big
    # module grows faster than the C compiler's start-up cost shrinks
    for group in groups.values():
        for i in range(0, len(group), BATCH):
            _run_merged(group[i : i + BATCH], backend, results)
    return results


def _run_merged(ready: list[Case], backend: str, results: dict[str, Result]) -> None:
    """Run cases as one merged build; on failure, bisect down to single cases."""
    if len(ready) == 1:
        results[ready[0].name] = run_case(ready[0], backend)
        return
    if not ready:
        return
    try:
        model, out_r = merge(ready)
        flat = [x for case in ready for x in case.inputs]
        with np.errstate(all="ignore"):
            got = list(runner(backend)(model, f"batch_{ready[0].name}", flat, backend))
    except Exception:  # noqa: BLE001 - some case breaks the build: find it
        half = len(ready) // 2
        _run_merged(ready[:half], backend, results)
        _run_merged(ready[half:], backend, results)
        return
    for case, (lo, hi) in zip(ready, out_r):
        diff = compare(case, got[lo:hi])
        results[case.name] = Result("fail" if diff else "pass", diff)


def _plain(e: Exception) -> str:
    """A diagnostic without the temporary file's path."""
    return re.sub(r"^\S*dlpc-onnx-conformance-[^/]*/[^:]*: ", "", str(e))


def run_case(case: Case, backend: str) -> Result:
    from dlpc.diagnostics import DlpcError, format_exception

    try:
        with np.errstate(all="ignore"):
            got = runner(backend)(case.model, case.name, case.inputs, backend)
    except DlpcError as e:
        return Result("error", f"import: {_plain(e)}")
    except Exception as e:  # noqa: BLE001 - every failure is reported, per case
        return Result("error", f"{backend}: {_plain(Exception(format_exception(e)))}")
    diff = compare(case, list(got))
    return Result("fail" if diff else "pass", diff)


def run_all(backends: list[str], cases: list[Case] | None = None) -> dict[str, dict[str, Result]]:
    """{backend: {case name: Result}} for `cases` (default: those of supported operators); a
    progress bar (cases run, rate, ETA) on stderr when it is a terminal."""
    from dlpc.diagnostics import progress

    if cases is None:
        chosen = {c.name for c in collect()}
    else:
        chosen = {c.name for c in cases}
    out: dict[str, dict[str, Result]] = {b: {} for b in backends}
    groups = [[c for c in cs if c.name in chosen] for cs in by_operator().values()]
    total = sum(len(cs) for cs in groups) * len(backends)
    with progress(total=total, desc="onnx node tests", unit="case") as bar:
        for cs in groups:
            for b in backends:
                if b == "c":
                    out[b].update(run_batch(cs, b))
                else:
                    out[b].update({c.name: run_case(c, b) for c in cs})
                bar.update(len(cs))
    return out


def summary(results: dict[str, dict[str, Result]]) -> list[str]:
    """Per backend, passed/cases of the core and the wider float32 sets (a case not run
    counts as failed)."""
    lines = [
        "| set | cases | " + " | ".join(f"{b} pass" for b in results) + " |",
        "|---|---:|" + "---:|" * len(results),
    ]
    for label, ops in (("core operators", CORE_OPS), ("wider set", WIDER_OPS)):
        cs = [c for c in collect() if in_set(c, ops)]
        cells = []
        for b in results:
            n = sum(results[b].get(c.name, Result("error")).status == "pass" for c in cs)
            cells.append(f"{n}/{len(cs)} ({100 * n / max(len(cs), 1):.0f} %)")
        lines.append(f"| {label} (float32) | {len(cs)} | " + " | ".join(cells) + " |")
    return lines


def table(results: dict[str, dict[str, Result]]) -> str:
    """Markdown: per operator, passed/run per backend; failures; unsupported operators."""
    backends = list(results)
    lines = [*whole_suite(results), "", *summary(results)]
    lines += ["", *set_failures(results), *ort_only(results), "## Per operator"]
    lines += [
        "",
        "The *run* column counts the cases whose operators dlpc supports; the pass counts "
        "are over every case of the operator (an unsupported one fails at import).",
        "",
        "| operator | cases | run | " + " | ".join(f"{b} pass" for b in backends) + " |",
        "|---|---:|---:|" + "---:|" * len(backends),
    ]
    totals = Counter()
    for op, cases in by_operator().items():
        run = [c for c in cases if runnable(c)]
        cells = []
        for b in backends:
            n = sum(_passed(results, b, c) for c in cases)
            totals[b] += n
            cells.append(f"{n}/{len(cases)}")
        totals["cases"] += len(cases)
        totals["run"] += len(run)
        lines.append(f"| {op} | {len(cases)} | {len(run)} | " + " | ".join(cells) + " |")
    lines.append(
        f"| **all** | {totals['cases']} | {totals['run']} | "
        + " | ".join(f"**{totals[b]}/{totals['cases']}**" for b in backends)
        + " |"
    )
    lines += ["", *type_table(results)]
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


def _passed(results: dict[str, dict[str, Result]], backend: str, case: Case) -> bool:
    r = results[backend].get(case.name)
    return r is not None and r.status == "pass"


def element_types(case: Case) -> set[str]:
    """The dtypes of the case's input and output tensors ('sequence' / 'optional' for
    values that are not tensors)."""
    out = set()
    for a in case.inputs + case.outputs:
        if isinstance(a, np.ndarray | np.generic):
            out.add(str(np.asarray(a).dtype))
        else:
            out.add("optional" if a is None else type(a).__name__.lower())
    return out


def whole_suite(results: dict[str, dict[str, Result]]) -> list[str]:
    """Totals over every case of the suite that ran: passes per backend, and how many cases
    onnxruntime passes and each dlpc backend fails (over how many operators)."""
    ran = [c for c in collect() if all(c.name in rs for rs in results.values())]
    lines = [
        f"Node suite: {len(ran)} of its {len(collect())} cases run, "
        f"{len({c.op for c in ran})} operators."
    ]
    for b in results:
        lines.append(f"- {b}: {sum(_passed(results, b, c) for c in ran)} pass")
    if "onnxruntime" in results:
        dl = [b for b in results if b != "onnxruntime"]
        for label, bs in [(b, [b]) for b in dl] + (
            [("any dlpc backend", dl)] if len(dl) > 1 else []
        ):
            bad = [
                c
                for c in ran
                if _passed(results, "onnxruntime", c)
                and not all(_passed(results, b, c) for b in bs)
            ]
            lines.append(
                f"- onnxruntime passes and {label} fails: {len(bad)} cases over "
                f"{len({c.op for c in bad})} operators"
            )
    return lines


def ort_only(results: dict[str, dict[str, Result]]) -> list[str]:
    """The cases onnxruntime passes and some dlpc backend fails, per operator, with the
    first such case's reason."""
    if "onnxruntime" not in results:
        return []
    dl = [b for b in results if b != "onnxruntime"]
    per_op: dict[str, list[Case]] = defaultdict(list)
    for c in collect():
        if c.name in results["onnxruntime"] and _passed(results, "onnxruntime", c):
            if any(c.name in results[b] and not _passed(results, b, c) for b in dl):
                per_op[c.op].append(c)
    lines = [
        "## Passes in onnxruntime, fails in dlpc",
        "",
        f"{sum(map(len, per_op.values()))} cases over {len(per_op)} operators "
        f"(failing on {' or '.join(dl)}); per operator, the first case's reason:",
        "",
    ]
    for op, cs in sorted(per_op.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        first = next(results[b][cs[0].name] for b in dl if not _passed(results, b, cs[0]))
        names = ", ".join(f"`{c.name}`" for c in cs)
        lines.append(f"- **{op}** ({len(cs)}; {_reason(first)}): {names}")
    return [*lines, ""]


def type_table(results: dict[str, dict[str, Result]]) -> list[str]:
    """Per element type: passed/cases per backend (a case counts under each of its
    element types)."""
    backends = list(results)
    per_type: dict[str, list[Case]] = defaultdict(list)
    for c in collect():
        if all(c.name in rs for rs in results.values()):
            for t in element_types(c):
                per_type[t].append(c)
    lines = [
        "## Per element type",
        "",
        "A case counts under each element type of its inputs and outputs.",
        "",
        "| element type | cases | " + " | ".join(f"{b} pass" for b in backends) + " |",
        "|---|---:|" + "---:|" * len(backends),
    ]
    for t, cs in sorted(per_type.items()):
        cells = [f"{sum(_passed(results, b, c) for c in cs)}/{len(cs)}" for b in backends]
        lines.append(f"| {t} | {len(cs)} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def set_failures(results: dict[str, dict[str, Result]]) -> list[str]:
    """The cases of the wider set (the core's among them) that a dlpc backend fails, with
    dlpc's reason (the same on every backend, or per backend)."""
    cases = [c for c in collect() if in_set(c, WIDER_OPS)]
    dlpc_backends = [b for b in results if b != "onnxruntime"]
    lines = ["## What fails in the core and wider sets", ""]
    for c in cases:
        got = {b: results[b].get(c.name, Result("error", "not run")) for b in dlpc_backends}
        bad = {b: r for b, r in got.items() if r.status != "pass"}
        if not bad:
            continue
        where = "core" if c.op in CORE_OPS else "wider"
        reasons = {_reason(r) for r in bad.values()}
        if len(reasons) == 1:
            text = f"{', '.join(bad)}: {reasons.pop()}"
        else:
            text = "; ".join(f"{b}: {_reason(r)}" for b, r in bad.items())
        lines.append(f"- `{c.name}` ({where}) {text}")
    return [*lines, ""]


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
atol {atol}. Every case runs as a user runs a model, through the public API:
`dlpc.compile(dlpc.load("case.onnx"), target=...)(*inputs)` with every graph input of the
case (inputs whose values decide shapes are specialised at call time, nothing is frozen
beforehand). The `onnxruntime` column runs the same models in onnxruntime {ort} (IR
version lowered to 13, the newest it reads). `pytest test/python/test_onnx_conformance.py`
checks the same cases (C there only for operators with a handler of their own).

The *core operators* are those of MLPs, CNNs and transformers as PyTorch exports them
({core}); the *wider set* adds every other operator docs/onnx.md lists and those issue #9
asked for. Both count the cases whose tensors are float32 (plus int64/int32/bool indices
and masks); a case dlpc does not run counts as failed.

"""


def header() -> str:
    import onnx

    try:
        import onnxruntime

        ort = onnxruntime.__version__
    except ImportError:  # pragma: no cover - depends on the environment
        ort = "(not installed)"
    return HEADER.format(
        version=onnx.__version__,
        opset=onnx.defs.onnx_opset_version(),
        rtol=RTOL,
        atol=ATOL,
        ort=ort,
        core=", ".join(sorted(CORE_OPS)),
    )


def _write_json(path: str | None, results: dict[str, dict[str, Result]]) -> None:
    if path:
        import json

        with open(path, "w") as f:
            json.dump(
                {b: {n: [r.status, r.detail] for n, r in rs.items()} for b, rs in results.items()},
                f,
            )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="numpy,c,onnxruntime")
    p.add_argument("--write", help="also write the markdown report to this file")
    p.add_argument("--json", help="also write every result to this file (case: status, detail)")
    p.add_argument(
        "--set",
        choices=("all", "wider", "core"),
        default="all",
        help="run only the float32 cases of the wider or core set (the summary lines)",
    )
    p.add_argument(
        "--ops",
        help="run only the cases of these operators (comma-separated) and print their rows "
        "of the per-operator table",
    )
    args = p.parse_args(argv)

    if args.ops:
        ops = args.ops.split(",")
        groups = by_operator()
        results = run_all(args.backends.split(","), [c for op in ops for c in groups.get(op, [])])
        print("| operator | cases | run | " + " | ".join(f"{b} pass" for b in results) + " |")
        for op in ops:
            cs = groups.get(op, [])
            run = [c for c in cs if runnable(c)]
            cells = [f"{sum(_passed(results, b, c) for c in cs)}/{len(cs)}" for b in results]
            print(f"| {op} | {len(cs)} | {len(run)} | " + " | ".join(cells) + " |")
        print("\n".join(["", *whole_suite(results), "", *type_table(results)]))
        print("\n".join(ort_only(results)))
        _write_json(args.json, results)
        return 0
    sets = {"wider": WIDER_OPS, "core": CORE_OPS}
    cases = None if args.set == "all" else [c for c in collect() if in_set(c, sets[args.set])]
    results = run_all(args.backends.split(","), cases)
    _write_json(args.json, results)
    if cases is not None:  # only the summary means anything for a subset
        print("\n".join(summary(results)))
        return 0
    text = header() + table(results)
    print(text)
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
