"""Source text -> AST (`ast.Model`) for the dlpc text model language.

The grammar is `grammar.lark` (LALR(1), positions propagated); a lark Transformer turns the
parse tree into the frozen dataclasses of `ast.py`.  Syntax errors become `DlpcError`s in
clang style:

    bad.dlpc:3:17: error: unexpected ')', expected an expression
      let h = relu(x,)
                    ^
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from dlpc.diagnostics import DlpcError
from dlpc.frontends.text import ast

GRAMMAR = Path(__file__).with_name("grammar.lark")


def error_at(filename: str, source: str, loc: ast.Loc, message: str) -> DlpcError:
    """`file:line:col: error: message`, then the source line and a caret under the column."""
    line, col = loc
    head = f"{filename}:{line}:{col}: error: {message}"
    lines = source.splitlines()
    if not 1 <= line <= len(lines) or not lines[line - 1].strip():
        return DlpcError(head)  # no source line to show (past the end, or blank)
    text = lines[line - 1]
    # keep tabs so that the caret lines up in a terminal
    pad = "".join(c if c == "\t" else " " for c in text[: col - 1])
    return DlpcError(f"{head}\n{text}\n{pad}^")


@functools.cache
def _lark() -> Lark:
    return Lark(
        GRAMMAR.read_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True
    )


def _loc(x) -> ast.Loc:
    if isinstance(x, Token):
        # (lark types a token's position Optional; the lexer's tokens always carry one)
        assert x.line is not None and x.column is not None
        return (x.line, x.column)
    return (x.meta.line, x.meta.column)


class _ToAst(Transformer):
    """Parse tree -> AST.  Rules inlined with `?` arrive as their single child."""

    def __init__(self, filename: str, source: str):
        super().__init__()
        self.filename = filename
        self.source = source

    def start(self, children):
        return children[0]

    @v_args(meta=True)
    def model(self, meta, children):
        name, *rest = children
        inputs = tuple(c for c in rest if isinstance(c, ast.Input))
        body = tuple(c for c in rest if c is not None and not isinstance(c, ast.Input))
        end = (meta.end_line, meta.end_column - 1)
        return ast.Model(str(name), inputs, body, _loc(name), end, self.filename, self.source)

    def input(self, children):
        name, ty = children
        return ast.Input(str(name), ty, _loc(name))

    def ttype(self, children):
        dtype, *dims = children
        dims = tuple(d if d.type == "NAME" else int(d) for d in dims if d is not None)
        named = {str(d): _loc(d) for d in dims if not isinstance(d, int)}
        dims = tuple(d if isinstance(d, int) else str(d) for d in dims)
        return ast.TensorTypeExpr(str(dtype), dims, _loc(dtype), named)

    def param(self, children):
        name, ty, init = children
        return ast.Param(str(name), ty, init, _loc(name))

    @v_args(meta=True)
    def let(self, meta, children):
        name, value = children
        return ast.Let(str(name), value, _loc(name))

    @v_args(meta=True)
    def ret(self, meta, children):
        return ast.Return(tuple(children), (meta.line, meta.column))

    # ---- expressions
    def binop(self, children):
        lhs, op, rhs = children
        return ast.BinOp(str(op), lhs, rhs, _loc(op))

    def neg(self, children):
        minus, operand = children
        return ast.Neg(operand, _loc(minus))

    def int(self, children):
        (tok,) = children
        return ast.Number(int(tok), _loc(tok))

    def float(self, children):
        (tok,) = children
        return ast.Number(float(tok), _loc(tok))

    def string(self, children):
        (tok,) = children
        return ast.String(str(tok)[1:-1], _loc(tok))

    def name(self, children):
        (tok,) = children
        return ast.Name(str(tok), _loc(tok))

    @v_args(meta=True)
    def list(self, meta, children):
        return ast.ListExpr(tuple(c for c in children if c is not None), (meta.line, meta.column))

    def call(self, children):
        func, *args = children
        args = [a for a in args if a is not None]
        positional = tuple(a for a in args if not isinstance(a, ast.Keyword))
        keywords = tuple(a for a in args if isinstance(a, ast.Keyword))
        return ast.Call(str(func), positional, keywords, _loc(func))

    def kwarg(self, children):
        name, value = children
        return ast.Keyword(str(name), value, _loc(name))


# Friendly spellings of terminals for "expected ..." messages.
_TERMINALS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "STRING": "a string",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "COMMA": "','",
    "COLON": "':'",
    "EQUAL": "'='",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "AT": "'@'",
    "MODEL": "'model'",
    "PARAM": "'param'",
    "LET": "'let'",
    "RETURN": "'return'",
    "$END": "end of file",
    "<END-OF-FILE>": "end of file",
}
_EXPR_START = {"NAME", "INT", "FLOAT", "STRING", "LSQB", "LPAR", "MINUS"}


def _describe_expected(expected: Iterable[str]) -> str:
    names = set(expected)
    parts = []
    if _EXPR_START <= names:
        names -= _EXPR_START
        parts.append("an expression")
    parts += sorted(_TERMINALS.get(n, n.lower()) for n in names)
    if not parts or len(parts) > 5:  # a long list helps nobody
        return ""
    if len(parts) == 1:
        return f", expected {parts[0]}"
    return f", expected {', '.join(parts[:-1])} or {parts[-1]}"


def _syntax_error(e: UnexpectedInput, filename: str, source: str) -> DlpcError:
    if isinstance(e, UnexpectedCharacters):
        char = source[e.pos_in_stream] if e.pos_in_stream < len(source) else ""
        return error_at(filename, source, (e.line, e.column), f"unexpected character '{char}'")
    if isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        lines = source.splitlines() or [""]
        loc = (len(lines), len(lines[-1]) + 1)
        return error_at(
            filename, source, loc, "unexpected end of file" + _describe_expected(e.expected)
        )
    assert isinstance(e, UnexpectedToken)
    tok = e.token
    expected = _describe_expected(e.expected)
    return error_at(filename, source, (tok.line, tok.column), f"unexpected '{tok}'{expected}")


# How deeply expressions may nest (`-(-(-x))`, `((x))`, `[[1]]`): the tree is checked
# without recursion before the transformer and irgen, which recurse, walk it.
MAX_NESTING = 200


def _check_nesting(tree, filename: str, source: str) -> None:
    """A located error at the first node nested deeper than MAX_NESTING."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            loc = _loc(node) if isinstance(node, Token) or not node.meta.empty else (1, 1)
            raise error_at(
                filename, source, loc, f"expression nested more than {MAX_NESTING} levels deep"
            )
        if isinstance(node, Tree):
            stack += [(c, depth + 1) for c in node.children if isinstance(c, Tree)]


def parse(source: str, filename: str = "<string>") -> ast.Model:
    """Parse one model; raise `DlpcError` (located, with a caret) on a syntax error."""
    try:
        tree = _lark().parse(source)
    except UnexpectedInput as e:
        raise _syntax_error(e, filename, source) from None
    _check_nesting(tree, filename, source)
    return _ToAst(filename, source).transform(tree)
