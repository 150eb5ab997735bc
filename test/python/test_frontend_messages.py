"""Located messages of the text frontend that no lit test pinned down (issue 18: mutants
of their conditions survived): what a syntax error expects, the nesting limit, division
by zero in literal arithmetic."""

from __future__ import annotations

import pytest

from dlpc.diagnostics import DlpcError
from dlpc.frontends.text import parse_model
from dlpc.frontends.text.parser import MAX_NESTING


def error(src: str) -> str:
    with pytest.raises(DlpcError) as e:
        parse_model(src, "m.dlpc")
    return str(e.value).splitlines()[0]


def test_a_missing_operand_expects_an_expression():
    assert error("model m(x: f32[2]) {\n  return x +\n}\n") == (
        "m.dlpc:3:1: error: unexpected '}', expected an expression"
    )


def test_a_missing_close_paren_lists_no_expression():
    msg = error("model m(x: f32[2]) {\n  let y = relu(x\n  return y\n}\n")
    assert msg.startswith("m.dlpc:3:3: error: unexpected 'return'")
    assert "an expression" not in msg


def _nested(depth: int) -> str:
    return "model m(x: f32[2]) {\n  return " + "relu(" * depth + "x" + ")" * depth + "\n}\n"


def test_nesting_limit():
    parse_model(_nested(MAX_NESTING // 2), "m.dlpc")  # deep, still fine
    msg = error(_nested(MAX_NESTING))
    assert msg.startswith("m.dlpc:2:") and f"nested more than {MAX_NESTING} levels" in msg


@pytest.mark.parametrize("expr", ["x * (1 / 0)", "x * (2.0 / (1 - 1))", "x + 3 / 0.0"])
def test_division_by_zero_in_literals(expr):
    msg = error(f"model m(x: f32[2]) {{\n  return {expr}\n}}\n")
    assert msg.startswith("m.dlpc:2:") and msg.endswith("error: division by zero")


def test_division_by_one_is_fine():
    assert parse_model("model m(x: f32[2]) {\n  return x * (2 / 1)\n}\n")


def test_an_open_call_expects_an_expression_or_close_paren():
    assert error("model m(x: f32[2]) {\n  let y = relu(\n}\n") == (
        "m.dlpc:3:1: error: unexpected '}', expected an expression or ')'"
    )


def test_missing_return_points_at_the_closing_brace():
    src = "model m(x: f32[2]) {\n  let y = relu(x)\n   }\n"
    assert error(src) == "m.dlpc:3:4: error: model 'm' has no return statement"


def test_a_let_bound_number_is_an_attribute_value():
    import numpy as np

    import dlpc

    src = "model m(x: f32[4]) {\n  let a = 0.25\n  return leaky_relu(x, alpha=a)\n}\n"
    x = np.array([-4.0, -1.0, 0.5, 2.0], np.float32)
    (y,) = dlpc.compile(parse_model(src), "numpy", opt_level=0)(x)
    np.testing.assert_array_equal(y, np.where(x > 0, x, 0.25 * x))
    msg = error("model m(x: f32[2]) {\n  return leaky_relu(x, alpha=x)\n}\n")
    assert msg == (
        "m.dlpc:2:30: error: leaky_relu argument 'alpha' expects a constant here, "
        "but 'x' is a tensor"
    )


def test_an_attribute_error_points_at_its_keyword():
    msg = error('model m(x: f32[2]) {\n  return clip(x, max=1.0, min="a")\n}\n')
    assert msg == "m.dlpc:2:27: error: clip argument 'min' expects a number, got \"a\""


@pytest.mark.parametrize("size", [2.5, True, 0, "2"])
def test_a_named_dim_takes_a_positive_int(size):
    with pytest.raises(DlpcError) as e:
        parse_model("model m(x: f32[B, 2]) {\n  return relu(x)\n}\n", "m.dlpc", dims={"B": size})
    assert str(e.value).splitlines()[0] == (
        "m.dlpc:1:16: error: dimension 'B' must be bound to a positive int"
    )


def test_a_string_attribute_is_its_text():
    import numpy as np
    import torch

    import dlpc

    x = np.linspace(-3, 3, 8, dtype=np.float32)
    src = 'model m(x: f32[8]) {\n  return gelu(x, approximate="tanh")\n}\n'
    (y,) = dlpc.compile(parse_model(src), "numpy", opt_level=0)(x)
    want = torch.nn.functional.gelu(torch.tensor(x), approximate="tanh").numpy()
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_a_missing_operand_points_at_the_call():
    msg = error("model m(x: f32[2, 3]) {\n  return linear(x)\n}\n")
    assert msg == "m.dlpc:2:10: error: linear(input, weight, bias) is missing operand 'weight'"


def test_ops_carry_their_source_line_and_column():
    from xdsl.dialects.builtin import FileLineColLoc

    model = parse_model("model m(x: f32[2]) {\n  let y = x * 2.0\n  return relu(y)\n}\n", "m.dlpc")
    locs = {
        op.name: (op.location.line.data, op.location.column.data)
        for op in model.module.walk()
        if isinstance(getattr(op, "location", None), FileLineColLoc)
    }
    assert locs["graph.mul"] == (2, 13) and locs["graph.relu"] == (3, 10)


def test_expected_list_of_five_is_spelled_out_and_six_is_not():
    """The "expected ..." tail lists up to five alternatives (mutant `> 5` -> `>= 5`)."""
    from dlpc.frontends.text.parser import _describe_expected

    five = ["COMMA", "COLON", "EQUAL", "PLUS", "STAR"]
    assert _describe_expected(five) == ", expected '*', '+', ',', ':' or '='"
    assert _describe_expected([*five, "SLASH"]) == ""
    assert _describe_expected(["COMMA"]) == ", expected ','"
    assert _describe_expected([]) == ""


@pytest.mark.parametrize(
    "source, line, shown",
    [
        ("model m(x: f32[2]) {\n  return x\n}\n", 2, True),
        ("model m(x: f32[2]) {\n\n  return x\n}\n", 2, False),  # a blank line: no caret
        ("model m(x: f32[2]) {\n  return x\n}\n", 4, False),  # past the end
        ("model m(x: f32[2]) {\n  return x\n}\n", 0, False),  # before the start
    ],
)
def test_error_at_shows_a_source_line_only_where_there_is_one(source, line, shown):
    from dlpc.frontends.text.parser import error_at

    message = str(error_at("m.dlpc", source, (line, 3), "boom"))
    head, *rest = message.splitlines()
    assert head == f"m.dlpc:{line}:3: error: boom"
    if shown:
        assert rest == [source.splitlines()[line - 1], "  ^"]
    else:
        assert rest == []


def test_too_many_initialiser_arguments_point_at_the_first_extra_one():
    """The builder names argument len(spec), the first one too many (mutants that point one
    further or at the last survived)."""
    src = "model m(x: f32[2]) {\n  param p: f32[2] = normal(0.0, 1.0, 7, 8, 9)\n  return x + p\n}\n"
    assert error(src) == "m.dlpc:2:41: error: normal() takes 3 arguments, got 5"
