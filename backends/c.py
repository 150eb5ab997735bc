"""C backend: emit portable C (OpenMP + SIMD pragmas) from the loop level.

Input: a module holding `func.func @main` at the loop level (`loop`, `memref`, `arith`,
`math`, `scf.if`), in the calling convention of docs/architecture.md.
Output: one C translation unit:

    /* kernel "relu_0" (from graph.relu) */
    __attribute__((noinline)) static void kernel_relu_0(const float *restrict v_x, float *restrict v_out0)
    {
      #pragma omp parallel for
      for (int64_t v_i0 = 0; v_i0 < 4; v_i0++) {
        #pragma omp simd
        for (int64_t v_i1 = 0; v_i1 < 8; v_i1++) {
          const float v_v = v_x[v_i0 * 8 + v_i1];
          const float v_r = DLPC_MAXIMUMF(v_v, 0.0f);
          v_out0[v_i0 * 8 + v_i1] = v_r;
        }
      }
    }

    int dlpc_main(void **args)
    {
      float *v_x = (float *)args[0];
      float *v_out0 = (float *)args[1];
      kernel_relu_0(v_x, v_out0);
      return 0;
    }

- one `static void` function per `loop.kernel`, taking the buffers (and scalars) it uses
  from outside, `restrict`-qualified, `const` when the kernel never stores to them;
  `noinline` (KERNEL_ATTRIBUTES), so the DLPC_PROFILE build compiles every kernel as the
  plain build does;
- `int dlpc_main(void **args)`: `args` are the data pointers of the memref arguments of
  `@main` in order (inputs, params, outputs); returns 0, or 1 if an allocation failed;
- resident pre-packed weights (passes/lower/prepack.py): when @main has a
  `memref.alloc {dlpc.packed}`, that block is one more pointer, `args[N]` after @main's N
  arguments, owned by the runtime (`dlpc_packed_bytes` bytes, `dlpc_num_args` = N); the
  `dlpc.prepare` kernels fill it in `int dlpc_prepare(void **args)` (same `args`: only the
  params and the block are read), which the runtime calls once per binding of the
  weights; `dlpc_main` skips them and reads the block;
- annotations: `parallel` -> `#pragma omp parallel for`, `vectorize` -> `#pragma omp simd`
  (on a reduction loop `#pragma omp simd reduction(+:acc)` when its accumulator update
  is recognised, `#pragma GCC ivdep` otherwise), `unroll = N` -> `#pragma GCC unroll N`;
- one OpenMP region per call where @main's kernels allow it (`team_region`): on a team
  of more than one thread, `dlpc_main` runs its kernels in `#pragma omp parallel`, each
  kernel whose parallel loop the team shares as a copy (`kernel_X_team`, the loop an
  `omp for`), each serial kernel in `omp single`; on one thread the calls as above;
- memrefs are row-major and contiguous; a 0-d `memref.alloca` inside a kernel is a scalar
  local (the reduction accumulator), other allocations inside kernels are stack arrays
  (heap above 64 KiB; if that fails the kernel returns 1 to `dlpc_main`, or aborts with
  a message inside an OpenMP loop; a heap `alloca` is freed where its block ends);
  allocations in `@main` are heap buffers (`dlpc_main` returns 1 if one fails);
- every name from the IR becomes an identifier through `backends/names.py` (`v_x`,
  `kernel_relu_0`, `g_cst`: a prefix no macro, keyword or libc name has), and comments
  and strings go through its escapers, so no model text reaches the C source unfiltered
  (docs/security.md).

`emit_c(module) -> str` is the entry point; `CTarget` registers it as `dlpc-opt -t c`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf, vector
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    Signedness,
    StringAttr,
    VectorType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.target import Target

from dlpc.backends.names import Scope, c_comment, c_string
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import ForOp, KernelOp, NamedKernelSyntax, defined_inside
from dlpc.dialects.sizes import size_error
from dlpc.passes.lower.memory_plan import ALIGN
from dlpc.passes.schedule._common import TEAM_LOOP
from dlpc.passes.schedule.slide import CPP_IF

ARENA = "dlpc.arena"  # the memory plan's arena alloc in @main (passes/lower/memory_plan.py)
PACKED = "dlpc.packed"  # the resident packed weights in @main (passes/lower/prepack.py)
PREPARE = "dlpc.prepare"  # a kernel filling them: in dlpc_prepare, not dlpc_main

# ------------------------------------------------------------------------ types


def c_type(ty: Attribute) -> str:
    if isinstance(ty, Float32Type):
        return "float"
    if isinstance(ty, Float64Type):
        return "double"
    if isinstance(ty, Float16Type):
        return "_Float16"
    if isinstance(ty, IndexType):
        return "int64_t"
    if isinstance(ty, VectorType) and ty.get_shape() == (16,) and ty.element_type == f32:
        return "dlpc_v16f"
    if isinstance(ty, IntegerType):
        width = ty.width.data
        if width == 1:
            return "bool"
        if width in (8, 16, 32, 64):  # ui8 ... ui64 (ONNX's unsigned types): uint8_t ...
            unsigned = ty.signedness.data == Signedness.UNSIGNED
            return f"{'u' if unsigned else ''}int{width}_t"
    raise DlpcError(f"error: c backend: unsupported type {ty}")


def _is_int(ty: Attribute) -> bool:
    return isinstance(ty, IntegerType) and ty.width.data > 1


def _unsigned(ty: Attribute) -> str:
    t = c_type(ty)
    return t if t == "bool" or t.startswith("u") else f"u{t}"


def _wide_unsigned(ty: Attribute) -> str:
    """The unsigned C type an integer `ty`'s arithmetic wraps in: uint64_t for 64 bits,
    else uint32_t (a narrower unsigned type is promoted to int, where 65535 * 65535
    overflows); converting the result back to `ty` keeps its low bits."""
    return "uint64_t" if c_type(ty) in ("int64_t", "uint64_t") else "uint32_t"


def _nonzero_constant(v: SSAValue) -> bool:
    """v is an integer constant other than 0 (a division by it needs no guard)."""
    op = v.owner
    return (
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, IntegerAttr)
        and op.value.value.data != 0
    )


def _no_signed_wrap(op: Operation, t: str) -> bool:
    """An `overflow<nsw>` add/sub/mul of a signed C type: its producer guarantees the
    result in range (quant_to_te's 8-bit products), so plain signed C is defined, and
    GCC vectorizes it where the uint32_t form of a widened product it did not."""
    flags = op.properties.get("overflowFlags")
    return (
        t.startswith("int")
        and isinstance(flags, arith.IntegerOverflowAttr)
        and (arith.IntegerOverflowFlag.NSW in flags.data)
    )


def _wraps_unsigned(ty: Attribute) -> bool:
    """Whether integer add/sub/mul on `ty` are printed through `_wide_unsigned` (`WRAPPING`):
    every data integer type but uint32_t and uint64_t, which wrap as they are."""
    return _is_int(ty) and c_type(ty) not in ("uint32_t", "uint64_t")


def memref_info(ty: Attribute) -> tuple[tuple[int, ...], Attribute]:
    if not isinstance(ty, MemRefType):
        raise DlpcError(f"error: c backend: expected a memref, got {ty}")
    shape = tuple(ty.get_shape())
    if any(d < 0 for d in shape):
        raise DlpcError(f"error: c backend: dynamic memref {ty} is not supported")
    if not isinstance(ty.layout, NoneAttr):
        raise DlpcError(f"error: c backend: memref {ty} has a non-identity layout")
    too_big = size_error(shape, ty.get_element_type())
    if too_big:  # (loop IR given directly: its index arithmetic must not overflow either)
        raise DlpcError(f"error: c backend: memref{too_big.removeprefix('tensor')}")
    return shape, ty.get_element_type()


def float_literal(value: float, ty: Attribute) -> str:
    if math.isnan(value):
        text = "NAN"
    elif math.isinf(value):
        text = "INFINITY" if value > 0 else "(-INFINITY)"
    else:
        text = repr(float(value))  # (always with a "." or an exponent: a double literal)
        text += "f" if isinstance(ty, Float32Type | Float16Type) else ""
        if value < 0:
            text = f"({text})"
    if isinstance(ty, Float16Type):
        return f"((_Float16){text})"
    return text


def int_literal(value: int, ty: Attribute) -> str:
    """`value` as a C literal of `ty`'s C type; a value beyond the type (IR written by hand:
    `arith.constant 99999999999999999999999 : index`) is an error, never C that wraps.
    An integer attribute may hold a signless value in its unsigned form (255 : i8 is -1)."""
    if c_type(ty) == "bool":
        return "true" if value else "false"
    width = ty.width.data if isinstance(ty, IntegerType) else 64
    if not -(2 ** (width - 1)) <= value < 2**width:
        raise DlpcError(f"error: c backend: integer constant {value} does not fit {ty}")
    if value >= 2 ** (width - 1):
        value -= 2**width
    if value == -(2**63):  # (-9223372036854775808 would negate a literal beyond int64;
        return "(INT64_C(-9223372036854775807) - 1)"  # OpenCL C has no INT64_MIN)
    text = str(value) if -(2**31) < value < 2**31 else f"INT64_C({value})"
    return f"({text})" if value < 0 else text


# ------------------------------------------------------------------ op tables

BINARY = {
    "arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/",
    "arith.addi": "+", "arith.subi": "-", "arith.muli": "*", "arith.divsi": "/",
    "arith.remsi": "%", "arith.andi": "&", "arith.ori": "|", "arith.xori": "^",
    "arith.shli": "<<", "arith.shrsi": ">>",
}  # fmt: skip
# data integer add/sub/mul, printed in `_wide_unsigned` and converted back: they wrap as
# ONNX says, without C's undefined signed overflow (`index` arithmetic stays plain)
WRAPPING = ("arith.addi", "arith.subi", "arith.muli")
UNSIGNED_BINARY = {"arith.divui": "/", "arith.remui": "%", "arith.shrui": ">>"}
MACRO_BINARY = {
    "arith.maximumf": "DLPC_MAXIMUMF", "arith.minimumf": "DLPC_MINIMUMF",
    "arith.maxsi": "DLPC_MAX", "arith.minsi": "DLPC_MIN",
    "arith.floordivsi": "DLPC_FLOORDIV", "arith.ceildivsi": "DLPC_CEILDIV",
}  # fmt: skip
# math op -> C function for double; float uses the `f` suffix
MATH_UNARY = {
    "math.exp": "exp", "math.exp2": "exp2", "math.expm1": "expm1", "math.log": "log",
    "math.log2": "log2", "math.log10": "log10", "math.log1p": "log1p", "math.sqrt": "sqrt",
    "math.cbrt": "cbrt", "math.tanh": "tanh", "math.sinh": "sinh", "math.cosh": "cosh",
    "math.asinh": "asinh", "math.acosh": "acosh", "math.atanh": "atanh", "math.sin": "sin",
    "math.cos": "cos", "math.tan": "tan", "math.asin": "asin", "math.acos": "acos",
    "math.atan": "atan", "math.erf": "erf", "math.absf": "fabs", "math.floor": "floor",
    "math.ceil": "ceil", "math.round": "round", "math.roundeven": "nearbyint",
    "math.trunc": "trunc",
}  # fmt: skip
MATH_BINARY = {
    "math.powf": "pow",
    "math.atan2": "atan2",
    "math.copysign": "copysign",
    "arith.maxnumf": "fmax",
    "arith.minnumf": "fmin",
    "arith.remf": "fmod",
}
MATH_OTHER = ("math.rsqrt", "math.fma", "math.fpowi", "math.absi")
CASTS = (
    "arith.sitofp",
    "arith.fptosi",
    "arith.fptoui",
    "arith.extf",
    "arith.truncf",
    "arith.index_cast",
    "arith.index_castui",
    "arith.extsi",
    "arith.trunci",
)

CMPF = {
    "false": "false", "oeq": "{a} == {b}", "ogt": "{a} > {b}", "oge": "{a} >= {b}",
    "olt": "{a} < {b}", "ole": "{a} <= {b}", "one": "({a} < {b} || {a} > {b})",
    "ord": "({a} == {a} && {b} == {b})", "ueq": "!({a} < {b} || {a} > {b})",
    "ugt": "!({a} <= {b})", "uge": "!({a} < {b})", "ult": "!({a} >= {b})",
    "ule": "!({a} > {b})", "une": "{a} != {b}", "uno": "({a} != {a} || {b} != {b})",
    "true": "true",
}  # fmt: skip
CMPI = {
    "eq": "==",
    "ne": "!=",
    "slt": "<",
    "sle": "<=",
    "sgt": ">",
    "sge": ">=",
    "ult": "<",
    "ule": "<=",
    "ugt": ">",
    "uge": ">=",
}

SCALAR_HELPERS = """\
#define DLPC_MAXIMUMF(a, b) ((b) != (b) ? (b) : (b) > (a) ? (b) : (a))
#define DLPC_MINIMUMF(a, b) ((b) != (b) ? (b) : (b) < (a) ? (b) : (a))
#define DLPC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DLPC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DLPC_FLOORDIV(a, b) ((a) / (b) - (((a) % (b) != 0) && (((a) < 0) != ((b) < 0))))
#define DLPC_CEILDIV(a, b) ((a) / (b) + (((a) % (b) != 0) && (((a) < 0) == ((b) < 0))))

/* math.ipowi: a ** b by squaring, wrapping like the result type's multiplication; for
   b < 0 the integer part of 1 / a ** |b| (1 and -1 are their own reciprocals, others 0) */
static inline int64_t dlpc_ipowi(int64_t a, int64_t b)
{
  if (b < 0)
    return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)a;
  for (; b; b >>= 1, x *= x)
    if (b & 1)
      r *= x;
  return (int64_t)r;
}
"""  # shared with the OpenCL prelude

# glibc's libmvec has SIMD variants of these float functions, but math.h declares them
# only under -ffast-math, so a vectorised loop would call the scalar function once per
# element. Declared here (cbuild defines DLPC_HAVE_LIBMVEC when it links -lmvec), GCC
# calls the variant for the target's vector width. glibc documents them to within a few
# ulp of the scalar functions, which the tests' tolerances (rtol 1e-4) cover.
VECTOR_MATH_UNARY = (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "cbrt",
)  # fmt: skip
VECTOR_MATH = (
    "#if defined(DLPC_HAVE_LIBMVEC) && defined(_OPENMP) && defined(__x86_64__)\n"
    + "".join(
        f"#pragma omp declare simd notinbranch\nfloat {f}f(float);\n" for f in VECTOR_MATH_UNARY
    )
    + "#pragma omp declare simd notinbranch\nfloat atan2f(float, float);\n"
    + "#endif\n\n"
)
# not powf: GCC 12 crashes (internal compiler error in `fre`) folding powf(x, 0.5) with a
# SIMD declaration; pow by a small integer constant becomes products in graph-to-te

# per-kernel timers: `dlpc-run --profile` builds the same source with DLPC_PROFILE defined
# (backends/runtime/profile.py); in the normal build the macros are empty. Each kernel
# has its own start time (`profile_table`): in @main's team region a serial kernel's
# timer starts on whichever thread runs it while the first thread may still be stopping
# the previous kernel's, which one shared start made about 0
PROFILE_HELPERS = """
#ifdef DLPC_PROFILE
#include <time.h>
static inline double dlpc_now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
#define DLPC_PROF_BEGIN(k) (dlpc_kernel_start[k] = dlpc_now())
#define DLPC_PROF_END(k) (dlpc_kernel_seconds[k] += dlpc_now() - dlpc_kernel_start[k])
#endif
#ifndef DLPC_PROFILE
#define DLPC_PROF_BEGIN(k) ((void)0)
#define DLPC_PROF_END(k) ((void)0)
#endif
"""

# whether a parallel loop reached here would run on a team of more than one thread: the
# team's size (omp_get_max_threads: OMP_NUM_THREADS, omp_set_num_threads) and, inside an
# active parallel region (a parallel loop nested in another, or dlpc_main called from the
# user's own region), whether libgomp would start a nested team at all. Each parallel loop
# asks it (a few ns) and otherwise runs a serial copy of itself, cheaper than a one-thread
# parallel region or an `if(...)` clause (docs/design/c-backend.md#team-helper); without
# OpenMP every loop is the serial copy
TEAM_HELPER = """
#ifdef _OPENMP
#include <omp.h>
static inline int dlpc_parallel(void)
{
  return omp_get_max_threads() > 1 && omp_get_active_level() < omp_get_max_active_levels();
}
#endif
#ifndef _OPENMP
static inline int dlpc_parallel(void) { return 0; }
#endif
/* in dlpc_main's team region (`team_region`): whether this is its first thread */
#ifdef _OPENMP
static inline int dlpc_team_first(void) { return omp_get_thread_num() == 0; }
#endif
#ifndef _OPENMP
static inline int dlpc_team_first(void) { return 1; }
#endif
"""

# vector<16xf32> values (`loop-slide-rows`' sliding windows): GCC's vector extension, 4-byte
# aligned so that a load or store through it may be unaligned; a two-input shuffle with
# constant lanes (GCC 12 and clang: __builtin_shufflevector, older GCC: __builtin_shuffle)
VECTOR_TYPES = """
typedef float dlpc_v16f __attribute__((vector_size(64), aligned(4)));
#if defined(__clang__) || __GNUC__ >= 12
#define DLPC_SHUFFLE16(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#endif
#if !defined(__clang__) && __GNUC__ < 12
typedef int32_t dlpc_v16i __attribute__((vector_size(64)));
#define DLPC_SHUFFLE16(a, b, ...) __builtin_shuffle(a, b, (dlpc_v16i){__VA_ARGS__})
#endif
"""

PRELUDE = (
    """\
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

"""
    + VECTOR_MATH
    + SCALAR_HELPERS
    + VECTOR_TYPES
    + PROFILE_HELPERS
    + TEAM_HELPER
    + """
/* the allocation that failed: the runtime reads these after dlpc_main returns 1 and says
   "out of memory: N bytes for kernel K" */
size_t dlpc_oom_count, dlpc_oom_size;
const char *dlpc_oom_kernel;

/* `count` elements of `size` bytes, 64-byte aligned. The product is compared with what
   size_t holds before it is formed; NULL (the failure recorded) when it does not fit or
   malloc fails */
static inline void *dlpc_alloc(size_t count, size_t size, const char *kernel)
{
  void *p = NULL;
  if (size != 0 && count <= (SIZE_MAX - 63) / size)
    p = aligned_alloc(64, (count * size + 63) / 64 * 64);
  if (!p) {
    dlpc_oom_count = count;
    dlpc_oom_size = size;
    dlpc_oom_kernel = kernel;
  }
  return p;
}

/* inside a kernel (maybe on an OpenMP thread, where it cannot return): say what failed */
static inline void dlpc_oom(void)
{
  fprintf(stderr, "dlpc: out of memory: %zu elements of %zu bytes for %s\\n",
          dlpc_oom_count, dlpc_oom_size, dlpc_oom_kernel);
  abort();
}
"""
)

# combiners a vectorised reduction loop may use, as OpenMP reduction identifiers
SIMD_COMBINE = {
    "arith.addf": "+",
    "arith.addi": "+",
    "arith.mulf": "*",
    "arith.muli": "*",
    "arith.maximumf": "max",
    "arith.maxsi": "max",
    "arith.minimumf": "min",
    "arith.minsi": "min",
}

# every kernel function is compiled out of line, in the plain build and in the profiling
# build alike: a kernel called once from dlpc_main is otherwise inlined into it, and in
# the DLPC_PROFILE build (timer calls between kernels) GCC then compiled the inlined
# kernels differently, so `dlpc-run --profile` would time other code than the plain call;
# out of line, each kernel is the same code in both builds
# (docs/design/c-backend.md#noinline)
KERNEL_ATTRIBUTES = "__attribute__((noinline))"
# a kernel function of a build in several units: shared between them, not exported
HIDDEN = '__attribute__((visibility("hidden")))'
# the prelude of a kernel unit: the failed allocation's record is defined in the main one
_OOM_DEFINED = "size_t dlpc_oom_count, dlpc_oom_size;\nconst char *dlpc_oom_kernel;\n"
assert _OOM_DEFINED in PRELUDE
KERNEL_PRELUDE = PRELUDE.replace(
    _OOM_DEFINED,
    "extern size_t dlpc_oom_count, dlpc_oom_size;\nextern const char *dlpc_oom_kernel;\n",
)

STACK_LIMIT = 64 * 1024  # bytes; larger kernel-local buffers go on the heap
ENTRIES = ("@main", "dlpc_prepare")  # the writers of the two entry points
# A `parallel` loop whose nest runs fewer innermost iterations than this stays serial:
# waking threads costs more than such a loop (tens of microseconds).
PARALLEL_MIN_WORK = 1 << 16
# A parallel loop whose nest runs at least this many innermost steps (`vector_work`) is
# emitted once, `if(parallel: dlpc_parallel())` choosing the team: the one-thread region's
# cost is small beside such a loop, and its serial copy would only cost compile time
# (docs/design/c-backend.md#team-helper has the figures); smaller ones keep the serial copy.
ONE_BODY_MIN_WORK = 1 << 20
# a vector loop stopped at a runtime limit takes a copy in vectors of 8 below this many
# iterations (CEmitter.short_and_long)
SHORT_TRIP = 16
# elements per step of a vectorised innermost loop in `vector_work` (AVX2's f32 vector,
# the narrowest x86 target -march=native meets; AVX-512 halves the steps again)
VECTOR_STEP = 8


def loop_work(op: ForOp) -> int:
    """Innermost-body iterations of the nest rooted at `op` (a static cost estimate)."""
    inner = [o for o in op.block.ops if isinstance(o, ForOp)]
    nested = [o for o in op.block.walk() if isinstance(o, ForOp) and o is not op]
    if not inner and nested:  # loops under scf.if etc.: count them all
        inner = nested
    return op.trip_count * max(1, sum(loop_work(o) for o in inner))


def vector_work(op: ForOp) -> int:
    """`loop_work` with a vectorised innermost loop counted in vectors of VECTOR_STEP:
    counted per element, such a nest looks 8-16 times the time it takes
    (docs/design/c-backend.md#team-helper)."""
    inner = [o for o in op.block.ops if isinstance(o, ForOp)]
    nested = [o for o in op.block.walk() if isinstance(o, ForOp) and o is not op]
    if not inner and nested:
        inner = nested
    if not inner:
        trips = op.trip_count
        return -(-trips // VECTOR_STEP) if op.vectorize is not None else trips
    return op.trip_count * sum(vector_work(o) for o in inner)


# ------------------------------------------------------------------ the emitter


@dataclass
class Buffer:
    """How a memref value is accessed in C."""

    name: str
    shape: tuple[int, ...]
    scalar: bool = False  # 0-d local: a plain variable
    # the storage it lives in (an arena view, a reinterpret_cast alias: its source's),
    # and its byte range there (None: the whole of it); kernels do not `restrict`
    # parameters that may share bytes
    root: str = ""
    span: tuple[int, int] | None = None

    def at(self, indices: list[str]) -> str:
        if self.scalar:
            return self.name
        terms = []
        for k, idx in enumerate(indices):
            stride = math.prod(self.shape[k + 1 :])
            terms.append(idx if stride == 1 else f"{idx} * {stride}")
        return f"{self.name}[{' + '.join(terms) or '0'}]"


class FunctionWriter:
    """Emits the statements of one C function body."""

    def __init__(self, emitter: CEmitter, names: Scope, what: str):
        self.emitter = emitter
        self.names = names
        self.what = what  # for diagnostics: `kernel 'relu_0'` / `@main`
        self.lines: list[str] = []
        # (mappings: the OpenCL writer keeps one entry per lane in them)
        self.expr: MutableMapping[SSAValue, str] = {}
        self.buffers: MutableMapping[SSAValue, Buffer] = {}
        self.frees: dict[SSAValue, str] = {}  # heap memref.alloc buffers not yet freed
        self.scopes: list[list[str]] = []  # per open block: its heap memref.alloca buffers
        self.depth = 1
        self.arena_name = ""  # @main: the memory plan's arena, released before returning
        self.may_fail = False  # a kernel with a heap allocation it can return from: int
        self.parallel_depth = 0  # OpenMP parallel loops around the op being emitted
        # the copy of a kernel that dlpc_main's team runs (`team_kind` "loop"): its
        # parallel loop a worksharing loop of that team; @main: the op its team region
        # opens at, and whether the calls being emitted are inside it
        self.team_loop = False
        self.team_start: Operation | None = None
        self.in_team = False

    # ---- helpers -------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def pragma(self, text: str) -> None:
        self.lines.append("  " * self.depth + "#pragma " + text)

    def __getitem__(self, value: SSAValue) -> str:
        if value not in self.expr:
            raise DlpcError(
                f"error: c backend: value {value} used before definition in {self.what}"
            )
        return self.expr[value]

    def bind(self, value: SSAValue, expr: str, *, var: bool = True) -> None:
        """Give `value` a C name (declaring a const local) or an inline expression."""
        if not var:
            self.expr[value] = expr
            return
        name = self.names.fresh(value.name_hint)
        self.line(f"const {c_type(value.type)} {name} = {expr};")
        self.expr[value] = name

    def buffer(self, value: SSAValue) -> Buffer:
        if value not in self.buffers:
            raise DlpcError(
                f"error: c backend: memref {value} used before definition in {self.what}"
            )
        return self.buffers[value]

    def unsupported(self, op: Operation):
        return DlpcError(f"error: c backend: unsupported op '{op.name}' in {self.what}")

    def parameter(self, caller: FunctionWriter, v: SSAValue, written: bool) -> tuple[str, str, str]:
        """Make `v`, defined in `caller`, a parameter of this function: a memref keeps the
        caller's buffer name, a scalar gets a fresh one. Returns (type prefix, name,
        argument in the call): the prefix is `T *` for a buffer (`const T *` when the
        function never writes it), `T ` for a scalar, so `prefix + name` declares it."""
        if isinstance(v.type, MemRefType):
            outer = caller.buffer(v)
            self.names.used.add(outer.name)
            self.buffers[v] = Buffer(outer.name, outer.shape)
            const = "" if written else "const "
            return f"{const}{c_type(v.type.get_element_type())} *", outer.name, outer.name
        name = self.names.fresh(v.name_hint, "s")
        self.expr[v] = name
        return f"{c_type(v.type)} ", name, caller[v]

    def main_arguments(
        self, fn: func.FuncOp
    ) -> Iterator[tuple[int, str, str, tuple[int, ...], str]]:
        """Declare `T *name = (T *)args[k];` for each argument of `@main`, yielding
        (k, source name, C name, shape, T) after each declaration."""
        for k, (arg, hint) in enumerate(zip(fn.body.block.args, argument_names(fn))):
            shape, elt = memref_info(arg.type)
            t = c_type(elt)
            name = self.names.fresh(hint, "arg")
            self.line(f"{t} *{name} = ({t} *)args[{k}];")
            self.buffers[arg] = Buffer(name, shape)
            yield k, hint, name, shape, t

    def free_heap(self) -> None:
        """Free the heap `memref.alloc` buffers no `memref.dealloc` has freed."""
        for name in self.frees.values():
            self.line(f"free({name});")

    def function(self, header: str, signature: str) -> str:
        """The function's text: `header` (a comment), `signature`, the body lines."""
        return f"{header}\n{signature}\n{{\n" + "\n".join(self.lines) + "\n}\n"

    # ---- blocks --------------------------------------------------------------
    def block(self, block: Block) -> None:
        self.scopes.append([])
        for op in block.ops:
            self.op(op)
        self.close_scope()

    def close_scope(self) -> None:
        """Free the heap-allocated `memref.alloca`s of the block that ends here."""
        for name in self.scopes.pop():
            self.line(f"free({name});")

    def op(self, op: Operation) -> None:  # noqa: C901 - one dispatch table
        if isinstance(op, ForOp) and isinstance(cond := op.attributes.get(CPP_IF), StringAttr):
            self.lines.append(f"#if {cond.data}")  # (loop-slide-rows: per vector ISA)
            self.loop(op)
            return self.lines.append("#endif")
        if isinstance(op, ForOp):
            return self.loop(op)
        if isinstance(op, KernelOp):
            if PREPARE in op.attributes and self.what == "@main":
                return None  # runs in dlpc_prepare, once per binding of the weights
            return self.emitter.call_kernel(self, op)
        if isinstance(op, arith.ConstantOp):
            v = op.value
            if isinstance(v, FloatAttr):
                return self.bind(op.result, float_literal(v.value.data, op.result.type), var=False)
            if isinstance(v, IntegerAttr):
                try:
                    text = int_literal(v.value.data, op.result.type)
                except DlpcError as e:
                    raise DlpcError(f"{e} ('{op.name}' in {self.what})") from None
                return self.bind(op.result, text, var=False)
            raise self.unsupported(op)
        if isinstance(op, memref.LoadOp):
            buf = self.buffer(op.memref)
            return self.bind(op.res, buf.at([self[i] for i in op.indices]))
        if isinstance(op, memref.StoreOp):
            buf = self.buffer(op.memref)
            return self.line(f"{buf.at([self[i] for i in op.indices])} = {self[op.value]};")
        if isinstance(op, vector.LoadOp | vector.StoreOp | vector.BroadcastOp | vector.ShuffleOp):
            return self.vector(op)
        if isinstance(op, memref.AllocOp) and ARENA in op.attributes and self.what == "@main":
            return self.arena(op)
        if isinstance(op, memref.AllocOp) and PACKED in op.attributes and self.what in ENTRIES:
            return self.packed(op)
        if isinstance(op, memref.ViewOp):
            return self.view(op)
        if isinstance(op, memref.ReinterpretCastOp):
            return self.reinterpret(op)
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            return self.alloc(op)
        if isinstance(op, memref.DeallocOp):
            buf = self.buffer(op.memref)
            if op.memref in self.frees:
                self.line(f"free({self.frees.pop(op.memref)});")
            return None
        if isinstance(op, memref.GetGlobalOp):
            shape, _ = memref_info(op.memref.type)
            gname = self.emitter.globals[op.name_.root_reference.data]
            self.buffers[op.memref] = Buffer(gname, shape)
            return None
        if isinstance(op, memref.CopyOp):
            src, dst = self.buffer(op.source), self.buffer(op.destination)
            shape, elt = memref_info(op.source.type)
            return self.line(
                f"memcpy({dst.name}, {src.name}, {math.prod(shape)} * sizeof({c_type(elt)}));"
            )
        if isinstance(op, scf.IfOp):
            return self.if_(op)
        if isinstance(op, scf.WhileOp) and not op.results:
            return self.while_(op)
        if isinstance(op, func.ReturnOp):
            return None
        if not op.results or not op.operands:
            raise self.unsupported(op)
        return self.scalar(op, op.results[0], [self[v] for v in op.operands])

    def scalar(self, op: Operation, res: SSAValue, args: list[str]) -> None:
        """Bind the result of an arith/math op to a C expression over `args`."""
        name, t = op.name, c_type(res.type)
        if name in WRAPPING and _wraps_unsigned(res.type) and not _no_signed_wrap(op, t):
            u = _wide_unsigned(res.type)  # (ONNX wraps; signed overflow is UB in C)
            return self.bind(res, f"({t})(({u}){args[0]} {BINARY[name]} ({u}){args[1]})")
        if name in ("arith.divui", "arith.remui", "arith.divsi", "arith.remsi") and (
            _is_int(res.type) and (t[0] == "u" or name.endswith("ui"))
        ):  # (unsigned data: x86 traps on x / 0, which is 0 as numpy's; x % 0 keeps x)
            u = _unsigned(res.type)
            op_ = "/" if "div" in name else "%"
            a, b = f"({u}){args[0]}", f"({u}){args[1]}"
            if _nonzero_constant(op.operands[1]):
                return self.bind(res, f"({t})({a} {op_} {b})")
            zero = f"({u})0" if op_ == "/" else a
            return self.bind(res, f"({t})({b} == 0 ? {zero} : {a} {op_} {b})")
        if name in ("arith.divsi", "arith.remsi") and _is_int(res.type) and t[0] != "u":
            a, b, u = args[0], args[1], _unsigned(res.type)  # (x86 traps on x / 0 and on
            # INT_MIN / -1: a data x / 0 is 0, as numpy's, and INT_MIN / -1 wraps)
            q = f"({t})(({u})0 - ({u}){a})" if name == "arith.divsi" else f"({t})0"
            expr = f"({b} == 0 ? ({t})0 : {b} == -1 ? {q} : {a} {BINARY[name]} {b})"
            return self.bind(res, expr)
        if name in BINARY:
            return self.bind(res, f"{args[0]} {BINARY[name]} {args[1]}")
        if name in MACRO_BINARY:
            return self.bind(res, f"{MACRO_BINARY[name]}({args[0]}, {args[1]})")
        if name in UNSIGNED_BINARY or name in ("arith.maxui", "arith.minui"):
            u = _unsigned(res.type)
            a, b = f"({u}){args[0]}", f"({u}){args[1]}"
            if name in UNSIGNED_BINARY:
                return self.bind(res, f"({t})({a} {UNSIGNED_BINARY[name]} {b})")
            m = "DLPC_MAX" if name == "arith.maxui" else "DLPC_MIN"
            return self.bind(res, f"({t}){m}({a}, {b})")
        if name == "math.ipowi":
            return self.bind(res, f"({t})dlpc_ipowi((int64_t){args[0]}, (int64_t){args[1]})")
        if name == "arith.negf":
            return self.bind(res, f"-{args[0]}")
        if name in MATH_UNARY or name in MATH_BINARY or name in MATH_OTHER:
            return self.math(op)
        if isinstance(op, arith.CmpfOp):
            pred = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
            return self.bind(res, CMPF[pred].format(a=args[0], b=args[1]))
        if isinstance(op, arith.CmpiOp):
            pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
            a, b = args
            if pred.startswith("u"):
                u = _unsigned(op.lhs.type)
                a, b = f"({u}){a}", f"({u}){b}"
            return self.bind(res, f"{a} {CMPI[pred]} {b}")
        if isinstance(op, arith.SelectOp):
            return self.bind(res, f"{args[0]} ? {args[1]} : {args[2]}")
        if name in ("arith.uitofp", "arith.extui"):
            return self.bind(res, f"({t})({_unsigned(op.operands[0].type)}){args[0]}")
        if name in CASTS:
            return self.bind(res, f"({t}){args[0]}")
        if name == "arith.bitcast" and _is_int(op.operands[0].type) and _is_int(res.type):
            return self.bind(res, f"({t}){args[0]}")  # (i8 -> ui8: the same bits)
        if name == "arith.bitcast":  # f32 <-> i32, ...: the bits through a union
            src = c_type(op.operands[0].type)
            return self.bind(res, f"((union {{ {src} a; {t} b; }}){{ .a = {args[0]} }}).b")
        raise self.unsupported(op)

    def vector(self, op: Operation) -> None:
        """vector<16xf32> ops (`loop-slide-rows`): a load or store of 16 consecutive
        elements from an index, a splat, a two-input shuffle with constant lanes."""
        if isinstance(op, vector.LoadOp):
            at = self.buffer(op.base).at([self[i] for i in op.indices])
            return self.bind(op.result, f"*(const dlpc_v16f *)&{at}")
        if isinstance(op, vector.StoreOp):
            at = self.buffer(op.base).at([self[i] for i in op.indices])
            return self.line(f"*(dlpc_v16f *)&{at} = {self[op.vector]};")
        if isinstance(op, vector.BroadcastOp):
            x = self[op.source]
            return self.bind(op.vector, f"(dlpc_v16f){{{', '.join([x] * 16)}}}")
        assert isinstance(op, vector.ShuffleOp)
        lanes = ", ".join(str(i) for i in op.mask.get_values())
        return self.bind(op.result, f"DLPC_SHUFFLE16({self[op.v1]}, {self[op.v2]}, {lanes})")

    def math(self, op: Operation) -> None:
        ty = op.results[0].type
        args = [self[v] for v in op.operands]
        suffix = "" if isinstance(ty, Float64Type) else "f"
        if isinstance(ty, Float16Type):
            args = [f"(float){a}" for a in args]
        name = op.name
        if name in MATH_UNARY:
            expr = f"{MATH_UNARY[name]}{suffix}({args[0]})"
        elif name in MATH_BINARY:
            expr = f"{MATH_BINARY[name]}{suffix}({args[0]}, {args[1]})"
        elif name == "math.rsqrt":
            one = "1.0" if suffix == "" else "1.0f"
            expr = f"{one} / sqrt{suffix}({args[0]})"
        elif name == "math.fma":
            expr = f"fma{suffix}({args[0]}, {args[1]}, {args[2]})"
        elif name == "math.fpowi":
            expr = f"pow{suffix}({args[0]}, ({'double' if suffix == '' else 'float'}){args[1]})"
        else:  # math.absi
            a, t = args[0], c_type(ty)  # (-INT_MIN wraps to INT_MIN, as ONNX's Abs does)
            expr = f"({a} < 0 ? ({t})(({_wide_unsigned(ty)})0 - {a}) : {a})"
        if isinstance(ty, Float16Type):
            expr = f"(_Float16){expr}"
        self.bind(op.results[0], expr)

    def fail(self) -> str:
        """The statement that returns 1 from @main after a failed allocation, giving the
        memory plan's arena back first when this call holds it."""
        if self.arena_name:
            return f"{{ dlpc_arena_release({self.arena_name}); return 1; }}"
        return "return 1;"

    def arena(self, op: memref.AllocOp) -> None:
        """The memory plan's arena (loop-memory-plan): resident, taken for the call."""
        (nbytes,), _ = memref_info(op.memref.type)
        name = self.names.fresh(op.memref.name_hint, "buf")
        self.emitter.arena_bytes = nbytes
        self.arena_name = name
        self.line(f"unsigned char *{name} = dlpc_arena_acquire();")
        self.line(f"if (!{name}) return 1;")
        self.buffers[op.memref] = Buffer(name, (nbytes,), root=name, span=(0, nbytes))

    def packed(self, op: memref.AllocOp) -> None:
        """The resident packed weights (loop-prepack-weights): the runtime's block,
        passed after @main's arguments."""
        (nbytes,), _ = memref_info(op.memref.type)
        name = self.names.fresh(op.memref.name_hint, "buf")
        self.emitter.packed_bytes = nbytes
        self.line(f"unsigned char *{name} = (unsigned char *)args[{self.emitter.num_args}];")
        self.buffers[op.memref] = Buffer(name, (nbytes,), root=name, span=(0, nbytes))

    def view(self, op: memref.ViewOp) -> None:
        """`memref.view %arena[%offset][]`: a typed pointer into the arena."""
        shift = op.byte_shift.owner
        if not isinstance(shift, arith.ConstantOp) or not isinstance(shift.value, IntegerAttr):
            raise DlpcError(f"error: c backend: memref.view needs a constant offset in {self.what}")
        offset = shift.value.value.data
        src = self.buffer(op.source)
        shape, elt = memref_info(op.result.type)
        t = c_type(elt)
        name = self.names.fresh(op.result.name_hint, "buf")
        self.line(f"{t} *{name} = ({t} *)({src.name} + {offset});")
        start = (src.span[0] if src.span else 0) + offset
        span = (start, start + math.prod(shape) * size_of(elt))
        self.buffers[op.result] = Buffer(name, shape, root=src.root or src.name, span=span)

    def reinterpret(self, op: memref.ReinterpretCastOp) -> None:
        """`memref.reinterpret_cast` to a contiguous row-major shape (loop-views: a
        reshape): the same memory under another shape."""
        shape, elt = memref_info(op.result.type)
        offsets = list(op.static_offsets.get_values())
        strides = list(op.static_strides.get_values())
        rowmajor = [math.prod(shape[k + 1 :]) for k in range(len(shape))]
        if op.offsets or op.sizes or op.strides or len(offsets) != 1 or strides != rowmajor:
            raise DlpcError(
                f"error: c backend: memref.reinterpret_cast must be static, contiguous and "
                f"row-major in {self.what}"
            )
        src = self.buffer(op.source)
        t = c_type(elt)
        name = self.names.fresh(op.result.name_hint, "buf")
        self.line(f"{t} *{name} = ({t} *){src.name} + {offsets[0]};")
        span = None
        if src.span is not None:
            start = src.span[0] + offsets[0] * size_of(elt)
            span = (start, start + math.prod(shape) * size_of(elt))
        self.buffers[op.result] = Buffer(name, shape, root=src.root or src.name, span=span)

    def alloc(self, op: memref.AllocOp | memref.AllocaOp) -> None:
        shape, elt = memref_info(op.memref.type)
        t = c_type(elt)
        name = self.names.fresh(op.memref.name_hint, "buf")
        nbytes = math.prod(shape) * size_of(elt)
        in_kernel = self.what != "@main"
        if not shape and in_kernel:
            self.line(f"{t} {name};")
            self.buffers[op.memref] = Buffer(name, shape, scalar=True)
            return
        if in_kernel and nbytes <= STACK_LIMIT:
            # the array is reached through a `restrict` pointer: GCC's alias analysis
            # otherwise lets a vector access of one local array (a packed panel, partial
            # sums) alias another (the accumulator tile) and keeps the accumulators in
            # memory, reloading and storing them around every FMA
            hint = op.memref.name_hint
            store = self.names.fresh(f"{hint}_mem" if hint else None, "buf")
            count = max(math.prod(shape), 1)
            self.line(f"{t} {store}[{count}] __attribute__((aligned({ALIGN})));")
            self.line(f"{t} *restrict {name} = {store};")
        else:
            # a failed allocation returns 1 from @main (the runtime names the size and the
            # kernel the buffer is for); a kernel returns 1 to @main, freeing what it holds,
            # except inside an OpenMP loop (`return` is not allowed there): it aborts with
            # the same message
            what = self.what if in_kernel else kernel_for(op)
            count = max(math.prod(shape), 1)
            qual = "restrict " if in_kernel else ""  # the kernel's own buffer: nothing aliases it
            self.line(
                f"{t} *{qual}{name} = ({t} *)dlpc_alloc({count}, sizeof({t}), {c_string(what)});"
            )
            if not in_kernel:
                self.line(f"if (!{name}) {self.fail()}")
            elif in_omp_loop(op):
                self.line(f"if (!{name}) dlpc_oom();")
            else:
                held = [n for scope in self.scopes for n in scope] + list(self.frees.values())
                self.line(f"if (!{name}) {{ {''.join(f'free({n}); ' for n in held)}return 1; }}")
                self.may_fail = True
            if isinstance(op, memref.AllocaOp):
                self.scopes[-1].append(name)  # freed where its block ends
            else:
                self.frees[op.memref] = name  # freed by memref.dealloc or at function end
        self.buffers[op.memref] = Buffer(name, shape)

    def team_block(self, block: Block, start: Operation) -> None:
        """@main's `block` with its ops from `start` on (`team_region`) twice: in one
        OpenMP region when the team would have more than one thread (`dlpc_parallel()`),
        each thread running every kernel call (a kernel's parallel loop shared, a serial
        kernel by one thread; the DLPC_PROFILE timers on the first thread, after each
        kernel's closing barrier), else the calls as without a region."""
        ops = list(block.ops)
        at = ops.index(start)
        self.scopes.append([])
        for op in ops[:at]:
            self.op(op)
        self.line("if (dlpc_parallel()) {")
        self.depth += 1
        self.pragma("omp parallel")
        self.line("{")
        self.depth += 1
        self.in_team = True
        for op in ops[at:]:
            self.op(op)
        self.in_team = False
        self.depth -= 1
        self.line("}")
        self.depth -= 1
        self.line("} else {")
        self.depth += 1
        for op in ops[at:]:
            self.op(op)
        self.depth -= 1
        self.line("}")
        self.close_scope()

    def loop(self, op: ForOp) -> None:
        iv = self.names.fresh(op.loop_name or op.induction_var.name_hint, "i")
        self.expr[op.induction_var] = iv
        reduction = op.reduction is not None
        unroll = op.unroll_factor
        # GCC accepts no pragma between an OpenMP loop pragma and its `for`, so an
        # unrolled loop is vectorised with `GCC ivdep`, and a parallel loop is not unrolled
        parallel = op.parallel is not None or (self.team_loop and TEAM_LOOP in op.attributes)
        if parallel and loop_work(op) < PARALLEL_MIN_WORK:
            self.line(c_comment(f"parallel: left serial, {loop_work(op)} iterations are too few"))
            parallel = False
        if parallel and self.parallel_depth:
            self.line(c_comment("parallel: left serial inside the parallel loop around it"))
            parallel = False
        if parallel:
            return self.parallel_loop(op, iv, unroll)
        if op.vectorize is not None:
            clauses = self.simd_reductions(op) if reduction and unroll <= 1 else None
            if clauses:
                simd = "omp simd " + " ".join(clauses)
            else:
                simd = "GCC ivdep" if reduction or unroll > 1 else "omp simd"
            limit = clamped(op)
            if (
                limit is not None
                and simd.startswith("omp simd")
                and op.stride == 1
                and op.upper - op.lower > SHORT_TRIP
            ):
                return self.short_and_long(op, iv, simd, limit[1])
            self.pragma(simd)
        if unroll > 1:
            self.pragma(f"GCC unroll {unroll}")
        self.for_(op, iv)

    def short_and_long(self, op: ForOp, iv: str, simd: str, limit: SSAValue) -> None:
        """A vector loop stopped at a runtime limit, in two copies: below SHORT_TRIP
        iterations one in vectors of 8 (`simdlen(8)`), else the compiler's widest. With
        AVX-512 a runtime trip count of 8 skipped the 16-wide loop and ran its
        epilogues: a softmax row of 8 cost 0.6 us per 32 rows against 0.22 static."""
        self.line(f"if ({self[limit]} - {op.lower} < {SHORT_TRIP}) {{")
        self.depth += 1
        self.pragma(simd.replace("omp simd", "omp simd simdlen(8)", 1))
        start = len(self.lines)
        self.for_(op, iv)
        body = self.lines[start:]
        self.depth -= 1
        self.line("} else {")
        self.depth += 1
        self.pragma(simd)
        self.lines.extend(body)
        self.depth -= 1
        self.line("}")

    def for_(self, op: ForOp, iv: str) -> None:
        """The `for` statement of `op` with its body (its pragmas already emitted)."""
        step = f"{iv}++" if op.stride == 1 else f"{iv} += {op.stride}"
        body, upper = op.block, str(op.upper)
        limit = clamped(op)
        if limit is not None:  # `if (iv < limit)` around the whole body: stop at the limit
            body, x = limit
            upper = f"({self[x]} < {op.upper} ? {self[x]} : {op.upper})"
        self.line(f"for (int64_t {iv} = {op.lower}; {iv} < {upper}; {step}) {{")
        if body is op.block:
            self.depth += 1
            self.block(body)
            self.depth -= 1
        else:
            self.branch(body, [])
        self.line("}")

    def parallel_loop(self, op: ForOp, iv: str, unroll: int) -> None:
        """An OpenMP loop and a serial copy of it, the copy taken when the team would be one
        thread (`dlpc_parallel()`, see TEAM_HELPER): the same text twice, each in its own
        block, so their locals do not clash; a loop of ONE_BODY_MIN_WORK or more is the
        OpenMP loop alone, its `if` clause giving a one-thread team instead."""
        vectorize = op.vectorize is not None
        if unroll > 1:
            self.line(c_comment(f"unroll {unroll} dropped: not expressible on an OpenMP loop"))
        if self.team_loop:
            # every thread of dlpc_main's team reaches this loop (`team_kind`) and takes
            # its share; the implicit barrier at its end orders the next kernel
            self.pragma("omp for simd" if vectorize else "omp for")
            self.parallel_depth += 1
            self.for_(op, iv)
            self.parallel_depth -= 1
            return
        if vector_work(op) >= ONE_BODY_MIN_WORK and not runtime_bounded(op):
            omp = "omp parallel for simd" if vectorize else "omp parallel for"
            self.line("{")  # (a block of its own, as the two-copy form)
            self.depth += 1
            self.pragma(f"{omp} if(parallel: dlpc_parallel())")
            self.parallel_depth += 1
            self.for_(op, iv)
            self.parallel_depth -= 1
            self.depth -= 1
            self.line("}")
            return
        self.line("if (dlpc_parallel()) {")
        self.depth += 1
        self.pragma("omp parallel for simd" if vectorize else "omp parallel for")
        start = len(self.lines)
        self.parallel_depth += 1
        self.for_(op, iv)
        self.parallel_depth -= 1
        body = self.lines[start:]
        self.depth -= 1
        self.line("} else {")
        self.depth += 1
        if vectorize:
            self.pragma("omp simd")
        self.lines.extend(body)
        self.depth -= 1
        self.line("}")

    def simd_reductions(self, op: ForOp) -> list[str] | None:
        """`reduction(+:acc)` clauses when every scalar accumulator the loop touches is
        updated as `acc = acc <op> x` directly in its body (load, combine, store);
        None when some access does not fit, so the loop is not vectorised as a reduction."""
        accesses: dict[SSAValue, list[Operation]] = {}
        limit = clamped(op)
        body = op.block if limit is None else limit[0]  # (a clamped loop: the if's body)
        for inner in body.walk():
            if isinstance(inner, memref.LoadOp | memref.StoreOp):
                buf = self.buffers.get(inner.memref)
                if buf is not None and buf.scalar:
                    accesses.setdefault(inner.memref, []).append(inner)
        clauses = []
        for acc, ops in accesses.items():
            if len(ops) != 2:
                return None
            load, store = ops
            if (
                not isinstance(load, memref.LoadOp)
                or not isinstance(store, memref.StoreOp)
                or load.parent is not body
                or store.parent is not body
            ):
                return None
            combine = store.value.owner
            kind = SIMD_COMBINE.get(getattr(combine, "name", ""))
            uses = list(load.res.uses)
            if kind is None or len(uses) != 1 or uses[0].operation is not combine:
                return None
            if getattr(combine, "name", "") in WRAPPING and _wraps_unsigned(store.value.type):
                return None  # (OpenMP would add the partial sums in the signed type,
                # where overflow is UB; GCC's own vectoriser still takes the loop)
            if len(list(store.value.uses)) != 1:  # a partial result escapes the loop body
                return None
            clauses.append(f"reduction({kind}:{self.buffers[acc].name})")
        return clauses or None

    def if_(self, op: scf.IfOp) -> None:
        results = []
        for r in op.results:
            name = self.names.fresh(r.name_hint)
            self.line(f"{c_type(r.type)} {name};")
            results.append(name)
        self.line(f"if ({self[op.cond]}) {{")
        self.branch(op.true_region.block, results)
        if op.false_region.blocks and any(
            not isinstance(o, scf.YieldOp) or o.operands for o in op.false_region.block.ops
        ):
            self.line("} else {")
            self.branch(op.false_region.block, results)
        self.line("}")
        for r, name in zip(op.results, results):
            self.expr[r] = name

    def while_(self, op: scf.WhileOp) -> None:
        """A while loop carrying nothing in registers (graph.loop's host loop keeps its
        state in buffers: passes/lower/_control_to_loop.py): `for (;;) { before; if
        (!cond) break; after }`."""
        self.line("for (;;) {")
        self.depth += 1
        self.scopes.append([])
        for inner in op.before_region.block.ops:
            if isinstance(inner, scf.ConditionOp):
                self.line(f"if (!({self[inner.condition]})) break;")
            else:
                self.op(inner)
        self.close_scope()
        self.depth -= 1
        self.branch(op.after_region.block, [])
        self.line("}")

    def branch(self, block: Block, results: list[str]) -> None:
        self.depth += 1
        self.scopes.append([])
        for inner in block.ops:
            if isinstance(inner, scf.YieldOp):
                for name, v in zip(results, inner.operands):
                    self.line(f"{name} = {self[v]};")
            else:
                self.op(inner)
        self.close_scope()
        self.depth -= 1


# dlpc_main's kernels run in one OpenMP region per call where they can
# (docs/design/schedules.md#two-threads: a fork and a join per kernel cost more than
# a barrier, and each kernel's threads start where the last left off): `team_region`
# says where it opens, `team_kind` how each kernel runs in it.
# A region needs this many kernels sharing loops in it (one is today's parallel loop)
TEAM_MIN_KERNELS = 2
# @main's ops a team region may hold besides its kernels: pointers and constants, which
# every thread may compute (no allocation, copy or free)
_TEAM_MAIN_OPS = (
    memref.ViewOp,
    memref.ReinterpretCastOp,
    memref.GetGlobalOp,
    arith.ConstantOp,
    func.ReturnOp,
)


def emitted_parallel(op: ForOp) -> bool:
    """Whether `FunctionWriter.loop` emits `op` as an OpenMP loop (outside another)."""
    return op.parallel is not None and loop_work(op) >= PARALLEL_MIN_WORK


def team_shared(op: ForOp) -> bool:
    """Whether `op` is a kernel's loop the team region shares: parallel, or marked
    TEAM_LOOP (independent iterations, too little work to wake a thread for: serial in
    the kernel's plain function, `omp for` in its team copy, where the other thread is
    awake and would otherwise wait out the kernel at the barrier), with enough work for
    an OpenMP loop."""
    marked = op.parallel is not None or TEAM_LOOP in op.attributes
    return marked and loop_work(op) >= PARALLEL_MIN_WORK


def may_fail(k: KernelOp) -> bool:
    """Whether kernel `k`'s function may return 1 (`FunctionWriter.alloc`: a heap buffer
    outside an OpenMP loop)."""
    for op in k.walk():
        if isinstance(op, memref.AllocOp | memref.AllocaOp) and not in_omp_loop(op):
            shape, elt = memref_info(op.memref.type)
            if shape and math.prod(shape) * size_of(elt) > STACK_LIMIT:
                return True
    return False


def team_kind(k: KernelOp) -> str | None:
    """How kernel `k` runs in dlpc_main's team region: "loop" when its body is serial
    loops and scalar arithmetic around exactly one parallel loop (every thread runs the
    serial part, which writes nothing, and takes its share of the loop), "single" when
    it has no parallel loop and cannot fail (one thread runs it, the others wait), else
    None (no region for its call). A kernel without parallel loops around exactly one
    TEAM_LOOP loop (`team_marked`) is "loop" too: its team copy shares that loop."""
    if not any(isinstance(op, ForOp) and emitted_parallel(op) for op in k.walk()):
        if team_marked(k):  # its TEAM_LOOP loop is shared (a mark that does not fit: single)
            return "loop"
        return None if may_fail(k) else "single"
    loops: list[ForOp] = []
    return "loop" if _serial_around(k.block, loops, emitted_parallel) and len(loops) == 1 else None


def team_marked(k: KernelOp) -> bool:
    """Whether kernel `k`, which has no parallel loop, is serial loops and scalar
    arithmetic around exactly one TEAM_LOOP loop, which the team region shares."""
    loops: list[ForOp] = []
    return _serial_around(k.block, loops, team_shared) and len(loops) == 1 and not may_fail(k)


def _serial_around(block: Block, loops: list[ForOp], shared: Callable[[ForOp], bool]) -> bool:
    """Whether `block` is plain serial loops and scalar arithmetic around the loops
    `shared` takes (collected into `loops`)."""
    for op in block.ops:
        if isinstance(op, ForOp) and shared(op):
            loops.append(op)
        elif isinstance(op, ForOp) and not op.attributes.keys() - _PLAIN_LOOP_ATTRS:
            if not _serial_around(op.block, loops, shared):
                return False
        elif not (op.dialect_name() in ("arith", "math") and not op.regions):
            return False
    return True


# a serial loop around a kernel's parallel loop: its name, nothing the printer treats
# specially (a `#if` copy, a vectorized or unrolled loop)
_PLAIN_LOOP_ATTRS = {"name"}


def team_region(fn: func.FuncOp) -> Operation | None:
    """The kernel of @main at which one OpenMP region opens, running every kernel from
    there to the end of the call (`team_kind`), or None: some op after it is no kernel
    with a kind and none of `_TEAM_MAIN_OPS`, @main has heap buffers, or fewer than
    TEAM_MIN_KERNELS kernels share parallel loops (a kernel sharing a TEAM_LOOP loop
    counts for none: without a region it runs on the calling thread alone, which a
    loaded machine cannot slow through the other thread)."""
    ops = list(fn.body.block.ops)
    calls = [op for op in ops if isinstance(op, KernelOp) and PREPARE not in op.attributes]
    if not calls:
        return None
    if any(
        isinstance(op, memref.AllocOp)
        and ARENA not in op.attributes
        and PACKED not in op.attributes
        for op in fn.walk()
    ):
        return None
    shared = 0  # kernels with a parallel loop: a TEAM_LOOP mark opens no region
    for op in ops[ops.index(calls[0]) :]:
        if isinstance(op, KernelOp):
            if PREPARE in op.attributes:
                continue
            kind = team_kind(op)
            if kind is None:
                return None
            shared += kind == "loop" and any(
                isinstance(lp, ForOp) and emitted_parallel(lp) for lp in op.walk()
            )
        elif not isinstance(op, _TEAM_MAIN_OPS):
            return None
    return calls[0] if shared >= TEAM_MIN_KERNELS else None


def runtime_bounded(op: ForOp) -> bool:
    """Whether a loop of the nest rooted at `op` stops at a runtime limit (`clamped`: a
    symbolic program's extents): its static work is the maxima's, the call's may be tiny,
    so a parallel loop keeps its serial copy (no one-thread region per call)."""
    return any(isinstance(o, ForOp) and clamped(o) is not None for o in op.walk())


def clamped(op: ForOp) -> tuple[Block, SSAValue] | None:
    """(the body, the limit) when `op`'s body is only `scf.if iv < limit { body }` with
    `limit` defined outside the loop (passes/lower/_symbolic.guard): iterations at or past
    the limit do nothing, so the loop may stop at min(upper, limit) (a positive step)."""
    ops = list(op.block.ops)
    if len(ops) != 2 or op.stride <= 0:
        return None
    cmp, branch = ops
    if not (
        isinstance(cmp, arith.CmpiOp)
        and cmp.predicate.value.data == 2  # slt
        and cmp.lhs is op.induction_var
        and not defined_inside(cmp.rhs, op)
        and isinstance(branch, scf.IfOp)
        and branch.cond is cmp.result
        and not branch.results
        and len(list(cmp.result.uses)) == 1
        and not (
            branch.false_region.blocks
            and any(not isinstance(o, scf.YieldOp) for o in branch.false_region.block.ops)
        )
    ):
        return None
    return branch.true_region.block, cmp.rhs


def size_of(elt: Attribute) -> int:
    return {
        "float": 4,
        "double": 8,
        "_Float16": 2,
        "int64_t": 8,
        "int32_t": 4,
        "int16_t": 2,
        "int8_t": 1,
        "uint64_t": 8,
        "uint32_t": 4,
        "uint16_t": 2,
        "uint8_t": 1,
        "bool": 1,
    }[c_type(elt)]


class CEmitter:
    """Emits a whole module: globals, one function per kernel, `dlpc_main`."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.top = Scope()
        self.globals: dict[str, str] = {}
        self.parts: list[str] = []
        # per kernel function: (its hidden prototype, its hidden definition), for the
        # build in several translation units (`units`)
        self.split: list[tuple[str, str]] = []
        self.head: list[str] = []
        self.tail: list[str] = []
        self.kernel_names: dict[KernelOp, str] = {}
        self.called: list[KernelOp] = []  # kernels in the order dlpc_main calls them
        # a kernel function by its text with its name and parameters' names left out:
        # a kernel like an earlier one calls that one's function (`call_kernel`)
        self.functions: dict[tuple[str, ...], str] = {}
        self.arena_bytes = 0  # the memory plan's arena, when @main has one
        self.packed_bytes = 0  # the resident packed weights, when @main has them
        self.num_args = 0  # @main's arguments (the packed block's pointer comes after)

    def emit(self) -> str:
        main = find_main(self.module)
        self.num_args = len(main.body.block.args)
        out = [c_comment("generated by dlpc (C backend); do not edit"), PRELUDE]
        for op in self.module.body.block.ops:
            if isinstance(op, memref.GlobalOp):
                out.append(self.global_(op))
        for k in (op for op in main.walk() if isinstance(op, KernelOp)):
            self.kernel_names[k] = self.top.fresh(k.sym, kind="kernel")
        body = self.main(main)
        prepare = self.prepare(main)
        self.head = out
        self.tail = [self.profile_table(), self.arena_helpers(), body, prepare]
        return "\n".join([*out, *self.parts, *self.tail])

    def units(self, count: int) -> list[str]:
        """The same program as `emit`'s source, as 1 + `count` translation units: the
        globals, `dlpc_main` and `dlpc_prepare` with a prototype per kernel, then the
        kernel functions in `count` units of about equal length (hidden symbols), which
        a build compiles in parallel (`cbuild.build`). Call after `emit`."""
        main = "\n".join([*self.head, *(proto for proto, _ in self.split), *self.tail])
        groups: list[list[str]] = [[] for _ in range(count)]
        sizes = [0] * count
        for _, text in sorted(self.split, key=lambda pt: -len(pt[1])):
            k = sizes.index(min(sizes))
            groups[k].append(text)
            sizes[k] += len(text)
        head = [c_comment("generated by dlpc (C backend): kernels; do not edit"), KERNEL_PRELUDE]
        return [main, *("\n".join([*head, *g]) for g in groups if g)]

    def arena_helpers(self) -> str:
        """The resident arena of the memory plan (passes/lower/memory_plan.py): allocated
        on the first call and kept; a call that finds it in use (another thread calling
        the same model) allocates one of its own for that call."""
        if not self.arena_bytes:
            return ""
        n = self.arena_bytes
        return f"""\
/* the memory plan's arena: {n} bytes for every intermediate of dlpc_main */
#include <stdatomic.h>
static unsigned char *dlpc_arena;
static atomic_flag dlpc_arena_busy = ATOMIC_FLAG_INIT;

static unsigned char *dlpc_arena_acquire(void)
{{
  if (atomic_flag_test_and_set(&dlpc_arena_busy))
    return (unsigned char *)dlpc_alloc({n}, 1, "the memory plan's arena");
  if (!dlpc_arena)
    dlpc_arena = (unsigned char *)dlpc_alloc({n}, 1, "the memory plan's arena");
  if (!dlpc_arena)
    atomic_flag_clear(&dlpc_arena_busy);
  return dlpc_arena;
}}

static void dlpc_arena_release(unsigned char *arena)
{{
  if (arena == dlpc_arena)
    atomic_flag_clear(&dlpc_arena_busy);
  else
    free(arena);
}}
"""

    def profile_table(self) -> str:
        """Under DLPC_PROFILE: the kernels' names in call order and their accumulated
        seconds (read by backends/runtime/profile.py)."""
        n = len(self.called)
        names = ", ".join(c_string(k.sym) for k in self.called) or "0"
        return (
            "#ifdef DLPC_PROFILE\n"
            f"int dlpc_num_kernels = {n};\n"
            f"const char *dlpc_kernel_names[{max(n, 1)}] = {{{names}}};\n"
            f"double dlpc_kernel_seconds[{max(n, 1)}];\n"
            f"static double dlpc_kernel_start[{max(n, 1)}];\n"
            "#endif\n"
        )

    def global_(self, op: memref.GlobalOp) -> str:
        shape, elt = memref_info(op.type)
        name = self.top.fresh(op.sym_name.data, kind="g")
        self.globals[op.sym_name.data] = name
        n = max(math.prod(shape), 1)
        const = "const " if op.constant is not None else ""
        init = op.initial_value
        if not isinstance(init, DenseIntOrFPElementsAttr):
            return f"static {c_type(elt)} {name}[{n}];\n"
        raw = init.get_values()
        values = [v for v in raw if not isinstance(v, tuple)]
        if len(values) != len(raw):  # (a complex element: no memref dlpc makes has one)
            raise DlpcError(f"error: memref.global @{op.sym_name.data}: complex values")
        # (a splat's get_values has every element: test_a_splat_global_fills_every_element)
        if isinstance(elt, IntegerType | IndexType):
            body = ", ".join(int_literal(int(v), elt) for v in values)
        else:
            body = ", ".join(float_literal(v, elt) for v in values)
        return f"static {const}{c_type(elt)} {name}[{n}] = {{{body}}};\n"

    def main(self, fn: func.FuncOp) -> str:
        w = FunctionWriter(self, Scope(self.top.used), "@main")
        n_in, params, _ = calling_convention(fn)
        doc = [f"int dlpc_main(void **args): {len(fn.body.block.args)} arguments, 0 on success"]
        for k, hint, _, shape, t in w.main_arguments(fn):
            role = "input" if k < n_in else "param" if k < n_in + len(params) else "output"
            dims = "x".join(str(d) for d in shape) or "scalar"
            doc.append(f"  args[{k}] {role:6} {hint}: {t}[{dims}]")
        w.team_start = team_region(fn)
        if w.team_start is None:
            w.block(fn.body.block)
        else:
            w.team_block(fn.body.block, w.team_start)
        w.free_heap()
        if w.arena_name:
            w.line(f"dlpc_arena_release({w.arena_name});")
        w.line("return 0;")
        return w.function("\n".join(c_comment(line) for line in doc), "int dlpc_main(void **args)")

    def prepare(self, fn: func.FuncOp) -> str:
        """`int dlpc_prepare(void **args)`: @main's `dlpc.prepare` kernels, which fill the
        packed block from the params, and the top-level ops they need (the block, its
        views, constants); empty when @main has no packed block."""
        block = fn.body.block
        kernels = [op for op in block.ops if isinstance(op, KernelOp) and PREPARE in op.attributes]
        if not self.packed_bytes:
            return ""
        needed: set[Operation] = set(kernels)
        work = [v for k in kernels for v in kernel_uses(k)[0]]
        while work:
            owner = work.pop().owner
            if isinstance(owner, Operation) and owner.parent_block() is block:
                if owner not in needed:
                    needed.add(owner)
                    work.extend(owner.operands)
        w = FunctionWriter(self, Scope(self.top.used), "dlpc_prepare")
        for _ in w.main_arguments(fn):
            pass
        for op in block.ops:
            if op in needed:
                w.op(op)
        w.free_heap()
        w.line("return 0;")
        n, size = self.num_args, self.packed_bytes
        head = (
            f"/* the resident packed weights: {size} bytes, args[{n}] of dlpc_main and\n"
            "   dlpc_prepare, filled from the params by dlpc_prepare (0 on success) */\n"
            f"const size_t dlpc_packed_bytes = {size};\n"
            f"const int dlpc_num_args = {n};\n"
        )
        signature = "int dlpc_prepare(void **args)"
        return head + "\n" + w.function(c_comment("fills the packed weights"), signature)

    def call_kernel(self, caller: FunctionWriter, k: KernelOp) -> None:
        """Emit `k` as a function (its free values become parameters) and call it; inside
        @main's team region a kernel whose loop the team shares calls a copy of it whose
        parallel loop is a worksharing loop (`team_kind`), a serial kernel runs on one
        thread (`omp single`)."""
        role = team_kind(k) if caller.in_team else None
        fname, call_args, fails = self.kernel_function(caller, k, role == "loop")
        call = f"{fname}({', '.join(call_args)})"
        if PREPARE in k.attributes:  # in dlpc_prepare: no part of a call's profile
            caller.line(f"if ({call}) {caller.fail()}" if fails else f"{call};")
            return
        if k not in self.called:  # (called twice: in and out of @main's team region)
            self.called.append(k)
        index = self.called.index(k)  # its timer under DLPC_PROFILE
        if caller.in_team and fails:  # (`team_kind` said no: no `return` may leave a region)
            raise DlpcError(f"error: c backend: kernel '{k.sym}' may fail in a team region")
        if role == "single":  # one thread of the team; the others wait at its end
            caller.pragma("omp single")
            caller.line("{")
            caller.depth += 1
        # (a kernel whose loop the team shares: timed on one thread, after its barrier)
        first = "if (dlpc_team_first()) " if role == "loop" else ""
        caller.line(f"{first}DLPC_PROF_BEGIN({index});")
        caller.line(f"if ({call}) {caller.fail()}" if fails else f"{call};")
        caller.line(f"{first}DLPC_PROF_END({index});")
        if role == "single":
            caller.depth -= 1
            caller.line("}")

    def kernel_function(
        self, caller: FunctionWriter, k: KernelOp, team: bool
    ) -> tuple[str, list[str], bool]:
        """The function of kernel `k` (its team region copy when `team`), emitted unless
        the same text up to names was: (its name, the call's arguments, whether it may
        return 1)."""
        free, stored = kernel_uses(k)
        w = FunctionWriter(self, Scope(self.top.used), f"kernel '{k.sym}'")
        w.team_loop = team
        params, call_args, names = [], [], []
        shared = may_share_bytes(caller, free)
        for v in free:
            prefix, name, arg = w.parameter(caller, v, v in stored)
            restrict = "" if v in shared else "restrict "
            params.append(f"{prefix}{restrict}{name}" if prefix.endswith("*") else prefix + name)
            call_args.append(arg)
            names.append(name)
        w.block(k.block)
        w.free_heap()
        if w.may_fail:  # 1: an allocation failed (recorded by dlpc_alloc), 0: done
            w.line("return 0;")
        kind = "int" if w.may_fail else "void"
        key = function_key(kind, params, w.lines, names)
        if key in self.functions:  # the same function up to names: call that one
            return self.functions[key], call_args, w.may_fail
        fname = self.kernel_names[k]
        # the team's copy, or a second text of `k` (its calls in and out of @main's team
        # region may name its parameters apart): a function name of its own
        if team or fname in self.functions.values():
            fname = self.top.fresh(f"{k.sym}_team" if team else k.sym, kind="kernel")
        self.functions[key] = fname
        note = f"the team's copy of {kernel_note(k)}" if team else kernel_note(k)
        signature = f"{KERNEL_ATTRIBUTES} static {kind} {fname}({', '.join(params) or 'void'})"
        self.parts.append(w.function(c_comment(note), signature))
        hidden = f"{KERNEL_ATTRIBUTES} {HIDDEN} {kind} {fname}({', '.join(params) or 'void'})"
        self.split.append((f"{hidden};", w.function(c_comment(note), hidden)))
        return fname, call_args, w.may_fail


def function_key(kind: str, params: list[str], lines: list[str], names: list[str]):
    """A kernel function's text with its parameters' names numbered in order (its own name
    is not in it): two kernels with one key compute the same on their arguments, so one
    function serves both (a training step's backward repeats its kernels: resnet's has
    354, 210 distinct, ~30 % less C to compile)."""
    if not names:
        return (kind, *params, *lines)
    number = {n: f"\0{i}" for i, n in enumerate(names)}
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b")
    text = "\n".join([*params, *lines])
    return (kind, pattern.sub(lambda m: number[m.group(0)], text))


def may_share_bytes(caller: FunctionWriter, values: list[SSAValue]) -> set[SSAValue]:
    """The memref values among `values` that may share bytes with another of them (an
    in-place output over its input, an alias of a reshape): not `restrict`."""
    spans = [
        (v, caller.buffer(v))
        for v in values
        if isinstance(v.type, MemRefType) and v in caller.buffers
    ]
    shared = set()
    for i, (v1, b1) in enumerate(spans):
        for v2, b2 in spans[i + 1 :]:
            if (b1.root or b1.name) != (b2.root or b2.name):
                continue
            if (
                b1.span is None
                or b2.span is None
                or (b1.span[0] < b2.span[1] and b2.span[0] < b1.span[1])
            ):
                shared |= {v1, v2}
    return shared


def _c_writes(op: Operation) -> SSAValue | None:
    """The memref a loop-level op stores into, if any."""
    return op.operands[1] if isinstance(op, memref.StoreOp | memref.CopyOp) else None


def kernel_uses(
    k: Operation, writes: Callable[[Operation], SSAValue | None] = _c_writes
) -> tuple[list[SSAValue], set[SSAValue]]:
    """The values kernel `k` uses from outside it, in order of first use, and those of
    them `writes(op)` names as stored into by an op of `k`."""
    free: list[SSAValue] = []
    stored: set[SSAValue] = set()
    for op in k.walk():
        for v in op.operands:
            if not defined_inside(v, k) and v not in free:
                free.append(v)
        written = writes(op)
        if written is not None:
            stored.add(written)
    return free, stored


def kernel_note(k: NamedKernelSyntax) -> str:
    """`kernel "relu_0" (from graph.relu)`: a kernel's name and the graph op it came from."""
    attr = k.attributes.get("origin")  # (loop.kernel and dlp.kernel both have it)
    origin = attr.data if isinstance(attr, StringAttr) else None
    return f'kernel "{k.sym}"' + (f" (from {origin})" if origin else "")


def is_prepare(k: Operation) -> bool:
    """A `dlpc.prepare` kernel (loop-prepack-weights): it runs in dlpc_prepare, once per
    binding of the weights, not in a call of dlpc_main."""
    return PREPARE in k.attributes


def find_main(module: ModuleOp) -> func.FuncOp:
    funcs = [op for op in module.body.block.ops if isinstance(op, func.FuncOp)]
    for f in funcs:
        if f.sym_name.data == "main":
            return f
    if len(funcs) == 1:
        return funcs[0]
    raise DlpcError("error: c backend: the module has no func.func @main")


def argument_names(fn: func.FuncOp) -> list[str]:
    """Source-level names of @main's arguments: inputs (`dlpc.name` or `in<k>`), params
    (from `dlpc.params`), outputs (`out<k>`). Unsanitised; callers sanitise."""
    args = fn.body.block.args
    n_in, params, n_out = calling_convention(fn)
    names = []
    arg_attrs = fn.arg_attrs.data if isinstance(fn.arg_attrs, ArrayAttr) else [None] * len(args)
    for k, arg in enumerate(args):
        attrs = arg_attrs[k] if k < len(arg_attrs) else None
        given = attrs.data.get("dlpc.name") if isinstance(attrs, DictionaryAttr) else None
        if isinstance(given, StringAttr):
            names.append(given.data)
        elif n_in <= k < n_in + len(params):
            names.append(params[k - n_in])
        elif k >= n_in + len(params):
            names.append(f"out{k - n_in - len(params)}")
        else:
            names.append(arg.name_hint or f"in{k}")
    return names


def calling_convention(fn: func.FuncOp) -> tuple[int, list[str], int]:
    """(number of inputs, parameter names, number of outputs) of a loop-level @main;
    without the attributes every argument counts as an input."""
    attrs = fn.attributes
    n_args = len(fn.body.block.args)
    params_attr = attrs.get("dlpc.params")
    params = [p.data for p in params_attr.data] if isinstance(params_attr, ArrayAttr) else []
    n_out_attr = attrs.get("dlpc.num_outputs")
    n_out = n_out_attr.value.data if isinstance(n_out_attr, IntegerAttr) else 0
    n_in_attr = attrs.get("dlpc.num_inputs")
    if isinstance(n_in_attr, IntegerAttr):
        n_in = n_in_attr.value.data
    else:
        n_in = n_args - len(params) - n_out
    if n_in + len(params) + n_out != n_args:
        raise DlpcError(
            f"error: @main has {n_args} arguments but its attributes say {n_in} inputs, "
            f"{len(params)} params and {n_out} outputs"
        )
    return n_in, params, n_out


def emit_c(module: ModuleOp) -> str:
    """The C translation unit for a loop-level module (see the module docstring)."""
    return CEmitter(module).emit()


def emit_c_units(module: ModuleOp, count: int = 3, min_bytes: int = 0) -> tuple[str, list[str]]:
    """`emit_c`'s source and the same program as several translation units
    (`CEmitter.units`): the build compiles the kernels of a large model in parallel.
    A source under `min_bytes` gets no units (nor the work of making them)."""
    emitter = CEmitter(module)
    source = emitter.emit()
    return source, emitter.units(count) if len(source) >= min_bytes else []


@dataclass(frozen=True)
class CTarget(Target):
    """`dlpc-opt -t c`: print the C source of a loop-level module."""

    name = "c"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(emit_c(module))


def in_omp_loop(op: Operation) -> bool:
    """Whether `op` is inside a loop emitted under an OpenMP pragma (`parallel`,
    `vectorize`), where a `return` is not allowed."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, NamedKernelSyntax):
        if isinstance(parent, ForOp) and (
            parent.parallel is not None
            or parent.vectorize is not None
            or TEAM_LOOP in parent.attributes
        ):
            return True
        parent = parent.parent_op()
    return False


def kernel_for(alloc: Operation) -> str:
    """`kernel 'K'`: the first kernel of @main that uses the buffer `alloc` makes."""
    buffer = alloc.results[0]
    op = alloc.next_op
    while op is not None:
        # loop.kernel, dlp.kernel
        if isinstance(op, NamedKernelSyntax) and any(
            op.is_ancestor(u.operation) for u in buffer.uses
        ):
            return f"kernel '{op.sym}'"
        op = op.next_op
    return "@main"
