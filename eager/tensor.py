"""`dlpc.Tensor`: a runtime tensor view with eager ops, operators and autograd.

    x = dlpc.tensor(np.ones((2, 3), np.float32), device="opencl:0", requires_grad=True)
    y = (x @ w.T + b).relu().sum()
    y.backward(); x.grad

Every op call goes through `call`: the dispatcher runs the kernel for the call's key
(`dispatch.py`), and when grad mode is on and an operand requires grad the output records
a `Node` (`autograd.py`). While `dlpc.jit` traces (`TRACER` set), calls on traced tensors
build graph IR instead of running.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlpc.diagnostics import DlpcError
from dlpc.eager import autograd, dispatch
from dlpc.frontends.builder import OPS, operand_names
from dlpc.runtime import device as devices
from dlpc.runtime.tensor import TensorView

TRACER: Any = None  # the active dlpc.jit trace (jit.py), else None


def _operands(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Operands given by keyword (`bias=b`) moved to their positions."""
    op = OPS.get(name)
    if op is None or not kwargs:
        return args, kwargs
    names = operand_names(op)
    if not any(k in names for k in kwargs):
        return args, kwargs
    moved: list[Any] = list(args)
    attrs = {}
    for k, v in kwargs.items():
        if k in names and not op.OPERANDS[0].startswith("*"):
            i = names.index(k)
            moved += [None] * (i + 1 - len(moved))
            moved[i] = v
        else:
            attrs[k] = v
    return tuple(moved), attrs


def call(name: str, args: tuple, kwargs: dict | None = None, frozen: Any = None) -> Any:
    """Run graph op `name` eagerly on `args` (tensors, numbers, None) with attributes
    `kwargs`; one output tensor (or a list for several). `frozen`: the attributes'
    hashable form, when the caller has it (a method's constant attributes).

    The cache key is (name, attributes, per operand its `Meta` or value): metas are one
    object per (shape, dtype, device), so a hit hashes identities, builds nothing."""
    if kwargs:
        if frozen is None:
            args, kwargs = _operands(name, args, kwargs)
            # (every keyword an operand: no attributes, the positional call's key)
            frozen = tuple(kwargs.items()) or None
            try:
                hash(frozen)
            except TypeError:  # (a list attribute: axes=[1])
                frozen = dispatch.freeze(kwargs)
    else:
        kwargs = _NO_ATTRS
    if TRACER is not None:
        return TRACER.op(name, args, kwargs)
    key = [name, frozen]
    tensors = []
    device = None
    grad = False
    for a in args:
        if isinstance(a, TensorView):
            tensors.append(a)
            m = a._meta or a.key_meta()
            key.append(m)
            if device is None:
                device = m.device
            elif m.device is not device:
                raise DlpcError(f"error: {name}: operands on {device} and {m.device}")
            if a.requires_grad:  # type: ignore[attr-defined]
                grad = True
        else:
            key.append(a)
    if device is None:
        raise DlpcError(f"error: {name} needs at least one tensor operand")
    tkey = tuple(key)
    kernel: Any = _CACHE.get(tkey)
    if kernel is None:
        kernel = _miss(tkey, name, args, kwargs, device)
    if type(kernel) is tuple:  # a user's kernel
        result = kernel[1](*tensors, **kwargs)
        outs = list(result) if isinstance(result, list | tuple) else [result]
    else:
        outs = kernel.run(tensors, Tensor)
    if grad and autograd.GradMode.enabled:
        _record(name, args, kwargs, tensors, outs)
    return outs[0] if len(outs) == 1 else outs


def call1(name: str, x: Tensor) -> Any:
    """`call(name, (x,))`: a unary op without attributes, its cache hit inline."""
    kernel = _CACHE.get((name, None, x._meta or x.key_meta()))
    if kernel is None or TRACER is not None or type(kernel) is tuple:
        return call(name, (x,))
    outs = kernel.run([x], Tensor)
    if x.requires_grad and autograd.GradMode.enabled:
        _record(name, (x,), _NO_ATTRS, [x], outs)
    return outs[0] if len(outs) == 1 else outs


def call2(name: str, x: Tensor, y: Any) -> Any:
    """`call(name, (x, y))`: a binary op without attributes (`y` a tensor or a
    number), its cache hit inline."""
    if isinstance(y, TensorView):
        kernel = _CACHE.get((name, None, x._meta or x.key_meta(), y._meta or y.key_meta()))
        grad = x.requires_grad or y.requires_grad  # type: ignore[attr-defined]
        tensors = [x, y]
    else:
        kernel = _CACHE.get((name, None, x._meta or x.key_meta(), y))
        grad = x.requires_grad
        tensors = [x]
    if kernel is None or TRACER is not None or type(kernel) is tuple:
        return call(name, (x, y))
    outs = kernel.run(tensors, Tensor)
    if grad and autograd.GradMode.enabled:
        _record(name, (x, y), _NO_ATTRS, tensors, outs)
    return outs[0] if len(outs) == 1 else outs


_NO_ATTRS: dict[str, Any] = {}  # (shared: read only)
_EVERY_AXIS: dict[str, Any] = {"axes": (), "keepdims": False}  # (shared: read only)
_EVERY_AXIS_KEY = tuple(_EVERY_AXIS.items())
_CACHE = dispatch._CACHE


def _miss(key: tuple, name: str, args: tuple, kwargs: dict, device) -> Any:
    operands = tuple((a.shape, a.dtype) if isinstance(a, TensorView) else a for a in args)
    return dispatch.kernel_for(key, name, operands, kwargs, device)


def _record(name: str, args: tuple, kwargs: dict, tensors: list, outs: list) -> None:
    """The tape's node of a call whose operand requires grad (its first output)."""
    if outs[0].dtype.kind != "f":  # integers and booleans carry no gradient (torch's rule)
        return
    operands = tuple((a.shape, a.dtype) if isinstance(a, TensorView) else a for a in args)
    want = tuple(bool(t.requires_grad) for t in tensors)  # type: ignore[attr-defined]
    node = autograd.Node(name, operands, kwargs, tensors, want)
    for o in outs[:1]:
        o.requires_grad = True
        o._node = node


class Tensor(TensorView):
    """A view over a device storage (runtime/tensor.py) with eager ops and autograd."""

    # the autograd fields: class defaults, set on the instance only when they differ
    # (a kernel's output is made with the runtime's slots alone)
    requires_grad: bool = False
    grad: Tensor | None = None
    _node: autograd.Node | None = None
    _version: int = 0
    _value: Any = None  # the SSA value while traced by dlpc.jit

    def __repr__(self) -> str:
        if self._value is not None:
            return f"tensor(traced {list(self.shape)} {self.dtype}, device='{self.device}')"
        grad = ", requires_grad=True" if self.requires_grad else ""
        return (
            f"tensor({np.array2string(self.numpy(), separator=', ')}, device='{self.device}'{grad})"
        )

    # ------------------------------------------------------------------ autograd
    def requires_grad_(self, flag: bool = True) -> Tensor:
        if self._node is not None and not flag:
            raise DlpcError("error: requires_grad_(False) on a tensor computed from others")
        if flag and self.dtype.kind != "f":
            raise DlpcError(
                f"error: only floating-point tensors can require grad, this one is {self.dtype}"
            )
        self.requires_grad = flag
        return self

    def detach(self) -> Tensor:
        return type(self)._make(self._storage, self.shape, self._strides, self._offset, self.dtype)

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    def backward(self, gradient: Tensor | None = None) -> None:
        if not self.requires_grad:
            raise DlpcError("error: backward() of a tensor that does not require grad")
        if gradient is None and self.numel() != 1:
            raise DlpcError("error: backward() without a gradient needs a one-element tensor")
        autograd.backward(self, gradient, _seed)

    def _as_view(self, shape, strides, offset, op):
        if self._value is not None:
            return TRACER.view(self, op)
        view: Any = TensorView._as_view(self, shape, strides, offset, op)
        if self.requires_grad and autograd.GradMode.enabled:
            name, attrs = op
            view.requires_grad = True
            view._node = autograd.Node(name, ((self.shape, self.dtype),), attrs, [self], (True,))
        return view

    def _copy_dense(self):
        if self._value is not None:
            return self
        out: Any = TensorView._copy_dense(self)
        if self.requires_grad and autograd.GradMode.enabled:
            out.requires_grad = True
            out._node = autograd.Node("identity", ((self.shape, self.dtype),), {}, [self], (True,))
        return out

    def _set_(self, other: Tensor) -> None:
        """Take `other`'s data in place (an optimizer's update): same tensor object."""
        self._storage = other._storage
        self.shape, self._strides, self._offset = other.shape, other._strides, other._offset
        self.dtype = other.dtype
        self._np = other._np
        self._meta, self._ptr = other._meta, other._ptr
        self._version += 1

    def zero_(self) -> Tensor:
        z = zeros(self.shape, self.dtype, self.device)
        self._set_(z)
        return self

    def numpy(self) -> np.ndarray:
        if self._value is not None:
            raise DlpcError(
                "error: dlpc.jit cannot trace reading a tensor's values (data-dependent "
                "Python control flow); run the function eagerly"
            )
        return TensorView.numpy(self)

    # ------------------------------------------------------------------ ops
    def __add__(self, o):
        return call2("add", self, o)

    def __radd__(self, o):
        return call("add", (o, self))

    def __sub__(self, o):
        return call2("sub", self, o)

    def __rsub__(self, o):
        return call("sub", (o, self))

    def __mul__(self, o):
        return call2("mul", self, o)

    def __rmul__(self, o):
        return call("mul", (o, self))

    def __truediv__(self, o):
        return call2("div", self, o)

    def __rtruediv__(self, o):
        return call("div", (o, self))

    def __pow__(self, o):
        return call2("pow", self, o)

    def __neg__(self):
        return call1("neg", self)

    def __matmul__(self, o):
        return call2("matmul", self, o)

    def _compare(self, o, predicate: str):
        return call("compare", (self, o), {"predicate": predicate})

    def __lt__(self, o):
        return self._compare(o, "lt")

    def __le__(self, o):
        return self._compare(o, "le")

    def __gt__(self, o):
        return self._compare(o, "gt")

    def __ge__(self, o):
        return self._compare(o, "ge")

    def eq(self, o):
        return self._compare(o, "eq")

    __hash__ = object.__hash__

    def matmul(self, o):
        return call2("matmul", self, o)

    def relu(self):
        return call1("relu", self)

    def exp(self):
        return call1("exp", self)

    def log(self):
        return call1("log", self)

    def sqrt(self):
        return call1("sqrt", self)

    def abs(self):
        return call1("abs", self)

    def tanh(self):
        return call1("tanh", self)

    def sigmoid(self):
        return call1("sigmoid", self)

    def softmax(self, dim: int = -1):
        return call("softmax", (self,), {"axis": dim})

    def log_softmax(self, dim: int = -1):
        return call("log_softmax", (self,), {"axis": dim})

    def _reduce(self, op: str, dim, keepdim: bool):
        if dim is None and not keepdim:
            return call(op, (self,), _EVERY_AXIS, _EVERY_AXIS_KEY)
        if dim is None:
            dims: list[int] = []
        elif isinstance(dim, int):
            dims = [dim]
        else:
            dims = list(dim)
        return call(op, (self,), {"axes": tuple(dims), "keepdims": keepdim})

    def sum(self, dim=None, keepdim: bool = False):
        return self._reduce("reduce_sum", dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False):
        return self._reduce("reduce_mean", dim, keepdim)

    def amax(self, dim=None, keepdim: bool = False):
        return self._reduce("reduce_max", dim, keepdim)

    def argmax(self, dim: int = -1):
        """Host-side (no graph op): the indices of the maxima along `dim`."""
        return from_numpy(np.argmax(self.numpy(), axis=dim), self.device)

    def astype(self, dtype):
        dt = np.dtype(dtype)
        if dt == self.dtype:
            return self
        return call("cast", (self,), {"to": dispatch.dtype_name(dt)})

    def float(self):
        return self.astype(np.float32)


# ------------------------------------------------------------------ factories


def from_numpy(array, device=None, requires_grad: bool = False) -> Tensor:
    """Share a C-contiguous host array (cpu), or upload it to `device`."""
    return Tensor.from_numpy(array, device).requires_grad_(requires_grad)


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (a numpy array, a list, a number, a Tensor)."""
    if isinstance(data, TensorView):
        data = data.numpy()
    array = np.array(data, dtype=dtype, copy=True)
    if dtype is None and array.dtype == np.float64:
        array = array.astype(np.float32)  # torch's default float
    return Tensor.from_numpy(array, device, copy=True).requires_grad_(requires_grad)


def empty(shape, dtype: Any = np.float32, device=None) -> Tensor:
    return Tensor.empty(shape, dtype, devices.device(device or "cpu"))


def full(shape, value: float, dtype: Any = np.float32, device=None, requires_grad=False) -> Tensor:
    t = Tensor.from_numpy(np.full(tuple(shape), value, dtype), device)
    return t.requires_grad_(requires_grad)


def zeros(shape, dtype: Any = np.float32, device=None, requires_grad=False) -> Tensor:
    return full(shape, 0.0, dtype, device, requires_grad)


def ones(shape, dtype: Any = np.float32, device=None, requires_grad=False) -> Tensor:
    return full(shape, 1.0, dtype, device, requires_grad)


_SEEDS: dict[Any, Tensor] = {}


def _seed(t: TensorView) -> Tensor:
    """Ones like `t` for `backward()`: made (uploaded) once per shape, dtype and device,
    each call a new tensor object over it (nothing writes a tensor's storage in place)."""
    m = t._meta or t.key_meta()
    ones = _SEEDS.get(m)
    if ones is None:
        ones = _SEEDS[m] = full_like(t, 1.0)
    return ones.detach()


def full_like(t: TensorView, value: float) -> Tensor:
    return full(t.shape, value, t.dtype, t.device)


def from_dlpack(x) -> Tensor:
    """A CPU tensor sharing the memory of a DLPack producer (numpy, torch on CPU)."""
    return Tensor._wrap_host(devices.device("cpu"), np.from_dlpack(x))
