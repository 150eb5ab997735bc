"""Fixes dlpc installs in xDSL when its dialects are registered (see docs/security.md).

xDSL 0.74's MLIR lexer matches a string literal with

    "(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"

The `+` inside the `*` lets Python's backtracking matcher split a run of n plain characters
in 2^(n-1) ways; on an unterminated string (no closing quote) it tries all of them, so a
40-byte `.mlir` file hangs the parser (26 characters: seconds; each 2 more double it).

The replacement matches one plain character per iteration. It accepts exactly the same
strings: a sequence of plain characters is the same sequence whether taken in runs or one at
a time, and each iteration is chosen by its first character (`\\` starts an escape, anything
else but `"`, newline, `\v`, `\f` is plain; the escape letters `"nt\\` are no hex digits), so
there is one way to match any input and a failure backtracks in linear time.
"""

import re

from xdsl.utils.mlir_lexer import MLIRLexer

# the pattern xDSL 0.74 ships (tests assert it is still this, so a change upstream is seen)
XDSL_STRING_LITERAL = r'"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
# the same language, one plain character per iteration: linear time on any input
LINEAR_STRING_LITERAL = r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'


def install_linear_string_literal() -> None:
    """Give xDSL's MLIR lexer the linear string-literal pattern (idempotent).

    Only the exact pattern above is replaced: a different upstream pattern is left alone
    (test_untrusted_input.py fails then, so the fix is looked at again)."""
    current = MLIRLexer._unescaped_characters_regex
    if current.pattern == XDSL_STRING_LITERAL and current.flags == re.compile("").flags:
        MLIRLexer._unescaped_characters_regex = re.compile(LINEAR_STRING_LITERAL)
