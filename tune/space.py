"""Search spaces: one template per kernel class, each a set of knobs whose values render
to a schedule script.

- `gemm` (matmul-shaped nests): cache tiles `mc, nc, kc`, register tile `mr x nr`,
  packing of A and of B on/off, and which blocked loop is parallel; `micro`, the
  micro-kernel (`gemm`, or `dot` when B is read along k: an `mr x nr` block of dot
  products, `dot_script`); `tail` when M (or N) has no useful divisor: `rows` (tiles of
  `mr` rows and a remainder tile, `gemmN`) or `both` (`gemmNxM`, the columns too); for
  fewer than 4 rows with B contiguous along k (batch-1 linear) also `gemv` (rfactor the
  dot products instead) and its factor `rf`. The default schedule (`gemm_plans`) is a
  point of the space (`Space.default()`);
- `reduction` (conv, depthwise conv, pooling, other reductions): output-channel block
  `cb` (unrolled), tile of the last spatial loop `wt` (outer part outside the reduction
  loops), full unroll of the innermost reduction loop on/off, parallel loop, and
  `im2col` (convs: pack the input rows, see `conv_script`) on/off; `tile` (convs the
  register-tiled direct conv applies to: `conv.tile_script`, which the default schedule
  uses; when on, the other knobs do not apply; the default point has it on).

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

from dlpc.passes.schedule._common import ScheduleError, get_kernel
from dlpc.passes.schedule.conv import conv_script, tile_script
from dlpc.passes.schedule.default import (
    DOT_COLS,
    DOT_ROWS,
    RFACTOR,
    DotParams,
    GemmParams,
    b_contiguous_in_k,
    dot_script,
    gemm_default_params,
    gemm_operands,
    gemm_plans,
    gemm_script,
    gemv_script,
)
from dlpc.passes.schedule.nest import Nest, analyse, conv_input, is_strided
from dlpc.passes.schedule.tensorize import LANES, MAX_DOT, MAX_MR, MAX_NR


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
    start: dict | None = None  # the default schedule's point, when the space knows it

    def value(self, point: dict, key: str):
        """`point[key]`, or for a point logged before the knob existed, the value that
        reproduces what such a point meant (`micro` gemm, no `tail`, no `gemv`)."""
        if key in point:
            return point[key]
        return LEGACY[key] if key in LEGACY else self.knobs[key][0]

    def size(self) -> int:
        return math.prod(len(v) for v in self.knobs.values())

    def sample(self, rng: random.Random) -> dict:
        return {k: rng.choice(v) for k, v in self.knobs.items()}

    def grid(self) -> list[dict]:
        keys = list(self.knobs)
        return [dict(zip(keys, vals)) for vals in itertools.product(*self.knobs.values())]

    def mutate(self, point: dict, rng: random.Random) -> dict:
        new = {k: self.value(point, k) for k in self.knobs}
        key = rng.choice([k for k, v in self.knobs.items() if len(v) > 1] or list(self.knobs))
        values = self.knobs[key]
        i = values.index(new[key]) if new[key] in values else 0
        new[key] = values[max(0, min(len(values) - 1, i + rng.choice((-1, 1))))]
        return new

    def crossover(self, a: dict, b: dict, rng: random.Random) -> dict:
        return {k: self.value(a if rng.random() < 0.5 else b, k) for k in self.knobs}

    def features(self, point: dict) -> list[float]:
        """Numeric features of a point: log2 of sizes, flags, and derived working sets
        (one per knob, in the knobs' order, so points logged before a knob existed
        still line up)."""
        out = []
        for k in self.knobs:
            v = self.value(point, k)
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
            return gemv_script(kernel, self.nest, point.get("rf", RFACTOR))
        if self.template == "gemm" and point.get("micro") == "dot":
            return dot_script(kernel, self.nest, (point["mr"], point["nr"]), parallel=point["par"])
        if self.template == "gemm":
            tail = point.get("tail", "none")
            p = GemmParams(
                point["mc"],
                point["nc"],
                point["kc"],
                point["mr"],
                point["nr"],
                point["pack_a"],
                point["pack_b"],
                rows_tail=tail in ("rows", "both"),
                cols_tail=tail == "both",
            )
            return gemm_script(kernel, self.nest, p, parallel=point["par"])
        if self.value(point, "tile"):  # the register-tiled direct conv, as the default has it
            return tile_script(kernel, self.nest)
        if point.get("im2col"):
            return conv_script(kernel, self.nest, cb=point.get("cb", 1))
        return reduction_template(self.kernel, self.nest, point)

    def default(self) -> dict:
        n = self.nest
        if self.start is not None:
            return dict(self.start)
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
                rf = self.knobs["rf"]
                point.update(gemv=True, rf=RFACTOR if RFACTOR in rf else rf[0])
            return point
        point = {k: v[0] if k != "cb" else (4 if 4 in v else v[0]) for k, v in self.knobs.items()}
        point["im2col"] = self.strided
        if "tile" in self.knobs:
            point["tile"] = True  # the default schedule's first choice for a conv
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
        return _gemm_space(kernel, nest, operands[1])
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
    try:  # a conv the register-tiled template applies to (NCHW, NHWC, depthwise)
        if len(s) == 4 and conv_input(kernel, nest) is not None:
            tile_script(kernel, nest)
            knobs["tile"] = [False, True]  # last, so points logged before it line up
    except ScheduleError:
        pass
    return Space(
        "reduction",
        name,
        knobs,
        nest,
        strided=len(s) == 4 and is_strided(kernel, nest) and conv_input(kernel, nest) is not None,
    )


# what a gemm point logged before a knob existed meant
LEGACY = {"micro": "gemm", "tail": "none", "gemv": False, "tile": False}


def _gemm_space(kernel, nest: Nest, b) -> Space:
    """The gemm template's knobs; the tiles and blocks the default schedule chose are
    among their values, and its point is the space's default."""
    m, n, k = (nest.trips[x] for x in (nest.spatial[-2], nest.spatial[-1], nest.reduce[0]))
    plans = gemm_plans(kernel, nest)
    first = plans[0]
    gemm = next((p for p in plans if isinstance(p, GemmParams)), gemm_default_params(m, n, k))
    along_k = k >= LANES and b_contiguous_in_k(kernel, nest, b)
    rows_tail = gemm.rows_tail or (m > 8 and max(divisors(m, hi=8)) < 4)
    cols_tail = gemm.cols_tail or (n > MAX_NR and max(divisors(n, hi=MAX_NR)) < 8)
    mrs = {x for x in (1, 2, 4, 6, 8, 12, 14) if m % x == 0} | {gemm.mr}
    nrs = {x for x in (8, 16, 32, 48, 64) if n % x == 0} or set(divisors(n, hi=64))
    nrs |= {gemm.nr}
    if along_k:  # the dot kernel's blocks: up to DOT_ROWS rows, MAX_DOT dot products
        mrs |= set(divisors(m, hi=DOT_ROWS))
        nrs |= set(divisors(n, hi=DOT_COLS))
    if rows_tail:  # tiles of mr rows need not divide M
        mrs |= {x for x in (4, 6, 8) if x <= m}
    if cols_tail:
        nrs |= {x for x in (16, 32, 48, 64) if x <= n}
    knobs = {
        "mc": sorted(set(divisors(m, hi=512) or [m]) | {gemm.mc}),
        "nc": sorted(set(divisors(n, lo=min(n, 16), hi=1024) or [n]) | {gemm.nc}),
        "kc": sorted(set(divisors(k, lo=min(k, 16), hi=1024) or [k]) | {gemm.kc}),
        "mr": sorted(mrs),
        "nr": sorted(nrs),
        "pack_a": [True, False],
        "pack_b": [True, False],
        # no "none": tiny kernels are serialised after any schedule (SERIAL_WORK), and
        # for the others a serial schedule cannot win on several threads, while a tuner
        # measuring one thread cannot tell it from a parallel one (a logged "none" beat
        # "auto" by noise and then ran serially on 2 threads)
        "par": ["auto", "outer"],
    }
    if along_k:
        knobs["micro"] = ["gemm", "dot"]
    if rows_tail or cols_tail:
        knobs["tail"] = ["none", "rows"] + (["both"] if cols_tail else [])
    if m < 4 and along_k:
        knobs["gemv"] = [False, True]  # batch-1 linear: rfactor dot products
        knobs["rf"] = [f for f in (4, 8, 16, 32, 64) if k % f == 0] or [1]
    if isinstance(first, DotParams):
        start = {**_point(gemm, knobs), "micro": "dot", "mr": first.mr, "nr": first.nr}
    else:
        start = _point(first, knobs)
    return Space("gemm", kernel.sym, knobs, nest, start=start)


def _point(p: GemmParams, knobs: dict) -> dict:
    point = {
        "mc": p.mc,
        "nc": p.nc,
        "kc": p.kc,
        "mr": p.mr,
        "nr": p.nr,
        "pack_a": p.pack_a,
        "pack_b": p.pack_b,
        "par": "auto",
    }
    if "micro" in knobs:
        point["micro"] = "gemm"
    if "tail" in knobs:
        point["tail"] = "both" if p.cols_tail else "rows" if p.rows_tail else "none"
    if "gemv" in knobs:
        point.update(gemv=False, rf=RFACTOR if RFACTOR in knobs["rf"] else knobs["rf"][0])
    return point


def consistent(space: Space, point: dict) -> bool:
    """Tiles that fit and nest (gemm): the dot kernel's `mr x nr` block divides the
    output and fits MAX_DOT registers; the gemm's tiles divide the blocks (mc % mr,
    nc % nr) and the extents, except along a dimension with a remainder tile (`tail`)."""
    if space.template != "gemm" or space.value(point, "gemv"):
        return True
    n = space.nest
    m, nn = n.trips[n.spatial[-2]], n.trips[n.spatial[-1]]
    mr, nr = point["mr"], point["nr"]
    if space.value(point, "micro") == "dot":
        return mr <= DOT_ROWS and mr * nr <= MAX_DOT and m % mr == 0 and nn % nr == 0
    tail = space.value(point, "tail")
    if mr > MAX_MR or nr > MAX_NR:
        return False
    rows_ok = tail != "none" or (m % mr == 0 and point["mc"] % mr == 0)
    cols_ok = tail == "both" or (nn % nr == 0 and point["nc"] % nr == 0)
    return rows_ok and cols_ok
