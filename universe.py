"""dlpc's xDSL universe: its dialects, passes and targets, found by `xdsl-opt` and
`dlpc-opt` through the `xdsl.universe` entry point."""

from xdsl.universe import Universe


def _graph():
    from dlpc.dialects.graph import Graph

    return Graph


def _te():
    from dlpc.dialects.te import Te

    return Te


def _loop():
    from dlpc.dialects.loop import Loop

    return Loop


DIALECTS = {"graph": _graph, "te": _te, "loop": _loop}


def _graph_pass(module: str, cls: str):
    def factory():
        import importlib

        return getattr(importlib.import_module(f"dlpc.passes.graph.{module}"), cls)

    return factory


GRAPH_PASSES = {
    "graph-infer-shapes": _graph_pass("infer_shapes", "GraphInferShapes"),
    "graph-fold-constants": _graph_pass("fold_constants", "GraphFoldConstants"),
    "graph-simplify": _graph_pass("simplify", "GraphSimplify"),
    "graph-substitute": _graph_pass("substitute", "GraphSubstitute"),
    "graph-layout": _graph_pass("layout", "GraphLayout"),
    "graph-fuse": _graph_pass("fuse", "GraphFuse"),
}

PASSES = {**GRAPH_PASSES}

TARGETS = {}

DLPC_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES, all_targets=TARGETS)
