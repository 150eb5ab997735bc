"""Tests written against mutants of the eager area (issue 35, third round): the tape's
accumulation over shared operands and explicit adjoints, grad-mode nesting, the
optimizers' skipped params and run-time learning rate, dlpc.jit's guard (signature and
Python values), its gradients for the wanted inputs only, and the one-line errors of each."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.eager import dispatch
from dlpc.eager import optim as eager_optim
from dlpc.runtime.device import devices


def _t(values, grad: bool = False):
    return dlpc.tensor(np.asarray(values, np.float32), requires_grad=grad)


def test_tape_sums_the_adjoints_of_a_shared_operand():
    """y = x * x + x * 3 (x used three times, one node reused twice); d/dx = 2x + 3."""
    x = _t([1.0, -2.0, 0.5], grad=True)
    a = x * x
    y = (a + x * 3.0) + a * 0.0
    y.backward(_t([1.0, 2.0, -1.0]))  # an explicit adjoint
    np.testing.assert_allclose(np.asarray(x.grad), (2 * np.array([1, -2, 0.5]) + 3) * [1, 2, -1])
    assert x.is_leaf and not a.is_leaf and a.requires_grad


def test_backward_errors_and_grad_modes():
    x = _t([1.0, 2.0], grad=True)
    y = x * 2.0
    with pytest.raises(
        DlpcError, match="^error: backward\\(\\) without a gradient needs a one-element tensor$"
    ):
        y.backward()
    with pytest.raises(
        DlpcError, match="^error: backward\\(\\) of a tensor that does not require grad$"
    ):
        _t([1.0]).backward()
    with pytest.raises(
        DlpcError, match="requires_grad_\\(False\\) on a tensor computed from others"
    ):
        y.requires_grad_(False)
    assert x.requires_grad_(True) is x
    with dlpc.no_grad():
        assert not (x * 2.0).requires_grad
        with dlpc.enable_grad():
            assert (x * 2.0).requires_grad
        assert not (x + 1.0).requires_grad
    assert (x * 2.0).requires_grad
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.shares_storage(y)


def test_optimizer_skips_params_without_grad_and_reads_lr_each_step():
    p = _t([1.0, 2.0, 3.0], grad=True)
    q = _t([5.0, 5.0], grad=True)
    opt = eager_optim.SGD([p, q], lr=0.5)
    p.grad = _t([1.0, 0.0, -2.0])
    opt.step()  # q has no gradient: unchanged
    np.testing.assert_allclose(np.asarray(p), [0.5, 2.0, 4.0])
    np.testing.assert_allclose(np.asarray(q), [5.0, 5.0])
    opt.options["lr"] = 0.25  # a run-time hyper-parameter: no new kernel
    kernels = len(eager_optim._KERNELS)
    opt.step()
    np.testing.assert_allclose(np.asarray(p), [0.25, 2.0, 4.5])
    assert len(eager_optim._KERNELS) == kernels
    opt.zero_grad()
    assert p.grad is None and q.grad is None
    for bad, message in (
        (lambda: eager_optim.SGD([], lr=0.1), "the optimizer got no params"),
        (lambda: eager_optim.SGD([p], lr=0.1, clip_norm=1.0), "take no clip_norm"),
    ):
        with pytest.raises(DlpcError, match=message):
            bad()


def test_momentum_state_is_kept_per_param():
    """SGD with momentum 0.5, two steps of gradient g: v1 = g, v2 = 1.5 g."""
    p = _t([1.0, 1.0], grad=True)
    r = _t([0.0], grad=True)
    opt = eager_optim.make("sgd", [p, r], lr=0.1, momentum=0.5)
    for _ in range(2):
        p.grad = _t([2.0, -4.0])
        r.grad = _t([1.0])
        opt.step()
    np.testing.assert_allclose(np.asarray(p), [1.0 - 0.1 * 2 * 2.5, 1.0 + 0.1 * 4 * 2.5], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(r), [-0.1 * 2.5], rtol=1e-6)


def test_jit_guard_and_errors():
    w = _t([[1.0, 2.0], [3.0, 4.0]])

    def f(x, scale):
        return (x @ w) * scale

    fast = dlpc.jit(f)
    with pytest.raises(DlpcError, match="^error: dlpc.jit: 'f' has not been called yet$"):
        _ = fast.graph
    x = _t([[1.0, 0.0]])
    np.testing.assert_allclose(np.asarray(fast(x, 2.0)), [[2.0, 4.0]])
    fast(_t([[0.0, 1.0]]), 2.0)  # same signature: no trace
    assert fast.traces == 1 and "graph.matmul" in fast.graph
    fast(x, 3.0)  # another Python value
    fast(x, 2)  # another type of the same value
    fast(_t([[1.0, 0.0], [0.0, 1.0]]), 2.0)  # another shape
    assert fast.traces == 4
    w.numpy()[...] = 0.0  # the weight is read at each call, not frozen
    np.testing.assert_allclose(np.asarray(fast(x, 2.0)), [[0.0, 0.0]])
    for call, message in (
        (lambda: dlpc.jit(lambda a: a * 2.0)(1.0), "got no tensor argument"),
        (lambda: fast(x, [1]), "argument \\[1\\] is neither a tensor nor hashable"),
        (lambda: dlpc.jit(lambda a: np.ones(2))(x), "must return traced tensors"),
        (lambda: dlpc.jit(lambda a: dlpc.jit(lambda b: b * 2.0)(a))(x), "nested traces"),
    ):
        with pytest.raises(DlpcError, match=message):
            call()
    other = dlpc.tensor(np.ones((2, 2), np.float32), device="dlp:0")
    with pytest.raises(
        DlpcError, match="a tensor the function reads is on dlp:0, its arguments on cpu"
    ):
        dlpc.jit(lambda a: a @ other)(x)


def test_jit_gradients_of_the_wanted_inputs():
    """f(x, w) = sum((x * w) * x): df/dx = 2 x w, df/dw = x^2; a weight that does not
    require grad gets none."""
    w = _t([1.0, -2.0, 3.0], grad=True)
    c = _t([10.0, 10.0, 10.0])
    fast = dlpc.jit(lambda a: ((a * w) * a + c).sum())
    x = _t([1.0, 2.0, 0.5], grad=True)
    loss = fast(x)
    assert loss.requires_grad and not loss.is_leaf
    loss.backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * np.array([1, 2, 0.5]) * [1, -2, 3])
    np.testing.assert_allclose(np.asarray(w.grad), np.array([1, 2, 0.5]) ** 2)
    assert c.grad is None
    x2 = _t([1.0, 1.0, 1.0])  # an argument without grad: only the weight's
    fast(x2).backward()
    np.testing.assert_allclose(np.asarray(w.grad), np.array([1, 2, 0.5]) ** 2 + 1.0)
    assert x2.grad is None
    with dlpc.no_grad():
        assert not fast(x).requires_grad


def test_jit_of_two_outputs_with_grad_runs_eagerly():
    w = _t([2.0, 3.0], grad=True)
    fast = dlpc.jit(lambda a: (a * w, (a + w).sum()))
    y, s = fast(_t([1.0, 1.0]))
    assert y.requires_grad and s.requires_grad
    s.backward()
    np.testing.assert_allclose(np.asarray(w.grad), [1.0, 1.0])
    with dlpc.no_grad():
        y2, s2 = fast(_t([1.0, 1.0]))
    np.testing.assert_allclose(np.asarray(y2), [2.0, 3.0])
    assert float(np.asarray(s2)) == 7.0


def test_dispatch_names():
    assert dispatch.dtype_name(np.dtype(np.int32)) == "i32"
    with pytest.raises(DlpcError, match="dtype complex64 has no graph element type"):
        dispatch.dtype_name(np.dtype(np.complex64))
    assert dispatch.freeze({"b": [1, [2]], "a": (3,)}) == (("a", (3,)), ("b", (1, (2,))))


def test_mse_loss_and_its_gradient():
    """mean((p - t)^2) and d/dp = 2 (p - t) / N (eager --seed 42 survivor ops.py:64)."""
    p = _t([[1.0, 2.0], [0.5, -1.0]], grad=True)
    t = _t([[0.0, 2.5], [0.5, 1.0]])
    loss = dlpc.ops.mse_loss(p, t)
    d = np.array([[1.0, -0.5], [0.0, -2.0]])
    np.testing.assert_allclose(float(np.asarray(loss)), (d * d).mean(), rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(np.asarray(p.grad), 2 * d / 4, rtol=1e-6)


def test_operands_by_keyword_take_their_positions():
    """linear(x, w, bias=b) and linear(x, weight=w, bias=b) are linear(x, w, b) (eager
    --seed 42 survivor tensor.py:41, which left no room for an operand past the args)."""
    x = _t([[1.0, 2.0, 3.0]])
    w = _t([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]])
    b = _t([10.0, 20.0])
    want = np.array([[1.0 - 3.0 + 10.0, 3.0 + 20.0]])
    np.testing.assert_allclose(np.asarray(dlpc.ops.linear(x, w, bias=b)), want)
    np.testing.assert_allclose(np.asarray(dlpc.ops.linear(x, weight=w, bias=b)), want)


def test_unregistering_a_user_kernel_drops_its_cached_calls():
    """After unregister_kernel the op runs dlpc's compiled kernel again, even for a
    signature the user kernel served (eager --seed 42 survivor dispatch.py:347)."""

    def plus_one(x):
        return dlpc.from_numpy(np.asarray(x) + 1.0)

    x = _t([-1.0, 2.0])
    assert np.asarray(x.exp()).tolist() == pytest.approx([np.exp(-1.0), np.exp(2.0)])
    dlpc.register_kernel("exp", "cpu", plus_one)
    try:
        assert np.asarray(x.exp()).tolist() == [0.0, 3.0]
    finally:
        dlpc.unregister_kernel("exp", "cpu")
    assert np.asarray(x.exp()).tolist() == pytest.approx([np.exp(-1.0), np.exp(2.0)])


OPENCL = [d.name for d in devices("opencl")][:1]


@pytest.mark.skipif(not OPENCL, reason="no OpenCL platform")
def test_opencl_kernels_bind_the_tensors_own_buffers():
    """An eager op on OpenCL binds its kernel's arguments to the tensors' own buffers
    (no copy through the function's buffers; eager --seed 42 survivor device_call.py:30
    BIND = False)."""
    from dlpc.runtime.device_call import DeviceCall

    x = dlpc.tensor(np.arange(4, dtype=np.float32), device=OPENCL[0])
    np.testing.assert_allclose(np.asarray(x.sqrt()), np.sqrt(np.arange(4)), rtol=1e-6)
    calls = [
        k.run.__self__
        for key, k in dispatch._CACHE.items()
        if key[0] == "sqrt" and isinstance(getattr(k.run, "__self__", None), DeviceCall)
    ]
    # (another test in the process may have made a cpu sqrt: only opencl's bind buffers)
    calls = [c for c in calls if c.device.type == "opencl"]
    assert calls and all(c.bindable for c in calls)
    assert any(c.bound[0] is not c.fn.arg_buffers[0] for c in calls)


def test_small_cpu_outputs_are_pooled():
    """A CPU kernel keeps its small outputs' blocks in a pool, handed out again once no
    tensor holds them (eager --seed 42 survivor dispatch.py:221 POOLED_BYTES = 0)."""
    x = _t(np.arange(8.0))
    first = x.tanh()
    np.testing.assert_allclose(np.asarray(first), np.tanh(np.arange(8.0)), rtol=1e-6)
    slots = [
        slot
        for key, k in dispatch._CACHE.items()
        if key[0] == "tanh"
        for slot in getattr(k, "_outs", ())
    ]
    assert slots and all(len(s.pool) == 1 for s in slots)
    del first
    again = x.tanh()
    assert all(len(s.pool) == 1 for s in slots)  # the dropped block, reused
    np.testing.assert_allclose(np.asarray(again), np.tanh(np.arange(8.0)), rtol=1e-6)
    big = _t(np.zeros(70_000)).tanh()  # 280 000 bytes: above POOLED_BYTES, never pooled
    assert big.storage.nbytes == 280_000
    slots = [
        slot
        for key, k in dispatch._CACHE.items()
        if key[0] == "tanh"
        for slot in getattr(k, "_outs", ())
        if slot.shape == (70_000,)
    ]
    assert slots and all(not s.pool for s in slots)
