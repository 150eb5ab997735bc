"""The text frontend, the builder API and the examples (see docs/language.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.frontends import builder as bld
from dlpc.frontends.builder import FrontendError, GraphBuilder, kaiming, normal, zeros
from dlpc.frontends.text import load_model, parse_model
from dlpc.reference.graph import run_reference

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# example -> (input shapes, output shapes)
EXPECTED = {
    "mlp": ([(1, 784)], [(1, 10)]),
    "lenet": ([(1, 1, 28, 28)], [(1, 10)]),
    "resnet": ([(1, 3, 32, 32)], [(1, 10)]),
    "transformer": ([(1, 16, 64)], [(1, 16, 64)]),
    "mobilenet": ([(1, 32, 32, 32)], [(1, 64, 32, 32)]),
}


def main_of(module) -> func.FuncOp:
    (main,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    return main


def random_inputs(module, seed=0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(a.type.get_shape()).astype(np.float32)
        for a in main_of(module).body.block.args
    ]


# ------------------------------------------------------------------------ examples


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_parses_verifies_and_has_expected_shapes(name):
    model = load_model(EXAMPLES / f"{name}.dlpc", weights={}, batch=1)
    model.module.verify()
    main = main_of(model.module)
    ins, outs = EXPECTED[name]
    assert [tuple(t.get_shape()) for t in main.function_type.inputs] == ins
    assert [tuple(t.get_shape()) for t in main.function_type.outputs] == outs
    assert model.name == name
    params = {
        op.pname: tuple(op.output.type.get_shape())
        for op in main.walk()
        if isinstance(op, graph.ParamOp)
    }
    assert {k: v.shape for k, v in model.weights.items()} == params
    assert all(v.dtype == np.float32 for v in model.weights.values())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_on_numpy_reference(name):
    model = load_model(EXAMPLES / f"{name}.dlpc", weights={}, batch=1)
    outputs = run_reference(model.module, random_inputs(model.module), model.weights)
    assert [o.shape for o in outputs] == EXPECTED[name][1]
    for o in outputs:
        assert np.all(np.isfinite(o))
        # the initialisers keep activations O(1), so 1e-4 relative agreement means something
        assert 0.1 < float(np.std(o)) < 10.0


def test_gen_weights_round_trip(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_weights", EXAMPLES / "gen_weights.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    out = gen.write_weights(EXAMPLES / "lenet.dlpc", tmp_path)
    seeded = load_model(EXAMPLES / "lenet.dlpc", weights={}).weights
    from_file = load_model(EXAMPLES / "lenet.dlpc", weights=out).weights
    assert seeded.keys() == from_file.keys()
    for k in seeded:
        np.testing.assert_array_equal(seeded[k], from_file[k])


# ------------------------------------------------------------------------- weights

SMALL = """model small(x: f32[1, 4]) {
  param w: f32[4, 2] = normal(seed=3, std=0.5)
  param b: f32[2]
  return x @ w + b
}
"""


def test_weights_precedence(tmp_path):
    src = tmp_path / "small.dlpc"
    src.write_text(SMALL)
    with pytest.raises(DlpcError, match=r"small.dlpc:3:9: error: parameter 'b' has no "):
        load_model(src)
    # the .npz beside the model is used when no weights are given ...
    np.savez(tmp_path / "small.npz", b=np.full(2, 7.0))
    m = load_model(src)
    np.testing.assert_array_equal(m.weights["b"], [7.0, 7.0])
    assert m.weights["b"].dtype == np.float32
    seeded = np.random.default_rng(3).normal(0.0, 0.5, (4, 2)).astype(np.float32)
    np.testing.assert_array_equal(m.weights["w"], seeded)  # ... the initialiser fills the rest
    # explicit weights win over the .npz beside the file
    m = load_model(src, weights={"b": np.ones(2), "w": np.zeros((4, 2))})
    np.testing.assert_array_equal(m.weights["w"], np.zeros((4, 2)))
    np.testing.assert_array_equal(m.weights["b"], [1.0, 1.0])
    assert m.path == str(src)


def test_initializers_are_seeded_and_scaled():
    a = kaiming(seed=5).materialize((64, 32, 3, 3), "f32", "w")
    b = kaiming(seed=5).materialize((64, 32, 3, 3), "f32", "w")
    np.testing.assert_array_equal(a, b)
    assert abs(a.std() - np.sqrt(2.0 / (32 * 9))) < 0.01
    # without a seed, the seed is derived from the parameter name (still deterministic)
    c = normal().materialize((8,), "f32", "p")
    np.testing.assert_array_equal(c, normal().materialize((8,), "f32", "p"))
    assert not np.array_equal(c, normal().materialize((8,), "f32", "q"))
    assert bld.make_initializer("full", 0.5).materialize((2,), "f64", "f").tolist() == [0.5, 0.5]


# ------------------------------------------------------------------------- builder


def build_mlp() -> GraphBuilder:
    """examples/mlp.dlpc, written with the builder."""
    b = GraphBuilder("mlp")
    x = b.input("x", (1, 784))
    w1 = b.param("fc1.weight", (256, 784), init=kaiming(seed=1))
    b1 = b.param("fc1.bias", (256,), init=normal(seed=2, std=0.01))
    w2 = b.param("fc2.weight", (256, 256), init=kaiming(seed=3))
    b2 = b.param("fc2.bias", (256,), init=normal(seed=4, std=0.01))
    w3 = b.param("fc3.weight", (10, 256), init=kaiming(seed=5, gain=1.0))
    b3 = b.param("fc3.bias", (10,), init=zeros())
    h = b.relu(b.linear(x, w1, b1))
    h = b.relu(b.linear(h, w2, bias=b2))
    b.output(b.linear(h, w3, b3))
    return b


def test_builder_builds_the_text_mlp():
    text = load_model(EXAMPLES / "mlp.dlpc", weights={}, batch=1)
    built = build_mlp().model()
    strip = [str(op.name) for op in main_of(text.module).walk()]
    assert strip == [str(op.name) for op in main_of(built.module).walk()]
    assert main_of(text.module).function_type == main_of(built.module).function_type
    assert text.weights.keys() == built.weights.keys()
    for k in text.weights:
        np.testing.assert_array_equal(text.weights[k], built.weights[k])
    x = random_inputs(text.module)
    (y1,) = run_reference(text.module, x, text.weights)
    (y2,) = run_reference(built.module, x, built.weights)
    np.testing.assert_array_equal(y1, y2)


def test_builder_covers_every_graph_op():
    ops = {op.name.removeprefix("graph.") for op in graph.GRAPH_OPS}
    structural = {"constant", "param", "fused", "yield"}  # not operators a model calls
    structural |= {"if", "loop"}  # region ops: built from subgraphs (ONNX If / Loop / Scan)
    assert ops - structural <= set(bld.OPS)


def test_builder_friendly_keywords_and_numbers():
    b = GraphBuilder()
    x = b.input("x", (1, 3, 8, 8))
    w = b.param("w", (4, 3, 3, 3), init=zeros())
    y = b.conv2d(x, w, stride=2, padding=[1, 0])
    assert y.owner.strides == (2, 2) and y.owner.pads == (1, 0, 1, 0)
    z = b.binary("*", y, 0.5)
    assert isinstance(z.owner.operands[1].owner, graph.ConstantOp)
    with pytest.raises(FrontendError, match="did you mean 'stride'") as e:
        b.conv2d(x, w, strid=2)
    assert e.value.arg == "strid"
    with pytest.raises(FrontendError, match="graph.conv2d input has 4 channels but weight 4x3x3x3"):
        b.conv2d(y, w)


def test_builder_rejects_a_complex_number_operand():
    """A complex scalar is no operand (it was made a constant of its real part)."""
    b = GraphBuilder()
    x = b.input("x", (2,))
    with pytest.raises(FrontendError, match="add operand 2 must be a tensor"):
        b.add(x, np.complex128(1 + 2j))


# -------------------------------------------------------------------------- errors

ERRORS = [
    ("model m(x: f32[2]) {\n  let y = relu(x\n  return y\n}", 3, 3, "unexpected 'return'"),
    ("model m(x: f32[2]) {\n  return x $ 1\n}", 2, 12, "unexpected character '$'"),
    ("model m(x: f32[2]) {\n  return x", 2, 11, "unexpected end of file"),
    (
        "model m(x: f32[2]) {\n  return rleu(x)\n}",
        2,
        10,
        "unknown operator 'rleu'; did you mean 'relu'?",
    ),
    (
        "model m(x: f32[2]) {\n  return softmax(x, axs=0)\n}",
        2,
        21,
        "softmax has no argument 'axs'; did you mean 'axis'?",
    ),
    (
        "model m(x: f32[2]) {\n  return softmax(x, axis=0.5)\n}",
        2,
        21,
        "softmax argument 'axis' expects an int, got 0.5",
    ),
    (
        "model m(x: f32[2]) {\n  return gelu(x, approximate=1)\n}",
        2,
        18,
        "gelu argument 'approximate' expects a string",
    ),
    ("model m(x: f32[2]) {\n  return add(x)\n}", 2, 10, "add(lhs, rhs) is missing operand 'rhs'"),
    (
        "model m(x: f32[2]) {\n  return relu(x, x)\n}",
        2,
        18,
        "relu(input) takes at most 1 operands, got 2",
    ),
    (
        "model m(x: f32[2], y: f32[3]) {\n  return x\n    - y\n}",
        3,
        5,
        "shapes 2, 3 cannot be broadcast together",
    ),
    (
        "model m(x: f32[2]) {\n  return reshape(x, shape=[3])\n}",
        2,
        10,
        "graph.reshape cannot reshape 2",
    ),
    ("model m(x: f32[2]) {\n  return x + z\n}", 2, 14, "undefined name 'z'"),
    (
        "model m(x: f32[2]) {\n  param p: f32[2] = ones()\n  param p: f32[2] = ones()\n  return x\n}",
        3,
        9,
        "duplicate name 'p'",
    ),
    (
        "model m(x: f32[2]) {\n  param p: f32[2] = ones(seed=1)\n  return x\n}",
        2,
        26,
        "ones() has no argument 'seed'",
    ),
    (
        "model m(x: f32[2]) {\n  param p: f32[2] = normal(seed=-1)\n  return x\n}",
        2,
        28,
        "normal() seed must be a non-negative int",
    ),
    ("model m(x: f32[2]) {\n  return x\n  return x\n}", 3, 3, "statement after return"),
    ("model m(x: f32[2]) {\n  return 1 @ 2\n}", 2, 12, "'@' needs tensor operands"),
    (
        "model m(x: f32[2]) {\n  return softmax(x, axis=99999999999999999999)\n}",
        2,
        21,
        "does not fit in 64 bits",
    ),
    ("model m(x: i64[2]) {\n  return x * 1.5\n}", 2, 12, "mul operand 2: 1.5 is not an integer"),
    (
        "model m(x: f32[2]) {\n  return clip(x, max=true)\n}",
        2,
        18,
        "clip argument 'max' expects a number, got true",
    ),
    (
        "model m(x: f32[2]) {\n  param w: f32[99999, 99999] = zeros()\n  return x\n}",
        2,
        9,
        "more than an initialiser may create",
    ),
    (
        "model m(x: f32[2]) {\n  return x\n}\nmodel n(x: f32[2]) {\n  return x\n}",
        4,
        1,
        "unexpected 'model', expected end of file",
    ),
]


@pytest.mark.parametrize("source,line,col,message", ERRORS)
def test_error_positions(source, line, col, message):
    with pytest.raises(DlpcError) as e:
        parse_model(source, "t.dlpc")
    head, text, caret = str(e.value).split("\n")
    assert head.startswith(f"t.dlpc:{line}:{col}: error: "), head
    assert message in head
    assert text == source.splitlines()[line - 1]
    assert caret == " " * (col - 1) + "^"


def test_missing_file():
    with pytest.raises(DlpcError, match="no such file"):
        load_model("/nonexistent/model.dlpc")


def test_weight_shape_error_is_located():
    with pytest.raises(DlpcError) as e:
        parse_model(SMALL, "s.dlpc", weights={"w": np.zeros((2, 4)), "b": np.zeros(2)})
    assert str(e.value).startswith(
        "s.dlpc:2:9: error: weight 'w' in the weights has shape [2, 4] but the parameter is "
        "declared f32[4, 2]"
    )
