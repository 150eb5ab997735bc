"""One-line diagnostics for dlpc's command-line tools.

User errors (bad source text, invalid IR, unsupported ops, bad options) become one line
on stderr and exit code 1; a Python traceback is only shown with DLPC_DEBUG=1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


class DlpcError(Exception):
    """A user-facing error. `str(e)` is the complete one-line diagnostic
    (e.g. `model.dlpc:3:9: error: unknown operator 'rleu'`)."""


def first_line(text: str) -> str:
    """The first non-empty line: a diagnostic is one line even when an exception's text
    carries context (an IR dump, a note) below it."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def format_exception(e: BaseException) -> str:
    """The diagnostic for an exception (without the tool prefix): a DlpcError's text as
    its author formatted it (a located error may add the source line and a caret below
    its one error line); for anything else one line."""
    return str(e) if isinstance(e, DlpcError) else first_line(_format(e))


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
        return f"error: {first_line(str(e))}"
    if isinstance(e, FileNotFoundError):
        return f"error: no such file: {e.filename}"
    if isinstance(e, OSError) and e.filename:
        return f"error: {e.filename}: {e.strerror}"
    if isinstance(e, ValueError | KeyError | NotImplementedError):
        return f"error: {first_line(str(e))}"
    return f"internal error: {type(e).__name__}: {first_line(str(e))}"


# Exit status when the reader of stdout goes away (`dlpc ... | head -1`): 128 + SIGPIPE,
# what a shell reports for `cat` killed by SIGPIPE (`${PIPESTATUS[0]}`, `set -o pipefail`).
EXIT_BROKEN_PIPE = 141


def run_guarded(fn: Callable[[], object], tool: str) -> int:
    """Run a tool's main body; map exceptions to a diagnostic and exit code.

    Stdout is flushed here, so a reader that went away (`| head -1`) is seen inside the
    guard: the tool then ends quietly like `cat`, with exit status 141 (128 + SIGPIPE)."""
    try:
        result = fn()
        sys.stdout.flush()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except BaseException as e:  # noqa: BLE001 - the tool boundary
        if os.environ.get("DLPC_DEBUG"):
            raise
        msg = format_exception(e) or f"internal error: {type(e).__name__}"
        located = msg.split(": error:")[0] != msg and not msg.startswith("error:")
        print(msg if located else f"{tool}: {msg}", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0


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
    sys.stdout.flush()
    view = memoryview(text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"))
    while view:
        view = view[os.write(fd, view) :]


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


def write_atomically(path: str | os.PathLike, content: str | bytes | Callable) -> None:
    """Write a file only once it is complete, as `open(path, "w")` would leave it.

    `content` is text, bytes, or a function that writes to a binary file object. The
    data goes to a temp file beside the destination, renamed over it when complete. A
    symlink is written through to its target, as editors do (the link stays a link); an
    existing file keeps its mode, a new one gets 0666 less the umask (like open()). A
    destination that is not a regular file (/dev/stdout, a FIFO) is written directly."""
    given = Path(path)
    if given.exists() and not given.is_file():
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
