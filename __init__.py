"""dlpc: a multi-level deep-learning compiler on xDSL.

import dlpc
model = dlpc.load("examples/mlp.dlpc")
fn = dlpc.compile(model, target="c")
(y,) = fn(x)
"""

__version__ = "0.1.0"


def load(path, weights=None, batch=None, dims=None):
    """Load a model (.dlpc text, .onnx, or .mlir graph IR) into a `dlpc.api.Model`. Named
    dims (`x: f32[B, 784]`) stay symbolic unless bound: `batch=N` binds the named leading
    dims, `dims={"B": N}` binds by name."""
    from dlpc.api import load as _load

    return _load(path, weights=weights, batch=batch, dims=dims)


def compile(model, target="c", **options):  # noqa: A001 - mirrors iree/tvm naming
    """Compile a loaded model for `target`; returns a callable on numpy arrays."""
    from dlpc.api import compile as _compile

    return _compile(model, target=target, **options)


_EAGER = (
    "Tensor", "tensor", "from_numpy", "from_dlpack", "empty", "zeros", "ones", "full",
    "no_grad", "enable_grad", "jit", "ops", "register_kernel", "unregister_kernel",
)  # fmt: skip
_RUNTIME = (
    "device", "devices", "device_count", "set_device", "current_device", "current_stream",
    "use_stream", "synchronize", "memory_stats", "empty_cache", "Stream", "Event",
)  # fmt: skip


def __getattr__(name):
    """`dlpc.train(...)` (the training API, a callable module) and `dlpc.optim.Adam(...)`,
    imported on first use."""
    if name == "train":
        import dlpc.train as train_module

        return train_module
    if name == "optim":
        from dlpc.passes.train import optim

        return optim
    if name in _EAGER:  # the execution runtime and eager mode (docs/runtime.md)
        import dlpc.eager as eager

        return getattr(eager, name)
    if name in _RUNTIME:
        from dlpc.runtime import device

        return getattr(device, name)
    raise AttributeError(f"module 'dlpc' has no attribute '{name}'")
