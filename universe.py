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

PASSES = {}

TARGETS = {}

DLPC_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES, all_targets=TARGETS)
