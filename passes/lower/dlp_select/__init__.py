"""Intrinsic selection for `loop-to-dlp`: map a tile's compute onto DLP intrinsics.

A kernel's loop nest below its work loop (see loop_to_dlp.py) is tried against each
pattern family in turn; the first that matches gives the selection, anything else keeps
the scalar loops:

- `matmul.py`: a reduction of products, one `dlp.matmul` per tile;
- `window.py`: convolution (`dlp.conv2d`, depthwise as one per channel) and max / sum
  pooling (`dlp.pool`), one window matcher for both;
- `reduce.py`: row reductions (`dlp.reduce_sum` / `dlp.reduce_max`);
- `permute.py`: a copy that permutes dims (transposes, head splits) as `dlp.transpose`;
- `elementwise.py`: elementwise nests, one vector intrinsic per op (and the epilogues
  the other patterns end with).

A selection reports the NRAM (and WRAM) scratch it needs (`scratch_bytes`), so tiling
accounts for it, and emits the body of one tile.
"""

from __future__ import annotations

from xdsl.dialects.builtin import Float32Type

from dlpc.passes.lower.dlp_select._matching import NoMatch, work_nest
from dlpc.passes.lower.dlp_select.elementwise import ElementwiseSelection, match_elementwise
from dlpc.passes.lower.dlp_select.matmul import match_matmul
from dlpc.passes.lower.dlp_select.permute import match_permute
from dlpc.passes.lower.dlp_select.reduce import match_reduce
from dlpc.passes.lower.dlp_select.window import match_conv, match_pool


def select_compute(plan):
    """An intrinsic selection for the plan's tile compute, or None (scalar loops)."""
    if plan.work is None:
        return None
    if any(
        not isinstance(p.value.type.get_element_type(), Float32Type) for p in plan.buffers.values()
    ):
        return None  # the intrinsics are f32
    for matcher in (match_matmul, match_conv, match_pool, match_reduce, match_permute):
        try:
            return matcher(plan)
        except NoMatch:
            pass
    nest = work_nest(plan.work)
    try:
        ew = match_elementwise(plan, nest, list(nest[-1].block.ops))
    except NoMatch:
        return None
    return ElementwiseSelection(ew)
