"""Chains and teams: runs of consecutive kernels launched as one `__kernel` (`Chain`,
`ChainWriter.chain`), split by images over work-groups (`batch_split`), or run by a team
of serial devices together (`ChainWriter.team_chain`; the `TEAM_*` words of its sync
buffer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.ir import SSAValue

from dlpc.backends import c as cbe
from dlpc.backends.names import Scope, c_comment
from dlpc.backends.opencl.launch import Launch
from dlpc.dialects.loop import KernelOp, defined_inside
from dlpc.dialects.typed import shape_of


@dataclass
class Chain:
    """Consecutive kernels run as one launch of one work-item (`OpenCLEmitter.emit`'s
    `chains`): the kernel `name` walks each member's NDRange in turn and calls its body.
    `args` are its parameters in order: a buffer of @main and the permutation it is read
    in (`Launch.relayout`), or None; each once."""

    name: str
    kernels: list[KernelOp]
    args: list[tuple[SSAValue, tuple[int, ...] | None]]
    # work-groups of one work-item each (`batch_split`): group g runs its share of
    # every member's first NDRange dimension (images g * B / parts ...), 1: the whole
    parts: int = 1
    # a team chain (`OpenCLEmitter.team_chain`): launched once on each of `team` serial
    # devices, the members' work-items shared among those that join; 1: no team
    team: int = 1
    chunks: tuple[int, ...] = ()  # a team chain's chunks per member


def _nbytes(value: SSAValue) -> int:
    shape, elt = cbe.memref_info(value.type)
    return math.prod(shape) * cbe.size_of(elt)


#: a kernel reading more resident bytes (weights) than this is no member of a split
#: chain: each work-group reads them again, where launched alone its work-items split the
#: outputs and read each weight once (figures: docs/design/opencl-experiments.md)
MAX_SPLIT_RESIDENT = 256 * 1024


def batch_split(
    kernel: KernelOp, launch: Launch, parts: int, resident: set[SSAValue]
) -> int | None:
    """The batch B when `parts` work-groups can each run their range of images of this
    kernel with no other group's data: its first NDRange dimension is a loop from 0 by 1
    over B iterations, its work-items (B / lanes) split evenly into `parts`, and every
    buffer it loads or stores that is not resident (parameters, globals: read only) has
    B as its first dimension and that loop's variable as its first index. Then a chain
    of such kernels with the same B needs no barrier: group g writes and reads images
    g * B / parts ... only. Else None."""
    if not launch.mapped or launch.local_size is not None or launch.shared:
        return None
    first = next((lp for lp, e in launch.mapped.items() if e == "get_global_id(0)"), None)
    if first is None or first.lower != 0 or first.stride != 1:
        return None
    batch = first.trip_count
    if batch % parts or launch.global_size[0] % parts:
        return None
    iv = first.induction_var
    weights = {
        o.memref for o in kernel.walk() if isinstance(o, memref.LoadOp) and o.memref in resident
    }
    if sum(_nbytes(v) for v in weights) > MAX_SPLIT_RESIDENT:
        return None  # (every group would read them again)
    for op in kernel.walk():
        if not isinstance(op, memref.LoadOp | memref.StoreOp):
            continue
        if defined_inside(op.memref, kernel) or op.memref in resident:
            continue
        if shape_of(op.memref)[:1] != (batch,) or not op.indices or op.indices[0] is not iv:
            return None
    return batch


#: work-groups of a split chain per compute unit, the most that every member's batch
#: and first NDRange dimension divide into (1 always does: `batch_split`): a worker
#: that wakes late or is preempted on a shared machine leaves its share to the other
SPLIT_GROUPS_PER_UNIT = (8, 4, 2, 1)


#: a chain's parameters at most (OpenCL guarantees 1024 bytes of kernel arguments: 128
#: pointers); a longer run of kernels is cut into several chains
MAX_CHAIN_ARGS = 120


#: a team chain's synchronisation words (longs of the `sync` buffer, fine-grained SVM
#: that the host and both devices' kernels read and write, `OpenCLEmitter.team_chain`):
#: the call id the host starts (TEAM_GO), the call id the caller's launch has started
#: (TEAM_STARTED), the argument version the host expects (TEAM_VERSION), what the last
#: helper launch did (TEAM_RESULT: TEAM_JOINED a call, TEAM_IDLE: gave up waiting,
#: TEAM_STALE: armed with old arguments), the chunks helpers have run (TEAM_HELPED), the
#: last call id a helper saw (TEAM_SEEN), then two counters per member from TEAM_COUNTERS
#: on
TEAM_GO, TEAM_STARTED, TEAM_VERSION, TEAM_RESULT, TEAM_HELPED, TEAM_SEEN = 0, 1, 2, 3, 4, 5
TEAM_COUNTERS = 8
TEAM_JOINED, TEAM_IDLE, TEAM_STALE = 1, 3, 4
#: chunks a member's work-items are taken in, at most (one atomic each)
TEAM_CHUNKS = 16


def team_sync_words(members: int) -> int:
    """The longs of a team chain's `sync` buffer for `members` kernels."""
    return TEAM_COUNTERS + 2 * members


class ChainWriter:
    """The chains and team chains of `OpenCLEmitter` (a mixin: its methods write into
    the emitter's parts)."""

    # (the emitter's state these methods write to: `OpenCLEmitter.__init__`)
    top: Scope
    parts: list[str]
    launches: dict[KernelOp, Launch]
    bodies: dict[KernelOp, tuple[str, list[str], list]]
    chains: list[Chain]
    groups: int
    team: int
    batches: dict[KernelOp, int]

    def chain_runs(self, run: list[KernelOp]) -> None:
        """`Chain`s for a run of kernels: split at kernels without a body and where the
        parameters would pass `MAX_CHAIN_ARGS`; a piece of one kernel is no chain."""
        piece: list[KernelOp] = []
        args: dict[tuple, str] = {}  # (buffer, permutation) -> parameter type
        for k in [*run, None]:
            if k is not None and k in self.bodies:
                _, types, keys = self.bodies[k]
                new = {key for key in keys if key not in args}
                same = not piece or self.batches.get(k) == self.batches.get(piece[0])
                if len(args) + len(new) <= MAX_CHAIN_ARGS and same:
                    piece.append(k)
                    for key, t in zip(keys, types):
                        # (written by any member: not const)
                        args[key] = t if args.get(key, t) == t else t.replace("const ", "")
                    continue
            if len(piece) > 1 or (piece and self.team > 1):
                self.chain(piece, args)
            piece, args = [], {}
            if k is not None and k in self.bodies:
                _, types, keys = self.bodies[k]
                piece, args = [k], dict(zip(keys, types))

    def _chain_head(self, args: dict[tuple, str]):
        """A chain kernel's name, its scope and its buffer parameters (one per (buffer,
        permutation) of `args`, no restrict: the members' buffers may alias)."""
        name = self.top.fresh("chain", kind="kernel")
        names = Scope(self.top.used)
        params, arg_name = [], {}
        for (v, perm), t in args.items():
            arg_name[v, perm] = names.fresh(v.name_hint, "arg")
            params.append(f"__global {t} *{arg_name[v, perm]}")
        return name, names, params, arg_name

    def _chain_kernel(self, note: str, name: str, params: list[str], lines: list[str]) -> None:
        """Append a chain's `__kernel` function: its comment, signature and body lines."""
        self.parts.append(
            f"{c_comment(note)}\n__kernel void {name}({', '.join(params)})\n{{\n"
            + "\n".join(lines)
            + "\n}\n"
        )

    def chain(self, kernels: list[KernelOp], args: dict[tuple, str]) -> None:
        """One `__kernel` of one work-item calling each member's body over its NDRange."""
        if self.team > 1:
            self.team_chain(kernels, args)
            return
        name, names, params, arg_name = self._chain_head(args)
        lines = []
        part = names.fresh("part")
        groups = 1
        if self.groups > 1:  # more groups than units: PoCL deals them out as workers come
            groups = next(
                g
                for g in (self.groups * m for m in SPLIT_GROUPS_PER_UNIT)
                if all(
                    self.batches[k] % g == 0 and self.launches[k].global_size[0] % g == 0
                    for k in kernels
                )
            )
            lines.append(f"  const long {part} = (long)get_global_id(0);")
        for k in kernels:
            body, _, keys = self.bodies[k]
            sizes = self.launches[k].global_size if self.launches[k].mapped else ()
            ids = [names.fresh(f"id{d}") for d in range(len(sizes))]
            indent = "  "
            for d, (iv, n) in enumerate(zip(ids, sizes)):
                first, last = "0", str(n)
                if d == 0 and groups > 1:  # this group's images
                    share = n // groups
                    first, last = f"{part} * {share}", f"({part} + 1) * {share}"
                lines.append(f"{indent}for (long {iv} = {first}; {iv} < {last}; {iv}++)")
                indent += "  "
            call_args = [arg_name[key] for key in keys] + ids
            lines.append(f"{indent}{body}({', '.join(call_args)});")
        note = (
            "chain of kernels "
            + ", ".join(k.sym for k in kernels)
            + f": global ({groups}), local (1)"
        )
        self._chain_kernel(note, name, params, lines)
        self.chains.append(Chain(name, kernels, list(args), groups))

    def team_chain(self, kernels: list[KernelOp], args: dict[tuple, str]) -> None:
        """A chain that `self.team` serial devices (PoCL basic: each runs its launch in
        the thread that enqueues it) run together, one launch each from its own host
        thread (`opencl_rt.Team`): `role` 0 is the caller's launch, which runs the whole
        call if need be; role 1 a helper's, armed ahead of calls, which helps with every
        call that starts while it waits (at most `spin` reads) and returns after that.

        The `sync` words (longs of fine-grained SVM, `TEAM_*`): the caller's host writes
        the call id to `sync[TEAM_GO]`; the caller's launch sets each member's two
        counters (work-items taken, work-items done) to (id << 32) + 0 and then
        publishes the id in `sync[TEAM_STARTED]`. Each launch in the call takes chunks
        of a member's flattened NDRange (`atom_cmpxchg` of the taken counter, only while
        its upper half is this call's id), runs them, counts them done (`atom_add`),
        and when none are left to take waits until all are done before the next member
        (a launch that finds another call's id there left the call: it was over). The
        caller's launch returns when the last member is done. Every work-item runs
        once, with the same operations as on one device: the results are the same."""
        name, names, params, arg_name = self._chain_head(args)
        sync, role, spin, version = (names.fresh(n) for n in ("sync", "role", "spin", "version"))
        params += [
            f"__global volatile long *{sync}",
            f"const int {role}",
            f"const int {spin}",
            f"const int {version}",
        ]
        cid, seen, n, v, d, k, run = (
            names.fresh(x) for x in ("id", "seen", "n", "v", "d", "k", "run")
        )
        # by images (`batch_split`, `self.groups` of them): a chunk is a range of images
        # through every member, one pair of counters, no wait between members
        groups = self.groups if self.groups > 1 else 0
        counters = 2 if groups else 2 * len(kernels)
        go, started, ver, res = (
            f"{sync}[{i}]" for i in (TEAM_GO, TEAM_STARTED, TEAM_VERSION, TEAM_RESULT)
        )
        tag = f"((ulong){cid} << 32)"
        chunks: list[int] = []
        lines = [
            f"  ulong {cid}, {seen} = 0;",
            f"  int {n} = 0;",
            f"  if ({role} == 0) {{  /* the caller's launch: start the call */",
            f"    {cid} = (ulong){go};",
            f"    for (int {k} = 0; {k} < {counters}; {k}++)",
            f"      {sync}[{TEAM_COUNTERS} + {k}] = (long){tag};",
            "    mem_fence(CLK_GLOBAL_MEM_FENCE);",
            f"    {started} = (long){cid};",
            "  }",
            "  for (;;) {",
            f"    if ({role} != 0) {{  /* a helper: wait for a call it has not seen */",
            f"      {cid} = (ulong){started};",
            f"      if ({cid} == {seen}) {{",
            f"        if (++{n} > {spin}) {{ {res} = {TEAM_IDLE}; return; }}",
            "        continue;",
            "      }",
            f"      if ({ver} != {version}) {{ {res} = {TEAM_STALE}; return; }}",
            f"      {seen} = {cid};",
            f"      {sync}[{TEAM_SEEN}] = (long){cid};",
            f"      {n} = 0;",
            "      mem_fence(CLK_GLOBAL_MEM_FENCE);",
            "    }",
            f"    int {run} = 1;",
        ]
        if groups:
            lines += self._team_images(kernels, arg_name, names, sync, role, cid, run, groups)
            chunks.append(groups)
        for m, kern in enumerate([] if groups else kernels):
            body, _, keys = self.bodies[kern]
            sizes = self.launches[kern].global_size if self.launches[kern].mapped else ()
            total = math.prod(sizes)
            chunk = max(1, -(-total // TEAM_CHUNKS))
            chunks.append(-(-total // chunk))
            taken, done = (f"{sync}[{TEAM_COUNTERS + 2 * m + j}]" for j in (0, 1))
            ids = [names.fresh(f"id{dim}") for dim in range(len(sizes))]
            flat, last = names.fresh("f"), names.fresh("last")
            lines += [
                f"    while ({run}) {{  /* member {m}: {kern.sym}, {total} work-items */",
                f"      const ulong {v} = (ulong){taken};",
                f"      if (({v} >> 32) != ({cid} & 0xffffffffUL) || ({v} & 0xffffffffUL) >= "
                f"{total}UL) break;",
                f"      const ulong {last} = min({v} + {chunk}UL, {tag} + {total}UL);",
                f"      if ((ulong)atom_cmpxchg(&{taken}, (long){v}, (long){last}) != {v}) "
                "continue;",
                f"      for (long {flat} = (long)({v} & 0xffffffffUL); "
                f"{flat} < (long)({last} & 0xffffffffUL); {flat}++) {{",
            ]
            inner = 1
            for dim in reversed(range(len(sizes))):
                value = flat if inner == 1 else f"{flat} / {inner}"
                if dim > 0:
                    value = f"({value}) % {sizes[dim]}"
                lines.append(f"        const long {ids[dim]} = {value};")
                inner *= sizes[dim]
            call_args = [arg_name[key] for key in keys] + ids
            lines += [
                f"        {body}({', '.join(call_args)});",
                "      }",
                "      mem_fence(CLK_GLOBAL_MEM_FENCE);",
                f"      atom_add(&{done}, (long)({last} - {v}));",
                f"      if ({role} != 0) atom_inc(&{sync}[{TEAM_HELPED}]);",
                "    }",
                f"    while ({run}) {{  /* until member {m} is done (or the call is over) */",
                f"      const ulong {d} = (ulong){done};",
                f"      if ({d} == {tag} + {total}UL) break;",
                f"      if (({d} >> 32) != ({cid} & 0xffffffffUL)) {run} = 0;",
                "    }",
                "    mem_fence(CLK_GLOBAL_MEM_FENCE);",
            ]
        lines += [
            f"    if ({role} == 0) return;",
            f"    {res} = {TEAM_JOINED};",
            "  }",
        ]
        note = (
            "team chain of kernels "
            + ", ".join(k.sym for k in kernels)
            + f": global (1), local (1), on {self.team} devices"
        )
        self._chain_kernel(note, name, params, lines)
        self.chains.append(Chain(name, kernels, list(args), groups or 1, self.team, tuple(chunks)))

    def _team_images(self, kernels, arg_name, names, sync, role, cid, run, groups) -> list[str]:
        """The work of a team chain by images: chunk g (of `groups`, taken as the members'
        are in `team_chain`) runs images g * B / groups ... through every member; the
        members split by images (`batch_split`), so no chunk reads another's data and
        only the last chunk done ends the call (one wait a call, not one a member; a
        helper preempted while it runs a chunk holds the call up once)."""
        g, v, d = (names.fresh(x) for x in ("g", "v", "d"))
        taken, done = (f"{sync}[{TEAM_COUNTERS + j}]" for j in (0, 1))
        tag = f"((ulong){cid} << 32)"
        lines = [
            f"    while ({run}) {{  /* a range of images through every member */",
            f"      const ulong {v} = (ulong){taken};",
            f"      if (({v} >> 32) != ({cid} & 0xffffffffUL) || ({v} & 0xffffffffUL) >= "
            f"{groups}UL) break;",
            f"      if ((ulong)atom_cmpxchg(&{taken}, (long){v}, (long)({v} + 1UL)) != {v}) "
            "continue;",
            f"      const long {g} = (long)({v} & 0xffffffffUL);",
        ]
        for kern in kernels:
            body, _, keys = self.bodies[kern]
            sizes = self.launches[kern].global_size if self.launches[kern].mapped else ()
            ids = [names.fresh(f"id{dim}") for dim in range(len(sizes))]
            indent = "      "
            for dim, (iv, size) in enumerate(zip(ids, sizes)):
                first, last = "0", str(size)
                if dim == 0:
                    share = size // groups
                    first, last = f"{g} * {share}", f"({g} + 1) * {share}"
                lines.append(f"{indent}for (long {iv} = {first}; {iv} < {last}; {iv}++)")
                indent += "  "
            lines.append(f"{indent}{body}({', '.join([arg_name[key] for key in keys] + ids)});")
        lines += [
            "      mem_fence(CLK_GLOBAL_MEM_FENCE);",
            f"      atom_inc(&{done});",
            f"      if ({role} != 0) atom_inc(&{sync}[{TEAM_HELPED}]);",
            "    }",
            f"    while ({run}) {{  /* until every range is done (or the call is over) */",
            f"      const ulong {d} = (ulong){done};",
            f"      if ({d} == {tag} + {groups}UL) break;",
            f"      if (({d} >> 32) != ({cid} & 0xffffffffUL)) {run} = 0;",
            "    }",
            "    mem_fence(CLK_GLOBAL_MEM_FENCE);",
        ]
        return lines
