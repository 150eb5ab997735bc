"""One-line diagnostics for dlpc's command-line tools.

User errors (bad source text, invalid IR, unsupported ops, bad options) become one line
on stderr and exit code 1; a Python traceback is only shown with DLPC_DEBUG=1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


class DlpcError(Exception):
    """A user-facing error. `str(e)` is the complete one-line diagnostic
    (e.g. `model.dlpc:3:9: error: unknown operator 'rleu'`)."""


def format_exception(e: BaseException) -> str:
    from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

    if isinstance(e, DlpcError):
        return str(e)
    if isinstance(e, ParseError):
        loc = e.span.get_location()
        msg = " ".join(e.msg.split())
        return f"{loc}: error: {msg}"
    if isinstance(e, VerifyException | DiagnosticException):
        text = str(e).strip()
        return f"error: {text}"
    if isinstance(e, FileNotFoundError):
        return f"error: no such file: {e.filename}"
    if isinstance(e, ValueError | KeyError | NotImplementedError):
        return f"error: {e}"
    return f"internal error: {type(e).__name__}: {e}"


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
        msg = format_exception(e)
        located = msg.split(": error:")[0] != msg and not msg.startswith("error:")
        print(msg if located else f"{tool}: {msg}", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0
