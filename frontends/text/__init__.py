"""The dlpc text model language (`.dlpc`): source -> AST (`parser`) -> graph IR (`irgen`).

    from dlpc.frontends.text import load_model
    model = load_model("examples/lenet.dlpc")   # dlpc.model.Model(module, weights, name, path)

Weights, per parameter: an explicit `weights` (an .npz path or a dict) first, else
`<model>.npz` beside the source file, else the parameter's initialiser in the source
(`param w: f32[8, 3, 3, 3] = normal(seed=1, std=0.1)`).  A parameter that none of these
gives, or a weight of the wrong shape, is a located error.  See docs/language.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlpc.diagnostics import DlpcError
from dlpc.frontends.text.irgen import generate
from dlpc.frontends.text.parser import parse
from dlpc.model import Model

__all__ = ["load_model", "parse_model", "parse"]

Weights = str | Path | Mapping[str, Any] | None
Dims = Mapping[str, int] | int | str | None


def parse_model(text: str, filename: str = "<string>", weights: Weights = None, dims: Dims = None):
    """Source text -> `Model`; weights from `weights` (if given) and the initialisers.
    `dims` binds named dims (`x: f32[B, 784]`): a dict by name, or an int for every input's
    named leading (batch) dim; unbound named dims are 1. `dims="symbolic"` keeps every
    named dim symbolic (`tensor<?x784xf32, ["B"]>`, docs/dynamic.md)."""
    if isinstance(dims, str) and dims != "symbolic":
        raise DlpcError(f"error: dims must be a dict, an int or 'symbolic', not '{dims}'")
    tree = parse(text, filename)
    if isinstance(dims, int):
        dims = {
            i.type.dims[0]: dims
            for i in tree.inputs
            if i.type.dims and isinstance(i.type.dims[0], str)
        }
    gen = generate(tree, dims)
    where = "the weights" if not isinstance(weights, str | Path) else str(weights)
    bound = gen.weights(weights, where)
    path = None if filename.startswith("<") else filename
    return Model(gen.module, bound, gen.model.name, path)


def load_model(path: str | Path, weights: Weights = None, dims: Dims = None):
    """Read a .dlpc file -> `Model`; weights: `weights` > `<model>.npz` beside it > initialisers;
    `dims` as for `parse_model`."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DlpcError(f"error: no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DlpcError(f"error: cannot read {path}: {e}") from None
    if weights is None and path.with_suffix(".npz").exists():
        weights = path.with_suffix(".npz")
    return parse_model(text, str(path), weights, dims)
