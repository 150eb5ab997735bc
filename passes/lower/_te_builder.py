"""Shared machinery of graph-to-te: the lowering registry, the `Lowering` context that
emits te ops before the graph op being lowered, and index helpers (broadcasting,
guarded reads, conv/pool windows).

A lowering is `fn(L, op, operands) -> SSAValue` registered with `@lowers("relu")`; it
builds te ops with `L.compute(type, body)` / `L.reduce(type, extents, combiner, body)`,
whose body functions receive a `BodyBuilder` and the index values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import ArrayAttr, IntegerType, Signedness, TensorType, UnregisteredOp
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph as g
from dlpc.dialects.te import SYMBOLIC_OVER, BodyBuilder, ComputeOp, ReduceOp
from dlpc.passes.lower._symbolic import mark_extents

Idx = list  # a list of index values (SSAValue or Python int)
Lower = Callable[["Lowering", g.GraphOp, list[SSAValue]], SSAValue]
LOWERINGS: dict[str, Lower] = {}


def lowers(*names: str):
    def register(fn: Lower) -> Lower:
        for name in names:
            LOWERINGS[f"graph.{name}"] = fn
        return fn

    return register


def shape(v: SSAValue) -> tuple[int, ...]:
    return g.shape_of(v)


def elt(v: SSAValue):
    return g.element_type_of(v)


def bcast(idx: Idx, in_shape: Sequence[int], out_shape: Sequence[int]) -> Idx:
    """numpy broadcasting: the index into an operand of `in_shape` (broadcast dims read 0)."""
    off = len(out_shape) - len(in_shape)
    return [
        0 if d == 1 and out_shape[off + k] != 1 else idx[off + k] for k, d in enumerate(in_shape)
    ]


def op_name(op: Operation) -> str:
    return op.op_name.data if isinstance(op, UnregisteredOp) else op.name


class Lowering:
    """Emits the te ops of one graph op before it; names them `<base><suffix>`."""

    def __init__(self) -> None:
        self.counter = 0
        self.base = ""
        self.anchor: Operation | None = None
        self.created: list[Operation] = []
        # te ops that graph.fused lowering keeps as their own kernels instead of inlining
        # them (weight re-layouts: static work that must not be redone per output element)
        self.hoisted: set[Operation] = set()

    def emit(self, op: Operation) -> SSAValue:
        parent = self.anchor.parent_block()  # type: ignore[union-attr]
        assert parent is not None
        parent.insert_op_before(op, self.anchor)  # type: ignore[arg-type]
        self.created.append(op)
        op.results[0].name_hint = g.ssa_name_hint(op.properties["name"].data)  # type: ignore[union-attr]
        return op.results[0]

    def compute(self, ty: TensorType, fn, suffix: str = "") -> SSAValue:
        return self.emit(ComputeOp.from_fn(self.base + suffix, ty, fn))

    def reduce(
        self,
        ty: TensorType,
        extents,
        combiner: str,
        fn,
        suffix: str = "",
        epilogue=None,
        acc_type=None,
    ) -> SSAValue:
        init = None
        e = acc_type or ty.get_element_type()
        if isinstance(e, IntegerType) and combiner in ("max", "min"):
            # i1 is a bool (false < true, as numpy's), unsigned types start at 0 and
            # 2**w - 1, the others are signed
            w = e.width.data
            if w == 1:
                lo, hi = 0, 1
            elif e.signedness.data == Signedness.UNSIGNED:
                lo, hi = 0, 2**w - 1
            else:
                lo, hi = -(2 ** (w - 1)), 2 ** (w - 1) - 1
            init = float(lo if combiner == "max" else hi)
        over, symbolic = mark_extents(extents)  # (passes/lower/_symbolic.py)
        op = ReduceOp.from_fn(
            self.base + suffix,
            ty,
            over,
            combiner,
            fn,
            init=init,
            epilogue=epilogue,
            acc_type=acc_type,
        )
        if symbolic is not None:
            op.attributes[SYMBOLIC_OVER] = symbolic
        return self.emit(op)

    def lower(self, op: Operation) -> SSAValue:
        fn = LOWERINGS.get(op.name)
        if fn is None:
            raise DiagnosticException(f"graph-to-te cannot lower {op_name(op)}: no lowering")
        for v in (*op.operands, *op.results):
            symbolic = isinstance(v.type, TensorType) and isinstance(v.type.encoding, ArrayAttr)
            if not isinstance(v.type, TensorType) or not (v.type.has_static_shape() or symbolic):
                raise DiagnosticException(
                    f"graph-to-te needs static shapes; {op.name} has type {v.type} "
                    f"(run graph-infer-shapes first)"
                )
        self.base = f"{op.name.removeprefix('graph.')}_{self.counter}"
        self.counter += 1
        self.anchor = op
        return fn(self, op, list(op.operands))  # type: ignore[arg-type]


# ------------------------------------------------------------- windows and guards


def guarded_read(
    b: BodyBuilder, x: SSAValue, idx: Idx, checks: list[tuple[int, int]], fill: float
) -> SSAValue:
    """x[idx] when every idx[d] of `checks` (d, size) is in [0, size), else fill;
    emitted as scf.if so the read only runs in bounds."""
    if not checks:
        return b.read(x, idx)
    conds = [b.in_bounds(idx[d], size) for d, size in checks]
    cond = conds[0]
    for c in conds[1:]:
        cond = b.and_(cond, c)
    return b.if_(cond, lambda t: t.read(x, idx), lambda e: fill, elt(x))


def spatial_dims(op) -> tuple[int, int, int]:
    """(channel, h, w) dims of a layout op's activations: (1, 2, 3) for NCHW, (3, 1, 2)
    for `layout = "nhwc"` (`g.layout_of`)."""
    return (3, 1, 2) if g.layout_of(op) == "nhwc" else (1, 2, 3)


def window_checks(op: g.WindowOp, in_hw, out_hw, kernel) -> list[tuple[int, int]]:
    """Spatial dims (2, 3 in NCHW; 1, 2 in NHWC) whose window index may fall outside
    the input."""
    (sh, sw), (pt, pl, _, _), (dh, dw) = op.strides, op.pads, op.dilations
    _, dim_h, dim_w = spatial_dims(op)
    checks = []
    for d, size, o, s, p, k, dil in (
        (dim_h, in_hw[0], out_hw[0], sh, pt, kernel[0], dh),
        (dim_w, in_hw[1], out_hw[1], sw, pl, kernel[1], dw),
    ):
        if p > 0 or (o - 1) * s + (k - 1) * dil - p >= size:
            checks.append((d, size))
    return checks


def window_index(b: BodyBuilder, op: g.WindowOp, oh, ow, kh, kw) -> tuple:
    """Input (h, w) of output (oh, ow) and window offset (kh, kw)."""
    (sh, sw), (pt, pl, _, _), (dh, dw) = op.strides, op.pads, op.dilations
    ih = b.sub(b.add(b.mul(oh, sh), b.mul(kh, dh)), pt)
    iw = b.sub(b.add(b.mul(ow, sw), b.mul(kw, dw)), pl)
    return ih, iw
