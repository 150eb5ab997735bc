"""Tensors stay on their device: a compiled model placed on a device (`dlpc.compile(...,
device=)`) keeps its weights there and takes and returns device tensors; eager OpenCL
ops read and write the tensors' own buffers, a chain of them with no copy and no host
wait until `numpy()`; `dlpc.jit` training passes the weights as they are, re-binding
and copying nothing; the CPU kernels' output pool never hands out memory a tensor or an
array still holds. Copies are counted two ways: the runtime's `transfer_stats` and a
spy on pyopencl's `enqueue_copy`."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.eager import dispatch
from dlpc.eager import optim as eager_optim
from dlpc.frontends.builder import GraphBuilder
from dlpc.model import Model
from dlpc.runtime import device as devices

OPENCL = [d.name for d in devices.devices("opencl")][:1]
needs_opencl = pytest.mark.skipif(not OPENCL, reason="no OpenCL device")
rng = np.random.default_rng(3)


def _r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _small_model() -> Model:
    gb = GraphBuilder("small")
    x = gb.input("x", (2, 8))
    w, b = gb.param("w", (4, 8)), gb.param("b", (4,))
    gb.output(gb.op("relu", gb.op("linear", x, w, b)))
    return Model(gb.module(), {"w": _r(4, 8), "b": _r(4)}, "small")


@pytest.fixture(scope="module")
def small():
    model = _small_model()
    return model, {d: dlpc.compile(model, device=d) for d in ["cpu", *OPENCL]}


class CopySpy:
    """pyopencl's enqueue_copy counted: host<->device copies, device copies, blocking."""

    def __init__(self, monkeypatch) -> None:
        import pyopencl as cl

        self.host = self.device = self.blocking = 0
        real = cl.enqueue_copy

        def spy(queue, dest, src, **kwargs):
            if isinstance(dest, np.ndarray) or isinstance(src, np.ndarray):
                self.host += 1
            else:
                self.device += 1
            self.blocking += bool(kwargs.get("is_blocking", False))
            return real(queue, dest, src, **kwargs)

        monkeypatch.setattr(cl, "enqueue_copy", spy)


def _moved(device: str) -> int:
    s = devices.transfer_stats(device)
    return s["to_device"] + s["to_host"]


@pytest.mark.parametrize("device", ["cpu", *OPENCL])
def test_a_placed_model_keeps_its_weights_on_the_device(small, device, monkeypatch):
    model, compiled = small
    placed = compiled[device]
    x = _r(2, 8)
    expected = api.reference(model, [x])[0]
    xt = dlpc.tensor(x, device=device)
    placed(xt)  # (the first call uploads the weights: once)
    spy = CopySpy(monkeypatch) if device != "cpu" else None
    before = _moved(device)
    outs = [placed(xt)[0] for _ in range(3)]
    assert _moved(device) == before  # no weight, input or output crossed to or from the host
    if spy is not None:
        assert spy.host == 0 and spy.device == 0  # the kernels read and write tensors' buffers
    for y in outs:
        assert isinstance(y, dlpc.Tensor) and y.device.name == device
        np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-5, atol=1e-6)


@needs_opencl
def test_a_placed_model_moves_only_inputs_from_elsewhere(small):
    model, compiled = small
    placed = compiled[OPENCL[0]]
    x = _r(2, 8)
    expected = api.reference(model, [x])[0]
    before = devices.transfer_stats(OPENCL[0])["to_device"]
    y = placed(dlpc.tensor(x))  # a cpu tensor: uploaded, the result stays on the device
    assert devices.transfer_stats(OPENCL[0])["to_device"] == before + 1
    assert y[0].device.name == OPENCL[0]
    np.testing.assert_allclose(y[0].numpy(), expected, rtol=1e-5, atol=1e-6)
    out = placed(x)  # numpy in, numpy out
    assert isinstance(out[0], np.ndarray)
    np.testing.assert_allclose(out[0], expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(DlpcError, match=r"input 0 is \[3, 8\]"):
        placed(dlpc.tensor(_r(3, 8), device=OPENCL[0]))
    with pytest.raises(DlpcError, match="does not run on device"):
        dlpc.compile(model, target="dlp", device=OPENCL[0])


def test_compiled_model_to_a_device():
    model = _small_model()
    placed = dlpc.compile(model).to("cpu")
    x = _r(2, 8)
    y = placed(dlpc.tensor(x))[0]
    assert isinstance(y, dlpc.Tensor)
    np.testing.assert_allclose(np.asarray(y), api.reference(model, [x])[0], rtol=1e-5, atol=1e-6)


@needs_opencl
def test_to_a_device_keeps_the_compile_options():
    """`.to(device)` compiles as the model was compiled (torch's `.to` keeps the module):
    OpenCL's plans, the opt level and pass options go along; a target's own options
    (its tuning log, OpenCL's profile) stay behind on another device's target."""
    model, x = _small_model(), _r(2, 8)
    expected = api.reference(model, [x])[0]
    gpu = dlpc.compile(model, target="opencl", profile="gpu", opt_level=1)
    placed = gpu.to(OPENCL[0])
    assert isinstance(placed, api.DeviceModel)
    assert (placed.artifact.plans, gpu.artifact.plans) == ("gpu", "gpu")
    assert placed.compile_args["opt_level"] == 1
    assert placed.source == gpu.source
    np.testing.assert_allclose(
        placed(dlpc.tensor(x, device=OPENCL[0]))[0].numpy(), expected, rtol=1e-5, atol=1e-6
    )
    cpu = dlpc.compile(model, target="opencl", profile="cpu").to(OPENCL[0])
    assert cpu.artifact.plans == "cpu"
    # to the CPU: the C target, with the pass options, without OpenCL's profile
    back = gpu.to("cpu")
    assert back.target == "c" and "profile" not in back.compile_args
    assert back.compile_args["opt_level"] == 1
    np.testing.assert_allclose(np.asarray(back(dlpc.tensor(x))[0]), expected, rtol=1e-5, atol=1e-6)
    fused = dlpc.compile(model, graph_fuse={"horizontal": False}).to(OPENCL[0])
    assert fused.compile_args["graph_fuse"] == {"horizontal": False}
    with pytest.raises(DlpcError, match=r"no device .opencl:99. \(devices: cpu, opencl:0"):
        gpu.to("opencl:99")


@needs_opencl
def test_an_eager_opencl_chain_copies_nothing_and_waits_for_nothing(monkeypatch):
    dev = OPENCL[0]
    a, b = _r(4, 16), _r(16, 16)
    x, w = dlpc.tensor(a, device=dev), dlpc.tensor(b, device=dev)

    def chain(x, w):
        return ((x @ w).relu() + x).sum(1)

    chain(x, w)  # (compiles the kernels)
    dlpc.synchronize(dev)
    spy = CopySpy(monkeypatch)
    waits = []
    monkeypatch.setattr(devices.Stream, "synchronize", lambda s: waits.append(s))
    before = _moved(dev)
    y = chain(x, w)
    assert (spy.host, spy.device, spy.blocking, waits) == (0, 0, 0, [])
    assert _moved(dev) == before
    monkeypatch.undo()
    expected = (np.maximum(a @ b, 0) + a).sum(1)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-5)


@needs_opencl
def test_eager_opencl_views_at_any_offset():
    """Rows 1.. of a 16-wide f32 tensor start 64 bytes in: no buffer can start there on a
    device aligning to 128, so the op copies it into its own buffer; rows 2.. start at
    128 and are bound as they are. Both give the reference."""
    dev = OPENCL[0]
    a = _r(6, 16)
    x = dlpc.tensor(a, device=dev)
    for start in (1, 2, 4):
        np.testing.assert_allclose(x[start:].relu().numpy(), np.maximum(a[start:], 0))
        np.testing.assert_allclose((x[start:] * 2.0).numpy(), a[start:] * 2.0)


@pytest.mark.parametrize("device", OPENCL)
def test_jit_training_rebinds_and_copies_no_weights(device, monkeypatch):
    p = {"w": _r(3, 8) * 0.3, "b": _r(3) * 0.1}
    xs, ys = _r(4, 8), np.array([0, 2, 1, 2])

    def run(jit: bool, spy: bool) -> list[float]:
        params = {k: dlpc.tensor(v, device=device, requires_grad=True) for k, v in p.items()}
        opt = eager_optim.Adam(list(params.values()), lr=1e-2)
        x, y = dlpc.tensor(xs, device=device), dlpc.tensor(ys, device=device)

        def loss_of(x, y):
            return dlpc.ops.cross_entropy(dlpc.ops.linear(x, params["w"], params["b"]), y)

        step = dlpc.jit(loss_of) if jit else loss_of
        losses = []
        bound: list = []
        before = 0
        for k in range(4):
            if spy and k == 1:  # (after the first step compiled everything)
                monkeypatch.setattr(dispatch.Kernel, "bind", lambda s, w: bound.append(w))
                before = _moved(device)
            loss = step(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)
        if spy:
            assert bound == [] and _moved(device) == before  # weights stayed where they are
        return [float(v.item()) for v in losses]

    np.testing.assert_allclose(run(True, True), run(False, False), rtol=1e-5)


def test_the_cpu_output_pool_never_hands_out_held_memory():
    a = _r(4, 4)
    x = dlpc.tensor(a)
    held = x.relu()  # a tensor
    array = np.asarray(x * 3.0)  # an array of a result the tensor of which is gone
    view = (x * 3.0).T  # a view of a result
    view_array = view.numpy()
    for _ in range(10):
        x.relu()
        x * 3.0
    np.testing.assert_array_equal(held.numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal(array, a * 3.0)
    np.testing.assert_array_equal(view_array, (a * 3.0).T)
    ids = {id(x.relu()._storage.array) for _ in range(5)}  # a dropped result's block: reused
    assert len(ids) == 1


@needs_opencl
def test_bound_sub_buffers_survive_empty_cache():
    """Ops bound to sub-buffers of a segment; the segment freed by empty_cache (its
    sub-buffers dropped first); the same ops on new blocks still equal numpy. (1.2 MB
    tensors: the large pool, a segment of their own.)"""
    dev = OPENCL[0]
    a = _r(500, 600)
    for _ in range(2):
        xs = [dlpc.tensor(a + k, device=dev) for k in range(3)]  # (blocks at offsets > 0)
        ys = [(x * 2.0).relu() for x in xs]
        for k, y in enumerate(ys):
            np.testing.assert_allclose(y.numpy(), np.maximum((a + k) * 2.0, 0), rtol=1e-6)
        del xs, ys, y
        dlpc.synchronize(dev)
        freed = dlpc.memory_stats(dev)["device_frees"]
        dlpc.empty_cache(dev)
        assert dlpc.memory_stats(dev)["device_frees"] > freed  # (their segment went back)


@needs_opencl
def test_bound_ops_on_two_streams_ordered_by_events():
    """A chain alternating between two streams, ordered by events as in torch
    (`wait_event`): the kernels shared by both (their intermediate buffers too) and
    the tensors' buffers bound per call give numpy's values."""
    dev = devices.device(OPENCL[0])
    a = _r(32, 32)
    x = dlpc.tensor(a, device=dev)
    s1, s2 = devices.current_stream(dev), dev.new_stream()
    s2.wait_event(s1.record_event())
    for _ in range(2):
        with devices.use_stream(s2):
            y = (x * 2.0).relu()
        s1.wait_event(s2.record_event())
        w = (y + x) @ x
        s2.wait_event(s1.record_event())
        with devices.use_stream(s2):
            v = w.sum(1)
        expected = (np.maximum(a * 2.0, 0) + a) @ a
        np.testing.assert_allclose(w.numpy(), expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(v.numpy(), expected.sum(1), rtol=1e-4, atol=1e-3)
