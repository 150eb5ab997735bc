"""The numpy side of @main's calling convention, shared by every runtime.

`CFunction` (cbuild.py), `DlpFunction` (dlp_sim.py) and `OpenCLFunction` (opencl_rt.py)
all derive from `ModuleFunction`, which reads @main's signature and turns the call's
numpy arguments into checked, C-contiguous arrays:

    class MyFunction(ModuleFunction):
        def __init__(self, module):
            self.bind_signature(find_main(module))   # num_inputs, param_names, arg_specs
        def __call__(self, *inputs, params=None):
            arrays = self.arguments(inputs, params)   # inputs then params, checked
            outputs = self.empty_outputs()            # freshly allocated results
            ...

Errors are one `DlpcError` line each: `expected 1 inputs, got 2`, `missing value for
parameter 'fc1.weight'`, `expected 2 parameters, got 1`, `input 0 has shape (3,),
expected (4,)`.
"""

from __future__ import annotations

import numpy as np

from dlpc.diagnostics import DlpcError


class ModuleFunction:
    """A compiled module callable as `f(*inputs, params=dict_or_list) -> [outputs]`."""

    num_inputs: int
    param_names: list[str]
    num_outputs: int
    arg_specs: list[tuple[tuple[int, ...], np.dtype]]  # (shape, dtype) per @main argument

    def bind_signature(self, fn) -> None:
        """Read the calling convention and argument types of the loop-level `@main` `fn`."""
        from dlpc.backends.c import calling_convention, memref_info
        from dlpc.dialects.graph import numpy_dtype

        self.num_inputs, self.param_names, self.num_outputs = calling_convention(fn)
        self.arg_specs = []
        for arg in fn.body.block.args:
            shape, elt = memref_info(arg.type)
            self.arg_specs.append((shape, np.dtype(numpy_dtype(elt))))

    def signature(self) -> dict:
        """The calling convention as plain data (JSON-able), for `set_signature`."""
        return {
            "num_inputs": self.num_inputs,
            "param_names": list(self.param_names),
            "num_outputs": self.num_outputs,
            "arg_specs": [[list(shape), dtype.str] for shape, dtype in self.arg_specs],
        }

    def set_signature(self, signature: dict) -> None:
        """Bind the calling convention `signature()` returned (a cached compile)."""
        self.num_inputs = int(signature["num_inputs"])
        self.param_names = [str(p) for p in signature["param_names"]]
        self.num_outputs = int(signature["num_outputs"])
        self.arg_specs = [(tuple(s), np.dtype(d)) for s, d in signature["arg_specs"]]

    bound_params: list[np.ndarray] | None = None

    def bind_params(self, params) -> None:
        """Check and convert the parameters once (a dict by name, or a list in order) and
        keep them: later calls without `params=` use them as they are (resident weights)."""
        self.bound_params = self.arguments([None] * self.num_inputs, params, skip_inputs=True)

    def arguments(self, inputs, params, *, skip_inputs: bool = False) -> list[np.ndarray]:
        """The inputs then the parameters (a dict by name, or a list in order; None: the
        bound ones) as C-contiguous arrays of @main's dtypes, their counts and shapes
        checked. With `skip_inputs`, only the parameters (for `bind_params`)."""
        n_in, n_par = self.num_inputs, len(self.param_names)
        if len(inputs) != n_in:
            raise DlpcError(f"error: expected {n_in} inputs, got {len(inputs)}")
        if params is None and self.bound_params is not None and not skip_inputs:
            return [*self._convert(inputs, 0), *self.bound_params]
        if isinstance(params, dict):
            missing = [p for p in self.param_names if p not in params]
            if missing:
                raise DlpcError(f"error: missing value for parameter '{missing[0]}'")
            param_values = [params[p] for p in self.param_names]
        else:
            param_values = list(params or [])
            if len(param_values) != n_par:
                raise DlpcError(f"error: expected {n_par} parameters, got {len(param_values)}")
        if skip_inputs:
            return self._convert(param_values, n_in)
        return self._convert([*inputs, *param_values], 0)

    def _convert(self, values, first: int) -> list[np.ndarray]:
        """`values` (arguments `first`, `first + 1`, ... of @main) as checked arrays."""
        n_in = self.num_inputs
        arrays = []
        for k, value in enumerate(values, first):
            shape, dtype = self.arg_specs[k]
            if (
                type(value) is np.ndarray
                and value.dtype == dtype
                and value.shape == shape
                and value.flags.c_contiguous
            ):
                arrays.append(value)  # the common case, as it is
                continue
            a = np.asarray(value, dtype=dtype)
            if not a.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d 1-d)
                a = a.copy(order="C")
            if a.shape != shape:
                what = f"input {k}" if k < n_in else f"parameter '{self.param_names[k - n_in]}'"
                raise DlpcError(f"error: {what} has shape {a.shape}, expected {shape}")
            arrays.append(a)
        return arrays

    def __call__(self, *inputs, params=None) -> list[np.ndarray]:
        """@main on `inputs` (params: the bound ones when None); each runtime defines it."""
        raise NotImplementedError

    def empty_outputs(self) -> list[np.ndarray]:
        """Freshly allocated (uninitialised) arrays for @main's outputs."""
        first = self.num_inputs + len(self.param_names)
        return [np.empty(shape, dtype) for shape, dtype in self.arg_specs[first:]]
