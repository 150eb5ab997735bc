"""`python -m dlpc.frontends.text model.dlpc [--weights w.npz] [--debuginfo]`: print graph IR.

The frontend's own driver for tests and debugging (`dlpc --emit=graph` does the same
through the whole tool)."""

from __future__ import annotations

import argparse
import io
import sys

from xdsl.printer import Printer

from dlpc.diagnostics import run_guarded


def _main(argv: list[str] | None) -> int:
    from dlpc.frontends.text import load_model

    ap = argparse.ArgumentParser(prog="python -m dlpc.frontends.text", description=__doc__)
    ap.add_argument("file", help="a .dlpc model")
    ap.add_argument("--weights", help="an .npz file with the parameters")
    ap.add_argument("--debuginfo", action="store_true", help="print source locations")
    args = ap.parse_args(argv)
    model = load_model(args.file, args.weights)
    out = io.StringIO()
    Printer(stream=out, print_debuginfo=args.debuginfo).print_op(model.module)
    try:
        sys.stdout.write(out.getvalue() + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_guarded(lambda: _main(argv), tool="dlpc-text")


if __name__ == "__main__":
    sys.exit(main())
