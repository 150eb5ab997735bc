"""The C driver of a program cut at its comm ops: one C function that calls the compiled
segments and MPI in program order, so a step makes no trip through Python per collective.

    source = emit_driver(plan)     # int dlpc_comm_step(void **S, int overlap), with libmpi

The plan (`DriverPlan`, made by `dlpc.runtime.comm_native`) is plain data: every value
the step touches is a slot of the pointer table `S` (the caller fills @main's inputs,
params and outputs per call; the kept buffers once), and each instruction names slots.
This module only prints; which buffer holds what, and which collective runs in place, is
the planner's choice. A segment is called through the function pointer the caller hands
in (`dlpc_comm_init`): every segment library exports the same `dlpc_main`. The
communicators arrive as Fortran handles (`MPI_Comm_f2c`: the same value whatever C type
the library's ABI gives `MPI_Comm`). A nonzero status stops the step: a segment's own
(`dlpc_comm_segment` says which), or an MPI error (`dlpc_comm_message`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlpc.backends.names import c_comment

# numpy dtype name -> (C element type, MPI datatype)
MPI_TYPES = {
    "float32": ("float", "MPI_FLOAT"),
    "float64": ("double", "MPI_DOUBLE"),
    "int64": ("int64_t", "MPI_INT64_T"),
    "int32": ("int32_t", "MPI_INT32_T"),
    "int16": ("int16_t", "MPI_INT16_T"),
    "int8": ("int8_t", "MPI_INT8_T"),
    "uint8": ("uint8_t", "MPI_UINT8_T"),
}
MPI_OPS = {
    "sum": "MPI_SUM",
    "avg": "MPI_SUM",
    "prod": "MPI_PROD",
    "min": "MPI_MIN",
    "max": "MPI_MAX",
}


# ---- the plan's instructions -------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """Call segment `index`'s dlpc_main (after its dlpc_prepare, when it has one) on the
    slots `args`, in its argument order."""

    index: int
    args: tuple[int, ...]


@dataclass(frozen=True)
class Copy:
    dst: int
    src: int
    nbytes: int


@dataclass(frozen=True)
class Zero:
    slot: int
    nbytes: int


@dataclass(frozen=True)
class Chunks:
    """`join=False`: [outer][n][inner] -> [n][outer][inner] (split along a dim into n
    contiguous chunks); `join=True` the reverse. `inner` in bytes."""

    dst: int
    src: int
    outer: int
    n: int
    inner: int
    join: bool


@dataclass(frozen=True)
class Divide:
    """avg: every element of the slot divided by the group size."""

    slot: int
    count: int
    dtype: str
    by: int


@dataclass(frozen=True)
class OnRoot:
    """`then` on the communicator's rank `root`, `other` on the rest."""

    comm: int
    root: int
    then: tuple = ()
    other: tuple = ()


@dataclass(frozen=True)
class Mpi:
    """One MPI call. `fn`: Allreduce, Iallreduce, Bcast, Reduce, Scatter, Gather,
    Allgather, Reduce_scatter_block, Alltoall, Send, Recv, Barrier, Wait. `send` None:
    MPI_IN_PLACE. `count`: the elements of one rank's part (a chunk for rooted and
    all-to-all ops). `request`: the Iallreduce's request slot (an index of the driver's
    request table), waited for by a `Mpi("Wait", request=...)`."""

    fn: str
    comm: int = 0
    dtype: str = ""
    send: int | None = None
    recv: int | None = None
    count: int = 0
    kind: str = ""
    root: int = 0
    peer: int = 0
    tag: int = 0
    request: int = -1


@dataclass
class DriverPlan:
    slots: int
    segments: int
    comms: int
    requests: int
    steps: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one comment line per step


# ---- printing -------------------------------------------------------------------------------

PRELUDE = """\
#include <mpi.h>
#include <stdint.h>
#include <string.h>

typedef int (*dlpc_entry)(void **);
static dlpc_entry seg_main[DLPC_SEGMENTS];
static dlpc_entry seg_prepare[DLPC_SEGMENTS];
static MPI_Comm comm[DLPC_COMMS];
static int comm_rank[DLPC_COMMS];
static MPI_Request request[DLPC_REQUESTS];

int dlpc_comm_segment = -1;      /* the segment whose status stopped the step */
double dlpc_comm_recv_seconds;   /* time spent in MPI_Recv (a pipeline stage's idle) */
char dlpc_comm_message[512];     /* the MPI error that stopped it */

static int dlpc_mpi_failed(int code, const char *where) {
  int len = 0;
  char text[MPI_MAX_ERROR_STRING];
  MPI_Error_string(code, text, &len);
  snprintf(dlpc_comm_message, sizeof dlpc_comm_message, "%s: %s", where, text);
  return -1;
}
#define MPI_CHECK(call, where) \\
  do { int e_ = (call); if (e_ != MPI_SUCCESS) return dlpc_mpi_failed(e_, where); } while (0)

/* [outer][n][inner] -> [n][outer][inner] bytes, or back (join) */
static void dlpc_chunks(char *dst, const char *src, long outer, long n, long inner, int join) {
  for (long i = 0; i < n; i++)
    for (long o = 0; o < outer; o++) {
      long a = (i * outer + o) * inner, b = (o * n + i) * inner;
      if (join) memcpy(dst + b, src + a, inner); else memcpy(dst + a, src + b, inner);
    }
}

/* 1 when this library's MPI is the caller's, initialised: the same rank and size on the
   communicator `world` (a Fortran handle) */
int dlpc_comm_check(int world, int rank, int size) {
  int up = 0, r = -1, n = -1;
  if (MPI_Initialized(&up) != MPI_SUCCESS || !up) return 0;
  MPI_Comm c = MPI_Comm_f2c(world);
  if (MPI_Comm_rank(c, &r) != MPI_SUCCESS || MPI_Comm_size(c, &n) != MPI_SUCCESS) return 0;
  return r == rank && n == size;
}

int dlpc_comm_init(void **mains, void **prepares, const int *comms) {
  for (int k = 0; k < DLPC_SEGMENTS; k++) {
    seg_main[k] = (dlpc_entry)mains[k];
    seg_prepare[k] = (dlpc_entry)prepares[k];
  }
  for (int k = 0; k < DLPC_COMMS; k++) {
    comm[k] = MPI_Comm_f2c(comms[k]);
    MPI_CHECK(MPI_Comm_rank(comm[k], &comm_rank[k]), "MPI_Comm_rank");
  }
  return 0;
}
"""


def _ptr(slot: int | None) -> str:
    return "MPI_IN_PLACE" if slot is None else f"S[{slot}]"


def _mpi(i: Mpi) -> str:
    t = MPI_TYPES[i.dtype][1] if i.dtype else ""
    c, op = f"comm[{i.comm}]", MPI_OPS.get(i.kind, "")
    s, r, n = _ptr(i.send), _ptr(i.recv), i.count
    call = {
        "Allreduce": f"MPI_Allreduce({s}, {r}, {n}, {t}, {op}, {c})",
        "Iallreduce": f"MPI_Iallreduce({s}, {r}, {n}, {t}, {op}, {c}, &request[{i.request}])",
        "Wait": f"MPI_Wait(&request[{i.request}], MPI_STATUS_IGNORE)",
        "Bcast": f"MPI_Bcast({r}, {n}, {t}, {i.root}, {c})",
        "Reduce": f"MPI_Reduce({s}, {r}, {n}, {t}, {op}, {i.root}, {c})",
        "Scatter": f"MPI_Scatter({s}, {n}, {t}, {r}, {n}, {t}, {i.root}, {c})",
        "Gather": f"MPI_Gather({s}, {n}, {t}, {r}, {n}, {t}, {i.root}, {c})",
        "Allgather": f"MPI_Allgather({s}, {n}, {t}, {r}, {n}, {t}, {c})",
        "Reduce_scatter_block": f"MPI_Reduce_scatter_block({s}, {r}, {n}, {t}, {op}, {c})",
        "Alltoall": f"MPI_Alltoall({s}, {n}, {t}, {r}, {n}, {t}, {c})",
        "Send": f"MPI_Send({s}, {n}, {t}, {i.peer}, {i.tag}, {c})",
        "Recv": f"MPI_Recv({r}, {n}, {t}, {i.peer}, {i.tag}, {c}, MPI_STATUS_IGNORE)",
        "Barrier": f"MPI_Barrier({c})",
    }[i.fn]
    check = f'MPI_CHECK({call}, "MPI_{i.fn}");'
    if i.fn == "Iallreduce":  # (blocking when the caller asks: `overlap` 0)
        blocking = f"MPI_Allreduce({s}, {r}, {n}, {t}, {op}, {c})"
        return f'if (overlap) {check} else MPI_CHECK({blocking}, "MPI_Allreduce");'
    if i.fn == "Wait":
        return f"if (overlap) {check}"
    if i.fn == "Recv":
        return f"{{ double t0 = MPI_Wtime(); {check} dlpc_comm_recv_seconds += MPI_Wtime() - t0; }}"
    return check


def _lines(step, indent: str) -> list[str]:
    if isinstance(step, Segment):
        k, args = step.index, ", ".join(f"S[{a}]" for a in step.args)
        return [
            f"{indent}{{",
            f"{indent}  void *a[] = {{{args}}};",
            f"{indent}  int st = seg_prepare[{k}] ? seg_prepare[{k}](a) : 0;",
            f"{indent}  if (!st) st = seg_main[{k}](a);",
            f"{indent}  if (st) {{ dlpc_comm_segment = {k}; return st; }}",
            f"{indent}}}",
        ]
    if isinstance(step, Copy):
        return [f"{indent}memcpy(S[{step.dst}], S[{step.src}], {step.nbytes});"]
    if isinstance(step, Zero):
        return [f"{indent}memset(S[{step.slot}], 0, {step.nbytes});"]
    if isinstance(step, Chunks):
        a = f"S[{step.dst}], S[{step.src}], {step.outer}, {step.n}, {step.inner}, {int(step.join)}"
        return [f"{indent}dlpc_chunks({a});"]
    if isinstance(step, Divide):
        t = MPI_TYPES[step.dtype][0]
        return [
            f"{indent}for (long i = 0; i < {step.count}; i++) (({t} *)S[{step.slot}])[i] /= {step.by};"
        ]
    if isinstance(step, OnRoot):
        out = [f"{indent}if (comm_rank[{step.comm}] == {step.root}) {{"]
        for s in step.then:
            out += _lines(s, indent + "  ")
        if step.other:
            out.append(f"{indent}}} else {{")
            for s in step.other:
                out += _lines(s, indent + "  ")
        return [*out, f"{indent}}}"]
    assert isinstance(step, Mpi)
    return [indent + _mpi(step)]


def emit_driver(plan: DriverPlan) -> str:
    """The driver's C source: `dlpc_comm_check`, `dlpc_comm_init` and
    `dlpc_comm_step(S, overlap)` (overlap 0: each Iallreduce a blocking MPI_Allreduce);
    `dlpc_main(S)` is the overlapped step (the entry every dlpc library exports)."""
    sizes = [
        f"#define DLPC_SEGMENTS {max(plan.segments, 1)}",
        f"#define DLPC_COMMS {max(plan.comms, 1)}",
        f"#define DLPC_REQUESTS {max(plan.requests, 1)}",
    ]
    head = [c_comment("generated by dlpc (C backend): comm driver; do not edit"), *sizes]
    body = ["int dlpc_comm_step(void **S, int overlap) {", "  dlpc_comm_segment = -1;"]
    for k, step in enumerate(plan.steps):
        if k < len(plan.notes) and plan.notes[k]:
            body.append("  " + c_comment(plan.notes[k]))
        body += _lines(step, "  ")
    body += ["  return 0;", "}", "", "int dlpc_main(void **S) { return dlpc_comm_step(S, 1); }"]
    return "\n".join([*head, "#include <stdio.h>", PRELUDE, *body]) + "\n"
