"""Tests of the compiled functions' runtime (issue 35, sixth round, area backend-runtime of
bench/mutation.py), written from a branch-coverage run of the area's tests before the
round's samples: the DLP target description's ranges at both ends of every field (in
range at the bound, refused one step past it, each one line naming the field)."""

from __future__ import annotations

import math

import pytest

from dlpc.diagnostics import DlpcError
from dlpc.targets import dlp as targets

INTEGER_KEYS = [k for k, d in vars(targets.DlpTarget()).items() if type(d) is int]
FLOAT_KEYS = [k for k, d in vars(targets.DlpTarget()).items() if type(d) is float]


def _fields(key, value) -> dict:
    """A description with `key` set (clusters alone at 64 keeps 64 x 4 cores)."""
    data = {key: value}
    if key == "cores_per_cluster":
        data["clusters"] = 1
    return data


def test_every_number_of_a_description_has_a_range():
    assert sorted(INTEGER_KEYS + FLOAT_KEYS + ["intrinsics"]) == sorted(targets.RANGES)
    assert len(INTEGER_KEYS) == 10 and len(FLOAT_KEYS) == 4


@pytest.mark.parametrize("key", INTEGER_KEYS)
def test_an_integer_field_is_taken_at_both_bounds_and_refused_past_them(key):
    low, high = targets.RANGES[key]
    for v in (low, high):
        assert getattr(targets.DlpTarget.from_dict(_fields(key, v)), key) == v
    for v in (low - 1, high + 1, True, 2.0, "8"):
        with pytest.raises(DlpcError) as e:
            targets.DlpTarget.from_dict(_fields(key, v), origin="t.toml")
        assert str(e.value) == (
            f"t.toml: error: '{key}' must be a positive integer at most {high}, got {v!r}"
        )


@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_a_rate_is_taken_at_both_bounds_and_refused_past_them(key):
    low, high = targets.RANGES[key]
    for v in (low, high, int(high)):
        got = getattr(targets.DlpTarget.from_dict({key: v}), key)
        assert got == v and type(got) is float
    for v in (low * 0.999, high * 1.001, math.inf, math.nan, -1.0, False, "1.0"):
        with pytest.raises(DlpcError) as e:
            targets.DlpTarget.from_dict({key: v}, origin="t.toml")
        assert str(e.value) == (
            f"t.toml: error: '{key}' must be a finite number in [{low:g}, {high:g}], got {v!r}"
        )


def test_an_intrinsic_throughput_is_taken_at_both_bounds_and_refused_past_them():
    low, high = targets.RANGES["intrinsics"]
    for v in (low, high):
        t = targets.DlpTarget.from_dict({"intrinsics": {"exp": v}})
        assert t.throughput("exp") == v and t.throughput("matmul") == 256
    for v in (low / 2, high * 2, math.inf):
        with pytest.raises(DlpcError) as e:
            targets.DlpTarget.from_dict({"intrinsics": {"exp": v}}, origin="t.toml")
        assert str(e.value) == (
            f"t.toml: error: intrinsic 'exp' must be a finite number in "
            f"[{low:g}, {high:g}], got {v!r}"
        )


def test_a_direct_description_is_checked_as_a_loaded_one():
    with pytest.raises(DlpcError, match=r"'vector_width' must be a positive integer at most 65536"):
        targets.DlpTarget(vector_width=65537)
    with pytest.raises(DlpcError, match=r"'clock_ghz' must be a finite number in \[0.001, 1000\]"):
        targets.DlpTarget(clock_ghz=1000.5)
    with pytest.raises(DlpcError) as e:
        targets.DlpTarget(clusters=17, cores_per_cluster=16)
    assert str(e.value) == (
        "target description: error: 272 cores (clusters x cores_per_cluster) > 256"
    )
    assert targets.DlpTarget(clusters=16, cores_per_cluster=16).cores == 256
    with pytest.raises(DlpcError, match="'dma_align' must be a power of two, got 96"):
        targets.DlpTarget(dma_align=96)
