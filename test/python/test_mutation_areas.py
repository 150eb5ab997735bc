"""bench/mutation.py's areas cover the tree (issue 35: "no area without a row"): every
module of the package that holds code is mutated by some area, and every glob of an area
names at least one file, so a renamed module cannot drop out of the campaign unseen."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_PACKAGE = ("test/", "bench/", "examples/", "docs/", "build/", "lit.cfg.py")


def _areas():
    spec = importlib.util.spec_from_file_location(
        "dlpc_bench_mutation", ROOT / "bench" / "mutation.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.AREAS


def _holds_code(path: Path) -> bool:
    """A module with a function or class (a bare __init__ of imports has nothing to mutate)."""
    tree = ast.parse(path.read_text())
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body
    )


def test_every_module_with_code_is_in_an_area():
    covered = {p for area in _areas().values() for g in area.modules for p in ROOT.glob(g)}
    missing = [
        str(p.relative_to(ROOT))
        for p in sorted(ROOT.glob("**/*.py"))
        if not str(p.relative_to(ROOT)).startswith(NOT_PACKAGE)
        and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
        and p not in covered
        and _holds_code(p)
    ]
    assert missing == []


def test_every_glob_of_an_area_names_a_file():
    empty = [
        (name, g) for name, area in _areas().items() for g in area.modules if not list(ROOT.glob(g))
    ]
    assert empty == []
