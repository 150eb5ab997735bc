/* dlp_sim.h -- a host simulator for BANG-style DLP C emitted by dlpc.
 *
 * The generated translation unit defines the target's facts as macros (DLP_CLUSTERS,
 * DLP_CORES_PER_CLUSTER, DLP_NRAM_BYTES, DLP_WRAM_BYTES, DLP_SRAM_BYTES, DLP_DMA_ALIGN,
 * DLP_VECTOR_ALIGN, DLP_TP_<intrinsic>), then includes this header. Every task of a
 * kernel runs as one POSIX thread with its own NRAM/WRAM arena (its core's) and its
 * cluster's SRAM arena, so barriers and SRAM sharing behave as on the machine.
 *
 * Checked at run time, each failure recorded once as a one-line message (the op is then
 * skipped; dlpc_main returns 2 and the Python runtime raises it):
 *   - capacities: a kernel's scratchpad reservation must fit the space;
 *   - ranges: every copy and intrinsic operand lies inside its space's arena, GDRAM
 *     operands inside a registered GDRAM buffer, on-chip operands inside the scratchpad
 *     buffer they point into, as the kernel allocated it (`__dlp_scratch`);
 *   - directions: the spaces of source and destination match the copy's direction;
 *   - alignment: on-chip DMA addresses on DLP_DMA_ALIGN, intrinsic operands on
 *     DLP_VECTOR_ALIGN.
 *   - asynchronous copies: a copy completes when issued, so the simulator checks what
 *     makes that equal to the machine's later completion: until `__sync_io()`, no DMA or
 *     intrinsic operand may overlap the destination of an outstanding `__memcpy_async`,
 *     nor write over its source; `__sync_cluster()` with a copy into SRAM outstanding
 *     and a task that ends with copies outstanding are errors.
 * Counted per task: bytes moved per (source, destination) space pair, DMA count,
 * intrinsic cycles (work / throughput), scalar operations, intrinsic work (flops), and
 * the DMAs whose latency is hidden: the n copies issued between two waits take
 * ceil(n / DLP_DMA_QUEUE_DEPTH) latencies (up to the queue depth in flight at once),
 * so n - ceil(n / depth) of them add none.
 */
#ifndef DLP_SIM_H
#define DLP_SIM_H

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DLP_CORES (DLP_CLUSTERS * DLP_CORES_PER_CLUSTER)

/* memory-space qualifiers: on the simulator a scratchpad buffer is a pointer into its
 * core's (or cluster's) arena, so the qualifiers only document where it lives */
#define __nram__
#define __wram__
#define __mlu_shared__
#define __mlu_entry__ static
#define __mlu_func__ static

enum dlp_space { DLP_GDRAM = 0, DLP_SRAM = 1, DLP_NRAM = 2, DLP_WRAM = 3 };
static const char *const dlp_space_names[4] = {"gdram", "sram", "nram", "wram"};

/* directions: SRC * 4 + DST */
#define DLP_DIR(s, d) ((s) * 4 + (d))
#define GDRAM2GDRAM DLP_DIR(DLP_GDRAM, DLP_GDRAM)
#define GDRAM2SRAM DLP_DIR(DLP_GDRAM, DLP_SRAM)
#define GDRAM2NRAM DLP_DIR(DLP_GDRAM, DLP_NRAM)
#define GDRAM2WRAM DLP_DIR(DLP_GDRAM, DLP_WRAM)
#define SRAM2GDRAM DLP_DIR(DLP_SRAM, DLP_GDRAM)
#define SRAM2SRAM DLP_DIR(DLP_SRAM, DLP_SRAM)
#define SRAM2NRAM DLP_DIR(DLP_SRAM, DLP_NRAM)
#define SRAM2WRAM DLP_DIR(DLP_SRAM, DLP_WRAM)
#define NRAM2GDRAM DLP_DIR(DLP_NRAM, DLP_GDRAM)
#define NRAM2SRAM DLP_DIR(DLP_NRAM, DLP_SRAM)
#define NRAM2NRAM DLP_DIR(DLP_NRAM, DLP_NRAM)
#define NRAM2WRAM DLP_DIR(DLP_NRAM, DLP_WRAM)
#define WRAM2GDRAM DLP_DIR(DLP_WRAM, DLP_GDRAM)
#define WRAM2SRAM DLP_DIR(DLP_WRAM, DLP_SRAM)
#define WRAM2NRAM DLP_DIR(DLP_WRAM, DLP_NRAM)
#define WRAM2WRAM DLP_DIR(DLP_WRAM, DLP_WRAM)

/* ------------------------------------------------------------------ state */

typedef struct {
  double bytes[16]; /* per direction */
  double dma_count;
  double intrinsic_cycles;
  double intrinsic_ops; /* flops done by intrinsics (a MAC counts 2) */
  double scalar_ops;
  double dma_hidden; /* DMAs whose latency ran under an earlier one's (async, same wait) */
} dlp_counters;

static __thread int taskId, clusterId, coreId;
static __thread char *__nram_base, *__wram_base, *__sram_base;
static __thread dlp_counters *dlp_here;
static __thread const char *dlp_kernel_name;

static char *dlp_nram_arena, *dlp_wram_arena, *dlp_sram_arena;
static pthread_barrier_t dlp_cluster_barrier[DLP_CLUSTERS];
static pthread_barrier_t dlp_all_barrier;
static pthread_mutex_t dlp_lock = PTHREAD_MUTEX_INITIALIZER;
static char dlp_error_text[512];
static int dlp_failed, dlp_failed_task;
static const char *dlp_failed_kernel;

#define DLP_MAX_GDRAM 4096
static struct { const char *p; size_t n; } dlp_gdram[DLP_MAX_GDRAM];
static int dlp_num_gdram;

#define DLP_MAX_RECORDS 1024
typedef struct {
  char name[96];
  char origin[64];
  int tasks;
  int double_buffered;
  dlp_counters task[DLP_CORES];
} dlp_record;
static dlp_record dlp_records[DLP_MAX_RECORDS];
static int dlp_num_records;

/* A launch's tasks run concurrently and each runs to its end, so the error kept is the
   first one of the first failing launch's lowest-numbered failing task: the same message
   whatever the threads' order. */
static void dlp_fail(const char *fmt, ...)
{
  pthread_mutex_lock(&dlp_lock);
  if (!dlp_failed || (dlp_kernel_name == dlp_failed_kernel && taskId < dlp_failed_task)) {
    int k = snprintf(dlp_error_text, sizeof dlp_error_text, "kernel '%s' task %d: ",
                     dlp_kernel_name ? dlp_kernel_name : "?", taskId);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dlp_error_text + k, sizeof dlp_error_text - k, fmt, ap);
    va_end(ap);
    dlp_failed = 1;
    dlp_failed_task = taskId;
    dlp_failed_kernel = dlp_kernel_name;
  }
  pthread_mutex_unlock(&dlp_lock);
}

/* exported to the Python runtime */
const char *dlp_error(void) { return dlp_failed ? dlp_error_text : ""; }
void dlp_reset(void) { dlp_failed = 0; dlp_failed_kernel = 0; dlp_error_text[0] = 0; dlp_num_records = 0; dlp_num_gdram = 0; }
int dlp_record_count(void) { return dlp_num_records; }
int dlp_record_tasks(int i) { return dlp_records[i].tasks; }
int dlp_record_double(int i) { return dlp_records[i].double_buffered; }
const char *dlp_record_name(int i) { return dlp_records[i].name; }
const char *dlp_record_origin(int i) { return dlp_records[i].origin; }
/* 21 doubles per task: bytes[16], dma_count, intrinsic_cycles, intrinsic_ops, scalar_ops,
 * dma_hidden */
const double *dlp_record_counters(int i, int task) { return (const double *)&dlp_records[i].task[task]; }

/* ------------------------------------------------------------------ GDRAM */

static void __dlp_gdram(const void *p, size_t bytes)
{
  if (dlp_num_gdram < DLP_MAX_GDRAM) {
    dlp_gdram[dlp_num_gdram].p = (const char *)p;
    dlp_gdram[dlp_num_gdram].n = bytes;
    dlp_num_gdram++;
  }
}

static void __dlp_gdram_release(const void *p)
{
  for (int k = 0; k < dlp_num_gdram; k++)
    if (dlp_gdram[k].p == (const char *)p) dlp_gdram[k] = dlp_gdram[--dlp_num_gdram];
}

/* ------------------------------------------------------------------ checks */

static int dlp_space_of(const void *p)
{
  const char *c = (const char *)p;
  if (c >= dlp_nram_arena && c < dlp_nram_arena + (size_t)DLP_CORES * DLP_NRAM_BYTES) return DLP_NRAM;
  if (c >= dlp_wram_arena && c < dlp_wram_arena + (size_t)DLP_CORES * DLP_WRAM_BYTES) return DLP_WRAM;
  if (c >= dlp_sram_arena && c < dlp_sram_arena + (size_t)DLP_CLUSTERS * DLP_SRAM_BYTES) return DLP_SRAM;
  return DLP_GDRAM;
}

/* this task's scratchpad buffers as the kernel allocated them: an operand that starts in
 * one must end in it (a buffer placed too small would otherwise run into its neighbour
 * or into unused arena and still compute) */
#define DLP_MAX_SCRATCH 256
static __thread struct { const char *p; size_t n; const char *name; } dlp_scratch[DLP_MAX_SCRATCH];
static __thread int dlp_num_scratch, dlp_scratch_overflow;

static void __dlp_scratch(const void *p, size_t bytes, const char *name)
{
  for (int k = 0; k < dlp_num_scratch; k++)  /* an allocation inside a loop: once */
    if (dlp_scratch[k].p == (const char *)p && dlp_scratch[k].name == name) return;
  if (dlp_num_scratch == DLP_MAX_SCRATCH) { dlp_scratch_overflow = 1; return; }
  dlp_scratch[dlp_num_scratch].p = (const char *)p;
  dlp_scratch[dlp_num_scratch].n = bytes;
  dlp_scratch[dlp_num_scratch].name = name;
  dlp_num_scratch++;
}

/* does [p, p+bytes) stay inside the scratchpad buffer p points into? */
static int dlp_in_buffer(const char *c, size_t bytes, int space, const char *what, const char *op)
{
  if (!bytes || dlp_scratch_overflow) return 1;
  for (int k = 0; k < dlp_num_scratch; k++) {
    const char *lo = dlp_scratch[k].p;
    if (c < lo || c >= lo + dlp_scratch[k].n) continue;
    if (c + bytes <= lo + dlp_scratch[k].n) return 1;
    dlp_fail("%s: %s [%zu, %zu) overruns %s buffer '%s' (%zu bytes)", op, what, (size_t)(c - lo),
             (size_t)(c - lo) + bytes, dlp_space_names[space], dlp_scratch[k].name, dlp_scratch[k].n);
    return 0;
  }
  for (int k = 0; k < dlp_num_scratch; k++)  /* the kernel allocates in this space */
    if (dlp_space_of(dlp_scratch[k].p) == space) {
      dlp_fail("%s: %s (%zu bytes) lies in no allocated %s buffer", op, what, bytes, dlp_space_names[space]);
      return 0;
    }
  return 1;
}

/* this task's asynchronous copies issued since its last __sync_io() */
#define DLP_MAX_PENDING 256
static __thread struct { const char *dst, *src; size_t n; int dir; } dlp_pending[DLP_MAX_PENDING];
static __thread int dlp_num_pending, dlp_pending_overflow;

static int dlp_overlaps(const char *a, size_t na, const char *b, size_t nb)
{
  return na && nb && a < b + nb && b < a + na;
}

/* may [p, p+bytes) be read (and, with `writes`, written) now? Not while an outstanding
 * asynchronous copy writes it, nor written while one reads it */
static int dlp_no_hazard(const void *p, size_t bytes, int writes, const char *what, const char *op)
{
  const char *c = (const char *)p;
  for (int k = 0; k < dlp_num_pending && !dlp_pending_overflow; k++) {
    if (dlp_overlaps(c, bytes, dlp_pending[k].dst, dlp_pending[k].n)) {
      dlp_fail("%s: %s overlaps the destination of an asynchronous copy not yet waited for "
               "(__sync_io)", op, what);
      return 0;
    }
    if (writes && dlp_overlaps(c, bytes, dlp_pending[k].src, dlp_pending[k].n)) {
      dlp_fail("%s: %s overwrites the source of an asynchronous copy not yet waited for "
               "(__sync_io)", op, what);
      return 0;
    }
  }
  return 1;
}

/* is [p, p+bytes) inside this task's instance of `space`? */
static int dlp_in_space(const void *p, size_t bytes, int space, const char *what, const char *op)
{
  const char *c = (const char *)p, *lo = 0;
  size_t cap = 0;
  switch (space) {
  case DLP_NRAM: lo = __nram_base; cap = DLP_NRAM_BYTES; break;
  case DLP_WRAM: lo = __wram_base; cap = DLP_WRAM_BYTES; break;
  case DLP_SRAM: lo = __sram_base; cap = DLP_SRAM_BYTES; break;
  default:
    for (int k = 0; k < dlp_num_gdram; k++)
      if (c >= dlp_gdram[k].p && c + bytes <= dlp_gdram[k].p + dlp_gdram[k].n) return 1;
    dlp_fail("%s: %s (%zu bytes) is not inside a gdram buffer", op, what, bytes);
    return 0;
  }
  if (dlp_space_of(p) != space) {
    dlp_fail("%s: %s is in %s, expected %s", op, what, dlp_space_names[dlp_space_of(p)],
             dlp_space_names[space]);
    return 0;
  }
  if (c < lo || c + bytes > lo + cap) {
    dlp_fail("%s: %s [%zu, %zu) is outside this core's %s (%zu bytes)", op, what,
             (size_t)(c - lo), (size_t)(c - lo) + bytes, dlp_space_names[space], cap);
    return 0;
  }
  return dlp_in_buffer(c, bytes, space, what, op);
}

static int dlp_aligned(const void *p, int align, const char *what, const char *op)
{
  if (((uintptr_t)p) % align) {
    dlp_fail("%s: %s is not aligned to %d bytes", op, what, align);
    return 0;
  }
  return 1;
}

/* the kernel's scratchpad plan, checked against the capacities */
static void __dlp_reserve(int space, size_t bytes)
{
  size_t cap = space == DLP_NRAM ? DLP_NRAM_BYTES : space == DLP_WRAM ? DLP_WRAM_BYTES : DLP_SRAM_BYTES;
  if (bytes > cap) dlp_fail("needs %zu bytes of %s but the target has %zu", bytes, dlp_space_names[space], cap);
}

/* ------------------------------------------------------------------ DMA */

static void dlp_copy(void *dst, const void *src, size_t bytes, int dir, int async, const char *op)
{
  int s = dir / 4, d = dir % 4;
  if (!dlp_in_space(dst, bytes, d, "destination", op) || !dlp_in_space(src, bytes, s, "source", op)) return;
  if ((s != DLP_GDRAM && !dlp_aligned(src, DLP_DMA_ALIGN, "source", op))
      || (d != DLP_GDRAM && !dlp_aligned(dst, DLP_DMA_ALIGN, "destination", op)))
    return;
  if (!dlp_no_hazard(dst, bytes, 1, "destination", op) || !dlp_no_hazard(src, bytes, 0, "source", op))
    return;
  memmove(dst, src, bytes);
  dlp_here->bytes[dir] += (double)bytes;
  dlp_here->dma_count += 1;
  if (!async) return;
  if (dlp_num_pending == DLP_MAX_PENDING) {  /* (still counted; ranges no longer checked) */
    dlp_pending_overflow = 1;
    dlp_num_pending--;
  }
  dlp_pending[dlp_num_pending].dst = (const char *)dst;
  dlp_pending[dlp_num_pending].src = (const char *)src;
  dlp_pending[dlp_num_pending].n = bytes;
  dlp_pending[dlp_num_pending].dir = dir;
  dlp_num_pending++;
}

/* the simulator completes a copy when it is issued; the checks above make that what the
 * machine computes, and __sync_io charges the outstanding copies' latencies: n copies,
 * up to DLP_DMA_QUEUE_DEPTH in flight, take ceil(n / depth) latencies */
static __thread double dlp_issued; /* async copies since the last wait */

static void dlp_copy_async(void *dst, const void *src, size_t bytes, int dir)
{
  double before = dlp_here->dma_count;
  dlp_copy(dst, src, bytes, dir, 1, "__memcpy_async");
  dlp_issued += dlp_here->dma_count - before;
}

/* BANG's strided form: segnum + 1 segments of `bytes`, segment i from src + i *
 * src_stride to dst + i * dst_stride; one DMA (one latency), every segment checked */
static void dlp_copy_strided(void *dst, const void *src, size_t bytes, int dir, long dst_stride,
                             long src_stride, long segnum)
{
  const char *op = "__memcpy_async (strided)";
  if (segnum < 0 || (segnum > 0 && dst_stride < (long)bytes)) {
    dlp_fail("%s: %ld segments of %zu bytes at destination stride %ld", op, segnum + 1, bytes, dst_stride);
    return;
  }
  double before = dlp_here->dma_count;
  for (long i = 0; i <= segnum; i++)
    dlp_copy((char *)dst + i * dst_stride, (const char *)src + i * src_stride, bytes, dir, 1, op);
  if (dlp_here->dma_count - before == (double)(segnum + 1)) {
    dlp_here->dma_count = before + 1; /* one descriptor */
    dlp_issued += 1;
  }
}

static void __sync_io(void)
{
  if (dlp_issued > 0)
    dlp_here->dma_hidden += dlp_issued - ceil(dlp_issued / DLP_DMA_QUEUE_DEPTH);
  dlp_issued = 0;
  dlp_num_pending = dlp_pending_overflow = 0;
}

#define __memcpy(dst, src, bytes, dir) dlp_copy((dst), (src), (size_t)(bytes), (dir), 0, "__memcpy")
#define DLP_ASYNC4(dst, src, bytes, dir) dlp_copy_async((dst), (src), (size_t)(bytes), (dir))
#define DLP_ASYNC7(dst, src, bytes, dir, ds, ss, segnum) \
  dlp_copy_strided((dst), (src), (size_t)(bytes), (dir), (long)(ds), (long)(ss), (long)(segnum))
#define DLP_PICK(a, b, c, d, e, f, g, name, ...) name
/* `__memcpy_async(dst, src, bytes, DIR)` or BANG's strided 7-argument form */
#define __memcpy_async(...) DLP_PICK(__VA_ARGS__, DLP_ASYNC7, _6, _5, DLP_ASYNC4, _3, _2, _1)(__VA_ARGS__)

static void __sync_cluster(void)
{
  for (int k = 0; k < dlp_num_pending; k++)
    if (dlp_pending[k].dir % 4 == DLP_SRAM) {
      dlp_fail("__sync_cluster: an asynchronous copy into SRAM is not yet waited for (__sync_io)");
      break;
    }
  pthread_barrier_wait(&dlp_cluster_barrier[clusterId]);
}
static void __sync_all(void) { pthread_barrier_wait(&dlp_all_barrier); }

/* ------------------------------------------------------------------ intrinsics */

#define DLP_CYCLES(name, work) (dlp_here->intrinsic_cycles += ceil((double)(work) / (DLP_TP_##name)))
#define DLP_VEC(p, n, what, op) \
  (dlp_in_space((p), (size_t)(n) * sizeof(float), DLP_NRAM, what, op) && dlp_aligned((p), DLP_VECTOR_ALIGN, what, op) \
   && dlp_no_hazard((p), (size_t)(n) * sizeof(float), what[0] == 'd', what, op))

#define DLP_BINARY(fname, name, expr)                                                         \
  static void fname(float *dst, const float *a, const float *b, int64_t n)                    \
  {                                                                                           \
    if (!DLP_VEC(dst, n, "dst", #fname) || !DLP_VEC(a, n, "lhs", #fname) || !DLP_VEC(b, n, "rhs", #fname)) \
      return;                                                                                 \
    for (int64_t i = 0; i < n; i++) dst[i] = (expr);                                          \
    DLP_CYCLES(name, n);                                                                      \
    dlp_here->intrinsic_ops += (double)n;                                                     \
  }
DLP_BINARY(__bang_add, add, a[i] + b[i])
DLP_BINARY(__bang_sub, sub, a[i] - b[i])
DLP_BINARY(__bang_mul, mul, a[i] * b[i])
DLP_BINARY(__bang_div, div, a[i] / b[i])
DLP_BINARY(__bang_maxequal, max, (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i])
DLP_BINARY(__bang_minequal, min, (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i])

#define DLP_SCALAR(fname, name, expr)                                                         \
  static void fname(float *dst, const float *a, float s, int64_t n)                           \
  {                                                                                           \
    if (!DLP_VEC(dst, n, "dst", #fname) || !DLP_VEC(a, n, "src", #fname)) return;             \
    for (int64_t i = 0; i < n; i++) dst[i] = (expr);                                          \
    DLP_CYCLES(name, n);                                                                      \
    dlp_here->intrinsic_ops += (double)n;                                                     \
  }
DLP_SCALAR(__bang_add_scalar, add_scalar, a[i] + s)
DLP_SCALAR(__bang_mul_scalar, mul_scalar, a[i] * s)
DLP_SCALAR(__bang_maxeq_scalar, max_scalar, (a[i] > s || a[i] != a[i]) ? a[i] : s)

#define DLP_CYCLE(fname, name, op_)                                                           \
  static void fname(float *dst, const float *a, const float *seg, int64_t n, int64_t m)      \
  {                                                                                           \
    if (m <= 0 || n % m) { dlp_fail(#fname ": count %lld is not a multiple of %lld", (long long)n, (long long)m); return; } \
    if (!DLP_VEC(dst, n, "dst", #fname) || !DLP_VEC(a, n, "src", #fname) || !DLP_VEC(seg, m, "seg", #fname)) \
      return;                                                                                 \
    for (int64_t i = 0; i < n; i++) dst[i] = a[i] op_ seg[i % m];                             \
    DLP_CYCLES(name, n);                                                                      \
    dlp_here->intrinsic_ops += (double)n;                                                     \
  }
DLP_CYCLE(__bang_cycle_add, cycle_add, +)
DLP_CYCLE(__bang_cycle_sub, cycle_sub, -)
DLP_CYCLE(__bang_cycle_mul, cycle_mul, *)

#define DLP_UNARY(fname, name, expr)                                                          \
  static void fname(float *dst, const float *a, int64_t n)                                    \
  {                                                                                           \
    if (!DLP_VEC(dst, n, "dst", #fname) || !DLP_VEC(a, n, "src", #fname)) return;             \
    for (int64_t i = 0; i < n; i++) { float x = a[i]; dst[i] = (expr); }                      \
    DLP_CYCLES(name, n);                                                                      \
    dlp_here->intrinsic_ops += (double)n;                                                     \
  }
DLP_UNARY(__bang_active_relu, relu, (x > 0.0f || x != x) ? x : 0.0f)
DLP_UNARY(__bang_active_sigmoid, sigmoid, 1.0f / (1.0f + expf(-x)))
DLP_UNARY(__bang_active_tanh, tanh, tanhf(x))
DLP_UNARY(__bang_active_exp, exp, expf(x))
DLP_UNARY(__bang_active_log, log, logf(x))
DLP_UNARY(__bang_active_sqrt, sqrt, sqrtf(x))

static void __bang_reduce_sum(float *dst, const float *a, int64_t rows, int64_t cols)
{
  if (!DLP_VEC(dst, rows, "dst", "__bang_reduce_sum") || !DLP_VEC(a, rows * cols, "src", "__bang_reduce_sum")) return;
  for (int64_t r = 0; r < rows; r++) {
    float s = 0.0f;
    for (int64_t c = 0; c < cols; c++) s += a[r * cols + c];
    dst[r] = s;
  }
  DLP_CYCLES(reduce_sum, rows * cols);
  dlp_here->intrinsic_ops += (double)(rows * cols);
}

static void __bang_reduce_max(float *dst, const float *a, int64_t rows, int64_t cols)
{
  if (!DLP_VEC(dst, rows, "dst", "__bang_reduce_max") || !DLP_VEC(a, rows * cols, "src", "__bang_reduce_max")) return;
  for (int64_t r = 0; r < rows; r++) {
    float s = -INFINITY;
    for (int64_t c = 0; c < cols; c++) {  /* NaN propagates, as maximumf and torch */
      float v = a[r * cols + c];
      s = (v > s || v != v) ? v : s;
    }
    dst[r] = s;
  }
  DLP_CYCLES(reduce_max, rows * cols);
  dlp_here->intrinsic_ops += (double)(rows * cols);
}

static void __bang_transpose(float *dst, const float *a, int64_t rows, int64_t cols)
{
  if (!DLP_VEC(dst, rows * cols, "dst", "__bang_transpose") || !DLP_VEC(a, rows * cols, "src", "__bang_transpose")) return;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[c * rows + r] = a[r * cols + c];
  DLP_CYCLES(transpose, rows * cols);
}

/* dst (m x n) = lhs (m x k) @ rhs; rhs in WRAM, k x n (or n x k when transposed) */
static void __bang_matmul(float *dst, const float *lhs, const float *rhs, int64_t m, int64_t k, int64_t n,
                          int transpose_rhs)
{
  const char *op = "__bang_matmul";
  if (!DLP_VEC(dst, m * n, "dst", op) || !DLP_VEC(lhs, m * k, "lhs", op)) return;
  if (!dlp_in_space(rhs, (size_t)(k * n) * sizeof(float), DLP_WRAM, "rhs", op) || !dlp_aligned(rhs, DLP_VECTOR_ALIGN, "rhs", op)
      || !dlp_no_hazard(rhs, (size_t)(k * n) * sizeof(float), 0, "rhs", op))
    return;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float s = 0.0f;
      for (int64_t r = 0; r < k; r++) s += lhs[i * k + r] * (transpose_rhs ? rhs[j * k + r] : rhs[r * n + j]);
      dst[i * n + j] = s;
    }
  DLP_CYCLES(matmul, m * k * n);
  dlp_here->intrinsic_ops += 2.0 * (double)(m * k * n);
}

/* direct convolution: src CHW, weight OIHW in WRAM, dst CHW; zero padding is implicit */
static void __bang_conv(float *dst, const float *src, const float *w, int64_t co, int64_t ci, int64_t h,
                        int64_t wd, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,
                        int64_t pb, int64_t pr)
{
  const char *op = "__bang_conv";
  int64_t oh = (h + pt + pb - kh) / sh + 1, ow = (wd + pl + pr - kw) / sw + 1;
  if (!DLP_VEC(dst, co * oh * ow, "dst", op) || !DLP_VEC(src, ci * h * wd, "src", op)) return;
  if (!dlp_in_space(w, (size_t)(co * ci * kh * kw) * sizeof(float), DLP_WRAM, "weight", op) || !dlp_aligned(w, DLP_VECTOR_ALIGN, "weight", op)
      || !dlp_no_hazard(w, (size_t)(co * ci * kh * kw) * sizeof(float), 0, "weight", op))
    return;
  for (int64_t o = 0; o < co; o++)
    for (int64_t y = 0; y < oh; y++)
      for (int64_t x = 0; x < ow; x++) {
        float s = 0.0f;
        for (int64_t c = 0; c < ci; c++)
          for (int64_t dy = 0; dy < kh; dy++) {
            int64_t iy = y * sh + dy - pt;
            if (iy < 0 || iy >= h) continue;
            for (int64_t dx = 0; dx < kw; dx++) {
              int64_t ix = x * sw + dx - pl;
              if (ix < 0 || ix >= wd) continue;
              s += src[(c * h + iy) * wd + ix] * w[((o * ci + c) * kh + dy) * kw + dx];
            }
          }
        dst[(o * oh + y) * ow + x] = s;
      }
  DLP_CYCLES(conv, co * oh * ow * ci * kh * kw);
  dlp_here->intrinsic_ops += 2.0 * (double)(co * oh * ow * ci * kh * kw);
}

/* window pooling of c CHW planes: max or sum over each window, cells outside the image
 * skipped; the work counted is every window cell inside the image */
static void dlp_pool(float *dst, const float *src, int64_t c, int64_t h, int64_t wd, int64_t kh, int64_t kw,
                     int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t oh, int64_t ow, int is_max,
                     const char *op)
{
  if (!DLP_VEC(dst, c * oh * ow, "dst", op) || !DLP_VEC(src, c * h * wd, "src", op)) return;
  int64_t cells = 0;
  for (int64_t k = 0; k < c; k++)
    for (int64_t y = 0; y < oh; y++)
      for (int64_t x = 0; x < ow; x++) {
        float s = is_max ? -INFINITY : 0.0f;
        for (int64_t dy = 0; dy < kh; dy++) {
          int64_t iy = y * sh + dy - pt;
          if (iy < 0 || iy >= h) continue;
          for (int64_t dx = 0; dx < kw; dx++) {
            int64_t ix = x * sw + dx - pl;
            if (ix < 0 || ix >= wd) continue;
            float v = src[(k * h + iy) * wd + ix];
            s = is_max ? ((v > s || v != v) ? v : s) : s + v;
            cells++;
          }
        }
        dst[(k * oh + y) * ow + x] = s;
      }
  DLP_CYCLES(pool, cells);
  dlp_here->intrinsic_ops += (double)cells;
}
#define __bang_maxpool(dst, src, c, h, wd, kh, kw, sh, sw, pt, pl, oh, ow) \
  dlp_pool((dst), (src), (c), (h), (wd), (kh), (kw), (sh), (sw), (pt), (pl), (oh), (ow), 1, "__bang_maxpool")
#define __bang_sumpool(dst, src, c, h, wd, kh, kw, sh, sw, pt, pl, oh, ow) \
  dlp_pool((dst), (src), (c), (h), (wd), (kh), (kw), (sh), (sw), (pt), (pl), (oh), (ow), 0, "__bang_sumpool")

/* scalar work in loops the lowering could not map to an intrinsic */
#define __dlp_scalar_ops(k) (dlp_here->scalar_ops += (k))

/* ------------------------------------------------------------------ launch */

typedef struct {
  void (*fn)(void *);
  void *args;
  int task;
  dlp_record *rec;
} dlp_task_start;

static void *dlp_task_main(void *p)
{
  dlp_task_start *s = (dlp_task_start *)p;
  taskId = s->task;
  clusterId = s->task / DLP_CORES_PER_CLUSTER;
  coreId = s->task % DLP_CORES_PER_CLUSTER;
  __nram_base = dlp_nram_arena + (size_t)taskId * DLP_NRAM_BYTES;
  __wram_base = dlp_wram_arena + (size_t)taskId * DLP_WRAM_BYTES;
  __sram_base = dlp_sram_arena + (size_t)clusterId * DLP_SRAM_BYTES;
  dlp_here = &s->rec->task[taskId];
  dlp_num_scratch = dlp_scratch_overflow = 0;
  dlp_num_pending = dlp_pending_overflow = 0;
  dlp_issued = 0;
  dlp_kernel_name = s->rec->name;
  s->fn(s->args);
  if (dlp_issued > 0)
    dlp_fail("ends with %.0f asynchronous copies not waited for (__sync_io)", dlp_issued);
  return 0;
}

static int dlp_init(void)
{
  if (dlp_nram_arena) return 0;
  dlp_nram_arena = aligned_alloc(4096, (size_t)DLP_CORES * DLP_NRAM_BYTES);
  dlp_wram_arena = aligned_alloc(4096, (size_t)DLP_CORES * DLP_WRAM_BYTES);
  dlp_sram_arena = aligned_alloc(4096, (size_t)DLP_CLUSTERS * DLP_SRAM_BYTES);
  return !dlp_nram_arena || !dlp_wram_arena || !dlp_sram_arena;
}

/* run `fn(args)` as `tasks` tasks (task t on core t) and record its counters */
static int __dlp_launch(const char *name, const char *origin, int tasks, int double_buffered,
                        void (*fn)(void *), void *args)
{
  if (dlp_init()) return 1;
  if (tasks < 1 || tasks > DLP_CORES) {
    snprintf(dlp_error_text, sizeof dlp_error_text, "kernel '%s' launches %d tasks on %d cores", name, tasks, DLP_CORES);
    dlp_failed = 1;
    return 2;
  }
  dlp_record *rec = &dlp_records[dlp_num_records < DLP_MAX_RECORDS ? dlp_num_records++ : DLP_MAX_RECORDS - 1];
  memset(rec, 0, sizeof *rec);
  snprintf(rec->name, sizeof rec->name, "%s", name);
  snprintf(rec->origin, sizeof rec->origin, "%s", origin);
  rec->tasks = tasks;
  rec->double_buffered = double_buffered;
  for (int c = 0; c < DLP_CLUSTERS; c++) {
    int in_cluster = tasks - c * DLP_CORES_PER_CLUSTER;
    in_cluster = in_cluster > DLP_CORES_PER_CLUSTER ? DLP_CORES_PER_CLUSTER : in_cluster;
    if (in_cluster > 0) pthread_barrier_init(&dlp_cluster_barrier[c], 0, in_cluster);
  }
  pthread_barrier_init(&dlp_all_barrier, 0, tasks);
  pthread_t threads[DLP_CORES];
  dlp_task_start starts[DLP_CORES];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 8u << 20);
  for (int t = 0; t < tasks; t++) {
    starts[t] = (dlp_task_start){fn, args, t, rec};
    if (pthread_create(&threads[t], &attr, dlp_task_main, &starts[t])) {
      for (int u = 0; u < t; u++) pthread_join(threads[u], 0);
      return 1;
    }
  }
  for (int t = 0; t < tasks; t++) pthread_join(threads[t], 0);
  pthread_attr_destroy(&attr);
  for (int c = 0; c < DLP_CLUSTERS; c++)
    if (tasks - c * DLP_CORES_PER_CLUSTER > 0) pthread_barrier_destroy(&dlp_cluster_barrier[c]);
  pthread_barrier_destroy(&dlp_all_barrier);
  return dlp_failed ? 2 : 0;
}

#endif /* DLP_SIM_H */
