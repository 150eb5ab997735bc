"""Every pass dlpc registers, by its pipeline name (`graph-fuse`, `loop-tile`, ...), as a
lazy factory: a pass module is imported only when a pipeline uses it. `dlpc.universe`
publishes this table to xDSL; the pipeline and `dlpc.compile` look passes up here."""

from xdsl.passes import ModulePass

from dlpc.dialects import lazy_class


def _graph_pass(module: str, cls: str):
    return lazy_class(f"passes.graph.{module}", cls, ModulePass)


GRAPH_PASSES = {
    "graph-infer-shapes": _graph_pass("infer_shapes", "GraphInferShapes"),
    "graph-bind-dims": _graph_pass("bind_dims", "GraphBindDims"),
    "graph-mask-padding": _graph_pass("mask_padding", "GraphMaskPadding"),
    "graph-fold-constants": _graph_pass("fold_constants", "GraphFoldConstants"),
    "graph-simplify": _graph_pass("simplify", "GraphSimplify"),
    "graph-canonicalize": _graph_pass("canonicalize", "GraphCanonicalize"),
    "graph-substitute": _graph_pass("substitute", "GraphSubstitute"),
    "graph-layout": _graph_pass("layout", "GraphLayout"),
    "graph-conv-layout": _graph_pass("conv_layout", "GraphConvLayout"),
    "graph-fuse": _graph_pass("fuse", "GraphFuse"),
    "graph-winograd": _graph_pass("winograd", "GraphWinograd"),
    "graph-fold-qdq": _graph_pass("qdq", "GraphFoldQdq"),
}

PASSES = {**GRAPH_PASSES}

# a deliberately wrong pass that `--check-each-pass` must catch (test/passes/test-swap-operands.mlir)
PASSES["test-swap-operands"] = lazy_class("passes.check", "TestSwapOperands", ModulePass)


def _schedule_pass(module: str, cls: str):
    return lazy_class(f"passes.schedule.{module}", cls, ModulePass)


SCHEDULE_PASSES = {
    "loop-split": _schedule_pass("split", "LoopSplit"),
    "loop-reorder": _schedule_pass("reorder", "LoopReorder"),
    "loop-tile": _schedule_pass("tile", "LoopTile"),
    "loop-fuse": _schedule_pass("fuse", "LoopFuse"),
    "loop-unroll": _schedule_pass("unroll", "LoopUnroll"),
    "loop-vectorize": _schedule_pass("vectorize", "LoopVectorize"),
    "loop-parallel": _schedule_pass("parallel", "LoopParallel"),
    "loop-decompose-reduction": _schedule_pass("decompose", "LoopDecomposeReduction"),
    "loop-fold-init-epilogue": _schedule_pass("fold_init_epilogue", "LoopFoldInitEpilogue"),
    "loop-cache-read": _schedule_pass("cache", "LoopCacheRead"),
    "loop-cache-write": _schedule_pass("cache", "LoopCacheWrite"),
    "loop-compute-at": _schedule_pass("compute_at", "LoopComputeAt"),
    "loop-compute-inline": _schedule_pass("compute_at", "LoopComputeInline"),
    "loop-tensorize": _schedule_pass("tensorize", "LoopTensorize"),
    "loop-slide-rows": _schedule_pass("slide", "LoopSlideRows"),
    "loop-rfactor": _schedule_pass("rfactor", "LoopRfactor"),
    "loop-schedule": _schedule_pass("script", "LoopSchedule"),
    "loop-default-schedule": _schedule_pass("default", "LoopDefaultSchedule"),
    "loop-apply-tuning-log": _schedule_pass("default", "LoopApplyTuningLog"),
}
PASSES.update(SCHEDULE_PASSES)


def _lower_pass(module: str, cls: str):
    return lazy_class(f"passes.lower.{module}", cls, ModulePass)


PASSES["graph-to-te"] = _lower_pass("graph_to_te", "GraphToTe")
PASSES["te-inline"] = _lower_pass("te_inline", "TeInline")
PASSES["te-to-loop"] = _lower_pass("te_to_loop", "TeToLoop")
PASSES["loop-to-dlp"] = _lower_pass("loop_to_dlp", "LoopToDlp")
PASSES["dlp-reshape-aliases"] = _lower_pass("dlp_reshape_aliases", "DlpReshapeAliases")
PASSES["dlp-pack-params"] = _lower_pass("dlp_pack_params", "DlpPackParams")
PASSES["loop-views"] = _lower_pass("memory_plan", "LoopViews")
PASSES["loop-memory-plan"] = _lower_pass("memory_plan", "LoopMemoryPlan")
PASSES["loop-prepack-weights"] = _lower_pass("prepack", "LoopPrepackWeights")
PASSES["loop-view-copies"] = _lower_pass("view_copies", "LoopViewCopies")
PASSES["loop-runtime-extents"] = _lower_pass("runtime_extents", "LoopRuntimeExtents")
PASSES["loop-short-extents"] = _lower_pass("short_extents", "LoopShortExtents")
PASSES["loop-opencl-winograd"] = _lower_pass("opencl_winograd", "LoopOpenCLWinograd")

# training: reverse-mode autodiff (the losses and optimizers are builders, not passes)
PASSES["graph-autodiff"] = lazy_class("passes.train.autodiff", "GraphAutodiff", ModulePass)

# distribution: partition a training step into the program of each rank
PASSES["graph-data-parallel"] = lazy_class(
    "passes.dist.data_parallel", "GraphDataParallel", ModulePass
)
PASSES["graph-tensor-parallel"] = lazy_class(
    "passes.dist.tensor_parallel", "GraphTensorParallel", ModulePass
)
PASSES["graph-pipeline"] = lazy_class("passes.dist.pipeline", "GraphPipeline", ModulePass)
PASSES["graph-parameter-server"] = lazy_class(
    "passes.dist.parameter_server", "GraphParameterServer", ModulePass
)
PASSES["comm-check-schedule"] = lazy_class("passes.dist.pipeline", "CommCheckSchedule", ModulePass)
