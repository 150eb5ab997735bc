"""Random well-typed `.dlpc` programs (a hypothesis strategy) and an oracle that is not
dlpc: a direct torch interpretation of the parsed program (the AST of
`frontends/text/parser`, never the IR), for the differential tests
(test_differential.py, bench/differential.py) and the graph-rewrite property tests.

    program = data.draw(programs())            # Program(source, weights, inputs)
    want = torch_eval(program)                 # torch, op by op, on the AST
    got = dlpc.compile(program.model(), "c", opt_level=3)(*program.inputs)

The generator knows each op's shape rule (docs/language.md) and only builds programs that
type-check: broadcasting between existing values and literals (on either side), every
elementwise op, reductions, softmax, norms, data movement, matmul/linear and the NCHW ops
(conv2d with stride/padding/dilation/groups, pools with padding/ceil_mode, batch norm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from hypothesis import strategies as st

from dlpc.frontends.text import ast, parse, parse_model

F = torch.nn.functional

UNARY = [
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "relu", "relu6",
]  # fmt: skip
BINARY_CALLS = ["max", "min", "pow"]
PREDICATES = ["eq", "ne", "lt", "le", "gt", "ge"]
LITERALS = [0.0, 1.0, -1.0, 2.0, 0.5, 3, -2.5]


@dataclass
class Program:
    source: str
    weights: dict[str, np.ndarray]
    inputs: list[np.ndarray]
    ops: list[str] = field(default_factory=list)  # what was generated, for coverage

    def model(self):
        return parse_model(self.source, "<program>", weights=self.weights)


def _fmt(x) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, list | tuple):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    if isinstance(x, str):
        return f'"{x}"'
    return str(x)


def _broadcast(a: tuple, b: tuple) -> tuple | None:
    out = []
    for x, y in zip((1,) * (len(b) - len(a)) + a, (1,) * (len(a) - len(b)) + b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


class _NotApplicable(Exception):
    pass


class _Builder:
    def __init__(self, draw, rng: np.random.Generator):
        self.draw, self.rng = draw, rng
        self.lines: list[str] = []
        self.values: list[tuple[str, tuple]] = []  # name, shape
        self.params: list[tuple[str, tuple]] = []
        self.weights: dict[str, np.ndarray] = {}
        self.ops: list[str] = []
        self.n = 0

    def fresh(self, prefix="v") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def param(self, shape, low=None, high=None) -> str:
        name = self.fresh("p")
        if low is None:
            value = self.rng.standard_normal(shape) * 0.5
        else:
            value = self.rng.uniform(low, high, shape)
        self.weights[name] = value.astype(np.float32)
        self.params.append((name, tuple(shape)))
        return name

    def let(self, expr: str, shape: tuple, op: str) -> None:
        name = self.fresh()
        self.lines.append(f"  let {name} = {expr}")
        self.values.append((name, shape))
        self.ops.append(op)

    def pick(self, pred=lambda s: True):
        choices = [v for v in self.values if pred(v[1])]
        if not choices:
            raise _NotApplicable
        if choices and choices[-1] == self.values[-1] and self.draw(st.booleans()):
            return choices[-1]  # chains: the newest value, half the time
        return self.draw(st.sampled_from(choices))

    # ---- one step -------------------------------------------------------------------
    def step(self) -> None:
        kinds = ["unary", "binary", "literal", "call2", "where", "reduce", "softmax", "move"]
        kinds += ["matmul", "linear", "norm", "nchw", "nchw", "pool", "pattern", "pattern"]
        kinds += ["bn_fold"]
        kind = self.draw(st.sampled_from(kinds))
        try:
            getattr(self, f"op_{kind}")()
        except _NotApplicable:  # no value of a shape this op takes
            self.op_unary()

    def op_unary(self):
        x, s = self.pick()
        op = self.draw(st.sampled_from([*UNARY, "-", "gelu", "leaky_relu", "clip"]))
        if op == "-":
            return self.let(f"-{x}", s, "neg")
        if op == "gelu":
            approx = self.draw(st.sampled_from(["none", "tanh"]))
            return self.let(f'gelu({x}, approximate="{approx}")', s, "gelu")
        if op == "leaky_relu":
            return self.let(
                f"leaky_relu({x}, alpha={self.draw(st.sampled_from([0.01, 0.2]))})", s, op
            )
        if op == "clip":
            lo = self.draw(st.sampled_from([-1.0, -0.25, 0.0]))
            hi = self.draw(st.sampled_from([0.5, 1.0, 6]))
            return self.let(f"clip({x}, min={_fmt(lo)}, max={_fmt(hi)})", s, op)
        self.let(f"{op}({x})", s, op)

    def op_binary(self):
        x, s = self.pick()
        other = self.pick(lambda t: _broadcast(s, t) is not None)
        y, t = other
        op = self.draw(st.sampled_from(["+", "-", "*", "/"]))
        if self.draw(st.booleans()):
            x, y, s, t = y, x, t, s
        self.let(
            f"{x} {op} {y}", _broadcast(s, t), {"+": "add", "-": "sub", "*": "mul", "/": "div"}[op]
        )

    def op_literal(self):
        x, s = self.pick()
        op = self.draw(st.sampled_from(["+", "-", "*", "/"]))
        c = self.draw(st.sampled_from(LITERALS))
        if self.draw(st.booleans()):  # literal arithmetic folded by the frontend
            d = self.draw(st.sampled_from([1.0, 3.0, 0.25]))
            c = f"({_fmt(c)} {self.draw(st.sampled_from(['+', '-', '*', '/']))} {_fmt(d)})"
        else:
            c = _fmt(c)
        expr = f"{c} {op} {x}" if self.draw(st.booleans()) else f"{x} {op} {c}"
        self.let(expr, s, "literal")

    def op_call2(self):
        x, s = self.pick()
        op = self.draw(st.sampled_from(BINARY_CALLS))
        if op == "pow":
            e = self.draw(st.sampled_from([2.0, 3, 0.5, -1.0]))
            return self.let(f"pow({x}, {_fmt(e)})", s, "pow")
        y, t = self.pick(lambda t: _broadcast(s, t) is not None)
        self.let(f"{op}({x}, {y})", _broadcast(s, t), op)

    def op_where(self):
        x, s = self.pick()
        y, t = self.pick(lambda t: _broadcast(s, t) is not None)
        pred = self.draw(st.sampled_from(PREDICATES))
        shape = _broadcast(s, t)
        self.let(f'where(compare({x}, {y}, predicate="{pred}"), {x}, {y})', shape, "where")

    def op_reduce(self):
        x, s = self.pick(lambda s: len(s) >= 1)
        op = self.draw(st.sampled_from(["sum", "mean", "max", "min", "prod"]))
        axes = sorted(set(self.draw(st.lists(st.integers(0, len(s) - 1), min_size=1, max_size=2))))
        keep = self.draw(st.booleans())
        shape = tuple(1 if i in axes else d for i, d in enumerate(s) if keep or i not in axes)
        self.let(
            f"reduce_{op}({x}, axes={_fmt(axes)}, keepdims={_fmt(keep)})", shape, f"reduce_{op}"
        )

    def op_softmax(self):
        x, s = self.pick(lambda s: len(s) >= 1)
        op = self.draw(st.sampled_from(["softmax", "log_softmax"]))
        axis = self.draw(st.integers(-len(s), len(s) - 1))
        self.let(f"{op}({x}, axis={axis})", s, op)

    def op_move(self):
        x, s = self.pick()
        op = self.draw(
            st.sampled_from(["reshape", "transpose", "concat", "slice", "pad", "broadcast"])
        )
        r = len(s)
        if op == "reshape" or (r == 0 and op in ("transpose", "concat", "slice", "pad")):
            shape = [math.prod(s)] if self.draw(st.booleans()) or r == 0 else list(reversed(s))
            return self.let(f"reshape({x}, shape={_fmt(shape)})", tuple(shape), "reshape")
        if op == "transpose":
            perm = self.draw(st.permutations(list(range(r))))
            return self.let(f"transpose({x}, perm={_fmt(perm)})", tuple(s[p] for p in perm), op)
        if op == "concat":
            axis = self.draw(st.integers(0, r - 1))
            shape = tuple(2 * d if i == axis else d for i, d in enumerate(s))
            return self.let(f"concat([{x}, {x} * 2.0], axis={axis})", shape, op)
        if op == "slice":
            axis = self.draw(st.integers(0, r - 1))
            n = s[axis]
            start = self.draw(st.integers(0, n - 1))
            end = self.draw(st.integers(start + 1, n))
            step = self.draw(st.sampled_from([1, 2]))
            shape = tuple(len(range(start, end, step)) if i == axis else d for i, d in enumerate(s))
            expr = f"slice({x}, starts=[{start}], ends=[{end}], axes=[{axis}], steps=[{step}])"
            return self.let(expr, shape, op)
        if op == "pad":
            pads = self.draw(st.lists(st.integers(0, 2), min_size=2 * r, max_size=2 * r))
            shape = tuple(d + pads[i] + pads[i + r] for i, d in enumerate(s))
            value = self.draw(st.sampled_from([0.0, 0.5]))
            return self.let(f"pad({x}, pads={_fmt(pads)}, value={value})", shape, op)
        shape = (self.draw(st.integers(1, 3)), *s)
        return self.let(f"broadcast({x}, shape={_fmt(list(shape))})", shape, op)

    def op_matmul(self):
        x, s = self.pick(lambda s: len(s) >= 1)
        n = self.draw(st.integers(1, 4))
        w = self.param((s[-1], n) if len(s) >= 1 else (1, n))
        shape = (*s[:-1], n)
        self.let(f"{x} @ {w}", shape, "matmul")

    def op_linear(self):
        x, s = self.pick(lambda s: len(s) >= 1)
        n = self.draw(st.integers(1, 4))
        w = self.param((n, s[-1]))
        if self.draw(st.booleans()):
            b = self.param((n,))
            return self.let(f"linear({x}, {w}, {b})", (*s[:-1], n), "linear")
        self.let(f"linear({x}, {w})", (*s[:-1], n), "linear")

    def op_norm(self):
        x, s = self.pick(lambda s: len(s) >= 2)
        if self.draw(st.booleans()):
            scale, bias = self.param((s[-1],)), self.param((s[-1],))
            return self.let(f"layer_norm({x}, {scale}, {bias}, eps=0.001)", s, "layer_norm")
        c = s[1]
        g, b, m = self.param((c,)), self.param((c,)), self.param((c,))
        v = self.param((c,), 0.5, 1.5)
        self.let(f"batch_norm({x}, {g}, {b}, {m}, {v})", s, "batch_norm")

    def op_pattern(self):
        """A shape that one of the graph rewrites (simplify, substitute, fuse) matches."""
        x, s = self.pick()
        r = len(s)
        c = lambda: _fmt(self.draw(st.sampled_from(LITERALS)))  # noqa: E731
        templates = [
            (f"({x} + {c()}) + {c()}", "add-constants"),
            (f"({x} * {c()}) * {c()}", "mul-constants"),
            (f"({x} + {c()}) + ({x} * 2.0 + {c()})", "regroup-scalars"),
            (f"{x} * {c()} + {c()} * {x} + {x}", "factor-common"),
            (f"{x} + 0.0", "unit"),
            (f"0.0 + {x}", "unit"),
            (f"1.0 * {x}", "unit"),
            (f"{x} / 1.0", "unit"),
            (f"{x} - 0.0", "unit"),
            (f"0.0 - {x}", "const-left"),
            (f"1.0 / {x}", "const-left"),
            (f"{c()} - {x}", "const-left"),
            (f"{x} * 0.0", "zero"),
            (f"{x} - {x}", "zero"),
            (f"neg(neg({x}))", "neg-neg"),
            (f"exp(log(relu({x})))", "exp-log"),
            (f"{x} / 4.0", "div-const"),
            (f"cast(cast({x}, to=f64), to=f32)", "cast-cast"),
            (
                f"reshape(reshape({x}, shape=[{math.prod(s)}]), shape={_fmt(list(s))})",
                "reshape-reshape",
            ),
            (f"relu({x} * {c()} + {c()})", "fuse-chain"),
        ]
        if r >= 1:
            p = self.param(s)
            templates.append((f"concat([{x}, {p}, {p} * 2.0], axis=0)", "concat-constants"))
            shape0 = (3 * s[0], *s[1:])
        if r >= 2:
            perm = list(range(r))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            w = self.param((s[-2], 3))
            templates.append((f"transpose({x}, perm={_fmt(perm)}) @ {w}", "matmul-transpose"))
            templates.append(
                (
                    f"transpose(transpose({x}, perm={_fmt(perm)}), perm={_fmt(perm)})",
                    "transpose-transpose",
                )
            )
        expr, name = self.draw(st.sampled_from(templates))
        shapes = {
            "concat-constants": shape0 if r >= 1 else s,
            "matmul-transpose": (*s[:-2], s[-1], 3) if r >= 2 else s,
        }
        self.let(expr, shapes.get(name, s), name)

    def op_bn_fold(self):
        """batch_norm after conv2d / rank-2 or rank-3 linear (graph-substitute folds the
        first two into the weights)."""
        x, s = self.pick()
        if len(s) == 4 and s[2] >= 3 and s[3] >= 3:
            o = self.draw(st.integers(1, 3))
            w, b = self.param((o, s[1], 3, 3)), self.param((o,))
            scale = self.param((s[1], 1, 1))
            inner = f"conv2d({x} * {scale}, {w}, {b}, padding=1)"
            shape, ch = (s[0], o, s[2], s[3]), o
        else:
            n = s[-1] if len(s) >= 3 else self.draw(st.integers(1, 4))
            w, b = self.param((n, s[-1])), self.param((n,))
            inner = f"linear({x}, {w}, {b})"
            shape = (*s[:-1], n)
            if len(shape) < 2:
                return self.let(inner, shape, "linear")
            ch = shape[1]
        g, beta, m = self.param((ch,)), self.param((ch,)), self.param((ch,))
        v = self.param((ch,), 0.5, 1.5)
        self.let(f"batch_norm({inner}, {g}, {beta}, {m}, {v})", shape, "fold-batch-norm")

    def _nchw(self):
        try:
            return self.pick(lambda s: len(s) == 4 and s[2] >= 3 and s[3] >= 3)
        except _NotApplicable:
            return None

    def op_nchw(self):
        picked = self._nchw()
        if picked is None:
            return self.op_unary()
        x, (n, c, h, w) = picked
        k = self.draw(st.sampled_from([1, 2, 3]))
        stride = self.draw(st.sampled_from([1, 2]))
        pad = self.draw(st.integers(0, k - 1)) if k > 1 else 0
        dil = self.draw(st.sampled_from([1, 2])) if k > 1 and h >= 5 and w >= 5 else 1
        groups = c if c > 1 and self.draw(st.booleans()) else 1
        o = self.draw(st.integers(1, 3)) * groups
        wt = self.param((o, c // groups, k, k))
        span = dil * (k - 1) + 1
        oh, ow = (h + 2 * pad - span) // stride + 1, (w + 2 * pad - span) // stride + 1
        if oh < 1 or ow < 1:
            return self.op_unary()
        bias = f", {self.param((o,))}" if self.draw(st.booleans()) else ""
        expr = f"conv2d({x}, {wt}{bias}, stride={stride}, padding={pad}, dilation={dil}, groups={groups})"
        self.let(expr, (n, o, oh, ow), "conv2d")

    def op_pool(self):
        picked = self._nchw()
        if picked is None:
            return self.op_unary()
        x, (n, c, h, w) = picked
        op = self.draw(st.sampled_from(["max_pool2d", "avg_pool2d", "global_avg_pool"]))
        if op == "global_avg_pool":
            return self.let(f"global_avg_pool({x})", (n, c, 1, 1), op)
        k = self.draw(st.sampled_from([2, 3]))
        stride = self.draw(st.sampled_from([1, 2]))
        pad = self.draw(st.integers(0, k // 2))
        ceil = self.draw(st.booleans())
        size = lambda d: (
            (  # noqa: E731
                -(-(d + 2 * pad - k) // stride) if ceil else (d + 2 * pad - k) // stride
            )
            + 1
        )
        oh, ow = size(h), size(w)
        if ceil:  # the last window must start inside the input or left padding (torch)
            oh -= (oh - 1) * stride >= h + pad
            ow -= (ow - 1) * stride >= w + pad
        extra = f", ceil_mode={_fmt(ceil)}"
        if op == "avg_pool2d":
            extra += f", count_include_pad={_fmt(self.draw(st.booleans()))}"
        expr = f"{op}({x}, kernel_size={k}, stride={stride}, padding={pad}{extra})"
        self.let(expr, (n, c, oh, ow), op)


@st.composite
def programs(draw, max_steps: int = 5, nchw: bool | None = None) -> Program:
    """A random well-typed program with 1-2 inputs and `1..max_steps` lets."""
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    b = _Builder(draw, rng)
    use_nchw = draw(st.booleans()) if nchw is None else nchw
    if use_nchw:
        first = (
            draw(st.integers(1, 2)),
            draw(st.integers(1, 3)),
            draw(st.integers(3, 6)),
            draw(st.integers(3, 6)),
        )
    else:
        first = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    shapes = [first]
    if draw(st.booleans()):  # a second input that broadcasts with the first
        shapes.append(
            tuple(
                d if draw(st.booleans()) else 1 for d in first[-draw(st.integers(1, len(first))) :]
            )
        )
    inputs = []
    for i, s in enumerate(shapes):
        b.values.append((f"x{i}", s))
        inputs.append(rng.standard_normal(s).astype(np.float32))
    for _ in range(draw(st.integers(1, max_steps))):
        b.step()
    outs = [b.values[-1][0]]
    if len(b.values) > 2 and draw(st.booleans()):
        outs.append(draw(st.sampled_from([n for n, _ in b.values[:-1]])))
    head = ", ".join(f"x{i}: f32[{', '.join(map(str, s))}]" for i, s in enumerate(shapes))
    params = [f"  param {n}: f32[{', '.join(map(str, s))}]" for n, s in b.params]
    src = f"model prog({head}) {{\n" + "\n".join(params + b.lines)
    src += f"\n  return {', '.join(outs)}\n}}\n"
    return Program(src, b.weights, inputs, b.ops)


# ------------------------------------------------------------------ the oracle


def _pads4(p) -> tuple[int, int, int, int]:
    if isinstance(p, int):
        return (p, p, p, p)
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    return tuple(p)


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v) * (2 // len(v))


# element type names as attribute values (`cast(x, to=f64)`), as torch dtypes
_TYPE_NAMES = {
    "f16": torch.float16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i1": torch.bool,
    "bool": torch.bool,
    "i8": torch.int8,
    "i32": torch.int32,
    "i64": torch.int64,
}


class TorchInterpreter:
    """Evaluates the AST of a program in float32, op by op, with torch's own functions
    (numbers combine as Python numbers, as the language says)."""

    def __init__(self, weights: dict[str, np.ndarray]):
        self.weights = weights
        self.env: dict[str, object] = {}

    def run(self, model: ast.Model, inputs: list[np.ndarray]) -> list[torch.Tensor]:
        for inp, x in zip(model.inputs, inputs):
            self.env[inp.name] = torch.tensor(x)
        for stmt in model.body:
            if isinstance(stmt, ast.Param):
                self.env[stmt.name] = torch.tensor(self.weights[stmt.name])
            elif isinstance(stmt, ast.Let):
                self.env[stmt.name] = self.expr(stmt.value)
            elif isinstance(stmt, ast.Return):
                return [self._tensor(self.expr(e)) for e in stmt.values]
        raise AssertionError("no return")

    @staticmethod
    def _tensor(v):
        return v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=torch.float32)

    def expr(self, e):
        if isinstance(e, ast.Number):
            return e.value
        if isinstance(e, ast.Name):
            return (
                {"true": True, "false": False, "inf": math.inf}.get(e.id, _TYPE_NAMES.get(e.id))
                if e.id not in self.env
                else self.env[e.id]
            )
        if isinstance(e, ast.String):
            return e.value
        if isinstance(e, ast.ListExpr):
            return [self.expr(i) for i in e.items]
        if isinstance(e, ast.Neg):
            return -self.expr(e.operand)
        if isinstance(e, ast.BinOp):
            a, b = self.expr(e.lhs), self.expr(e.rhs)
            if e.op == "@":
                return torch.matmul(a, b)
            return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b}[
                e.op
            ]()
        if isinstance(e, ast.Call):
            args = [self.expr(a) for a in e.args]
            kw = {k.name: self.expr(k.value) for k in e.kwargs}
            return getattr(self, f"op_{e.func}")(*args, **kw)
        raise AssertionError(f"unknown node {e}")

    # elementwise
    def op_neg(self, x):
        return -x  # noqa: E704

    def op_abs(self, x):
        return torch.abs(x)  # noqa: E704

    def op_exp(self, x):
        return torch.exp(x)  # noqa: E704

    def op_log(self, x):
        return torch.log(x)  # noqa: E704

    def op_sqrt(self, x):
        return torch.sqrt(x)  # noqa: E704

    def op_rsqrt(self, x):
        return torch.rsqrt(x)  # noqa: E704

    def op_tanh(self, x):
        return torch.tanh(x)  # noqa: E704

    def op_sigmoid(self, x):
        return torch.sigmoid(x)  # noqa: E704

    def op_erf(self, x):
        return torch.erf(x)  # noqa: E704

    def op_relu(self, x):
        return torch.relu(x)  # noqa: E704

    def op_relu6(self, x):
        return torch.clamp(x, 0.0, 6.0)  # noqa: E704

    def op_gelu(self, x, approximate="none"):
        return F.gelu(x, approximate=approximate)  # noqa: E704

    def op_leaky_relu(self, x, alpha=0.01):
        return F.leaky_relu(x, alpha)  # noqa: E704

    def op_clip(self, x, min=-math.inf, max=math.inf):
        return torch.clamp(x, min, max)  # noqa: E704, A002

    def op_max(self, a, b):
        return torch.maximum(self._tensor(a), self._tensor(b))  # noqa: E704

    def op_min(self, a, b):
        return torch.minimum(self._tensor(a), self._tensor(b))  # noqa: E704

    def op_pow(self, a, b):
        return torch.pow(a, b)  # noqa: E704

    def op_compare(self, a, b, predicate):
        return getattr(torch, predicate)(a, b)

    def op_where(self, c, a, b):
        return torch.where(c, a, b)

    # reductions and normalisation
    def _reduce(self, fn, x, axes=(), keepdims=False):
        axes = [axes] if isinstance(axes, int) else list(axes) or list(range(x.dim()))
        return fn(x, dim=axes, keepdim=keepdims)

    def op_reduce_sum(self, x, axes=(), keepdims=False):
        return self._reduce(torch.sum, x, axes, keepdims)  # noqa: E704

    def op_reduce_mean(self, x, axes=(), keepdims=False):
        return self._reduce(torch.mean, x, axes, keepdims)  # noqa: E704

    def op_reduce_max(self, x, axes=(), keepdims=False):
        return self._reduce(torch.amax, x, axes, keepdims)  # noqa: E704

    def op_reduce_min(self, x, axes=(), keepdims=False):
        return self._reduce(torch.amin, x, axes, keepdims)  # noqa: E704

    def op_reduce_prod(self, x, axes=(), keepdims=False):
        axes = [axes] if isinstance(axes, int) else list(axes) or list(range(x.dim()))
        for a in sorted(axes, reverse=True):
            x = torch.prod(x, dim=a, keepdim=keepdims)
        return x

    def op_softmax(self, x, axis=-1):
        return torch.softmax(x, axis)  # noqa: E704

    def op_log_softmax(self, x, axis=-1):
        return torch.log_softmax(x, axis)  # noqa: E704

    def op_layer_norm(self, x, scale, bias=None, axis=-1, eps=1e-5, epsilon=None):
        eps = epsilon if epsilon is not None else eps
        axis = axis % x.dim()
        return F.layer_norm(
            x,
            x.shape[axis:],
            scale.expand(x.shape[axis:]),
            None if bias is None else bias.expand(x.shape[axis:]),
            eps,
        )

    def op_batch_norm(self, x, g, b, m, v, eps=1e-5, epsilon=None):
        eps = epsilon if epsilon is not None else eps
        return F.batch_norm(x, m, v, g, b, False, 0.0, eps)

    # data movement
    def op_reshape(self, x, shape):
        return torch.reshape(x, shape)  # noqa: E704

    def op_transpose(self, x, perm=()):
        return x.permute(*(perm or reversed(range(x.dim()))))  # noqa: E704

    def op_concat(self, *xs, axis=0):
        return torch.cat(xs[0] if isinstance(xs[0], list) else xs, axis)  # noqa: E704

    def op_broadcast(self, x, shape):
        return x.expand(*shape)  # noqa: E704

    def op_slice(self, x, starts, ends, axes=(), steps=()):
        idx = [slice(None)] * x.dim()
        for k, a in enumerate(axes or range(len(starts))):
            idx[a] = slice(starts[k], ends[k], steps[k] if steps else 1)
        return x[tuple(idx)]

    def op_pad(self, x, pads, value=0.0):
        r = x.dim()
        flat = []
        for i in reversed(range(r)):  # torch: last dim first, (begin, end) pairs
            flat += [pads[i], pads[i + r]]
        return F.pad(x, flat, value=value)

    # matmul, linear, NCHW
    def op_matmul(self, a, b):
        return torch.matmul(a, b)  # noqa: E704

    def op_cast(self, x, to):
        return x.to(to)  # noqa: E704

    def op_linear(self, x, w, bias=None):
        return F.linear(x, w, bias)  # noqa: E704

    def op_conv2d(self, x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        t, l, bt, r = _pads4(padding)
        x = F.pad(x, (l, r, t, bt))
        return F.conv2d(x, w, bias, _pair(stride), 0, _pair(dilation), groups)

    def op_max_pool2d(self, x, kernel_size, stride=1, padding=0, ceil_mode=False):
        return F.max_pool2d(x, kernel_size, stride, _pads4(padding)[:2], ceil_mode=ceil_mode)

    def op_avg_pool2d(
        self, x, kernel_size, stride=1, padding=0, ceil_mode=False, count_include_pad=False
    ):
        return F.avg_pool2d(
            x, kernel_size, stride, _pads4(padding)[:2], ceil_mode, count_include_pad
        )

    def op_global_avg_pool(self, x):
        return x.mean(dim=(2, 3), keepdim=True)


def torch_eval(program: Program) -> list[np.ndarray]:
    """The program's outputs by torch, from its AST (float32, like dlpc)."""
    tree = parse(program.source, "<program>")
    with torch.no_grad():
        outs = TorchInterpreter(program.weights).run(tree, program.inputs)
    return [o.numpy().astype(np.float32) for o in outs]


def assert_matches(got, want, rtol=1e-4, atol=1e-4, what=""):
    """Same NaN positions, same infinities, the rest within rtol/atol of the output's scale."""
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert g.shape == w.shape, f"{what} output {k}: shape {g.shape} != {w.shape}"
        nan_g, nan_w = np.isnan(g), np.isnan(w)
        np.testing.assert_array_equal(nan_g, nan_w, err_msg=f"{what} output {k}: NaN positions")
        finite = np.isfinite(w) & np.isfinite(g)
        np.testing.assert_array_equal(
            g[~finite & ~nan_w], w[~finite & ~nan_w], err_msg=f"{what} output {k}: infinities"
        )
        scale = max(1.0, float(np.abs(w[finite]).max(initial=0.0)))
        np.testing.assert_allclose(
            g[finite], w[finite], rtol, atol * scale, err_msg=f"{what} output {k}"
        )
