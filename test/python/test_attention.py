"""Attention kernels (issue #11): softmax and layer norm as one row kernel each (exp
computed once), the transformer's head split and merge as views (no copy kernels), and
the same transformer exported from PyTorch to ONNX (both exporters) compiling to the
.dlpc example's kernels. Numerics against the numpy reference throughout."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_onnx_bench_paths import _bench as load_bench_models

import dlpc
from dlpc import api
from dlpc.backends.c import find_main
from dlpc.dialects.loop import KernelOp

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def per_call_kernels(compiled) -> list[KernelOp]:
    """The kernels a call runs (not those packing weights once per binding)."""
    return [
        k
        for k in find_main(compiled.lowered).walk()
        if isinstance(k, KernelOp) and "dlpc.prepare" not in k.attributes
    ]


def matches_reference(model, compiled, seed=0, rtol=1e-4, atol=1e-5) -> None:
    x = api.random_inputs(model, seed=seed)
    for y, r in zip(compiled(*x), api.reference(model, x)):
        np.testing.assert_allclose(y, r, rtol=rtol, atol=atol)


def kernel_source(compiled, name: str) -> str:
    source = compiled.source
    start = source.index(f"static void kernel_{name}(")
    return source[start : source.index("\n}\n", start)]


@pytest.mark.parametrize("shape", [(7, 33), (2, 3, 16), (1, 4, 16, 16), (20, 5)], ids=str)
def test_softmax_is_one_row_kernel_with_one_exp(tmp_path, shape):
    dims = ", ".join(map(str, shape))
    path = tmp_path / "softmax.dlpc"
    path.write_text(f"model s(x: f32[{dims}]) {{\n  return softmax(x * 3.0, axis=-1)\n}}\n")
    model = dlpc.load(path)
    compiled = api.compile(model)
    names = [k.sym for k in per_call_kernels(compiled)]
    softmax = [n for n in names if n.startswith("softmax")]
    assert len(softmax) == 1, names
    assert len(re.findall(r"\bexpf\(", kernel_source(compiled, softmax[0]))) == 1
    matches_reference(model, compiled)


@pytest.mark.parametrize(
    "shape,axis", [((7, 33), -1), ((2, 3, 16), -1), ((3, 4, 5), -2), ((32, 16, 64), -1)], ids=str
)
def test_layer_norm_is_one_row_kernel(tmp_path, shape, axis):
    dims = ", ".join(map(str, shape))
    norm = ", ".join(map(str, shape[axis:]))
    path = tmp_path / "ln.dlpc"
    path.write_text(
        f"model n(x: f32[{dims}]) {{\n  param s: f32[{norm}] = normal(seed=1, std=1.0)\n"
        f"  param b: f32[{norm}] = normal(seed=2, std=1.0)\n"
        f"  return layer_norm(x, s, b, axis={axis}, eps=1e-5)\n}}\n"
    )
    model = dlpc.load(path)
    compiled = api.compile(model)
    assert len(per_call_kernels(compiled)) == 1
    matches_reference(model, compiled)


@pytest.mark.parametrize("target", ["numpy", "c", "opencl"])
@pytest.mark.parametrize("batch", [1, 3])
def test_transformer_on_every_backend(target, batch):
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    model = dlpc.load(EXAMPLES / "transformer.dlpc", batch=batch)
    matches_reference(model, api.compile(model, target=target), seed=batch)


def test_transformer_kernels():
    """One kernel per projection, attention matmul, softmax and layer norm: no copies."""
    model = dlpc.load(EXAMPLES / "transformer.dlpc", batch=1)
    origins = [k.origin.data for k in per_call_kernels(api.compile(model)) if k.origin]
    assert origins == [
        "graph.linear",  # Q, K, V in one (graph-fuse), read per head through views
        "graph.fused(graph.matmul, graph.mul)",  # Q K^T / 4
        "graph.softmax",
        "graph.matmul",  # P V, written straight into the merged-heads layout
        "graph.fused(graph.linear, graph.add)",
        "graph.layer_norm",
        "graph.fused(graph.linear, graph.gelu)",
        "graph.fused(graph.linear, graph.add)",
        "graph.layer_norm",
    ]


def _kind(origin: str) -> str:
    """matmul-class kernels alike (ONNX has MatMul where the .dlpc has linear)."""
    anchor = re.sub(r"^graph\.fused\(graph\.(\w+).*", r"\1", origin).removeprefix("graph.")
    return "matmul" if anchor in ("matmul", "linear") else anchor


@pytest.mark.parametrize("exporter", ["ts", "dyn"])
def test_onnx_exports_compile_to_the_examples_kernels(tmp_path, exporter):
    pytest.importorskip("torch", reason="torch is not installed")
    pytest.importorskip("onnx", reason="onnx is not installed")
    if exporter == "dyn":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    model = dlpc.load(EXAMPLES / "transformer.dlpc", batch=4)
    x = api.random_inputs(model, seed=0)
    paths = load_bench_models().onnx_exports(model, x, tmp_path, [exporter])
    assert exporter in paths, f"the {exporter} export failed"
    exported = dlpc.load(paths[exporter])
    compiled = api.compile(exported)
    for y, r in zip(compiled(*x), api.reference(model, x)):
        np.testing.assert_allclose(y, r, rtol=1e-4, atol=1e-5)
    ours = [_kind(k.origin.data) for k in per_call_kernels(api.compile(model)) if k.origin]
    theirs = [_kind(k.origin.data) for k in per_call_kernels(compiled) if k.origin]
    assert theirs == ours
