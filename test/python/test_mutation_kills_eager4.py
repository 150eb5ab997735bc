"""The eager layer's decisions, fourth round (issue 35, bench/mutation.py --area eager):
the device call's binding (host control flow is never bound, device copy steps follow
the bound buffers), the kernels' fast paths (a cache hit still records the tape, pooled
outputs never reused while held, strided and offset operands), the signature of a call
(numbers in the key, keyword operands), dlpc.jit's backward with a number before a tensor
argument (a KeyError before), and each one-line error."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.runtime.device import devices

OPENCL = [d.name for d in devices("opencl")][:1]
needs_opencl = pytest.mark.skipif(not OPENCL, reason="no OpenCL platform")


def _t(values, grad: bool = False):
    return dlpc.tensor(np.asarray(values, np.float32), requires_grad=grad)


# ------------------------------------------------------------------ the device call


@needs_opencl
def test_a_placed_model_with_host_control_flow_reads_each_calls_inputs():
    """graph.if on opencl: the host reads the condition from the function's own buffer,
    so its inputs are copied there, never bound (eager --seed 42 survivor
    device_call.py:90, `and` -> `or` in `bindable`); each call its own branch."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_control_flow import IF, model, plain_if

    placed = dlpc.compile(model(IF), device=OPENCL[0])
    assert not placed._call.bindable
    rng = np.random.default_rng(4)
    for c in (True, False, True, False):
        a, b = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
        ins = [np.array(c), a, b]
        got = placed(*[dlpc.tensor(v, device=OPENCL[0]) for v in ins])
        for g, w in zip(got, plain_if(*ins)):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)


COPY = """
func.func @main(%x: memref<6xf32>, %y: memref<6xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.num_outputs = 1 : i64} {
  "memref.copy"(%x, %y) : (memref<6xf32>, memref<6xf32>) -> ()
  func.return
}
"""


@needs_opencl
def test_a_device_copy_step_reads_and_writes_the_bound_tensors():
    """A function whose @main copies its input into its output (a `memref.copy` step),
    run through DeviceCall on tensors: the copy step is rewritten to the buffers bound
    for this call, the input tensor's and the output tensor's (eager --seed 42 survivor
    device_call.py:173, the rewrite skipped: the copy read the function's own buffer)."""
    from dlpc.backends.runtime.opencl_rt import OpenCLFunction
    from dlpc.passes import pipeline
    from dlpc.runtime.device import device
    from dlpc.runtime.device_call import DeviceCall

    dev = device(OPENCL[0])
    fn = OpenCLFunction(pipeline.parse_module(COPY), name="copy", device=dev.backend.cl_device, svm=False)  # type: ignore[attr-defined]  # fmt: skip
    call = DeviceCall(fn, dev)
    assert call.bindable and call.copies == [0]
    for k in range(3):
        x = np.arange(6, dtype=np.float32) * (k + 1) - 2.5
        (y,) = call.run([dlpc.tensor(x, device=OPENCL[0])], dlpc.Tensor)
        np.testing.assert_array_equal(np.asarray(y), x)
    # an input at an offset no buffer starts at is copied in, the output copied out
    big = dlpc.tensor(np.arange(7, dtype=np.float32), device=OPENCL[0])
    (y,) = call.run([big[1:]], dlpc.Tensor)
    np.testing.assert_array_equal(np.asarray(y), np.arange(1, 7, dtype=np.float32))


# ------------------------------------------------------------------ fast paths


def test_a_cache_hit_still_records_the_tape():
    """call1 / call2's inline cache hits record a node when an operand requires grad:
    the kernels made by calls without grad, then hit by calls with it."""
    a, b = np.array([1.0, -2.0, 0.5], np.float32), np.array([3.0, 0.25, -1.0], np.float32)
    _t(a).tanh(), _t(a) * _t(b), _t(a) * 2.0  # (the kernels, cached)
    x, y = _t(a, grad=True), _t(b, grad=True)
    (x.tanh() + x * y + x * 2.0).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), 1 - np.tanh(a) ** 2 + b + 2, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(y.grad), a, rtol=1e-6)


def test_only_the_second_operand_requiring_grad_records_the_call():
    """c * y, c a constant tensor, y requiring grad: y's gradient is c."""
    c, y = _t([2.0, -3.0]), _t([5.0, 7.0], grad=True)
    (c * y).sum().backward()
    assert np.asarray(y.grad).tolist() == [2.0, -3.0] and c.grad is None
    z = _t([5.0, 7.0], grad=True)
    (c - z).sum().backward()
    assert np.asarray(z.grad).tolist() == [-1.0, -1.0]


def test_a_number_operand_is_part_of_the_kernel_key():
    x = _t([1.0, 2.0])
    assert np.asarray(x + 1.0).tolist() == [2.0, 3.0]
    assert np.asarray(x + 2.0).tolist() == [3.0, 4.0]
    assert np.asarray(x * 3).tolist() == [3.0, 6.0]


def test_a_pooled_output_held_by_a_tensor_or_an_array_is_not_written_again():
    a, b = np.array([0.5, -1.0, 2.0], np.float32), np.array([3.0, 0.0, -0.25], np.float32)
    first = _t(a).exp()
    second = _t(b).exp()  # (same kernel: the pool's block of `first` is held)
    held = np.asarray(first)
    del first
    third = _t(a * 2).exp()  # (`first`'s block is held by `held`, an array over it)
    np.testing.assert_allclose(held, np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(second), np.exp(b), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(third), np.exp(a * 2), rtol=1e-6)


def test_strided_and_offset_operands_on_cpu():
    """A transposed view is copied dense for the kernel; a view at an offset passes its
    first element's address."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    x = dlpc.tensor(a)
    np.testing.assert_allclose(np.asarray(x.T.exp()), np.exp(a.T), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(x[1:].abs()), np.abs(a[1:]))
    np.testing.assert_allclose(np.asarray(x[2] * x[1]), a[2] * a[1])


# ------------------------------------------------------------------ tensors and ops


def test_tensor_defaults_to_float32_and_keeps_a_given_dtype():
    assert dlpc.tensor([1.0, 2.0]).dtype == np.float32
    assert dlpc.tensor(np.array([1.0]), dtype=np.float64).dtype == np.float64
    assert dlpc.tensor([1, 2]).dtype == np.array([1, 2]).dtype
    x = _t([1.5, -2.5])
    assert x.astype(np.float32) is x and x.float() is x
    assert np.asarray(x.astype(np.int32)).tolist() == [1, -2]


@pytest.mark.parametrize(
    "dim,keep",
    [(None, True), (None, False), (1, False), (0, True), ((0, 2), False), ([1, 2], True)],
)
def test_reductions_over_every_dim_form(dim, keep):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7
    x = dlpc.tensor(a)
    axis = tuple(dim) if isinstance(dim, list) else dim
    for got, want in [
        (x.sum(dim, keep), a.sum(axis, keepdims=keep)),
        (x.mean(dim, keep), a.mean(axis, keepdims=keep)),
        (x.amax(dim, keep), a.max(axis, keepdims=keep)),
    ]:
        got = np.asarray(got)
        assert got.shape == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_argmax_along_a_dim():
    a = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], np.float32)
    assert np.asarray(dlpc.tensor(a).argmax()).tolist() == [1, 0]
    assert np.asarray(dlpc.tensor(a).argmax(0)).tolist() == [1, 0, 1]


def test_keyword_and_list_operands():
    x, w, b = _t([[1.0, 2.0]]), _t([[1.0, 0.0], [0.0, -1.0], [2.0, 2.0]]), _t([0.5, 0.5, -1.0])
    np.testing.assert_allclose(np.asarray(dlpc.ops.linear(x, w, bias=b)), [[1.5, -1.5, 5.0]])
    np.testing.assert_allclose(np.asarray(dlpc.ops.linear(x, weight=w)), [[1.0, -2.0, 6.0]])
    got = dlpc.ops.concat([x, x * 2.0], axis=0)
    np.testing.assert_allclose(np.asarray(got), [[1.0, 2.0], [2.0, 4.0]])


def test_one_line_errors_of_a_call():
    with pytest.raises(DlpcError, match="^error: add needs at least one tensor operand$"):
        dlpc.ops.add(1.0, 2.0)
    with pytest.raises(
        DlpcError, match="^error: unknown device type 'gpu' \\(cpu, opencl, dlp\\)$"
    ):
        dlpc.register_kernel("relu", "gpu", lambda x: x)
    with pytest.raises(DlpcError, match="only floating-point tensors can require grad"):
        dlpc.tensor([1, 2]).requires_grad_(True)
    with pytest.raises(AttributeError, match="dlpc.ops has no op 'nonesuch'"):
        dlpc.ops.nonesuch  # noqa: B018


def test_a_user_kernel_returning_a_tuple_gives_every_output():
    def split(x):
        a = np.asarray(x)
        return dlpc.from_numpy(a * 2), dlpc.from_numpy(a + 1)

    dlpc.register_kernel("sinh", "cpu", split)
    try:
        y, z = dlpc.ops.sinh(_t([1.0, 2.0]))
        assert np.asarray(y).tolist() == [2.0, 4.0] and np.asarray(z).tolist() == [2.0, 3.0]
    finally:
        dlpc.unregister_kernel("sinh", "cpu")
    np.testing.assert_allclose(np.asarray(dlpc.ops.sinh(_t([1.0]))), np.sinh([1.0]), rtol=1e-6)


def test_backward_twice_from_one_shape_uses_a_fresh_seed():
    """The ones seeded for backward() are made once per shape and reused: neither call
    changes them (both gradients exact)."""
    x = _t([3.0], grad=True)
    (x * 4.0).sum().backward()
    y = _t([5.0], grad=True)
    (y * y).sum().backward()
    assert np.asarray(x.grad).tolist() == [4.0] and np.asarray(y.grad).tolist() == [10.0]


# ------------------------------------------------------------------ jit


def test_jit_gradient_of_a_tensor_after_a_number_argument():
    """A number before the tensor (the traced input is x1): its gradient, and a
    weight's (it was KeyError 'grad.x0')."""
    a = np.array([1.0, -2.0, 3.0], np.float32)
    x = _t(a, grad=True)
    w = _t([0.5, 2.0, -1.0], grad=True)
    f = dlpc.jit(lambda s, v: (v * v * w * s).sum())
    f(2.0, x).backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * a * np.array([0.5, 2.0, -1.0]) * 2)
    np.testing.assert_allclose(np.asarray(w.grad), a * a * 2)
    g = dlpc.jit(lambda v, s: (v * s).sum())  # (the tensor first: x0, as before)
    y = _t(a, grad=True)
    g(y, 3.0).backward()
    assert np.asarray(y.grad).tolist() == [3.0, 3.0, 3.0]


def test_a_mask_from_a_comparison_carries_no_gradient():
    """(x > 0) is bool and records no node (torch's rule); the float mask times x
    differentiates to the mask."""
    x = _t([1.5, -2.0, 0.0, 3.0], grad=True)
    m = x > 0
    assert m.dtype == np.bool_ and not m.requires_grad and m.is_leaf
    (m.float() * x).sum().backward()
    assert np.asarray(x.grad).tolist() == [1.0, 0.0, 0.0, 1.0]


def test_zero_in_place_and_dlpack_sharing():
    p = _t([1.0, 2.0])
    before = p._version
    assert p.zero_() is p and np.asarray(p).tolist() == [0.0, 0.0]
    assert p._version == before + 1  # (torch's version counter: one in-place write)
    a = np.arange(3, dtype=np.float32)
    t = dlpc.from_dlpack(a)
    a[0] = 5.0
    assert np.asarray(t).tolist() == [5.0, 1.0, 2.0]


def test_repr_of_a_tensor():
    x = _t([1.0, -2.5], grad=True)
    assert repr(x) == "tensor([ 1. , -2.5], device='cpu', requires_grad=True)"
    assert repr(_t([3.0])) == "tensor([3.], device='cpu')"


# ------------------------------------------------------------------ seed 43


def test_a_trailing_none_operand_drops_only_itself():
    """linear(x, w, None): the omitted bias is dropped, the weight kept (two dropped at
    once lost it)."""
    x, w = _t([[1.0, 2.0]]), _t([[1.0, 0.0], [0.0, -1.0], [2.0, 2.0]])
    np.testing.assert_allclose(np.asarray(dlpc.ops.linear(x, w, None)), [[1.0, -2.0, 6.0]])
    np.testing.assert_allclose(np.asarray(dlpc.ops.linear(x, w, bias=None)), [[1.0, -2.0, 6.0]])


def test_full_requires_no_grad_unless_asked():
    assert not dlpc.full((2,), 3.0).requires_grad
    ints = dlpc.full((2,), 3, dtype=np.int32)  # (an integer tensor cannot require grad)
    assert ints.dtype == np.int32 and np.asarray(ints).tolist() == [3, 3]
    assert dlpc.full((2,), 1.0, requires_grad=True).requires_grad


@needs_opencl
def test_an_operand_used_on_another_stream_is_recorded_there():
    """A tensor of the default stream read by a kernel on a second stream: its block
    lists that stream (freeing it then waits for the stream's work); one read on its own
    stream lists none."""
    from dlpc.runtime import device as rt

    dev = rt.device(OPENCL[0])
    x = dlpc.tensor(np.arange(64, dtype=np.float32), device=dev)
    y = x.exp()  # (its own stream: nothing to record)
    assert not x.storage.block.used_on
    s1, s2 = rt.current_stream(dev), dev.new_stream()
    s2.wait_event(s1.record_event())
    with rt.use_stream(s2):
        z = x.sqrt()
    assert s2 in x.storage.block.used_on
    s1.wait_event(s2.record_event())
    np.testing.assert_allclose(np.asarray(z), np.sqrt(np.arange(64)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(y), np.exp(np.arange(64)), rtol=1e-5)


def test_empty_tensors_through_a_cpu_kernel():
    x = dlpc.tensor(np.zeros((0, 3), np.float32))
    assert np.asarray(x.exp()).shape == (0, 3) and np.asarray(x + x).shape == (0, 3)


def test_a_list_attribute_keys_its_kernel_by_value():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = dlpc.tensor(a)
    for _ in range(2):  # (the second call hits the kernel cached under the frozen list)
        np.testing.assert_array_equal(np.asarray(dlpc.ops.transpose(x, perm=[1, 0])), a.T)
    b = dlpc.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for perm in ([2, 0, 1], [1, 2, 0]):
        got = np.asarray(dlpc.ops.transpose(b, perm=perm))
        np.testing.assert_array_equal(got, np.transpose(np.asarray(b), perm))


def test_jit_keys_a_number_by_its_type_too():
    """2 and 2.0 are equal and hash alike: the guard keeps them apart (two traces)."""
    f = dlpc.jit(lambda t, s: t * s)
    x = _t([1.0, 2.0])
    assert np.asarray(f(x, 2)).tolist() == [2.0, 4.0] and f.traces == 1
    assert np.asarray(f(x, 2.0)).tolist() == [2.0, 4.0] and f.traces == 2
    assert np.asarray(f(x, 2)).tolist() == [2.0, 4.0] and f.traces == 2


def test_backward_through_dynamic_slice_in_a_fresh_process():
    """Eager autograd has every rule graph-autodiff has, whatever was imported before:
    dynamic_slice's (passes/train/_control_grad.py) was missing until a jit backward or
    a training step imported graph-autodiff ('no gradient rule for graph.dynamic_slice')."""
    import subprocess
    import sys

    code = (
        "import numpy as np, dlpc\n"
        "y = dlpc.tensor(np.arange(5, dtype=np.float32), requires_grad=True)\n"
        "i = dlpc.tensor(np.array([1], np.int64))\n"
        "dlpc.ops.dynamic_slice(y, i, axes=[0], sizes=[2]).sum().backward()\n"
        "print(np.asarray(y.grad).tolist())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[0.0, 1.0, 1.0, 0.0, 0.0]"


def test_more_held_outputs_than_the_pool_keeps_are_each_their_own():
    from dlpc.eager.dispatch import POOL

    xs = [np.full(4, k, np.float32) for k in range(POOL + 2)]
    held = [-dlpc.tensor(a) for a in xs]
    for a, h in zip(xs, held):
        np.testing.assert_array_equal(np.asarray(h), -a)


def test_a_one_operand_op_takes_its_operand_by_keyword():
    x = _t([-1.0, 4.0])
    assert np.asarray(dlpc.ops.relu(input=x)).tolist() == [0.0, 4.0]
    assert np.asarray(dlpc.ops.sqrt(input=_t([4.0, 9.0]))).tolist() == [2.0, 3.0]


@needs_opencl
def test_strided_and_empty_tensors_on_opencl():
    """A transposed view is made dense for the kernel; an empty tensor has no buffer to
    bind (its input skipped, its output allocated empty)."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    x = dlpc.tensor(a, device=OPENCL[0])
    np.testing.assert_allclose(np.asarray(x.T.abs()), np.abs(a.T))
    np.testing.assert_allclose(np.asarray(x.T * 2.0), a.T * 2)
    e = dlpc.tensor(np.zeros((0, 4), np.float32), device=OPENCL[0])
    assert np.asarray(e.exp()).shape == (0, 4) and np.asarray(e + e).shape == (0, 4)


@needs_opencl
def test_a_jit_graph_on_opencl_is_compiled_at_o2_fused():
    """dlpc.jit's graph goes through the -O2 pipeline for OpenCL: (a + 1) + 2 and
    a * b + b * 3 are one kernel each (graph-substitute, graph-fuse), not two and three
    (eager --seed 43 survivor dispatch.py:290, opt_level 2 -> 1)."""
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    x, y = dlpc.tensor(a, device=OPENCL[0]), dlpc.tensor(b, device=OPENCL[0])
    for fn, want in [
        (lambda p, q: (p + 1.0) + 2.0, a + 3),
        (lambda p, q: p * q + q * 3.0, a * b + b * 3),
    ]:
        f = dlpc.jit(fn)
        np.testing.assert_allclose(np.asarray(f(x, y)), want, rtol=1e-5, atol=1e-6)
        assert len(f._last.kernel.fn.kernel_ops) == 1


# ------------------------------------------------------------------ seed 44


def test_operands_by_keyword_hit_the_positional_calls_kernel():
    """linear(x, weight=w, bias=b) is the call linear(x, w, b): the same cache key, so
    the second form compiles nothing (the keywords' positions padded with exactly the
    Nones between, no trailing ones)."""
    from dlpc.eager import dispatch

    x, w, b = _t([[1.0, 2.0, 3.0]]), _t(np.eye(3)[:2] * 2), _t([0.5, -0.5])
    first = dlpc.ops.linear(x, weight=w, bias=b)
    before = dispatch.cache_size()
    again = dlpc.ops.linear(x, w, b)
    assert dispatch.cache_size() == before
    np.testing.assert_allclose(np.asarray(first), [[2.5, 3.5]])
    np.testing.assert_allclose(np.asarray(again), [[2.5, 3.5]])


def test_a_cpu_kernel_pools_four_blocks_per_output():
    """Six results of one kernel held at once: the first four blocks are the pool's
    (handed out again once dropped), the other two plain allocations."""
    from dlpc.eager import dispatch

    xs = [_t(np.full(3, k + 1.0)) for k in range(6)]
    held = [x.log() for x in xs]
    slots = [
        s for key, k in dispatch._CACHE.items() if key[0] == "log" for s in getattr(k, "_outs", ())
        if s.shape == (3,)
    ]  # fmt: skip
    assert slots and all(len(s.pool) == 4 for s in slots)
    for x, h in zip(xs, held):
        np.testing.assert_allclose(np.asarray(h), np.log(np.asarray(x)), rtol=1e-6)


def test_a_user_kernel_is_called_on_every_cache_hit():
    """x.exp() twice with a user kernel: the second call hits the cached ('user', fn)
    entry, which the inline fast path leaves to `call`."""
    seen = []

    def plus_one(x):
        seen.append(1)
        return dlpc.from_numpy(np.asarray(x) + 1.0)

    dlpc.register_kernel("exp", "cpu", plus_one)
    try:
        x = _t([1.0, 2.0])
        for _ in range(2):
            assert np.asarray(x.exp()).tolist() == [2.0, 3.0]
        assert len(seen) == 2
    finally:
        dlpc.unregister_kernel("exp", "cpu")


WEIGHTED = """
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = graph.param "w" : tensor<4x3xf32>
  %y = graph.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
"""


@needs_opencl
def test_a_placed_model_with_one_input_and_one_weight():
    """The outputs of a placed model's function follow its inputs and its params (1 + 1
    here, where 1 | 1 would take the param for an output)."""
    from dlpc.model import Model
    from dlpc.passes import pipeline

    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    model = Model(pipeline.parse_module(WEIGHTED), {"w": w})
    placed = dlpc.compile(model, device=OPENCL[0], fold_weights=False)  # (w stays a param)
    assert placed._call.fn.param_names == ["w"]
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    (y,) = placed(dlpc.tensor(x, device=OPENCL[0]))
    assert y.shape == (2, 3)
    np.testing.assert_allclose(np.asarray(y), x @ w, rtol=1e-5, atol=1e-6)
