"""Choose the activation layout per convolution: NHWC where the output channels fill the
vector registers and the output row does not (a small feature map), NCHW elsewhere.

Input: graph, func.  Output: graph, func; the chosen conv2d ops, and the pools / global
average pools / batch norms that read their results (through elementwise ops), carry
`layout = "nhwc"`; transposes appear only where an NHWC region meets an NCHW one.
Requires: static shapes (run graph-infer-shapes first).
Guarantees: exact (a layout change moves no arithmetic); the function signature and
results are unchanged.

Why per conv. The default conv schedules vectorize the innermost output dim: the output
row `W` in NCHW, the output channels `O` in NHWC (`passes/schedule/default.py`). A conv
whose row is short or ragged (`W % lanes != 0`: LeNet's second conv, 16 channels x a
10-wide row) wastes most of every vector in NCHW but none in NHWC when `O % lanes == 0`;
graph-layout{to=nhwc} forced (`where=all`) converts every conv, including those where NCHW is
the better fit (LeNet's first conv has 6 output channels; depthwise convs have no channel
reuse); -O3 runs it as `where=pays`, which is this pass. So:

    conv2d (groups = 1, O % lanes == 0, W % lanes != 0)          -> NHWC
    max/avg pool, global avg pool, batch norm of an NHWC result  -> NHWC
    everything else                                              -> unchanged

Conversion is graph-layout's rewrite (`_layout_rewrite.py`); transposes are sunk and
cancelled by its `SinkTranspose`:

    %c = graph.conv2d %x, %w            %t = graph.transpose %x {perm = [0, 2, 3, 1]}
    %r = graph.relu %c              ->   %c = graph.conv2d %t, %w {layout = "nhwc"}
    %p = graph.max_pool2d %r             %r = graph.relu %c
                                         %p = graph.max_pool2d %r {layout = "nhwc"}
                                         %y = graph.transpose %p {perm = [0, 3, 1, 2]}

`lanes` (default 8: GCC's preferred vector width for f32 on AVX2 and on AMD's
AVX-512) is the vector width in elements the decision assumes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph as g
from dlpc.passes.graph import _util as u
from dlpc.passes.graph._layout_rewrite import LAYOUT_OPS, TO_NCHW, convert, sink_transposes


def prefers_nhwc(op: Operation, lanes: int) -> bool:
    """An NCHW conv2d whose output channels fill whole vectors and whose row does not."""
    if not isinstance(op, g.Conv2DOp) or g.layout_of(op) != "nchw":
        return False
    shape = g.shape_of(op.results[0])
    if len(shape) != 4 or op.groups != 1:
        return False
    channels, width = shape[1], shape[3]
    return channels % lanes == 0 and width % lanes != 0


def _reads_nhwc(op: Operation) -> bool:
    """A layout op whose input is an NHWC result transposed back to NCHW."""
    if not isinstance(op, LAYOUT_OPS) or g.layout_of(op) != "nchw":
        return False
    t = u.producer(op.operands[0])
    return isinstance(t, g.TransposeOp) and t.permutation() == TO_NCHW


@dataclass(frozen=True)
class GraphConvLayout(ModulePass):
    """graph-conv-layout{lanes=8}: NHWC for the convs (and the pools after them) that
    vectorize better over their output channels than over their output row."""

    name = "graph-conv-layout"

    lanes: int = 8

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.lanes < 1:
            raise DlpcError(f"error: graph-conv-layout lanes must be positive, got {self.lanes}")
        blocks = [block for fn in u.funcs(op) for block in fn.body.blocks]
        chosen = [
            (block, inner)
            for block in blocks
            for inner in block.ops
            if prefers_nhwc(inner, self.lanes)
        ]
        if not chosen:
            return
        for block, inner in chosen:
            convert(block, inner, "nhwc")
        sink_transposes(op)
        # the pools / batch norms reading a converted result follow it into NHWC (one
        # region instead of a transpose back before each), until none is left
        while True:
            followers = [(b, inner) for b in blocks for inner in b.ops if _reads_nhwc(inner)]
            if not followers:
                break
            for block, inner in followers:
                convert(block, inner, "nhwc")
            sink_transposes(op)
