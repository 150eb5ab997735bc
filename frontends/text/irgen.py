"""AST -> graph IR: one `builtin.module` holding `func.func @main`.

    model m(x: f32[1, 4]) {            func.func @main(%x: tensor<1x4xf32> {dlpc.name = "x"}) -> ... {
      param w: f32[4, 4] = zeros()       %w = graph.param "w" : tensor<4x4xf32>
      let y = relu(x @ w) * 0.5          %0 = graph.matmul %x, %w : ...
      return y                           %1 = graph.relu %0 : ...
    }                                    %2 = graph.constant dense<5.000000e-01> : tensor<f32>
                                         %y = graph.mul %1, %2 : ...
                                         func.return %y : tensor<1x4xf32>

Ops are built through `frontends/builder.GraphBuilder` (the shared operator table and argument
checks); every op carries its source position as its xDSL location (`loc("m.dlpc":3:11)` when
printed with debug info).  Every error is a located `DlpcError`.

Scoping: inputs and parameters are defined once; `let` may rebind a `let` name (shadowing, so
`let h = f(h)` chains read naturally) but not an input or a parameter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.utils.exceptions import VerifyException

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph, symdims
from dlpc.frontends import builder as bld
from dlpc.frontends.builder import FrontendError, GraphBuilder
from dlpc.frontends.text import ast
from dlpc.frontends.text.parser import error_at

# names with a meaning in attribute (constant) position
_CONSTANT_NAMES: dict[str, Any] = {"true": True, "false": False, "inf": math.inf}


@dataclass
class _Binding:
    value: SSAValue | int | float
    kind: str  # "input", "param" or "let"
    loc: ast.Loc


class IRGen:
    def __init__(self, model: ast.Model, dims: Mapping[str, int] | str | None = None):
        self.model = model
        given: Mapping[str, int] = {} if isinstance(dims, str) or dims is None else dims
        # named dims (`x: f32[B, 784]`) -> size; an unbound one is a SymDim (symbolic)
        self.dims: dict[str, Any] = dict(given)
        self.b = GraphBuilder(model.name)
        self.env: dict[str, _Binding] = {}
        self.param_locs: dict[str, ast.Loc] = {}

    # ---- diagnostics -------------------------------------------------------------
    def error(self, loc: ast.Loc, message: str) -> DlpcError:
        return error_at(self.model.filename, self.model.source, loc, message)

    def blame(self, e: FrontendError, call: ast.Call) -> DlpcError:
        """Point a builder error at the argument it names."""
        loc = call.loc
        if isinstance(e.arg, int) and e.arg < len(call.args):
            loc = call.args[e.arg].loc
        elif isinstance(e.arg, str):
            loc = next((k.loc for k in call.kwargs if k.name == e.arg), call.loc)
        return self.error(loc, e.message)

    def at(self, loc: ast.Loc) -> None:
        """Set the location stamped on the ops built next."""
        self.b.loc = FileLineColLoc(
            StringAttr(self.model.filename), IntAttr(loc[0]), IntAttr(loc[1])
        )

    # ---- declarations --------------------------------------------------------------
    def define(self, name: str, binding: _Binding) -> None:
        old = self.env.get(name)
        if old is not None and not (old.kind == "let" and binding.kind == "let"):
            what = {"input": "an input", "param": "a parameter", "let": "a let binding"}[old.kind]
            raise self.error(
                binding.loc,
                f"duplicate name '{name}' (already defined as {what} at line {old.loc[0]})",
            )
        self.env[name] = binding

    def check_type(self, ty: ast.TensorTypeExpr) -> None:
        if ty.dtype not in bld.DTYPES:
            hint = bld.suggest(ty.dtype, list(bld.DTYPES))
            raise self.error(ty.loc, f"unknown element type '{ty.dtype}'{hint}")
        for name, loc in ty.named.items():
            if name in bld.DTYPES or name in _CONSTANT_NAMES:
                raise self.error(loc, f"'{name}' cannot name a dimension")
            # an unbound named dim stays symbolic (dialects/symdims)
            size = self.dims.setdefault(name, symdims.sym(name))
            if isinstance(size, symdims.SymDim):
                continue
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise self.error(loc, f"dimension '{name}' must be bound to a positive int")
        too_big = graph.size_error(self.shape(ty), bld.DTYPES[ty.dtype])
        if too_big:
            raise self.error(ty.loc, too_big)

    def shape(self, ty: ast.TensorTypeExpr) -> tuple[int, ...]:
        """The static shape of a type, its named dims bound."""
        return tuple(self.dims[d] if isinstance(d, str) else d for d in ty.dims)

    def generate(self) -> ModuleOp:
        m = self.model
        self.at(m.loc)
        for inp in m.inputs:
            self.check_type(inp.type)
            self.at(inp.loc)
            if inp.name in self.env:
                self.define(inp.name, _Binding(0, "input", inp.loc))
            value = self.b.input(inp.name, self.shape(inp.type), inp.type.dtype)
            self.define(inp.name, _Binding(value, "input", inp.loc))
        returned = False
        for stmt in m.body:
            if returned:
                raise self.error(stmt.loc, "statement after return")
            if isinstance(stmt, ast.Param):
                self.param(stmt)
            elif isinstance(stmt, ast.Let):
                value = self.expr(stmt.value)
                if isinstance(value, SSAValue) and value.name_hint is None:
                    value.name_hint = bld.ssa_name_hint(stmt.name)
                self.define(stmt.name, _Binding(value, "let", stmt.loc))
            else:
                self.ret(stmt)
                returned = True
        if not returned:
            raise self.error(m.end, f"model '{m.name}' has no return statement")
        try:
            return self.b.module()
        except VerifyException as e:  # not expected: every op was verified as it was built
            raise self.error(m.loc, str(e)) from None

    def param(self, p: ast.Param) -> None:
        self.check_type(p.type)
        # a weight is one array: its dims are numbers (a symbolic one has no value to build it)
        free = next((d for d in p.type.named if isinstance(self.dims[d], symdims.SymDim)), None)
        if free is not None:
            raise self.error(
                p.type.named[free],
                f"parameter '{p.name}' has the unbound named dim '{free}': a parameter's "
                f"shape must be known (bind it: dims={{'{free}': n}})",
            )
        if p.name in self.env:
            self.define(p.name, _Binding(0, "param", p.loc))
        init = None
        if p.init is not None:
            args = [self.constant(a, p.init.func) for a in p.init.args]
            kwargs = {k.name: self.constant(k.value, p.init.func) for k in p.init.kwargs}
            try:
                init = bld.make_initializer(p.init.func, *args, **kwargs)
            except FrontendError as e:
                raise self.blame(e, p.init) from None
        self.at(p.loc)
        value = self.b.param(p.name, self.shape(p.type), p.type.dtype, init)
        self.param_locs[p.name] = p.loc
        self.define(p.name, _Binding(value, "param", p.loc))

    def ret(self, r: ast.Return) -> None:
        values = []
        for e in r.values:
            v = self.expr(e)
            if not isinstance(v, SSAValue):
                self.at(e.loc)
                v = self.b.constant(v)
            values.append(v)
        self.at(r.loc)
        self.b.output(*values)

    # ---- expressions -----------------------------------------------------------------
    def lookup(self, name: ast.Name) -> _Binding:
        if name.id not in self.env:
            hint = bld.suggest(name.id, list(self.env))
            raise self.error(name.loc, f"undefined name '{name.id}'{hint}")
        return self.env[name.id]

    def expr(self, e: ast.Expr) -> SSAValue | int | float:
        """A tensor-valued expression; numbers stay Python numbers until an op needs them."""
        if isinstance(e, ast.Number):
            return e.value
        if isinstance(e, ast.Name):
            return self.lookup(e).value
        if isinstance(e, ast.Neg):
            v = self.expr(e.operand)
            if not isinstance(v, SSAValue):
                return -v
            self.at(e.loc)
            return self.b.neg(v)
        if isinstance(e, ast.BinOp):
            lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
            if not isinstance(lhs, SSAValue) and not isinstance(rhs, SSAValue):
                return self.fold(e, lhs, rhs)
            self.at(e.loc)
            try:
                return self.b.binary(e.op, lhs, rhs)
            except FrontendError as err:
                raise self.error(e.loc, err.message) from None
        if isinstance(e, ast.Call):
            return self.call(e)
        what = "a string" if isinstance(e, ast.String) else "a list"
        raise self.error(e.loc, f"expected a tensor, got {what}")

    def fold(self, e: ast.BinOp, lhs: float, rhs: float) -> int | float:
        if e.op == "@":
            raise self.error(e.loc, "'@' needs tensor operands, got two numbers")
        if e.op == "/" and rhs == 0:
            raise self.error(e.loc, "division by zero")
        if e.op == "/":
            return lhs / rhs
        return {"+": lhs + rhs, "-": lhs - rhs, "*": lhs * rhs}[e.op]

    def constant(self, e: ast.Expr, where: str) -> Any:
        """An attribute value: number, string, bool, list, element type name."""
        if isinstance(e, ast.Number | ast.String):
            return e.value
        if isinstance(e, ast.ListExpr):
            return [self.constant(item, where) for item in e.items]
        if isinstance(e, ast.Neg):
            v = self.constant(e.operand, where)
            if isinstance(v, int | float) and not isinstance(v, bool):
                return -v
            raise self.error(e.loc, f"cannot negate {bld.show(v)}")
        if isinstance(e, ast.BinOp):
            lhs, rhs = self.constant(e.lhs, where), self.constant(e.rhs, where)
            if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lhs, rhs)):
                return self.fold(e, lhs, rhs)
            raise self.error(e.loc, f"'{e.op}' on constants needs two numbers")
        if isinstance(e, ast.Name):
            if e.id in _CONSTANT_NAMES:
                return _CONSTANT_NAMES[e.id]
            if e.id in bld.DTYPES:
                return e.id
            if e.id in self.dims and e.id not in self.env:  # a named dim: its bound size
                return self.dims[e.id]
            binding = self.lookup(e)
            if isinstance(binding.value, int | float):
                return binding.value
            raise self.error(e.loc, f"{where} expects a constant here, but '{e.id}' is a tensor")
        raise self.error(e.loc, f"{where} expects a constant here, not an operator call")

    def call(self, c: ast.Call) -> SSAValue:
        opname = bld.SUGAR.get(c.func, (c.func,))[0]
        op = bld.OPS.get(opname)
        if op is None:
            hint = bld.suggest(c.func, bld.op_names())
            raise self.error(c.loc, f"unknown operator '{c.func}'{hint}")
        operand_names = bld.operand_names(op)
        variadic = op.OPERANDS[0].startswith("*")
        args: list[Any] = []
        for a in c.args:
            if variadic and isinstance(a, ast.ListExpr):
                args.append([self.expr(item) for item in a.items])
            else:
                args.append(self.expr(a))
        if variadic and len(args) == 1 and isinstance(args[0], list):
            args = args[0]
        kwargs: dict[str, Any] = {}
        for k in c.kwargs:
            if k.name in kwargs:
                raise self.error(k.loc, f"{c.func} got argument '{k.name}' twice")
            if not variadic and k.name in operand_names:
                kwargs[k.name] = self.expr(k.value)
            else:
                kwargs[k.name] = self.constant(k.value, f"{c.func} argument '{k.name}'")
        self.at(c.loc)
        try:
            return self.b.op(c.func, *args, **kwargs)
        except FrontendError as e:
            raise self.blame(e, c) from None


@dataclass
class Generated:
    """The result of code generation: the module plus what weight binding needs."""

    module: ModuleOp
    builder: GraphBuilder
    param_locs: dict[str, ast.Loc]
    model: ast.Model

    def weights(
        self, given: str | Path | Mapping[str, Any] | None, where: str
    ) -> dict[str, np.ndarray]:
        """Bind every parameter: `given` first, then the initialiser in the source."""
        try:
            source = (
                None
                if given is None
                else bld.load_weights(str(given) if isinstance(given, Path) else given)
            )
        except FrontendError as e:
            raise DlpcError(f"{self.model.filename}: error: {e.message}") from None
        out = {}
        for name, decl in self.builder.params.items():
            try:
                out[name] = bld.resolve_weight(decl, source, where)
            except FrontendError as e:
                raise error_at(
                    self.model.filename, self.model.source, self.param_locs[name], e.message
                ) from None
        return out


def generate(model: ast.Model, dims: Mapping[str, int] | str | None = None) -> Generated:
    """Graph IR for `model`; `dims` binds its named dims (`{"B": 32}`); unbound ones stay
    symbolic."""
    gen = IRGen(model, dims)
    module = gen.generate()
    return Generated(module, gen.b, gen.param_locs, model)
