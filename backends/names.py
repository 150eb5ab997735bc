"""Names and text from input files, made safe for generated source (docs/security.md).

A model, IR or target file is data. Every name it holds that reaches generated code goes
through `identifier` (through a `Scope`, which makes it unique), and every other text
through the escaper of the target language; no code generator builds an identifier, a
comment or a string literal from model text by itself.

Identifiers are the same in every target language (Python, C, OpenCL C, DLP C):

    identifier("fc1.weight")        -> "v_fc1_weight"
    identifier("NULL")              -> "v_NULL"       (never a macro, keyword or builtin)
    identifier("ﬁ"), identifier("fi") -> "v_uFB01", "v_fi"  (ASCII: no NFKC folding)
    identifier("relu_0", "kernel")  -> "kernel_relu_0"

- only ASCII letters, digits and `_`; every other character is spelled out: ASCII
  punctuation, spaces and control characters become `_`, any other character `u` and its
  code point in hex; runs of `_` collapse;
- always `<kind>_` in front, where `kind` is one of `KINDS`: no C/OpenCL/Python keyword,
  builtin or predefined macro begins with one of these prefixes, and the code generators
  spell their own names (`args`, `dlpc_main`, `DLPC_MAX`, `np`, helper functions)
  without them, so a model name can meet neither;
- at most `MAX_LENGTH` characters of the spelled-out name are kept;
- `Scope.fresh` makes names unique within a scope: when two names spell the same
  (`a.b`/`a_b`, two names cut at `MAX_LENGTH`) the later gets `_2`, `_3`, ..., so distinct
  values never share an identifier; values without a name are `v_0`, `v_1`, ...

Escapers: `c_comment`, `c_string` (C, OpenCL C and DLP C), `py_comment`, `py_literal`
(Python). Their output is printable ASCII on one line and cannot end the comment or the
literal it is in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from dlpc.dialects import symdims

#: prefixes of identifiers made from input text, by what they name
KINDS = ("v", "const", "kernel", "task", "args", "g", "fused")
#: characters of the spelled-out name kept after the prefix: with the longest prefix and a
#: uniqueness suffix an identifier stays within the 63 significant characters C99 promises
MAX_LENGTH = 48


def text_of(value: str | bytes) -> str:
    """Text from IR: a `.mlir` string with hex escapes that are not UTF-8 parses as bytes."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def _spell(text: str) -> str:
    out = []
    for ch in text:
        if ch.isascii() and (ch.isalnum() or ch == "_"):
            out.append(ch)
        elif ch.isascii():
            out.append("_")
        else:
            out.append(f"_u{ord(ch):04X}_")
    spelled = "_".join(part for part in "".join(out).split("_") if part)
    return spelled[:MAX_LENGTH].rstrip("_")


def identifier(text: str | bytes, kind: str = "v") -> str:
    """An identifier for `text` in every target language: `<kind>_` + ASCII spelling."""
    if kind not in KINDS:
        raise AssertionError(f"unknown identifier kind {kind!r}")
    return f"{kind}_{_spell(text_of(text))}"


class Scope:
    """Unique identifiers within one scope (a generated file, function or kernel).

    A nested scope starts from its parent's names (`Scope(parent.used)`), so a local never
    shadows a global the function calls."""

    def __init__(self, taken: Iterable[str] = ()):
        self.used: set[str] = set(taken)
        # per base, how many names of its sequence are known taken: `used` only grows, so
        # the search resumes there (from 0 every time, a kernel's thousands of anonymous
        # values made naming quadratic: two thirds of resnet's C emission)
        self._taken: dict[str, int] = {}

    def fresh(self, hint: str | bytes | None, fallback: str = "", kind: str = "v") -> str:
        """A new identifier from `hint` (or `fallback` when there is none)."""
        base = identifier(hint if hint else fallback, kind)
        k = self._taken.get(base, 0)
        while (name := _nth_name(base, k)) in self.used:
            k += 1
        self._taken[base] = k + 1
        self.used.add(name)
        return name


def _nth_name(base: str, k: int) -> str:
    """The k-th name of `base`'s sequence: v_0, v_1, ... when nothing was spelled (`base`
    ends in `_`), else v_x, v_x_2, v_x_3, ..."""
    if base.endswith("_"):
        return f"{base}{k}"
    return base if k == 0 else f"{base}_{k + 1}"


# -------------------------------------------------------------------- C and OpenCL C


def _c_text(text: str | bytes, quote: str) -> str:
    """`text` as printable ASCII: non-ASCII as its UTF-8 bytes in octal, so the string
    is exact; `quote`, `\\` and `?` (trigraphs) escaped."""
    out = []
    for byte in text_of(text).encode("utf-8", "surrogatepass"):
        ch = chr(byte)
        if ch in (quote, "\\", "?"):
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def c_string(text: str | bytes) -> str:
    """A C (and OpenCL C) string literal holding exactly `text` (UTF-8)."""
    return f'"{_c_text(text, chr(34))}"'


def c_comment(text: str | bytes) -> str:
    """`/* text */` on one line: non-printable and non-ASCII characters escaped
    (`\\n`, `\\u00e9`), `*/`, `/*` and `??` broken so the comment cannot end early."""
    safe = text_of(text).encode("unicode_escape").decode("ascii")
    safe = safe.replace("*/", "*\\/").replace("/*", "/\\*").replace("??", "?\\?")
    return f"/* {safe} */"


# ---------------------------------------------------------------------------- Python


def py_comment(text: str | bytes) -> str:
    """`# text` on one line: newlines and other control or non-ASCII characters escaped."""
    return "# " + text_of(text).encode("unicode_escape").decode("ascii")


def py_literal(value) -> str:
    """A Python expression (ASCII) for an attribute value: tuples, floats incl. inf/nan,
    ints, bools, None and strings (any text, escaped by `ascii`)."""
    if isinstance(value, tuple | list):
        items = ", ".join(py_literal(v) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    if isinstance(value, float) and not math.isfinite(value):
        return "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    if isinstance(value, bool | int | float) or value is None:
        return repr(value)
    if isinstance(value, str | bytes):
        return ascii(text_of(value))
    if isinstance(value, symdims.SymDim):  # the call's value (emit_numpy binds the names)
        return symdims.python_expr(value)
    raise AssertionError(f"no Python literal for {value!r}")
