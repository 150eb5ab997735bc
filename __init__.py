"""dlpc: a multi-level deep-learning compiler on xDSL.

import dlpc
model = dlpc.load("examples/mlp.dlpc")
fn = dlpc.compile(model, target="c")
(y,) = fn(x)
"""

__version__ = "0.1.0"


def load(path, weights=None, batch=None):
    """Load a model (.dlpc text, .onnx, or .mlir graph IR) into a `dlpc.api.Model`;
    `batch` binds a named batch dim (`x: f32[B, 784]`, 1 when unbound)."""
    from dlpc.api import load as _load

    return _load(path, weights=weights, batch=batch)


def compile(model, target="c", **options):  # noqa: A001 - mirrors iree/tvm naming
    """Compile a loaded model for `target`; returns a callable on numpy arrays."""
    from dlpc.api import compile as _compile

    return _compile(model, target=target, **options)


def __getattr__(name):
    """`dlpc.train(...)` (the training API, a callable module) and `dlpc.optim.Adam(...)`,
    imported on first use."""
    if name == "train":
        import dlpc.train as train_module

        return train_module
    if name == "optim":
        from dlpc.passes.train import optim

        return optim
    raise AttributeError(f"module 'dlpc' has no attribute '{name}'")
