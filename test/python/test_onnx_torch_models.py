"""Five PyTorch models, exported to ONNX at test time by both of torch's exporters (the
TorchScript one, `dynamo=False`, and `torch.export`'s, `dynamo=True`), imported by dlpc,
run on the numpy reference and the C backend through the public API, and compared with
onnxruntime (atol/rtol 1e-4).

Needs torch, onnx and onnxruntime (the `test` extra), and onnxscript for the dynamo
exporter; a missing one skips its tests with the reason.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (dlpc[test])")
pytest.importorskip("onnx", reason="onnx is not installed (dlpc[onnx])")

from torch import nn  # noqa: E402

import dlpc  # noqa: E402
from dlpc.frontends.onnx import load_model  # noqa: E402
from dlpc.reference.graph import run_reference  # noqa: E402

TOL = 1e-4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, 128), nn.Linear(128, 64), nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.nn.functional.gelu(self.fc2(x))
        return torch.log_softmax(self.fc3(x), dim=-1)


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 6, 5, padding=2)
        self.c3 = nn.Conv2d(6, 16, 5)
        self.f5, self.f6, self.f7 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = nn.functional.avg_pool2d(torch.tanh(self.c1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.c3(x)), 2)
        x = torch.flatten(x, 1)
        return self.f7(torch.relu(self.f6(torch.relu(self.f5(x)))))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 1, 1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            d_model=32, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True
        )

    def forward(self, x):
        return self.layer(x)


class MobileBlock(nn.Module):
    """Inverted residual: 1x1 expand, 3x3 depthwise, 1x1 project, each with batch norm."""

    def __init__(self, c=16, expand=4):
        super().__init__()
        h = c * expand
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6())
        self.dw = nn.Sequential(
            nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6()
        )
        self.project = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.project(self.dw(self.expand(x)))


MODELS = {
    "mlp": (MLP, (4, 64)),
    "lenet5": (LeNet5, (2, 1, 28, 28)),
    "resnet": (SmallResNet, (2, 3, 16, 16)),
    "transformer_encoder": (Encoder, (2, 10, 32)),
    "mobilenet_block": (MobileBlock, (1, 16, 12, 12)),
}


def _randomise_batch_norm(model: nn.Module, gen: torch.Generator) -> None:
    """Non-trivial running statistics, so that batch norm is really exercised."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


EXPORTERS = ("torchscript", "dynamo")


@pytest.fixture(
    scope="module",
    params=[(m, e) for e in EXPORTERS for m in sorted(MODELS)],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def exported(request, tmp_path_factory):
    """(name, path of the exported .onnx, input array, onnxruntime's outputs)."""
    name, exporter = request.param
    if exporter == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    cls, shape = MODELS[name]
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = cls().eval()
    with torch.no_grad():
        _randomise_batch_norm(model, gen)
    x = torch.randn(*shape, generator=gen)
    path = tmp_path_factory.mktemp("onnx") / f"{name}.onnx"
    # (not under no_grad: there nn.TransformerEncoderLayer takes its fused fast path,
    # which has no ONNX export)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":  # opset 20 or so, weights in a side file `<name>.onnx.data`
            torch.onnx.export(
                model, (x,), str(path), dynamo=True, input_names=["input"], verbose=False
            )
        else:
            # resnet: PRESERVE keeps BatchNormalization nodes (EVAL folds them into the
            # convs, as it does for the mobilenet block)
            mode = torch.onnx.TrainingMode
            mode = mode.PRESERVE if name == "resnet" else mode.EVAL
            torch.onnx.export(
                model,
                (x,),
                str(path),
                dynamo=False,
                opset_version=17,
                input_names=["input"],
                output_names=["output"],
                training=mode,
            )
    xs = x.numpy()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"input": xs})
    return name, path, xs, expected, exporter


def _check(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=TOL, atol=TOL)


def test_numpy_matches_onnxruntime(exported):
    name, path, x, expected, _ = exported
    model = load_model(path)
    _check(run_reference(model.module, [x], model.weights), expected)
    _check(dlpc.compile(dlpc.load(path), target="numpy")(x), expected)


def test_c_matches_onnxruntime(exported):
    name, path, x, expected, _ = exported
    model = dlpc.load(path)  # the .onnx route of the public API
    _check(dlpc.compile(model, target="c")(x), expected)


def test_exported_operators(exported):
    """The exports contain what the models are meant to exercise."""
    import onnx

    name, path, x, expected, exporter = exported
    ops = {n.op_type for n in onnx.load(path, load_external_data=False).graph.node}
    want = {
        "mlp": {"Gemm", "Relu", "LogSoftmax"},
        "lenet5": {"Conv", "Tanh", "AveragePool", "MaxPool", "Gemm"},
        "resnet": {"Conv", "MaxPool", "Add"},
        "transformer_encoder": {"MatMul", "Softmax", "LayerNormalization", "Transpose"},
        "mobilenet_block": {"Conv", "Clip", "Add"},
    }[name]
    if exporter == "torchscript":  # (the dynamo exporter folds batch norm and reshapes)
        want |= {
            "lenet5": {"Flatten"},
            "resnet": {"BatchNormalization", "GlobalAveragePool"},
        }.get(name, set())
    assert want <= ops, f"{name} export lacks {want - ops}"


def test_import_keeps_names(exported):
    """Initializers keep their PyTorch names as graph.param; the input keeps its name."""
    name, path, x, expected, _ = exported
    model = load_model(path)
    text = str(model.module)
    assert 'dlpc.name = "input"' in text
    assert model.weights, "a trained model has weights"
    for key in model.weights:
        assert f'graph.param "{key}"' in text
