"""The three paths into dlpc give one graph: every example (and bench/models.py's
MobileNetV2-style network) as `.dlpc` text, as its
TorchScript export and as its dynamo export (torch.onnx, `dynamo=False` / `dynamo=True`)
reaches the same graph IR after -O2, up to names (issue 31), and each export computes in
dlpc what onnxruntime computes on the same file.

The exports are bench/models.py's: its torch interpreter of the example's graph IR (the
example's own weights) exported with torch.onnx at opset 18. What makes them equal:
graph-canonicalize's rules (run inside graph-simplify: the erf GELU and MatMul + Add
forms become gelu and linear, softmax axes are counted from the end) and the ONNX
importer reading float attributes as float32's shortest decimal (epsilon 1e-05, not
9.99999974e-06).

"Up to names" (`canonical`): SSA values and symbols are renamed in the order a depth-first
walk from the return meets them, parameter and argument names are dropped, a fused
kernel's name loses its number, and a weight, a `graph.param` or a folded
`graph.constant` of more than one element, reads `weight : <type>` at each use (its
values are checked by the numerics; the .dlpc path folds batch norm into constants
where an export arrives with the folded arrays as initializers, and the dynamo exporter
shares equal initializers such as two layer norms' scales). A linear / conv2d whose bias
weight is all zero reads as the op without it: the dynamo exporter drops such a bias,
while the compiled .dlpc keeps it as a param, since a call may bind other weights.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from dlpc import api
from dlpc.dialects import graph as g
from dlpc.passes import pipeline

ROOT = Path(__file__).resolve().parents[2]
# the examples and bench/models.py's MobileNetV2-style network (inverted residual blocks)
EXAMPLES = ("mlp", "lenet", "mobilenet", "resnet", "transformer", "mobilenetv2")
KINDS = ("ts", "dyn")
BATCH = 2


def _bench():
    spec = importlib.util.spec_from_file_location("bench_models", ROOT / "bench" / "models.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _is_weight(op: Operation) -> bool:
    if isinstance(op, g.ParamOp):
        return True
    return isinstance(op, g.ConstantOp) and op.to_numpy().size > 1


class _Canonical:
    """One function's text up to names: values numbered as a depth-first walk from the
    return meets them, weights inline."""

    def __init__(self, block, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.names: dict[SSAValue, str] = {a: f"arg{i}" for i, a in enumerate(block.args)}
        self.seen: set[Operation] = set()
        self.counter = 0

    def ref(self, value: SSAValue) -> str:
        op = value.owner
        if isinstance(op, Operation) and _is_weight(op):
            return f"weight : {value.type}"
        return self.names[value]

    def zero(self, value: SSAValue) -> bool:
        owner = value.owner
        if isinstance(owner, g.ParamOp) and owner.pname in self.weights:
            return not np.any(self.weights[owner.pname])
        return isinstance(owner, g.ConstantOp) and not np.any(owner.to_numpy())

    def visit(self, op: Operation, out: list[str], indent: str) -> None:
        if op in self.seen:
            return
        for value in op.operands:
            owner = value.owner
            if value not in self.names and isinstance(owner, Operation) and not _is_weight(owner):
                self.visit(owner, out, indent)
        self.seen.add(op)
        props = {**op.properties, **op.attributes}
        if isinstance(op, g.ParamOp):
            props.pop("name")
        text = {k: str(v) for k, v in props.items()}
        if isinstance(op, g.FusedOp):
            text["kernel"] = text["kernel"].rstrip('"').rstrip("0123456789_") + '"'
        body = ""
        if op.regions:
            inner = op.regions[0].block
            for i, a in enumerate(inner.args):
                self.names[a] = f"{indent}  arg{i}"
            sub: list[str] = []
            assert inner.last_op is not None
            self.visit(inner.last_op, sub, indent + "  ")
            body = " {\n" + "\n".join(sub) + f"\n{indent}}}"
        results = []
        for r in op.results:
            self.names[r] = f"%{self.counter}"
            self.counter += 1
            results.append(self.names[r])
        values = list(op.operands)
        if isinstance(op, g.LinearOp | g.Conv2DOp) and len(values) == 3 and self.zero(values[2]):
            values = values[:2]
        operands = ", ".join(self.ref(v) for v in values)
        types = ", ".join(str(r.type) for r in op.results)
        lhs = f"{', '.join(results)} = " if results else ""
        out.append(f"{indent}{lhs}{op.name}({operands}) {sorted(text.items())} : {types}{body}")


def canonical(module: ModuleOp, weights: dict[str, np.ndarray]) -> str:
    """The graph IR of `module`'s functions as text, up to names (see the module doc)."""
    lines: list[str] = []
    for fn in (op for op in module.ops if op.name == "func.func"):
        block = fn.regions[0].block
        lines.append("func(" + ", ".join(str(a.type) for a in block.args) + ")")
        assert block.last_op is not None
        _Canonical(block, weights).visit(block.last_op, lines, "  ")
    return "\n".join(lines)


def graph_o2(model: api.Model) -> str:
    """`model` through the graph passes of -O2 with its weights bound (what `dlpc
    <file> --emit=graph -O2` prints, for the C target), up to names."""
    options = pipeline.PipelineOptions(opt_level=2, schedule=False, target="c")
    weights = dict(api.check_weights(model))
    module = pipeline.lower(model.module.clone(), "graph", options, weights=weights)
    return canonical(module, weights)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Per example: the .dlpc model, its inputs and its two exports (kind -> path)."""
    pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[test]')")
    pytest.importorskip("onnx", reason="onnx is not installed (dlpc[onnx])")
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript (dlpc[test])")
    bench = _bench()
    tmp = tmp_path_factory.mktemp("exports")
    out = {}
    for name in EXAMPLES:
        model = api.load(bench.example_path(name, tmp), batch=BATCH)
        xs = api.random_inputs(model, seed=0)
        paths = bench.onnx_exports(model, xs, tmp, list(KINDS))
        out[name] = (model, xs, paths)
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", EXAMPLES)
def test_exports_reach_the_dlpc_graph(exports, name, kind):
    model, _, paths = exports[name]
    assert kind in paths, f"the {kind} export of {name} failed"
    want = graph_o2(model)
    got = graph_o2(api.load(paths[kind]))
    assert got == want


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", EXAMPLES)
def test_exports_compute_what_onnxruntime_does(exports, name, kind):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (dlpc[onnx])")
    model, xs, paths = exports[name]
    assert kind in paths, f"the {kind} export of {name} failed"
    session = ort.InferenceSession(str(paths[kind]), providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(session.get_inputs(), xs)}
    (expected,) = session.run(None, feeds)
    (got,) = api.compile(api.load(paths[kind]), target="numpy")(*xs)  # -O2's graph
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    (reference,) = api.reference(model, xs)
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-5)


GELU_LINEAR = """
func.func @main(%x: tensor<2x3x8xf32>) -> tensor<2x3x4xf32> {
  %w = graph.param "w" : tensor<8x4xf32>
  %b = graph.param "b" : tensor<4xf32>
  %m = graph.matmul %x, %w : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  %l = graph.add %m, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %c = graph.constant dense<1.41421354> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %d = graph.div %l, %c : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %e = graph.erf %d : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %a = graph.add %e, %one : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %h = graph.mul %l, %a : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = graph.mul %h, %half : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %s = graph.softmax %y {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %s : tensor<2x3x4xf32>
}
"""


def test_canonicalize_preserves_results():
    """graph-canonicalize's rules (erf GELU, MatMul + Add, softmax axis) change no value."""
    from test_graph_passes import check, count, parse

    module = check(GELU_LINEAR, "graph-canonicalize")
    assert count(module, "graph.gelu") == 1 and count(module, "graph.linear") == 1
    assert count(module, "graph.erf") == 0 and count(module, "graph.matmul") == 0
    assert str(check(parse(str(module)), "graph-canonicalize")) == str(module)  # a fixed point


RENAMED = """
func.func @f(%{x}: tensor<2x8xf32>) -> tensor<2x3xf32> {{
  %{b} = graph.param "{bn}" : tensor<3xf32>
  %{w} = graph.param "{wn}" : tensor<3x8xf32>
  %{y} = graph.linear %{x}, %{w}, %{b} : (tensor<2x8xf32>, tensor<3x8xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %{r} = graph.{act} %{y} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %{r} : tensor<2x3xf32>
}}
"""


def test_canonical_is_up_to_names_only():
    """SSA, argument and param names do not count; an op that differs does."""
    from test_graph_passes import parse

    one = dict(x="x", b="b", w="w", bn="fc.bias", wn="fc.weight", y="y", r="r", act="relu")
    two = dict(x="in0", b="1", w="0", bn="p1", wn="p0", y="2", r="3", act="relu")
    assert canonical(parse(RENAMED.format(**one)), {}) == canonical(
        parse(RENAMED.format(**two)), {}
    )
    other = canonical(parse(RENAMED.format(**{**one, "act": "sigmoid"})), {})
    assert other != canonical(parse(RENAMED.format(**one)), {})
