"""The `Model` record: graph IR plus its weights. It sits below both the frontends, which
make one, and `dlpc.api`, which compiles one."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from dlpc.reference import graph as ref


@dataclass
class Model:
    """Graph IR (`func.func @main`) plus the values of its `graph.param` weights."""

    module: ModuleOp
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    name: str = "model"
    path: str | None = None

    @property
    def input_names(self) -> list[str]:
        return ref.input_names(ref.main_func(self.module))

    @property
    def param_names(self) -> list[str]:
        return ref.param_names(self.module)
