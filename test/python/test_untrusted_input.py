"""Input files are data (issue #15, docs/security.md): odd and hostile files give one error
line and exit code 1, or the right result; never a hang, a crash or a wrong shape."""

import re
import subprocess
import sys

import pytest

CLI_TIMEOUT = 60  # seconds; a generous bound for a hang, not a timing assertion


def run_cli(*argv, timeout=CLI_TIMEOUT, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "dlpc", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def assert_one_line_error(proc, expected: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert expected in proc.stderr, proc.stderr


# --------------------------------------------- item 9: the lexer's exponential string pattern


def test_xdsl_string_pattern_is_the_one_dlpc_replaces():
    """Fails when xDSL changes its string-literal pattern: look at dialects/xdsl_fixes.py again
    (drop the fix if upstream made the pattern linear, adapt it otherwise)."""
    import importlib.util

    from xdsl.utils.mlir_lexer import MLIRLexer

    import dlpc.dialects  # noqa: F401  (installs the fix)
    from dlpc.dialects.xdsl_fixes import LINEAR_STRING_LITERAL, XDSL_STRING_LITERAL

    spec = importlib.util.find_spec("xdsl.utils.mlir_lexer")
    source = open(spec.origin, encoding="utf-8").read()
    shipped = "r'" + XDSL_STRING_LITERAL + "'"
    assert shipped in source, "xDSL's string-literal pattern changed: revisit xdsl_fixes.py"
    assert MLIRLexer._unescaped_characters_regex.pattern == LINEAR_STRING_LITERAL


@pytest.mark.parametrize(
    "text",
    ['""', '"abc"', '"a\\"b"', '"\\n\\t\\\\"', '"\\41\\ff"', '"x\\q"', '"a\nb"', '"abc', '"\\', "'"],
)
def test_linear_string_pattern_accepts_what_xdsl_accepts(text):
    from dlpc.dialects.xdsl_fixes import LINEAR_STRING_LITERAL, XDSL_STRING_LITERAL

    old = re.compile(XDSL_STRING_LITERAL).match(text)
    new = re.compile(LINEAR_STRING_LITERAL).match(text)
    assert (old and old.group()) == (new and new.group())


@pytest.mark.parametrize("entry", ["dlpc-opt", "dlpc", "load"])
def test_unterminated_string_is_one_error_line(tmp_path, entry):
    """A 40-byte file that took minutes with xDSL's pattern (each 2 more characters double it)."""
    path = tmp_path / "hang.mlir"
    path.write_text('"' + "a" * 38 + "\n")
    assert path.stat().st_size == 40
    if entry == "dlpc-opt":
        proc = run_cli("opt", str(path))
    elif entry == "dlpc":
        proc = run_cli(str(path), "--emit=graph")
    else:
        code = "import dlpc, sys\nfrom dlpc.diagnostics import run_guarded\n"
        code += f"sys.exit(run_guarded(lambda: dlpc.load({str(path)!r}) and 0, 'load'))"
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=CLI_TIMEOUT
        )
    assert_one_line_error(proc, "hang.mlir:1:1: error: End of file reached before closing string")
