"""A compiled function run on a runtime device: device tensors in, device tensors out.

    call = DeviceCall(function, device("opencl:0"))   # an OpenCLFunction made for it
    outs = call.run([x, w], Tensor)                   # tensors on that device -> new ones

What `dlpc.eager`'s kernels and `dlpc.compile(..., device=...)` models run through. On
`opencl`, the function's kernels read and write the tensors' own device buffers: each
input's and output's kernel arguments are bound to the buffer at the tensor's first byte
(`OpenCLBackend.buffer_at`: the allocator's segment, or a sub-buffer of it made once),
rebound only when a call's tensor lives elsewhere than the last one's, so a call is its
kernel launches alone, enqueued on the current stream with no host wait (the host
waits in `numpy()`). A function this cannot bind (a team chain, host control flow, an
input some kernel reads from a transposed copy) or a tensor at an offset the device
cannot start a buffer at is copied into the function's own argument buffer instead,
and its output out of it: device copies still, no host round trip. The function's
bound params stay resident on the device (uploaded once, counted in the device's
`transfers`). On `dlp` (host memory) the function runs on the tensors' host views.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dlpc.runtime.device import Device, current_stream
from dlpc.runtime.tensor import Storage, TensorView, contiguous_strides, meta

BIND = True  # False: every call copies through the function's own buffers (bench/eager.py)
HOST_STEPS = ("load", "store", "scalar", "if", "else", "end", "while", "do", "team")


class DeviceCall:
    """`function` (compiled for `device`'s target) called on device tensors."""

    def __init__(self, function, device: Device) -> None:
        self.fn = function
        self.device = device
        self._last: Any = None  # OpenCL: the queue of the latest call
        if device.type == "opencl":
            self._prepare_opencl()
            self.run = self._run_opencl  # type: ignore[method-assign]
        elif device.type == "dlp":
            self.run = self._run_host_memory  # type: ignore[method-assign]

    def run(self, inputs: list[TensorView], cls) -> list:
        """cpu: the function on the inputs' host arrays; its outputs wrapped."""
        outs = self.fn(*[_dense_host(t) for t in inputs])
        return [cls._wrap_host(self.device, o) for o in outs]

    def _run_host_memory(self, inputs: list[TensorView], cls) -> list:
        outs = self.fn(*[_dense_host(t) for t in inputs])
        result = []
        for o in outs:
            t = cls.empty(o.shape, o.dtype, self.device)
            np.copyto(t._host(), o)
            result.append(t)
        return result

    # ------------------------------------------------------------------ opencl
    def _prepare_opencl(self) -> None:
        """Where each input's and output's buffer is used: kernel arguments (rebound per
        call) and device copy steps (rewritten per call); `bindable` False where some
        use is neither."""
        fn = self.fn
        self.out_specs = [(tuple(s), np.dtype(d)) for s, d in _outputs(fn)]
        # per output: shape, dtype, row-major strides, bytes, Meta (made once)
        self.out_layouts = [
            (s, d, contiguous_strides(s), math.prod(s) * d.itemsize, meta(s, d, self.device))
            for s, d in self.out_specs
        ]
        self.first_output = fn.num_inputs + len(fn.param_names)
        self.args = [*range(fn.num_inputs), *range(self.first_output, len(fn.arg_specs))]
        buffers = {id(fn.arg_buffers[k]): k for k in self.args}
        self.uses: dict[int, list[tuple[Any, int]]] = {k: [] for k in self.args}
        for kernel, kernel_args in getattr(fn, "bound_args", []):
            for pos, a in enumerate(kernel_args):
                k = buffers.get(id(a))
                if k is not None:
                    self.uses[k].append((kernel, pos))
        self.copies = [
            i
            for i, step in enumerate(fn.steps)
            if step[0] == "copy" and (id(step[1]) in buffers or id(step[2]) in buffers)
        ]
        self.bindable = (
            hasattr(fn, "bound_args")
            and fn.team_devices is None
            and not fn.svm_args
            and not any(step[0] in HOST_STEPS or isinstance(step, list) for step in fn.steps)
            and not any(k in fn.param_copies for k in self.args)
        )
        self.bound = {k: fn.arg_buffers[k] for k in self.args}  # what the kernels use now

    def _bind(self, k: int, buffer) -> None:
        if self.bound[k] is not buffer:
            for kernel, pos in self.uses[k]:
                kernel.set_arg(pos, buffer)
            self.bound[k] = buffer

    def _run_opencl(self, inputs: list[TensorView], cls) -> list:
        fn = self.fn
        dev = self.device
        backend: Any = dev.backend
        stream = current_stream(dev)
        queue = stream.handle
        cl = backend.cl
        copy = cl.enqueue_copy
        last = self._last
        if last is not None and last is not queue:  # (the intermediates' buffers are
            cl.enqueue_barrier(queue, wait_for=[cl.enqueue_marker(last)])  # shared)
        if fn.param_names and not fn.params_resident:  # (bound since the last call)
            fn._upload(queue, fn.bound_params, fn.num_inputs, blocking=True)
            fn.params_resident = True
            dev.count_transfer("to_device", sum(a.nbytes for a in fn.bound_params))
        bindable = self.bindable and BIND
        keep = []  # (dense copies: their blocks stay taken until the kernels are enqueued)
        for k, t in enumerate(inputs):
            if not t.is_contiguous():
                t = t.contiguous()
                keep.append(t)
            st = t._storage
            if not st.nbytes:
                continue
            block: Any = st.block
            off = t._offset * t.dtype.itemsize
            buf = backend.buffer_at(block, off) if bindable else None
            if buf is None:  # (into the function's own buffer)
                if self.bindable:
                    self._bind(k, fn.arg_buffers[k])
                copy(
                    queue,
                    fn.arg_buffers[k],
                    block.handle,
                    byte_count=t.nbytes,
                    src_offset=block.offset + off,
                )
            elif self.bound[k] is not buf:
                self._bind(k, buf)
            if st.stream is not stream:
                st.record_stream(stream)
        outs = []
        copied = []
        new = cls.__new__
        first = self.first_output
        for j, (shape, dtype, strides, nbytes, m) in enumerate(self.out_layouts):
            st = Storage.allocate(dev, nbytes, stream)
            t = new(cls)
            t._storage = st
            t.shape = shape
            t._strides = strides
            t._offset = 0
            t.dtype = dtype
            t.device = dev
            t._np = None
            t._meta = m
            t._ptr = 0
            outs.append(t)
            if not nbytes:
                continue
            k = first + j
            buf = backend.buffer_at(st.block, 0) if bindable else None
            if buf is None:  # (out of the function's own buffer)
                if self.bindable:
                    self._bind(k, fn.arg_buffers[k])
                copied.append((k, t))
            elif self.bound[k] is not buf:
                self._bind(k, buf)
        steps = fn.steps
        if self.copies and self.bindable:  # (device copies from or into an argument)
            steps = list(steps)
            for i in self.copies:
                what, dst, src, n = steps[i]
                steps[i] = (what, self._now(dst), self._now(src), n)
        fn._enqueue(queue, steps, None)
        del keep
        for k, t in copied:
            out_block: Any = t._storage.block
            copy(
                queue,
                out_block.handle,
                fn.arg_buffers[k],
                byte_count=t.nbytes,
                dst_offset=out_block.offset,
            )
        self._last = queue
        return outs

    def _now(self, buffer):
        """The buffer a copy step's `buffer` (one of the function's own) stands for now."""
        fn = self.fn
        for k in self.args:
            if fn.arg_buffers[k] is buffer:
                return self.bound[k]
        return buffer


def _outputs(function) -> list:
    specs = function.arg_specs
    first = function.num_inputs + len(function.param_names)
    return specs[first:]


def _dense_host(t: TensorView) -> np.ndarray:
    a = t._host()
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)
