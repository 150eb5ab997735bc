"""The dispatcher: an eager op call -> the kernel for its dispatch key -> output tensors.

    dispatch.call("conv2d", (x, w), {"stride": 2})

The dispatch key is the device type of the tensor operands (one device per call); the
table `KERNELS[(op, device type)]` holds a kernel factory per key: for every graph op on
`cpu`, `opencl` and `dlp`, `compiled` (dlpc's own pipeline builds the one-op graph for the
call's shapes, dtypes, numbers and attributes, for that device's target: C, OpenCL, DLP
C on the simulator), and whatever a user registered with `register_kernel`. A kernel is
made once per (op, signature, attributes, device) and cached: a call that hits the cache
builds no IR and runs no pass, it computes a tuple key and calls the kernel. A call with
no kernel for its key is a one-line error naming the op and the device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from sys import getrefcount
from typing import Any

import numpy as np

from dlpc.backends.runtime.cbuild import address
from dlpc.diagnostics import DlpcError
from dlpc.frontends.builder import OPS, SUGAR, FrontendError, GraphBuilder
from dlpc.runtime.device import Device
from dlpc.runtime.device_call import DeviceCall
from dlpc.runtime.tensor import Storage, TensorView, contiguous_strides, meta

DTYPE_NAMES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.float16): "f16",
    np.dtype(np.int64): "i64",
    np.dtype(np.int32): "i32",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.uint8): "ui8",
    np.dtype(np.uint16): "ui16",
    np.dtype(np.uint32): "ui32",
    np.dtype(np.uint64): "ui64",
    np.dtype(np.bool_): "i1",
}
TARGET_OF = {"cpu": "c", "opencl": "opencl", "dlp": "dlp"}


def dtype_name(dtype: np.dtype) -> str:
    name = DTYPE_NAMES.get(dtype)
    if name is None:
        raise DlpcError(f"error: dtype {dtype} has no graph element type")
    return name


def freeze(value: Any) -> Any:
    """A hashable form of an attribute value (lists become tuples)."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    return value


# ------------------------------------------------------------------ building graphs


def build_op(gb: GraphBuilder, name: str, operands: list, attrs: dict[str, Any]) -> Any:
    """`name` applied in `gb` (operands: SSA values, numbers or None), a one-line error
    naming the op for a bad call."""
    if name == "index":  # a view: slice then drop/insert unit dims (runtime/tensor.py)
        (x,) = operands
        rank = len(attrs["starts"])
        y = gb.op(
            "slice",
            x,
            starts=list(attrs["starts"]),
            ends=list(attrs["ends"]),
            axes=list(range(rank)),
            steps=list(attrs["steps"]),
        )
        return gb.op("reshape", y, shape=list(attrs["shape"]))
    if name == "identity":
        (x,) = operands
        return gb.op("reshape", x, shape=list(graph_shape(x)))
    while operands and operands[-1] is None:
        operands = operands[:-1]
    try:
        return gb.op(name, *operands, **{k: _plain(v) for k, v in attrs.items()})
    except FrontendError as e:
        raise DlpcError(f"error: {name}: {e.message}") from None


def graph_shape(value) -> tuple[int, ...]:
    from dlpc.dialects import graph

    return tuple(graph.shape_of(value))


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclass
class Signature:
    """What a kernel is made for: per positional operand a (shape, dtype) for a tensor,
    else the number or None; the attributes."""

    name: str
    operands: tuple
    attrs: dict[str, Any]

    def build(self, gb: GraphBuilder) -> tuple[list, Any]:
        """The graph inputs (one per tensor operand) and the op's result."""
        values, inputs = [], []
        for k, o in enumerate(self.operands):
            if isinstance(o, tuple):
                shape, dtype = o
                v = gb.input(f"a{k}", shape, dtype_name(dtype))
                values.append(v)
                inputs.append(v)
            else:
                values.append(o)
        return inputs, build_op(gb, self.name, values, self.attrs)


# ------------------------------------------------------------------ kernels


class Kernel:
    """A compiled graph on a device: `run(inputs) -> outputs` (tensors on the device).
    A graph with params (a `dlpc.jit` graph's weights) keeps them bound on the device,
    not folded: `bind(weights)` replaces them."""

    fn: Any  # the compiled function: CFunction, OpenCLFunction, DlpFunction

    def __init__(self, device: Device, model, name: str) -> None:
        from dlpc import api

        self.device = device
        self.out_specs = _out_specs(model)
        target = TARGET_OF[device.type]
        try:
            if target == "opencl":
                self.fn = _opencl_function(model, device, name)
                self.run = DeviceCall(self.fn, device).run  # type: ignore[method-assign]
            else:
                compiled = api.compile(model, target=target, fold_weights=False)
                self.fn = compiled._direct or compiled.artifact or compiled
                if target == "dlp":
                    self.run = DeviceCall(self.fn, device).run  # type: ignore[method-assign]
                else:
                    self._prepare_cpu()
        except DlpcError as e:
            raise DlpcError(f"error: no kernel for '{name}' on {device}: {e}") from None

    def _prepare_cpu(self) -> None:
        """The C library called straight through one reused pointer vector (the
        arguments of a one-op kernel are all inputs and outputs: no params to bind)."""
        import ctypes

        from dlpc.backends.runtime.cbuild import CFunction

        fn = self.fn
        lib = getattr(fn, "library", None)
        if not isinstance(fn, CFunction) or lib is None or lib.prepare_entry is not None:
            return
        if fn.param_names:  # (bound params: the function's own argument vector)
            return
        self._argv = (ctypes.c_void_p * (fn.num_inputs + fn.num_outputs))()
        self._entry = lib.entry
        self._lib = lib
        self._outs = [
            _OutSlot(shape, dtype, meta(shape, dtype, self.device))
            for shape, dtype in self.out_specs
        ]
        self.run = self._run_cpu  # type: ignore[method-assign]

    def bind(self, weights: dict) -> None:
        """New values for the graph's params (kept on the device until the next bind)."""
        self.fn.bind_params(weights)

    def run(self, inputs: list[TensorView], cls) -> list:
        outs = self.fn(*[t._host() for t in inputs])
        dev = self.device
        return [cls._wrap_host(dev, o) for o in outs]

    def _run_cpu(self, inputs: list[TensorView], cls) -> list:
        """One call: the inputs' addresses (each tensor's `_ptr`, taken once), the
        outputs' (a pooled block no tensor or array holds any more, else a fresh one),
        one call of the library's entry through the reused pointer vector."""
        argv = self._argv
        k = 0
        keep = []  # (dense copies of strided inputs, alive for the call)
        for t in inputs:
            p = t._ptr
            if not p:
                p = _pointer(t, keep)
            argv[k] = p
            k += 1
        result = []
        new = cls.__new__
        for slot in self._outs:
            st, addr = slot.take()
            argv[k] = addr
            k += 1
            t = new(cls)
            t._storage = st
            t.shape = slot.shape
            t._strides = slot.strides
            t._offset = 0
            t.dtype = slot.dtype
            t.device = slot.device
            t._np = st.array
            t._meta = slot.meta
            t._ptr = addr
            result.append(t)
        self._lib._check(self._entry(argv))  # (a nonzero status: the one-line out of memory)
        return result


POOLED_BYTES = 1 << 18  # outputs up to this size are pooled per kernel
POOL = 4  # blocks per pooled output


class _OutSlot:
    """One output of a CPU kernel: its layout, and a few host blocks reused once no
    tensor view (the storage's references) and no numpy array (the array's: views of it
    keep it as their base) holds them. A call that drops its result, or a tape step that
    freed last step's intermediates, then allocates nothing and takes no address."""

    __slots__ = ("shape", "dtype", "strides", "nbytes", "device", "meta", "pool")

    def __init__(self, shape, dtype, m) -> None:
        self.shape, self.dtype, self.meta, self.device = shape, dtype, m, m.device
        self.strides = contiguous_strides(shape)
        self.nbytes = math.prod(shape) * dtype.itemsize
        self.pool: list[tuple[Storage, int]] = []

    def take(self) -> tuple[Storage, int]:
        for entry in self.pool:
            st = entry[0]
            # (free: referenced by the pool's tuple and the call's argument only; its
            # array by the storage and the argument only)
            if getrefcount(st) == 3 and getrefcount(st.array) == 2:
                return entry
        o = np.empty(self.shape, self.dtype)
        st = Storage(self.device, self.nbytes, o)
        addr = st.addr = address(o) if self.nbytes else 0
        entry = (st, addr)
        if self.nbytes <= POOLED_BYTES and len(self.pool) < POOL:
            self.pool.append(entry)
        return entry


def _pointer(t: TensorView, keep: list) -> int:
    """The address of `t`'s first element for a kernel, cached on a contiguous view
    (`_ptr`); a strided view is copied dense into `keep`."""
    if not t.is_contiguous():
        a = np.ascontiguousarray(t._host())
        keep.append(a)
        return address(a)
    st = t._storage
    addr = st.addr
    if not addr:
        base = st.array if st.array is not None else t._host()
        if base.nbytes == 0:
            return 0
        addr = st.addr = address(base)
    t._ptr = p = addr + t._offset * t.dtype.itemsize
    return p


def _out_specs(model) -> list[tuple[tuple[int, ...], np.dtype]]:
    from dlpc.reference import graph as ref

    main = ref.main_func(model.module)
    rets = main.body.block.last_op.operands  # type: ignore[union-attr]
    return [(tuple(ref.graph.shape_of(v)), np.dtype(ref.result_dtype(v))) for v in rets]


def _opencl_function(model, device: Device, name: str):
    """The one-op model through the pipeline for the OpenCL target, on `device`."""
    from dlpc.backends.runtime.opencl_rt import OpenCLFunction
    from dlpc.passes import pipeline

    opts = pipeline.PipelineOptions(
        opt_level=2, schedule=pipeline.schedules_for("opencl"), target="opencl"
    )
    lowered = pipeline.lower(model.module.clone(), "loop", opts, weights=None)
    # device kernels keep every argument in a device buffer: copies in and out are device copies
    fn = OpenCLFunction(lowered, name=name, device=device.backend.cl_device, svm=False)  # type: ignore[attr-defined]
    fn.bind_params(dict(model.weights))
    return fn


def compile_graph(
    gb: GraphBuilder, device: Device, name: str, weights: dict | None = None
) -> Kernel:
    from dlpc.model import Model

    try:
        module = gb.module()
    except FrontendError as e:
        raise DlpcError(f"error: {name}: {e.message}") from None
    return Kernel(device, Model(module, dict(weights or {}), name), name)


# ------------------------------------------------------------------ the table

KernelFactory = Callable[[Signature, Device], Kernel]


def compiled(sig: Signature, device: Device) -> Kernel:
    """dlpc's pipeline on the one-op graph of `sig`, for `device`'s target."""
    gb = GraphBuilder(f"eager_{sig.name}")
    _, result = sig.build(gb)
    gb.output(result)
    return compile_graph(gb, device, sig.name)


KERNELS: dict[tuple[str, str], Any] = {
    (op, kind): compiled
    for op in [*OPS, *SUGAR, "index", "identity"]
    for kind in ("cpu", "opencl", "dlp")
}
USER: dict[tuple[str, str], Callable] = {}
_CACHE: dict[tuple, Any] = {}


def register_kernel(op: str, device_type: str, fn: Callable) -> None:
    """Run `fn(*tensor operands, **attributes)` for `op` on devices of `device_type`
    (returning a tensor or a tuple of them) instead of a compiled kernel."""
    if device_type not in ("cpu", "opencl", "dlp"):
        raise DlpcError(f"error: unknown device type '{device_type}' (cpu, opencl, dlp)")
    USER[(op, device_type)] = fn
    KERNELS[(op, device_type)] = fn
    for key in [k for k in _CACHE if k[0] == op]:
        del _CACHE[key]


def unregister_kernel(op: str, device_type: str) -> None:
    USER.pop((op, device_type), None)
    if op in OPS or op in SUGAR:
        KERNELS[(op, device_type)] = compiled
    else:
        KERNELS.pop((op, device_type), None)
    for key in [k for k in _CACHE if k[0] == op]:
        del _CACHE[key]


def kernel_for(key: tuple, name: str, operands: tuple, attrs: dict, device: Device):
    """The cached kernel of `key`, made on a miss."""
    factory = KERNELS.get((name, device.type))
    if factory is None:
        raise DlpcError(f"error: no kernel for op '{name}' on device {device}")
    if factory is not compiled:
        kernel = ("user", factory)
    else:
        kernel = compiled(Signature(name, operands, attrs), device)
    _CACHE[key] = kernel
    return kernel


def cache_size() -> int:
    return len(_CACHE)
