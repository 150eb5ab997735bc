"""The schedule script language: parsing, rendering back to the same text (scripts are
replayable and diffable), and errors that name the line."""

from __future__ import annotations

import pytest

from dlpc.passes.schedule.script import ScriptSyntaxError, parse_script

CANONICAL = """\
decompose matmul_0
split matmul_0/i1 by 32 -> i1o, i1i
split matmul_0/i0 by 4
tile matmul_0/i0, i1o by 8, 4
reorder matmul_0: i0o, i1oo, r0, i0i
fuse matmul_0/i0o, i1oo -> f
unroll matmul_0/i0i by 4
unroll matmul_0/r0i
vectorize matmul_0/i1i
parallel matmul_0/f
serial matmul_0
serial matmul_0/f
cache_read matmul_0/r0 fc1.weight -> wl pack
cache_read matmul_0/r0 @1
cache_write matmul_0/i1o out0 -> acc
compute_at relu_0 -> matmul_0/i0
tensorize matmul_0/i0i gemm
rfactor linear_0/r0 by 16"""


def test_every_primitive_round_trips():
    steps = parse_script(CANONICAL)
    assert [s.prim for s in steps] == [line.split()[0] for line in CANONICAL.splitlines()]
    assert "\n".join(s.text for s in steps) == CANONICAL
    assert [s.line for s in steps] == list(range(1, len(steps) + 1))


def test_comments_semicolons_and_spacing_normalise():
    steps = parse_script(
        "# a schedule\nsplit k/i by 4 ;vectorize   k/ii  # inner\n\ntile k/a,b by 2,2"
    )
    assert [s.text for s in steps] == ["split k/i by 4", "vectorize k/ii", "tile k/a, b by 2, 2"]
    assert [s.line for s in steps] == [2, 2, 4]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "split k/i by 4\nspilt k/i by 4",
            "schedule line 2: unknown primitive 'spilt' (known: split, reorder",
        ),
        (
            "split k/i by four",
            "schedule line 1: expected 'split K/L by N [-> O, I]', got 'split k/i by four'",
        ),
        ("vectorize k", "schedule line 1: expected 'vectorize K/L', got 'vectorize k'"),
        (
            "\n\ncompute_at relu_0 matmul_0/i0",
            "schedule line 3: expected 'compute_at PRODUCER -> K/L [local]'",
        ),
    ],
)
def test_syntax_errors_name_the_line(text, message):
    with pytest.raises(ScriptSyntaxError) as err:
        parse_script(text)
    assert str(err.value).startswith(message)
