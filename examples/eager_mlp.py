"""A PyTorch-style training loop in dlpc's eager mode: examples/mlp.dlpc's MLP on the
digits, with its initial weights and dlpc-train's data split, batches and Adam.

    python examples/eager_mlp.py --device cpu --epochs 10     # or opencl:0, --jit

Prints the loss and the test accuracy per epoch, as `dlpc-train examples/mlp.dlpc --data
digits --epochs 10` does (docs/runtime.md compares them).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import dlpc
from dlpc.eager import ops
from dlpc.eager import optim as eager_optim
from dlpc.tools.dlpc_train import fit_to_input, load_data

MODEL = Path(__file__).with_name("mlp.dlpc")


class MLP:
    """784-256-256-10 with ReLU, params from mlp.dlpc's initialisers."""

    def __init__(self, weights: dict[str, np.ndarray], device: str) -> None:
        self.params = {
            k: dlpc.tensor(v, device=device, requires_grad=True) for k, v in weights.items()
        }

    def __call__(self, x):
        p = self.params
        h = ops.linear(x, p["fc1.weight"], p["fc1.bias"]).relu()
        h = ops.linear(h, p["fc2.weight"], p["fc2.bias"]).relu()
        return ops.linear(h, p["fc3.weight"], p["fc3.bias"])


def accuracy(forward, x: np.ndarray, y: np.ndarray, device: str, batch: int) -> float:
    """% of `x` classified as `y`, in batches (the last one smaller)."""
    correct = 0
    with dlpc.no_grad():
        for k in range(0, len(x), batch):
            logits = forward(dlpc.tensor(x[k : k + batch], device=device))
            correct += int((np.asarray(logits).argmax(1) == y[k : k + batch]).sum())
    return 100.0 * correct / len(x)


def train(
    device: str = "cpu",
    epochs: int = 10,
    batch: int = 32,
    jit: bool = False,
    say=print,
    max_steps: int | None = None,
    step_losses: list | None = None,
):
    """(per-epoch losses, final test accuracy %, the model): trained eagerly; with
    `jit`, the loss and the evaluation are `dlpc.jit` functions of the same code (the
    forward and its graph-autodiff backward compiled whole; the optimizer eager)."""
    x, y, _, _, x_test, y_test, _ = load_data("digits")
    x = fit_to_input(x, (784,), "digits", lambda s: None)
    x_test = fit_to_input(x_test, (784,), "digits", lambda s: None)
    weights = dlpc.load(MODEL, batch=batch).weights
    model = MLP(weights, device)
    opt = eager_optim.Adam(list(model.params.values()), lr=1e-3)

    def loss_of(xb, yb):
        return ops.cross_entropy(model(xb), yb)

    step_loss = dlpc.jit(loss_of) if jit else loss_of
    forward = dlpc.jit(model) if jit else model
    losses = []
    for epoch in range(epochs):
        order = np.random.default_rng([0, epoch]).permutation(len(x))
        total, start = 0.0, time.perf_counter()
        n = len(x) - len(x) % batch
        if max_steps is not None:  # (a test's short run: the first batches only)
            n = min(n, max_steps * batch)
        for k in range(0, n, batch):
            idx = order[k : k + batch]
            xb = dlpc.tensor(x[idx], device=device)
            yb = dlpc.tensor(y[idx], device=device)
            loss = step_loss(xb, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
            if step_losses is not None:
                step_losses.append(loss.item())
        losses.append(total / (n // batch))
        if max_steps is not None:
            continue  # (no evaluation in a short run)
        acc = accuracy(forward, x_test, y_test, device, batch)
        say(
            f"epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f}, test accuracy {acc:.1f} %, "
            f"{n / (time.perf_counter() - start):.0f} samples/s"
        )
    acc = accuracy(forward, x_test, y_test, device, batch) if max_steps is None else None
    return losses, acc, model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--jit", action="store_true")
    args = parser.parse_args(argv)
    _, acc, _ = train(args.device, args.epochs, jit=args.jit)
    print(f"test accuracy: {acc:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
