"""dlpc's dialects: `graph`, `te`, `loop`, `dlp` (one file each), and the registry of them
that `dlpc.universe` and the pipeline's parsing context read."""

import importlib
from collections.abc import Callable

from dlpc.dialects.xdsl_fixes import install_dense_literal_limit, install_linear_string_literal

# every reader of dlpc IR (dlpc, dlpc-opt, dlpc.load, xdsl-opt through dlpc.universe) imports
# this registry first: the lexer's string-literal pattern is made linear here, and dense
# literals are checked against dlpc's size limit before xDSL expands them
install_linear_string_literal()
install_dense_literal_limit()


def lazy_factory(module: str, name: str) -> Callable[[], object]:
    """A factory returning `name` from `dlpc.<module>`, imported only when called (the
    shape of xDSL's `Universe` registries)."""

    def factory():
        return getattr(importlib.import_module(f"dlpc.{module}"), name)

    return factory


DIALECTS = {
    "graph": lazy_factory("dialects.graph", "Graph"),
    "te": lazy_factory("dialects.te", "Te"),
    "loop": lazy_factory("dialects.loop", "Loop"),
    "dlp": lazy_factory("dialects.dlp", "Dlp"),
}
