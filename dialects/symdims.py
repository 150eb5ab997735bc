"""Symbolic dims: a tensor dim whose size is known only when a call binds it.

A dim is an int or a `SymDim`, a polynomial with integer coefficients over atoms: named
symbols (ONNX's `dim_param`, a `.dlpc` named dim: `batch`, `seq`) and floor quotients
(`floor((h + -3) / 2)`, as a strided window's output size gives). Polynomials are kept in
one canonical form, so two dims are equal exactly when their forms are: `2*seq` equals
`seq + seq`; `batch` and `seq` are not (nothing says they are the same size).

A SymDim behaves as an int in the shape arithmetic of `graph` ops (`+`, `-`, `*`, `//`,
`%`, `math.prod`, set membership), so an op's `infer_shape` works on symbolic shapes
unchanged. Comparisons with an order (`<`, `>=`) assume every symbol is at least 1; when
that does not decide them, `<` and `<=` answer False and `>` and `>=` True (a symbolic
size is taken to be large: `oh < 1` passes; the check is made again once the dims are
bound). `==` is proof: True only when the forms are equal.

In a type a symbolic dim is MLIR's dynamic `?`, and the tensor's `encoding` lists the
expressions of its `?` dims in order:

    tensor<?x?x256xf32, ["batch", "seq"]>
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias, Union

Dim = Union[int, "SymDim"]
# a monomial: its atoms, sorted by their text, with repetition (seq*seq)
Monomial = tuple["Atom", ...]


@dataclass(frozen=True)
class Floor:
    """floor(num / den) for a polynomial `num` that `den` (> 1) does not divide."""

    num: SymDim
    den: int

    def __str__(self) -> str:
        num = str(self.num)
        return f"floor({num if ' ' not in num else f'({num})'} / {self.den})"

    def evaluate(self, bound: Mapping[str, int]) -> int:
        return evaluate(self.num, bound) // self.den


Atom: TypeAlias = "str | Floor"


def _key(atom: Atom) -> str:
    return atom if isinstance(atom, str) else str(atom)


class SymDim:
    """A polynomial over symbols and floor atoms (construct with `sym`, combine with
    arithmetic; a constant result is a plain int)."""

    __slots__ = ("terms", "_hash")

    def __init__(self, terms: Mapping[Monomial, int]):
        self.terms: dict[Monomial, int] = {m: c for m, c in terms.items() if c}
        self._hash = hash(frozenset(self.terms.items()))

    # ---- construction --------------------------------------------------------------
    @staticmethod
    def make(terms: Mapping[Monomial, int]) -> Dim:
        clean = {m: c for m, c in terms.items() if c}
        if not clean:
            return 0
        if list(clean) == [()]:
            return clean[()]
        return SymDim(clean)

    @staticmethod
    def of(x: Dim) -> SymDim:
        return x if isinstance(x, SymDim) else SymDim({(): x} if x else {})

    # ---- arithmetic ------------------------------------------------------------------
    def __add__(self, other: object) -> Dim:
        if not isinstance(other, int | SymDim):
            return NotImplemented
        out = dict(self.terms)
        for m, c in SymDim.of(other).terms.items():
            out[m] = out.get(m, 0) + c
        return SymDim.make(out)

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return SymDim.make({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: object) -> Dim:
        if not isinstance(other, int | SymDim):
            return NotImplemented
        return self + (-other)

    def __rsub__(self, other: object) -> Dim:
        if not isinstance(other, int):
            return NotImplemented
        return (-self) + other

    def __mul__(self, other: object) -> Dim:
        if not isinstance(other, int | SymDim):
            return NotImplemented
        out: dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in SymDim.of(other).terms.items():
                m = tuple(sorted((*m1, *m2), key=_key))
                out[m] = out.get(m, 0) + c1 * c2
        return SymDim.make(out)

    __rmul__ = __mul__

    def __floordiv__(self, other: object) -> Dim:
        if isinstance(other, int):
            if other == 0:
                raise ZeroDivisionError("symbolic dim divided by 0")
            if other == 1:
                return self
            if all(c % other == 0 for c in self.terms.values()):
                return SymDim.make({m: c // other for m, c in self.terms.items()})
            # floor((A*k + R) / k) = A + floor(R / k) for integer-valued A: each
            # coefficient's multiple of k comes out, so the atom keeps the remainders
            whole = {m: c // other for m, c in self.terms.items()}
            rest = SymDim.make({m: c % other for m, c in self.terms.items()})
            if isinstance(rest, int):
                return SymDim.make(whole) + rest // other
            return SymDim.make(whole) + SymDim({(Floor(rest, other),): 1})
        if isinstance(other, SymDim):
            quotient = exact_quotient(self, other)
            if quotient is None:
                raise SymbolicError(f"cannot divide {self} by {other}")
            return quotient
        return NotImplemented

    def __rfloordiv__(self, other: object) -> Dim:
        if not isinstance(other, int):
            return NotImplemented
        if other == 0:
            return 0
        raise SymbolicError(f"cannot divide {other} by {self}")

    def __mod__(self, other: object) -> Dim:
        if not isinstance(other, int | SymDim):
            return NotImplemented
        return self - (self // other) * other

    def __rmod__(self, other: object) -> Dim:
        if not isinstance(other, int):
            return NotImplemented
        if other == 0:
            return 0
        raise SymbolicError(f"cannot take {other} modulo {self}")

    # ---- comparison ------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, SymDim):
            return self.terms == other.terms
        return False  # (a SymDim is never a constant: make() turns those into ints)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return self._hash

    def lower_bound(self) -> int | None:
        """A lower bound when every symbol is >= 1 (None when a negative or floor term
        leaves it open)."""
        low = 0
        for m, c in self.terms.items():
            if not m:
                low += c
            elif c > 0 and all(isinstance(a, str) for a in m):
                low += c
            else:
                return None
        return low

    def _decide(self, other: object, op: str) -> bool:
        if not isinstance(other, int | SymDim):
            raise TypeError(f"cannot compare a symbolic dim with {other!r}")
        diff = self - other
        if isinstance(diff, int):
            return {"<": diff < 0, "<=": diff <= 0, ">": diff > 0, ">=": diff >= 0}[op]
        low = diff.lower_bound()
        if low is not None:  # diff >= low
            if op == ">=" and low >= 0 or op == ">" and low > 0:
                return True
            if op == "<" and low >= 0 or op == "<=" and low > 0:
                return False
        # undecided: the check that asked is a sanity bound; the bound call decides
        return op in (">", ">=")

    def __lt__(self, other: object) -> bool:
        return self._decide(other, "<")

    def __le__(self, other: object) -> bool:
        return self._decide(other, "<=")

    def __gt__(self, other: object) -> bool:
        return self._decide(other, ">")

    def __ge__(self, other: object) -> bool:
        return self._decide(other, ">=")

    def __bool__(self) -> bool:
        return True  # a dim over symbols >= 1 is not known to be 0

    def __index__(self) -> int:
        raise SymbolicError(f"symbolic dim {self} has no value until it is bound")

    # ---- text --------------------------------------------------------------------------
    def __str__(self) -> str:
        parts: list[str] = []
        for m, c in sorted(self.terms.items(), key=lambda t: (-len(t[0]), [_key(a) for a in t[0]])):
            atoms = [_key(a) for a in m]
            if not atoms:
                parts.append(str(c))
            elif c == 1:
                parts.append("*".join(atoms))
            else:
                parts.append("*".join([str(c), *atoms]))
        return " + ".join(parts)

    __repr__ = __str__

    def symbols(self) -> set[str]:
        out: set[str] = set()
        for m in self.terms:
            for a in m:
                out |= {a} if isinstance(a, str) else a.num.symbols()
        return out


class SymbolicError(ValueError):
    """Arithmetic that symbolic dims cannot express (a caller turns it into a diagnostic)."""


def sym(name: str) -> SymDim:
    """The dim named `name`."""
    return SymDim({(name,): 1})


def is_symbolic(shape: Sequence[Dim]) -> bool:
    return any(isinstance(d, SymDim) for d in shape)


def symbols(shape: Sequence[Dim]) -> set[str]:
    out: set[str] = set()
    for d in shape:
        if isinstance(d, SymDim):
            out |= d.symbols()
    return out


def exact_quotient(num: SymDim, den: SymDim) -> Dim | None:
    """num / den when den is one term that divides every term of num (else None)."""
    if len(den.terms) != 1:
        return num_div_poly(num, den)
    ((dm, dc),) = den.terms.items()
    out: dict[Monomial, int] = {}
    for m, c in num.terms.items():
        rest = list(m)
        for a in dm:
            if a not in rest:
                return None
            rest.remove(a)
        if c % dc:
            return None
        out[tuple(rest)] = c // dc
    return SymDim.make(out)


def num_div_poly(num: SymDim, den: SymDim) -> Dim | None:
    """num / den for a many-term den: only when num is den times a constant or a
    monomial (b*s*256 / (b*s*4 + ...) is left undecided)."""
    first_m, first_c = next(iter(den.terms.items()))
    for m, c in num.terms.items():
        rest = list(m)
        if all(a in rest for a in first_m) and c % first_c == 0:
            for a in first_m:
                rest.remove(a)
            factor = SymDim.make({tuple(rest): c // first_c})
            if den * factor == num:
                return factor
    return None


def evaluate(d: Dim, bound: Mapping[str, int]) -> int:
    """The value of a dim once its symbols are bound (a missing one is a KeyError)."""
    if isinstance(d, int):
        return d
    total = 0
    for m, c in d.terms.items():
        term = c
        for a in m:
            term *= bound[a] if isinstance(a, str) else a.evaluate(bound)
        total += term
    return total


def bind_shape(shape: Sequence[Dim], bound: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(evaluate(d, bound) for d in shape)


# ---- parsing the text `str` prints -------------------------------------------------

_TOKEN = re.compile(r"\s*(floor|[A-Za-z_?][A-Za-z0-9_.?]*|-?\d+|[()+*/])")


def parse(text: str) -> Dim:
    """The dim `str(d)` printed (`2*seq + 1`, `floor((h + -3) / 2) + 1`); a ValueError
    names what it could not read."""
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            if text[pos:].strip() == "":
                break
            raise ValueError(f"cannot read symbolic dim '{text}' at '{text[pos:]}'")
        tokens.append(m.group(1))
        pos = m.end()
    k = 0

    def peek() -> str | None:
        return tokens[k] if k < len(tokens) else None

    def take(expected: str | None = None) -> str:
        nonlocal k
        tok = peek()
        if tok is None or expected is not None and tok != expected:
            raise ValueError(f"cannot read symbolic dim '{text}': expected {expected or 'more'}")
        k += 1
        return tok

    def expr() -> Dim:
        total: Dim = term()
        while peek() == "+":
            take("+")
            total = total + term()
        return total

    def term() -> Dim:
        value: Dim = factor()
        while peek() == "*":
            take("*")
            value = value * factor()
        return value

    def factor() -> Dim:
        tok = take()
        if tok == "floor":
            take("(")
            num = expr()
            take("/")
            den = int(take())
            take(")")
            return num // den
        if tok == "(":
            inner = expr()
            take(")")
            return inner
        if re.fullmatch(r"-?\d+", tok):
            return int(tok)
        return sym(tok)

    out = expr()
    if k != len(tokens):
        raise ValueError(f"cannot read symbolic dim '{text}': unexpected '{tokens[k]}'")
    return out


def shape_from_type(shape: Sequence[int], encoding: object) -> tuple[Dim, ...]:
    """A type's shape with its `?` dims (any negative dim) read from the encoding (a list of
    expression strings, one per `?`). A `?` the encoding does not name is the anonymous
    symbol `?`: as MLIR's `?`, it is taken to match any other anonymous dim."""
    from xdsl.dialects.builtin import ArrayAttr, StringAttr
    from xdsl.ir import Attribute
    from xdsl.utils.hints import isa

    texts: list[str] = []
    if isa(encoding, ArrayAttr[Attribute]):
        texts = [a.data for a in encoding.data if isinstance(a, StringAttr)]
    out: list[Dim] = []
    k = 0
    for d in shape:
        if d >= 0:
            out.append(d)
            continue
        out.append(parse(texts[k]) if k < len(texts) else sym("?"))
        k += 1
    return tuple(out)


def python_name(symbol: str) -> str:
    """The Python variable holding a symbol's value in emitted code (`dim_seq`)."""
    return "dim_" + re.sub(r"\W", "_", symbol)


def python_expr(d: Dim) -> str:
    """`d` as a Python int expression over `python_name` variables."""
    if isinstance(d, int):
        return repr(d)
    terms: list[str] = []
    for mono, coeff in sorted(d.terms.items(), key=lambda t: [_key(a) for a in t[0]]):
        factors = [
            python_name(a) if isinstance(a, str) else f"(({python_expr(a.num)}) // {a.den})"
            for a in mono
        ]
        scale: list[str] = [] if coeff == 1 and factors else [f"({coeff})"]
        terms.append("*".join(scale + factors))
    return "(" + " + ".join(terms) + ")"


def name_of(d: Dim) -> str | None:
    """The symbol a dim is, when it is one symbol alone (`seq`; not `2*seq`)."""
    if isinstance(d, SymDim) and len(d.terms) == 1:
        ((mono, coeff),) = d.terms.items()
        if coeff == 1 and len(mono) == 1 and isinstance(mono[0], str):
            return mono[0]
    return None


def bind_inputs(
    names: Sequence[str],
    declared: Sequence[Sequence[Dim]],
    actual: Sequence[Sequence[int]],
    maxima: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """The value of every symbol, read off the shapes a call passes; a shape that breaks
    the declared relations (a rank, a static dim, a symbol two inputs share, an expression
    such as `2*seq`, a declared maximum) is a SymbolicError naming the input and the dim.

    A dim that is a lone symbol binds it (the first input that has it decides); dims that
    are expressions are checked once every symbol is bound."""
    bound: dict[str, int] = {}
    source: dict[str, tuple[str, int]] = {}
    later: list[tuple[str, int, Dim, int]] = []
    for name, want, got in zip(names, declared, actual):
        if len(want) != len(got):
            raise SymbolicError(
                f"input '{name}' has rank {len(got)} but the model expects rank {len(want)} "
                f"({', '.join(str(d) for d in want)})"
            )
        for axis, (d, n) in enumerate(zip(want, got)):
            if isinstance(d, int):
                if d != n:
                    raise SymbolicError(
                        f"input '{name}' dim {axis} is {n} but the model expects {d}"
                    )
                continue
            s = name_of(d)
            if s is None:
                later.append((name, axis, d, n))
            elif s in bound:
                if bound[s] != n:
                    first, first_axis = source[s]
                    raise SymbolicError(
                        f"input '{name}' dim {axis} ('{s}') is {n} but input '{first}' "
                        f"dim {first_axis} gives '{s}' = {bound[s]}"
                    )
            elif n < 1:
                raise SymbolicError(
                    f"input '{name}' dim {axis} ('{s}') is {n}: a symbolic dim must be at least 1"
                )
            elif maxima and s in maxima and n > maxima[s]:
                raise SymbolicError(
                    f"input '{name}' dim {axis} ('{s}') is {n}, above its declared "
                    f"maximum {maxima[s]}"
                )
            else:
                bound[s], source[s] = n, (name, axis)
    for name, axis, d, n in later:
        try:
            want = evaluate(d, bound)
        except KeyError as e:
            raise SymbolicError(
                f"input '{name}' dim {axis} is '{d}', but no input binds '{e.args[0]}'"
            ) from None
        if want != n:
            raise SymbolicError(f"input '{name}' dim {axis} is {n} but '{d}' = {want}")
    return bound


MARK = -(2**63)  # xDSL's DYNAMIC_INDEX: a `?` in a shape or an ints property


def from_marked(values: Sequence[int], encoding: object) -> tuple[Dim, ...]:
    """Ints with `?` entries (MARK) read from `encoding`, a list of expression strings in
    order (an ints property's `sym_<name>` attribute)."""
    from xdsl.dialects.builtin import ArrayAttr, StringAttr
    from xdsl.ir import Attribute
    from xdsl.utils.hints import isa

    texts: list[str] = []
    if isa(encoding, ArrayAttr[Attribute]):
        texts = [a.data for a in encoding.data if isinstance(a, StringAttr)]
    marks = sum(v == MARK for v in values)
    if marks != len(texts):
        raise SymbolicError(f"{marks} symbolic entries but {len(texts)} expressions")
    it = iter(texts)
    return tuple(parse(next(it)) if v == MARK else v for v in values)


def slice_indices(start: Dim, stop: Dim, step: int, size: Dim) -> tuple[Dim, Dim, int]:
    """Python's slice(start, stop, step).indices(size) with a symbolic operand, for step 1:
    a negative int counts from the end, an int stop past 2^62 (ONNX's "to the end") is the
    size; a symbolic bound is taken to lie within [0, size] (a bound call re-checks)."""
    if step != 1:
        raise SymbolicError(f"a slice with symbolic bounds needs step 1, got {step}")

    def clamp(v: Dim) -> Dim:
        if isinstance(v, int):
            if v >= 2**62:
                return size
            if v < 0:
                return size + v
            if isinstance(size, int):
                return min(v, size)
        return v

    return clamp(start), clamp(stop), 1
