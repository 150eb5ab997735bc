"""dlpc's xDSL universe: its dialects, passes and targets, found by `xdsl-opt` and
`dlpc-opt` through the `xdsl.universe` entry point."""

from xdsl.universe import Universe


def _graph():
    from dlpc.dialects.graph import Graph

    return Graph


DIALECTS = {"graph": _graph}

PASSES = {}

TARGETS = {}

DLPC_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES, all_targets=TARGETS)
