"""dlpc's xDSL universe: its dialects, passes and targets, found by `xdsl-opt` and
`dlpc-opt` through the `xdsl.universe` entry point. Each table lives with what it
lists (`dlpc.dialects`, `dlpc.passes.registry`, `dlpc.backends`); this module only
publishes them."""

from xdsl.universe import Universe

from dlpc.backends import TARGETS
from dlpc.dialects import DIALECTS
from dlpc.passes.registry import PASSES

__all__ = ["DIALECTS", "DLPC_UNIVERSE", "PASSES", "TARGETS"]

DLPC_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES, all_targets=TARGETS)
