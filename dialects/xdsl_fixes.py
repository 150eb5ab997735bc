# pyright: strict
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

xDSL 0.74's parser also expands a splat literal (`dense<1.0> : tensor<1099511627776xf32>`,
a 60-byte line) into a Python list of every element before packing it: a type over dlpc's
size limit (dialects/sizes.py) is refused as soon as it is parsed, and a literal that still
does not fit in memory is a parse error, not a MemoryError from inside the parser.
"""

import functools
import re
from collections.abc import Callable

from xdsl.dialects.builtin import AnyDenseElement, DenseIntOrFPElementsAttr, RankedStructure
from xdsl.parser.attribute_parser import AttrParser
from xdsl.utils.mlir_lexer import MLIRLexer

from dlpc.dialects.sizes import size_error

# the pattern xDSL 0.74 ships (tests assert it is still this, so a change upstream is seen)
XDSL_STRING_LITERAL = r'"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
# the same language, one plain character per iteration: linear time on any input
LINEAR_STRING_LITERAL = r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'

# (the private names below are the xDSL internals these fixes replace: no public hook exists)


def install_linear_string_literal() -> None:
    """Give xDSL's MLIR lexer the linear string-literal pattern (idempotent).

    Only the exact pattern above is replaced: a different upstream pattern is left alone
    (test_untrusted_input.py fails then, so the fix is looked at again)."""
    current = MLIRLexer._unescaped_characters_regex  # pyright: ignore[reportPrivateUsage]
    if current.pattern == XDSL_STRING_LITERAL and current.flags == re.compile("").flags:
        MLIRLexer._unescaped_characters_regex = re.compile(LINEAR_STRING_LITERAL)  # pyright: ignore[reportPrivateUsage]


# what xDSL 0.74's AttrParser._parse_dense_literal_type returns, and that method's signature
DenseLiteralType = RankedStructure[AnyDenseElement]
ParseDenseLiteralType = Callable[[AttrParser], DenseLiteralType]

# the wrapper install_dense_literal_limit put in place (installing again is a no-op)
_checked_type: ParseDenseLiteralType | None = None


def install_dense_literal_limit() -> None:
    """Check a dense literal's type against dlpc's size limit before xDSL expands the
    literal (idempotent)."""
    global _checked_type
    parse_type: ParseDenseLiteralType = AttrParser._parse_dense_literal_type  # pyright: ignore[reportPrivateUsage]
    if parse_type is _checked_type:
        return

    @functools.wraps(parse_type)
    def checked_type(self: AttrParser) -> DenseLiteralType:
        start = self.pos
        ty = parse_type(self)
        message = size_error(ty.get_shape(), ty.get_element_type())
        if message:
            self.raise_error(f"dense literal: {message}", start, self.pos)
        return ty

    _checked_type = checked_type
    AttrParser._parse_dense_literal_type = checked_type  # pyright: ignore[reportPrivateUsage]

    parse_dense = AttrParser.parse_dense_int_or_fp_elements_attr

    @functools.wraps(parse_dense)
    def guarded(
        self: AttrParser, type: RankedStructure[AnyDenseElement] | None
    ) -> DenseIntOrFPElementsAttr:
        start = self.pos
        try:
            return parse_dense(self, type)
        except MemoryError:
            self.raise_error("dense literal: not enough memory to expand it", start, self.pos)

    AttrParser.parse_dense_int_or_fp_elements_attr = guarded
