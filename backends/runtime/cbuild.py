"""Compile generated C into a shared library, cache it, load it with ctypes, call it.

    lib = build(c_source, name="mlp")          # compiled once, then a cache hit
    lib.call([x, w, out])                      # dlpc_main(void **args) on numpy arrays

    f = CFunction(loop_module)                 # emit_c + build + calling convention
    (y,) = f(x, params={"fc1.weight": w})

- The compiler is `$CC` (split like a shell word list) or `cc`. Flags are
  `-O3 -march=native -fopenmp -fPIC -shared -std=gnu11` (plus `-lm`); `-march=native` and
  `-fopenmp` are dropped when a probe compile shows the compiler rejects them;
  `$DLPC_CFLAGS` is appended (e.g. sanitizer flags).
- Libraries are cached under `$DLPC_CACHE_DIR` (default `~/.cache/dlpc`), keyed by a hash
  of the C source, the compiler command, its version line and the flags (and, with
  `-march=native`, the CPU: `tuning_log.cpu_fingerprint`). A build writes
  to a temporary name in the cache directory and renames it into place, so concurrent
  builds never see a half-written library. The library's SHA-256 is written beside it
  (`<name>.so.sha256`) and checked before every load: a damaged entry (truncated, garbage,
  hash missing, or refused by the loader) is rebuilt, with one warning line on stderr.
- Idle OpenMP threads spin `GOMP_SPINCOUNT` = 10000 iterations, then sleep, unless the user
  set `OMP_WAIT_POLICY` or `GOMP_SPINCOUNT`; each OpenMP worker thread is bound to a CPU of
  its own (not the calling thread, which keeps its CPU set), unless the user set
  `OMP_PROC_BIND`, `OMP_PLACES` or `GOMP_CPU_AFFINITY`, or the team outnumbers the CPUs;
  a call first moves its thread off the workers' CPUs (`keep_off_workers`).
- A compiler error becomes one `DlpcError` line naming the kernel whose function holds
  the first error and the C file kept in the cache directory.
- Resident pre-packed weights (passes/lower/prepack.py): a library that exports
  `dlpc_prepare` takes one more pointer after @main's arguments, the packed block of
  `dlpc_packed_bytes` bytes. `CFunction.bind_params` allocates it and fills it once
  (`dlpc_prepare`); every later call only passes its pointer. A one-off call (`params=`,
  `Library.call` on @main's arguments alone, a prepared vector without the slot) packs
  into a block of its own first, so it always sees the weights it is given.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlpc import settings
from dlpc.backends.runtime import fastcall
from dlpc.backends.runtime.callconv import ModuleFunction
from dlpc.diagnostics import DlpcError
from dlpc.passes.lower.memory_plan import ALIGN

# GCC's default -ffp-contract=fast (GNU mode) is kept on purpose: `a * b + c` may become
# one fused multiply-add, which the gemm micro-kernel (tensorize) relies on. Results may
# therefore differ from the numpy reference in the last bits (tests use rtol 1e-4).
BASE_FLAGS = ("-O3", "-fPIC", "-shared", "-std=gnu11")
OPTIONAL_FLAGS = ("-march=native", "-fopenmp")
LIBS = ("-lm",)
# glibc's vector math library: SIMD variants of expf, tanhf, erff, powf, ... that the C
# prelude declares (under DLPC_HAVE_LIBMVEC) so vectorised loops call them
OPTIONAL_LIBS = ("-lmvec",)


def cache_dir() -> Path:
    path = Path(settings.get("DLPC_CACHE_DIR"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def compiler() -> list[str]:
    cmd = shlex.split(os.environ.get("CC", "") or "cc")
    return cmd


@functools.lru_cache(maxsize=8)
def _compiler_version(cmd: tuple[str, ...]) -> str:
    try:
        out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DlpcError(f"error: cannot run the C compiler '{' '.join(cmd)}': {e}") from None
    return (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else ""


def _probe(cmd: tuple[str, ...], before: tuple[str, ...], after: tuple[str, ...]) -> bool:
    """Whether the compiler builds a trivial shared library with these extra arguments."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "probe.c")
        src.write_text("int dlpc_probe(int x) { return x + 1; }\n")
        out = str(Path(tmp, "probe.so"))
        res = subprocess.run(
            [*cmd, *BASE_FLAGS, *before, str(src), "-o", out, *after],
            capture_output=True,
            text=True,
        )
        return res.returncode == 0


@functools.lru_cache(maxsize=8)
def supported_flags(cmd: tuple[str, ...]) -> tuple[str, ...]:
    """The optional flags this compiler accepts (probed once per process)."""
    return tuple(flag for flag in OPTIONAL_FLAGS if _probe(cmd, (flag,), ()))


@functools.lru_cache(maxsize=8)
def supported_libs(cmd: tuple[str, ...]) -> tuple[str, ...]:
    """The optional libraries this toolchain links (probed once per process)."""
    return tuple(lib for lib in OPTIONAL_LIBS if _probe(cmd, (), (lib,)))


def extra_flags() -> list[str]:
    """`$DLPC_CFLAGS` (split like a shell word list), appended to every compile and part of
    the cache key: e.g. `-fsanitize=address,undefined -fno-sanitize-recover=undefined`
    for a sanitizer build (test/python/test_untrusted_input.py runs one; loading it needs
    the sanitizer runtime preloaded, `LD_PRELOAD=$(cc -print-file-name=libasan.so)`)."""
    return shlex.split(settings.get("DLPC_CFLAGS"))


def flags(cmd: list[str]) -> list[str]:
    vector_math = ["-DDLPC_HAVE_LIBMVEC"] if "-lmvec" in supported_libs(tuple(cmd)) else []
    return [*BASE_FLAGS, *supported_flags(tuple(cmd)), *vector_math, *extra_flags()]


def libs(cmd: list[str]) -> list[str]:
    return [*LIBS, *supported_libs(tuple(cmd))]


@dataclass
class Library:
    """A loaded shared library exporting `int dlpc_main(void **args)`."""

    path: Path
    cached: bool  # True when the build was a cache hit
    handle: ctypes.CDLL = field(repr=False)

    def __post_init__(self) -> None:
        self.entry = self.handle.dlpc_main
        self.entry.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self.entry.restype = ctypes.c_int
        # resident pre-packed weights: the block's size and @main's argument count
        self.packed_bytes = 0
        self.num_args = 0
        self.prepare_entry = None
        if hasattr(self.handle, "dlpc_prepare"):
            self.packed_bytes = ctypes.c_size_t.in_dll(self.handle, "dlpc_packed_bytes").value
            self.num_args = ctypes.c_int.in_dll(self.handle, "dlpc_num_args").value
            self.prepare_entry = self.handle.dlpc_prepare
            self.prepare_entry.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
            self.prepare_entry.restype = ctypes.c_int

    def packed_block(self) -> np.ndarray:
        """A fresh ALIGN-byte aligned block for the packed weights (uninitialised)."""
        raw = np.empty(self.packed_bytes + ALIGN, dtype=np.uint8)
        skip = -raw.ctypes.data % ALIGN
        return raw[skip : skip + self.packed_bytes]

    def run(self, arrays: list[np.ndarray]) -> int:
        """Call `dlpc_main` with the data pointers of C-contiguous arrays; its status.
        `arrays` are @main's arguments (optionally the packed block after them): a
        library with packed weights first packs them for this call (`dlpc_prepare`),
        into a fresh block when none is given."""
        for a in arrays:
            assert a.flags.c_contiguous, "dlpc_main needs C-contiguous arrays"
        keep_off_workers()
        if self.prepare_entry is not None and len(arrays) == self.num_args:
            arrays = [*arrays, self.packed_block()]
        argv = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
        if self.prepare_entry is not None and len(arrays) == self.num_args + 1:
            status = self.prepare_entry(argv)
            if status != 0:
                return status
        return self.entry(argv)

    def prepare(self, argv) -> None:
        """Fill the packed block `argv[num_args]` from the params `argv` points to
        (`dlpc_prepare`); a nonzero status as in `call`."""
        if self.prepare_entry is not None:
            self._check(self.prepare_entry(argv))

    def call_argv(self, argv, keep_alive: object = None) -> None:
        """Call `dlpc_main` on a prepared pointer vector (the arrays it points into must
        stay alive: `keep_alive`); a nonzero status as in `call`. A vector of @main's
        arguments alone, for a library with packed weights (a training step, whose
        params change every call), is packed for this call first."""
        keep_off_workers()
        if self.prepare_entry is not None and len(argv) == self.num_args:
            block = self.packed_block()
            argv = (ctypes.c_void_p * (self.num_args + 1))(*argv, block.ctypes.data)
            self._check(self.prepare_entry(argv))
        self._check(self.entry(argv))

    def call(self, arrays: list[np.ndarray]) -> None:
        """`run`, with a nonzero status (an allocation failed) as a `DlpcError`."""
        self._check(self.run(arrays))

    def _check(self, status: int) -> None:
        if status != 0:
            raise DlpcError(f"error: {self.failure(status)}")

    def failure(self, status: int) -> str:
        """What a nonzero status of `dlpc_main` means: the allocation that failed, as the
        generated code recorded it (`dlpc_alloc` in backends/c.py's prelude)."""
        plain = f"{self.path.name}: dlpc_main failed (status {status}: out of memory)"
        try:
            count = ctypes.c_size_t.in_dll(self.handle, "dlpc_oom_count").value
            size = ctypes.c_size_t.in_dll(self.handle, "dlpc_oom_size").value
            kernel = ctypes.c_char_p.in_dll(self.handle, "dlpc_oom_kernel").value
        except ValueError:  # a library without dlpc's prelude
            return plain
        if not kernel:
            return plain
        what = kernel.decode("utf-8", errors="replace")
        return f"out of memory: {count * size} bytes for {what}"


SPIN_COUNT = "10000"  # libgomp's spin iterations before an idle thread sleeps
# the user's choice of thread binding, which stands
BIND_VARS = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")


def omp_threads(cpus: int) -> int:
    """The team size libgomp will use: `OMP_NUM_THREADS`' first value, else `cpus`."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else cpus


# CPUs that libgomp's workers are bound to (set when this process's first library load
# bound them; empty otherwise); a call moves its thread off them (`keep_off_workers`)
worker_cpus: frozenset[int] = frozenset()


def _no_cpu() -> int:
    return -1


_getcpu = _no_cpu  # glibc's sched_getcpu once workers are bound


def keep_off_workers() -> None:
    """If the calling thread runs on a CPU one of libgomp's bound workers owns, move it to
    one of its other CPUs (its CPU set unchanged): a caller that slept (in clFinish, I/O,
    a lock) may be woken onto the worker's CPU, and there each parallel loop waits out a
    whole spin (`_load`). One `sched_getcpu` per call."""
    if worker_cpus and _getcpu() in worker_cpus:
        own = os.sched_getaffinity(0)
        if own - worker_cpus:
            os.sched_setaffinity(0, own - worker_cpus)  # moves the thread now
            os.sched_setaffinity(0, own)


def _gomp_loaded() -> bool:
    with open("/proc/self/maps") as maps:
        return any("/libgomp.so" in line for line in maps)


def _load(path: Path) -> ctypes.CDLL:
    # Idle OpenMP threads spin briefly, then sleep (unless the user chose a policy):
    # sleeping at once costs every parallel loop a wake-up, spinning without bound slows
    # everything else on a shared machine (docs/design/c-backend.md#spin-count). libgomp
    # reads this once, when it is first loaded.
    global worker_cpus, _getcpu
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    if not sys.platform.startswith("linux") or any(v in os.environ for v in BIND_VARS):
        return ctypes.CDLL(str(path))
    cpus = os.sched_getaffinity(0)
    team = omp_threads(len(cpus))
    if not 2 <= team <= len(cpus) or _gomp_loaded():
        return ctypes.CDLL(str(path))
    # Each OpenMP worker gets a CPU of its own (unless the user chose a binding, or the
    # team has more threads than CPUs). Unbound, Linux starts libgomp's worker on the
    # calling thread's CPU and, with the short spin above, often leaves it there: then a
    # thread spinning at a barrier holds the only CPU its partner may run on, and every
    # parallel loop costs a whole spin (docs/design/c-backend.md#worker-binding).
    # libgomp binds its threads when it loads with OMP_PROC_BIND set (the calling thread
    # to the first CPU, worker k to the k-th); the variable is removed again and the
    # calling thread's own CPU set restored at once, so the caller and every thread it
    # starts later (onnxruntime's, PoCL's) keep the CPUs they had; only libgomp's
    # workers stay bound, and a call keeps its thread off their CPUs.
    os.environ["OMP_PROC_BIND"] = "close"
    try:
        handle = ctypes.CDLL(str(path))
    finally:
        del os.environ["OMP_PROC_BIND"]
        os.sched_setaffinity(0, cpus)
    if _gomp_loaded():  # (a library without OpenMP leaves it for the next load)
        getcpu = ctypes.CDLL(None).sched_getcpu
        getcpu.restype, getcpu.argtypes = ctypes.c_int, []
        _getcpu = getcpu
        worker_cpus = frozenset(sorted(cpus)[1:team])
    return handle


# Source bytes from which a library is compiled as several units in parallel; a small
# model's one unit is faster than starting several compilers
# (docs/design/c-backend.md#parallel-source-bytes).
PARALLEL_SOURCE_BYTES = 200_000


def build(
    c_source: str,
    *,
    name: str = "module",
    units: list[str] | None = None,
    link: tuple[str, ...] = (),
) -> Library:
    """Compile `c_source` into a shared library (or reuse the cached one) and load it.
    `units`, the same program as several translation units (`backends.c.emit_c_units`),
    are compiled in parallel instead when the source is large; any failure there falls
    back to the one unit (whose diagnostics name `c_source`'s lines). `link`: arguments
    after the libraries (the MPI driver's `-I<dir>`, its libmpi and rpath), in the key."""
    cmd = compiler()
    version = _compiler_version(tuple(cmd))  # first: a missing compiler is a clear error
    opts = flags(cmd)
    key_parts = [c_source, *cmd, version, *opts, *libs(cmd), *link]
    digest = hashlib.sha256("\0".join(key_parts).encode())
    if "-march=native" in opts:  # (a cache directory shared by machines of other CPUs)
        from dlpc.passes.schedule.tuning_log import cpu_fingerprint

        digest.update(f"\0cpu {cpu_fingerprint()}".encode())
    key = digest.hexdigest()[:20]
    stem = re.sub(r"[^A-Za-z0-9_]", "_", name)[:40] or "module"
    root = cache_dir()
    lib_path = root / f"{stem}-{key}.so"
    if lib_path.exists():
        damage = check_entry(lib_path)
        if damage is None:
            try:
                return Library(lib_path, True, _load(lib_path))
            except OSError as e:  # the hash matched, the loader still refused it
                damage = f"it does not load: {e}"
        warn_damaged(lib_path, damage)
    c_path = root / f"{stem}-{key}.c"
    atomic_write(c_path, c_source)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{stem}-", suffix=".so.tmp", dir=root)
    os.close(fd)
    try:
        parallel = units is not None and len(units) > 2 and len(c_source) >= PARALLEL_SOURCE_BYTES
        if not (parallel and units is not None and _build_units(cmd, opts, units, tmp_name)):
            res = subprocess.run(
                [*cmd, *opts, str(c_path), "-o", tmp_name, *libs(cmd), *link],
                capture_output=True,
                text=True,
                env={**os.environ, "LC_ALL": "C"},  # plain ASCII quotes in messages
            )
            if res.returncode != 0:
                raise DlpcError(compile_error(res.stderr, c_source, c_path))
        # the hash first, then the library: a crash in between leaves a library-less hash
        # (a miss) or, with an old library, a mismatch (a rebuild), never a wrong load
        atomic_write(hash_path(lib_path), file_digest(Path(tmp_name)) + "\n")
        os.replace(tmp_name, lib_path)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return Library(lib_path, False, _load(lib_path))


def _build_units(cmd: list[str], opts: list[str], units: list[str], out: str) -> bool:
    """Compile `units` at once (one compiler process each) and link them into `out`;
    False when a step fails (the caller then builds the one unit)."""
    env = {**os.environ, "LC_ALL": "C"}
    with tempfile.TemporaryDirectory(prefix="dlpc-units-") as tmp:
        objects, procs = [], []
        for i, text in enumerate(units):
            src, obj = Path(tmp) / f"unit{i}.c", Path(tmp) / f"unit{i}.o"
            src.write_text(text)
            objects.append(str(obj))
            procs.append(
                subprocess.Popen(
                    [*cmd, *opts, "-c", str(src), "-o", str(obj)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
            )
        if any([p.wait() != 0 for p in procs]):  # (every process waited for)
            return False
        link = subprocess.run(
            [*cmd, *opts, *objects, "-o", out, *libs(cmd)], capture_output=True, env=env
        )
        return link.returncode == 0


def load_cached(lib_path: Path) -> Library | None:
    """The library at `lib_path` if it is there, intact (its hash checked) and loads; None
    otherwise (`build` then rebuilds it and says why). For the warm-compile cache
    (artifact.py), which knows the library's name without computing its key."""
    if not lib_path.exists() or check_entry(lib_path) is not None:
        return None
    try:
        return Library(lib_path, True, _load(lib_path))
    except OSError:
        return None


def hash_path(lib_path: Path) -> Path:
    """Where a cached library's SHA-256 is kept: `<name>.so.sha256` beside it."""
    return lib_path.with_name(lib_path.name + ".sha256")


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_entry(lib_path: Path) -> str | None:
    """Why the cached library at `lib_path` must not be loaded (None: it is intact).

    A truncated or overwritten library would be mapped by the loader and crash the process
    (SIGBUS) on first use; its SHA-256, written beside it when it was built, is compared
    before it is loaded."""
    try:
        expected = hash_path(lib_path).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return "its hash file is missing"
    except (OSError, UnicodeDecodeError) as e:
        return f"its hash file cannot be read: {e}"
    try:
        actual = file_digest(lib_path)
    except OSError as e:
        return f"it cannot be read: {e}"
    if actual != expected:
        return "its content does not match its hash"
    return None


_warned: set[Path] = set()


def warn_damaged(path: Path, why: str, what: str = "cached library", then: str = "rebuilding it"):
    """One line on stderr per damaged cache entry (a library here, a whole compiled model
    in `artifact`), once per process; the caller then rebuilds it in place."""
    if path not in _warned:
        _warned.add(path)
        print(f"dlpc: warning: {what} {path} is damaged ({why}); {then}", file=sys.stderr)


def atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def compile_error(stderr: str, source: str, c_path: Path) -> str:
    """One line: the first compiler error, with the kernel it occurred in."""
    first = next((ln for ln in stderr.splitlines() if "error" in ln), None)
    first = first or (stderr.strip().splitlines() or ["unknown compiler failure"])[-1]
    where = ""
    m = re.search(r":(\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(.*)", first)
    if m:
        line_no, message = int(m.group(1)), m.group(2)
        lines = source.splitlines()[:line_no]
        for text in reversed(lines):
            km = re.match(r'/\* kernel "(.*)"', text)
            if km:
                where = f" in kernel '{km.group(1)}'"
                break
            if text.startswith("int dlpc_main"):
                where = " in dlpc_main"
                break
        loc = f"{c_path}:{line_no}"
    else:
        message, loc = first.strip(), str(c_path)
    return f"{loc}: error: C compiler failed{where}: {message}"


# ------------------------------------------------------------------- modules


_BYTE = ctypes.c_char


def _raise_failure(library: Library, status: int) -> None:
    raise DlpcError(f"error: {library.failure(status)}")


def address(a: np.ndarray) -> int:
    """The data pointer of a C-contiguous array. Through the buffer protocol: a third of
    the time of `a.ctypes.data` (docs/design/c-backend.md#address); a read-only or empty
    array takes `a.ctypes.data`."""
    try:
        return ctypes.addressof(_BYTE.from_buffer(a))  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError):
        return a.ctypes.data


class CFunction(ModuleFunction):
    """A loop-level module compiled to C and callable on numpy arrays.

    f = CFunction(module)
    outputs = f(*inputs, params={"fc1.weight": w, ...})   # or params=[w, ...]
    """

    _fast: Callable[..., list[np.ndarray] | None] | None = None  # (bind_params sets it)

    def __init__(self, module, *, name: str = "module"):
        from dlpc.backends.c import emit_c_units, find_main

        self.bind_signature(find_main(module))
        self.source, units = emit_c_units(module, min_bytes=PARALLEL_SOURCE_BYTES)
        self.library = build(self.source, name=name, units=units)

    @classmethod
    def restore(cls, source: str, signature: dict, library: Library) -> CFunction:
        """A CFunction from a warm-compile cache entry (artifact.py): the C source, @main's
        signature as `signature()` gave it, and the loaded library; no IR needed."""
        self = cls.__new__(cls)
        self.set_signature(signature)
        self.source = source
        self.library = library
        return self

    def bind_params(self, params) -> None:
        """Keep the parameters resident: converted once, their pointers written once
        into the argument vector that every later call reuses; with packed weights the
        block is allocated and packed here, once (`dlpc_prepare`), its pointer last in
        the vector."""
        super().bind_params(params)
        n = self.num_inputs + len(self.param_names) + self.num_outputs
        packed = self.library.prepare_entry is not None
        self._argv = (ctypes.c_void_p * max(n + packed, 1))()
        self._argv_lock = threading.Lock()
        for k, a in enumerate(self.bound_params or [], self.num_inputs):
            self._argv[k] = a.ctypes.data
        if packed:
            self.packed = self.library.packed_block()
            self._argv[n] = self.packed.ctypes.data
            self.library.prepare(self._argv)
        # the common call in C where the extension builds (fastcall.py); it holds what
        # the vector points to, and nothing that holds it (no cycle through it)
        self._fast = fastcall.caller(
            ctypes.cast(self.library.entry, ctypes.c_void_p).value or 0,
            ctypes.addressof(self._argv),
            len(self._argv),
            self.num_inputs,
            self.num_inputs + len(self.param_names),
            self.arg_specs[: self.num_inputs],
            self.arg_specs[self.num_inputs + len(self.param_names) :],
            lambda: keep_off_workers(),  # (looked up per call, as the Python path does)
            functools.partial(_raise_failure, self.library),
            (self._argv, self.bound_params, getattr(self, "packed", None), self.library),
        )

    def __call__(self, *inputs, params=None) -> list[np.ndarray]:
        if params is None and self._fast is not None:
            outputs = self._fast(*inputs)
            if outputs is not None:
                return outputs
        if params is None and self.bound_params is not None:
            # the common call, kept lean (a small model's call is a few Python steps long;
            # docs/design/c-backend.md#direct-call): arrays of @main's shape, dtype
            # and C order pass as they are, anything else through `_convert`
            n_in = self.num_inputs
            if len(inputs) != n_in:
                raise DlpcError(f"error: expected {n_in} inputs, got {len(inputs)}")
            specs = self.arg_specs
            for x, (shape, dtype) in zip(inputs, specs):
                if (
                    type(x) is not np.ndarray
                    or x.shape != shape
                    or x.dtype != dtype
                    or not x.flags.c_contiguous
                ):
                    inputs = self._convert(inputs, 0)
                    break
            first = n_in + len(self.param_names)
            outputs = [np.empty(shape, dtype) for shape, dtype in specs[first:]]
            # only the inputs' and outputs' pointers change per call; a call made while
            # another thread's is running (ctypes releases the GIL) fills a copy
            own = self._argv_lock.acquire(blocking=False)
            argv = self._argv if own else type(self._argv)(*self._argv)
            try:
                for k, a in enumerate(inputs):
                    argv[k] = address(a)
                for k, a in enumerate(outputs, first):
                    argv[k] = address(a)
                keep_off_workers()
                status = self.library.entry(argv)
            finally:
                if own:
                    self._argv_lock.release()
            if status != 0:
                raise DlpcError(f"error: {self.library.failure(status)}")
            return outputs
        outputs = self.empty_outputs()
        arrays = self.arguments(inputs, params)
        self.library.call(arrays + outputs)
        return outputs
