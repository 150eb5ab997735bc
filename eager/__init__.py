"""dlpc's eager mode: tensors with ops and autograd, the dispatcher, optimizers on eager
params, and `jit` (trace into graph IR, compile whole); above `dlpc.api` (it compiles
kernels through the pipeline), below `dlpc.train`. See docs/runtime.md.

    import dlpc
    x = dlpc.tensor(data, device="opencl:0", requires_grad=True)
    loss = dlpc.ops.cross_entropy(model(x), labels)
    loss.backward()
"""

from dlpc.eager import ops, optim
from dlpc.eager.autograd import enable_grad, no_grad
from dlpc.eager.dispatch import register_kernel, unregister_kernel
from dlpc.eager.jit import JitFunction, jit
from dlpc.eager.tensor import (
    Tensor,
    empty,
    from_dlpack,
    from_numpy,
    full,
    ones,
    tensor,
    zeros,
)

__all__ = [
    "JitFunction",
    "Tensor",
    "empty",
    "enable_grad",
    "from_dlpack",
    "from_numpy",
    "full",
    "jit",
    "no_grad",
    "ones",
    "ops",
    "optim",
    "register_kernel",
    "tensor",
    "unregister_kernel",
    "zeros",
]
