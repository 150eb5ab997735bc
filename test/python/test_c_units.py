"""A large model's C is compiled as several translation units in parallel
(`backends.c.emit_c_units`, `cbuild.build(units=...)`): the same program as the one
source `dlpc --emit c` prints, its kernels split over units with hidden symbols, and any
failure of the parallel build falls back to the one unit."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.backends import c as c_backend
from dlpc.backends.runtime import cbuild

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HIDDEN_PROTO = re.escape('__attribute__((visibility("hidden")))')
KERNEL_DEF = re.compile(r"^__attribute__\(\(noinline\)\) (?:static )?\S.*? (kernel_\w+)\(", re.M)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path / "cache"))


def _lowered(name: str, batch: int = 1):
    model = dlpc.load(os.path.join(ROOT, "examples", f"{name}.dlpc"), batch=batch)
    return model, dlpc.compile(model, target="c")


def test_units_hold_the_same_kernels_once_each():
    _, compiled = _lowered("resnet")
    source, units = c_backend.emit_c_units(compiled.lowered, 3)
    assert source == compiled.source  # `dlpc --emit c` and the cache key are unchanged
    main, kernels = units[0], units[1:]
    assert len(kernels) == 3
    defined = KERNEL_DEF.findall(source)
    assert defined and len(set(defined)) == len(defined)
    in_units = [k for unit in kernels for k in KERNEL_DEF.findall(unit)]
    assert sorted(in_units) == sorted(defined)  # every kernel in exactly one unit
    for name in defined:  # main: the prototype, no body
        assert not re.search(rf" {name}\([^;]*\)\n\{{", main)
        assert re.search(HIDDEN_PROTO + rf" \w+ {name}\([^;{{]*\);", main)
    for unit in kernels:  # the failed allocation's record is defined once, in main
        assert "extern size_t dlpc_oom_count" in unit
        assert "int dlpc_main(void **args)" not in unit
    assert "\nsize_t dlpc_oom_count, dlpc_oom_size;" in main


@pytest.mark.parametrize("name, batch", [("resnet", 2), ("lenet", 4), ("transformer", 1)])
def test_a_parallel_build_matches_the_reference(monkeypatch, name, batch):
    """Built from units (the size threshold lowered for the small models), the library
    computes what the reference does, and its kernels are not exported."""
    monkeypatch.setattr(cbuild, "PARALLEL_SOURCE_BYTES", 0)
    calls = []
    real = cbuild._build_units
    monkeypatch.setattr(cbuild, "_build_units", lambda *a: calls.append(len(a[2])) or real(*a))
    model, compiled = _lowered(name, batch)
    assert calls and calls[0] == 4  # main + 3 kernel units, built in parallel
    xs = api.random_inputs(model)
    for got, want in zip(compiled(*xs), api.reference(model, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    library = compiled.artifact.library
    assert hasattr(library.handle, "dlpc_main")
    kernel = KERNEL_DEF.findall(compiled.source)[0]
    assert not hasattr(library.handle, kernel)  # hidden: not a symbol of the library


def test_a_failing_unit_falls_back_to_the_one_source(monkeypatch, capsys):
    """A unit that does not compile (here: made so on purpose) costs the parallel build,
    not the compile: the one source is built instead, silently and correctly."""
    monkeypatch.setattr(cbuild, "PARALLEL_SOURCE_BYTES", 0)
    real = c_backend.emit_c_units

    def broken(module, count=3, min_bytes=0):
        source, units = real(module, count, min_bytes)
        return source, [units[0], units[1] + "\n#error a broken unit\n", *units[2:]]

    monkeypatch.setattr(c_backend, "emit_c_units", broken)
    tried = []
    real_build = cbuild._build_units
    monkeypatch.setattr(cbuild, "_build_units", lambda *a: tried.append(real_build(*a)) or False)
    model, compiled = _lowered("lenet", 2)
    assert tried == [False]  # the parallel build was tried and failed
    xs = api.random_inputs(model)
    np.testing.assert_allclose(compiled(*xs)[0], api.reference(model, xs)[0], rtol=1e-4, atol=1e-4)
    assert capsys.readouterr().err == ""
