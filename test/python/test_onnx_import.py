"""The ONNX importer on small hand-built models: IR shape, names, folding, diagnostics.

Numerics are checked against onnx's reference evaluator (`onnx.reference`) through the
numpy backend; the full operator suite is test_onnx_conformance.py.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip(
    "onnx", reason="onnx is not installed (pip install -e '.[onnx]' from the dlpc checkout)"
)

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from xdsl.printer import Printer  # noqa: E402

import dlpc  # noqa: E402
from dlpc.diagnostics import DlpcError  # noqa: E402
from dlpc.frontends.onnx import NeedsConstantInput, load_model  # noqa: E402
from dlpc.reference.graph import run_reference  # noqa: E402

F = TensorProto.FLOAT


def make(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(
        nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits]
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def vi(name, shape, ty=F):
    return helper.make_tensor_value_info(name, ty, shape)


def expected(model_proto, feeds):
    """onnxruntime's outputs when it is installed, else onnx's reference evaluator's
    (which gets asymmetric pool pads wrong in onnx 1.23)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return ReferenceEvaluator(model_proto).run(None, feeds)
    sess = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check_numerics(model_proto, *inputs):
    """dlpc's numpy reference agrees with onnxruntime."""
    m = load_model(model_proto)
    got = run_reference(m.module, list(inputs), m.weights)
    names = [i.name for i in model_proto.graph.input]
    want = expected(model_proto, dict(zip(names, inputs)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return m


def mlp_proto():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], name="fc", transB=1),
        helper.make_node("Relu", ["h"], ["y"], name="act"),
    ]
    return make(nodes, [vi("x", [2, 8])], [vi("y", [2, 16])], [("fc.weight", w), ("fc.bias", b)])


def test_initializers_inputs_and_names():
    m = load_model(mlp_proto())
    text = str(m.module)
    assert 'dlpc.name = "x"' in text
    assert 'graph.param "fc.weight" : tensor<16x8xf32>' in text
    assert "graph.linear" in text  # Gemm with transB=1 is nn.Linear
    assert sorted(m.weights) == ["fc.bias", "fc.weight"]
    assert m.weights["fc.weight"].shape == (16, 8)


def test_node_names_are_locations():
    import io

    m = load_model(mlp_proto())
    out = io.StringIO()
    Printer(stream=out, print_debuginfo=True).print_op(m.module)
    assert 'loc("fc")' in out.getvalue() and 'loc("act")' in out.getvalue()


def test_mlp_numerics():
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    check_numerics(mlp_proto(), x)


def test_gemm_general_form():
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0, transA=1)]
    proto = make(nodes, [vi("a", [4, 3]), vi("b", [4, 5]), vi("c", [1, 5])], [vi("y", [3, 5])])
    rng = np.random.default_rng(2)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (4, 5), (1, 5)))
    m = check_numerics(proto, a, b, c)
    assert "transpose_a = true" in str(m.module)


def shape_arith_proto():
    """x.reshape(x.shape[0], -1) as exporters write it: Shape, Gather, Unsqueeze, Concat."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node(
            "Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, dtype=np.int64))
        ),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node(
            "Constant", [], ["ax"], value=numpy_helper.from_array(np.array([0], dtype=np.int64))
        ),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node(
            "Constant", [], ["m1"], value=numpy_helper.from_array(np.array([-1], dtype=np.int64))
        ),
        helper.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    return make(nodes, [vi("x", [2, 3, 4])], [vi("y", [2, 12])])


def test_shape_arithmetic_is_folded():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    m = check_numerics(shape_arith_proto(), x)
    names = [op.name for op in m.module.walk()]
    assert "graph.reshape" in names
    assert "graph.gather" not in names and "graph.concat" not in names


def test_conv_pool_softmax_numerics():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], pads=[1, 1, 0, 0]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Softmax", ["f"], ["y"]),
    ]
    proto = make(nodes, [vi("x", [1, 4, 7, 7])], [vi("y", [1, 64])], [("w", w)])
    proto.graph.node[0].attribute.append(helper.make_attribute("group", 2))
    check_numerics(proto, rng.standard_normal((1, 4, 7, 7)).astype(np.float32))


def test_dlpc_load_and_compile_c(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp_proto(), str(path))
    model = dlpc.load(path)
    assert model.name == "mlp" and "fc.weight" in model.weights
    x = np.random.default_rng(4).standard_normal((2, 8)).astype(np.float32)
    (y,) = dlpc.compile(model, target="c")(x)
    (want,) = expected(mlp_proto(), {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------- diagnostics


def import_error(proto, **kwargs) -> str:
    with pytest.raises(DlpcError) as info:
        load_model(proto, **kwargs)
    return str(info.value)


def test_unsupported_operator_names_node_and_op():
    proto = make(
        [helper.make_node("StringNormalizer", ["x"], ["y"], name="hm")],
        [vi("x", [2, 3])],
        [vi("y", [2, 3])],
    )
    assert (
        import_error(proto)
        == "<onnx>: node 'hm' (StringNormalizer): error: unsupported operator 'StringNormalizer'"
    )


def test_unsupported_attribute_is_named():
    proto = make(
        [helper.make_node("Relu", ["x"], ["y"], name="r", bogus=1)], [vi("x", [2])], [vi("y", [2])]
    )
    assert "node 'r' (Relu): error: unsupported attribute 'bogus'" in import_error(proto)


def test_unsupported_attribute_value_is_named():
    proto = make(
        [helper.make_node("Gelu", ["x"], ["y"], approximate="cubic")],
        [vi("x", [4])],
        [vi("y", [4])],
        opset=20,
    )
    msg = import_error(proto)
    assert "(Gelu -> 'y')" in msg and "attribute 'approximate' = 'cubic' is not supported" in msg


def test_unsupported_extra_output():
    """Inference batch norm has one output; asking for the running mean is an error."""
    c = [vi(n, [3]) for n in ("s", "b", "m", "v")]
    proto = make(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm"])],
        [vi("x", [2, 3, 4]), *c],
        [vi("y", [2, 3, 4]), vi("rm", [3])],
    )
    assert "output 1 ('rm') is not supported" in import_error(proto)


def test_symbolic_dim_and_input_shapes():
    proto = make(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch", 3])], [vi("y", ["batch", 3])]
    )
    # (issue 29) a symbolic dim stays symbolic: tensor<?x3xf32, ["batch"]>
    sym = load_model(proto)
    assert sym.specialiser is None
    assert 'tensor<?x3xf32, ["batch"]>' in str(sym.module)
    m = load_model(proto, input_shapes={"x": (5, 3)})
    assert "tensor<5x3xf32>" in str(m.module)


def test_shape_input_is_specialised_or_frozen():
    """The importer says which graph input must be known; load_model then gives a model
    specialised per value of it (test_onnx_api runs it); freeze_inputs binds it for good."""
    from dlpc.frontends.onnx import import_onnx

    proto = make(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [vi("x", [2, 6]), vi("s", [2], TensorProto.INT64)],
        [vi("y", [3, 4])],
    )
    with pytest.raises(NeedsConstantInput) as info:
        import_onnx(proto)
    assert info.value.input_name == "s"
    assert "input 'shape' must be known at import time but comes from graph input 's'" in str(
        info.value
    )
    generic = load_model(proto)
    assert generic.ir is None and generic.specialiser is not None
    assert generic.input_names == ["x", "s"] and generic.specialiser.shape_inputs == ["s"]
    one = generic.specialiser.build({"x": np.zeros((2, 6), np.float32), "s": np.array([3, 4])})
    assert "tensor<3x4xf32>" in str(one.module) and 'dlpc.name = "s"' not in str(one.module)
    m = load_model(proto, freeze_inputs={"s": np.array([3, 4])})
    assert "tensor<3x4xf32>" in str(m.module) and 'dlpc.name = "s"' not in str(m.module)
    assert m.specialiser is None


def test_opset_rules():
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    too_new = make(relu, [vi("x", [2])], [vi("y", [2])], opset=onnx.defs.onnx_opset_version() + 1)
    assert "is newer than the installed onnx knows" in import_error(too_new)
    # below 13: accepted only for operators unchanged since (Softmax changed at 13)
    old = make(
        [helper.make_node("Softmax", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], opset=11
    )
    assert "'Softmax' changed at opset 13" in import_error(old)
    ok = make(
        [helper.make_node("Not", ["x"], ["y"])],
        [vi("x", [2], TensorProto.BOOL)],
        [vi("y", [2], TensorProto.BOOL)],
        opset=11,
    )
    check_numerics(ok, np.array([True, False]))


def test_other_domain_is_an_error():
    node = helper.make_node("FusedGemm", ["x"], ["y"], domain="com.microsoft", name="fg")
    proto = make([node], [vi("x", [2])], [vi("y", [2])])
    proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    assert "operator 'com.microsoft.FusedGemm' is not supported" in import_error(proto)


@pytest.mark.parametrize(
    "node, message",
    [
        (helper.make_node("Add", ["x", ""], ["y"], name="n"), "input 1 is required"),
        (helper.make_node("Reciprocal", ["", "x"], ["y"], name="n"), "input 0 is required"),
        (helper.make_node("Reshape", ["x"], ["y"], name="n"), "input 1 ('shape') is required"),
        (helper.make_node("Unsqueeze", ["x"], ["y"], name="n"), "input 1 ('axes') is required"),
    ],
)
def test_an_omitted_required_input_is_named(node, message):
    """An omitted ('' or missing) input an operator requires is one diagnostic naming the
    node and the input (was an AttributeError or AssertionError from deep in the importer)."""
    proto = make([node], [vi("x", [2])], [vi("y", [2])])
    assert f"node 'n' ({node.op_type}): error: {message}" in import_error(proto)


def test_folded_node_with_an_omitted_output():
    """A folded node's values follow its output positions: LayerNormalization's omitted Mean
    does not shift InvStdDev into its place (InvStdDev was bound to nothing)."""
    nodes = [
        helper.make_node("LayerNormalization", ["c", "s"], ["ln", "", "inv"], epsilon=0.5),
        helper.make_node("Add", ["x", "inv"], ["y"]),
    ]
    inits = [("c", np.array([1.0, 3.0], np.float32)), ("s", np.ones(2, np.float32))]
    proto = make(nodes, [vi("x", [2])], [vi("y", [2])], inits)
    check_numerics(proto, np.array([10.0, 20.0], np.float32))


def test_bad_file(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x00not a model")
    with pytest.raises(DlpcError) as info:
        dlpc.load(path)
    assert "junk.onnx" in str(info.value) and "error:" in str(info.value)


def test_resize_nearest_upsampling():
    """nn.Upsample(scale_factor=2) as exported: asymmetric coordinates, floor."""
    scales = np.array([1, 1, 2, 3], dtype=np.float32)
    node = helper.make_node(
        "Resize",
        ["x", "", "scales"],
        ["y"],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    proto = make([node], [vi("x", [1, 2, 3, 4])], [vi("y", [1, 2, 6, 12])], [("scales", scales)])
    x = np.random.default_rng(5).standard_normal((1, 2, 3, 4)).astype(np.float32)
    m = check_numerics(proto, x)
    assert "graph.broadcast" in str(m.module)
    bilinear = make(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")],
        [vi("x", [1, 2, 3, 4])],
        [vi("y", [1, 2, 6, 12])],
        [("scales", scales)],
    )
    m = check_numerics(bilinear, x)  # per-axis interpolation matrices: matmuls
    assert "graph.matmul" in str(m.module)
    bogus = make(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="area")],
        [vi("x", [1, 2, 3, 4])],
        [vi("y", [1, 2, 6, 12])],
        [("scales", scales)],
    )
    assert "attribute 'mode' = 'area' is not supported" in import_error(bogus)


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
def test_pad_modes(mode):
    """Pads up to the dim size minus one (reflect), and past it (edge, wrap)."""
    k = 2 if mode == "reflect" else 5
    pads = np.array([0, k, 1, 0, 1, k], dtype=np.int64)
    proto = make(
        [helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)],
        [vi("x", [2, 3, 3])],
        [vi("y", [2, 3 + k + 1, 3 + 1 + k])],
        [("pads", pads)],
    )
    x = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    check_numerics(proto, x)


@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose(group):
    """Stride 2, asymmetric pads, output_padding and groups, against onnxruntime."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((4, 6 // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    node = helper.make_node(
        "ConvTranspose",
        ["x", "w", "b"],
        ["y"],
        strides=[2, 2],
        pads=[1, 0, 0, 1],
        output_padding=[1, 0],
        group=group,
    )
    proto = make([node], [vi("x", [1, 4, 5, 5])], [vi("y", [1, 6, 11, 10])], [("w", w), ("b", b)])
    m = check_numerics(proto, rng.standard_normal((1, 4, 5, 5)).astype(np.float32))
    assert "graph.conv2d" in str(m.module)


@pytest.mark.parametrize(
    "fmod,ty", [(0, TensorProto.INT64), (1, TensorProto.INT32), (1, F)]
)  # (float fmod=0: onnxruntime refuses it)
def test_mod_signs(fmod, ty):
    """Mixed signs: fmod=0 takes the divisor's sign (Python's %), fmod=1 the dividend's."""
    dt = {TensorProto.INT64: np.int64, TensorProto.INT32: np.int32, F: np.float32}[ty]
    a = np.array([7, -7, 7, -7, 5, 0], dtype=dt)
    b = np.array([3, 3, -3, -3, 5, 2], dtype=dt)
    if ty == F:
        a, b = a * 1.5, b * 0.5
    proto = make(
        [helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)],
        [vi("a", [6], ty), vi("b", [6], ty)],
        [vi("y", [6], ty)],
    )
    check_numerics(proto, a, b)


# Malformed nodes the fuzzer (bench/fuzz.py --kinds onnx --seed 500) turned into
# IndexError/TypeError tracebacks: each is one diagnostic naming the node.
def _i64(name, values):
    return name, np.array(values, dtype=np.int64)


MALFORMED = {
    "cast-to-float": (
        make(
            [helper.make_node("Cast", ["x"], ["y"], to=1.5)],
            [vi("x", [2])],
            [vi("y", [2])],
        ),
        None,
    ),
    "gemm-rank-1-weight": (
        make(
            [helper.make_node("Gemm", ["x", "w"], ["y"])],
            [vi("x", [2, 3])],
            [vi("y", [2, 4])],
            [("w", np.ones(3, np.float32))],
        ),
        "A and B must be matrices",
    ),
    "pad-short-pads": (
        make(
            [helper.make_node("Pad", ["x", "p"], ["y"])],
            [vi("x", [2, 3])],
            [vi("y", [4, 3])],
            [_i64("p", [1, 1, 0])],
        ),
        "'pads' has 3 values; 2 axes need 4",
    ),
    "resize-short-roi": (
        make(
            [helper.make_node("Resize", ["x", "r", "s"], ["y"], mode="nearest")],
            [vi("x", [1, 1, 2, 2])],
            [vi("y", [1, 1, 4, 4])],
            [
                ("r", np.zeros(4, np.float32)),
                ("s", np.array([1, 1, 2, 2], np.float32)),
            ],
        ),
        "'roi' has 4 values; 4 axes need 8",
    ),
    "reshape-zero-past-rank": (
        make(
            [helper.make_node("Reshape", ["x", "s"], ["y"])],
            [vi("x", [2, 3])],
            [vi("y", [6, 1, 1])],
            [_i64("s", [6, 1, 0])],
        ),
        "cannot reshape [2, 3] into [6, 1, 0]",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_node_is_one_diagnostic(case):
    model, message = MALFORMED[case]
    with pytest.raises(DlpcError) as info:
        load_model(model)
    text = str(info.value)
    assert "\n" not in text
    assert "error:" in text
    if message is not None:
        assert message in text
