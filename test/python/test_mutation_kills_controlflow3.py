"""Tests written against mutants of the control-flow area (issue 35, third round):
graph.loop's bufferisation on C (carried values permuted through temporaries, a while
loop without a bound, no iteration, an if nested in a loop body), the gradients of
graph.if and graph.loop against closed forms (an early exit, an integer carried value,
an unused result), and the ONNX If / Loop / Scan import against onnxruntime and its
diagnostics."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.model import Model
from dlpc.passes import pipeline
from dlpc.reference import graph as ref


def _model(text: str) -> Model:
    return Model(pipeline.parse_module(text))


def _check(got, want, rtol=1e-5, atol=1e-6):
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol, err_msg=k)


# ------------------------------------------------------------------ te-to-loop on C

# (a, b) <- (b, a + b) for trip_count iterations (a permutation of the carried values),
# and a third carried value that swaps with nothing
FIB = """
func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>, %c: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %t = graph.constant dense<true> : tensor<i1>
  %r:3 = graph.loop %t, %a, %b, %c {trip_count = TRIPS : i64} : (tensor<i1>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<3xf32>, %y: tensor<3xf32>, %z: tensor<3xf32>):
    %s = graph.add %x, %y : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %g = graph.constant dense<true> : tensor<i1>
    graph.yield %g, %y, %s, %z : tensor<i1>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
  func.return %r#0, %r#1, %r#2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
"""


def _fib(a, b, n):
    for _ in range(n):
        a, b = b, a + b
    return a, b


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_loop_permuting_its_carried_values_on_c(trips):
    a = np.array([0.0, 1.0, 2.0], np.float32)
    b = np.array([1.0, 1.0, -1.0], np.float32)
    c = np.array([7.0, 8.0, 9.0], np.float32)
    m = _model(FIB.replace("TRIPS", str(trips)))
    want = [*_fib(a, b, trips), c]
    _check(ref.run_reference(m.module, [a, b, c], {}), want)
    _check(dlpc.compile(m, target="c")(a, b, c), want)
    # the inputs are never written (the loop copies them into its carried buffers)
    assert a.tolist() == [0.0, 1.0, 2.0] and b.tolist() == [1.0, 1.0, -1.0]


# while (x < limit) x = x * 2 + i, without a trip_count; an if in the body adds i to a
# sum on odd iterations (p, carried, flips between 0 and 1)
WHILE = """
func.func @main(%x: tensor<f32>, %limit: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %go = graph.compare %x, %limit {predicate = "lt"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %z = graph.constant dense<0.0> : tensor<f32>
  %r:4 = graph.loop %go, %x, %limit, %z, %z : (tensor<i1>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  ^bb0(%i: tensor<i64>, %v: tensor<f32>, %l: tensor<f32>, %odd: tensor<f32>, %p: tensor<f32>):
    %two = graph.constant dense<2.0> : tensor<f32>
    %one = graph.constant dense<1.0> : tensor<f32>
    %half = graph.constant dense<0.5> : tensor<f32>
    %fi = graph.cast %i {to = f32} : (tensor<i64>) -> tensor<f32>
    %d = graph.mul %v, %two : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %n = graph.add %d, %fi : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %even = graph.compare %p, %half {predicate = "lt"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %o = graph.if %even, %odd, %fi : (tensor<i1>, tensor<f32>, tensor<f32>) -> (tensor<f32>) {
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      graph.yield %a : tensor<f32>
    } else {
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = graph.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
      graph.yield %s : tensor<f32>
    }
    %p2 = graph.sub %one, %p : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %more = graph.compare %n, %l {predicate = "lt"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    graph.yield %more, %n, %l, %o, %p2 : tensor<i1>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
  func.return %r#0, %r#2 : tensor<f32>, tensor<f32>
}
"""


def _while(x, limit):
    i, odd = 0, 0.0
    while x < limit:
        x = x * 2 + i
        odd += i if i % 2 else 0
        i += 1
    return [np.float32(x), np.float32(odd)]


@pytest.mark.parametrize("x,limit", [(5.0, 1.0), (1.0, 2.0), (1.0, 100.0), (0.5, 1e4)])
def test_while_loop_without_a_bound_on_c(x, limit):
    m = _model(WHILE)
    args = [np.array(x, np.float32), np.array(limit, np.float32)]
    want = _while(x, limit)
    _check(ref.run_reference(m.module, args, {}), want)
    _check(dlpc.compile(m, target="c")(*args), want)


# ------------------------------------------------------------------ gradients

# three iterations at most of x <- x * w, s <- s + sum(x), stopped once s >= limit;
# an integer carried value counts them; loss = s + sum(x)
LOOP_GRAD = """
func.func @main(%a: tensor<4xf32>, %w: tensor<4xf32>, %limit: tensor<f32>) -> tensor<f32> {
  %t = graph.constant dense<true> : tensor<i1>
  %z = graph.constant dense<0.0> : tensor<f32>
  %k0 = graph.constant dense<0> : tensor<i64>
  %r:5 = graph.loop %t, %k0, %a, %z, %w, %limit {trip_count = 3 : i64} : (tensor<i1>, tensor<i64>, tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<f32>) -> (tensor<i64>, tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<f32>) {
  ^bb0(%i: tensor<i64>, %k: tensor<i64>, %x: tensor<4xf32>, %s: tensor<f32>, %m: tensor<4xf32>, %l: tensor<f32>):
    %x2 = graph.mul %x, %m : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %q = graph.reduce_sum %x2 : (tensor<4xf32>) -> tensor<f32>
    %s2 = graph.add %s, %q : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %one = graph.constant dense<1> : tensor<i64>
    %k2 = graph.add %k, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %go = graph.compare %s2, %l {predicate = "lt"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    graph.yield %go, %k2, %x2, %s2, %m, %l : tensor<i1>, tensor<i64>, tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<f32>
  }
  %q = graph.reduce_sum %r#1 : (tensor<4xf32>) -> tensor<f32>
  %l = graph.add %q, %r#2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
"""


def _grads(text: str, inputs, target: str | None = None):
    from dlpc.passes.train.autodiff import differentiate

    module = pipeline.parse_module(text)
    differentiate(module, wrt_inputs=True)
    module.verify()
    got = ref.run_reference(module, inputs, {})
    if target is not None:
        _check(dlpc.compile(Model(module), target=target)(*inputs), got, rtol=1e-4, atol=1e-5)
    return got


@pytest.mark.parametrize("limit,runs", [(1e9, 3), (1.0, 2), (-1.0, 1)])
def test_loop_gradient_of_an_early_exit(limit, runs):
    """After n iterations x = a w^n and s = sum(a (w + ... + w^n)): d/da and d/dw of
    s + sum(x) in closed form; the limit stops the loop after 1, 2 or 3 iterations."""
    a = np.array([0.5, 1.0, 0.25, 2.0], np.float32)
    w = np.array([1.0, 0.5, 2.0, 1.5], np.float32)
    if runs == 2:  # s after one iteration below the limit, after two above it
        limit = float((a * w).sum()) + 0.5
    loss, da, dw, dl = _grads(LOOP_GRAD, [a, w, np.array(limit, np.float32)], "c")
    pw = [w**k for k in range(runs + 1)]
    want_loss = sum((a * pw[k]).sum() for k in range(1, runs + 1)) + (a * pw[runs]).sum()
    want_da = sum(pw[1 : runs + 1]) + pw[runs]
    want_dw = a * (sum(k * pw[k - 1] for k in range(1, runs + 1)) + runs * pw[runs - 1])
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(da, want_da, rtol=1e-5)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-5)
    assert float(dl) == 0.0


# an if with two float results (one unused by the loss) and an integer input
IF_GRAD = """
func.func @main(%c: tensor<i1>, %a: tensor<3xf32>, %n: tensor<i64>, %b: tensor<3xf32>) -> tensor<f32> {
  %r:3 = graph.if %c, %n, %a, %b : (tensor<i1>, tensor<i64>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<i64>, tensor<3xf32>) {
  ^bb0(%k: tensor<i64>, %x: tensor<3xf32>, %y: tensor<3xf32>):
    %p = graph.mul %x, %y : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %e = graph.exp %x : (tensor<3xf32>) -> tensor<3xf32>
    graph.yield %p, %k, %e : tensor<3xf32>, tensor<i64>, tensor<3xf32>
  } else {
  ^bb0(%k: tensor<i64>, %x: tensor<3xf32>, %y: tensor<3xf32>):
    %q = graph.mul %y, %y : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    graph.yield %q, %k, %x : tensor<3xf32>, tensor<i64>, tensor<3xf32>
  }
  %s = graph.reduce_sum %r#0 : (tensor<3xf32>) -> tensor<f32>
  %u = graph.reduce_sum %r#2 : (tensor<3xf32>) -> tensor<f32>
  %two = graph.constant dense<2.0> : tensor<f32>
  %v = graph.mul %u, %two : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %l = graph.add %s, %v : (tensor<f32>, tensor<f32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
"""


@pytest.mark.parametrize("c", [True, False])
def test_if_gradient_with_two_float_results_and_an_integer(c):
    a = np.array([0.5, -1.0, 0.25], np.float32)
    b = np.array([2.0, 3.0, -1.0], np.float32)
    outs = _grads(IF_GRAD, [np.array(c), a, np.array(4, np.int64), b])
    loss, da, db = outs[0], outs[1], outs[-1]
    if c:  # sum(a b) + 2 sum(exp a)
        np.testing.assert_allclose(loss, (a * b).sum() + 2 * np.exp(a).sum(), rtol=1e-5)
        np.testing.assert_allclose(da, b + 2 * np.exp(a), rtol=1e-5)
        np.testing.assert_allclose(db, a, rtol=1e-5)
    else:  # sum(b b) + 2 sum(a)
        np.testing.assert_allclose(loss, (b * b).sum() + 2 * a.sum(), rtol=1e-5)
        np.testing.assert_allclose(da, np.full(3, 2.0), rtol=1e-5)
        np.testing.assert_allclose(db, 2 * b, rtol=1e-5)


# only the first result reaches the loss: the second's cotangent is zeros
IF_ONE = """
func.func @main(%c: tensor<i1>, %a: tensor<3xf32>) -> tensor<f32> {
  %r:2 = graph.if %c, %a : (tensor<i1>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  ^bb0(%x: tensor<3xf32>):
    %p = graph.mul %x, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    graph.yield %p, %x : tensor<3xf32>, tensor<3xf32>
  } else {
  ^bb0(%x: tensor<3xf32>):
    %e = graph.exp %x : (tensor<3xf32>) -> tensor<3xf32>
    graph.yield %x, %e : tensor<3xf32>, tensor<3xf32>
  }
  %s = graph.reduce_sum %r#0 : (tensor<3xf32>) -> tensor<f32>
  func.return %s : tensor<f32>
}
"""


@pytest.mark.parametrize("c", [True, False])
def test_if_gradient_of_one_used_result(c):
    a = np.array([0.5, -1.0, 3.0], np.float32)
    loss, da = _grads(IF_ONE, [np.array(c), a])
    np.testing.assert_allclose(da, 2 * a if c else np.ones(3), rtol=1e-6)


# ------------------------------------------------------------------ ONNX import

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

F = TensorProto.FLOAT


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _save(graph, tmp_path, opset=13):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    return model, path


def _against_ort(model, path, feeds: dict, target="numpy"):
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = dlpc.compile(dlpc.load(path), target=target)(*feeds.values())
    got = list(got) if isinstance(got, list | tuple) else [got]
    _check(got, want, rtol=1e-5, atol=1e-6)
    return got


def _if_graph(cond_init=None, cond_shape=(), else_type=F):
    then = helper.make_graph(
        [helper.make_node("Mul", ["x", "y"], ["t"])], "then", [], [_vi("t", [3])]
    )
    orelse = helper.make_graph(
        [
            helper.make_node("Sub", ["z", "y"], ["e0"]),
            helper.make_node("Cast", ["e0"], ["e"], to=else_type),
        ],
        "else",
        [],
        [_vi("e", [3], else_type)],
    )
    inputs = [_vi("x", [3]), _vi("y", [3]), _vi("z", [3])]
    init = []
    if cond_init is None:
        inputs.insert(0, _vi("c", list(cond_shape), TensorProto.BOOL))
    else:
        init = [helper.make_tensor("c", TensorProto.BOOL, [], [cond_init])]
    return helper.make_graph(
        [helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=orelse)],
        "g",
        inputs,
        [_vi("out", [3])],
        initializer=init,
    )


@pytest.mark.parametrize("c", [True, False])
def test_onnx_if_over_the_union_of_captured_values(c, tmp_path):
    model, path = _save(_if_graph(cond_shape=(1,)), tmp_path)
    text = str(dlpc.load(path).module)
    assert "graph.if" in text
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    feeds = {"c": np.array([c]), "x": x, "y": y, "z": z}
    (got,) = _against_ort(model, path, feeds)
    np.testing.assert_allclose(got, x * y if c else z - y, rtol=1e-6)


@pytest.mark.parametrize("c", [True, False])
def test_onnx_if_on_a_constant_is_its_branch_inline(c, tmp_path):
    model, path = _save(_if_graph(cond_init=c), tmp_path)
    loaded = dlpc.load(path)
    assert "graph.if" not in str(loaded.module)
    rng = np.random.default_rng(1)
    x, y, z = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    (got,) = _against_ort(model, path, {"x": x, "y": y, "z": z})
    np.testing.assert_allclose(got, x * y if c else z - y, rtol=1e-6)


def test_onnx_if_diagnostics(tmp_path):
    _, path = _save(_if_graph(else_type=TensorProto.INT64), tmp_path)
    with pytest.raises(
        DlpcError,
        match="the branches yield different types: then \\(tensor<3xf32>\\), else \\(tensor<3xi64>\\)",
    ):
        dlpc.load(path)
    _, path = _save(_if_graph(cond_shape=(2,)), tmp_path)
    with pytest.raises(DlpcError, match="the condition must have one element, got shape \\(2,\\)"):
        dlpc.load(path)


def _scan_loop_graph(cond_start: bool, body_cond: str = "identity", missing: bool = False):
    """Loop M=3 over x <- x + 1 with a scan output of x * 2; the loop's condition starts
    at `cond_start`; the body's condition output is its input ("identity"), a constant
    true ("const"); `missing`: the body never computes its scan row."""
    nodes = [
        helper.make_node("Add", ["x_in", "one"], ["x_out"]),
        helper.make_node("Mul", ["x_out", "two"], ["row"]),
    ]
    if body_cond == "identity":
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        nodes.append(
            helper.make_node(
                "Constant",
                [],
                ["cond_out"],
                value=helper.make_tensor("v", TensorProto.BOOL, [], [True]),
            )
        )
    if missing:
        nodes = nodes[:1] + nodes[2:]
    body = helper.make_graph(
        nodes,
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("x_in", [2])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("x_out", [2]), _vi("row", [2])],
        initializer=[
            helper.make_tensor("one", F, [], [1.0]),
            helper.make_tensor("two", F, [], [2.0]),
        ],
    )
    return helper.make_graph(
        [helper.make_node("Loop", ["M", "c0", "x"], ["y", "rows"], body=body)],
        "g",
        [_vi("x", [2])],
        [_vi("y", [2]), _vi("rows", [3, 2])],
        initializer=[
            helper.make_tensor("M", TensorProto.INT64, [], [3]),
            helper.make_tensor("c0", TensorProto.BOOL, [], [cond_start]),
        ],
    )


@pytest.mark.parametrize("start,body_cond", [(True, "identity"), (True, "const")])
def test_onnx_loop_with_scan_outputs(start, body_cond, tmp_path):
    model, path = _save(_scan_loop_graph(start, body_cond), tmp_path)
    x = np.array([0.5, -2.0], np.float32)
    y, rows = _against_ort(model, path, {"x": x})
    np.testing.assert_allclose(rows, [(x + k) * 2 for k in (1, 2, 3)])
    np.testing.assert_allclose(y, x + 3)


def test_onnx_loop_diagnostics(tmp_path):
    _, path = _save(_scan_loop_graph(True, missing=True), tmp_path)
    with pytest.raises(DlpcError, match="subgraph 'body' never computes its output 'row'"):
        dlpc.load(path)


def _scan_graph(in_dir=0, out_dir=0, in_axis=0, out_axis=0, lengths=(4, 4)):
    """Scan over xs (and ys): state s <- s + x * y, scan output s; axes and directions."""
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "y"], ["p"]),
            helper.make_node("Add", ["s_in", "p"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["o"]),
        ],
        "body",
        [_vi("s_in", [2]), _vi("x", [2]), _vi("y", [2])],
        [_vi("s_out", [2]), _vi("o", [2])],
    )
    xs_shape = [lengths[0], 2] if in_axis == 0 else [2, lengths[0]]
    ys_shape = [lengths[1], 2]
    out_shape = [lengths[0], 2] if out_axis == 0 else [2, lengths[0]]
    node = helper.make_node(
        "Scan",
        ["s0", "xs", "ys"],
        ["s", "outs"],
        body=body,
        num_scan_inputs=2,
        scan_input_axes=[in_axis, 0],
        scan_input_directions=[in_dir, 0],
        scan_output_axes=[out_axis],
        scan_output_directions=[out_dir],
    )
    return helper.make_graph(
        [node],
        "g",
        [_vi("s0", [2]), _vi("xs", xs_shape), _vi("ys", ys_shape)],
        [_vi("s", [2]), _vi("outs", out_shape)],
    )


@pytest.mark.parametrize(
    "in_dir,out_dir,in_axis,out_axis", [(0, 0, 0, 0), (1, 0, 0, 1), (0, 1, 1, 0), (1, 1, -1, -1)]
)
def test_onnx_scan_axes_and_directions(in_dir, out_dir, in_axis, out_axis, tmp_path):
    model, path = _save(_scan_graph(in_dir, out_dir, in_axis, out_axis), tmp_path)
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((4, 2) if in_axis == 0 else (2, 4)).astype(np.float32)
    ys = rng.standard_normal((4, 2)).astype(np.float32)
    _against_ort(model, path, {"s0": np.zeros(2, np.float32), "xs": xs, "ys": ys})


def test_onnx_scan_of_different_lengths_is_one_line(tmp_path):
    _, path = _save(_scan_graph(lengths=(4, 3)), tmp_path)
    with pytest.raises(DlpcError, match="scan inputs have different lengths \\[3, 4\\]"):
        dlpc.load(path)


def _scan8_graph(lens: list[int] | None, batch: int = 2, length: int = 3):
    """Scan-8 (opset 8): a batch of 2, each element s <- s + x over 3 steps, scan output s."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s_in", "x"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["o"]),
        ],
        "body",
        [_vi("s_in", [2]), _vi("x", [2])],
        [_vi("s_out", [2]), _vi("o", [2])],
    )
    init = []
    if lens is not None:
        init = [helper.make_tensor("lens", TensorProto.INT64, [batch], lens)]
    node = helper.make_node(
        "Scan",
        ["lens" if lens is not None else "", "s0", "xs"],
        ["s", "outs"],
        body=body,
        num_scan_inputs=1,
    )
    return helper.make_graph(
        [node],
        "g",
        [_vi("s0", [batch, 2]), _vi("xs", [batch, length, 2])],
        [_vi("s", [batch, 2]), _vi("outs", [batch, length, 2])],
        initializer=init,
    )


@pytest.mark.parametrize("lens", [None, [3, 3]])
def test_onnx_scan8_per_batch_element(lens, tmp_path):
    model, path = _save(_scan8_graph(lens), tmp_path, opset=8)
    rng = np.random.default_rng(4)
    s0 = rng.standard_normal((2, 2)).astype(np.float32)
    xs = rng.standard_normal((2, 3, 2)).astype(np.float32)
    s, outs = dlpc.compile(dlpc.load(path), target="numpy")(s0, xs)
    np.testing.assert_allclose(outs, s0[:, None, :] + np.cumsum(xs, axis=1), rtol=1e-6)
    np.testing.assert_allclose(s, s0 + xs.sum(1), rtol=1e-6)


def test_onnx_scan8_shorter_sequence_is_one_line(tmp_path):
    _, path = _save(_scan8_graph([3, 2]), tmp_path, opset=8)
    with pytest.raises(
        DlpcError, match="Scan-8 with sequence_lens \\[3, 2\\] shorter than the scan length \\[3\\]"
    ):
        dlpc.load(path)
