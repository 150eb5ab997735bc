"""The common call of a compiled model in C: `caller(...)` -> a `Caller` or None.

    call = caller(entry, argv, argc, n_in, first_out, in_specs, out_specs, pre, fail, keep)
    outputs = call(*inputs)      # a list of fresh arrays, or None: take the Python path
    one = call.bind(ins, outs)   # one binding of a program sized for maxima (dynamic.py)

fastcall.c is a CPython extension built once per cache directory (keyed by its source,
the compiler, Python's and numpy's versions) with the C compiler and loaded with
importlib. It does in C what `CFunction.__call__` does for inputs that need no
conversion: check them, allocate the outputs, fill the argument vector and call
dlpc_main without the GIL; a small model's call thereby loses about 2 us of Python
(docs/design/c-backend.md#fastcall). `bind` gives the call of one binding of the
one-compile program (runtime/dynamic.py): per input a fixed array (the dims) or the
binding's shape, copied into the program's max-shaped buffer; each output's leading block
of the binding's shape copied out into a new array. Where the extension cannot be built (no Python
headers, no compiler) `caller` returns None, once decided per process, and the Python
path runs as before.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from dlpc import settings

SOURCE = Path(__file__).with_name("fastcall.c")
MODULE = "_dlpc_fastcall"


def _build_command(out: str) -> list[str] | None:
    include = sysconfig.get_paths().get("include")
    if not include or not Path(include, "Python.h").exists():
        return None
    cc = os.environ.get("CC", "") or "cc"
    return [
        *cc.split(),
        "-O2",
        "-fPIC",
        "-shared",
        f"-I{include}",
        f"-I{np.get_include()}",
        str(SOURCE),
        "-o",
        out,
    ]


@functools.lru_cache(maxsize=1)
def extension() -> ModuleType | None:
    """The built extension module, or None where it cannot be built or loaded."""
    try:
        text = SOURCE.read_bytes()
        key = hashlib.sha256(
            b"\0".join(
                [
                    text,
                    sys.version.encode(),
                    np.__version__.encode(),
                    os.environ.get("CC", "").encode(),
                ]
            )
        ).hexdigest()[:20]
        root = Path(settings.get("DLPC_CACHE_DIR"))
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{MODULE}-{key}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
        if not path.exists():
            fd, tmp = tempfile.mkstemp(prefix=f".{MODULE}-", suffix=".so.tmp", dir=root)
            os.close(fd)
            try:
                cmd = _build_command(tmp)
                if cmd is None:
                    return None
                res = subprocess.run(cmd, capture_output=True, timeout=120)
                if res.returncode != 0:
                    return None
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
        spec = importlib.util.spec_from_file_location(MODULE, str(path), loader=loader)
        if spec is None:
            return None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    except (OSError, ImportError, subprocess.SubprocessError):
        return None


def caller(
    entry: int,
    argv: int,
    argc: int,
    n_in: int,
    first_out: int,
    in_specs: list[tuple[tuple[int, ...], np.dtype]],
    out_specs: list[tuple[tuple[int, ...], np.dtype]],
    pre: Callable[[], None] | None,
    fail: Callable[[int], None],
    keep: object,
    repeat: int = 1,
) -> Callable[..., list[np.ndarray] | None] | None:
    """A Caller for dlpc_main at `entry` with the argument vector at `argv` (`argc`
    pointers: inputs from 0, outputs from `first_out`, the rest already set and kept
    alive by `keep`); None without the extension. The specs are the whole call's; with
    `repeat`, dlpc_main is one chunk's program and runs on each 1/repeat of them in turn
    (split along dim 0)."""
    ext = extension()
    if ext is None:
        return None
    return ext.Caller(
        entry,
        argv,
        argc,
        n_in,
        first_out,
        [(tuple(shape), np.dtype(dt).num, np.dtype(dt).itemsize) for shape, dt in in_specs],
        [(tuple(shape), np.dtype(dt).num, np.dtype(dt).itemsize) for shape, dt in out_specs],
        pre,
        fail,
        keep,
        repeat,
    )
