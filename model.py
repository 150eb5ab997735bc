"""The `Model` record: graph IR plus its weights. It sits below both the frontends, which
make one, and `dlpc.api`, which compiles one.

Most models are one static graph. Some are a family of them: an ONNX model whose Reshape
takes its `shape` from a graph input has one graph per value of that input. Such a model
carries a `Specialiser`: which inputs a call passes, which of them decide the shapes, and
how to build the static model for given values (the frontend re-imports with those values
frozen). `dlpc.compile` turns it into a compiled model that builds one specialisation per
distinct value and caches it, like a JIT guard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from dlpc.diagnostics import DlpcError
from dlpc.dialects.symdims import is_symbolic
from dlpc.reference import graph as ref


@dataclass(frozen=True)
class InputSpec:
    """One input a call passes: its name, shape and dtype (a dim may be symbolic)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass
class Specialiser:
    """How a model whose graph depends on some input values gets a static graph.

    `inputs` are what a call passes, in order; `shape_inputs` are those whose values are
    frozen into the graph (they decide shapes, or they are empty); it may grow as `build`
    meets more of them. `build(values)` returns the static model with the `shape_inputs`
    frozen at `values` (a mapping with every input); its @main takes the other inputs."""

    inputs: tuple[InputSpec, ...]
    shape_inputs: list[str]
    build: Callable[[Mapping[str, np.ndarray]], Model]
    # inputs with symbolic dims whose graph could not stay symbolic: why (the frontend's
    # error); such a model is built per input shape
    symbolic_error: str | None = None

    def key(self, values: Mapping[str, np.ndarray]) -> tuple:
        """What a specialisation is cached by: the frozen inputs' dtypes, shapes and bytes,
        and the shapes of the inputs with symbolic dims (`dialects.symdims`)."""
        out: list[tuple] = [
            (s.name, np.shape(values[s.name])) for s in self.inputs if is_symbolic(s.shape)
        ]
        for name in self.shape_inputs:
            a = np.ascontiguousarray(values[name])
            out.append((name, a.dtype.str, a.shape, a.tobytes()))
        return tuple(out)


@dataclass
class Model:
    """Graph IR (`func.func @main`) plus the values of its `graph.param` weights.

    A model with a `specialiser` may have no graph of its own (`ir` is None: its shapes
    depend on input values); then `module` is an error that says so."""

    ir: ModuleOp | None
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    name: str = "model"
    path: str | None = None
    specialiser: Specialiser | None = None
    # symbolic dims that were only left unbound (a .dlpc model loaded without a binding),
    # not declared dynamic: dlpc.compile gives the first call's binding its own program
    specialise_first: bool = False

    @property
    def module(self) -> ModuleOp:
        if self.ir is None and self.specialiser and not self.specialiser.shape_inputs:
            raise DlpcError(
                f"{self.path or self.name}: error: the model's inputs have symbolic dims, so "
                f"it has one graph per input shape: dlpc.compile(model) builds them at call "
                f"time (or load it with input_shapes=...)"
            )
        if self.ir is None:
            frozen = self.specialiser.shape_inputs if self.specialiser else []
            names = ", ".join(f"'{n}'" for n in frozen)
            raise DlpcError(
                f"{self.path or self.name}: error: the values of input(s) {names} decide the "
                f"model's shapes, so it has one graph per value: dlpc.compile(model) builds "
                f"them at call time"
            )
        return self.ir

    @module.setter
    def module(self, value: ModuleOp) -> None:
        self.ir = value

    @property
    def input_names(self) -> list[str]:
        """The inputs a call passes, in order."""
        if self.specialiser is not None:
            return [s.name for s in self.specialiser.inputs]
        return ref.input_names(ref.main_func(self.module))

    @property
    def param_names(self) -> list[str]:
        return ref.param_names(self.module)
