"""Winograd F(2x2, 3x3) for stride-1 3x3 convolutions with static weights (IREE's
`iree_linalg_ext.winograd.*` decomposition at the graph level).

Input: graph, func.  Output: graph, func; each chosen `graph.conv2d` becomes the four
ops below (plus reshapes: of the weight, folded; of V and M, views).
Requires: static shapes (run graph-infer-shapes first); best before graph-fuse (the
conv's epilogue then fuses into the output transform) and before `fold_params` (which
evaluates the filter transform once, when the weights are bound).
Guarantees: the same convolution up to rounding (Lavin & Gray's F(2x2, 3x3) transforms
have coefficients 0, +-1 and 1/2: a few ulps of extra error, within the tolerances of
the examples); the conv's result keeps its name.

    %y = graph.conv2d %x, %w, %b {pads = [1, 1, 1, 1]} : (1x16x32x32, 16x16x3x3, 16) -> 1x16x32x32

becomes

    %u = graph.winograd_filter_transform %w : (16x16x3x3) -> 16x16x16     (folded: a weight)
    %u1 = graph.reshape %u {shape = [16, 1, 16, 16]}                      (folded too)
    %v = graph.winograd_input_transform %x {pads = [1, 1, 1, 1]} : (1x16x32x32) -> 16x1x16x16x16
    %v2 = graph.reshape %v {shape = [16, 1, 16, 256]}                     (a view)
    %m = graph.matmul %u1, %v2 : (16x1x16x16, 16x1x16x256) -> 16x1x16x256 (16 x N gemms)
    %m2 = graph.reshape %m {shape = [16, 1, 16, 16, 16]}                  (a view)
    %y = graph.winograd_output_transform %m2, %b {output = [32, 32]} : ... -> 1x16x32x32

The tiles of each image are their own gemm ([16, N, C, tiles] rather than all images'
tiles in one, whose operand leaves the cache: docs/design/graph-passes.md#winograd-per-image-gemm).

A 2x2 output tile costs 16 multiply-adds per (input, output) channel pair instead of 36:
2.25x fewer, against three passes over memory (V, M, and the transforms' adds).

Eligible: `groups = 1`, stride 1, dilation 1, an OIHW 3x3 f32 weight that depends only
on params and constants (never a training step's weights: dlpc's pipeline runs this pass
only when the weights are bound and folded, and for the C and OpenCL targets, see
passes/pipeline.py), NCHW. Which eligible
convs change is the option `where`: `all`, `none`, or `pays` (the default) for the convs
of the cost rule below; `target` (`c`, the default, `opencl` or `opencl-gpu`: the
pipeline sets it) says whose rule (`pays_opencl` for OpenCL; none pays under OpenCL's
GPU launch plans).

Cost rule (`pays`), measured on this machine (Zen 4 EPYC, 2 cores, AVX-512; the direct
conv's register-tiled template runs at ~90 % of one core's FMA peak): 64 channels or
more on both sides and an output of at least 256 tiles (32x32), as three kernels; or 32
or 16 channels on both sides and an even output, which the default schedule fuses into
one kernel per row of tiles (passes/schedule/winograd.py): resnet's 32 -> 32 on 16x16 and
its 16 -> 16 on 32x32, at any batch, on 1 and 2 threads. The figures behind the
constants below: docs/design/graph-passes.md and docs/graph-passes.md#graph-winogradwherepays.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import Float32Type, ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph as g
from dlpc.passes.graph import _util as u

WHERE = ("pays", "all", "none")
# whose cost rule `pays` applies (the pipeline says which): "opencl-gpu" is the OpenCL
# target under its GPU launch plans
TARGETS = ("c", "opencl", "opencl-gpu")

# The cost rule (`pays`) for three kernels: the direct conv runs near the FMA peak and
# scales ~1.8x on 2 threads; the Winograd kernels (a batched matmul with K = input
# channels, memory-bound transforms) scale less, so the rule is what wins on 1 AND 2
# threads:
MIN_CHANNELS = 64
"""Input and output channels at least (32 wins on 1 thread only:
docs/design/graph-passes.md#winograd-min-channels)."""
MIN_TILES = 256
"""2x2 output tiles per image at least, a 32x32 output (smaller maps win on 1 thread
only: docs/design/graph-passes.md#winograd-min-tiles)."""


def eligible(op: Operation) -> bool:
    """A conv2d Winograd F(2x2, 3x3) computes exactly (up to rounding) from a static
    weight: NCHW, groups 1, stride 1, dilation 1, an f32 OIHW 3x3 weight."""
    if not isinstance(op, g.Conv2DOp) or g.layout_of(op) != "nchw":
        return False
    x, w = op.operands[0], op.operands[1]
    if any(not isinstance(v.type, g.TensorType) or not v.type.has_static_shape() for v in (x, w)):
        return False
    if not isinstance(g.element_type_of(w), Float32Type) or g.element_type_of(x) != g.f32:
        return False
    return (
        op.groups == 1
        and op.strides == (1, 1)
        and op.dilations == (1, 1)
        and tuple(g.shape_of(w)[2:]) == (3, 3)
        and u.is_static(w)
    )


FUSED_CHANNELS = 32
"""Input and output channels of the convs the fused schedule takes (passes/schedule/
winograd.py `fused_script`, up to its FUSED_MAX_CHANNELS = 32, an even output: one
kernel per row of tiles), which beats the direct conv on 1 and 2 threads at any batch
(docs/design/graph-passes.md#winograd-fused-channels)."""


FUSED_SMALL_CHANNELS = 16
"""16 -> 16 convs with an even output, fused at any batch (the fused kernel wins on 1
and 2 threads: docs/design/graph-passes.md#winograd-fused-small-channels)."""


def pays(op: g.Conv2DOp, target: str = "c") -> bool:
    """The cost rule of `target`: for C 64+ channels on both sides and 256+ tiles per
    image (three kernels), or 32 or 16 channels on both sides and an even output (the
    fused kernel); for OpenCL `pays_opencl`; under OpenCL's GPU launch plans none.

    The GPU plans have no Winograd kernel: the fused chain is written for a CPU
    work-item (a row of tiles in 32 KB of private memory) and a GPU plan runs it on one
    work-item, while the direct conv gets a work-item per output (on an H200, resnet at
    batch 32: 1743 ms with the chains, docs/opencl.md#gpu-launch-plans)."""
    if target == "opencl-gpu":
        return False
    if target == "opencl":
        return pays_opencl(op)
    o, c = g.shape_of(op.operands[1])[:2]
    oh, ow = g.shape_of(op.results[0])[2:]
    th, tw = g.winograd_tiles(oh, ow)
    even = oh % 2 == 0 and ow % 2 == 0 and ow // 2 <= 128
    if o == c and o in (FUSED_CHANNELS, FUSED_SMALL_CHANNELS) and even:
        return True
    return min(o, c) >= MIN_CHANNELS and th * tw >= MIN_TILES


OPENCL_FUSED_MAX_FLOATS = 8192
"""The OpenCL fused kernel's V and M of one row of tiles, in floats (16 points x (input
+ output channels) x tile columns; 32 KB of a work-item's private memory): resnet's
16 -> 16 on 32x32 and 32 -> 32 on 16x16 (backends/opencl/winograd.py)."""


def pays_opencl(op: g.Conv2DOp) -> bool:
    """The OpenCL target's cost rule: the convs whose chain the OpenCL backend writes as
    one fused kernel (passes/lower/opencl_winograd.py `fused_spec`): padding 1 on every side,
    an even output height, output tile columns a multiple of 8 (a float8 of tiles), output
    channels a multiple of 8, V and M of a row of tiles within OPENCL_FUSED_MAX_FLOATS, and
    an epilogue it writes (relu, or a residual add and then relu, each the only user of
    the value before it): there the fused kernel wins. Any other eligible conv keeps the
    direct conv: as te-to-loop's three kernels the chain is slower than it on OpenCL
    (docs/design/graph-passes.md#winograd-opencl)."""
    o, c = g.shape_of(op.operands[1])[:2]
    oh, ow = g.shape_of(op.results[0])[2:]
    if tuple(op.pads) != (1, 1, 1, 1) or oh % 2 or ow % 16 or o % 8:
        return False
    if 16 * (c + o) * (ow // 2) > OPENCL_FUSED_MAX_FLOATS:
        return False
    user = u.single_user(op.results[0])
    if user is not None and user.name == "graph.add":  # a residual of y's shape, then relu
        other = [v for v in user.operands if v is not op.results[0]]
        if len(other) != 1 or g.shape_of(other[0]) != g.shape_of(op.results[0]):
            return False
        user = u.single_user(user.results[0])
    return user is not None and user.name == "graph.relu"


def rewrite(block: Block, conv: g.Conv2DOp) -> None:
    """conv2d -> filter transform, input transform, batched matmul, output transform."""
    x, w = conv.operands[0], conv.operands[1]
    bias = conv.operands[2:]
    n, c = g.shape_of(x)[:2]
    o = g.shape_of(w)[0]
    oh, ow = g.shape_of(conv.results[0])[2:]
    th, tw = g.winograd_tiles(oh, ow)
    points = g.WINOGRAD_POINTS
    filt = g.WinogradFilterTransformOp.make(w)
    per_image = g.ReshapeOp.make(filt, shape=[points, 1, o, c])  # broadcast over images
    inp = g.WinogradInputTransformOp.make(x, pads=list(conv.pads))
    flat = g.ReshapeOp.make(inp, shape=[points, n, c, th * tw])
    prod = g.MatMulOp.make(per_image, flat)
    tiles = g.ReshapeOp.make(prod, shape=[points, n, o, th, tw])
    out = g.WinogradOutputTransformOp.make(tiles, *bias, output=[oh, ow])
    out.results[0].name_hint = conv.results[0].name_hint
    block.insert_ops_before([filt, per_image, inp, flat, prod, tiles, out], conv)
    conv.results[0].replace_all_uses_with(out.results[0])
    block.erase_op(conv)


@dataclass(frozen=True)
class GraphWinograd(ModulePass):
    """graph-winograd{where=pays}: stride-1 3x3 convs with static weights as Winograd
    F(2x2, 3x3); `where=all` every eligible conv, `none` none, `pays` the cost rule's."""

    name = "graph-winograd"

    where: str = "pays"
    target: str = "c"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.where not in WHERE:
            raise DlpcError(
                f"error: graph-winograd where must be pays, all or none, got '{self.where}'"
            )
        if self.target not in TARGETS:
            raise DlpcError(
                f"error: graph-winograd target must be c, opencl or opencl-gpu, got '{self.target}'"
            )
        if self.where == "none":
            return
        for fn in u.funcs(op):
            for block in fn.body.blocks:
                for inner in list(block.ops):
                    if eligible(inner) and (self.where == "all" or pays(inner, self.target)):  # type: ignore[arg-type]
                        rewrite(block, inner)  # type: ignore[arg-type]
