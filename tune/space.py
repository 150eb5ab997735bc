"""Search spaces: one template per kernel class, each a set of knobs whose values render
to a schedule script.

- `gemm` (matmul-shaped nests): cache tiles `mc, nc, kc`, register tile `mr x nr`,
  packing of A and of B on/off, and which blocked loop is parallel; for fewer than 4
  rows with B contiguous along k (batch-1 linear) also `gemv` (rfactor the dot products
  instead) and its factor `rf`;
- `reduction` (conv, depthwise conv, pooling, other reductions): output-channel block
  `cb` (unrolled), tile of the last spatial loop `wt` (outer part outside the reduction
  loops), full unroll of the innermost reduction loop on/off, parallel loop, and
  `im2col` (convs: pack the input rows, see `conv_script`) on/off.

Every knob value is legal by construction (factors divide the extents), so candidates
fail only when a combination breaks a primitive's requirement, which the measurement
records as a failure.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from dlpc.passes.schedule._common import get_kernel
from dlpc.passes.schedule.conv import conv_script
from dlpc.passes.schedule.default import (
    GemmParams,
    b_contiguous_in_k,
    gemm_default_params,
    gemm_operands,
    gemm_script,
    gemv_script,
)
from dlpc.passes.schedule.nest import Nest, analyse, conv_input, is_strided


def divisors(n: int, lo: int = 1, hi: int | None = None, multiple_of: int = 1) -> list[int]:
    hi = n if hi is None else hi
    return [d for d in range(lo, min(n, hi) + 1) if n % d == 0 and d % multiple_of == 0]


@dataclass
class Space:
    """Knobs (name -> values) of one kernel's template, and how to render a point."""

    template: str
    kernel: str
    knobs: dict[str, list]
    nest: Nest
    strided: bool = False  # a strided conv: the default schedule packs its input rows

    def size(self) -> int:
        return math.prod(len(v) for v in self.knobs.values())

    def sample(self, rng: random.Random) -> dict:
        return {k: rng.choice(v) for k, v in self.knobs.items()}

    def grid(self) -> list[dict]:
        keys = list(self.knobs)
        return [dict(zip(keys, vals)) for vals in itertools.product(*self.knobs.values())]

    def mutate(self, point: dict, rng: random.Random) -> dict:
        new = dict(point)
        key = rng.choice([k for k, v in self.knobs.items() if len(v) > 1] or list(self.knobs))
        values = self.knobs[key]
        i = values.index(point[key]) if point[key] in values else 0
        new[key] = values[max(0, min(len(values) - 1, i + rng.choice((-1, 1))))]
        return new

    def crossover(self, a: dict, b: dict, rng: random.Random) -> dict:
        return {k: (a if rng.random() < 0.5 else b)[k] for k in self.knobs}

    def features(self, point: dict) -> list[float]:
        """Numeric features of a point: log2 of sizes, flags, and derived working sets."""
        out = []
        for k, v in point.items():
            if isinstance(v, bool):
                out.append(float(v))
            elif isinstance(v, int):
                out.append(math.log2(max(v, 1)))
            else:  # a choice: its position among the knob's values
                values = self.knobs.get(k, [v])
                out.append(values.index(v) / max(len(values) - 1, 1) if v in values else 0.0)
        if self.template == "gemm":
            a_bytes = point["mc"] * point["kc"] * 4
            b_bytes = point["kc"] * point["nc"] * 4
            out += [
                math.log2(a_bytes) - 15,
                math.log2(b_bytes) - 20,
                float(a_bytes > 48 * 1024),
                float(b_bytes > 1 << 20),
                point["mr"] * point["nr"] / 256.0,
            ]
        return out

    def script(self, module: ModuleOp, point: dict) -> str:
        kernel = get_kernel(module, self.kernel)
        if self.template == "gemm" and point.get("gemv"):
            return gemv_script(kernel, self.nest, point.get("rf", 16))
        if self.template == "gemm":
            p = GemmParams(
                point["mc"],
                point["nc"],
                point["kc"],
                point["mr"],
                point["nr"],
                point["pack_a"],
                point["pack_b"],
            )
            return gemm_script(kernel, self.nest, p, parallel=point["par"])
        if point.get("im2col"):
            return conv_script(kernel, self.nest, cb=point.get("cb", 1))
        return reduction_template(self.kernel, self.nest, point)

    def default(self) -> dict:
        n = self.nest
        if self.template == "gemm":
            m, nn, k = (n.trips[x] for x in (n.spatial[-2], n.spatial[-1], n.reduce[0]))
            p = gemm_default_params(m, nn, k)
            point = {
                "mc": p.mc,
                "nc": p.nc,
                "kc": p.kc,
                "mr": p.mr,
                "nr": p.nr,
                "pack_a": m >= 4,
                "pack_b": m >= 4,
                "par": "auto",
            }
            if "gemv" in self.knobs:
                point.update(gemv=True, rf=16 if 16 in self.knobs["rf"] else self.knobs["rf"][0])
            return point
        point = {k: v[0] if k != "cb" else (4 if 4 in v else v[0]) for k, v in self.knobs.items()}
        point["im2col"] = self.strided  # as the default schedule does
        return point


def reduction_template(K: str, nest: Nest, point: dict) -> str:
    s, r = nest.spatial, nest.reduce
    last = s[-1]
    lines = [f"decompose {K}"]
    head = list(s[:-1])
    tail_inner: list[str] = []
    unrolls = []
    if point.get("cb", 1) > 1 and len(s) >= 3:
        c = s[1]
        lines.append(f"split {K}/{c} by {point['cb']} -> {c}o, {c}i")
        head[1] = f"{c}o"
        tail_inner.append(f"{c}i")
        unrolls.append(f"{c}i")
    outer_w: list[str] = []
    inner_w = last
    if point.get("wt", 0) and point["wt"] < nest.trips[last]:
        lines.append(f"split {K}/{last} by {point['wt']} -> {last}o, {last}i")
        outer_w, inner_w = [f"{last}o"], f"{last}i"
    order = head + outer_w + r + tail_inner + [inner_w]
    lines.append(f"reorder {K}: {', '.join(order)}")
    if point.get("unroll_r") and r:
        lines.append(f"unroll {K}/{r[-1]}")
    for u in unrolls:
        lines.append(f"unroll {K}/{u}")
    lines.append(f"vectorize {K}/{inner_w}")
    par = point.get("par", "auto")
    if par == s[1] and point.get("cb", 1) > 1 and len(s) >= 3:
        par = f"{s[1]}o"
    if par != "auto":
        lines += [f"serial {K}", f"parallel {K}/{par}"]
    return "\n".join(lines)


def space_for(module: ModuleOp, name: str) -> Space | None:
    """The search space of kernel `name`, or None if no template fits it."""
    kernel = get_kernel(module, name)
    nest = analyse(kernel)
    if nest is None or not nest.reduce:
        return None
    operands = gemm_operands(kernel, nest)
    if operands is not None:
        m, n, k = (nest.trips[x] for x in (nest.spatial[-2], nest.spatial[-1], nest.reduce[0]))
        mrs = [x for x in (1, 2, 4, 6, 8, 12, 14) if m % x == 0]
        nrs = [x for x in (8, 16, 32, 48, 64) if n % x == 0] or divisors(n, hi=64)
        knobs = {
            "mc": divisors(m, hi=512) or [m],
            "nc": divisors(n, lo=min(n, 16), hi=1024) or [n],
            "kc": divisors(k, lo=min(k, 16), hi=1024) or [k],
            "mr": mrs,
            "nr": nrs,
            "pack_a": [True, False],
            "pack_b": [True, False],
            "par": ["auto", "outer", "none"],
        }
        if m < 4 and b_contiguous_in_k(kernel, nest, operands[1]):
            knobs["gemv"] = [True, False]  # batch-1 linear: rfactor dot products
            knobs["rf"] = [f for f in (4, 8, 16, 32, 64) if k % f == 0] or [1]
        space = Space("gemm", name, knobs, nest)
        # keep tiles consistent: mc a multiple of mr, nc of nr (filtered at sampling)
        return space
    s = nest.spatial
    if nest.trips[s[-1]] < 4:
        return None
    knobs = {
        "cb": [x for x in (1, 2, 4, 8) if len(s) >= 3 and nest.trips[s[1]] % x == 0] or [1],
        "wt": [0] + [d for d in divisors(nest.trips[s[-1]], lo=8) if d < nest.trips[s[-1]]],
        "unroll_r": [False, True] if nest.reduce and nest.trips[nest.reduce[-1]] <= 16 else [False],
        "par": ["auto"] + [x for x in s[:2] if nest.trips[x] > 1],
        "im2col": [False, True]
        if len(s) == 4 and conv_input(kernel, nest) is not None
        else [False],
    }
    return Space(
        "reduction",
        name,
        knobs,
        nest,
        strided=len(s) == 4 and is_strided(kernel, nest) and conv_input(kernel, nest) is not None,
    )


def consistent(space: Space, point: dict) -> bool:
    """Tile sizes that nest: mc % mr == 0, nc % nr == 0 (gemm)."""
    if space.template == "gemm":
        return point["mc"] % point["mr"] == 0 and point["nc"] % point["nr"] == 0
    return True
