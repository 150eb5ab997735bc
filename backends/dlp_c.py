"""DLP C backend: BANG-style C from the dlp level, runnable on the simulator.

Input: a module after `loop-to-dlp` (`dlp.kernel`s inside `func.func @main`, with
`scf`, `arith`, `math`, `memref` over GDRAM/SRAM/NRAM/WRAM buffers).
Output: one C translation unit:

    /* kernel "linear_relu_0" (from graph.linear) */
    __mlu_entry__ void kernel_linear_relu_0(const float *v_x, const float *v_fc1_weight, float *v_linear_relu)
    {
      __nram__ float *v_x_nram = (float *)(__nram_base + 0);  /* 784 x f32 */
      __wram__ float *v_fc1_weight_wram = (float *)(__wram_base + 0);  /* 12544 x f32 */
      __dlp_reserve(DLP_NRAM, 3328);
      ...
      __memcpy(v_fc1_weight_wram, v_fc1_weight + base, count * sizeof(float), GDRAM2WRAM);
      __bang_matmul(v_out_nram, v_x_nram, v_fc1_weight_wram, 1, 784, n, 1);
      __bang_active_relu(v_out_nram, v_out_nram, n);
      __memcpy(v_linear_relu + base, v_out_nram, n * sizeof(float), NRAM2GDRAM);
    }

    int dlpc_main(void **args) { ... __dlp_launch("linear_relu_0", "graph.linear", 16, 1, ...); }

- memory-space qualifiers `__nram__`, `__wram__`, `__mlu_shared__`; scratchpad buffers
  are placed by the emitter at fixed offsets of their space (a static memory plan) and
  the plan's size is checked against the capacity (`__dlp_reserve`), and each buffer is
  registered (`__dlp_scratch`) so that the simulator checks every operand against the
  buffer it points into;
- `__memcpy(dst, src, bytes, DIR)` / `__memcpy_async` + `__sync_io()`, `__bang_*`
  intrinsics, `taskId`/`clusterId`/`coreId`, `__sync_cluster()`/`__sync_all()`;
- the target's facts are `#define`d at the top (`DLP_NRAM_BYTES`, `DLP_TP_add`, ...)
  so the simulator header (`runtime/dlp_sim.h`) enforces the same description;
- scalar loops count their operations (`__dlp_scalar_ops(k)`) for the time model;
- names come from the model through `backends/names.py` (`fc1.weight` ->
  `v_fc1_weight`, kernel `relu_0` -> `kernel_relu_0`); each kernel carries a comment
  naming the graph op it came from.

`emit_dlp_c(module, desc) -> str`; `DlpCTarget` registers it as `dlpc-opt -t dlp-c`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.utils.target import Target

from dlpc.backends import c as cbe
from dlpc.backends.c import Buffer, CEmitter, FunctionWriter, c_type
from dlpc.backends.names import Scope, c_comment, c_string
from dlpc.diagnostics import DlpcError
from dlpc.dialects import dlp
from dlpc.dialects.typed import element_type
from dlpc.targets.dlp import KNOWN_INTRINSICS, DlpTarget, resolve

INTRINSICS = {
    dlp.AddOp: "__bang_add", dlp.SubOp: "__bang_sub", dlp.MulOp: "__bang_mul",
    dlp.MaxOp: "__bang_maxequal", dlp.MinOp: "__bang_minequal", dlp.DivOp: "__bang_div",
    dlp.AddScalarOp: "__bang_add_scalar", dlp.MulScalarOp: "__bang_mul_scalar",
    dlp.MaxScalarOp: "__bang_maxeq_scalar", dlp.CycleAddOp: "__bang_cycle_add",
    dlp.CycleSubOp: "__bang_cycle_sub", dlp.CycleMulOp: "__bang_cycle_mul",
    dlp.ReluOp: "__bang_active_relu", dlp.SigmoidOp: "__bang_active_sigmoid",
    dlp.TanhOp: "__bang_active_tanh", dlp.ExpOp: "__bang_active_exp",
    dlp.LogOp: "__bang_active_log", dlp.SqrtOp: "__bang_active_sqrt",
    dlp.ReduceSumOp: "__bang_reduce_sum", dlp.ReduceMaxOp: "__bang_reduce_max",
    dlp.TransposeOp: "__bang_transpose", dlp.MatmulOp: "__bang_matmul", dlp.Conv2dOp: "__bang_conv",
    dlp.PoolOp: "__bang_maxpool",  # or __bang_sumpool, by mode
}  # fmt: skip
SPACE_MACRO = {"nram": "DLP_NRAM", "wram": "DLP_WRAM", "sram": "DLP_SRAM"}
QUALIFIER = {"nram": "__nram__", "wram": "__wram__", "sram": "__mlu_shared__"}
SCALAR_COST = ("arith.", "math.", "memref.load", "memref.store")


def target_macros(desc: DlpTarget) -> str:
    lines = [
        f"#define DLP_CLUSTERS {desc.clusters}",
        f"#define DLP_CORES_PER_CLUSTER {desc.cores_per_cluster}",
        f"#define DLP_NRAM_BYTES {desc.nram_bytes}",
        f"#define DLP_WRAM_BYTES {desc.wram_bytes}",
        f"#define DLP_SRAM_BYTES {desc.sram_bytes}",
        f"#define DLP_DMA_ALIGN {desc.dma_align}",
        f"#define DLP_DMA_QUEUE_DEPTH {desc.dma_queue_depth}",
        f"#define DLP_VECTOR_ALIGN {desc.vector_align}",
    ]
    # macro names from dlpc's own list, numbers checked finite when the description was made
    lines += [
        f"#define DLP_TP_{name} {float(desc.throughput(name))!r}"
        for name in KNOWN_INTRINSICS
        if desc.has_intrinsic(name)
    ]
    return "\n".join(lines)


class DlpFunctionWriter(FunctionWriter):
    """The C body of a dlp kernel (or of `dlpc_main`)."""

    def __init__(self, emitter: DlpCEmitter, names: Scope, what: str):
        super().__init__(emitter, names, what)
        self.emitter: DlpCEmitter = emitter

    def op(self, op: Operation) -> None:  # noqa: C901 - one dispatch table
        if isinstance(op, dlp.KernelOp):
            return self.emitter.call_dlp_kernel(self, op)
        if isinstance(op, scf.ForOp):
            return self.for_(op)
        if isinstance(op, scf.YieldOp):
            return None
        if isinstance(op, dlp.TaskIdOp | dlp.ClusterIdOp | dlp.CoreIdOp):
            builtin = {dlp.TaskIdOp: "taskId", dlp.ClusterIdOp: "clusterId", dlp.CoreIdOp: "coreId"}
            return self.bind(op.res, f"(int64_t){builtin[type(op)]}")
        if isinstance(op, dlp.SyncClusterOp):
            return self.line("__sync_cluster();")
        if isinstance(op, dlp.SyncAllOp):
            return self.line("__sync_all();")
        if isinstance(op, dlp.WaitDmaOp):
            return self.line("__sync_io();")
        if isinstance(op, dlp.MemcpyOp | dlp.MemcpyAsyncOp):
            fn = "__memcpy" if isinstance(op, dlp.MemcpyOp) else "__memcpy_async"
            t = c_type(element_type(op.dst))
            dst, src = self.at(op.dst, op.dst_offset), self.at(op.src, op.src_offset)
            return self.line(
                f"{fn}({dst}, {src}, {self[op.count]} * sizeof({t}), {op.direction.data.value});"
            )
        if isinstance(op, dlp.MemcpyStridedAsyncOp):  # BANG's strided form, bytes
            t = c_type(element_type(op.dst))
            dst, src = self.at(op.dst, op.dst_offset), self.at(op.src, op.src_offset)
            return self.line(
                f"__memcpy_async({dst}, {src}, {self[op.count]} * sizeof({t}), "
                f"{op.direction.data.value}, {self[op.dst_stride]} * sizeof({t}), "
                f"{self[op.src_stride]} * sizeof({t}), {self[op.segments]} - 1);"
            )
        if type(op) in INTRINSICS:  # (each a dlp vector op: the base of the intrinsics)
            assert isinstance(op, dlp.IntrinsicOp)
            return self.intrinsic(op)
        if isinstance(op, memref.AllocOp | memref.AllocaOp) and self.what != "@main":
            return self.scratchpad(op)
        if isinstance(op, memref.DeallocOp) and self.what == "@main":
            self.line(f"__dlp_gdram_release({self.buffer(op.memref).name});")
            return super().op(op)
        if (
            isinstance(op, memref.GetGlobalOp)
            or isinstance(op, memref.AllocOp)
            and self.what == "@main"
        ):
            super().op(op)
            shape, elt = cbe.memref_info(op.memref.type)
            return self.gdram(self.buffers[op.memref].name, shape, c_type(elt))
        return super().op(op)

    def gdram(self, name: str, shape: tuple[int, ...], t: str) -> None:
        """Register the host buffer `name` with the simulator as GDRAM."""
        self.line(f"__dlp_gdram({name}, {max(math.prod(shape), 1)} * sizeof({t}));")

    def at(self, buf: SSAValue, offset: SSAValue) -> str:
        name = self.buffer(buf).name
        off = self[offset]
        return name if off == "0" else f"{name} + {off}"

    def intrinsic(self, op: dlp.IntrinsicOp) -> None:
        fn = INTRINSICS[type(op)]
        args = [self.at(buf, off) for _, buf, off in op.buffer_operands()]
        if isinstance(op, dlp.Conv2dOp):
            args += [self[op.channels_out]] + [str(v) for v in op.param_values()]
        elif isinstance(op, dlp.PoolOp):
            fn = "__bang_maxpool" if op.mode.data == "max" else "__bang_sumpool"
            args += [self[op.channels]] + [str(v) for v in op.param_values()]
        else:
            args += [self[v] for v in op.trailing_operands()]
        if isinstance(op, dlp.MatmulOp):
            args.append("1" if op.transpose_rhs is not None else "0")
        self.line(f"{fn}({', '.join(args)});")

    def scratchpad(self, op: memref.AllocOp | memref.AllocaOp) -> None:
        ty = op.memref.type
        shape, elt = cbe.memref_info(ty)
        space = dlp.space_of(ty)
        t = c_type(elt)
        if not shape:  # a 0-d accumulator: a scalar register
            name = self.names.fresh(op.memref.name_hint, "acc")
            self.line(f"{t} {name};")
            self.buffers[op.memref] = Buffer(name, (), scalar=True)
            return
        if space == "gdram":
            raise DlpcError(f"error: dlp-c backend: GDRAM allocation inside {self.what}")
        offset = self.emitter.placement[op.memref]
        name = self.names.fresh(op.memref.name_hint, "buf")
        n = max(math.prod(shape), 1)
        self.line(
            f"{QUALIFIER[space]} {t} *{name} = ({t} *)(__{space}_base + {offset});  "
            f"{c_comment(f'{n} x {t}')}"
        )
        # the simulator checks each operand against the buffer it points into
        nbytes = math.prod(shape) * dlp.element_bytes(ty)
        self.line(f"__dlp_scratch({name}, {nbytes}, {c_string(name)});")
        self.buffers[op.memref] = Buffer(name, shape)

    def for_(self, op: scf.ForOp) -> None:
        iv = self.names.fresh(op.body.block.args[0].name_hint, "i")
        self.expr[op.body.block.args[0]] = iv
        step = self[op.step]
        inc = f"{iv}++" if step == "1" else f"{iv} += {step}"
        self.line(f"for (int64_t {iv} = {self[op.lb]}; {iv} < {self[op.ub]}; {inc}) {{")
        self.depth += 1
        cost = sum(
            1
            for o in op.body.block.ops
            if o.name.startswith(SCALAR_COST) and not isinstance(o, arith.ConstantOp)
        )
        if cost and self.what != "@main":
            self.line(f"__dlp_scalar_ops({cost});")
        self.block(op.body.block)
        self.depth -= 1
        self.line("}")


class DlpCEmitter(CEmitter):
    def __init__(self, module: ModuleOp, desc: DlpTarget):
        super().__init__(module)
        self.desc = desc
        self.placement: dict[SSAValue, int] = {}
        self.dlp_kernels: dict[dlp.KernelOp, str] = {}

    def emit(self) -> str:
        main = cbe.find_main(self.module)
        for k in (op for op in main.walk() if isinstance(op, dlp.KernelOp)):
            self.dlp_kernels[k] = self.top.fresh(k.sym, kind="kernel")
        globals_ = [
            self.global_(op) for op in self.module.body.block.ops if isinstance(op, memref.GlobalOp)
        ]
        body = self.main(main)
        head = [
            c_comment(f'generated by dlpc (DLP C backend, target "{self.desc.name}"); do not edit'),
            target_macros(self.desc),
            '#include "dlp_sim.h"',
            cbe.PRELUDE,
        ]
        return "\n".join([*head, *globals_, *self.parts, body])

    def main(self, fn: func.FuncOp) -> str:
        w = DlpFunctionWriter(self, Scope(self.top.used), "@main")
        arg_names = cbe.argument_names(fn)
        w.line("dlp_reset();")
        for _, _, name, shape, t in w.main_arguments(fn):
            w.gdram(name, shape, t)
        w.block(fn.body.block)
        w.free_heap()
        w.line("return 0;")
        header = c_comment(
            f"host entry point: {len(arg_names)} GDRAM arguments ({', '.join(arg_names)})"
        )
        return w.function(header, "int dlpc_main(void **args)")

    def plan_scratchpads(self, k: dlp.KernelOp) -> dict[str, int]:
        """Place every scratchpad buffer of `k` at a fixed, aligned offset of its space."""
        align = max(self.desc.dma_align, self.desc.vector_align)
        used = {"nram": 0, "wram": 0, "sram": 0}
        for op in k.walk():
            if isinstance(op, memref.AllocOp | memref.AllocaOp):
                ty = op.memref.type
                space = dlp.space_of(ty)
                shape = ty.get_shape()
                if not shape or space == "gdram":
                    continue
                self.placement[op.memref] = used[space]
                nbytes = math.prod(shape) * dlp.element_bytes(ty)
                used[space] += -(-nbytes // align) * align
        return used

    def call_dlp_kernel(self, caller: FunctionWriter, k: dlp.KernelOp) -> None:
        free, stored = cbe.kernel_uses(k, _dlp_writes)
        fname = self.dlp_kernels[k]
        w = DlpFunctionWriter(self, Scope(self.top.used), f"kernel '{k.sym}'")
        params, field_names, call_args = [], [], []
        for v in free:
            prefix, name, arg = w.parameter(caller, v, v in stored)
            params.append(prefix + name)
            field_names.append(name)
            call_args.append(arg)
        fields = [f"{p};" for p in params]
        used = self.plan_scratchpads(k)
        for space, nbytes in used.items():
            if nbytes:
                w.line(f"__dlp_reserve({SPACE_MACRO[space]}, {nbytes});")
        w.block(k.block)
        origin = k.origin.data if k.origin is not None else None
        note = cbe.kernel_note(k)
        plan = ", ".join(f"{s} {b} bytes" for s, b in used.items() if b)
        fused = k.attributes.get("dlpc.fused")  # a chain loop-to-dlp made one kernel
        header = c_comment(
            f"{note}: {k.num_tasks} tasks"
            + (f"; {plan}" if plan else "")
            + ("; double-buffered" if k.double_buffered is not None else "")
            + (f"; fuses {fused.data}" if isinstance(fused, StringAttr) else "")
        )
        # kernel_X, task_X and args_X: unique as kernel_X is (names.KINDS prefixes)
        task, args = (f"{kind}_{fname.removeprefix('kernel_')}" for kind in ("task", "args"))
        struct = (
            f"struct {args} {{ {' '.join(fields) or 'int unused;'} }};\n"
            f"static void {task}(void *p)\n{{\n"
            f"  struct {args} *a = (struct {args} *)p;\n"
            f"  {fname}({', '.join(f'a->{n}' for n in field_names)});\n}}\n"
        )
        self.parts.append(
            w.function(header, f"__mlu_entry__ void {fname}({', '.join(params) or 'void'})")
            + struct
        )
        origin_lit = c_string(origin or "")
        dbl = 1 if k.double_buffered is not None else 0
        var = caller.names.fresh(k.sym, kind="args")
        caller.line("{")
        caller.line(f"  struct {args} {var} = {{{', '.join(call_args) or '0'}}};")
        caller.line(
            f"  int rc = __dlp_launch({c_string(k.sym)}, {origin_lit}, {k.num_tasks}, {dbl}, "
            f"{task}, &{var});"
        )
        caller.line("  if (rc) return rc;")
        caller.line("}")


def _dlp_writes(op: Operation) -> SSAValue | None:
    """The buffer a dlp-level op stores into (a `memref.store` or a copy's destination)."""
    if isinstance(op, memref.StoreOp):
        return op.memref
    if isinstance(op, dlp.MemcpyOp | dlp.MemcpyAsyncOp | dlp.MemcpyStridedAsyncOp):
        return op.dst
    return None


def module_target(module: ModuleOp) -> DlpTarget:
    """The description `loop-to-dlp` recorded on @main (`dlpc.target_desc`), else the default."""
    attr = next(
        (f.attributes.get("dlpc.target_desc") for f in module.walk() if isinstance(f, func.FuncOp)),
        None,
    )
    return resolve(attr.data if isinstance(attr, StringAttr) and attr.data else None)


def emit_dlp_c(module: ModuleOp, desc: DlpTarget | str | None = None) -> str:
    """BANG-style C for a dlp-level module, or a loop-level one (lowered with
    `loop-to-dlp` first); `desc` defaults to the description the module was lowered for."""
    module = lower_to_dlp(module, desc)
    return DlpCEmitter(module, resolve(desc) if desc is not None else module_target(module)).emit()


@dataclass(frozen=True)
class DlpCTarget(Target):
    """`dlpc-opt -t dlp-c` (or `-t 'dlp-c{target-desc=tiny}'`): print DLP C."""

    name = "dlp-c"
    target_desc: str = ""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(emit_dlp_c(module, self.target_desc or None))


def lower_to_dlp(module: ModuleOp, desc: DlpTarget | str | None = None, **options) -> ModuleOp:
    """A dlp-level copy of `module`: loop-level modules go through `loop-to-dlp`
    (`options`: double_buffer, multicore, intrinsics); dlp-level ones are returned as is."""
    from dlpc.dialects.loop import KernelOp
    from dlpc.passes.lower.loop_to_dlp import lower_module

    if not any(isinstance(op, KernelOp) for op in module.walk()):
        return module
    lowered = module.clone()
    lower_module(
        lowered, resolve(desc), target_desc=desc if isinstance(desc, str) else "", **options
    )
    lowered.verify()
    return lowered
