"""The AST of the dlpc text model language: what `parser.py` produces and `irgen.py` reads.

Every node carries `loc = (line, column)`, 1-based, of its first character (for a binary
expression: its operator), so that every later error can point at the source.

    model m(x: f32[1, 4]) { let y = relu(x) * 2  return y }

    Model("m", inputs=[Input("x", TensorTypeExpr("f32", (1, 4)))],
          body=[Let("y", BinOp("*", Call("relu", [Name("x")], []), Number(2)))],
          ret=Return([Name("y")]))
"""

from __future__ import annotations

from dataclasses import dataclass, field

Loc = tuple[int, int]


@dataclass(frozen=True)
class TensorTypeExpr:
    """`f32[1, 3, 32, 32]`: an element type name and dims; a dim may be a name (`B`),
    bound when the model is loaded (`dims={"B": 32}`, default 1)."""

    dtype: str
    dims: tuple[int | str, ...]
    loc: Loc = (0, 0)
    named: dict[str, Loc] = field(default_factory=dict, compare=False)  # name -> its loc

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.dims)}]"


# ------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Number:
    """An int or float literal: `value`'s type tells `2` from `2.0` (attributes care)."""

    value: int | float
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class String:
    value: str
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class Name:
    id: str
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class ListExpr:
    items: tuple[Expr, ...]
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class Keyword:
    """`name=value` inside a call."""

    name: str
    value: Expr
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class BinOp:
    """`lhs op rhs` with op one of + - * / @; loc is the operator's."""

    op: str
    lhs: Expr
    rhs: Expr
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class Neg:
    operand: Expr
    loc: Loc = (0, 0)


Expr = Number | String | Name | ListExpr | Call | BinOp | Neg


# -------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Input:
    name: str
    type: TensorTypeExpr
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class Param:
    """`param w: f32[8, 3, 3, 3] = normal(seed=1, std=0.1)`; init may be None."""

    name: str
    type: TensorTypeExpr
    init: Call | None
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class Let:
    name: str
    value: Expr
    loc: Loc = (0, 0)


@dataclass(frozen=True)
class Return:
    values: tuple[Expr, ...]
    loc: Loc = (0, 0)


Stmt = Param | Let | Return


@dataclass(frozen=True)
class Model:
    name: str
    inputs: tuple[Input, ...]
    body: tuple[Stmt, ...]
    loc: Loc = (0, 0)
    end: Loc = (0, 0)  # the closing brace, for "missing return"
    filename: str = "<string>"
    source: str = field(default="", repr=False)
