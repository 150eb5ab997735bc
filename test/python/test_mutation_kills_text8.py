"""frontends/text/__init__.py (load_model / parse_model's weight sources and dim bindings),
eighth round (issue 35, bench/mutation.py --area frontends-text): which weights win
(explicit > `<model>.npz` beside the file > initialisers), how `dims`, `batch` and
`unbound` bind named dims (and whether the first call gets its own program), and each
refusal's exact one-line message."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.diagnostics import DlpcError
from dlpc.frontends.text import binding, load_model, named_dims, parse, parse_model

SOURCE = """model m(x: f32[B, S, 4], y: f32[B, 4]) {
  param w: f32[4, K] = normal(seed=1)
  return matmul(x, w), y
}
"""
FIXED = """model fixed(x: f32[2, 3]) {
  param w: f32[3, 3] = normal(seed=1)
  return matmul(x, w)
}
"""


def shapes(model) -> list[str]:
    fn = next(iter(model.module.ops))
    return [str(t) for t in fn.function_type.inputs.data]


def test_named_dims_in_order_of_appearance():
    assert named_dims(parse(SOURCE, "m.dlpc")) == ["B", "S", "K"]
    assert named_dims(parse(FIXED, "f.dlpc")) == []


def test_binding_forms():
    tree = parse(SOURCE, "m.dlpc")
    assert binding(tree, None) == {} and binding(tree, "symbolic") == {}
    assert binding(tree, 3) == {"B": 3}  # each input's named leading dim
    assert binding(tree, {"S": 5, "K": 2}) == {"S": 5, "K": 2}
    with pytest.raises(DlpcError) as e:
        binding(tree, {"B": 1, "N": 2})
    assert str(e.value) == (
        "m.dlpc: error: cannot bind 'N': the model has no such named dim (its named dims: B, S, K)"
    )
    with pytest.raises(DlpcError) as e:
        binding(parse(FIXED, "f.dlpc"), {"N": 2})
    assert str(e.value) == (
        "f.dlpc: error: cannot bind 'N': the model has no such named dim (its named dims: none)"
    )
    with pytest.raises(DlpcError) as e:
        binding(tree, True)  # (a bool is no size)
    assert str(e.value) == "m.dlpc: error: dims must be a dict, an int or 'symbolic', not True"
    with pytest.raises(DlpcError) as e:
        binding(tree, [1, 2])
    assert str(e.value) == "m.dlpc: error: dims must be a dict, an int or 'symbolic', not [1, 2]"


def test_an_int_binds_only_named_leading_dims():
    tree = parse("model n(x: f32[2, S], y: f32[B]) {\n  return x, y\n}\n", "n.dlpc")
    assert binding(tree, 4) == {"B": 4}


@pytest.mark.parametrize("where", ["dims", "batch"])
def test_a_string_other_than_symbolic_is_refused(where):
    with pytest.raises(DlpcError) as e:
        parse_model(SOURCE, **{where: "static"})
    assert str(e.value) == "error: dims must be a dict, an int or 'symbolic', not 'static'"


def test_bindings_and_unbound():
    """batch binds B, dims the rest (dims wins over batch); unbound sizes what is left;
    'symbolic' keeps every dim named whatever unbound says."""
    m = parse_model(SOURCE, batch=2, dims={"S": 3, "K": 5})
    assert shapes(m) == ["tensor<2x3x4xf32>", "tensor<2x4xf32>"]
    assert m.specialise_first is False  # every dim bound
    m = parse_model(SOURCE, batch=2, dims={"B": 7, "S": 3, "K": 5})
    assert shapes(m) == ["tensor<7x3x4xf32>", "tensor<7x4xf32>"]
    m = parse_model(SOURCE, batch=2, unbound=6)
    assert shapes(m) == ["tensor<2x6x4xf32>", "tensor<2x4xf32>"]
    assert m.weights["w"].shape == (4, 6)
    assert m.specialise_first is False  # (every dim has a size: unbound gives S and K)
    m = parse_model(SOURCE, dims="symbolic", unbound=6, batch={"K": 3})
    assert "?" in shapes(m)[0] and m.specialise_first is False
    m = parse_model(SOURCE, batch="symbolic", unbound=6, dims={"K": 3})
    assert "?" in shapes(m)[0] and m.specialise_first is False
    m = parse_model(SOURCE, dims={"K": 3})
    assert m.specialise_first is True  # B and S left unbound, not asked to be symbolic
    m = parse_model(FIXED)
    assert m.specialise_first is False and m.path is None and m.name == "fixed"


def test_weights_explicit_beside_and_initialisers(tmp_path):
    """An explicit dict or .npz wins; else `<model>.npz` beside the file; else the
    initialisers. The model keeps its path and name."""
    src = tmp_path / "fixed.dlpc"
    src.write_text(FIXED)
    init = load_model(src)
    assert init.path == str(src) and init.name == "fixed"
    beside = np.full((3, 3), 2.0, np.float32)
    np.savez(tmp_path / "fixed.npz", w=beside)
    np.testing.assert_array_equal(load_model(src).weights["w"], beside)
    given = np.full((3, 3), 5.0, np.float32)
    np.testing.assert_array_equal(load_model(src, weights={"w": given}).weights["w"], given)
    other = tmp_path / "other.npz"
    np.savez(other, w=given * 2)
    np.testing.assert_array_equal(load_model(src, weights=other).weights["w"], given * 2)
    np.testing.assert_array_equal(load_model(src, weights=str(other)).weights["w"], given * 2)
    assert not np.array_equal(init.weights["w"], beside)


def test_a_wrong_weight_names_its_source(tmp_path):
    src = tmp_path / "fixed.dlpc"
    src.write_text(FIXED)
    bad = tmp_path / "bad.npz"
    np.savez(bad, w=np.zeros((2, 2), np.float32))
    with pytest.raises(DlpcError, match=str(bad).replace(".", r"\.")):
        load_model(src, weights=bad)
    with pytest.raises(DlpcError, match="the weights"):
        load_model(src, weights={"w": np.zeros((2, 2), np.float32)})


def test_load_model_binds_dims(tmp_path):
    src = tmp_path / "m.dlpc"
    src.write_text(SOURCE)
    m = load_model(src, dims={"S": 3, "K": 2}, batch=1)
    assert shapes(m) == ["tensor<1x3x4xf32>", "tensor<1x4xf32>"]
    m = load_model(src, unbound=5)
    assert shapes(m) == ["tensor<5x5x4xf32>", "tensor<5x4xf32>"]


def test_unreadable_files_are_one_line_errors(tmp_path):
    missing = tmp_path / "none.dlpc"
    with pytest.raises(DlpcError) as e:
        load_model(missing)
    assert str(e.value) == f"error: no such file: {missing}"
    binary = tmp_path / "bin.dlpc"
    binary.write_bytes(b"\xff\xfe\x00model")
    with pytest.raises(DlpcError) as e:
        load_model(binary)
    assert str(e.value).startswith(f"error: cannot read {binary}: ")
    assert "\n" not in str(e.value)
    with pytest.raises(DlpcError) as e:
        load_model(tmp_path)  # a directory
    assert str(e.value).startswith(f"error: cannot read {tmp_path}: ")


# ------------------------------ the killable survivors of frontends-text --seed 49 (81c32b2)


def test_a_keyword_error_points_at_that_keyword():
    """The builder names `padding`; an earlier keyword (`stride`, which sorts after it)
    is not the one pointed at."""
    src = (
        "model m(x: f32[1, 2, 6, 6]) {\n  param w: f32[3, 2, 3, 3] = normal(seed=1)\n"
        '  return conv2d(x, w, stride=1, padding="a")\n}\n'
    )
    with pytest.raises(DlpcError) as e:
        parse_model(src, "m.dlpc")
    assert str(e.value) == (
        "m.dlpc:3:33: error: conv2d argument 'padding' expects an int or a list of ints, "
        'got "a"\n  return conv2d(x, w, stride=1, padding="a")\n' + " " * 32 + "^"
    )


@pytest.mark.parametrize("operand,shown", [('"a"', '"a"'), ("[1, 2]", "[1, 2]"), ("true", "true")])
def test_only_numbers_are_negated(operand, shown):
    src = (
        f"model m(x: f32[2]) {{\n  param w: f32[2] = normal(seed=-{operand})\n  return x + w\n}}\n"
    )
    with pytest.raises(DlpcError) as e:
        parse_model(src, "m.dlpc")
    assert str(e.value).split("\n")[0] == f"m.dlpc:2:33: error: cannot negate {shown}"


def test_an_unreadable_weights_file_is_a_one_line_error(tmp_path):
    src = "model m(x: f32[2]) {\n  param w: f32[2] = normal(seed=1)\n  return x + w\n}\n"
    missing = tmp_path / "none.npz"
    with pytest.raises(DlpcError) as e:
        parse_model(src, "m.dlpc", weights=missing)
    assert str(e.value) == f"m.dlpc: error: no such weights file: {missing}"
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"garbage")
    with pytest.raises(DlpcError) as e:
        parse_model(src, "m.dlpc", weights=str(bad))
    assert str(e.value).startswith(f"m.dlpc: error: cannot read weights file {bad}: ")


# --------------------------------- irgen's refusals and forms the area's tests left unreached


@pytest.mark.parametrize(
    "src,message",
    [
        (
            "model m(x: f33[2]) {\n  return x\n}\n",
            "m.dlpc:1:12: error: unknown element type 'f33'; did you mean 'f32'?",
        ),
        (
            "model m(x: f32[100000000000, 100000]) {\n  return x\n}\n",
            "m.dlpc:1:12: error: tensor<100000000000x100000xf32> has 40000000000000000 bytes, over "
            "dlpc's limit of 2^40 bytes (1 TiB) for one tensor",
        ),
        (
            "model m(x: f32[2], x: f32[2]) {\n  return x\n}\n",
            "m.dlpc:1:20: error: duplicate name 'x' (already defined as an input at line 1)",
        ),
        (
            "model m(x: f32[2]) {\n  param x: f32[2] = normal(seed=1)\n  return x\n}\n",
            "m.dlpc:2:9: error: duplicate name 'x' (already defined as an input at line 1)",
        ),
        (
            'model m(x: f32[2]) {\n  return relu("a")\n}\n',
            "m.dlpc:2:15: error: expected a tensor, got a string",
        ),
        (
            "model m(x: f32[2]) {\n  return relu([1, 2])\n}\n",
            "m.dlpc:2:15: error: expected a tensor, got a list",
        ),
        (
            'model m(x: f32[2]) {\n  param w: f32[2] = normal(seed=1 + "a")\n  return x + w\n}\n',
            "m.dlpc:2:35: error: '+' on constants needs two numbers",
        ),
        (
            "model m(x: f32[2]) {\n  param w: f32[2] = normal(seed=relu(x))\n  return x + w\n}\n",
            "m.dlpc:2:33: error: normal expects a constant here, not an operator call",
        ),
        (
            "model m(x: f32[2]) {\n  param w: f32[2] = normal(seed=x)\n  return x + w\n}\n",
            "m.dlpc:2:33: error: normal expects a constant here, but 'x' is a tensor",
        ),
        (
            "model m(x: f32[1, 2, 6, 6]) {\n  param w: f32[3, 2, 3, 3] = normal(seed=1)\n"
            "  return conv2d(x, w, stride=1, stride=2)\n}\n",
            "m.dlpc:3:33: error: conv2d got argument 'stride' twice",
        ),
    ],
)
def test_irgen_refusals(src, message):
    with pytest.raises(DlpcError) as e:
        parse_model(src, "m.dlpc")
    lines = str(e.value).split("\n")
    assert lines[0] == message and len(lines) == 3 and lines[2].endswith("^")


def test_negated_tensors_constant_results_dtype_names_and_named_operands():
    """-x is graph.neg; a number returned is a constant output; a dtype name is a
    constant (cast's `to`); an operand passed by name (bias=b) is an operand."""
    from dlpc import api

    m = parse_model(
        "model m(x: f32[2]) {\n  param b: f32[3] = normal(seed=2)\n  param v: f32[3, 2] = normal(seed=3)\n"
        "  return -x, 2.5, cast(x, to=f16), linear(x, v, bias=b)\n}\n"
    )
    x = np.array([1.5, -2.0], np.float32)
    neg, c, h, lin = api.reference(m, [x])
    np.testing.assert_array_equal(neg, -x)
    assert c.shape == () and c == np.float32(2.5)
    assert h.dtype == np.float16
    want = m.weights["v"] @ x + m.weights["b"]
    np.testing.assert_allclose(lin, want, rtol=1e-6)


# ------------------------------ the killable survivors of frontends-text --seed 50 (4328a6a)


def test_an_operand_error_past_the_positional_arguments_points_at_the_call():
    """add(lhs=x, rhs=1.5) on i32: the builder blames operand 2, which no positional
    argument holds: the caret is at the call."""
    src = "model m(x: i32[2]) {\n  return add(lhs=x, rhs=1.5)\n}\n"
    with pytest.raises(DlpcError) as e:
        parse_model(src, "m.dlpc")
    assert str(e.value) == (
        "m.dlpc:2:10: error: add operand 2: 1.5 is not an integer but the tensor operands are "
        "i32\n  return add(lhs=x, rhs=1.5)\n         ^"
    )


def test_negative_constants_in_attributes():
    """-1 in a shape and -0.5 as a bound are negated numbers (not their complements)."""
    m = parse_model(
        "model m(x: f32[2, 3]) {\n  return reshape(x, shape=[2, -1]), clip(x, min=-0.5, max=0.5)\n}\n"
    )
    text = str(m.module)
    assert "shape = array<i64: 2, -1>" in text and "min = -5.000000e-01 : f64" in text


def test_a_param_may_not_shadow_a_let():
    """Only a let may rebind a let's name (frontends-text --seed 51's survivor, cd92429:
    `binding.kind == "let"` -> `>=`, under which "param" passed)."""
    src = "model m(x: f32[2]) {\n  let h = relu(x)\n  param h: f32[2] = normal(seed=1)\n  return h\n}\n"
    with pytest.raises(DlpcError) as e:
        parse_model(src, "m.dlpc")
    assert str(e.value).split("\n")[0] == (
        "m.dlpc:3:9: error: duplicate name 'h' (already defined as a let binding at line 2)"
    )
