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


def run_guarded(fn: Callable[[], object], tool: str) -> int:
    """Run a tool's main body; map exceptions to a diagnostic and exit code."""
    try:
        result = fn()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:
        return 130
    except BaseException as e:  # noqa: BLE001 - the tool boundary
        if os.environ.get("DLPC_DEBUG"):
            raise
        msg = format_exception(e) or f"internal error: {type(e).__name__}"
        located = msg.split(": error:")[0] != msg and not msg.startswith("error:")
        print(msg if located else f"{tool}: {msg}", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0


class ToolArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are a DlpcError (one line, exit 1), not exit 2."""

    def error(self, message: str):
        raise DlpcError(f"{self.prog}: error: {message}")


def write_atomically(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` only once it is complete: a temp file beside it, renamed."""
    path = Path(path)
    if not path.parent.is_dir():
        raise DlpcError(f"error: cannot write {path}: no such directory {path.parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
