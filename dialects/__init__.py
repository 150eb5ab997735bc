# pyright: strict
"""dlpc's dialects: `graph`, `te`, `loop`, `dlp` (one file each), and the registry of them
that `dlpc.universe` and the pipeline's parsing context read."""

import importlib
from collections.abc import Callable
from typing import TypeVar

from xdsl.ir import Dialect

from dlpc.dialects.xdsl_fixes import install_dense_literal_limit, install_linear_string_literal

# every reader of dlpc IR (dlpc, dlpc-opt, dlpc.load, xdsl-opt through dlpc.universe) imports
# this registry first: the lexer's string-literal pattern is made linear here, and dense
# literals are checked against dlpc's size limit before xDSL expands them
install_linear_string_literal()
install_dense_literal_limit()

_T = TypeVar("_T")


def lazy_factory(module: str, name: str) -> Callable[[], object]:
    """A factory returning `name` from `dlpc.<module>`, imported only when called (the
    shape of xDSL's `Universe` registries)."""

    def factory():
        return getattr(importlib.import_module(f"dlpc.{module}"), name)

    return factory


def lazy_class(module: str, name: str, base: type[_T]) -> Callable[[], type[_T]]:
    """`lazy_factory` of a class, checked to be a subclass of `base` when loaded (a pass
    or target registry entry: what xDSL's `Universe` types them as)."""
    load = lazy_factory(module, name)

    def factory() -> type[_T]:
        cls = load()
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise TypeError(f"dlpc.{module}.{name} is not a {base.__name__}")
        return cls

    return factory


def lazy_dialect(module: str, name: str) -> Callable[[], Dialect]:
    """`lazy_factory` of a `Dialect` object, checked when loaded."""
    load = lazy_factory(module, name)

    def factory() -> Dialect:
        dialect = load()
        if not isinstance(dialect, Dialect):
            raise TypeError(f"dlpc.{module}.{name} is not a Dialect")
        return dialect

    return factory


DIALECTS = {
    "graph": lazy_dialect("dialects.graph", "Graph"),
    "te": lazy_dialect("dialects.te", "Te"),
    "loop": lazy_dialect("dialects.loop", "Loop"),
    "dlp": lazy_dialect("dialects.dlp", "Dlp"),
    "comm": lazy_dialect("dialects.comm", "Comm"),
}
