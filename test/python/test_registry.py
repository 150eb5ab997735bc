"""The pass registry (passes/registry.py): every entry loads the pass its name says, each
pass has the lit test named after it, and a bad entry is reported by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.passes import ModulePass

from dlpc.dialects import lazy_class
from dlpc.passes.registry import PASSES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_entry_loads_the_pass_it_names(name):
    cls = PASSES[name]()
    assert isinstance(cls, type) and issubclass(cls, ModulePass)
    assert cls.name == name


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_has_its_lit_tests(name):
    """A pass's lit test is test/passes/<name>.mlir, its negative test <name>-invalid.mlir."""
    assert (ROOT / "test" / "passes" / f"{name}.mlir").exists(), name
    assert (ROOT / "test" / "passes" / f"{name}-invalid.mlir").exists(), name


def test_an_entry_that_is_not_a_pass_is_named():
    bad = lazy_class("passes.registry", "PASSES", ModulePass)
    with pytest.raises(TypeError, match=r"dlpc\.passes\.registry\.PASSES is not a ModulePass"):
        bad()
