"""Resident pre-packed weights (issue #11, passes/lower/prepack.py, `loop-prepack-weights`):
every example matches the reference on C with and without folded weights; the packing of
weights happens once per binding (`dlpc_prepare`), never inside a call; new weights
(`params=`, `bind_params`) give new results and leave the resident ones alone; a one-off
call of the library packs for itself; warm compiles keep it."""

import ctypes
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.backends.c import find_main, is_prepare
from dlpc.backends.runtime.evaluate import run_loop_c
from dlpc.backends.runtime.profile import kernel_costs, profile
from dlpc.dialects.loop import KernelOp
from dlpc.model import Model
from dlpc.passes.lower.prepack import PACKED

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = ("mlp", "lenet", "mobilenet", "resnet", "transformer")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def prepare_kernels(compiled) -> list[KernelOp]:
    main = find_main(compiled.lowered)
    return [op for op in main.walk() if isinstance(op, KernelOp) and is_prepare(op)]


def assert_matches(compiled, model, seed=5, params=None):
    x = api.random_inputs(model, seed=seed)
    outputs = compiled(*x) if params is None else compiled.artifact(*x, params=params)
    if params is not None:
        model = Model(model.module, params, model.name, model.path)
    for y, r in zip(outputs, api.reference(model, x)):
        np.testing.assert_allclose(y, r, rtol=1e-4, atol=1e-5)


def main_body(source: str) -> str:
    start = source.index("int dlpc_main(void **args)\n")
    return source[start : source.index("\n}\n", start)]


@pytest.mark.parametrize("fold", [True, False], ids=["folded", "no-fold"])
@pytest.mark.parametrize("name", NAMES)
def test_every_example_matches_with_prepacked_weights(name, fold):
    model = dlpc.load(EXAMPLES / f"{name}.dlpc", batch=32)
    compiled = api.compile(model, fold_weights=fold)
    assert_matches(compiled, model)
    packs = prepare_kernels(compiled)
    if packs:  # the call reads the packed block; dlpc_prepare fills it
        assert "int dlpc_prepare(void **args)" in compiled.source
        body = main_body(compiled.source)
        for k in packs:
            assert f"kernel_{k.sym}(" not in body


def packed_weights(k: KernelOp) -> set[str]:
    """The @main arguments a prepare kernel reads (the weights it packs)."""
    main = k.parent_op()
    assert main is not None
    args = set(main.regions[0].block.args) if main.regions else set()
    return {
        op.memref.name_hint for op in k.walk() if op.name == "memref.load" and op.memref in args
    }


def test_gemm_weights_are_packed_once_not_per_call():
    model = dlpc.load(EXAMPLES / "mlp.dlpc", batch=32)
    compiled = api.compile(model)
    packs = prepare_kernels(compiled)
    # the B panels of the 784 -> 256 and 256 -> 256 layers are resident (the 256 -> 10
    # layer's dot kernel reads its weight in place, unpacked)
    weights = set().union(*(packed_weights(k) for k in packs))
    assert {"fc1.weight", "fc2.weight"} <= weights
    assert find_main(compiled.lowered).attributes["dlpc.packed_bytes"]
    # the profile of a call has no packing kernel, and the call's kernels read no packed
    # weight: only the packed block
    rows, _ = profile(compiled.artifact, compiled.lowered, api.random_inputs(model), repeat=2)
    names = [r.name for r in rows]
    assert names == [c.name for c in kernel_costs(compiled.lowered)]
    assert names and not any(n.endswith("_prepack") for n in names)
    body = main_body(compiled.source)
    for k in packs:
        assert f"kernel_{k.sym}(" not in body
    calls = [ln for ln in body.splitlines() if ln.strip().startswith("kernel_")]
    for w in weights:
        assert not any(f"v_{w.replace('.', '_')}" in ln for ln in calls)


def test_packing_runs_once_per_binding(monkeypatch):
    model = dlpc.load(EXAMPLES / "mlp.dlpc", batch=32)
    compiled = api.compile(model)
    fn = compiled.artifact
    library = fn.library
    counted = []
    real = library.prepare_entry

    def counting(argv):
        counted.append(1)
        return real(argv)

    prototype = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
    monkeypatch.setattr(library, "prepare_entry", prototype(counting))
    x = api.random_inputs(model)
    for _ in range(3):
        fn(*x)
    assert counted == []  # calls with the bound weights: no packing
    fn.bind_params(model.weights)
    assert counted == [1]  # a new binding: packed once


def test_new_params_give_new_results_and_keep_the_bound_ones():
    model = dlpc.load(EXAMPLES / "mlp.dlpc", batch=32)
    compiled = api.compile(model, fold_weights=False)
    assert prepare_kernels(compiled)
    rng = np.random.default_rng(3)
    new = {k: rng.standard_normal(v.shape).astype(v.dtype) * 0.1 for k, v in model.weights.items()}
    x = api.random_inputs(model, seed=2)
    old_y = compiled(*x)[0]
    # a call with params= packs the weights it is given ...
    new_y = compiled.artifact(*x, params=new)[0]
    assert not np.allclose(new_y, old_y)
    assert_matches(compiled, model, seed=2, params=new)
    # ... in a block of its own: the bound weights' packed block is as it was
    np.testing.assert_array_equal(compiled(*x)[0], old_y)
    # binding new weights packs them (resident from then on)
    compiled.artifact.bind_params(new)
    np.testing.assert_array_equal(compiled(*x)[0], new_y)


def test_library_call_on_mains_arguments_packs_for_the_call():
    """The per-pass checker and `Library.call` pass @main's arguments alone: the library
    packs into a block of its own first (the IR's meaning: @main packs)."""
    model = dlpc.load(EXAMPLES / "transformer.dlpc", batch=4)
    compiled = api.compile(model)
    assert PACKED in str(compiled.lowered)
    x = api.random_inputs(model, seed=1)
    expected = compiled(*x)
    fn = compiled.artifact
    arrays = fn.arguments(x, None) + fn.empty_outputs()
    run_loop_c(compiled.lowered, arrays)
    for y, e in zip(arrays[len(arrays) - fn.num_outputs :], expected):
        np.testing.assert_array_equal(y, e)


def test_warm_compile_keeps_prepacked_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))  # a cold compile first
    model = dlpc.load(EXAMPLES / "mlp.dlpc", batch=32)
    cold = api.compile(model)
    warm = api.compile(dlpc.load(EXAMPLES / "mlp.dlpc", batch=32))
    assert warm.cached and not cold.cached
    assert "int dlpc_prepare(void **args)" in warm.source
    x = api.random_inputs(model, seed=4)
    np.testing.assert_array_equal(warm(*x)[0], cold(*x)[0])
    assert_matches(warm, model, seed=4)


def test_training_step_with_prepacked_weights_stays_correct():
    """A training step's params change every step: a prepared vector without the packed
    block's slot (dlpc.train's) is packed per call, from the weights it points to."""
    model = dlpc.load(EXAMPLES / "mlp.dlpc", batch=32)
    trainer = dlpc.train(model, loss="cross_entropy", optimizer="sgd", batch_size=32)
    reference = dlpc.train(
        model, loss="cross_entropy", optimizer="sgd", batch_size=32, target="numpy"
    )
    assert trainer._resident._native.library.prepare_entry is not None  # the step packs
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((32, 784)).astype(np.float32)
        y = rng.integers(0, 10, 32)
        np.testing.assert_allclose(trainer.step(x, y), reference.step(x, y), rtol=1e-4)
    for name, w in reference.weights.items():
        np.testing.assert_allclose(trainer.weights[name], w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "name, origins",
    [
        ("transformer", {"graph.concat"}),
        ("resnet", {"graph.add", "graph.rsqrt", "graph.mul", "graph.sub"}),
    ],
)
def test_weight_only_kernels_run_once_without_folding(name, origins):
    """--no-fold-weights keeps the arithmetic over weights in the model (Q/K/V weight
    concats, batch-norm folding): it runs in dlpc_prepare, once per binding, not per
    call; a gemm packing such a kernel's output is prepacked too."""
    model = dlpc.load(EXAMPLES / f"{name}.dlpc", batch=4)
    compiled = api.compile(model, fold_weights=False)
    assert_matches(compiled, model)
    prepared = {k.origin.data for k in prepare_kernels(compiled) if k.origin is not None}
    assert origins <= prepared
    body = main_body(compiled.source)
    for k in prepare_kernels(compiled):
        assert f"kernel_{k.sym}(" not in body
    if name == "transformer":  # the fused Q/K/V projection's B panels: from the concat
        packs = [k for k in prepare_kernels(compiled) if k.sym.endswith("_prepack")]
        sources = {
            op.memref.name_hint for k in packs for op in k.walk() if op.name == "memref.load"
        }
        assert "concat" in sources
    # new weights: a params= call computes them again, from the weights it is given
    rng = np.random.default_rng(7)
    new = {}
    for k, v in model.weights.items():
        new[k] = v * rng.uniform(0.5, 1.5, v.shape).astype(v.dtype)
    assert_matches(compiled, model, params=new)
