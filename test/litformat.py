"""lit's ShTest with the common RUN lines run inside lit's worker process.

Most lit files here are `[not] dlpc-opt ARGS [2>&1] | [not] filecheck ARGS` lines; as
commands, each starts two Pythons (dlpc-opt's imports alone cost ~0.5 s of CPU). This
format takes lit's own parse and substitutions of a file (so its verdict on REQUIRES,
UNSUPPORTED and the substitutions is lit's) and, when every line is of that form and the
file expects no failure, runs dlpc-opt's main and filecheck's matcher in the worker
(`bench/fastlit.py`, the same runner bench/mutation.py uses), under the test's own
environment (`config.environment`) and working directory, the dlpc-opt process's exit
code taken from its SystemExit. A file passes only when every line passes there; any
other file, and any line that fails in process, is run by lit as commands (ShTest), and
that run's verdict is the file's: a failure is always lit's own, with its output.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path

import lit.formats
import lit.Test
import lit.TestRunner as runner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fastlit  # noqa: E402

DBG = re.compile(runner.kPdbgRegex)


@contextlib.contextmanager
def _as_process(environment: dict[str, str], cwd: str):
    """os.environ and the working directory as lit gives a RUN line's commands."""
    saved, here = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)


class InProcessShTest(lit.formats.ShTest):
    def execute(self, test, litConfig):
        commands = self._commands(test)
        if commands and not litConfig.noExecute:
            exec_dir = os.path.dirname(test.getExecPath())
            os.makedirs(exec_dir, exist_ok=True)
            with _as_process(dict(test.config.environment), exec_dir):
                if all(fastlit.run_one(c) is None for c in commands):
                    return lit.Test.Result(lit.Test.PASS, "(run in lit's worker process)\n")
        return super().execute(test, litConfig)

    def _commands(self, test) -> list[str] | None:
        """The file's RUN commands after lit's substitutions, when each is one this
        format runs in process; None otherwise (lit's ShTest then runs the file)."""
        if test.config.unsupported:
            return None
        parsed = runner.parseIntegratedTestScript(test, require_script=True)
        if isinstance(parsed, lit.Test.Result) or test.xfails:
            return None
        tmp_dir, tmp_base = runner.getTempPaths(test)
        substitutions = runner.getDefaultSubstitutions(test, tmp_dir, tmp_base)
        conditions = {feature: True for feature in test.config.available_features}
        script = runner.applySubstitutions(
            parsed,
            substitutions,
            conditions,
            recursion_limit=test.config.recursiveExpansionLimit,
        )
        commands = []
        for line in script:
            m = DBG.fullmatch(line)
            command = (m.group(2) if m else line).strip()
            pipe = fastlit.PIPE.match(command)
            if pipe is None or any(c in pipe.group(2) for c in "<>|;$`%"):
                return None
            commands.append(command)
        os.makedirs(os.path.dirname(tmp_base), exist_ok=True)
        return commands
