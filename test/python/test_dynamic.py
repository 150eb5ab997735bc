"""Symbolic dims (issue 29): dynamic-axes ONNX exports from PyTorch load with no shapes,
keep their dims symbolic, compile per binding (or per bucket) and match onnxruntime at
every size tried; bad shapes are one line naming the input and the dim."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (dlpc[test])")
onnx = pytest.importorskip("onnx", reason="onnx is not installed (dlpc[onnx])")

from onnx import TensorProto, helper  # noqa: E402
from torch import nn  # noqa: E402

import dlpc  # noqa: E402
from dlpc.api import compile as dlpc_compile  # noqa: E402
from dlpc.diagnostics import DlpcError  # noqa: E402
from dlpc.frontends.onnx import load_model  # noqa: E402


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.relu(self.c2(x))
        return torch.softmax(self.fc(x.flatten(1)), -1)


class SmallEncoder(nn.Module):
    """One pre-written attention block: position embeddings sliced to the sequence length,
    heads split by reshapes of the input's own dims (as a dynamic-axes export needs)."""

    def __init__(self, d=16, heads=2, vocab=50, maxlen=64):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, maxlen, d) * 0.1)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.f1, self.f2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.head = nn.Linear(d, 3)

    def forward(self, ids):
        b, n = ids.shape
        x = self.emb(ids) + self.pos[:, :n]
        q, k, v = self.qkv(x).split(self.h * self.dh, dim=-1)
        q, k, v = (t.reshape(b, n, self.h, self.dh).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh), dim=-1)
        o = (att @ v).transpose(1, 2).reshape(b, n, self.h * self.dh)
        x = self.n1(x + self.o(o))
        x = self.n2(x + self.f2(torch.relu(self.f1(x))))
        return self.head(x)


class BertEmbeddingRepro(nn.Module):
    """The issue's ten-line repro: token types gathered at positions sliced to ids.shape[1]."""

    def __init__(self):
        super().__init__()
        self.register_buffer("tt", torch.zeros(1, 64, dtype=torch.long))
        self.register_buffer("pos", torch.arange(64).expand((1, -1)))
        self.emb = nn.Embedding(64, 8)

    def forward(self, ids):
        p = self.pos[:, : ids.shape[1]]
        t = torch.gather(self.tt.expand(p.shape[0], -1), dim=1, index=p)
        return self.emb(ids) + self.emb(p) + self.emb(t)


class TinyGPT(nn.Module):
    """Position ids from the length (Range), a causal mask from it (ConstantOfShape, Trilu)."""

    def __init__(self, d=16, vocab=50, maxlen=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(maxlen, d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, vocab)

    def forward(self, ids):
        n = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(n).unsqueeze(0))
        q, k, v = self.qkv(x).split(x.shape[-1], -1)
        att = q @ k.transpose(-1, -2) / math.sqrt(x.shape[-1])
        att = att.masked_fill(torch.ones(n, n).tril() == 0, float("-inf"))
        return self.out(torch.softmax(att, -1) @ v)


def _export(module: nn.Module, example, path, name: str, axes: dict) -> str:
    torch.manual_seed(0)
    module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (example,),
            str(path),
            input_names=[name],
            output_names=["y"],
            dynamic_axes={name: axes, "y": {k: v for k, v in axes.items() if k < 2}},
            dynamo=False,
        )
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("dynamic")
    ids = torch.randint(0, 50, (2, 7))
    return {
        "cnn": _export(SmallCNN(), torch.randn(2, 1, 16, 16), d / "cnn.onnx", "x", {0: "batch"}),
        "enc": _export(SmallEncoder(), ids, d / "enc.onnx", "ids", {0: "batch", 1: "seq"}),
        "bert": _export(BertEmbeddingRepro(), ids, d / "bert.onnx", "ids", {0: "batch", 1: "seq"}),
        "gpt": _export(TinyGPT(), ids, d / "gpt.onnx", "ids", {0: "batch", 1: "seq"}),
    }


def _ort(path: str, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(path)
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def _ids(b: int, n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 50, (b, n)).astype(np.int64)


def test_cnn_dynamic_batch_is_symbolic_and_matches_onnxruntime(files):
    model = dlpc.load(files["cnn"])
    text = str(model.module)
    assert 'tensor<?x1x16x16xf32, ["batch"]>' in text  # no shape given: the dim stays symbolic
    assert 'tensor<?x10xf32, ["batch"]>' in text
    fn = dlpc_compile(model, target="c")
    rng = np.random.default_rng(1)
    for b in (1, 5, 2, 5):
        x = rng.standard_normal((b, 1, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(fn(x)[0], _ort(files["cnn"], x), rtol=1e-4, atol=1e-5)
    assert fn.stats == {"calls": 4, "compiles": 1, "programs": 1}  # one program, every batch


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_encoder_dynamic_seq_matches_onnxruntime(files, target):
    model = dlpc.load(files["enc"])
    main = str(model.module)
    assert 'tensor<?x?xi64, ["batch", "seq"]>' in main
    assert 'sym_ends = ["seq"]' in main  # the position slice kept its symbolic end
    fn = dlpc_compile(model, target=target)
    for b, n in ((2, 1), (1, 5), (3, 17)):
        x = _ids(b, n)
        np.testing.assert_allclose(fn(x)[0], _ort(files["enc"], x), rtol=1e-4, atol=1e-5)


def test_bucketed_encoder_equals_the_unpadded_run(files):
    model = dlpc.load(files["enc"])
    fn = dlpc_compile(model, target="c", buckets={"seq": [8, 32]})
    for n in (3, 8, 20, 5):
        x = _ids(2, n, seed=n)
        got = fn(x)[0]
        assert got.shape == (2, n, 3)  # sliced back to the call's length
        np.testing.assert_allclose(got, _ort(files["enc"], x), rtol=1e-4, atol=1e-5)
    assert fn.stats["compiles"] == 2  # one program per bucket
    assert fn.function.mask_inputs == ["seq"]  # softmax over keys needed the mask
    with pytest.raises(DlpcError, match=r"input 'ids' dim 1 \('seq'\) is 40, above the largest"):
        fn(_ids(2, 40))


def test_bad_shapes_are_one_line_naming_input_and_dim(files, tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])
    out = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", "seq"])
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "g", [x, y], [out])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    fn = dlpc_compile(load_model(proto), target="numpy", max_dims={"seq": 16})
    a = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(fn(a, a)[0], a + a)
    cases = [
        ((2, 4), (2, 5), "input 'y' dim 1 ('seq') is 5 but input 'x' dim 1 gives 'seq' = 4"),
        ((2, 20), (2, 20), "input 'x' dim 1 ('seq') is 20, above its declared maximum 16"),
        ((2,), (2, 4), "input 'x' has rank 1 but the model expects rank 2"),
    ]
    for sx, sy, message in cases:
        with pytest.raises(DlpcError) as info:
            fn(np.ones(sx, np.float32), np.ones(sy, np.float32))
        assert message in str(info.value) and "\n" not in str(info.value)
    assert fn.stats["compiles"] == 1  # (no kernel ran for the bad calls)


def test_bert_repro_stays_symbolic_and_matches_onnxruntime(files):
    """The issue's repro: GatherElements over a buffer expanded to ids.shape, at positions
    sliced to ids.shape[1]; the offsets become broadcast aranges over seq."""
    model = dlpc.load(files["bert"])
    assert model.ir is not None, model.specialiser and model.specialiser.symbolic_error
    fn = dlpc_compile(model, target="c", symbolic=False)  # one program per binding
    bucketed = dlpc_compile(model, target="c", buckets={"seq": [8, 32]})
    for b, n in ((1, 16), (2, 5)):
        x = _ids(b, n)
        want = _ort(files["bert"], x)
        np.testing.assert_allclose(fn(x)[0], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bucketed(x)[0], want, rtol=1e-5, atol=1e-6)
    assert fn.stats["compiles"] == 2


def test_a_graph_that_cannot_stay_symbolic_runs_per_shape():
    """A dim used as a float (Shape -> Gather -> Cast(float) -> Mul) has no symbolic form:
    the model is imported per call shape, says why, and cannot be bucketed."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    zero = helper.make_tensor("zero", TensorProto.INT64, [], [0])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["d"], axis=0),
        helper.make_node("Cast", ["d"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "f"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[zero])
    model = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert model.ir is None and "Cast" in (model.specialiser.symbolic_error or "")
    fn = dlpc_compile(model, target="numpy")
    for n in (1, 3):
        a = np.ones((n, 4), np.float32)
        np.testing.assert_array_equal(fn(a)[0], a * n)
    assert fn.stats["compiles"] == 2
    with pytest.raises(DlpcError, match="bucketing needs the model's symbolic graph"):
        dlpc_compile(model, target="numpy", buckets={"n": [8]})


def test_opencl_serves_two_batches(files):
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    model = dlpc.load(files["cnn"])
    try:
        fn = dlpc_compile(model, target="opencl")
        x = np.random.default_rng(2).standard_normal((1, 1, 16, 16)).astype(np.float32)
        fn(x)
    except DlpcError as e:
        if "platform" in str(e).lower() or "not available" in str(e):
            pytest.skip(str(e))
        raise
    for b in (1, 3):
        x = np.random.default_rng(b).standard_normal((b, 1, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(fn(x)[0], _ort(files["cnn"], x), rtol=1e-4, atol=1e-5)


def test_dlpc_run_dims_and_buckets(files, capsys):
    from dlpc.tools.dlpc_run import main

    args = [files["enc"], "--target", "c", "--dims", "batch=2,seq=9", "--check", "--repeat", "2"]
    assert main([*args, "--buckets", "seq=8:16"]) == 0
    out = capsys.readouterr().out
    assert "output 0: 2x9x3 float32" in out and "dims: 4 guarded calls, 1 compile(s)" in out
    assert main([*args, "--buckets", "seq=8:x"]) != 0
    assert "--buckets entry 'seq=8:x' is not NAME=N:N:..." in capsys.readouterr().err


def test_tiled_batch_two_programs_serve_every_batch(files):
    """tiles={"batch": 8}: programs at batch 8 and 1 serve batches 1..64 (chunks of the
    call along axis 0); a dim some op mixes positions along cannot be tiled."""
    fn = dlpc_compile(dlpc.load(files["cnn"]), target="c", tiles={"batch": 8})
    rng = np.random.default_rng(3)
    for b in (1, 13, 64, 7):
        x = rng.standard_normal((b, 1, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(fn(x)[0], _ort(files["cnn"], x), rtol=1e-4, atol=1e-5)
    assert fn.stats["compiles"] == 2
    enc = dlpc.load(files["enc"])
    with pytest.raises(DlpcError, match="dim 'seq' cannot be tiled: graph.gather has 'seq' off"):
        dlpc_compile(enc, target="c", tiles={"seq": 8})


@pytest.mark.parametrize("example", ["lenet", "transformer"])
def test_dlpc_named_dims_stay_symbolic_on_request(example):
    """`x: f32[B, ...]` loaded with batch="symbolic": `B` is a symbol through the graph
    (reshape targets included) and the compiled model equals the static load's reference."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / f"{example}.dlpc"
    model = dlpc.load(path, batch="symbolic")
    assert '["B"]>' in str(model.module).split("\n")[1]
    fn = dlpc_compile(model, target="numpy")
    for b in (1, 3):
        static = dlpc.load(path, batch=b)
        xs = dlpc.api.random_inputs(static, seed=b)
        for got, want in zip(fn(*xs), dlpc.api.reference(static, xs)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gpt_position_ids_and_causal_mask_stay_symbolic(files):
    """Range(0, seq) and the causal mask's ConstantOfShape / Trilu over seq become graph
    ops over the symbol; per binding and bucketed both match onnxruntime."""
    model = dlpc.load(files["gpt"])
    assert model.ir is not None, model.specialiser and model.specialiser.symbolic_error
    fn = dlpc_compile(model, target="c")
    bucketed = dlpc_compile(model, target="c", buckets={"seq": [8, 32]})
    for b, n in ((1, 1), (2, 7), (3, 20)):
        x = _ids(b, n, seed=n)
        want = _ort(files["gpt"], x)
        np.testing.assert_allclose(fn(x)[0], want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(bucketed(x)[0], want, rtol=1e-4, atol=1e-5)
    assert bucketed.stats["compiles"] == 3  # (1, 8), (2, 8), (3, 32)
