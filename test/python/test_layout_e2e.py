"""NHWC end to end: every op that takes `layout = "nhwc"` (conv2d, max/avg pool,
global_avg_pool, batch_norm) on random shapes, strides, pads, dilations and groups
(depthwise included), through the numpy reference, emit_numpy, graph-to-te (te
evaluator) and C, each compared with the NCHW reference on transposed data; fused NHWC
kernels (epilogues over NHWC results); and the resnet/mobilenet/lenet examples after
graph-layout{to=nhwc} (alone and forced on every conv in -O3) on numpy and C, and so
at -O3 on the DLP simulator and OpenCL, against the NCHW reference; -O3 itself
(graph-layout{where=pays}) converts what graph-conv-layout picks.
rtol/atol 1e-4 (float32 sums are reordered)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr, f32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue

import dlpc
from dlpc import api
from dlpc.backends.numpy import emit_numpy
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.dialects import graph as g
from dlpc.dialects.te import ComputeOp, ReduceOp
from dlpc.passes import pipeline
from dlpc.passes.lower.graph_to_te import GraphToTe
from dlpc.passes.lower.te_to_loop import TeToLoop
from dlpc.reference.graph import run_reference
from dlpc.reference.te import run_te

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = ("resnet", "mobilenet", "lenet")
TOL = 1e-4
TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dlpc-cache"))


def close(got, expected, what: str) -> None:
    assert got.shape == expected.shape, what
    np.testing.assert_allclose(got, expected, rtol=TOL, atol=TOL, err_msg=what)


# ------------------------------------------------------------------ op cases


@dataclass
class Case:
    """One layout op: `x` is NCHW; the NHWC case reads x transposed to NHWC."""

    id: str
    cls: type
    x: np.ndarray
    rest: list[np.ndarray] = field(default_factory=list)
    attrs: dict = field(default_factory=dict)


def make(cls, operands: list[SSAValue], attrs: dict, layout: str) -> Operation:
    """`cls` on `operands` with `attrs` and, for NHWC, `layout = "nhwc"` (which `make`
    does not take: it is an attribute, not a property)."""
    properties = {k: g.to_attr(cls.ATTRS[k][0], v) for k, v in attrs.items()}
    attributes = {"layout": StringAttr("nhwc")} if layout == "nhwc" else {}
    probe = cls.create(
        operands=operands, result_types=[f32], properties=properties, attributes=attributes
    )
    try:
        ty = probe.infer_type()
    finally:
        probe.drop_all_references()
    return cls.create(
        operands=operands, result_types=[ty], properties=properties, attributes=attributes
    )


def module_of(cases: list[Case], layout: str) -> tuple[ModuleOp, list[np.ndarray]]:
    """@main taking every case's arrays (x in `layout`) and returning every result."""
    arrays = []
    for c in cases:
        arrays += [c.x.transpose(TO_NHWC).copy() if layout == "nhwc" else c.x, *c.rest]
    types = [g.tensor_type(a.shape, f32) for a in arrays]
    block = Block(arg_types=types)
    args, results = list(block.args), []
    for c in cases:
        mine, args = args[: 1 + len(c.rest)], args[1 + len(c.rest) :]
        op = make(c.cls, mine, c.attrs, layout)
        block.add_op(op)
        results.append(op.results[0])
    block.add_op(ReturnOp(*results))
    fn = FuncOp("main", FunctionType.from_lists(types, [r.type for r in results]), Region(block))
    module = ModuleOp([fn])
    module.verify()
    return module, arrays


def rand(rng, *shape, positive=False) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32)
    return (np.abs(x) + np.float32(0.5)) if positive else x


def conv_cases(rng) -> list[Case]:
    cases = []
    # (groups, channel multiplier): plain, grouped, depthwise, depthwise x2
    kinds = [(1, None), (2, None), ("dw", 1), ("dw", 2)]
    for n in range(12):
        groups, mult = kinds[n % 4]
        c = int(rng.integers(1, 4)) * (2 if groups == 2 else 1) + (2 if groups == "dw" else 0)
        gr = c if groups == "dw" else groups
        o = c * mult if mult else int(rng.integers(1, 4)) * gr
        kh, kw = (int(k) for k in rng.integers(1, 4, 2))
        sh, sw = (int(s) for s in rng.integers(1, 3, 2))
        dh, dw = (int(d) for d in rng.integers(1, 3, 2))
        pads = [int(p) for p in rng.integers(0, 3, 4)]  # asymmetric pads included
        h, w = (int(v) for v in rng.integers(dh * (kh - 1) + 1, 10, 2))
        nb = int(rng.integers(1, 3))
        x = rand(rng, nb, c, h, w)
        wt = rand(rng, o, c // gr, kh, kw)
        rest = [wt, rand(rng, o)] if n % 3 else [wt]
        attrs = {"strides": (sh, sw), "pads": tuple(pads), "dilations": (dh, dw), "groups": gr}
        cases.append(
            Case(f"conv{n}_g{gr}_{x.shape}_{wt.shape}_{attrs}", g.Conv2DOp, x, rest, attrs)
        )
    return cases


def pool_cases(rng) -> list[Case]:
    cases = []
    for n in range(10):
        cls = g.MaxPool2DOp if n % 2 == 0 else g.AvgPool2DOp
        kh, kw = (int(k) for k in rng.integers(1, 4, 2))
        sh, sw = (int(s) for s in rng.integers(1, 3, 2))
        pads = (
            int(rng.integers(0, kh // 2 + 1)),
            int(rng.integers(0, kw // 2 + 1)),
            int(rng.integers(0, kh // 2 + 1)),
            int(rng.integers(0, kw // 2 + 1)),
        )
        attrs = {
            "kernel": (kh, kw),
            "strides": (sh, sw),
            "pads": pads,
            "ceil_mode": n % 4 in (1, 2),
        }
        if cls is g.AvgPool2DOp:
            attrs["count_include_pad"] = n % 3 == 0
        x = rand(
            rng,
            int(rng.integers(1, 3)),
            int(rng.integers(1, 5)),
            *(int(v) for v in rng.integers(4, 9, 2)),
        )
        cases.append(Case(f"{cls.name}{n}_{x.shape}_{attrs}", cls, x, [], attrs))
    return cases


def stat_cases(rng) -> list[Case]:
    cases = []
    for n, shape in enumerate([(1, 3, 4, 4), (2, 5, 3, 7), (1, 8, 1, 1)]):
        x = rand(rng, *shape)
        cases.append(Case(f"global_avg_pool{shape}", g.GlobalAvgPoolOp, x))
        c = shape[1]
        stats = [rand(rng, c), rand(rng, c), rand(rng, c), rand(rng, c, positive=True)]
        cases.append(
            Case(f"batch_norm{shape}", g.BatchNormOp, x, stats, {"epsilon": 1e-3 * (n + 1)})
        )
    return cases


def all_cases() -> list[Case]:
    rng = np.random.default_rng(7)
    return conv_cases(rng) + pool_cases(rng) + stat_cases(rng)


@pytest.fixture(scope="module")
def cases_and_expected():
    """The cases and their NCHW reference results, transposed to NHWC."""
    cases = all_cases()
    module, arrays = module_of(cases, "nchw")
    expected = [y.transpose(TO_NHWC) for y in run_reference(module, arrays, {})]
    return cases, expected


def test_cases_cover_every_layout_op(cases_and_expected):
    from dlpc.passes.graph.layout import LAYOUT_OPS

    cases, _ = cases_and_expected
    assert {c.cls for c in cases} == set(LAYOUT_OPS)
    assert any(c.attrs.get("groups", 1) == c.x.shape[1] > 1 for c in cases)  # depthwise
    assert any(c.attrs.get("dilations", (1, 1)) != (1, 1) for c in cases)


def test_numpy_reference_and_emit_numpy(cases_and_expected):
    cases, expected = cases_and_expected
    module, arrays = module_of(cases, "nhwc")
    got = run_reference(module, arrays, {})
    namespace: dict = {}
    exec(emit_numpy(module), namespace)  # noqa: S102
    emitted = namespace["main"](*arrays, params={})
    for c, e, o, o2 in zip(cases, expected, got, emitted, strict=True):
        close(o, e, f"reference {c.id}")
        close(o2, e, f"emit_numpy {c.id}")


def test_evaluate_nhwc_agrees_with_reference(cases_and_expected):
    from dlpc.passes.graph.layout import evaluate_nhwc

    cases, expected = cases_and_expected
    module, arrays = module_of(cases, "nhwc")
    ops = [op for op in module.walk() if isinstance(op, g.GraphOp)]
    args = iter(arrays)
    for c, op, e in zip(cases, ops, expected, strict=True):
        values = [next(args) for _ in op.operands]
        close(evaluate_nhwc(op, values), e, c.id)


def test_graph_to_te_nhwc(cases_and_expected):
    cases, expected = cases_and_expected
    module, arrays = module_of(cases, "nhwc")
    GraphToTe().apply(Context(), module)
    module.verify()
    assert not [op for op in module.walk() if op.name.startswith("graph.")]
    assert not [
        op for op in module.walk() if op.name == "te.compute" and "transpose" in op.compute_name
    ]
    for c, e, o in zip(cases, expected, run_te(module, arrays, {}), strict=True):
        close(o, e, f"te {c.id}")


def test_c_nhwc(cases_and_expected):
    cases, expected = cases_and_expected
    module, arrays = module_of(cases, "nhwc")
    GraphToTe().apply(Context(), module)
    TeToLoop().apply(Context(), module)
    module.verify()
    got = CFunction(module, name="layout_ops_nhwc")(*arrays, params={})
    for c, e, o in zip(cases, expected, got, strict=True):
        close(o, e, f"C {c.id}")


# ------------------------------------------------------------------------ fusion

FUSED = """
func.func @main(%x: tensor<2x6x9x9xf32>) -> tensor<2x8x1x1xf32> {
  %w1 = graph.param "w1" : tensor<8x6x3x3xf32>
  %b1 = graph.param "b1" : tensor<8x1x1xf32>
  %w2 = graph.param "w2" : tensor<8x1x3x3xf32>
  %s = graph.param "bn.scale" : tensor<8xf32>
  %t = graph.param "bn.bias" : tensor<8xf32>
  %m = graph.param "bn.mean" : tensor<8xf32>
  %v = graph.param "bn.var" : tensor<8xf32>
  %c = graph.conv2d %x, %w1 {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x6x9x9xf32>, tensor<8x6x3x3xf32>) -> tensor<2x8x5x5xf32>
  %cb = graph.add %c, %b1 : (tensor<2x8x5x5xf32>, tensor<8x1x1xf32>) -> tensor<2x8x5x5xf32>
  %r = graph.relu %cb : (tensor<2x8x5x5xf32>) -> tensor<2x8x5x5xf32>
  %d = graph.conv2d %r, %w2 {pads = array<i64: 1, 1, 1, 1>, groups = 8 : i64} : (tensor<2x8x5x5xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x5x5xf32>
  %n = graph.batch_norm %d, %s, %t, %m, %v : (tensor<2x8x5x5xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x5x5xf32>
  %a = graph.add %n, %r : (tensor<2x8x5x5xf32>, tensor<2x8x5x5xf32>) -> tensor<2x8x5x5xf32>
  %e = graph.clip %a {min = 0.0 : f64, max = 6.0 : f64} : (tensor<2x8x5x5xf32>) -> tensor<2x8x5x5xf32>
  %p = graph.max_pool2d %e {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = true} : (tensor<2x8x5x5xf32>) -> tensor<2x8x3x3xf32>
  %q = graph.avg_pool2d %p {kernel = array<i64: 2, 2>, pads = array<i64: 1, 1, 0, 0>} : (tensor<2x8x3x3xf32>) -> tensor<2x8x3x3xf32>
  %y = graph.global_avg_pool %q : (tensor<2x8x3x3xf32>) -> tensor<2x8x1x1xf32>
  func.return %y : tensor<2x8x1x1xf32>
}
"""


def test_fused_nhwc_kernels():
    """graph-layout then graph-fuse: conv + bias + relu and a residual conv + bn + add +
    clip become fused NHWC kernels (one te op each), numerically the NCHW model."""
    module = pipeline.parse_module(FUSED)
    rng = np.random.default_rng(3)
    arrays = [rand(rng, 2, 6, 9, 9)]
    weights = {
        op.pname: rand(rng, *g.shape_of(op.output), positive=op.pname == "bn.var")
        for op in module.walk()
        if isinstance(op, g.ParamOp)
    }
    expected = run_reference(module, arrays, weights)
    options = pipeline.PipelineOptions()
    for name in ("graph-layout", "graph-simplify", "graph-fuse"):
        pipeline.run(name, module, options)
    fused = [op for op in module.walk() if isinstance(op, g.FusedOp)]
    anchors = [inner for f in fused for inner in f.body.block.ops if isinstance(inner, g.Conv2DOp)]
    assert len(anchors) == 2 and all(g.layout_of(a) == "nhwc" for a in anchors)
    assert sum(1 for op in module.walk() if isinstance(op, g.TransposeOp)) <= 2
    close(run_reference(module, arrays, weights)[0], expected[0], "numpy after graph-fuse")
    te = module.clone()
    GraphToTe().apply(Context(), te)
    names = {op.compute_name for op in te.walk() if isinstance(op, ComputeOp | ReduceOp)}
    assert {f.kernel_name for f in fused} <= names  # each graph.fused is one te op
    close(run_te(te, arrays, weights)[0], expected[0], "te")
    TeToLoop().apply(Context(), te)
    close(CFunction(te, name="layout_fused")(*arrays, params=weights)[0], expected[0], "C")


# ---------------------------------------------------------------------- examples


def load(name: str) -> api.Model:
    return dlpc.load(os.path.join(ROOT, "examples", f"{name}.dlpc"), batch=1)


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_after_graph_layout(name):
    """graph-layout{to=nhwc} alone (-O0 otherwise, nothing fused): numpy reference,
    emitted numpy and C agree with the NCHW reference."""
    model = load(name)
    inputs = api.random_inputs(model)
    expected = api.reference(model, inputs)
    module = model.module.clone()
    pipeline.run("graph-infer-shapes", module, pipeline.PipelineOptions())
    pipeline.run("graph-layout", module, pipeline.PipelineOptions(), to="nhwc")
    assert any(g.layout_of(op) == "nhwc" for op in module.walk() if isinstance(op, g.Conv2DOp))
    nhwc = api.Model(module, model.weights, f"{name}_nhwc", model.path)
    close(run_reference(module, inputs, model.weights)[0], expected[0], "reference")
    for target in ("numpy", "c"):
        got = api.compile(nhwc, target=target, opt_level=0)(*inputs)
        close(got[0], expected[0], target)


# graph-layout forced on every conv inside -O3 (weights folded, kernels fused); -O3 on
# its own runs it only where NHWC pays (where=pays)
EVERYWHERE = {"graph_layout": {"where": "all"}}


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_o3(name):
    """graph-layout{where=all} inside the -O3 pipeline (weights folded and kernels
    fused): every conv NHWC, numpy and C agree with the NCHW reference."""
    assert "graph-layout" in pipeline.GRAPH_PASSES_BY_LEVEL[3]
    model = load(name)
    inputs = api.random_inputs(model)
    expected = api.reference(model, inputs)
    for target in ("numpy", "c"):
        compiled = api.compile(model, target=target, opt_level=3, **EVERYWHERE)
        close(compiled(*inputs)[0], expected[0], target)
        if target == "numpy":  # the lowered module is graph IR: every conv is NHWC
            convs = [op for op in compiled.lowered.walk() if isinstance(op, g.Conv2DOp)]
            assert convs and all(g.layout_of(op) == "nhwc" for op in convs)


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_o3_converts_where_nhwc_pays(name):
    """-O3 as it is (graph-layout{where=pays}): NHWC exactly on the convs graph-conv-layout
    picks (LeNet's second conv; none of resnet's or mobilenet's, whose rows fill whole
    vectors or which are depthwise), the same layouts as -O2, results as the reference."""
    model = load(name)
    inputs = api.random_inputs(model)
    expected = api.reference(model, inputs)
    layouts = {}
    for level in (2, 3):
        compiled = api.compile(model, target="numpy", opt_level=level)
        close(compiled(*inputs)[0], expected[0], f"numpy -O{level}")
        convs = [op for op in compiled.lowered.walk() if isinstance(op, g.Conv2DOp)]
        layouts[level] = [g.layout_of(op) for op in convs]
    assert layouts[3] == layouts[2]
    assert layouts[3].count("nhwc") == (1 if name == "lenet" else 0)
    close(api.compile(model, target="c", opt_level=3)(*inputs)[0], expected[0], "c -O3")


@pytest.mark.parametrize("target", ["dlp", "opencl"])
def test_examples_o3_other_targets(target):
    """The loop-level backends need nothing NHWC-specific: -O3 with graph-layout forced
    on every conv, on the DLP simulator and OpenCL, agrees with the NCHW reference too."""
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    for name in EXAMPLES:
        model = load(name)
        inputs = api.random_inputs(model)
        expected = api.reference(model, inputs)
        close(
            api.compile(model, target=target, opt_level=3, **EVERYWHERE)(*inputs)[0],
            expected[0],
            f"{name} on {target}",
        )
