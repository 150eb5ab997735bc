"""A convolutional net trained by the compiled step against torch: the conv rules' dx (a
transposed conv: stride 1 and 2, groups, a 1x1) and dw (im2col per sample; the depthwise
product sum), the relu and clip masks and the training batch norm's closed-form backward
(4-D: over samples and positions), 5 SGD steps on the C target."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc

torch = pytest.importorskip("torch")

BATCH = 4

MODEL = """model cnn(x: f32[B, 3, 8, 8]) {
  param c1: f32[8, 3, 3, 3] = kaiming(seed=1)
  param bn1.scale: f32[8] = uniform(seed=2, low=0.8, high=1.2)
  param bn1.bias: f32[8] = normal(seed=3, std=0.1)
  param bn1.mean: f32[8] = zeros()
  param bn1.var: f32[8] = ones()
  param dw: f32[8, 1, 3, 3] = kaiming(seed=4)
  param c2: f32[6, 8, 3, 3] = kaiming(seed=5)
  param g3: f32[6, 3, 1, 1] = kaiming(seed=6)
  param bn2.scale: f32[6] = uniform(seed=7, low=0.8, high=1.2)
  param bn2.bias: f32[6] = normal(seed=8, std=0.1)
  param bn2.mean: f32[6] = zeros()
  param bn2.var: f32[6] = ones()
  param fc.weight: f32[4, 6] = kaiming(seed=9)
  param fc.bias: f32[4] = zeros()
  let h = relu(batch_norm(conv2d(x, c1, padding=1), bn1.scale, bn1.bias, bn1.mean, bn1.var))
  let h = clip(conv2d(h, dw, padding=1, groups=8), min=0, max=6)
  let h = conv2d(h, c2, stride=2, padding=1)
  let h = conv2d(h, g3, groups=2)
  let h = relu(batch_norm(h, bn2.scale, bn2.bias, bn2.mean, bn2.var))
  let h = reshape(global_avg_pool(h), shape=[B, 6])
  return linear(h, fc.weight, fc.bias)
}
"""


def torch_net(w):
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),
        nn.Hardtanh(0.0, 6.0),
        nn.Conv2d(8, 6, 3, stride=2, padding=1, bias=False),
        nn.Conv2d(6, 6, 1, groups=2, bias=False),
        nn.BatchNorm2d(6),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, 4),
    )
    names = {
        "0.weight": "c1",
        "1.weight": "bn1.scale",
        "1.bias": "bn1.bias",
        "3.weight": "dw",
        "5.weight": "c2",
        "6.weight": "g3",
        "7.weight": "bn2.scale",
        "7.bias": "bn2.bias",
        "11.weight": "fc.weight",
        "11.bias": "fc.bias",
    }
    for tname, p in net.named_parameters():
        p.data = torch.tensor(w[names[tname]])
    return net, names


def test_convnet_steps_match_torch(tmp_path):
    path = tmp_path / "cnn.dlpc"
    path.write_text(MODEL)
    trainer = dlpc.train(
        str(path), optimizer=dlpc.optim.SGD(lr=0.1, momentum=0.9), batch_size=BATCH, target="c"
    )
    net, names = torch_net(trainer.weights)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(3)
    ours, theirs = [], []
    for _ in range(5):
        # a shift keeps some inputs of the relu6 above 6, so its upper mask is exercised
        x = (rng.standard_normal((BATCH, 3, 8, 8)) * 3).astype(np.float32)
        y = rng.integers(0, 4, BATCH)
        ours.append(trainer.step(x, y))
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        opt.step()
        theirs.append(loss.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    final = trainer.weights
    for tname, p in net.named_parameters():
        np.testing.assert_allclose(
            final[names[tname]], p.detach().numpy(), rtol=1e-3, atol=1e-5, err_msg=tname
        )
    np.testing.assert_allclose(final["bn2.mean"], net[7].running_mean.numpy(), rtol=1e-4, atol=1e-6)
