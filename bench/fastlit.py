"""Run lit files' RUN lines with dlpc-opt inside this process (for bench/mutation.py).

    python bench/fastlit.py test/dialects test/passes/loop-split.mlir ...

lit starts a Python for every dlpc-opt of every RUN line; a mutant costs one run of its
area's tests, so bench/mutation.py runs lit files through this instead: one Python start,
then `[not] dlpc-opt ARGS [2>&1] | filecheck ...` lines call dlpc-opt's main in-process
and check their output with filecheck's matcher, in-process too; a file with a line
that fails here or is of another form is handed to lit, whose verdict counts. After
`--pytest`, pytest's arguments, run by pytest.main in this process too. Exit 1 naming the first failing file and line; 0 when every line passes.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path.cwd()
SUFFIXES = (".mlir", ".test", ".dlpc")
PIPE = re.compile(r"^(not\s+)?dlpc-opt\s+(.*?)(\s+2>&1)?\s*\|\s*(not\s+)?filecheck\s+(.*)$")


def run_lines(path: Path) -> list[str]:
    """The RUN commands of a lit file (continuation lines joined)."""
    lines, pending = [], ""
    for text in path.read_text().splitlines():
        if "RUN:" not in text:
            continue
        command = text.split("RUN:", 1)[1].strip()
        if command.endswith("\\"):
            pending += command[:-1] + " "
            continue
        lines.append(pending + command)
        pending = ""
    return lines


def substitute(command: str, path: Path, tmp: Path) -> str:
    name = tmp / path.name
    return (
        command.replace("%examples", str(ROOT / "examples"))
        .replace("%s", str(path))
        .replace("%S", str(path.parent))
        .replace("%t", f"{name}.tmp")
    )


def dlpc_opt(argv: list[str]) -> tuple[int, str, str]:
    from dlpc.tools.dlpc_opt import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return int(code or 0), out.getvalue(), err.getvalue()


def run_one(command: str) -> str | None:
    """None when the command passes in this process, else why not (also when it is not
    a line this process runs: the caller then asks lit)."""
    m = PIPE.match(command)
    if m is None or any(c in m.group(2) for c in "<>|;$`"):
        return "not a dlpc-opt | filecheck line"
    return run_in_process(m)


def run_lit(path: Path) -> str | None:
    """lit's own verdict on one file (a line failed here, or is not one this process
    runs: state an earlier line left in the process, `not`, shell redirections)."""
    done = subprocess.run(["lit", "-q", str(path)], capture_output=True, text=True)
    return None if done.returncode == 0 else (done.stdout + done.stderr)[-1500:]


def run_in_process(m: re.Match) -> str | None:
    expect_fail, args, merged, check_fails, check_args = m.groups()
    code, out, err = dlpc_opt(shlex.split(args))
    if bool(expect_fail) != (code != 0):
        return f"dlpc-opt exit {code}: {err[-400:]}"
    text = out + err if merged else out
    code, why = filecheck(shlex.split(check_args), text)
    if bool(check_fails) != (code != 0):
        return f"filecheck: {why[-600:]}"
    return None


def filecheck(args: list[str], text: str) -> tuple[int, str]:
    """filecheck's matcher in this process on `text`: its exit code and messages."""
    from filecheck.matcher import Matcher
    from filecheck.options import parse_argv_options

    with tempfile.NamedTemporaryFile("w", suffix=".out") as f:
        f.write(text)
        f.flush()
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            opts = parse_argv_options(["filecheck", *args, f"--input-file={f.name}"])
            code = Matcher.from_opts(opts).run()
    return code, out.getvalue()


def files(paths: list[str]) -> list[Path]:
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES)
        else:
            found.append(p)
    return [f.resolve() for f in found]


def main(argv: list[str]) -> int:
    """Lit files, then (after `--pytest`) pytest's arguments, run in this same process."""
    os.environ.setdefault("PYTHONHASHSEED", "0")
    argv, pytest_args = (
        (argv, None)
        if "--pytest" not in argv
        else (argv[: argv.index("--pytest")], argv[argv.index("--pytest") + 1 :])
    )
    with tempfile.TemporaryDirectory() as tmp:
        for path in files(argv):
            for command in run_lines(path):
                if run_one(substitute(command, path, Path(tmp))) is not None:
                    why = run_lit(path)
                    if why is not None:
                        print(f"FAIL {path}: {command}\n{why}")
                        return 1
                    break
    if pytest_args is not None:
        import pytest

        return int(pytest.main(pytest_args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
