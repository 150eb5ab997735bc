"""dlpc's environment variables, in one place: each with its type, default and one line
of help (`docs/settings.md` lists the same table; a test keeps the two in step).

Every read goes through `get(NAME)`, at the time of the call (tests and users change the
environment between calls), and a name that is not declared here is a programming error.
Variables of other programs that dlpc sets or honours (`OMP_NUM_THREADS`, `CC`,
`POCL_DEVICES`, `OCL_ICD_VENDORS`, ...) are read where they are used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # "path", "flags", "flag" (set and not "0"), "tristate" ("0", "1" or unset), "text"
    default: str
    help: str


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            "DLPC_CACHE_DIR",
            "path",
            "~/.cache/dlpc",
            "where compiled C libraries, compiled models and PoCL's kernel cache are kept",
        ),
        Setting(
            "DLPC_CFLAGS",
            "flags",
            "",
            "extra C compiler flags, appended to every compile and part of its cache key",
        ),
        Setting(
            "DLPC_DEBUG",
            "flag",
            "",
            "let an internal error escape as a Python traceback instead of one line",
        ),
        Setting(
            "DLPC_VERIFY_EACH",
            "flag",
            "",
            "dlpc.compile and dlpc.train (dlpc-run, dlpc-train) verify the IR after every pass,"
            " naming a pass that leaves it invalid (else their input and final IR only;"
            " dlpc-opt, dlpc and --check-each-pass always verify each pass; the tests set it)",
        ),
        Setting(
            "DLPC_TUNING_MACHINE",
            "text",
            "",
            "the machine name tuning records are matched against (default: this CPU's)",
        ),
        Setting(
            "DLPC_OPENCL_PLATFORM",
            "text",
            "",
            "use the first OpenCL platform whose name contains this (case-insensitive)",
        ),
        Setting(
            "DLPC_OPENCL_SUBDEVICES",
            "tristate",
            "",
            "0: do not split a parallel-only CPU device into one-unit sub-devices",
        ),
        Setting(
            "DLPC_OPENCL_TEAM",
            "tristate",
            "",
            "0: never run a model on a team of two serial devices; 1: also on sub-devices",
        ),
        Setting(
            "DLPC_OPENCL_PROFILE",
            "text",
            "",
            "OpenCL launch plans: gpu or cpu (default: gpu on a GPU device, else cpu)",
        ),
        Setting(
            "DLPC_OPENCL_TILES",
            "text",
            "",
            "OpenCL GPU plans' matrix products through __local tiles: 0 never, all every "
            "one recognised (default: where the rule says, backends/opencl/gpu_tile.py)",
        ),
        Setting(
            "DLPC_OPENCL_SVM",
            "tristate",
            "",
            "0: do not use fine-grained shared virtual memory for inputs and outputs",
        ),
    )
}


def is_set(name: str) -> bool:
    """Whether the user set the variable (to anything but blanks)."""
    SETTINGS[name]  # KeyError: an undeclared setting is a bug, not input
    return bool(os.environ.get(name, "").strip())


def get(name: str) -> str:
    """The variable's value as set (stripped), else its default ('' means none); a path's
    `~` expanded."""
    setting = SETTINGS[name]  # KeyError: an undeclared setting is a bug, not input
    value = os.environ.get(name, "").strip() or setting.default
    return str(Path(value).expanduser()) if setting.kind == "path" and value else value


def flag(name: str) -> bool:
    """A "flag" setting: true when set to anything but '' or '0'."""
    return get(name) not in ("", "0")


def table() -> str:
    """The settings as a Markdown table (docs/settings.md)."""
    rows = ["| variable | kind | default | what it does |", "|---|---|---|---|"]
    for s in SETTINGS.values():
        rows.append(
            f"| `{s.name}` | {s.kind} | {f'`{s.default}`' if s.default else '(unset)'} | {s.help} |"
        )
    return "\n".join(rows)
