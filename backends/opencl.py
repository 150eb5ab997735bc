"""OpenCL backend: OpenCL C kernels from the loop level, one per `loop.kernel`.

Input: a loop-level module (`func.func @main` with `loop.kernel`s, `memref`, `arith`,
`math`, `scf.if`), in the calling convention of docs/architecture.md.
Output: one OpenCL C program; the host side (`runtime/opencl_rt.py`) walks `@main`,
allocates device buffers and enqueues each kernel with the NDRange recorded here.

Mapping (`plan_launch`):
- the leading `parallel` loops of a kernel's nest (extent-1 loops in between are
  fixed) become NDRange dimensions, at most three: `i = lb + step * get_global_id(d)`;
  a kernel with no parallel loop runs as one work-item;
- cache stages become `__local` memory: when the body of a mapped parallel loop G holds
  local buffers (`cache_read`/`cache_write` stages), their copy nests and one inner
  parallel loop L, then G is the work-group index and L the local index
  (`get_group_id`/`get_local_id`, local size = L's extent), the stages are `__local`
  arrays, copy nests are shared among the group's work-items, with `barrier()`s between
  copy-in, compute and copy-out;
- other kernel-local buffers are private arrays; 0-d ones are scalars.

    /* kernel "relu_0" (from graph.relu): global (4), local (-) */
    __kernel void kernel_relu_0(__global const float *restrict v_x, __global float *restrict v_out0)
    {
      const long v_i0 = get_global_id(0);
      for (long v_i1 = 0; v_i1 < 8; v_i1++) { ... }
    }

Every name from the IR becomes an identifier through `backends/names.py` (the `v_` and
`kernel_` prefixes meet no OpenCL C keyword, builtin function or macro).

`emit_opencl(module) -> str`; `plan_launch(kernel) -> Launch`; `OpenCLTarget` registers
`dlpc-opt -t opencl`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import IO

from xdsl.context import Context
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.utils.target import Target

from dlpc.backends import c as cbe
from dlpc.backends.c import Buffer, FunctionWriter, c_type
from dlpc.backends.names import Scope, c_comment
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import ForOp, KernelOp, spine

PRELUDE = (
    """\
typedef long int64_t;
typedef ulong uint64_t;
typedef int int32_t;
typedef uint uint32_t;
typedef short int16_t;
typedef ushort uint16_t;
typedef char int8_t;
typedef uchar uint8_t;
#define INT64_C(x) x##L
"""
    + cbe.SCALAR_HELPERS
)
# the C backend spells float math with the libm `f` suffix; OpenCL C overloads one name
_RENAMED = {"nearbyint": "rint"}
MATH_MACROS = (
    "\n".join(
        f"#define {name}f {_RENAMED.get(name, name)}"
        for name in sorted({*cbe.MATH_UNARY.values(), *cbe.MATH_BINARY.values(), "fma"})
    )
    + "\n#define nearbyint rint\n"
)


@dataclass
class Launch:
    """How one kernel is enqueued: NDRange and the loops mapped onto it."""

    name: str  # the OpenCL kernel function name
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    mapped: dict[ForOp, str] = field(default_factory=dict)  # loop -> id expression
    shared: list[SSAValue] = field(default_factory=list)  # cache stages in __local memory
    cooperative: list[ForOp] = field(default_factory=list)  # copy nests split over the group
    barrier_before: set[Operation] = field(default_factory=set)
    args: list[SSAValue] = field(default_factory=list)  # buffers from @main, in order


def _local_stage_plan(g: ForOp):
    """(stages, copy nests, inner parallel loop) if G's body has the cache-stage shape."""
    stages, copies, inner = [], [], None
    for op in g.block.ops:
        if isinstance(op, memref.AllocaOp | memref.AllocOp) and op.memref.type.get_shape():
            stages.append(op.memref)
        elif isinstance(op, arith.ConstantOp | memref.DeallocOp):
            continue
        elif isinstance(op, ForOp) and op.parallel is not None and inner is None:
            inner = op
        elif isinstance(op, ForOp):
            copies.append(op)
        else:
            return None
    if not stages or inner is None:
        return None
    for c in copies:  # a copy nest moves data between a stage and a global buffer only
        touched = {o.memref for o in c.walk() if isinstance(o, memref.LoadOp | memref.StoreOp)}
        if not touched & set(stages):
            return None
    return stages, copies, inner


def plan_launch(kernel: KernelOp, fname: str, max_group: int = 256) -> Launch:
    nest = spine(kernel)
    dims: list[ForOp] = []
    for loop in nest:
        if loop.trip_count == 1 and loop.parallel is None:
            continue
        if loop.parallel is None or len(dims) == 3:
            break
        dims.append(loop)
    if not dims:
        return Launch(fname, (1,), None)
    launch = Launch(fname, tuple(lp.trip_count for lp in dims), None)
    last = dims[-1]
    staged = _local_stage_plan(last) if len(dims) < 3 else None
    if staged is not None and staged[2].trip_count <= max_group:
        stages, copies, inner = staged
        d = len(dims) - 1
        for k, lp in enumerate(dims[:-1]):
            launch.mapped[lp] = f"get_global_id({k})"
        launch.mapped[last] = f"get_group_id({d})"
        launch.mapped[inner] = f"get_local_id({d})"
        ls = inner.trip_count
        launch.global_size = (*launch.global_size[:-1], last.trip_count * ls)
        launch.local_size = (*([1] * d), ls)
        launch.shared = stages
        launch.cooperative = copies
        ops = list(last.block.ops)
        launch.barrier_before = {op for op in ops if op is inner or op in copies}
        return launch
    for k, lp in enumerate(dims):
        launch.mapped[lp] = f"get_global_id({k})"
    return launch


class KernelWriter(FunctionWriter):
    """An OpenCL kernel body (C syntax, OpenCL address spaces and work-item ids)."""

    def __init__(self, emitter, names: Scope, what: str, launch: Launch):
        super().__init__(emitter, names, what)
        self.launch = launch

    def op(self, op: Operation) -> None:
        if isinstance(op, ForOp):
            return self.for_(op)
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            return self.private(op)
        if isinstance(op, memref.DeallocOp):
            return None
        return super().op(op)

    def private(self, op) -> None:
        if op.memref in self.launch.shared:
            return None  # declared `__local` at the top of the kernel
        shape, elt = cbe.memref_info(op.memref.type)
        t = c_type(elt)
        name = self.names.fresh(op.memref.name_hint, "buf")
        if not shape:
            self.line(f"{t} {name};")
            self.buffers[op.memref] = Buffer(name, shape, scalar=True)
            return None
        self.line(f"{t} {name}[{max(math.prod(shape), 1)}];")
        self.buffers[op.memref] = Buffer(name, shape)
        return None

    def for_(self, op: ForOp) -> None:
        if op in self.launch.barrier_before and self.launch.local_size is not None:
            self.line("barrier(CLK_LOCAL_MEM_FENCE);")
        iv = self.names.fresh(op.loop_name or op.induction_var.name_hint, "i")
        self.expr[op.induction_var] = iv
        if op in self.launch.mapped:
            gid = self.launch.mapped[op]
            expr = (
                gid
                if (op.lower, op.stride) == (0, 1)
                else f"{op.lower} + {op.stride} * (long){gid}"
            )
            self.line(f"const long {iv} = (long){expr};")
            self.block(op.block)
            return
        lid = self.launch.local_size[-1] if self.launch.local_size else 1
        if op in self.launch.cooperative:  # split the copy's outer loop over the group
            lid_expr = f"(long)get_local_id({len(self.launch.local_size) - 1})"
            start = (
                lid_expr
                if (op.lower, op.stride) == (0, 1)
                else f"{op.lower} + {op.stride} * {lid_expr}"
            )
            self.line(f"for (long {iv} = {start}; {iv} < {op.upper}; {iv} += {op.stride * lid}) {{")
        else:
            step = f"{iv}++" if op.stride == 1 else f"{iv} += {op.stride}"
            self.line(f"for (long {iv} = {op.lower}; {iv} < {op.upper}; {step}) {{")
        self.depth += 1
        self.block(op.block)
        self.depth -= 1
        self.line("}")


class OpenCLEmitter:
    def __init__(self, module: ModuleOp):
        self.module = module
        self.top = Scope()
        self.launches: dict[KernelOp, Launch] = {}
        self.parts: list[str] = []

    def emit(self) -> str:
        main = cbe.find_main(self.module)
        out = [c_comment("generated by dlpc (OpenCL backend); do not edit"), PRELUDE, MATH_MACROS]
        for k in (op for op in main.walk() if isinstance(op, KernelOp)):
            self.kernel(k)
        if any("double" in part for part in self.parts):  # f64 models need the extension
            out.insert(1, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        return "\n".join([*out, *self.parts])

    def kernel(self, k: KernelOp) -> None:
        fname = self.top.fresh(k.sym, kind="kernel")
        launch = plan_launch(k, fname)
        self.launches[k] = launch
        free, stored = cbe.kernel_uses(k)
        w = KernelWriter(self, Scope(self.top.used), f"kernel '{k.sym}'", launch)
        params = []
        for k_arg, v in enumerate(free):
            if not isinstance(v.type, MemRefType):
                raise DlpcError(
                    f"error: opencl backend: kernel '{k.sym}' uses scalar {v} from outside"
                )
            shape, elt = cbe.memref_info(v.type)
            name = w.names.fresh(v.name_hint, f"arg{k_arg}")
            w.buffers[v] = Buffer(name, shape)
            const = "" if v in stored else "const "
            params.append(f"__global {const}{c_type(elt)} *restrict {name}")
            launch.args.append(v)
        for stage in launch.shared:
            shape, elt = cbe.memref_info(stage.type)
            name = w.names.fresh(stage.name_hint, "stage")
            w.line(f"__local {c_type(elt)} {name}[{max(math.prod(shape), 1)}];")
            w.buffers[stage] = Buffer(name, shape)
        w.block(k.block)
        local = "(" + ", ".join(map(str, launch.local_size)) + ")" if launch.local_size else "(-)"
        note = (
            cbe.kernel_note(k)
            + f": global ({', '.join(map(str, launch.global_size))}), local {local}"
        )
        self.parts.append(
            w.function(c_comment(note), f"__kernel void {fname}({', '.join(params) or 'void'})")
        )


def emit_opencl(module: ModuleOp) -> str:
    """The OpenCL C program for a loop-level module (see the module docstring)."""
    return OpenCLEmitter(module).emit()


@dataclass(frozen=True)
class OpenCLTarget(Target):
    """`dlpc-opt -t opencl`: print the OpenCL C kernels of a loop-level module."""

    name = "opencl"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(emit_opencl(module))
