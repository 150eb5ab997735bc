"""A slow, simple evaluator of te-level IR, for testing lowerings against the reference.

    outputs = run_te(module, inputs, weights)

interprets `@main` op by op: graph.param/graph.constant (and any graph op still left,
through the numpy reference), te.compute and te.reduce, and graph.if / graph.loop
(the reference's semantics, their regions' te ops evaluated here). A te body is evaluated once
for the whole index space, vectorised with numpy: each index argument is an
`np.indices` array, every body value is either a scalar or an array over that space.
`scf.if` evaluates each branch only on the points where it is taken, so a guarded
read is never executed out of bounds (an out-of-bounds te.read raises IndexError:
the evaluator checks the lowering's bounds guards too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects import arith, scf
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.dialects.te import ComputeOp, ReadOp, ReduceOp, YieldOp


def dtype_of(ty: Attribute) -> np.dtype:
    if isinstance(ty, IndexType):
        return np.dtype(np.int64)
    return np.dtype(graph.numpy_dtype(ty))


def _erf(x):
    y = np.frompyfunc(math.erf, 1, 1)(np.asarray(x, dtype=np.float64))
    return np.asarray(y, dtype=np.float64).astype(np.asarray(x).dtype)


def _trunc_div(a, b):
    q = np.abs(a) // np.abs(b)
    return np.sign(a) * np.sign(b) * q


def _trunc_rem(a, b):
    return a - _trunc_div(a, b) * b


_BINARY = {
    arith.AddfOp: np.add,
    arith.SubfOp: np.subtract,
    arith.MulfOp: np.multiply,
    arith.DivfOp: np.divide,
    arith.MaximumfOp: np.maximum,
    arith.MinimumfOp: np.minimum,
    arith.MaxnumfOp: np.fmax,
    arith.MinnumfOp: np.fmin,
    arith.AddiOp: np.add,
    arith.SubiOp: np.subtract,
    arith.MuliOp: np.multiply,
    arith.DivSIOp: _trunc_div,
    arith.DivUIOp: np.floor_divide,
    arith.RemSIOp: _trunc_rem,
    arith.RemUIOp: np.remainder,
    arith.FloorDivSIOp: np.floor_divide,
    arith.MaxSIOp: np.maximum,
    arith.MinSIOp: np.minimum,
    arith.AndIOp: np.bitwise_and,
    arith.OrIOp: np.bitwise_or,
    arith.XOrIOp: np.bitwise_xor,
    arith.ShLIOp: np.left_shift,
    arith.ShRSIOp: np.right_shift,
    arith.ShRUIOp: np.right_shift,  # (on unsigned arrays: logical)
    xmath.PowFOp: np.power,
    xmath.IPowIOp: np.power,
}
_UNARY = {
    arith.NegfOp: np.negative,
    xmath.ExpOp: np.exp,
    xmath.LogOp: np.log,
    xmath.SqrtOp: np.sqrt,
    xmath.RsqrtOp: lambda x: 1 / np.sqrt(x),
    xmath.TanhOp: np.tanh,
    xmath.ErfOp: _erf,
    xmath.SinOp: np.sin,
    xmath.CosOp: np.cos,
    xmath.TanOp: np.tan,
    xmath.AsinOp: np.arcsin,
    xmath.AcosOp: np.arccos,
    xmath.AtanOp: np.arctan,
    xmath.SinhOp: np.sinh,
    xmath.CoshOp: np.cosh,
    xmath.AsinhOp: np.arcsinh,
    xmath.AcoshOp: np.arccosh,
    xmath.AtanhOp: np.arctanh,
    xmath.FloorOp: np.floor,
    xmath.CeilOp: np.ceil,
    xmath.RoundEvenOp: np.round,
    xmath.AbsFOp: np.abs,
    xmath.AbsIOp: np.abs,
}
_CMP = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
# arith.cmpf / cmpi predicate numbers -> comparison (`_compare` adds what NaN and the
# unsigned predicates change)
_CMPF = {
    1: "eq",
    2: "gt",
    3: "ge",
    4: "lt",
    5: "le",
    6: "ne",
    8: "eq",
    9: "gt",
    10: "ge",
    11: "lt",
    12: "le",
    13: "ne",
}
_CMPI = {0: "eq", 1: "ne", 2: "lt", 3: "le", 4: "gt", 5: "ge", 6: "lt", 7: "le", 8: "gt", 9: "ge"}


def _compare(op: arith.CmpfOp | arith.CmpiOp, a, b):
    """arith.cmpf: predicates 1-6 are false where an operand is NaN, 8-13 true, `ord` (7)
    and `uno` (14) test for NaN, 0 and 15 are constant; arith.cmpi 6-9 (ult ... uge)
    compare the bits as unsigned."""
    pred = op.predicate.value.data
    a, b = np.asarray(a), np.asarray(b)
    if isinstance(op, arith.CmpiOp):
        if pred >= 6 and a.dtype.kind == "i":
            unsigned = np.dtype(f"u{a.dtype.itemsize}")
            a, b = a.view(unsigned), b.astype(a.dtype).view(unsigned)
        return _CMP[_CMPI[pred]](a, b)
    nan = np.isnan(a) | np.isnan(b)
    if pred in (0, 15):
        return np.full(nan.shape, pred == 15)
    if pred in (7, 14):
        return ~nan if pred == 7 else nan
    r = _CMP[_CMPF[pred]](a, b)
    return r | nan if pred >= 8 else r & ~nan


class _Body:
    """Evaluates a block over an index space of `size` points (values flat or scalar: a
    rank-0 value may be a numpy scalar, which reads as a 0-d array)."""

    def __init__(self, env: dict[SSAValue, np.ndarray]):
        self.env = env

    def run(self, block: Block, local: dict[SSAValue, np.ndarray]) -> np.ndarray:
        for op in block.ops:
            if isinstance(op, YieldOp | scf.YieldOp):
                return self.get(op.operands[0], local)
            local[op.results[0]] = self.op(op, local)
        raise AssertionError("block without terminator")

    def get(self, v: SSAValue, local: dict[SSAValue, np.ndarray]) -> np.ndarray:
        return local[v] if v in local else self.env[v]

    def op(self, op: Operation, local: dict[SSAValue, np.ndarray]) -> np.ndarray:
        args = [self.get(v, local) for v in op.operands]
        ty = op.results[0].type
        if isinstance(op, arith.ConstantOp):
            return np.asarray(op.value.value.data, dtype=dtype_of(ty))[()]  # type: ignore
        if isinstance(op, ReadOp):
            tensor = args[0]
            if len(args) == 1:
                return tensor[()]
            idx = tuple(np.asarray(i, dtype=np.int64) for i in args[1:])
            for i, n in zip(idx, tensor.shape):
                if i.size and (i.min() < 0 or i.max() >= n):
                    raise IndexError(
                        f"te.read of {op.tensor.type} out of bounds: index "
                        f"{int(i.min())}..{int(i.max())} for a dim of {n}"
                    )
            return tensor[idx]
        if type(op) in _BINARY:
            return np.asarray(_BINARY[type(op)](args[0], args[1])).astype(dtype_of(ty))
        if type(op) in _UNARY:
            return np.asarray(_UNARY[type(op)](args[0])).astype(dtype_of(ty))
        if isinstance(op, arith.CmpfOp | arith.CmpiOp):
            return _compare(op, args[0], args[1])
        if isinstance(op, arith.SelectOp):
            return np.where(args[0], args[1], args[2]).astype(dtype_of(ty))
        if isinstance(op, arith.ExtUIOp | arith.UIToFPOp) and args[0].dtype == bool:  # type: ignore
            return np.asarray(args[0]).astype(dtype_of(ty))
        if isinstance(
            op,
            arith.IndexCastOp
            | arith.ExtSIOp
            | arith.ExtUIOp
            | arith.TruncIOp
            | arith.SIToFPOp
            | arith.UIToFPOp
            | arith.FPToSIOp
            | arith.FPToUIOp
            | arith.ExtFOp
            | arith.TruncFOp,
        ):
            return np.asarray(args[0]).astype(dtype_of(ty))
        if isinstance(op, arith.BitcastOp):  # the same bits (i8 -> ui8, f32 -> i32)
            return np.asarray(args[0]).view(dtype_of(ty))
        if isinstance(op, scf.IfOp):
            return self.if_(op, args[0], local)
        raise DlpcError(f"error: te evaluator does not know {op.name}")

    def if_(self, op: scf.IfOp, cond, local: dict[SSAValue, np.ndarray]) -> np.ndarray:
        cond = np.asarray(cond)
        if cond.ndim == 0:
            region = op.true_region if cond else op.false_region
            return self.run(region.block, dict(local))
        out = np.empty(cond.shape, dtype=dtype_of(op.results[0].type))
        for mask, region in ((cond, op.true_region), (~cond, op.false_region)):
            if not mask.any():
                continue
            sub = {k: (v[mask] if np.ndim(v) else v) for k, v in local.items()}
            out[mask] = self.run(region.block, sub)
        return out


def _space(shape: Sequence[int]) -> list[np.ndarray]:
    """Flat index arrays enumerating `shape` in row-major order."""
    if not shape:
        return []
    return [a.reshape(-1) for a in np.indices(tuple(shape), dtype=np.int64)]


def _full(value, size: int, dtype) -> np.ndarray:
    return np.broadcast_to(np.asarray(value, dtype=dtype), (size,)).copy()


def eval_compute(op: ComputeOp, env: dict[SSAValue, np.ndarray]) -> np.ndarray:
    shape, dtype = op.shape, dtype_of(op.element_type)
    size = math.prod(shape)
    local: dict[SSAValue, np.ndarray] = dict(zip(op.body.block.args, _space(shape)))
    value = _Body(env).run(op.body.block, local)
    return _full(value, size, dtype).reshape(shape)


def eval_reduce(op: ReduceOp, env: dict[SSAValue, np.ndarray]) -> np.ndarray:
    shape, extents = op.shape, op.reduce_extents
    acc_dtype = dtype_of(op.acc_type)
    size = math.prod(shape) * math.prod(extents)
    local: dict[SSAValue, np.ndarray] = dict(zip(op.body.block.args, _space((*shape, *extents))))
    value = _Body(env).run(op.body.block, local)
    values = _full(value, size, acc_dtype).reshape(math.prod(shape), math.prod(extents))
    init = op.init_value
    if np.issubdtype(acc_dtype, np.integer):  # the type's bound, clamped as te-to-loop does
        lo, hi = int(np.iinfo(acc_dtype).min), int(np.iinfo(acc_dtype).max)
        init = hi if init >= hi else lo if init <= lo else int(init)
    init = np.asarray(init).astype(acc_dtype)
    combine = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    acc = combine[op.combiner_name].reduce(values, axis=1, initial=init).astype(acc_dtype)
    if op.has_epilogue:
        block = op.epilogue.block
        elocal: dict[SSAValue, np.ndarray] = dict(zip(block.args, [acc, *_space(shape)]))
        acc = _full(_Body(env).run(block, elocal), math.prod(shape), dtype_of(op.element_type))
    return acc.reshape(shape)


def run_te(
    module: ModuleOp, inputs: Sequence[np.ndarray], weights: dict[str, np.ndarray] | None = None
) -> list[np.ndarray]:
    """Interpret te-level @main on numpy inputs; returns the outputs."""
    from dlpc.reference.graph import check_inputs, main_func

    weights = weights or {}
    func = main_func(module)
    env: dict[SSAValue, np.ndarray] = dict(zip(func.args, check_inputs(func, inputs)))
    for op in func.body.block.ops:
        if isinstance(op, ReturnOp):
            return [env[v] for v in op.operands]
        _step(op, env, weights)
    raise DlpcError("error: @main has no func.return")


def _region(block: Block, arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """A graph.if / graph.loop region at the te level: its te ops evaluated, the values
    its graph.yield gives."""
    env: dict[SSAValue, np.ndarray] = dict(zip(block.args, arrays))
    for op in block.ops:
        if isinstance(op, graph.YieldOp):
            return tuple(env[v] for v in op.values)
        _step(op, env, {})
    raise DlpcError("error: a region without graph.yield")


def _step(op, env: dict[SSAValue, np.ndarray], weights: dict[str, np.ndarray]) -> None:
    """Evaluate one op of a te-level block into `env`."""
    from dlpc.reference.graph import control, evaluate_op, evaluate_results

    if isinstance(op, graph.ControlOp):
        env.update(zip(op.results, control(op, [env[v] for v in op.operands], _region)))
    elif isinstance(op, ComputeOp):
        env[op.result] = eval_compute(op, env)
    elif isinstance(op, ReduceOp):
        env[op.result] = eval_reduce(op, env)
    elif isinstance(op, graph.ParamOp):
        if op.pname not in weights:
            raise DlpcError(f"error: no value for weight '{op.pname}' (graph.param)")
        env[op.output] = evaluate_op(op, [weights[op.pname]])
    elif isinstance(op, arith.ConstantOp):  # a scalar the bodies read
        env[op.result] = _Body(env).op(op, {})
    else:
        env.update(zip(op.results, evaluate_results(op, [env[v] for v in op.operands])))
