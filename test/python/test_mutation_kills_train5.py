"""Tests for passes/train's lines added since the last scored sample (issue 35, seventh round,
bench/mutation.py --area train): the trigonometric and step rules, dynamic_slice's rule, the
integer ops' rules, a training batch norm's closed-form adjoint, LARS's exclusion and the
momentum-cycling probe of a scheduler factory. Gradients against central differences on
the numpy reference, in float64."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from test_autodiff import Case, _weighted_sum_module, op
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph
from dlpc.passes.pipeline import parse_module
from dlpc.passes.train.autodiff import differentiate
from dlpc.reference.graph import run_reference


def _fd(module, arrays, weights, index, eps=1e-6):
    """Central differences of the loss in input `index`, every element."""
    x = arrays[index]
    out = np.zeros(x.size)
    for k in range(x.size):
        values = []
        for sign in (1, -1):
            moved = x.copy().reshape(-1)
            moved[k] += sign * eps
            args = [*arrays[:index], moved.reshape(x.shape), *arrays[index + 1 :]]
            values.append(float(run_reference(module, args, weights)[0]))
        out[k] = (values[0] - values[1]) / (2 * eps)
    return out.reshape(x.shape)


def check_case(case: Case, arrays, tol=1e-6):
    """The gradients of sum(case(...) * r) in its float inputs against central differences."""
    module = _weighted_sum_module(case, np.random.default_rng(0))
    grad_module = module.clone()
    differentiate(grad_module, wrt_inputs=True)
    grad_module.verify()
    _, *grads = run_reference(grad_module, arrays, {})
    floats = [i for i, (_, k) in enumerate(case.specs) if k in ("f", "pos")]
    assert len(grads) == len(floats)
    for i, grad in zip(floats, grads, strict=True):
        np.testing.assert_allclose(grad, _fd(module, arrays, {}, i), rtol=tol, atol=tol)
    return grads


DOMAIN = {"asin": (-0.8, 0.8), "acos": (-0.8, 0.8), "atanh": (-0.8, 0.8), "acosh": (1.2, 3.0)}
TRIG = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]


@pytest.mark.parametrize("name", TRIG)
def test_trigonometric_rules_match_finite_differences(name):
    cls = next(c for c in graph.Graph.operations if c.name == f"graph.{name}")
    lo, hi = DOMAIN.get(name, (-1.2, 1.2))
    x = np.random.default_rng(len(name)).uniform(lo, hi, (2, 3))
    check_case(Case(name, op(cls), [((2, 3), "f")]), [x])


@pytest.mark.parametrize("name", ["floor", "ceil", "round"])
def test_step_functions_have_zero_gradient(name):
    """Piecewise constant: 0 away from the steps (as torch gives), next to a path of x."""
    cls = next(c for c in graph.Graph.operations if c.name == f"graph.{name}")
    x = np.array([[0.3, -1.2, 2.7], [-0.6, 1.1, 4.4]])
    (grad,) = check_case(
        Case(name, lambda b, v: b.add(b.op(cls, v), b.mul(v, 3.0)), [((2, 3), "f")]), [x]
    )
    np.testing.assert_allclose(grad / 3.0, _weights_of(name, x))


def _weights_of(name, x):
    """The loss's random weights r (the gradient of sum(3 x r) is 3 r)."""
    case = Case(name, lambda b, v: b.mul(v, 1.0), [(x.shape, "f")])
    module = _weighted_sum_module(case, np.random.default_rng(0))
    differentiate(module, wrt_inputs=True)
    return run_reference(module, [x], {})[1]


@pytest.mark.parametrize(
    "shape, axes, sizes, starts",
    [
        ((5, 3), (0,), (2,), [1]),
        ((5, 3), (0,), (2,), [-2]),  # from the end: row 3
        ((5, 3), (0,), (2,), [7]),  # clamped to 5 - 2
        ((5, 3), (0,), (2,), [-9]),  # clamped to 0
        ((5, 3), (1,), (2,), [1]),
        ((2, 5, 3), (1,), (1,), [4]),  # an axis in the middle
        ((5, 4), (0, 1), (2, 3), [3, -1]),
        ((5, 4), (-1, 0), (2, 1), [0, 4]),
    ],
)
def test_dynamic_slice_rule_matches_finite_differences(shape, axes, sizes, starts):
    starts = np.array(starts, np.int64)

    def build(b, x, s):
        return b.op(graph.DynamicSliceOp, x, s, axes=list(axes), sizes=list(sizes))

    x = np.random.default_rng(1).standard_normal(shape)
    check_case(Case("dynamic_slice", build, [(shape, "f"), ((len(axes),), "int5")]), [x, starts])


# ---- the integer ops take no adjoint; their float neighbours still do --------------------

INT_MODULE = """func.func @main(%x: tensor<4xf64>, %k: tensor<4xi64>, %s: tensor<f64>) -> tensor<f64> {{
  %z = graph.constant dense<3> : tensor<i8>
  %c = graph.constant dense<0.25> : tensor<f64>
  {}
  %l = graph.reduce_sum %y : (tensor<4xf64>) -> tensor<f64>
  func.return %l : tensor<f64>
}}"""

INT_BODIES = {
    "bits": """%a = graph.bit_and %k, %k : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %o = graph.bit_or %a, %k : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %e = graph.bit_xor %o, %k : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %n = graph.bit_not %e : (tensor<4xi64>) -> tensor<4xi64>
  %h = graph.shift_left %n, %k : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %r = graph.shift_right %h, %k : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %f = graph.cast %r {to = f64} : (tensor<4xi64>) -> tensor<4xf64>
  %g = graph.mul %f, %x : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  %y = graph.mul %g, %x : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>""",
    "bitcast": """%b = graph.bitcast %x {to = i64} : (tensor<4xf64>) -> tensor<4xi64>
  %t = graph.bitcast %b {to = f64} : (tensor<4xi64>) -> tensor<4xf64>
  %y = graph.mul %t, %x : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>""",
    "quantize": """%q = graph.quantize %x, %c, %z : (tensor<4xf64>, tensor<f64>, tensor<i8>) -> tensor<4xi8>
  %d = graph.dequantize %q, %c, %z : (tensor<4xi8>, tensor<f64>, tensor<i8>) -> tensor<4xf64>
  %y = graph.mul %d, %x : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>""",
}


@pytest.mark.parametrize("body", sorted(INT_BODIES))
def test_integer_ops_pass_no_adjoint(body):
    """Bit operations, shifts, bitcast and quantize: x's gradient is that of the float
    factor alone, the integer path contributes none (bits of x reread count as constants)."""
    x = np.array([0.3, -1.2, 2.71, 0.6])
    k = np.array([1, 2, 3, 5], np.int64)
    s = np.array(0.5)
    module = parse_module(INT_MODULE.format(INT_BODIES[body]))
    loss, factor = run_reference(module, [x, k, s], {})[0], None
    grad_module = module.clone()
    differentiate(grad_module, wrt_inputs=True)
    loss2, gx, gs = run_reference(grad_module, [x, k, s], {})
    assert float(loss2) == float(loss)
    if body == "bits":
        r = ((((k & k) | k) ^ k) ^ -1) << k >> k
        factor = 2 * r * x  # d/dx (r x x)
    elif body == "bitcast":
        factor = x  # d/dx (t x) with t = x's bits reread, a constant
    else:
        factor = np.clip(np.round(x / 0.25) + 3, -128, 127) * 0.25 - 0.75  # dequantized
    np.testing.assert_allclose(gx, factor, rtol=1e-12)
    assert float(gs) == 0.0  # (unused)


def test_dequantize_scale_gradient_is_refused():
    module = parse_module(
        INT_MODULE.format(
            """%q = graph.quantize %x, %s, %z : (tensor<4xf64>, tensor<f64>, tensor<i8>) -> tensor<4xi8>
  %y = graph.dequantize %q, %s, %z : (tensor<4xi8>, tensor<f64>, tensor<i8>) -> tensor<4xf64>"""
        )
    )
    with pytest.raises(DiagnosticException) as e:
        differentiate(module, wrt_inputs=True)
    assert (
        str(e.value) == "graph-autodiff: no gradient with respect to the scale of graph.dequantize"
    )


# ---- a training batch norm: the closed-form adjoint -------------------------------------

BN = """func.func @main(%x: tensor<{x}xf64>, %s: tensor<3xf64>, %b: tensor<3xf64>) -> tensor<f64> {{
  %m = graph.param "m" : tensor<3xf64>
  %v = graph.param "v" : tensor<3xf64>
  %y = graph.batch_norm %x, %s, %b, %m, %v{attrs} : (tensor<{x}xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> tensor<{x}xf64>
  %p = graph.mul %y, %y : (tensor<{x}xf64>, tensor<{x}xf64>) -> tensor<{x}xf64>
  %q = graph.mul %p, %x : (tensor<{x}xf64>, tensor<{x}xf64>) -> tensor<{x}xf64>
  %l = graph.reduce_sum %q : (tensor<{x}xf64>) -> tensor<f64>
  func.return %l : tensor<f64>
}}"""


@pytest.mark.parametrize(
    "x, attrs", [("4x3", ""), ("2x3x2x2", ""), ("2x2x2x3", ' {layout = "nhwc"}')]
)
@pytest.mark.parametrize("closed", [True, False], ids=["closed_form", "op_by_op"])
def test_training_batch_norm_gradients(x, attrs, closed):
    """step.py's batch-statistics form of graph.batch_norm, marked for the closed-form
    adjoint (or unmarked: op by op): x's, scale's and bias's gradients against central
    differences of the same function."""
    from dlpc.passes.train import _grad, step

    module = parse_module(BN.format(x=x, attrs=attrs))
    f = module.body.block.ops.first
    assert step._training_batch_norm(f) == {"m": (3,), "v": (3,)}  # type: ignore[arg-type]
    marked = [o for o in f.walk() if _grad.BN_TRAIN in o.attributes]  # type: ignore[union-attr]
    assert len(marked) == 1
    if not closed:
        del marked[0].attributes[_grad.BN_TRAIN]
    rng = np.random.default_rng(3)
    shape = tuple(int(d) for d in x.split("x"))
    arrays = [rng.standard_normal(shape), rng.uniform(0.5, 2.0, 3), rng.standard_normal(3)]
    weights = {"m": np.zeros(3), "v": np.ones(3)}
    grad_module = module.clone()
    differentiate(grad_module, wrt_inputs=True)
    grad_module.verify()
    assert not any(_grad.BN_TRAIN in o.attributes for o in grad_module.walk())
    _, gm, gv, *grads = run_reference(grad_module, arrays, weights)  # (params first)
    assert not gm.any() and not gv.any()  # (the running statistics are not used)
    for i in range(3):
        np.testing.assert_allclose(grads[i], _fd(module, arrays, weights, i), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "form", ["bias_not_reshaped", "scale_not_reshaped", "not_normalised", "not_centred", "no_rsqrt"]
)
def test_marked_op_of_another_form_is_differentiated_op_by_op(form):
    """The closed form only applies to step.py's form: another op carrying the mark gets
    its own rule (the gradient still right)."""
    from dlpc.passes.train import _grad

    lines = {
        "bias_not_reshaped": "%n = graph.mul %x, %x : {t}, {t} -> {t}\n  %k = graph.reshape %s {shape = array<i64: 1, 3>} : (tensor<3xf64>) -> {t}\n"
        "  %a = graph.mul %n, %k : {t}, {t} -> {t}\n  %y = graph.add %a, %x : {t}, {t} -> {t}",
        "scale_not_reshaped": "%n = graph.mul %x, %x : {t}, {t} -> {t}\n  %k = graph.reshape %s {shape = array<i64: 1, 3>} : (tensor<3xf64>) -> {t}\n"
        "  %a = graph.mul %n, %x : {t}, {t} -> {t}\n  %y = graph.add %a, %k : {t}, {t} -> {t}",
        "not_normalised": "%n = graph.add %x, %x : {t}, {t} -> {t}\n  %k = graph.reshape %s {shape = array<i64: 1, 3>} : (tensor<3xf64>) -> {t}\n"
        "  %a = graph.mul %n, %k : {t}, {t} -> {t}\n  %y = graph.add %a, %k : {t}, {t} -> {t}",
        "not_centred": "%n = graph.mul %x, %x : {t}, {t} -> {t}\n  %k = graph.reshape %s {shape = array<i64: 1, 3>} : (tensor<3xf64>) -> {t}\n"
        "  %a = graph.mul %n, %k : {t}, {t} -> {t}\n  %y = graph.add %a, %k : {t}, {t} -> {t}",
        "no_rsqrt": "%k = graph.reshape %s {shape = array<i64: 1, 3>} : (tensor<3xf64>) -> {t}\n  %c = graph.sub %x, %k : {t}, {t} -> {t}\n"
        "  %n = graph.mul %c, %x : {t}, {t} -> {t}\n"
        "  %a = graph.mul %n, %k : {t}, {t} -> {t}\n  %y = graph.add %a, %k : {t}, {t} -> {t}",
    }[form]
    t = "tensor<1x3xf64>"
    body = lines.replace(": {t}, {t} -> {t}", ": ({t}, {t}) -> {t}").replace("{t}", t)
    text = f"""func.func @main(%x: {t}, %s: tensor<3xf64>) -> tensor<f64> {{
  {body}
  %q = graph.mul %y, %x : ({t}, {t}) -> {t}
  %l = graph.reduce_sum %q : ({t}) -> tensor<f64>
  func.return %l : tensor<f64>
}}"""
    module = parse_module(text)
    y = next(
        o for o in module.walk() if isinstance(o, graph.AddOp) and o.results[0].name_hint == "y"
    )
    from xdsl.dialects.builtin import UnitAttr

    y.attributes[_grad.BN_TRAIN] = UnitAttr()
    arrays = [np.array([[0.5, -1.5, 2.0]]), np.array([1.5, -0.5, 0.7])]
    grad_module = module.clone()
    differentiate(grad_module, wrt_inputs=True)
    _, *grads = run_reference(grad_module, arrays, {})
    for i in range(2):
        np.testing.assert_allclose(grads[i], _fd(module, arrays, {}, i), rtol=1e-6, atol=1e-6)


# ---- LARS's exclusion, the scheduler probe ------------------------------------------------


@pytest.mark.parametrize(
    "exclude, out",
    [
        (("fc1.bias", "bn.*"), ["fc1.bias", "bn.scale", "bn.bias"]),
        ("*.bias", ["fc1.bias", "bn.bias", "fc2.bias"]),
        (lambda n: n.startswith("fc2"), ["fc2.weight", "fc2.bias"]),
        ((), []),
    ],
    ids=["names", "glob", "predicate", "none"],
)
def test_lars_exclude_splits_each_group(exclude, out):
    """The excluded params of a group leave it for a group of their own after the others,
    with weight decay 0 and no adaptation; the others keep the group's options."""
    from dlpc.passes.train.optim import LARS

    names = ["fc1.weight", "fc1.bias", "bn.scale", "bn.bias", "fc2.weight", "fc2.bias"]
    opt = LARS(lr=0.2, weight_decay=0.01, exclude=exclude)
    assert [n for n in names if opt.excluded(n)] == out
    groups = opt.assign(names)
    kept = [n for n in names if n not in out]
    assert groups[0]["params"] == kept and groups[0]["weight_decay"] == 0.01
    assert groups[0].get("adapt", True) is True
    if out:
        assert len(groups) == 2
        assert sorted(groups[1]["params"]) == sorted(out)
        assert groups[1]["weight_decay"] == 0.0 and groups[1]["adapt"] is False
        assert groups[1]["lr"] == groups[0]["lr"] == 0.2
    else:
        assert len(groups) == 1


def test_lars_exclude_of_a_whole_group_drops_it_unless_declared():
    from dlpc.passes.train.optim import LARS

    groups = LARS(lr=0.2, exclude="*").assign(["a", "b"])
    assert [g["params"] for g in groups] == [["a", "b"]] and groups[0]["adapt"] is False


@pytest.mark.parametrize("bad", [3, 2.5, None])
def test_lars_exclude_of_another_kind_is_refused(bad):
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train.optim import LARS

    with pytest.raises(DlpcError) as e:
        LARS(exclude=bad)
    assert str(e.value) == (
        f"error: lars exclude must be names, glob patterns or a predicate, got {type(bad).__name__}"
    )


def test_cycles_momentum_probes_a_factory_on_a_stand_in():
    """A class or partial is read; any other callable is made on a stand-in trainer (copies
    of the groups, only lr at run time): True only where it says the momentum is compiled
    out; another error, or none, is False; without groups nothing is made."""
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train import schedule as sched

    groups = [{"lr": 0.1, "momentum": 0.0}, {"lr": 0.2, "momentum": 0.0}]
    seen = []

    def probe(trainer):
        seen.append(([dict(g) for g in trainer.param_groups], trainer.runtime_hyper()))
        trainer.param_groups[0]["lr"] = 99.0
        raise DlpcError(f"error: SGD {sched.MOMENTUM_COMPILED_OUT}; pass cycle_momentum=True")

    assert sched.cycles_momentum(probe, groups)
    assert seen == [(groups, [["lr"], ["lr"]])] and groups[0]["lr"] == 0.1
    assert not sched.cycles_momentum(probe, None) and len(seen) == 1

    def other(trainer):
        raise DlpcError("error: something else")

    def broken(trainer):
        raise ValueError(sched.MOMENTUM_COMPILED_OUT)

    assert not sched.cycles_momentum(other, groups)
    assert not sched.cycles_momentum(broken, groups)
    assert not sched.cycles_momentum(lambda t: None, groups)
    assert sched.cycles_momentum(sched.OneCycleLR, groups)
    assert sched.cycles_momentum(functools.partial(sched.OneCycleLR, max_lr=0.1), None)
    assert not sched.cycles_momentum(functools.partial(sched.StepLR, step_size=2), groups)
    assert not sched.cycles_momentum(sched.StepLR, groups)
