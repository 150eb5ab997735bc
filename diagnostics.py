"""One-line diagnostics for dlpc's command-line tools.

User errors (bad source text, invalid IR, unsupported ops, bad options) become one line
on stderr and exit code 1; a Python traceback is only shown with DLPC_DEBUG=1.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

from dlpc import settings

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class DlpcError(Exception):
    """A user-facing error. `str(e)` is the complete one-line diagnostic
    (e.g. `model.dlpc:3:9: error: unknown operator 'rleu'`)."""


def first_line(text: str) -> str:
    """The first non-empty line: a diagnostic is one line even when an exception's text
    carries context (an IR dump, a note) below it."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def one_line(text: str, limit: int = 400) -> str:
    """An exception's text as one line: the first non-empty line, joined with the next
    when it ends in ':' (xDSL's "operand 'x' at position 0 does not verify:" says why on
    the line below), whitespace collapsed, cut at `limit` characters."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return ""
    out = lines[0]
    if out.endswith(":") and len(lines) > 1:
        out = f"{out} {lines[1]}"
    out = " ".join(out.split())
    return out if len(out) <= limit else out[: limit - 3] + "..."


def format_exception(e: BaseException) -> str:
    """The diagnostic for an exception (without the tool prefix): a DlpcError's text as
    its author formatted it (a located error may add the source line and a caret below
    its one error line); for anything else one line."""
    return one_diagnostic(str(e)) if isinstance(e, DlpcError) else first_line(_format(e))


def one_diagnostic(text: str) -> str:
    """`text` as one diagnostic: kept when it is one line, or the located form (error
    line, source line, caret); else its line breaks are escaped (a name read from a model
    may hold a newline: `unsupported attribute 'k\\nepdims'`)."""
    lines = text.split("\n")
    if len(lines) == 1 or (len(lines) == 3 and lines[2].strip() == "^"):
        return text
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _format(e: BaseException) -> str:
    from xdsl.utils.exceptions import (
        ArgSpecParseError,
        DiagnosticException,
        ParseError,
        VerifyException,
    )

    if isinstance(e, DlpcError):
        return str(e)
    if isinstance(e, ArgSpecParseError):
        # "Error parsing pass pipeline specification:", "pass-pipeline:1:12", the spec,
        # a caret, the message
        lines = [line for line in str(e).splitlines() if line.strip()]
        if len(lines) >= 5:
            column = lines[1].rsplit(":", 1)[-1]
            return (
                f"error: bad pass pipeline '{lines[2].strip()}' at column {column}: "
                f"{lines[-1].strip()}"
            )
        return f"error: bad pass pipeline: {' '.join(str(e).split())}"
    if isinstance(e, ParseError):
        loc = e.span.get_location()
        msg = " ".join(e.msg.split())
        return f"{loc}: error: {msg}"
    if isinstance(e, VerifyException | DiagnosticException):
        return f"error: {one_line(str(e))}"
    if isinstance(e, RecursionError):
        return "error: the input is nested too deeply"
    if isinstance(e, MemoryError):
        return "error: out of memory"
    if isinstance(e, FileNotFoundError):
        return f"error: no such file: {e.filename}"
    if isinstance(e, OSError) and e.filename:
        return f"error: {e.filename}: {e.strerror}"
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EIO):
        return f"error: cannot write: {e.strerror}"  # print() to a full stdout
    if isinstance(e, OSError) and e.strerror:
        return f"error: {e.strerror}"
    if isinstance(e, ValueError | NotImplementedError) or type(e) is Exception:
        return f"error: {_message(e)}"  # (xDSL's verifiers raise bare Exceptions too)
    if isinstance(e, KeyError):
        return f"error: {first_line(str(e))}"
    return f"internal error: {type(e).__name__}: {first_line(str(e))}"


def _message(e: BaseException) -> str:
    """One line of an exception's text; an exception built with several arguments (xDSL's
    `ValueError("Invalid BlockArgument name format `x`.", "Make sure ...")`) gives the first."""
    if len(e.args) > 1 and isinstance(e.args[0], str):
        return one_line(e.args[0])
    return one_line(str(e))


# ------------------------------------------------------------- the boundary

# Exceptions a stage raises for bad input (the input, not dlpc, is at fault); anything
# else escaping a pass or an emitter is a dlpc bug, reported as an internal error.
_PASS_THROUGH = (DlpcError, KeyboardInterrupt, SystemExit, GeneratorExit, OSError)


class StageError(DlpcError):
    """An exception that escaped a stage (a pass, a verifier, an emitter), as one line
    naming the stage, the op it failed at and the op's source location (when the text
    frontend gave it one). `internal` is True for a dlpc bug (not bad input)."""

    def __init__(self, message: str, internal: bool):
        super().__init__(message)
        self.internal = internal


def stage_error(stage: str, e: BaseException) -> StageError:
    """The one-line diagnostic for `e`, escaped from `stage` ("pass graph-to-te",
    "emitter c"), prefixed with the op's `file:line:col` when it has one:
    - a pass's own diagnostic (a DiagnosticException it raised) as it wrote it;
    - xDSL's (a verifier after a pass, "Attempting to delete SSA value ...") as
      `error: <why> (pass graph-to-te at math.exp)`;
    - anything else is a dlpc bug: `internal error in pass X at op Y (m.dlpc:2:11):
      IndexError: ...; please report`."""
    from xdsl.utils.exceptions import DiagnosticException

    op = culprit_op(e)
    name, loc = (op.name, op_location(op)) if op is not None else (None, None)
    at = f" at {name}" if name else ""
    if isinstance(e, DiagnosticException) and not stage.startswith("verifying"):
        # a pass's own diagnostic: its text already names the culprit, as it was written
        return StageError(f"{loc + ': ' if loc else ''}error: {_message(e)}", False)
    if (
        isinstance(e, DiagnosticException | ValueError | NotImplementedError)
        or type(e) is Exception
    ):
        why = _message(e)  # (a bare Exception is raised on purpose, e.g. by xDSL's verifiers)
    elif isinstance(e, RecursionError):
        why = "the input is nested too deeply"
    elif isinstance(e, MemoryError):
        why = "out of memory"
    else:
        where = f" ({loc})" if loc else ""
        what = f"{type(e).__name__}: {_message(e)}".rstrip(": ")
        return StageError(f"internal error in {stage}{at}{where}: {what}; please report", True)
    context = f" ({stage}{at})" if stage != "verifying the input" else ""
    return StageError(f"{loc + ': ' if loc else ''}error: {why}{context}", False)


@contextmanager
def boundary(stage: str, keep_diagnostics: bool = False):
    """Run a stage (a pass, a verifier, an emitter) so that whatever escapes it is one
    `StageError` line (see `stage_error`); DlpcErrors and OSErrors pass unchanged.
    `keep_diagnostics` lets xDSL's DiagnosticException through (for
    `dlpc-opt --verify-diagnostics`, which prints it in full and exits 0).

        with boundary(f"pass {name}"):
            p.apply(ctx, module)"""
    try:
        yield
    except _PASS_THROUGH:
        raise
    except Exception as e:  # noqa: BLE001 - the boundary of a stage
        from xdsl.utils.exceptions import DiagnosticException

        if keep_diagnostics and isinstance(e, DiagnosticException):
            raise
        if settings.flag("DLPC_DEBUG"):
            raise
        raise stage_error(stage, e) from e


def culprit_op(e: BaseException):
    """The op a stage was working on when `e` was raised: the innermost frame of the
    traceback with an xDSL Operation in `op`/`self`/`operation` (a pattern's `op`, a
    verifier's `self`), skipping modules and functions, which name nothing useful."""
    import traceback

    from xdsl.ir import Operation

    frames = [frame for frame, _ in traceback.walk_tb(e.__traceback__)]
    for frame in reversed(frames):
        for key in ("op", "self", "operation"):
            value = frame.f_locals.get(key)
            if isinstance(value, Operation) and value.name not in ("builtin.module", "func.func"):
                return value
    return None


def op_location(op) -> str | None:
    """`file:line:col` of an op built by the text frontend (or parsed with a `loc(...)`),
    looking through its parents; None when it has none."""
    from xdsl.dialects.builtin import FileLineColLoc

    while op is not None:
        loc = getattr(op, "location", None)
        if isinstance(loc, FileLineColLoc):
            return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
        op = op.parent_op()
    return None


# Exit status when the reader of stdout goes away (`dlpc ... | head -1`): 128 + SIGPIPE,
# what a shell reports for `cat` killed by SIGPIPE (`${PIPESTATUS[0]}`, `set -o pipefail`).
EXIT_BROKEN_PIPE = 141


def run_guarded(fn: Callable[[], object], tool: str) -> int:
    """Run a tool's main body; map exceptions to a diagnostic and exit code.

    Stdout is flushed here, so a reader that went away (`| head -1`) is seen inside the
    guard: the tool then ends quietly like `cat`, with exit status 141 (128 + SIGPIPE)."""
    try:
        with warnings.catch_warnings():
            # numpy's RuntimeWarnings (mean of an empty slice while folding a model's
            # constants) are not diagnostics: a tool's stderr is its one error line
            warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"numpy\.")
            result = fn()
        _flush_stdout()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except BaseException as e:  # noqa: BLE001 - the tool boundary
        if settings.flag("DLPC_DEBUG"):
            raise
        msg = format_exception(e) or f"internal error: {type(e).__name__}"
        located = msg.split(": error:")[0] != msg and not msg.startswith("error:")
        print(msg if located else f"{tool}: {msg}", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0


def _flush_stdout() -> None:
    """Flush what print() left in stdout's buffer; a device that is full (`> /dev/full`)
    is a one-line error, and stdout is silenced so that the interpreter's own final flush
    does not report it again."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        _silence_stdout()
        raise DlpcError(f"error: cannot write to stdout: {e.strerror or e}") from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still
    buffered does not fail again ("Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a file (captured)
        pass


def write_stdout(text: str) -> None:
    """Write a tool's (possibly large) output to stdout. Written to the file descriptor
    until all is out: CPython's buffered stdout drops the rest of a big write silently
    when the reader goes away mid-write (the write returns a partial count), so the tool
    would exit 0; here the next write fails and the tool exits 141 like `cat`."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # stdout is not a file (captured)
        sys.stdout.write(text)
        return
    _flush_stdout()
    view = memoryview(text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"))
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BrokenPipeError:
            raise
        except OSError as e:  # a full device (`> /dev/full`), an I/O error
            _silence_stdout()
            raise DlpcError(f"error: cannot write to stdout: {e.strerror or e}") from None


def dlpc_version() -> str:
    try:
        from importlib.metadata import version

        return version("dlpc")
    except Exception:  # noqa: BLE001 - metadata is optional (a bare checkout)
        return "unknown"


def version_text(tool: str) -> str:
    """What `<tool> --version` prints: `dlpc 0.1.0 (xdsl 0.74.0)` for dlpc itself,
    `dlpc-run (dlpc 0.1.0, xdsl 0.74.0)` for the others."""
    try:
        from importlib.metadata import version

        xdsl = version("xdsl")
    except Exception:  # noqa: BLE001
        xdsl = "unknown"
    if tool == "dlpc":
        return f"dlpc {dlpc_version()} (xdsl {xdsl})"
    return f"{tool} (dlpc {dlpc_version()}, xdsl {xdsl})"


class ToolArgumentParser(argparse.ArgumentParser):
    """argparse for dlpc's tools: every usage error is a DlpcError (one line, exit 1, as
    every other user error; not argparse's exit 2); `--version` is built in; called with
    no arguments at all, the tool prints its usage and `example` to stderr and exits 1."""

    def __init__(self, *args, example: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.example = example
        self.add_argument(
            "--version",
            action="version",
            version=version_text(self.prog),
            help="print the version of dlpc (and xDSL) and exit",
        )

    def parse_args(self, args=None, namespace=None):
        given = sys.argv[1:] if args is None else list(args)
        if not given and self.example:
            self.print_usage(sys.stderr)
            print(f"example: {self.example}", file=sys.stderr)
            print(f"run '{self.prog} --help' for every option", file=sys.stderr)
            raise SystemExit(1)
        return super().parse_args(args, namespace)

    def error(self, message: str):
        raise DlpcError(f"{self.prog}: error: {message}")


def install_hint(extra: str) -> str:
    """How to install an optional feature, as a command that works from a checkout (dlpc
    is installed with `pip install -e .`, not from PyPI) or by the pinned packages."""
    pins: list[str] = []
    try:
        from importlib.metadata import requires

        marker = f'extra == "{extra}"'
        pins = [r.split(";")[0].strip() for r in requires("dlpc") or () if marker in r]
    except Exception:  # noqa: BLE001 - metadata is optional (a bare checkout)
        pass
    hint = f"pip install -e '.[{extra}]' from the dlpc checkout"
    return f"{hint}, or pip install {' '.join(pins)}" if pins else hint


def require(module: str, extra: str, what: str):
    """Import an optional dependency or fail with a one-line error saying how to get it;
    tools call this before doing any work."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise DlpcError(f"error: {what} needs {module} ({install_hint(extra)})") from None


def progress(iterable=None, **kwargs):
    """A tqdm progress bar on stderr for a long job (rate, ETA). It draws only when stderr
    is a terminal (`disable=None`): logs and pipes get no carriage-return litter."""
    from tqdm import tqdm

    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("disable", None)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(iterable, **kwargs)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file (through symlinks and hard links)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def save_npz(file: IO[bytes], arrays: Mapping[str, ArrayLike]) -> None:
    """`np.savez(file, **arrays)` for any names: savez takes its own `allow_pickle`
    keyword from `**arrays`, so an array of that name was read as the flag and not
    written. The same .npz (one stored `<name>.npy` per array, no pickles)."""
    import zipfile

    import numpy as np

    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, value in arrays.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def write_atomically(path: str | os.PathLike, content: str | bytes | Callable) -> None:
    """Write a file only once it is complete, as `open(path, "w")` would leave it.

    `content` is text, bytes, or a function that writes to a binary file object. The
    data goes to a temp file beside the destination, renamed over it when complete. A
    symlink is written through to its target, as editors do (the link stays a link); an
    existing file keeps its mode, a new one gets 0666 less the umask (like open()). A
    destination that is not a regular file (/dev/stdout, a FIFO) is written directly."""
    given = Path(path)
    try:
        _write_atomically(given, content)
    except BrokenPipeError:
        raise
    except OSError as e:  # a full disk or device (-o /dev/full), an I/O error
        raise DlpcError(f"error: cannot write {given}: {e.strerror or e}") from None


def _write_atomically(given: Path, content) -> None:
    if given.exists() and not given.is_file():  # a device, a FIFO: written in place
        with open(given, "wb") as f:
            _write(f, content)
        return
    path = Path(os.path.realpath(given))
    if not path.parent.is_dir():
        raise DlpcError(f"error: cannot write {given}: no such directory {path.parent}")
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            _write(f, content)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _write(f, content) -> None:
    if isinstance(content, str):
        f.write(content.encode())
    elif isinstance(content, bytes):
        f.write(content)
    else:
        content(f)
