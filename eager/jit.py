"""`dlpc.jit(fn)`: trace an eager function into graph IR and compile it whole.

    fast = dlpc.jit(model)           # any callable on dlpc tensors
    y = fast(x)                      # first call per signature: trace + compile
    print(fast.graph)                # the captured graph IR

A call's signature (each tensor argument's shape, dtype and device; every other
argument's value) is the guard: a new signature is traced again (the function runs once
on traced tensors, each op call appending a graph op instead of running) and compiled
with the whole pipeline for the device's target. Tensors the function reads that are not
arguments (a model's weights) become more graph inputs (`w0`, `w1`, ...): a call passes
the weight tensors as they are now, where they live (device buffers on `opencl`), so an
optimizer's update is seen without re-binding or copying anything through the host.
Python control flow runs at trace time, so it is specialised to the signature; reading a traced value
(`item()`, `numpy()`) is an error that says to run eagerly. A call that must record
gradients (grad mode on and an argument or weight requiring grad) runs the compiled
graph and records one node on its output, whose backward is `graph-autodiff` of the
traced graph (sum(output * dy) differentiated with respect to the weights and
arguments), compiled whole on first use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlpc.diagnostics import DlpcError
from dlpc.eager import autograd, dispatch
from dlpc.eager import tensor as tensor_module
from dlpc.eager.tensor import Tensor
from dlpc.frontends.builder import GraphBuilder
from dlpc.model import Model
from dlpc.runtime.tensor import Storage, TensorView, contiguous_strides


class Trace:
    """One trace in progress: the builder, and the concrete tensors met (params)."""

    def __init__(self, name: str, device) -> None:
        self.gb = GraphBuilder(name)
        self.device = device
        self.params: list[tuple[str, Tensor]] = []
        self._by_id: dict[int, Any] = {}

    def value(self, t: TensorView):
        v = getattr(t, "_value", None)
        if v is not None:
            return v
        v = self._by_id.get(id(t))
        if v is None:
            if t.device is not self.device:
                raise DlpcError(
                    f"error: dlpc.jit: a tensor the function reads is on {t.device}, "
                    f"its arguments on {self.device}"
                )
            name = f"w{len(self.params)}"
            v = self.gb.input(name, t.shape, dispatch.dtype_name(t.dtype))
            self.params.append((name, t))  # type: ignore[arg-type]
            self._by_id[id(t)] = v
        return v

    def wrap(self, value) -> Tensor:
        from dlpc.reference import graph as ref

        shape = tuple(dispatch.graph_shape(value))
        dtype = np.dtype(ref.result_dtype(value))  # (row-major strides: views compute on them)
        t = Tensor._make(Storage(self.device, 0), shape, contiguous_strides(shape), 0, dtype)
        t._value = value
        return t

    def op(self, name: str, args: tuple, kwargs: dict) -> Tensor:
        values = [self.value(a) if isinstance(a, TensorView) else a for a in args]
        return self.wrap(dispatch.build_op(self.gb, name, values, kwargs))

    def view(self, t: Tensor, op: tuple[str, dict]) -> Tensor:
        name, attrs = op
        return self.wrap(dispatch.build_op(self.gb, name, [t._value], attrs))


class Entry:
    """One signature's graph, compiled function and weights; its backward graphs (per
    set of inputs wanting a gradient), compiled on first use."""

    def __init__(
        self, module, kernel: dispatch.Kernel, params: list[tuple[str, Tensor]], single: bool
    ):
        self.module = module
        self.kernel = kernel
        self.params = params
        self.weights = [t for _, t in params]  # (the graph's last inputs, in this order)
        self.single = single
        self.backwards: dict[tuple, Any] = {}

    def backward(self, want: tuple, tensors: list, dy: TensorView) -> list:
        """The gradients of the wanted inputs (the tensor arguments, then the weights)
        for the output's adjoint `dy`: graph-autodiff of the traced graph."""
        kernel = self.backwards.get(want)
        if kernel is None:
            kernel = self._compile_backward(want, len(tensors), dy.device)
            self.backwards[want] = kernel
        return kernel.run([*tensors, *self.weights, dy], Tensor)

    def _compile_backward(self, want: tuple, n_args: int, device) -> dispatch.Kernel:
        """sum(output * dy) differentiated by graph-autodiff (params and inputs), the
        wanted gradients kept, compiled whole."""
        from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, StringAttr

        from dlpc.passes.train._build import Builder
        from dlpc.passes.train.autodiff import differentiate
        from dlpc.reference import graph as ref

        module = self.module.clone()
        main = ref.main_func(module)
        block = main.body.block
        ret = block.last_op
        assert ret is not None
        out = ret.operands[0]
        dy = block.insert_arg(out.type, len(block.args))
        names = [
            *(main.arg_attrs.data if main.arg_attrs is not None else ()),
            DictionaryAttr({"dlpc.name": StringAttr("dy")}),
        ]  # type: ignore[union-attr]
        main.arg_attrs = ArrayAttr(names)
        b = Builder.before(ret)
        ret.operands = [b.sum(b.mul(out, dy))]
        main.res_attrs = None
        main.update_function_type()
        differentiate(module, wrt_inputs=True)
        results = dict(zip(_result_names(main), ret.operands))
        # the inputs' own names, tensor arguments then weights (a tensor argument is
        # x<its place among all the arguments>: a number before it shifts it)
        inputs = [a.data["dlpc.name"].data for a in names[:-1]]  # type: ignore[union-attr]
        assert len(inputs) == n_args + len(self.params)
        wanted_names = [f"grad.{n}" for n in inputs]
        keep = [results[n] for n, w in zip(wanted_names, want) if w]
        ret.operands = keep
        main.res_attrs = None
        main.update_function_type()
        return dispatch.Kernel(device, Model(module, {}, "jit_grad"), "jit_grad")


def _result_names(main) -> list[str]:
    from xdsl.dialects.builtin import DictionaryAttr, StringAttr

    out = []
    for a in main.res_attrs.data if main.res_attrs is not None else ():
        name = a.data.get("dlpc.name") if isinstance(a, DictionaryAttr) else None
        out.append(name.data if isinstance(name, StringAttr) else "")
    return out


def _key(args: tuple) -> tuple:
    out = []
    for a in args:
        if isinstance(a, TensorView):
            out.append(("tensor", a.shape, a.dtype, a.device.name))
        else:
            try:
                hash(a)
            except TypeError:
                raise DlpcError(
                    f"error: dlpc.jit: argument {a!r} is neither a tensor nor hashable"
                ) from None
            out.append(("value", type(a).__name__, a))
    return tuple(out)


class JitFunction:
    """`fn` compiled per input signature; see the module docstring."""

    def __init__(self, fn, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.entries: dict[tuple, Entry] = {}
        self._last: Entry | None = None
        self.traces = 0

    @property
    def graph(self) -> str:
        """The graph IR of the latest traced signature."""
        if self._last is None:
            raise DlpcError(f"error: dlpc.jit: '{self.name}' has not been called yet")
        return str(self._last.module)

    def _needs_grad(self, args: tuple, entry: Entry | None) -> bool:
        if not autograd.GradMode.enabled:
            return False
        if any(getattr(a, "requires_grad", False) for a in args):
            return True
        return entry is not None and any(t.requires_grad for _, t in entry.params)

    def __call__(self, *args):
        key = _key(args)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = self._trace(args)
        self._last = entry
        tensors = [a for a in args if isinstance(a, TensorView)]
        wrapped = entry.kernel.run([*tensors, *entry.weights], Tensor)  # (args' device)
        if self._needs_grad(args, entry):
            if not entry.single:
                return self.fn(*args)  # (one traced output records one node)
            inputs = [*tensors, *(t for _, t in entry.params)]
            want = tuple(bool(getattr(t, "requires_grad", False)) for t in inputs)
            node = autograd.Node(f"jit:{self.name}", (), {}, inputs, want)
            node.custom = lambda dy, e=entry, w=want, ts=tensors: e.backward(w, ts, dy)
            wrapped[0].requires_grad = True
            wrapped[0]._node = node
        return wrapped[0] if entry.single else tuple(wrapped)

    def _trace(self, args: tuple) -> Entry:
        tensors = [a for a in args if isinstance(a, TensorView)]
        if not tensors:
            raise DlpcError(f"error: dlpc.jit: '{self.name}' got no tensor argument")
        device = tensors[0].device
        trace = Trace(self.name, device)
        traced_args = []
        for k, a in enumerate(args):
            if isinstance(a, TensorView):
                v = trace.gb.input(f"x{k}", a.shape, dispatch.dtype_name(a.dtype))
                traced_args.append(trace.wrap(v))
            else:
                traced_args.append(a)
        if tensor_module.TRACER is not None:
            raise DlpcError("error: dlpc.jit: nested traces are not supported")
        tensor_module.TRACER = trace
        try:
            out = self.fn(*traced_args)
        finally:
            tensor_module.TRACER = None
        single = isinstance(out, TensorView)
        # (anything but a tuple or list of outputs is one, refused below unless traced)
        outs: list[Any] = list(out) if isinstance(out, tuple | list) else [out]
        if not all(getattr(o, "_value", None) is not None for o in outs):
            raise DlpcError(f"error: dlpc.jit: '{self.name}' must return traced tensors")
        trace.gb.output(*[o._value for o in outs])
        module = trace.gb.module()
        kernel = dispatch.Kernel(device, Model(module, {}, self.name), self.name)
        self.traces += 1
        entry = Entry(module, kernel, trace.params, single)
        self._last = entry
        return entry


def jit(fn=None, *, name: str | None = None):
    """`dlpc.jit(fn)` or `@dlpc.jit`: see the module docstring."""
    if fn is None:
        return lambda f: JitFunction(f, name)
    return JitFunction(fn, name)
