"""ONNX's recurrent layers RNN, GRU and LSTM as graph ops (matmul, slice, the activations,
where), unrolled over the sequence at import time, or for a sequence longer than
UNROLL_MAX as one graph.loop over the step: every backend that runs those runs them,
and `graph-autodiff` differentiates them with the existing rules, so a recurrent model
trains as it runs. The input projection X @ W^T of every time step is one matmul; each
step adds H @ R^T. ONNX's semantics: directions forward / reverse / bidirectional, layout 0
([seq, batch, ...]) and 1 ([batch, seq, ...]), initial states, biases, LSTM's peepholes and
input_forget, `clip` on the gates' inputs, the `activations` list with its alphas and betas
(onnxruntime's defaults), and `sequence_lens`: a batch entry past its length keeps its
state and gives 0 in Y (a reverse direction starts at its own last step). The sequence
length must be static: a symbolic one is refused in one line (an exported dynamic axis
then gets one program per length)."""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from dlpc.dialects import graph, symdims
from dlpc.frontends.onnx_ops.elementwise import cast_to
from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import Const, NodeContext, Value

# name -> (default alpha, default beta); None: the activation takes no such argument
ACTIVATIONS: dict[str, tuple[float | None, float | None]] = {
    "sigmoid": (None, None),
    "tanh": (None, None),
    "relu": (None, None),
    "softsign": (None, None),
    "softplus": (None, None),
    "leakyrelu": (0.01, None),
    "thresholdedrelu": (1.0, None),
    "elu": (1.0, None),
    "scaledtanh": (1.0, 1.0),
    "hardsigmoid": (0.2, 0.5),
    "affine": (1.0, 0.0),
}
# a longer sequence runs as one graph.loop over a step instead of unrolled steps: unrolled
# steps run faster but each adds build time (the measurements: docs/design/recurrent-unroll.md)
UNROLL_MAX = 32
# gates per cell and its default activations (f, g[, h]) for one direction
CELLS = {
    "RNN": (1, ("Tanh",)),
    "GRU": (3, ("Sigmoid", "Tanh")),
    "LSTM": (4, ("Sigmoid", "Tanh", "Tanh")),
}


def _take(imp: NodeContext, v: Value, axis: int, i: int) -> Value:
    """v[..., i, ...] along `axis`, that axis dropped."""
    s = imp.shape(v)
    part = _cut(imp, v, axis, i, i + 1)
    return imp.reshape(part, s[:axis] + s[axis + 1 :])


def _cut(imp: NodeContext, v: Value, axis: int, start: int, end: int) -> Value:
    # (a graph op even on an initializer: W, R and B stay the params they are, trainable)
    return imp.emit(graph.SliceOp, v, starts=(start,), ends=(end,), axes=(axis,), steps=(1,))


def _activations(imp: NodeContext, a: dict, per_dir: tuple[str, ...], dirs: int):
    """[(name, alpha, beta)] per direction; alphas and betas are taken in order by the
    activations that use them (onnxruntime's reading), defaults where the list runs out."""
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in a["activations"] or ()]
    names = names or list(per_dir * dirs)
    if len(names) != len(per_dir) * dirs:
        raise imp.error(
            f"attribute 'activations' lists {len(names)} functions, "
            f"expected {len(per_dir) * dirs} ({len(per_dir)} per direction)"
        )
    alphas, betas = list(a["activation_alpha"] or ()), list(a["activation_beta"] or ())
    out = []
    for n in names:
        key = n.lower()
        if key not in ACTIVATIONS:
            raise imp.error(f"activation '{n}' is not supported")
        da, db = ACTIVATIONS[key]
        alpha = (alphas.pop(0) if alphas else da) if da is not None else None
        beta = (betas.pop(0) if betas else db) if db is not None else None
        out.append((key, alpha, beta))
    k = len(per_dir)
    return [out[d * k : (d + 1) * k] for d in range(dirs)]


def _apply(imp: NodeContext, fn, x: Value, clip: float | None) -> Value:
    name, alpha, beta = fn
    if clip is not None:
        x = imp.emit(graph.ClipOp, x, min=-clip, max=clip)

    def c(v):
        return imp.scalar(v, x)

    if name == "sigmoid":
        return imp.emit(graph.SigmoidOp, x)
    if name == "tanh":
        return imp.emit(graph.TanhOp, x)
    if name == "relu":
        return imp.emit(graph.ReluOp, x)
    if name == "leakyrelu":
        return imp.emit(graph.LeakyReluOp, x, alpha=alpha)
    if name == "thresholdedrelu":
        above = imp.emit(graph.CompareOp, x, c(alpha), predicate="gt")
        return imp.emit(graph.WhereOp, above, x, c(0))
    if name == "elu":
        neg = imp.emit(graph.CompareOp, x, c(0), predicate="lt")
        em1 = imp.emit(graph.SubOp, imp.emit(graph.ExpOp, x), c(1))
        return imp.emit(graph.WhereOp, neg, imp.emit(graph.MulOp, em1, c(alpha)), x)
    if name == "softsign":
        return imp.emit(graph.DivOp, x, imp.emit(graph.AddOp, imp.emit(graph.AbsOp, x), c(1)))
    if name == "softplus":
        return imp.emit(graph.LogOp, imp.emit(graph.AddOp, imp.emit(graph.ExpOp, x), c(1)))
    if name == "scaledtanh":
        t = imp.emit(graph.TanhOp, imp.emit(graph.MulOp, x, c(beta)))
        return imp.emit(graph.MulOp, t, c(alpha))
    if name == "hardsigmoid":
        y = imp.emit(graph.AddOp, imp.emit(graph.MulOp, x, c(alpha)), c(beta))
        return imp.emit(graph.ClipOp, y, min=0.0, max=1.0)
    # affine
    return imp.emit(graph.AddOp, imp.emit(graph.MulOp, x, c(alpha)), c(beta))


def _gate(imp: NodeContext, v: Value, k: int, h: int) -> Value:
    """Gate k (columns k*h .. (k+1)*h) of a [batch, gates*h] value."""
    return _cut(imp, v, len(imp.shape(v)) - 1, k * h, (k + 1) * h)


@handles("RNN", "GRU", "LSTM")
def recurrent(imp: NodeContext):
    op = imp.node.op_type
    spec = {
        "activation_alpha": None,
        "activation_beta": None,
        "activations": None,
        "clip": None,
        "direction": "forward",
        "hidden_size": None,
        "layout": 0,
    }
    if op == "GRU":
        spec["linear_before_reset"] = 0
    if op == "LSTM":
        spec["input_forget"] = 0
    a = imp.attrs(spec)
    imp.require(a, "direction", ("forward", "reverse", "bidirectional"))
    imp.require(a, "layout", (0, 1))
    gates, per_dir = CELLS[op]
    x, w, r = imp.required(0), imp.required(1), imp.required(2)
    dt = imp.dtype(x)
    if dt.kind != "f":
        raise imp.error(f"input X has element type {dt}; {op} takes float types")
    if len(imp.shape(x)) != 3 or len(imp.shape(w)) != 3 or len(imp.shape(r)) != 3:
        raise imp.error("X, W and R must have rank 3")
    if a["layout"]:
        x = imp.emit(graph.TransposeOp, x, perm=(1, 0, 2))
    steps, batch, _ = imp.shape(x)
    if symdims.is_symbolic((steps,)):
        raise imp.error(f"the sequence length {steps} must be static (the layer is unrolled)")
    dirs = 2 if a["direction"] == "bidirectional" else 1
    hid = imp.shape(r)[2]
    if a["hidden_size"] is not None and a["hidden_size"] != hid:
        raise imp.error(f"attribute 'hidden_size' = {a['hidden_size']} but R has {hid} columns")
    if imp.shape(w)[:2] != (dirs, gates * hid) or imp.shape(r) != (dirs, gates * hid, hid):
        raise imp.error(
            f"W {list(imp.shape(w))} and R {list(imp.shape(r))} do not match "
            f"{dirs} direction(s) of {gates} gates of hidden size {hid}"
        )
    fns = _activations(imp, a, per_dir, dirs)
    clip = None if a["clip"] is None else float(a["clip"])
    b = imp.input(3)
    lens = imp.input(4)
    if isinstance(lens, Const) and bool(np.all(lens.array == steps)):
        lens = None  # every entry runs the whole sequence
    if lens is not None:
        lens = cast_to(imp, lens, np.dtype(np.int64))
        lens = imp.reshape(lens, (batch, 1))
    states = []
    for i in (5, 6) if op == "LSTM" else (5,):
        s = imp.input(i)
        if s is not None and a["layout"]:
            s = imp.emit(graph.TransposeOp, s, perm=(1, 0, 2))
        states.append(s)
    p = imp.input(7) if op == "LSTM" else None
    # zeros as a broadcast scalar: a [batch, hid] float constant would import as a param
    zero = imp.emit(graph.BroadcastOp, Const(np.zeros((), dt)), shape=(batch, hid))

    ys, yh, yc = [], [], []
    for d in range(dirs):
        reverse = a["direction"] == "reverse" or d == 1
        xw = imp.emit(graph.MatMulOp, x, _take(imp, w, 0, d), transpose_b=True)  # [T, B, G*H]
        rd = _take(imp, r, 0, d)  # [G*H, H]
        rb = None
        if b is not None:
            bd = _take(imp, b, 0, d)  # [2*G*H]
            xw = imp.emit(graph.AddOp, xw, _cut(imp, bd, 0, 0, gates * hid))
            rb = _cut(imp, bd, 0, gates * hid, 2 * gates * hid)
        h = zero if states[0] is None else _take(imp, states[0], 0, d)
        c = None
        if op == "LSTM":
            c = zero if states[1] is None else _take(imp, states[1], 0, d)
        peep = None if p is None else [_gate(imp, _take(imp, p, 0, d), k, hid) for k in range(3)]
        if steps > UNROLL_MAX:
            h, c, seq = _looped(
                imp, op, a, fns[d], clip, xw, h, c, rd, rb, peep, lens, zero, reverse
            )
            ys.append([imp.reshape(seq, (steps, 1, batch, hid))])
        else:
            out: list[Value] = [zero] * steps
            for t in reversed(range(steps)) if reverse else range(steps):
                at = Const(np.asarray(t, np.int64))
                h, c, out[t] = _advance(
                    imp,
                    op,
                    a,
                    fns[d],
                    clip,
                    _take(imp, xw, 0, t),
                    at,
                    h,
                    c,
                    rd,
                    rb,
                    peep,
                    lens,
                    zero,
                )
            ys.append([imp.reshape(v, (1, 1, batch, hid)) for v in out])
        if lens is not None:  # an entry of length 0 ends at 0, not at its initial state
            empty = imp.emit(graph.CompareOp, lens, Const(np.asarray(0, np.int64)), predicate="eq")
            h = imp.emit(graph.WhereOp, empty, zero, h)
            if c is not None:
                c = imp.emit(graph.WhereOp, empty, zero, c)
        yh.append(imp.reshape(h, (1, batch, hid)))
        if c is not None:
            yc.append(imp.reshape(c, (1, batch, hid)))

    def join(parts: list[Value], axis: int) -> Value:
        return parts[0] if len(parts) == 1 else imp.emit(graph.ConcatOp, *parts, axis=axis)

    y = join([join(per_t, 0) for per_t in ys], 1)  # [T, dirs, B, H]
    results = [y, join(yh, 0)] + ([join(yc, 0)] if op == "LSTM" else [])
    if a["layout"]:
        results = [imp.emit(graph.TransposeOp, results[0], perm=(2, 0, 1, 3))] + [
            imp.emit(graph.TransposeOp, v, perm=(1, 0, 2)) for v in results[1:]
        ]
    return results[: max(len(imp.node.output), 1)]


def _advance(imp: NodeContext, op, a, fns, clip, xt, t, h, c, rd, rb, peep, lens, zero):
    """One step at time t (an import-time int or the loop's i64 index): the new h and c,
    and the step's row of Y; with sequence_lens, an entry past its length keeps its state
    and gives 0."""
    hid = imp.shape(h)[-1]
    h_new, c_new = _CELL[op](imp, a, fns, clip, xt, h, c, rd, rb, peep, hid)
    if lens is None:
        return h_new, c_new, h_new
    live = imp.emit(graph.CompareOp, t, lens, predicate="lt")
    row = imp.emit(graph.WhereOp, live, h_new, zero)
    h_new = imp.emit(graph.WhereOp, live, h_new, h)
    if c_new is not None and c is not None:
        c_new = imp.emit(graph.WhereOp, live, c_new, c)
    return h_new, c_new, row


class _NoBody:
    """An empty ONNX body for control._loop: the step is built in Python (`step`)."""

    name = "recurrent step"
    input = initializer = node = output = ()


def _looped(imp: NodeContext, op, a, fns, clip, xw, h, c, rd, rb, peep, lens, zero, reverse):
    """The steps as one graph.loop of `steps` iterations carrying h (and c), Y's rows
    stored by the loop's scan output: the same ops per step as the unrolled form, built
    once (the loop's gradient replays it backwards, passes/train/_control_grad.py)."""
    from dlpc.frontends.onnx_ops import control

    steps = imp.shape(xw)[0]
    lstm = c is not None
    carried = [imp.value(h), *([imp.value(c)] if lstm else [])]

    def at(i: SSAValue) -> SSAValue:
        return control._flip(imp, i, steps) if reverse else i

    def step(args: list[SSAValue], outs: list[Value]) -> list[Value]:
        t = at(args[0])
        xt = imp.emit(graph.GatherOp, xw, t, axis=0)  # [B, G*H]
        cc = args[2] if lstm else None
        h_new, c_new, row = _advance(
            imp, op, a, fns, clip, xt, t, args[1], cc, rd, rb, peep, lens, zero
        )
        more = imp.value(Const(np.asarray(True)))
        return [more, h_new, *([c_new] if c_new is not None else []), row]

    true = imp.value(Const(np.asarray(True)))
    out, scans = control._loop(
        imp, _NoBody, steps, true, carried, lambda args: [], step, lambda i, k: at(i)
    )
    return out[0], out[1] if lstm else None, scans[0]


def _hr(imp: NodeContext, h: Value, rd: Value, rb: Value | None) -> Value:
    hr = imp.emit(graph.MatMulOp, h, rd, transpose_b=True)
    return hr if rb is None else imp.emit(graph.AddOp, hr, rb)


def _rnn(imp, a, fns, clip, xt, h, c, rd, rb, peep, hid):
    return _apply(imp, fns[0], imp.emit(graph.AddOp, xt, _hr(imp, h, rd, rb)), clip), None


def _gru(imp, a, fns, clip, xt, h, c, rd, rb, peep, hid):
    f, g = fns
    # z and r from the first 2*hid rows of R; h~ from the last hid rows
    r_zr = _cut(imp, rd, 0, 0, 2 * hid)
    rb_zr = None if rb is None else _cut(imp, rb, 0, 0, 2 * hid)
    r_h = _cut(imp, rd, 0, 2 * hid, 3 * hid)
    rb_h = None if rb is None else _cut(imp, rb, 0, 2 * hid, 3 * hid)
    zr = imp.emit(graph.AddOp, _cut(imp, xt, 1, 0, 2 * hid), _hr(imp, h, r_zr, rb_zr))
    z = _apply(imp, f, _gate(imp, zr, 0, hid), clip)
    rg = _apply(imp, f, _gate(imp, zr, 1, hid), clip)
    if a["linear_before_reset"]:
        hh = imp.emit(graph.MulOp, rg, _hr(imp, h, r_h, rb_h))
    else:
        hh = _hr(imp, imp.emit(graph.MulOp, rg, h), r_h, rb_h)
    cand = _apply(imp, g, imp.emit(graph.AddOp, _gate(imp, xt, 2, hid), hh), clip)
    # H = (1 - z) * h~ + z * H, as written (h~ + z * (H - h~) cancels where z is near 1)
    keep = imp.emit(graph.MulOp, imp.emit(graph.SubOp, imp.scalar(1, z), z), cand)
    return imp.emit(graph.AddOp, keep, imp.emit(graph.MulOp, z, h)), None


def _lstm(imp, a, fns, clip, xt, h, c, rd, rb, peep, hid):
    f, g, hf = fns
    pre = imp.emit(graph.AddOp, xt, _hr(imp, h, rd, rb))  # gates i, o, f, c
    i_in, o_in, f_in, c_in = (_gate(imp, pre, k, hid) for k in range(4))
    if peep is not None:
        i_in = imp.emit(graph.AddOp, i_in, imp.emit(graph.MulOp, peep[0], c))
        f_in = imp.emit(graph.AddOp, f_in, imp.emit(graph.MulOp, peep[2], c))
    i = _apply(imp, f, i_in, clip)
    if a["input_forget"]:
        fg = imp.emit(graph.SubOp, imp.scalar(1, i), i)
    else:
        fg = _apply(imp, f, f_in, clip)
    cand = _apply(imp, g, c_in, clip)
    c_new = imp.emit(graph.AddOp, imp.emit(graph.MulOp, fg, c), imp.emit(graph.MulOp, i, cand))
    if peep is not None:
        o_in = imp.emit(graph.AddOp, o_in, imp.emit(graph.MulOp, peep[1], c_new))
    o = _apply(imp, f, o_in, clip)
    return imp.emit(graph.MulOp, o, _apply(imp, hf, c_new, None)), c_new


_CELL = {"RNN": _rnn, "GRU": _gru, "LSTM": _lstm}
