"""The dlpc text model language (`.dlpc`): source -> AST (`parser`) -> graph IR (`irgen`).

    from dlpc.frontends.text import load_model
    model = load_model("examples/lenet.dlpc")   # dlpc.model.Model(module, weights, name, path)

Weights, per parameter: an explicit `weights` (an .npz path or a dict) first, else
`<model>.npz` beside the source file, else the parameter's initialiser in the source
(`param w: f32[8, 3, 3, 3] = normal(seed=1, std=0.1)`).  A parameter that none of these
gives, or a weight of the wrong shape, is a located error.  See docs/language.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlpc.diagnostics import DlpcError
from dlpc.frontends.text import ast
from dlpc.frontends.text.irgen import generate
from dlpc.frontends.text.parser import parse
from dlpc.model import Model

__all__ = ["load_model", "parse_model", "parse", "named_dims"]

Weights = str | Path | Mapping[str, Any] | None
Dims = Mapping[str, int] | int | str | None


def parse_model(
    text: str,
    filename: str = "<string>",
    weights: Weights = None,
    dims: Dims = None,
    batch: Dims = None,
    unbound: int | None = None,
):
    """Source text -> `Model`; weights from `weights` (if given) and the initialisers.
    A named dim (`x: f32[B, 784]`) stays symbolic (`tensor<?x784xf32, ["B"]>`: one
    program serves every value of it, docs/dynamic.md) unless `dims` or `batch` binds it
    (a dict by name, or an int for every input's named leading (batch) dim) or `unbound`
    gives the size of every named dim left unbound ("symbolic": none bound).
    A binding that names no dim of the model, or a size that is not a positive int, is an
    error."""
    for given in (dims, batch):
        if isinstance(given, str) and given != "symbolic":
            raise DlpcError(f"error: dims must be a dict, an int or 'symbolic', not '{given}'")
    if weights is not None and not isinstance(weights, str | os.PathLike | Mapping):
        what = type(weights).__name__
        raise DlpcError(f"error: weights must be an .npz path or a dict of arrays, not {what}")
    if "symbolic" in (dims, batch):
        unbound = None
    tree = parse(text, filename)
    bound = binding(tree, batch) | binding(tree, dims)
    if unbound is not None:
        bound = dict.fromkeys(named_dims(tree), unbound) | bound
    gen = generate(tree, bound)
    where = "the weights" if not isinstance(weights, str | Path) else str(weights)
    found = gen.weights(weights, where)
    path = None if filename.startswith("<") else filename
    model = Model(gen.module, found, gen.model.name, path)
    # dims left unbound, not asked to be symbolic: the first binding gets its own program
    model.specialise_first = "symbolic" not in (dims, batch) and len(bound) < len(named_dims(tree))
    return model


def named_dims(tree: ast.Model) -> list[str]:
    """The named dims of a model's inputs and parameters, in order of appearance."""
    types = [i.type for i in tree.inputs]
    types += [s.type for s in tree.body if isinstance(s, ast.Param)]
    return list(dict.fromkeys(d for t in types for d in t.dims if isinstance(d, str)))


def binding(tree: ast.Model, dims: Dims) -> dict[str, int]:
    """`dims` as name -> size: an int binds each input's named leading dim; a name that is
    no named dim of the model is a one-line error (a size that is not a positive int is
    refused by irgen, at the dim's declaration)."""
    if dims is None or isinstance(dims, str):
        return {}
    where = f"{tree.filename}: error"
    if isinstance(dims, int) and not isinstance(dims, bool):
        lead = [i.type.dims[0] for i in tree.inputs if i.type.dims]
        return dict.fromkeys((d for d in lead if isinstance(d, str)), dims)
    if not isinstance(dims, Mapping):
        raise DlpcError(f"{where}: dims must be a dict, an int or 'symbolic', not {dims!r}")
    known = named_dims(tree)
    for name in dims:
        if name not in known:
            have = ", ".join(known) or "none"
            raise DlpcError(
                f"{where}: cannot bind '{name}': the model has no such named dim "
                f"(its named dims: {have})"
            )
    return dict(dims)


def load_model(
    path: str | Path,
    weights: Weights = None,
    dims: Dims = None,
    batch: Dims = None,
    unbound: int | None = None,
):
    """Read a .dlpc file -> `Model`; weights: `weights` > `<model>.npz` beside it > initialisers;
    `dims`, `batch` and `unbound` as for `parse_model`."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DlpcError(f"error: no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DlpcError(f"error: cannot read {path}: {e}") from None
    if weights is None and path.with_suffix(".npz").exists():
        weights = path.with_suffix(".npz")
    return parse_model(text, str(path), weights, dims, batch, unbound)
