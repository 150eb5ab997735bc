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

Files, one concept each: `prelude.py` (the program's opening text), `indices.py` (index
expressions against a loop variable), `guards.py` (padding guards), `lanes.py` (register
blocking by vector width), `launch.py` (NDRange, `__local` stages: `plan_launch`),
`kernel_writer.py` (one kernel's OpenCL C), `chains.py` (chains and teams), `winograd.py`
(the fused Winograd kernel), `emitter.py` (the program, `emit_opencl`, `OpenCLTarget`).
The emitter only prints: the target's rewrites of the IR are passes
(`pipeline.TARGET_PASSES["opencl"]`).
"""

from __future__ import annotations

from dlpc.backends.opencl.chains import (
    MAX_CHAIN_ARGS,
    MAX_SPLIT_RESIDENT,
    SPLIT_GROUPS_PER_UNIT,
    TEAM_CHUNKS,
    TEAM_COUNTERS,
    TEAM_GO,
    TEAM_HELPED,
    TEAM_IDLE,
    TEAM_JOINED,
    TEAM_RESULT,
    TEAM_SEEN,
    TEAM_STALE,
    TEAM_STARTED,
    TEAM_VERSION,
    Chain,
    ChainWriter,
    batch_split,
    team_sync_words,
)
from dlpc.backends.opencl.emitter import (
    OpenCLEmitter,
    OpenCLTarget,
    emit_opencl,
)
from dlpc.backends.opencl.guards import (
    Guards,
    padding_guards,
)
from dlpc.backends.opencl.indices import (
    AFFINE_OPS,
    affine_index,
    depends_on,
    varies_with,
)
from dlpc.backends.opencl.kernel_writer import (
    KernelWriter,
    LaneMap,
    PermutedBuffer,
    contracted,
)
from dlpc.backends.opencl.lanes import (
    CONTIGUOUS_WIDTHS,
    INNER_LANES,
    LANES_8,
    LANES_16,
    LANES_16_SHORT,
    MAPPED_LANES,
    MASKED_WIDTHS,
    MAX_LANE_BUFFER,
    MAX_LANE_OPS,
    MAX_LANES,
    PARTIAL_IDENTITY,
    PARTIAL_LANES,
    RAGGED_WASTE,
    SHORT_PADDED,
    VECTOR_BINARY,
    VECTOR_MACRO,
    VECTOR_MATH,
    VECTOR_WIDTHS,
    WIDE_LANES,
    WIDE_MAPPED,
    WIDE_TILE,
    LaneProfile,
    accumulators,
    clampable,
    independent,
    lane_profile,
    partial_vector,
    plan_lanes,
    plan_vector,
)
from dlpc.backends.opencl.launch import (
    LONG_REDUCTION,
    Launch,
    plan_launch,
    plan_relayout,
    resident_values,
)
from dlpc.backends.opencl.prelude import (
    ERF,
    FLOATS,
    MATH_MACROS,
    OWN_F32,
    PRELUDE,
)
from dlpc.backends.opencl.winograd import (
    fused_source,
    fused_spec_of,
    write_fused,
)

__all__ = [
    "ERF",
    "FLOATS",
    "MATH_MACROS",
    "OWN_F32",
    "PRELUDE",
    "AFFINE_OPS",
    "affine_index",
    "depends_on",
    "varies_with",
    "Guards",
    "padding_guards",
    "CONTIGUOUS_WIDTHS",
    "INNER_LANES",
    "LANES_16",
    "LANES_16_SHORT",
    "LANES_8",
    "LaneProfile",
    "MAPPED_LANES",
    "MASKED_WIDTHS",
    "MAX_LANES",
    "MAX_LANE_BUFFER",
    "MAX_LANE_OPS",
    "PARTIAL_IDENTITY",
    "PARTIAL_LANES",
    "RAGGED_WASTE",
    "SHORT_PADDED",
    "VECTOR_BINARY",
    "VECTOR_MACRO",
    "VECTOR_MATH",
    "VECTOR_WIDTHS",
    "WIDE_LANES",
    "WIDE_MAPPED",
    "WIDE_TILE",
    "accumulators",
    "clampable",
    "independent",
    "lane_profile",
    "partial_vector",
    "plan_lanes",
    "plan_vector",
    "LONG_REDUCTION",
    "Launch",
    "plan_launch",
    "plan_relayout",
    "resident_values",
    "KernelWriter",
    "LaneMap",
    "PermutedBuffer",
    "contracted",
    "Chain",
    "ChainWriter",
    "MAX_CHAIN_ARGS",
    "MAX_SPLIT_RESIDENT",
    "SPLIT_GROUPS_PER_UNIT",
    "TEAM_CHUNKS",
    "TEAM_COUNTERS",
    "TEAM_GO",
    "TEAM_HELPED",
    "TEAM_IDLE",
    "TEAM_JOINED",
    "TEAM_RESULT",
    "TEAM_SEEN",
    "TEAM_STALE",
    "TEAM_STARTED",
    "TEAM_VERSION",
    "batch_split",
    "team_sync_words",
    "fused_source",
    "fused_spec_of",
    "write_fused",
    "OpenCLEmitter",
    "OpenCLTarget",
    "emit_opencl",
]
