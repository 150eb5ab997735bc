"""IEEE edge cases on every backend (issue 18): NaN, +-Inf, -0.0, subnormals and huge
values through every elementwise op, the reductions, pooling and softmax, against torch
(docs/numerics.md states the semantics and the two places dlpc differs from torch).

One model returns every op's result, so each backend and level compiles once. The grid
pairs every special value with every other: x[i, j] = S[j], y[i, j] = S[i].
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dlpc
from dlpc.frontends.text import parse_model

F = torch.nn.functional

SPECIAL = np.array(
    [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-40, 3e38, -3e38, 1.0, -1.0, 0.5, -2.5,
     88.0, -88.0, 100.0],
    np.float32,
)  # fmt: skip
N = len(SPECIAL)
X = np.tile(SPECIAL, (N, 1))
Y = np.tile(SPECIAL[:, None], (1, N))

# name -> (dlpc expression, torch function of (x, y))
OPS = {
    "neg": ("neg(x)", lambda x, y: -x),
    "minus": ("-x", lambda x, y: -x),
    "abs": ("abs(x)", lambda x, y: torch.abs(x)),
    "exp": ("exp(x)", lambda x, y: torch.exp(x)),
    "log": ("log(x)", lambda x, y: torch.log(x)),
    "sqrt": ("sqrt(x)", lambda x, y: torch.sqrt(x)),
    "rsqrt": ("rsqrt(x)", lambda x, y: torch.rsqrt(x)),
    "tanh": ("tanh(x)", lambda x, y: torch.tanh(x)),
    "sigmoid": ("sigmoid(x)", lambda x, y: torch.sigmoid(x)),
    "erf": ("erf(x)", lambda x, y: torch.erf(x)),
    "relu": ("relu(x)", lambda x, y: torch.relu(x)),
    "relu6": ("relu6(x)", lambda x, y: torch.clamp(x, 0.0, 6.0)),
    "clip": ("clip(x, min=-1.0, max=1.0)", lambda x, y: torch.clamp(x, -1.0, 1.0)),
    "leaky_relu": ("leaky_relu(x, alpha=0.01)", lambda x, y: F.leaky_relu(x, 0.01)),
    "gelu": ("gelu(x)", lambda x, y: F.gelu(x)),
    "gelu_tanh": ('gelu(x, approximate="tanh")', lambda x, y: F.gelu(x, approximate="tanh")),
    "add": ("x + y", lambda x, y: x + y),
    "sub": ("x - y", lambda x, y: x - y),
    "mul": ("x * y", lambda x, y: x * y),
    "div": ("x / y", lambda x, y: x / y),
    "max": ("max(x, y)", lambda x, y: torch.maximum(x, y)),
    "min": ("min(x, y)", lambda x, y: torch.minimum(x, y)),
    "pow": ("pow(x, y)", lambda x, y: torch.pow(x, y)),
    "pow2": ("pow(x, 2.0)", lambda x, y: torch.pow(x, 2.0)),
    "reduce_sum": ("reduce_sum(x, axes=[1])", lambda x, y: x.sum(1)),
    "reduce_mean": ("reduce_mean(y, axes=[0])", lambda x, y: y.mean(0)),
    "reduce_max": ("reduce_max(x, axes=[1])", lambda x, y: x.amax(1)),
    "reduce_min": ("reduce_min(y, axes=[0])", lambda x, y: y.amin(0)),
    "reduce_prod": ("reduce_prod(x, axes=[1])", lambda x, y: x.prod(1)),
    "softmax": ("softmax(x, axis=1)", lambda x, y: torch.softmax(x, 1)),
    "log_softmax": ("log_softmax(y, axis=0)", lambda x, y: torch.log_softmax(y, 0)),
    "max_pool": (
        f"max_pool2d(reshape(x * y, shape=[1, 1, {N}, {N}]), kernel_size=2, stride=2)",
        lambda x, y: F.max_pool2d((x * y).reshape(1, 1, N, N), 2, 2),
    ),
    "max_pool_pad": (
        f"max_pool2d(reshape(x, shape=[1, 1, {N}, {N}]), kernel_size=3, stride=2, padding=1)",
        lambda x, y: F.max_pool2d(x.reshape(1, 1, N, N), 3, 2, 1),
    ),
    "avg_pool": (
        f"avg_pool2d(reshape(y, shape=[1, 1, {N}, {N}]), kernel_size=2, stride=2)",
        lambda x, y: F.avg_pool2d(y.reshape(1, 1, N, N), 2, 2),
    ),
}

# the sign of a zero result is not specified where numpy and torch disagree: a max/min of
# two zeros (numpy returns the second operand, torch the first), hence relu(-0.0)
ZERO_SIGN_FREE = {"relu", "relu6", "clip", "max", "min", "max_pool", "max_pool_pad"}
# gelu(x) is x for large x, +inf included (torch's formula overflows: gelu(3e38) = inf,
# gelu(inf) = nan)
GELU_INF = {"gelu", "gelu_tanh"}

SOURCE = (
    f"model edge(x: f32[{N}, {N}], y: f32[{N}, {N}]) {{\n  return "
    + ", ".join(expr for expr, _ in OPS.values())
    + "\n}\n"
)


def _expected() -> dict[str, np.ndarray]:
    tx, ty = torch.tensor(X), torch.tensor(Y)
    out = {name: fn(tx, ty).numpy() for name, (_, fn) in OPS.items()}
    for name in GELU_INF:
        out[name] = np.where(X > 10.0, X, out[name])
        # gelu(x) = x * Phi(x) with Phi(x) >= 0: a zero result has x's sign. torch 2.13's
        # own sign depends on the CPU: +0.0 for every negative x under its AVX2 kernels
        # (AMD Zen 3), x's sign under AVX-512; the definition is the expectation
        out[name] = np.where(out[name] == 0, np.copysign(np.float32(0), X), out[name])
    return out


def _check(name: str, got: np.ndarray, want: np.ndarray, where: str) -> None:
    got = np.asarray(got).reshape(want.shape)
    g, w = got.astype(np.float64), want.astype(np.float64)
    msg = f"{name} on {where}"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{msg}: NaN")
    inf = np.isinf(w) | np.isinf(g)
    np.testing.assert_array_equal(g[inf], w[inf], err_msg=f"{msg}: infinities")
    finite = np.isfinite(w) & np.isfinite(g)
    # math functions within a few ulp (libm, libmvec, OpenCL), and relative to the
    # result's scale for sums of huge values with tiny ones
    scale = np.abs(w[finite]).max(initial=0.0)
    np.testing.assert_allclose(g[finite], w[finite], rtol=2e-6, atol=1e-6 * scale, err_msg=msg)
    zeros = (g == 0) & (w == 0)
    if name not in ZERO_SIGN_FREE:
        np.testing.assert_array_equal(
            np.signbit(got[zeros]), np.signbit(want[zeros]), err_msg=f"{msg}: sign of zero"
        )
    # a subnormal result is not flushed to zero (no -ffast-math / denormals-are-zero)
    sub = (np.abs(w) > 0) & (np.abs(w) < np.finfo(np.float32).tiny)
    assert not (sub & (g == 0)).any(), f"{msg}: subnormal flushed to zero"


BACKENDS = [("numpy", 0), ("numpy", 2), ("c", 0), ("c", 3), ("opencl", 0), ("opencl", 2)]
BACKENDS += [("dlp", 0), ("dlp", 2)]


@pytest.mark.parametrize("target, level", BACKENDS, ids=[f"{t}-O{lv}" for t, lv in BACKENDS])
def test_special_values_like_torch(target, level):
    if target == "opencl":
        pytest.importorskip("pyopencl")
    model = parse_model(SOURCE, "<edge>")
    with np.errstate(all="ignore"):
        got = dlpc.compile(model, target, opt_level=level)(X, Y)
    want = _expected()
    assert len(got) == len(OPS)
    for (name, w), g in zip(want.items(), got):
        _check(name, g, w, f"{target} -O{level}")


def test_the_grid_has_every_kind_of_value():
    assert np.isnan(SPECIAL).any() and np.isposinf(SPECIAL).any() and np.isneginf(SPECIAL).any()
    assert any(v == 0 and np.signbit(v) for v in SPECIAL)
    tiny = np.finfo(np.float32).tiny
    assert any(0 < abs(v) < tiny for v in SPECIAL)
    assert any(abs(v) > 1e38 for v in SPECIAL)


def test_c_is_built_without_fast_math():
    """-ffast-math (or -ffinite-math-only, -funsafe-math-optimizations, DAZ/FTZ) would let
    the compiler assume no NaN/Inf and flush subnormals: the flags must not have them."""
    from dlpc.backends.runtime import cbuild

    flags = " ".join(cbuild.flags(cbuild.compiler()))
    for bad in ("fast-math", "finite-math", "unsafe-math", "Ofast", "cl-fast-relaxed"):
        assert bad not in flags
