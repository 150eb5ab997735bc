"""A batch run chunk after chunk: one C program compiled for `chunk` images, called on
each slice of a batch of `repeat * chunk` (passes/graph/rebatch.py says when that is
the same computation, and why it is faster: the intermediates of one chunk stay in
the caches).

    run = BatchChunks(function, repeat)    # function: a bound CFunction of one chunk
    outputs = run(*inputs)                 # inputs and outputs of the whole batch

The loop runs in C (fastcall.c's `repeat`: one call from Python, each chunk's pointers
offset in the argument vector, the outputs written in place); without the extension,
in Python over slices.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from dlpc.backends.runtime import cbuild, fastcall
from dlpc.backends.runtime.cbuild import CFunction, _raise_failure
from dlpc.diagnostics import DlpcError


class BatchChunks:
    """`function` (a CFunction over `chunk` images, params bound) over `repeat` chunks."""

    def __init__(self, function: CFunction, repeat: int):
        self.function = function
        self.repeat = repeat
        n_in, n_params = function.num_inputs, len(function.param_names)
        specs = function.arg_specs
        self.chunk = specs[0][0][0] if n_in and specs[0][0] else 1

        def whole(spec):
            shape, dtype = spec
            return (shape[0] * repeat, *shape[1:]), dtype

        self.in_specs = [whole(s) for s in specs[:n_in]]
        self.out_specs = [whole(s) for s in specs[n_in + n_params :]]
        self.source = function.source
        self._fast = None
        argv = getattr(function, "_argv", None)
        if argv is not None:
            library = function.library
            self._fast = fastcall.caller(
                ctypes.cast(library.entry, ctypes.c_void_p).value or 0,
                ctypes.addressof(argv),
                len(argv),
                n_in,
                n_in + n_params,
                self.in_specs,
                self.out_specs,
                lambda: cbuild.keep_off_workers(),
                functools.partial(_raise_failure, library),
                (argv, function),
                repeat,
            )

    def __call__(self, *inputs) -> list[np.ndarray]:
        fast = self._fast
        if fast is not None:
            outputs = fast(*inputs)
            if outputs is not None:
                return outputs
        if len(inputs) != len(self.in_specs):
            raise DlpcError(f"error: expected {len(self.in_specs)} inputs, got {len(inputs)}")
        arrays = []
        for k, (x, (shape, dtype)) in enumerate(zip(inputs, self.in_specs)):
            a = np.asarray(x)
            if a.shape != shape or a.dtype != dtype:
                raise DlpcError(
                    f"error: input {k}: expected {dtype} of shape {list(shape)}, "
                    f"got {a.dtype} of shape {list(a.shape)}"
                )
            arrays.append(np.ascontiguousarray(a))
        outputs = [np.empty(shape, dtype) for shape, dtype in self.out_specs]
        c = self.chunk
        for r in range(self.repeat):
            parts = self.function(*[a[r * c : (r + 1) * c] for a in arrays])
            for y, part in zip(outputs, parts):
                y[r * c : (r + 1) * c] = part
        return outputs
