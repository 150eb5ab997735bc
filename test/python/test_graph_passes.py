"""Every graph pass preserves results: numpy reference outputs before and after the pass
agree on random inputs and weights, for hand-written cases and for `examples/*.dlpc`.
Each case also checks that the pass did what it is for (op counts)."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp, TensorType
from xdsl.dialects.func import Func
from xdsl.parser import Parser
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes

from dlpc.dialects import graph as g
from dlpc.reference.graph import run_reference
from dlpc.universe import PASSES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, g.Graph):
        ctx.load_dialect(dialect)
    return ctx


def parse(src: str) -> ModuleOp:
    module = Parser(context(), src).parse_module()
    module.verify()
    return module


def run_passes(module: ModuleOp, spec: str) -> ModuleOp:
    available = {**get_all_passes(), **PASSES}
    PassPipeline.parse_spec(available, spec).apply(context(), module)
    module.verify()
    return module


def random_array(ty: TensorType, rng: np.random.Generator, positive: bool = False):
    dtype = np.dtype(g.numpy_dtype(ty.get_element_type()))
    shape = ty.get_shape()
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-8, 8, shape).astype(dtype)
    if positive:
        return rng.uniform(0.5, 1.5, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def random_weights(module: ModuleOp, rng) -> dict[str, np.ndarray]:
    return {
        op.pname: random_array(op.output.type, rng, positive="var" in op.pname)
        for op in module.walk()
        if isinstance(op, g.ParamOp)
    }


def main_inputs(module: ModuleOp, rng, positive=False) -> list[np.ndarray]:
    fn = next(op for op in module.walk() if op.name == "func.func")
    return [random_array(a.type, rng, positive) for a in fn.body.block.args]


def count(module: ModuleOp, name: str) -> int:
    return sum(1 for op in module.walk() if op.name == name)


def check(
    src: str | ModuleOp, spec: str, weights=None, positive=False, rtol=1e-4, atol=1e-5
) -> ModuleOp:
    """Run `spec` on the module; assert reference outputs agree; return the result."""
    module = parse(src) if isinstance(src, str) else src
    rng = np.random.default_rng(0)
    weights = random_weights(module, rng) if weights is None else weights
    inputs = main_inputs(module, rng, positive)
    before = run_reference(module, inputs, weights)
    run_passes(module, spec)
    after = run_reference(module, inputs, weights)
    assert len(before) == len(after)
    for b, a in zip(before, after):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return module


# ------------------------------------------------------------------ infer-shapes

STALE = """
func.func @main(%x: tensor<2x8xf32>) -> tensor<1x1xf32> {
  %w = graph.param "w" : tensor<8x4xf32>
  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<1x1xf32>
  %r = graph.relu %y : (tensor<1x1xf32>) -> tensor<1x1xf32>
  func.return %r : tensor<1x1xf32>
}
"""


def test_infer_shapes_repairs_types_and_signature():
    module = Parser(context(), STALE).parse_module()  # does not verify before
    run_passes(module, "graph-infer-shapes")
    fn = next(op for op in module.walk() if op.name == "func.func")
    assert fn.function_type.outputs.data[0] == g.tensor_type((2, 4))
    w = {"w": np.ones((8, 4), np.float32)}
    (out,) = run_reference(module, [np.ones((2, 8), np.float32)], w)
    np.testing.assert_allclose(out, np.full((2, 4), 8.0))


def test_infer_shapes_keeps_consistent_module():
    module = check(SIMPLIFY, "graph-infer-shapes")
    assert count(module, "graph.neg") == 2


# ---------------------------------------------------------------- fold-constants

FOLD = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = graph.constant dense<16.0> : tensor<f32>
  %b = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %c = graph.mul %a, %b : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %d = graph.reshape %c {shape = array<i64: 2, 2>} : (tensor<4xf32>) -> tensor<2x2xf32>
  %e = graph.transpose %d : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %f = graph.reshape %e {shape = array<i64: 4>} : (tensor<2x2xf32>) -> tensor<4xf32>
  %y = graph.mul %x, %f : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %w = graph.param "w" : tensor<4xf32>
  %v = graph.add %w, %a : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %z = graph.add %y, %v : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}
"""


def test_fold_constants():
    module = check(FOLD, "graph-fold-constants")
    assert count(module, "graph.transpose") == count(module, "graph.reshape") == 0
    assert count(module, "graph.constant") == 2  # the folded [16, 48, 32, 64] and %a
    assert count(module, "graph.add") == 2  # params are not folded


def test_fold_constants_size_limit():
    module = check(FOLD, "graph-fold-constants{max-elements=2}")
    # the folded value has 4 elements: the subgraph computing it stays as it was
    assert count(module, "graph.reshape") == 2 and count(module, "graph.transpose") == 1


def test_fold_params_with_bound_weights():
    from dlpc.passes.graph.fold_constants import fold_params

    module = parse(FOLD)
    rng = np.random.default_rng(1)
    weights = random_weights(module, rng)
    inputs = main_inputs(module, rng)
    before = run_reference(module, inputs, weights)
    new_weights = fold_params(module, weights, max_elements=2)
    module.verify()
    names = {op.pname for op in module.walk() if isinstance(op, g.ParamOp)}
    assert names == {"folded.0", "folded.1"}  # the 4-element constant chain and w + 16
    assert count(module, "graph.add") == 1
    np.testing.assert_allclose(run_reference(module, inputs, new_weights)[0], before[0])


# ---------------------------------------------------------------------- simplify

SIMPLIFY = """
func.func @main(%x: tensor<2x3xf32>, %v: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3x2xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %z = graph.constant dense<0.0> : tensor<2x3xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %c = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %a = graph.add %x, %z : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %b = graph.mul %one, %a : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %v1 = graph.mul %v, %one : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %bb = graph.add %v1, %z : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %n = graph.neg %b : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %nn = graph.neg %n : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = graph.transpose %nn {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %tt = graph.transpose %t {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %d = graph.div %tt, %c : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r = graph.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.log %r : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %e = graph.exp %l : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %r1 = graph.reshape %e {shape = array<i64: 3, 2>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %r2 = graph.reshape %r1 {shape = array<i64: 6>} : (tensor<3x2xf32>) -> tensor<6xf32>
  %s = graph.slice %d {starts = array<i64: 0, 0>, ends = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %p = graph.pad %s {pads = array<i64: 0, 0, 0, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %xx = graph.sub %p, %p : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %x0 = graph.mul %x, %z : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %bb, %d, %t, %e, %r2, %xx, %x0 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<3x2xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}
"""


def test_simplify():
    module = check(SIMPLIFY, "graph-simplify")
    for name in (
        "graph.neg",
        "graph.div",
        "graph.exp",
        "graph.log",
        "graph.slice",
        "graph.pad",
        "graph.sub",
    ):
        assert count(module, name) == 0, name
    assert count(module, "graph.transpose") == 1 and count(module, "graph.reshape") == 1
    assert count(module, "graph.add") == 0  # v + 0 broadcast -> graph.broadcast
    assert count(module, "graph.mul") == 1  # the reciprocal multiplication


def test_simplify_not_assuming_finite_keeps_x_minus_x():
    module = check(SIMPLIFY, "graph-simplify{assume-finite=false}")
    assert count(module, "graph.sub") == 1 and count(module, "graph.mul") == 2


def test_simplify_exp_log_needs_nonnegative_input():
    src = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %l = graph.log %x : (tensor<4xf32>) -> tensor<4xf32>
  %e = graph.exp %l : (tensor<4xf32>) -> tensor<4xf32>
  func.return %e : tensor<4xf32>
}
"""
    module = check(src, "graph-simplify", positive=True)
    assert count(module, "graph.exp") == 1  # x may be negative: exp(log(x)) is nan there


# -------------------------------------------------------------------- substitute

SUBSTITUTE = """
func.func @main(%x: tensor<1x3x8x8xf32>, %m: tensor<4x5xf32>, %n: tensor<4x5xf32>, %i: tensor<4xi8>) -> (tensor<1x4x6x6xf32>, tensor<4x5xf32>, tensor<5x5xf32>, tensor<4xf32>, tensor<4x5xf32>, tensor<4x9xf32>, tensor<2x4xf32>) {
  %c1 = graph.constant dense<2.0> : tensor<f32>
  %c2 = graph.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<5xf32>
  %a1 = graph.add %m, %c2 : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %a2 = graph.add %c1, %a1 : (tensor<f32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %s = graph.param "s" : tensor<3x1x1xf32>
  %xs = graph.mul %s, %x : (tensor<3x1x1xf32>, tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %b = graph.param "b" : tensor<4xf32>
  %cv = graph.conv2d %xs, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  %g = graph.param "g" : tensor<4xf32>
  %be = graph.param "be" : tensor<4xf32>
  %mu = graph.param "mu" : tensor<4xf32>
  %va = graph.param "var" : tensor<4xf32>
  %bn = graph.batch_norm %cv, %g, %be, %mu, %va : (tensor<1x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  %mt = graph.transpose %m {perm = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
  %mm = graph.matmul %mt, %n : (tensor<5x4xf32>, tensor<4x5xf32>) -> tensor<5x5xf32>
  %ci = graph.cast %i {to = i32} : (tensor<4xi8>) -> tensor<4xi32>
  %cf = graph.cast %ci {to = f32} : (tensor<4xi32>) -> tensor<4xf32>
  %t1 = graph.mul %m, %n : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %t2 = graph.mul %c2, %m : (tensor<5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %t3 = graph.mul %m, %c1 : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  %s1 = graph.add %t1, %t2 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %s2 = graph.add %s1, %t3 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %q1 = graph.add %s2, %c1 : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  %q2 = graph.add %c1, %a2 : (tensor<f32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %q = graph.add %q1, %q2 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %k = graph.constant dense<1.0> : tensor<4x2xf32>
  %k2 = graph.constant dense<3.0> : tensor<4x2xf32>
  %r1 = graph.reshape %m {shape = array<i64: 20>} : (tensor<4x5xf32>) -> tensor<20xf32>
  %r2 = graph.reshape %r1 {shape = array<i64: 4, 5>} : (tensor<20xf32>) -> tensor<4x5xf32>
  %cc = graph.concat %r2, %k, %k2 {axis = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x9xf32>
  %lw = graph.param "lw" : tensor<4x5xf32>
  %lb = graph.param "lb" : tensor<4xf32>
  %lin = graph.linear %n, %lw, %lb : (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %lin2 = graph.slice %lin {starts = array<i64: 0>, ends = array<i64: 2>} : (tensor<4x4xf32>) -> tensor<2x4xf32>
  %bn2 = graph.batch_norm %lin2, %g, %be, %mu, %va : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %bn, %q, %mm, %cf, %a2, %cc, %bn2 : tensor<1x4x6x6xf32>, tensor<4x5xf32>, tensor<5x5xf32>, tensor<4xf32>, tensor<4x5xf32>, tensor<4x9xf32>, tensor<2x4xf32>
}
"""


def test_substitute_all_rules():
    module = check(SUBSTITUTE, "graph-substitute", rtol=1e-4, atol=1e-4)
    assert count(module, "graph.batch_norm") == 1  # the one after a slice stays
    assert count(module, "graph.transpose") == 0 and count(module, "graph.cast") == 1
    assert count(module, "graph.concat") == 2


@pytest.mark.parametrize(
    "rule",
    [
        "add-constants",
        "conv-input-scale",
        "concat-constants",
        "matmul-transpose",
        "cast-cast",
        "reshape-reshape",
        "factor-common",
        "regroup-scalars",
        "fold-batch-norm",
    ],
)
def test_substitute_each_rule(rule):
    before = parse(SUBSTITUTE)
    module = check(SUBSTITUTE, f"graph-substitute{{rules={rule}}}", rtol=1e-4, atol=1e-4)
    assert str(module) != str(before), rule  # the rule must change something


def test_substitute_then_fold_params():
    from dlpc.passes.graph.fold_constants import fold_params

    module = parse(SUBSTITUTE)
    rng = np.random.default_rng(2)
    weights = random_weights(module, rng)
    inputs = main_inputs(module, rng)
    before = run_reference(module, inputs, weights)
    run_passes(module, "graph-substitute,graph-fold-constants,cse")
    weights = fold_params(module, weights)
    module.verify()
    # the conv weight and bias and the linear's are now plain folded params
    assert count(module, "graph.rsqrt") == 0 and count(module, "graph.mul") == 1
    for b, a in zip(before, run_reference(module, inputs, weights)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


# -------------------------------------------------------------------------- fuse

FUSE = """
func.func @main(%x: tensor<1x3x8x8xf32>, %t: tensor<2x4x16xf32>, %r: tensor<1x4x6x6xf32>) -> (tensor<1x4x6x6xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>) {
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %b = graph.param "b" : tensor<4x1x1xf32>
  %c = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  %a = graph.add %c, %b : (tensor<1x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<1x4x6x6xf32>
  %s = graph.add %a, %r : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %y = graph.relu %s : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %wq = graph.param "wq" : tensor<16x16xf32>
  %bq = graph.param "bq" : tensor<16xf32>
  %q = graph.linear %t, %wq, %bq : (tensor<2x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wk = graph.param "wk" : tensor<16x16xf32>
  %bk = graph.param "bk" : tensor<16xf32>
  %k = graph.linear %t, %wk, %bk : (tensor<2x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wv = graph.param "wv" : tensor<16x8xf32>
  %v = graph.matmul %t, %wv : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %wu = graph.param "wu" : tensor<16x8xf32>
  %vu = graph.matmul %t, %wu : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %vs = graph.sigmoid %vu : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %vv = graph.mul %vu, %vs : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %vw = graph.add %v, %vv : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  func.return %y, %q, %k, %vw : tensor<1x4x6x6xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>
}
"""


def test_fuse_vertical():
    module = check(FUSE, "graph-fuse{horizontal=false}")
    kernels = sorted(op.kernel_name for op in module.walk() if isinstance(op, g.FusedOp))
    assert kernels == ["conv2d_add_add_relu_0", "matmul_add_1", "matmul_sigmoid_mul_2"]
    top = list(next(op for op in module.walk() if op.name == "func.func").body.block.ops)
    assert not any(isinstance(op, g.ReluOp | g.SigmoidOp | g.AddOp) for op in top)


def test_fuse_horizontal():
    module = check(FUSE, "graph-fuse{vertical=false}")
    assert count(module, "graph.linear") == 1 and count(module, "graph.matmul") == 1
    assert count(module, "graph.concat") == 3 and count(module, "graph.slice") == 4


def test_fuse_both_then_fold_params():
    from dlpc.passes.graph.fold_constants import fold_params

    module = parse(FUSE)
    rng = np.random.default_rng(3)
    weights = random_weights(module, rng)
    inputs = main_inputs(module, rng)
    before = run_reference(module, inputs, weights)
    run_passes(module, "graph-fuse")
    weights = fold_params(module, weights)
    assert count(module, "graph.concat") == 0
    for b, a in zip(before, run_reference(module, inputs, weights)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_fuse_does_not_fuse_across_an_escaping_intermediate():
    src = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = graph.relu %m : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = graph.tanh %r : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %m, %t : tensor<4x8xf32>, tensor<4x8xf32>
}
"""
    module = check(src, "graph-fuse")
    assert [op.kernel_name for op in module.walk() if isinstance(op, g.FusedOp)] == ["relu_tanh_0"]


# ---------------------------------------------------------------------- examples

EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.dlpc")))
SINGLE_PASSES = [
    "graph-infer-shapes",
    "graph-fold-constants",
    "graph-simplify",
    "graph-substitute",
    "graph-fuse",
]


def _o_level(n: int) -> str:
    """The graph passes of -On as one pass spec (the pipeline's own list, its options;
    fold_params, which needs the weights, is left to the caller)."""
    from dlpc.passes.pipeline import FOLD_PARAMS, GRAPH_PASS_OPTIONS_BY_LEVEL, GRAPH_PASSES_BY_LEVEL

    options = GRAPH_PASS_OPTIONS_BY_LEVEL.get(n, {})

    def spec(name: str) -> str:
        opts = options.get(name, {})
        return name + ("{" + " ".join(f"{k}={v}" for k, v in opts.items()) + "}" if opts else "")

    return ",".join(spec(p) for p in GRAPH_PASSES_BY_LEVEL[n] if p != FOLD_PARAMS)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_examples_every_pass_and_o2_preserve_results(path):
    import dlpc
    from dlpc.passes.graph.fold_constants import fold_params

    model = dlpc.load(path, batch=1)
    for spec in [*SINGLE_PASSES, _o_level(2)]:
        check(dlpc.load(path, batch=1).module, spec, weights=model.weights, rtol=1e-3, atol=1e-4)
    module = dlpc.load(path, batch=1).module
    rng = np.random.default_rng(4)
    inputs = main_inputs(module, rng)
    before = run_reference(module, inputs, model.weights)
    run_passes(module, _o_level(2))
    weights = fold_params(module, model.weights)
    module.verify()
    for b, a in zip(before, run_reference(module, inputs, weights)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def test_o2_fuses_resnet_blocks_and_transformer_qkv():
    import dlpc

    resnet = run_passes(
        dlpc.load(os.path.join(ROOT, "examples", "resnet.dlpc"), batch=1).module, _o_level(2)
    )
    assert count(resnet, "graph.batch_norm") == 0
    kernels = [op.kernel_name for op in resnet.walk() if isinstance(op, g.FusedOp)]
    # conv + bn + relu: the batch norm is folded into the conv's weight and bias (the
    # stem and the stride-2 conv direct; the first 16 -> 16 conv is graph-winograd's at
    # -O2, its relu fused into the output transform)
    assert sum(k.startswith("conv2d_relu_") for k in kernels) == 2
    assert sum(k.startswith("winograd_output_transform_relu_") for k in kernels) == 1
    # + residual add: into the output transforms of the 16- and 32-channel convs that
    # graph-winograd takes at -O2
    assert sum(k.startswith("conv2d_add_relu_") for k in kernels) == 0
    assert sum(k.startswith("winograd_output_transform_add_relu_") for k in kernels) == 2
    transformer = run_passes(
        dlpc.load(os.path.join(ROOT, "examples", "transformer.dlpc"), batch=1).module, _o_level(2)
    )
    shared = [
        op
        for op in transformer.walk()
        if isinstance(op, g.LinearOp) and g.shape_of(op.results[0])[-1] == 192
    ]
    assert len(shared) == 1  # q, k and v: one linear over [192, 64] weights


# ------------------------------------------------------------------------ layout


@pytest.fixture
def nhwc_reference(monkeypatch):
    """The numpy reference, extended to `layout = "nhwc"` ops by evaluate_nhwc."""
    from dlpc.passes.graph.layout import LAYOUT_OPS, evaluate_nhwc
    from dlpc.reference import graph as ref

    for cls in LAYOUT_OPS:
        original = ref.REFERENCE[cls.name]

        def dispatch(op, *arrays, _original=original):
            if g.layout_of(op) == "nhwc":
                return evaluate_nhwc(op, list(arrays))
            return _original(op, *arrays)

        monkeypatch.setitem(ref.REFERENCE, cls.name, dispatch)


LAYOUT_EXAMPLES = [
    p for p in EXAMPLES if os.path.basename(p) in ("resnet.dlpc", "lenet.dlpc", "mobilenet.dlpc")
]


@pytest.mark.parametrize("path", LAYOUT_EXAMPLES, ids=os.path.basename)
def test_layout_nhwc_examples(path, nhwc_reference):
    import dlpc

    model = dlpc.load(path, batch=1)
    module = check(
        model.module,
        "graph-layout{to=nhwc},graph-simplify",
        weights=model.weights,
        rtol=1e-4,
        atol=1e-5,
    )
    layout_ops = [op for op in module.walk() if isinstance(op, g.Conv2DOp | g.BatchNormOp)]
    assert layout_ops and all(g.layout_of(op) == "nhwc" for op in layout_ops)
    assert count(module, "graph.transpose") <= 2  # the model's borders only


def test_layout_round_trip_and_o2(nhwc_reference):
    import dlpc

    model = dlpc.load(os.path.join(ROOT, "examples", "resnet.dlpc"), batch=1)
    module = check(
        model.module,
        "graph-layout{to=nhwc},graph-layout{to=nchw},graph-simplify",
        weights=model.weights,
        rtol=1e-4,
        atol=1e-5,
    )
    assert count(module, "graph.transpose") == 0
    module = check(
        dlpc.load(model.path, batch=1).module,
        f"graph-layout{{to=nhwc}},{_o_level(2)}",
        weights=model.weights,
        rtol=1e-3,
        atol=1e-4,
    )
    assert count(module, "graph.batch_norm") == 0  # folding works in NHWC too


def test_cse_and_dce_work_on_graph_ops():
    src = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c1 = graph.constant dense<2.0> : tensor<4xf32>
  %c2 = graph.constant dense<2.0> : tensor<4xf32>
  %a = graph.mul %x, %c1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = graph.mul %x, %c2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %dead = graph.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %y = graph.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""
    module = check(src, "cse,dce")
    assert count(module, "graph.mul") == 1 and count(module, "graph.constant") == 1
    assert count(module, "graph.exp") == 0


# ----------------------------------------------------------- random graphs (O2)

T = "tensor<4x8xf32>"


def random_graph(seed: int) -> str:
    """A random DAG of elementwise ops, matmuls, linears, transposes, reshapes and
    constants (0, 1 and others) over 4x8 values, in the shapes the rules look for."""
    rng = np.random.default_rng(seed)
    lines = [
        '%w = graph.param "w" : tensor<8x8xf32>',
        '%b = graph.param "b" : tensor<8xf32>',
        '%w2 = graph.param "w2" : tensor<8x8xf32>',
        "%zero = graph.constant dense<0.0> : tensor<f32>",
        "%one = graph.constant dense<1.0> : tensor<f32>",
        "%c = graph.constant dense<[1.0, 2.0, 0.5, 4.0, 1.0, 2.0, 0.5, 4.0]> : tensor<8xf32>",
    ]
    pool = ["%x", "%y"]
    statics = ["%zero", "%one", "%c", "%b"]

    def pick():
        return pool[rng.integers(len(pool))]

    for i in range(14):
        v, kind = f"%v{i}", rng.integers(9)
        a, b = pick(), pick()
        if kind == 0:
            op = ["add", "sub", "mul"][rng.integers(3)]
            lines.append(f"{v} = graph.{op} {a}, {b} : ({T}, {T}) -> {T}")
        elif kind == 1:
            s = statics[rng.integers(len(statics))]
            st = "tensor<8xf32>" if s in ("%c", "%b") else "tensor<f32>"
            op = ["add", "mul", "div", "sub"][rng.integers(4)]
            if op == "div" and s == "%zero":
                op = "mul"
            lhs, rhs, lt, rt = (
                (a, s, T, st) if rng.random() < 0.5 or op in ("div", "sub") else (s, a, st, T)
            )
            lines.append(f"{v} = graph.{op} {lhs}, {rhs} : ({lt}, {rt}) -> {T}")
        elif kind == 2:
            op = ["neg", "relu", "tanh", "sigmoid"][rng.integers(4)]
            lines.append(f"{v} = graph.{op} {a} : ({T}) -> {T}")
        elif kind == 3:
            lines.append(f"{v} = graph.matmul {a}, %w : ({T}, tensor<8x8xf32>) -> {T}")
        elif kind == 4:
            lines.append(
                f"{v} = graph.linear {a}, %w2, %b : ({T}, tensor<8x8xf32>, tensor<8xf32>) -> {T}"
            )
        elif kind == 5:
            lines.append(f"{v}t = graph.transpose {a} : ({T}) -> tensor<8x4xf32>")
            lines.append(f"{v} = graph.transpose {v}t : (tensor<8x4xf32>) -> {T}")
        elif kind == 6:
            lines.append(
                f"{v}r = graph.reshape {a} {{shape = array<i64: 32>}} : ({T}) -> tensor<32xf32>"
            )
            lines.append(
                f"{v} = graph.reshape {v}r {{shape = array<i64: 4, 8>}} : (tensor<32xf32>) -> {T}"
            )
        elif kind == 7:
            lines.append(f"{v}t = graph.transpose {a} : ({T}) -> tensor<8x4xf32>")
            lines.append(
                f"{v} = graph.matmul {v}t, %w {{transpose_a = true}} : "
                f"(tensor<8x4xf32>, tensor<8x8xf32>) -> {T}"
            )
        else:
            lines.append(f"{v}r = graph.relu {a} : ({T}) -> {T}")
            lines.append(f"{v}l = graph.log {v}r : ({T}) -> {T}")
            lines.append(f"{v} = graph.exp {v}l : ({T}) -> {T}")
        pool.append(v)
    outs = [pool[-1], pool[-2], pool[2 + rng.integers(len(pool) - 2)]]
    body = "\n  ".join(lines)
    return (
        f"func.func @main(%x: {T}, %y: {T}) -> ({T}, {T}, {T}) {{\n  {body}\n"
        f"  func.return {', '.join(outs)} : {T}, {T}, {T}\n}}\n"
    )


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs_o2_preserves_results(seed):
    from dlpc.passes.graph.fold_constants import fold_params

    module = parse(random_graph(seed))
    rng = np.random.default_rng(seed)
    weights = random_weights(module, rng)
    inputs = main_inputs(module, rng)
    before = run_reference(module, inputs, weights)
    run_passes(module, _o_level(2))
    weights = fold_params(module, weights)
    module.verify()
    for b, a in zip(before, run_reference(module, inputs, weights)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
