"""Training steps through control flow (issue 29): a model whose forward takes a
graph.if (on a value of its input) and a graph.loop that carries a weight trains one SGD
step on every backend, and the step's gradients (read back from the update) match torch
and central differences of the reference loss."""

import numpy as np
import pytest

import dlpc
from dlpc.model import Model
from dlpc.passes import pipeline
from dlpc.reference import graph as ref

# h = relu(x @ w) if sum(x) > 0 else tanh(x @ v); then 3 times h = tanh(h @ w)
T = "tensor<2x4xf32>"
W = "tensor<4x4xf32>"
TEXT = f"""
func.func @main(%x: {T}) -> {T} {{
  %w = graph.param "w" : {W}
  %v = graph.param "v" : {W}
  %s = graph.reduce_sum %x : ({T}) -> tensor<f32>
  %z = graph.constant dense<0.0> : tensor<f32>
  %c = graph.compare %s, %z {{predicate = "gt"}} : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %r = graph.if %c, %x, %w, %v : (tensor<i1>, {T}, {W}, {W}) -> ({T}) {{
  ^bb0(%a: {T}, %p: {W}, %q: {W}):
    %0 = graph.matmul %a, %p : ({T}, {W}) -> {T}
    %1 = graph.relu %0 : ({T}) -> {T}
    graph.yield %1 : {T}
  }} else {{
  ^bb0(%a: {T}, %p: {W}, %q: {W}):
    %0 = graph.matmul %a, %q : ({T}, {W}) -> {T}
    %1 = graph.tanh %0 : ({T}) -> {T}
    graph.yield %1 : {T}
  }}
  %t = graph.constant dense<true> : tensor<i1>
  %l:2 = graph.loop %t, %r, %w {{trip_count = 3 : i64}} : (tensor<i1>, {T}, {W}) -> ({T}, {W}) {{
  ^bb0(%i: tensor<i64>, %h: {T}, %m: {W}):
    %0 = graph.matmul %h, %m : ({T}, {W}) -> {T}
    %1 = graph.tanh %0 : ({T}) -> {T}
    %g = graph.constant dense<true> : tensor<i1>
    graph.yield %g, %1, %m : tensor<i1>, {T}, {W}
  }}
  func.return %l#0 : {T}
}}
"""

LR = 0.5
RNG = np.random.default_rng(0)
W0 = (RNG.standard_normal((4, 4)) * 0.6).astype(np.float32)
V0 = (RNG.standard_normal((4, 4)) * 0.6).astype(np.float32)
Y = RNG.standard_normal((2, 4)).astype(np.float32)
X = np.abs(RNG.standard_normal((2, 4))).astype(np.float32)


def torch_grads(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    torch = pytest.importorskip("torch")
    tw, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (W0, V0))
    tx = torch.tensor(x, dtype=torch.float64)
    h = torch.relu(tx @ tw) if x.sum() > 0 else torch.tanh(tx @ tv)
    for _ in range(3):
        h = torch.tanh(h @ tw)
    torch.nn.functional.mse_loss(h, torch.tensor(Y, dtype=torch.float64)).backward()
    dv = tv.grad.numpy() if tv.grad is not None else np.zeros_like(V0, np.float64)
    return tw.grad.numpy(), dv


def reference_loss(x: np.ndarray, weights: dict) -> float:
    (h,) = ref.run_reference(pipeline.parse_module(TEXT), [x], weights)
    return float(np.mean((h.astype(np.float64) - Y) ** 2))


@pytest.mark.parametrize("sign", [1, -1], ids=["then", "else"])
@pytest.mark.parametrize("target", ["numpy", "c", "opencl", "dlp"])
def test_a_training_step_through_if_and_loop(target, sign):
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    x = X * sign
    model = Model(pipeline.parse_module(TEXT), {"w": W0.copy(), "v": V0.copy()}, "cf")
    trainer = dlpc.train.Trainer(model, "mse", dlpc.optim.SGD(lr=LR), batch_size=2, target=target)
    loss = trainer.step(x, Y)
    assert abs(loss - reference_loss(x, {"w": W0, "v": V0})) < 1e-5
    dw = (W0 - trainer.weights["w"]) / LR
    dv = (V0 - trainer.weights["v"]) / LR
    tw, tv = torch_grads(x)
    np.testing.assert_allclose(dw, tw, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(dv, tv, rtol=1e-3, atol=1e-5)
    assert np.abs(dw).max() > 1e-3 and (np.abs(dv).max() > 1e-3) == (sign < 0)
    for name, grad, idx in (("w", dw, (1, 2)), ("v", dv, (3, 0)), ("w", dw, (0, 3))):
        hi = {"w": W0.astype(np.float64), "v": V0.astype(np.float64)}
        lo = {k: a.copy() for k, a in hi.items()}
        hi[name][idx] += 1e-3
        lo[name][idx] -= 1e-3
        as32 = lambda d: {k: a.astype(np.float32) for k, a in d.items()}  # noqa: E731
        fd = (reference_loss(x, as32(hi)) - reference_loss(x, as32(lo))) / 2e-3
        assert abs(fd - grad[idx]) < 2e-3 + 2e-2 * abs(fd), (name, idx, fd, grad[idx])
