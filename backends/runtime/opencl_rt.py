"""Run a loop-level module as OpenCL kernels through pyopencl.

    f = OpenCLFunction(loop_module)             # emit_opencl + build the program once
    (y,) = f(x, params={"fc1.weight": w})       # walks @main: buffers, kernels, copies

The host glue interprets `@main`: its arguments and `memref.alloc`s become device
buffers, `memref.global`s are uploaded once, each `loop.kernel` is enqueued with the
NDRange from `plan_launch`, `memref.copy` is a device copy; outputs are read back.
The platform is the first OpenCL platform pyopencl finds (`$DLPC_OPENCL_PLATFORM`
picks one by a substring of its name); on a CPU-only machine that is PoCL from the
`pocl-binary-distribution` wheel (`pip install -e '.[opencl]'` from the dlpc checkout).
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np

from dlpc.backends.runtime.callconv import ModuleFunction
from dlpc.diagnostics import DlpcError, install_hint


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise DlpcError(
            f"error: target 'opencl' needs pyopencl ({install_hint('opencl')}): {e}"
        ) from None
    return cl


_CONTEXT = None
# MEM_OBJECT_ALLOCATION_FAILURE, OUT_OF_RESOURCES, OUT_OF_HOST_MEMORY
OUT_OF_MEMORY = (-4, -5, -6)


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            return True
    except OSError:
        return False


def _pocl_cache() -> None:
    """PoCL writes every kernel it builds to `$POCL_CACHE_DIR` (default
    `$XDG_CACHE_HOME/pocl`, i.e. `~/.cache/pocl`) and fails every build, with no log, when
    it cannot: where that default is not writable (a read-only or foreign home, as in some
    CI sandboxes), point it at dlpc's own cache, else at a private temporary directory."""
    if os.environ.get("POCL_CACHE_DIR"):
        return
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    if _writable(Path(xdg) / "pocl"):
        return
    for candidate in (os.environ.get("DLPC_CACHE_DIR"), tempfile.gettempdir()):
        if candidate:
            path = Path(candidate) / f"pocl-{os.getuid()}"
            if _writable(path):
                os.environ["POCL_CACHE_DIR"] = str(path)
                return


def context():
    """One OpenCL context and queue per process."""
    global _CONTEXT
    if _CONTEXT is None:
        cl = _cl()
        _pocl_cache()
        try:
            platforms = cl.get_platforms()
        except cl.Error as e:
            raise DlpcError(f"error: no OpenCL platform available: {e}") from None
        want = os.environ.get("DLPC_OPENCL_PLATFORM", "")
        chosen = [p for p in platforms if want.lower() in p.name.lower()] or platforms
        if not chosen:
            raise DlpcError(
                "error: no OpenCL platform available (install pocl-binary-distribution)"
            )
        ctx = cl.Context(chosen[0].get_devices()[:1])
        _CONTEXT = (ctx, cl.CommandQueue(ctx))
    return _CONTEXT


def _build_failure(e: Exception) -> str:
    """What the OpenCL compiler said, in one line: pyopencl's message is the status code
    repeated, then the build log; the log's first `error:` line (else its first line, else
    the status) is the part a user can act on."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    status = lines[0].split(" - ")[0]
    log = [ln for ln in lines[1:] if not ln.startswith("Build on <")]
    first = next((ln for ln in log if "error" in ln.lower()), log[0] if log else "")
    return f"{status}: {first}" if first else status


class OpenCLFunction(ModuleFunction):
    """A loop-level module compiled to OpenCL and callable on numpy arrays."""

    def __init__(self, module, *, name: str = "module"):
        from xdsl.dialects import arith, func, memref

        from dlpc.backends.c import find_main, kernel_for, memref_info
        from dlpc.backends.opencl import OpenCLEmitter
        from dlpc.dialects.graph import numpy_dtype
        from dlpc.dialects.loop import KernelOp

        cl = _cl()
        self.ctx, self.queue = context()
        self.fn = find_main(module)
        self.bind_signature(self.fn)
        emitter = OpenCLEmitter(module)
        self.source = emitter.emit()
        try:
            self.program = cl.Program(self.ctx, self.source).build(
                options=["-cl-fp32-correctly-rounded-divide-sqrt"]
            )
        except cl.Error as e:
            raise DlpcError(
                f"error: opencl: the program for '{name}' does not build: {_build_failure(e)}"
            ) from None
        self.globals = {}
        for op in module.body.block.ops:
            if isinstance(op, memref.GlobalOp):
                shape, elt = memref_info(op.type)
                values = np.array(list(op.initial_value.get_values()), dtype=numpy_dtype(elt))
                if values.size == 1 and math.prod(shape) > 1:
                    values = np.full(shape, values[0])
                self.globals[op.sym_name.data] = values.reshape(shape)
        # the host program: @main's ops in order
        self.steps = []
        for op in self.fn.body.block.ops:
            if isinstance(op, KernelOp):
                launch = emitter.launches[op]
                self.steps.append(("kernel", op, launch, getattr(self.program, launch.name)))
            elif isinstance(op, memref.AllocOp | memref.AllocaOp):
                shape, elt = memref_info(op.memref.type)
                nbytes = max(math.prod(shape), 1) * np.dtype(numpy_dtype(elt)).itemsize
                self.steps.append(("alloc", op.memref, nbytes, kernel_for(op)))
            elif isinstance(op, memref.GetGlobalOp):
                self.steps.append(("global", op.memref, op.name_.root_reference.data))
            elif isinstance(op, memref.CopyOp):
                self.steps.append(("copy", op.source, op.destination))
            elif isinstance(op, memref.DeallocOp | arith.ConstantOp | func.ReturnOp):
                continue
            else:
                raise DlpcError(f"error: opencl backend: unsupported op '{op.name}' in @main")

    def __call__(self, *inputs, params=None) -> list[np.ndarray]:
        cl = _cl()
        n_args = self.num_inputs + len(self.param_names)
        mf = cl.mem_flags
        args = self.fn.body.block.args
        buffers = {
            args[k]: self._buffer(mf.READ_WRITE, a)
            for k, a in enumerate(self.arguments(inputs, params))
        }
        outputs = self.empty_outputs()
        for k, out in enumerate(outputs):
            buffers[args[n_args + k]] = cl.Buffer(self.ctx, mf.READ_WRITE, size=max(out.nbytes, 1))
        for step in self.steps:
            kind = step[0]
            if kind == "alloc":
                buffers[step[1]] = self._device_alloc(step[2], step[3])
            elif kind == "global":
                buffers[step[1]] = self._buffer(mf.READ_ONLY, self.globals[step[2]])
            elif kind == "copy":
                if _nbytes(step[1]):  # (a zero-byte copy is an OpenCL error)
                    cl.enqueue_copy(self.queue, buffers[step[2]], buffers[step[1]])
            else:
                _, op, launch, kernel = step
                try:
                    kernel(
                        self.queue,
                        launch.global_size,
                        launch.local_size,
                        *[buffers[v] for v in launch.args],
                    )
                except cl.Error as e:  # (a device may allocate buffers when first used)
                    code = e.what.code()
                    oom = " (out of memory)" if code in OUT_OF_MEMORY else ""
                    raise DlpcError(
                        f"error: opencl: kernel '{op.sym}' failed: {e.what.routine()} {code}{oom}"
                    ) from None
        for k, out in enumerate(outputs):
            if out.nbytes:
                cl.enqueue_copy(self.queue, out, buffers[args[n_args + k]])
        self.queue.finish()
        return outputs

    def _device_alloc(self, nbytes: int, what: str):
        """A device buffer for an intermediate; a failure is the runtime's one line."""
        cl = _cl()
        try:
            buffer = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, size=nbytes)
        except cl.Error as e:
            raise DlpcError(
                f"error: out of memory: {nbytes} bytes for {what} (opencl: {e.what.routine()}"
                f" {e.what.code()})"
            ) from None
        return buffer

    def _buffer(self, flags, host: np.ndarray):
        """A device buffer holding a copy of `host`. OpenCL has no zero-byte buffers
        (INVALID_BUFFER_SIZE): an empty array gets one unused byte, as outputs and
        allocations do; no kernel reads it (every loop over it has extent 0)."""
        cl = _cl()
        if host.nbytes == 0:
            return cl.Buffer(self.ctx, flags, size=1)
        return cl.Buffer(self.ctx, flags | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)


def _nbytes(value) -> int:
    """The size in bytes of a memref value."""
    from dlpc.backends.c import memref_info
    from dlpc.dialects.graph import numpy_dtype

    shape, elt = memref_info(value.type)
    return math.prod(shape) * np.dtype(numpy_dtype(elt)).itemsize


def compile_opencl(loop_module, *, name: str = "module") -> OpenCLFunction:
    """Emit OpenCL C for a loop-level module and build it; call the result on
    `(*inputs, params=...)`."""
    return OpenCLFunction(loop_module, name=name)
