"""ScatterElements (every reduction, a middle axis, indices smaller than data off the axis,
negative and duplicate indices), ScatterND (every reduction, element and slice updates,
duplicates), GatherND (batch_dims 0 to 2, negative indices) and TopK (largest / smallest,
ties, a middle axis, int64) imported from ONNX (frontends/onnx_ops/indexing.py) and run
through `dlpc.load` + `dlpc.compile` against onnxruntime, all in one model (one build per
target): numpy, C, DLP C and OpenCL. TopK's gradient (graph-autodiff through the
composition, via dlpc.train) against torch.topk's."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

F, L = TensorProto.FLOAT, TensorProto.INT64


def _t(name, arr):
    return helper.make_tensor(name, L, arr.shape, arr.reshape(-1).tolist())


def _model(keep=None):
    """The model; `keep`: only the nodes giving these outputs (OpenCL's smaller build)."""
    nodes, outs, inits = [], [], []

    def out(name, elem=F):
        outs.append(helper.make_tensor_value_info(name, elem, None))

    # ScatterElements on data d [3, 4, 5], axis 1, indices [2, 3, 5] (smaller off the axis
    # on dim 0), with a duplicate (3 twice in a column) and negative indices
    idx = np.array(
        [
            [[0, 1, 2, 3, -1], [3, 0, -4, 1, 2], [1, 2, 3, 0, 1]],
            [[2, 3, 0, 1, 3], [0, -1, 1, 2, 0], [3, 3, 2, 3, 1]],
        ]
    )
    inits.append(_t("se_idx", idx))
    for red in ("add", "mul", "max", "min"):
        nodes.append(
            helper.make_node(
                "ScatterElements", ["d", "se_idx", "u"], [f"se_{red}"], axis=1, reduction=red
            )
        )
        out(f"se_{red}")
    # reduction none without duplicates: the transpose's columns are a permutation
    perm = np.array([[[1, 0, 3, 2, 0], [0, 2, 1, 3, 1], [2, 1, 0, 1, 3]]])
    inits.append(_t("se_perm", perm))
    nodes.append(helper.make_node("Slice", ["u", "s0", "s1", "s0"], ["u1"]))
    inits += [_t("s0", np.array([0])), _t("s1", np.array([1]))]
    nodes.append(helper.make_node("ScatterElements", ["d", "se_perm", "u1"], ["se_none"], axis=1))
    out("se_none")
    # ScatterND: slices of d [3, 4, 5] at index pairs (one duplicate), and elements
    nd_idx = np.array([[[0, 1]], [[2, -1]], [[0, 1]]])  # [3, 1, 2] -> updates [3, 1, 5]
    inits.append(_t("nd_idx", nd_idx))
    for red in ("add", "mul", "max", "min"):
        nodes.append(
            helper.make_node("ScatterND", ["d", "nd_idx", "v"], [f"nd_{red}"], reduction=red)
        )
        out(f"nd_{red}")
    el_idx = np.array([[0, 0, 0], [2, 3, 4], [1, -2, 2]])
    inits.append(_t("el_idx", el_idx))
    nodes.append(helper.make_node("ScatterND", ["d", "el_idx", "e"], ["nd_none"]))
    out("nd_none")
    # GatherND on d [3, 4, 5]
    for b, gi in (
        (0, np.array([[1, -1], [0, 2], [2, 0]])),  # -> [3, 5]
        (1, np.array([[[1, 4], [3, 0]], [[0, 0], [2, 2]], [[3, 3], [1, -1]]])),  # -> [3, 2]
        (2, np.array([[[1], [0], [3], [2]]] * 3)),  # [3, 4, 1] -> [3, 4]
    ):
        inits.append(_t(f"g_idx{b}", gi))
        nodes.append(helper.make_node("GatherND", ["d", f"g_idx{b}"], [f"g{b}"], batch_dims=b))
        out(f"g{b}")
    # TopK along a middle axis with ties; smallest; int64
    inits.append(_t("k3", np.array([3])))
    for largest in (1, 0):
        nodes.append(
            helper.make_node(
                "TopK", ["t", "k3"], [f"topv{largest}", f"topi{largest}"], axis=1, largest=largest
            )
        )
        out(f"topv{largest}")
        out(f"topi{largest}", L)
    nodes.append(helper.make_node("TopK", ["ti", "k3"], ["tiv", "tii"], axis=-1))
    out("tiv", L)
    out("tii", L)
    if keep is not None:
        nodes = [n for n in nodes if set(n.output) & keep]
        outs = [o for o in outs if o.name in keep]
    graph = helper.make_graph(
        nodes,
        "indexing",
        [
            helper.make_tensor_value_info("d", F, [3, 4, 5]),
            helper.make_tensor_value_info("u", F, [2, 3, 5]),
            helper.make_tensor_value_info("v", F, [3, 1, 5]),
            helper.make_tensor_value_info("e", F, [3]),
            helper.make_tensor_value_info("t", F, [2, 5, 3]),
            helper.make_tensor_value_info("ti", L, [3, 6]),
        ],
        outs,
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _inputs():
    rng = np.random.default_rng(7)
    d = rng.uniform(-2, 2, (3, 4, 5)).astype(np.float32)
    u = rng.uniform(-2, 2, (2, 3, 5)).astype(np.float32)
    v = rng.uniform(-2, 2, (3, 1, 5)).astype(np.float32)
    e = rng.uniform(-2, 2, (3,)).astype(np.float32)
    t = rng.integers(0, 3, (2, 5, 3)).astype(np.float32)  # many ties
    ti = rng.integers(-3, 3, (3, 6)).astype(np.int64)
    return [d, u, v, e, t, ti]


# OpenCL builds one program per kernel (PoCL: ~0.3 s each): one output of each operator
OPENCL = {"se_max", "nd_none", "g1", "topv1", "topi1"}


def _case(tmp_path_factory, keep=None):
    model = _model(keep)
    path = tmp_path_factory.mktemp("indexing") / "indexing.onnx"
    path.write_bytes(model.SerializeToString())
    xs = _inputs()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = dict(zip(("d", "u", "v", "e", "t", "ti"), xs))
    return path, xs, [o.name for o in model.graph.output], sess.run(None, feeds)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return _case(tmp_path_factory)


@pytest.mark.parametrize("target", ["numpy", "c", "dlp", "opencl"])
def test_indexing_ops_match_onnxruntime(case, target, tmp_path_factory):
    if target == "opencl":
        pytest.importorskip("pyopencl")
        case = _case(tmp_path_factory, OPENCL)
    path, xs, names, want = case
    got = dlpc.compile(dlpc.load(str(path)), target=target)(*xs)
    assert len(got) == len(want)
    for name, g, w in zip(names, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=name)


def test_topk_values_gradient_flows_to_the_chosen_elements(tmp_path):
    """TopK's values through dlpc.train (mse against zeros): the gradient of the loss is
    2 * value / n at each chosen element and 0 elsewhere, as torch.topk's."""
    torch = pytest.importorskip("torch")
    from dlpc.passes.train.optim import SGD

    x0 = np.array([[0.5, -1.0, 2.0, 0.25, 1.5]], np.float64)
    node = helper.make_node("TopK", ["xw", "k"], ["vals", "idx"], axis=1)
    mul = helper.make_node("Mul", ["x", "w"], ["xw"])
    graph = helper.make_graph(
        [mul, node],
        "topk",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, 5])],
        [helper.make_tensor_value_info("vals", TensorProto.DOUBLE, [1, 2])],
        initializer=[
            helper.make_tensor("k", L, [1], [2]),
            helper.make_tensor("w", TensorProto.DOUBLE, [5], [1.0, 2.0, 3.0, 4.0, 5.0]),
        ],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    path = tmp_path / "topk.onnx"
    path.write_bytes(m.SerializeToString())
    trainer = dlpc.train.Trainer(
        dlpc.load(str(path)), "mse", SGD(lr=1e-3), batch_size=1, target="numpy", return_grads=True
    )
    loss = trainer.step(x0, np.zeros((1, 2)))
    w = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64, requires_grad=True)
    vals, _ = torch.topk(torch.from_numpy(x0) * w, 2, dim=1)
    t_loss = (vals**2).mean()
    t_loss.backward()
    assert loss == pytest.approx(t_loss.item(), rel=1e-12)
    np.testing.assert_allclose(trainer.grads["w"], w.grad.numpy(), rtol=1e-12)


def _nonzero_model(tmp_path, computed: bool):
    nodes = [helper.make_node("NonZero", ["xr" if computed else "x"], ["nz"])]
    if computed:
        nodes.insert(0, helper.make_node("Relu", ["x"], ["xr"]))
    graph = helper.make_graph(
        nodes,
        "nonzero",
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("nz", L, None)],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    path = tmp_path / "nonzero.onnx"
    path.write_bytes(m.SerializeToString())
    return str(path)


@pytest.mark.parametrize("computed", [False, True], ids=["input", "relu_of_input"])
@pytest.mark.parametrize("target", ["numpy", "c"])
def test_nonzero_is_specialised_on_its_inputs_value(tmp_path, target, computed):
    """Each value of the input gets its own program, so the [rank, count] output can
    change size between calls (NonZero of a graph input, or of a value computed from one:
    the model is specialised on that input)."""
    f = dlpc.compile(dlpc.load(_nonzero_model(tmp_path, computed)), target=target)
    for x in (
        np.array([[0, 1.5, 0], [-2, 0, 3]], np.float32),
        np.array([[1, 0, 0], [0, 0, 0]], np.float32),
        np.array([[0, 1.5, 0], [-2, 0, 3]], np.float32),
    ):
        (got,) = f(x)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(
            got, np.array(np.nonzero(np.maximum(x, 0) if computed else x))
        )


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_tensor_scatter_matches_the_onnx_pseudocode(tmp_path, target):
    """TensorScatter (opset 24) linear and circular on [batch, heads, S, D] with per-batch
    write indices, and a 3-D cache without them, against ONNX's pseudocode (a linear write
    past the end, which ONNX leaves undefined, leaves those rows as they are)."""
    rng = np.random.default_rng(9)
    cache = rng.standard_normal((3, 2, 5, 4)).astype(np.float32)
    upd = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
    wi = np.array([0, 2, 4], np.int64)
    c3, u3 = cache[:, 0], upd[:, 0, :2]
    nodes = [
        helper.make_node("TensorScatter", ["c", "u", "w"], ["lin"], mode="linear"),
        helper.make_node("TensorScatter", ["c", "u", "w"], ["circ"], mode="circular"),
        helper.make_node("TensorScatter", ["c3", "u3"], ["flat"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "ts",
        [
            helper.make_tensor_value_info("c", F, list(cache.shape)),
            helper.make_tensor_value_info("u", F, list(upd.shape)),
            helper.make_tensor_value_info("w", L, [3]),
            helper.make_tensor_value_info("c3", F, list(c3.shape)),
            helper.make_tensor_value_info("u3", F, list(u3.shape)),
        ],
        [helper.make_tensor_value_info(n, F, None) for n in ("lin", "circ", "flat")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)], ir_version=10)
    path = tmp_path / "ts.onnx"
    path.write_bytes(m.SerializeToString())

    def expect(cache, upd, axis, wi, circular):
        out = cache.copy()
        for prefix in np.ndindex(cache.shape[:axis]):
            for s in range(upd.shape[axis]):
                j = (0 if wi is None else wi[prefix[0]]) + s
                if circular:
                    j %= cache.shape[axis]
                if j < cache.shape[axis]:
                    out[(*prefix, j)] = upd[(*prefix, s)]
        return out

    lin, circ, flat = dlpc.compile(dlpc.load(str(path)), target=target)(cache, upd, wi, c3, u3)
    np.testing.assert_array_equal(lin, expect(cache, upd, 2, wi, False))
    np.testing.assert_array_equal(circ, expect(cache, upd, 2, wi, True))
    np.testing.assert_array_equal(flat, expect(c3, u3, 1, None, False))


def _more_model():
    """OneHot (run-time values, negative and out-of-range indices, a middle axis),
    ReverseSequence (both axis orders, 3-D), Compress (an axis, and flattened) and Unique
    (sorted=0 along an axis), the last two specialised on their input's value."""
    nodes = [
        helper.make_node("OneHot", ["oi", "depth", "ov"], ["oh"], axis=1),
        helper.make_node("ReverseSequence", ["rx", "rl"], ["rs_tb"], batch_axis=1, time_axis=0),
        helper.make_node("Transpose", ["rx"], ["rxt"], perm=[1, 0, 2]),
        helper.make_node("ReverseSequence", ["rxt", "rl"], ["rs_bt"], batch_axis=0, time_axis=1),
        helper.make_node("Compress", ["cx", "cc"], ["c1"], axis=1),
        helper.make_node("Compress", ["cx", "cc"], ["cflat"]),
        helper.make_node("Unique", ["ux"], ["uy", "ui", "uinv", "ucnt"], axis=0, sorted=0),
    ]
    ins = [
        helper.make_tensor_value_info("oi", L, [2, 3]),
        helper.make_tensor_value_info("ov", F, [2]),
        helper.make_tensor_value_info("rx", F, [4, 3, 2]),
        helper.make_tensor_value_info("rl", L, [3]),
        helper.make_tensor_value_info("cx", F, [2, 4]),
        helper.make_tensor_value_info("cc", TensorProto.BOOL, [4]),
        helper.make_tensor_value_info("ux", F, [4, 2]),
    ]
    outs = [
        helper.make_tensor_value_info(n, L if n in ("ui", "uinv", "ucnt") else F, None)
        for n in ("oh", "rs_tb", "rs_bt", "c1", "cflat", "uy", "ui", "uinv", "ucnt")
    ]
    depth = helper.make_tensor("depth", F, [], [4.0])
    graph = helper.make_graph(nodes, "more", ins, outs, initializer=[depth])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


@pytest.mark.parametrize("target", ["numpy", "c", "dlp"])
def test_onehot_reversesequence_compress_unique_match_onnxruntime(tmp_path, target):
    m = _more_model()
    path = tmp_path / "more.onnx"
    path.write_bytes(m.SerializeToString())
    rng = np.random.default_rng(11)
    xs = [
        np.array([[0, -1, 5], [3, -4, 2]], np.int64),
        np.array([-0.5, 2.0], np.float32),
        rng.standard_normal((4, 3, 2)).astype(np.float32),
        np.array([4, 1, 3], np.int64),
        rng.standard_normal((2, 4)).astype(np.float32),
        np.array([True, False, True, True]),
        np.array([[2, 1], [0, 3], [2, 1], [0, 3]], np.float32),
    ]
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {i.name: x for i, x in zip(m.graph.input, xs)})
    got = dlpc.compile(dlpc.load(str(path)), target=target)(*xs)
    for o, g, w in zip(m.graph.output, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, o.name
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=o.name)


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression_matches_onnxruntime(tmp_path, center):
    """Random overlapping boxes in 2 batches x 3 classes with a score threshold: the kept
    [n, 3] indices equal onnxruntime's, on a first call and on a second with other boxes
    and scores (the model is specialised on their values)."""
    node = helper.make_node(
        "NonMaxSuppression",
        ["boxes", "scores", "mx", "iou", "floor"],
        ["sel"],
        center_point_box=center,
    )
    graph = helper.make_graph(
        [node],
        "nms",
        [
            helper.make_tensor_value_info("boxes", F, [2, 8, 4]),
            helper.make_tensor_value_info("scores", F, [2, 3, 8]),
        ],
        [helper.make_tensor_value_info("sel", L, None)],
        initializer=[
            helper.make_tensor("mx", L, [1], [3]),
            helper.make_tensor("iou", F, [1], [0.3]),
            helper.make_tensor("floor", F, [1], [0.2]),
        ],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    path = tmp_path / "nms.onnx"
    path.write_bytes(m.SerializeToString())
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    f = dlpc.compile(dlpc.load(str(path)), target="numpy")
    rng = np.random.default_rng(12 + center)
    for _ in range(2):
        corner = rng.uniform(0, 4, (2, 8, 2)).astype(np.float32)
        size = rng.uniform(0.5, 3, (2, 8, 2)).astype(np.float32)
        boxes = np.concatenate([corner, corner + size] if not center else [corner, size], -1)
        scores = rng.uniform(0, 1, (2, 3, 8)).astype(np.float32)
        (got,) = f(boxes, scores)
        want = sess.run(None, {"boxes": boxes, "scores": scores})[0]
        np.testing.assert_array_equal(got, want)
