"""`python -m dlpc`: dlpc's tools as subcommands, for when the scripts are not on PATH.

    python -m dlpc model.dlpc --emit=c        # compile, the default: same as `dlpc`
    python -m dlpc compile model.dlpc ...     # dlpc
    python -m dlpc run model.dlpc ...         # dlpc-run
    python -m dlpc opt model.mlir -p ...      # dlpc-opt
    python -m dlpc tune model.dlpc ...        # dlpc-tune
    python -m dlpc train model.dlpc ...       # dlpc-train

Each subcommand takes the tool's own options (`python -m dlpc run --help`).
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module, the tool it is)
TOOLS = {
    "compile": ("dlpc.tools.dlpc", "dlpc"),
    "run": ("dlpc.tools.dlpc_run", "dlpc-run"),
    "opt": ("dlpc.tools.dlpc_opt", "dlpc-opt"),
    "tune": ("dlpc.tools.dlpc_tune", "dlpc-tune"),
    "train": ("dlpc.tools.dlpc_train", "dlpc-train"),
}
USAGE = "usage: python -m dlpc [compile|run|opt|tune|train] ARGS...  (default: compile)"


def help_text() -> str:
    tools = "\n".join(f"  {name:8s} = {tool}" for name, (_, tool) in TOOLS.items())
    return (
        f"{USAGE}\n\nsubcommands (each takes the tool's own options, see "
        f"'python -m dlpc SUBCOMMAND --help'):\n{tools}\n\n"
        "example: python -m dlpc run examples/mlp.dlpc --target c --check"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        print(help_text(), file=sys.stderr)
        return 1
    if argv[0] in ("-h", "--help"):
        print(help_text())
        return 0
    if argv[0] == "--version":
        from dlpc.diagnostics import version_text

        print(version_text("dlpc"))
        return 0
    name, rest = (argv[0], argv[1:]) if argv[0] in TOOLS else ("compile", argv)
    return importlib.import_module(TOOLS[name][0]).main(rest)


if __name__ == "__main__":
    sys.exit(main())
