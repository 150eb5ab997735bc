"""Schedule scripts: a schedule as a small, replayable, diffable text of primitives.

Input/Output: loop dialect.  Requires: every line parses and every primitive's own
requirements hold.  Guarantees: the primitives are applied in order; an error names the
script line and keeps the primitive's error class.

One primitive per line (or separated by `;`), `#` starts a comment:

    decompose matmul_0                          # init / update / epilogue nests
    decompose k/matmul_0_i0                     # ... of the nest one loop heads
    split matmul_0/i1 by 32 -> i1o, i1i         # names optional: default i1o, i1i
    tile matmul_0/i0, i1o by 8, 4               # split each, outer parts first
    reorder matmul_0: i0o, i1oo, r0, i0i        # permute loops of one perfect chain
    fuse matmul_0/i0o, i1oo -> f                # two nested loops -> one
    unroll matmul_0/i0i [by 4]                  # default: full unroll
    vectorize matmul_0/i1i
    parallel matmul_0/f
    serial matmul_0[/f]                         # drop parallel (whole kernel or one loop)
    cache_read matmul_0/r0 fc1.weight [-> wl] [pack|deinterleave]  # buffer by name or index
    cache_write matmul_0/i1o out0 [-> acc]
    compute_at relu_0 -> matmul_0/i0 [local]    # producer kernel into a consumer loop
    compute_inline reshape_1                    # producer substituted into its reads
    tensorize matmul_0/i0i gemm                 # replace a nest by a micro-kernel
    rfactor linear_0/r0 by 16                   # 16 partial sums, then combined

`loop-schedule{script=path.sched}` or inline
`loop-schedule{script="split k/i by 4; vectorize k/ii"}`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from dlpc.passes.schedule._common import ScheduleError, split_path

NAME = r"[A-Za-z0-9_.$]+"
BUF = r"@?[A-Za-z0-9_.$]+"  # a buffer: name hint, or @n = the n-th buffer from outside
#                             the kernel that it accessed when the script started
PATH = rf"{NAME}/{NAME}"
LIST = rf"{NAME}(?:\s*,\s*{NAME})*"
INTS = r"\d+(?:\s*,\s*\d+)*"

SYNTAX = {
    "split": (rf"({PATH}) by (\d+)(?: -> ({NAME}), ({NAME}))?", "split K/L by N [-> O, I]"),
    "reorder": (rf"({NAME}): ({LIST})", "reorder K: L1, L2, ..."),
    "tile": (rf"({NAME})/({LIST}) by ({INTS})", "tile K/L1, L2 by N1, N2"),
    "fuse": (rf"({PATH}), ({NAME})(?: -> ({NAME}))?", "fuse K/OUTER, INNER [-> F]"),
    "unroll": (rf"({PATH})(?: by (\d+))?", "unroll K/L [by N]"),
    "vectorize": (rf"({PATH})", "vectorize K/L"),
    "parallel": (rf"({PATH})", "parallel K/L"),
    "serial": (rf"({NAME})(?:/({NAME}))?", "serial K[/L]"),
    "decompose": (rf"({NAME})(?:/({NAME}))?", "decompose K[/L]"),
    "cache_read": (
        rf"({PATH}) ({BUF})(?: -> ({NAME}))?( pack| deinterleave)?",
        "cache_read K/L BUFFER [-> LOCAL] [pack|deinterleave]",
    ),
    "cache_write": (rf"({PATH}) ({BUF})(?: -> ({NAME}))?", "cache_write K/L BUFFER [-> LOCAL]"),
    "compute_at": (rf"({NAME}) -> ({PATH})( local)?", "compute_at PRODUCER -> K/L [local]"),
    "compute_inline": (rf"({NAME})", "compute_inline PRODUCER"),
    "tensorize": (rf"({PATH}) ({NAME})", "tensorize K/L INTRINSIC"),
    "rfactor": (rf"({PATH}) by (\d+)", "rfactor K/L by N"),
}


class ScriptSyntaxError(ScheduleError):
    pass


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",")]


@dataclass(frozen=True)
class Step:
    """One primitive application: its name, its argument groups, and the source line."""

    prim: str
    args: tuple
    line: int = 0

    def __str__(self) -> str:
        return self.text

    @property
    def text(self) -> str:
        return _render(self.prim, self.args)


def _render(prim: str, a: tuple) -> str:
    opt = lambda fmt, *xs: fmt.format(*xs) if all(x is not None for x in xs) else ""  # noqa: E731
    if prim == "split":
        return f"split {a[0]} by {a[1]}" + opt(" -> {}, {}", a[2], a[3])
    if prim == "reorder":
        return f"reorder {a[0]}: {a[1]}"
    if prim == "tile":
        return f"tile {a[0]}/{a[1]} by {a[2]}"
    if prim == "fuse":
        return f"fuse {a[0]}, {a[1]}" + opt(" -> {}", a[2])
    if prim == "unroll":
        return f"unroll {a[0]}" + opt(" by {}", a[1])
    if prim == "cache_read":
        return f"{prim} {a[0]} {a[1]}" + opt(" -> {}", a[2]) + (a[3] or "")
    if prim == "cache_write":
        return f"{prim} {a[0]} {a[1]}" + opt(" -> {}", a[2])
    if prim == "rfactor":
        return f"rfactor {a[0]} by {a[1]}"
    if prim == "serial":
        return f"serial {a[0]}" + opt("/{}", a[1])
    if prim == "compute_at":
        return f"compute_at {a[0]} -> {a[1]}" + (a[2] or "")
    if prim == "decompose":
        return f"decompose {a[0]}" + opt("/{}", a[1])
    return f"{prim} {' '.join(a)}"


def parse_script(text: str) -> list[Step]:
    steps = []
    for n, raw in enumerate(text.splitlines(), 1):
        for stmt in raw.split("#", 1)[0].split(";"):
            stmt = " ".join(stmt.replace(",", ", ").split()).replace(" ,", ",")
            if not stmt:
                continue
            prim, _, rest = stmt.partition(" ")
            if prim not in SYNTAX:
                raise ScriptSyntaxError(
                    f"schedule line {n}: unknown primitive '{prim}' (known: {', '.join(SYNTAX)})"
                )
            pattern, usage = SYNTAX[prim]
            m = re.fullmatch(pattern, rest.replace(", ", ",").replace(",", ", "))
            if m is None:
                raise ScriptSyntaxError(f"schedule line {n}: expected '{usage}', got '{stmt}'")
            steps.append(Step(prim, m.groups(), n))
    return steps


def apply_step(module, step: Step, tables: dict | None = None) -> None:
    from dlpc.passes.schedule import (
        cache,
        compute_at,
        decompose,
        fuse,
        parallel,
        reorder,
        rfactor,
        split,
        tensorize,
        tile,
        unroll,
        vectorize,
    )

    a = step.args
    if step.prim == "split":
        k, lp = split_path(a[0])
        split.split(module, k, lp, int(a[1]), a[2], a[3])
    elif step.prim == "reorder":
        reorder.reorder(module, a[0], _names(a[1]))
    elif step.prim == "tile":
        tile.tile(module, a[0], _names(a[1]), [int(x) for x in _names(a[2])])
    elif step.prim == "fuse":
        k, lp = split_path(a[0])
        fuse.fuse(module, k, lp, a[1], a[2])
    elif step.prim == "unroll":
        k, lp = split_path(a[0])
        unroll.unroll(module, k, lp, int(a[1]) if a[1] else None)
    elif step.prim == "vectorize":
        vectorize.vectorize(module, *split_path(a[0]))
    elif step.prim == "parallel":
        parallel.parallel(module, *split_path(a[0]))
    elif step.prim == "serial":
        parallel.serial(module, a[0], a[1])
    elif step.prim == "decompose":
        decompose.decompose_reduction(module, a[0], a[1])
    elif step.prim == "cache_read":
        k, lp = split_path(a[0])
        how = (a[3] or "").strip()
        cache.cache_read(
            module, k, lp, _buffer(module, a, tables), a[2], how == "pack", how == "deinterleave"
        )
    elif step.prim == "cache_write":
        k, lp = split_path(a[0])
        cache.cache_write(module, k, lp, _buffer(module, a, tables), a[2])
    elif step.prim == "compute_inline":
        compute_at.compute_inline(module, a[0])
    elif step.prim == "compute_at":
        k, lp = split_path(a[1])
        compute_at.compute_at(module, a[0], k, lp, bool(a[2]))
    elif step.prim == "rfactor":
        k, lp = split_path(a[0])
        rfactor.rfactor(module, k, lp, int(a[1]))
    elif step.prim == "tensorize":
        k, lp = split_path(a[0])
        tensorize.tensorize(module, k, lp, a[1])


def _buffer(module, args: tuple, tables: dict | None) -> str | SSAValue:
    """A cache step's buffer: a name, an index, or `@n` (resolved by `_resolve`)."""
    loop_path, token = args[0], args[1]
    return _resolve(module, loop_path, token, tables) if token.startswith("@") else token


def _resolve(module, loop_path: str, token: str, tables: dict | None) -> SSAValue:
    """`@n` -> the n-th buffer of the kernel's access order at the start of the script."""
    from dlpc.passes.schedule._common import BufferNotFoundError, buffers_accessed, get_kernel

    kernel, _ = split_path(loop_path)
    if tables is None or kernel not in tables:
        table = buffers_accessed(get_kernel(module, kernel), external=True)
    else:
        table = tables[kernel]
    n = int(token[1:]) if token[1:].isdigit() else -1
    if not 0 <= n < len(table):
        raise BufferNotFoundError(
            f"kernel '{kernel}' accessed {len(table)} buffers when the script started, "
            f"no buffer {token}"
        )
    return table[n]


def apply_script(module, text: str) -> None:
    """Apply every step; an error is re-raised with the script line in front."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.schedule._common import buffers_accessed

    steps = parse_script(text)
    # the access order at the start, of the kernels whose buffers a step names by `@n`
    # (every kernel's, for each of a model's scripts, was 7 % of resnet's schedule)
    named = {
        split_path(step.args[0])[0]
        for step in steps
        if step.prim in ("cache_read", "cache_write") and step.args[1].startswith("@")
    }
    tables = {k.sym: buffers_accessed(k, external=True) for k in kernels(module) if k.sym in named}
    for step in steps:
        try:
            apply_step(module, step, tables)
        except ScheduleError as e:
            raise type(e)(f"schedule line {step.line} ({step.text}): {e}") from None


def read_script(spec: str) -> str:
    """A script option: a file path if such a file exists, else the script itself."""
    if spec.endswith((".sched", ".txt")) or os.path.isfile(spec):
        try:
            with open(spec) as f:
                return f.read()
        except OSError as e:
            raise ScriptSyntaxError(f"cannot read schedule script '{spec}': {e.strerror}") from None
    return spec


@dataclass(frozen=True)
class LoopSchedule(ModulePass):
    """`loop-schedule{script="split k/i by 4; vectorize k/ii"}` or `{script=file.sched}`"""

    name = "loop-schedule"
    script: str

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        apply_script(op, read_script(self.script))
