"""Warm compiles (issue #11): a second dlpc.compile of an unchanged model, weights and
options reuses the whole compiled artifact (backends/runtime/artifact.py) without running
the pipeline; anything that changes the result is a miss; a damaged entry is rebuilt with
one warning line."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.backends.runtime import artifact
from dlpc.passes import pipeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def no_pipeline(monkeypatch):
    """After this fixture is requested, running the pipeline is an error."""

    def refuse(*args, **kwargs):
        raise AssertionError("the pipeline ran on a warm compile")

    def arm():
        monkeypatch.setattr(pipeline, "lower", refuse)

    return arm


def mlp(batch=1, **kwargs):
    return dlpc.load(EXAMPLES / "mlp.dlpc", batch=batch, **kwargs)


def test_warm_compile_skips_the_pipeline_and_gives_identical_outputs(cache, no_pipeline):
    model = mlp()
    x = api.random_inputs(model, seed=3)
    cold = api.compile(model)
    assert not cold.cached
    (y_cold,) = cold(*x)
    no_pipeline()
    warm = api.compile(mlp())  # loaded again: another Model object, same IR and weights
    assert warm.cached
    (y_warm,) = warm(*x)
    np.testing.assert_array_equal(y_warm, y_cold)
    assert warm.source == cold.source
    assert str(warm.lowered) == str(cold.lowered)  # the loop IR, parsed from the entry
    (ref,) = api.reference(model, x)
    np.testing.assert_allclose(y_warm, ref, rtol=1e-4, atol=1e-5)


def test_folded_weights_come_from_the_entry(cache, no_pipeline):
    """resnet folds batch norms into new weights (folded.N): the warm artifact has them."""
    model = dlpc.load(EXAMPLES / "resnet.dlpc", batch=1)
    cold = api.compile(model)
    assert any(p.startswith("folded.") for p in cold.artifact.param_names)
    x = api.random_inputs(model, seed=1)
    no_pipeline()
    warm = api.compile(dlpc.load(EXAMPLES / "resnet.dlpc", batch=1))
    assert warm.cached and warm.artifact.param_names == cold.artifact.param_names
    np.testing.assert_array_equal(warm(*x)[0], cold(*x)[0])


def test_a_changed_weight_misses(cache):
    model = mlp()
    api.compile(model)
    changed = dict(model.weights)
    changed["fc3.bias"] = changed["fc3.bias"] + 1.0
    other = api.compile(mlp(weights=changed))
    assert not other.cached
    x = api.random_inputs(model)
    np.testing.assert_allclose(other(*x)[0], api.compile(model)(*x)[0] + 1.0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "options",
    [{"opt_level": 1}, {"graph_fuse": {"horizontal": False}}, {"fold_weights": False}],
    ids=["opt-level", "pass-option", "fold-weights"],
)
def test_a_changed_option_misses(cache, options):
    api.compile(mlp())
    assert api.compile(mlp()).cached
    assert not api.compile(mlp(), **options).cached
    assert api.compile(mlp(), **options).cached  # and is then warm itself


def test_a_changed_model_misses(cache):
    api.compile(mlp())
    other = api.compile(mlp(batch=4))  # the bound batch dim is in the IR's types
    assert not other.cached
    assert other(*api.random_inputs(mlp(batch=4)))[0].shape == (4, 10)


def test_the_key_covers_file_contents_and_dlpc_itself(tmp_path, monkeypatch):
    log = tmp_path / "tune.jsonl"
    log.write_text("")
    weights = {"w": np.zeros(3, np.float32)}
    key = lambda: artifact.artifact_key("ir", weights, "c", {"tuning_log": str(log)})
    first = key()
    log.write_text('{"sig": "x"}\n')  # same name, other contents
    assert key() != first
    second = key()
    monkeypatch.setattr(artifact, "source_digest", lambda: "another dlpc")
    assert key() != second
    monkeypatch.setenv("CC", "cc -DNOTHING")
    assert artifact.artifact_key("ir", weights, "c", {"tuning_log": str(log)}) != second


def only_entry(cache: Path) -> Path:
    (path,) = cache.glob("mlp-*.model.npz")
    return path


CHILD = """
import numpy as np, dlpc
from dlpc import api
model = dlpc.load({path!r}, batch=1)
fn = api.compile(model)
(y,) = fn(*api.random_inputs(model))
(r,) = api.reference(model, api.random_inputs(model))
print("warm" if fn.cached else "cold", bool(np.allclose(y, r, rtol=1e-4, atol=1e-5)))
"""


def run_child(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DLPC_CACHE_DIR": str(cache)}
    code = CHILD.format(path=str(EXAMPLES / "mlp.dlpc"))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.parametrize("damage", ["truncate", "garbage", "hash-missing"])
def test_a_damaged_entry_is_recompiled_with_one_warning(tmp_path, damage):
    cache = tmp_path / "cache"
    first = run_child(cache)
    assert first.returncode == 0 and first.stdout.split() == ["cold", "True"], first.stderr
    assert run_child(cache).stdout.split() == ["warm", "True"]
    path = only_entry(cache)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "garbage":
        path.write_bytes(b"\0garbage" * 64)
    else:
        path.with_name(path.name + ".sha256").unlink()
    proc = run_child(cache)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["cold", "True"]
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"dlpc: warning: cached model {path} is damaged (")
    assert line.endswith("); recompiling it")
    again = run_child(cache)  # the entry was replaced by an intact one
    assert again.stdout.split() == ["warm", "True"] and again.stderr == ""


def test_a_missing_library_is_rebuilt_from_the_entry(cache, no_pipeline):
    model = mlp()
    cold = api.compile(model)
    cold.artifact.library.path.unlink()
    no_pipeline()
    warm = api.compile(mlp())
    assert warm.cached and not warm.artifact.library.cached  # rebuilt from the stored C
    x = api.random_inputs(model)
    np.testing.assert_array_equal(warm(*x)[0], cold(*x)[0])
