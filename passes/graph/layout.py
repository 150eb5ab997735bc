"""Rewrite convolution/pooling/batch-norm regions from NCHW to NHWC (or back).

Input: graph, func.  Output: graph, func; conv2d/pools/global_avg_pool/rank-4 batch_norm
carry `layout = "nhwc"` (`graph.layout_of`).
Requires: nothing.
Guarantees: the function signature and results are unchanged (the model interface stays
as written); transposes appear only at region borders. Each layout op is first wrapped
as transpose -> op(nhwc) -> transpose back; transposes are then sunk through elementwise
ops (relu, residual adds, ...) and cancelled where two meet:

    %c = graph.conv2d %x, %w            %t = graph.transpose %x {perm = [0, 2, 3, 1]}
    %r = graph.relu %c              ->   %c = graph.conv2d %t, %w {layout = "nhwc"}
    %d = graph.conv2d %r, %w2            %r = graph.relu %c
                                         %d = graph.conv2d %r, %w2 {layout = "nhwc"}
                                         %y = graph.transpose %d {perm = [0, 3, 1, 2]}

Sinking is `op(transpose(a, p), c) -> transpose(op(a, c'), p)` for elementwise ops whose
other operands are one-element or static (c' = transpose(c, p^-1), folded later): exact.
The conversion and the sinking are `_layout_rewrite.py`'s, shared with graph-conv-layout.

The weight of conv2d stays OIHW. The numpy reference and graph-to-te must honour the
attribute; `evaluate_nhwc` below is the reference value of an NHWC op.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph as g
from dlpc.passes.graph import _util as u
from dlpc.passes.graph._layout_rewrite import (
    LAYOUT_OPS,
    TO_NCHW,
    TO_NHWC,
    convert,
    sink_transposes,
    with_layout,
)
from dlpc.passes.graph.conv_layout import GraphConvLayout

__all__ = ["LAYOUT_OPS", "TO_NCHW", "TO_NHWC", "GraphLayout", "evaluate_nhwc", "with_layout"]


def evaluate_nhwc(op: Operation, arrays: list[np.ndarray]) -> np.ndarray:
    """Reference value of an NHWC layout op: transpose to NCHW, evaluate, transpose back."""
    assert g.layout_of(op) == "nhwc"
    x = arrays[0]
    to_nchw = (0, x.ndim - 1, *range(1, x.ndim - 1))
    x_nchw = np.transpose(x, to_nchw)
    block = Block(
        arg_types=[
            g.tensor_type(x_nchw.shape, g.element_type_of(op.operands[0])),
            *(v.type for v in op.operands[1:]),
        ]
    )
    nchw = with_layout(op, "nchw", list(block.args))
    try:
        y = u.evaluate(nchw, [x_nchw, *arrays[1:]])
    finally:
        nchw.drop_all_references()
    return np.transpose(y, (0, *range(2, y.ndim), 1))


def _convertible(op: Operation, to: str) -> bool:
    return (
        isinstance(op, LAYOUT_OPS)
        and g.layout_of(op) != to
        and len(g.shape_of(op.operands[0])) == 4
    )


WHERE = ("all", "pays")


@dataclass(frozen=True)
class GraphLayout(ModulePass):
    """graph-layout{to=nhwc}: NCHW conv/pool/batch-norm regions to NHWC (or to=nchw).
    `where=all` (the default) converts every layout op; `where=pays` (what -O3 runs)
    only the convs whose NHWC form graph-conv-layout's model says is faster (output
    channels in whole vectors of `lanes`, a row that is not) and the pools / batch norms
    reading them: forced everywhere, NHWC lost 1.2-7x on the examples (the border
    transposes read and written through as gathers/scatters along the vectorized
    channels, convs whose channels fill no vector, depthwise convs; docs/graph-passes.md)."""

    name = "graph-layout"

    to: str = "nhwc"
    where: str = "all"
    lanes: int = 8

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.to not in g.LAYOUTS:
            raise DlpcError(f"error: graph-layout to must be nhwc or nchw, got '{self.to}'")
        if self.where not in WHERE:
            raise DlpcError(f"error: graph-layout where must be all or pays, got '{self.where}'")
        if self.where == "pays":
            if self.to != "nhwc":
                raise DlpcError("error: graph-layout where=pays converts to nhwc only")
            # conv-layout's choice
            GraphConvLayout(lanes=self.lanes).apply(ctx, op)
            return
        for fn in u.funcs(op):
            for block in fn.body.blocks:
                for inner in list(block.ops):
                    if _convertible(inner, self.to):
                        convert(block, inner, self.to)
        sink_transposes(op)
