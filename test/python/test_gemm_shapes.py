"""GEMMs of awkward shapes (M, N, K in 1, 3, 4, 5, 17, 31, 33, 100 ...) through
dlpc.compile on target c against numpy: the default schedule's register tiles (the
blocked gemm with tiles that divide odd M and N, the dot kernel with its k tail for few
rows against a weight read along k) must give numpy's answer on every shape, with and
without leading batch dims. Each case also checks which schedule the kernel got, so a
shape that silently fell back to the unscheduled nest is caught."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dlpc
from dlpc.api import Model
from dlpc.passes.pipeline import parse_module

# (M, N, K): degenerate ones, primes, odd sizes on either side of a tile, the MLP's
SHAPES = [
    (1, 1, 1),
    (1, 3, 5),
    (3, 5, 17),
    (4, 17, 31),
    (5, 4, 33),
    (17, 31, 4),
    (31, 33, 17),
    (33, 100, 3),
    (100, 5, 100),
    (1, 256, 784),
    (4, 10, 256),
    (7, 33, 100),
    (17, 256, 100),
    (100, 100, 100),
    (37, 64, 257),
    (101, 48, 64),
    (74, 100, 64),
    (64, 101, 64),
    (40, 131, 20),
    (37, 257, 16),
    (9, 20, 2053),
]


def _run(text: str, inputs: list[np.ndarray], weights=None) -> np.ndarray:
    model = Model(parse_module(text), weights or {}, "gemm_shape", None)
    (got,) = dlpc.compile(model, target="c")(*inputs)
    return got


def _data(*shapes):
    rng = np.random.default_rng(sum(map(sum, shapes)))
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _close(got, want, k):
    # k products summed in a different order (vectors of partial sums, blocks of k)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(1, k) ** 0.5)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matmul(m, n, k):
    a, b = _data((m, k), (k, n))
    text = f"""
func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %0 = graph.matmul %a, %b : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  func.return %0 : tensor<{m}x{n}xf32>
}}"""
    _close(_run(text, [a, b]), a @ b, k)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_linear(m, n, k):
    """x @ W.T with W read along k: the dot kernel for up to 8 rows, else the gemm."""
    x, w = _data((m, k), (n, k))
    text = f"""
func.func @main(%x: tensor<{m}x{k}xf32>, %w: tensor<{n}x{k}xf32>) -> tensor<{m}x{n}xf32> {{
  %0 = graph.linear %x, %w : (tensor<{m}x{k}xf32>, tensor<{n}x{k}xf32>) -> tensor<{m}x{n}xf32>
  func.return %0 : tensor<{m}x{n}xf32>
}}"""
    _close(_run(text, [x, w]), x @ w.T, k)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_linear_with_weight(m, n, k):
    """W a param (graph.param): its panels packed once per binding of the weights, the
    packed gemm from 4 rows on (16 | N), the dot kernel below."""
    x, w = _data((m, k), (n, k))
    text = f"""
func.func @main(%x: tensor<{m}x{k}xf32>) -> tensor<{m}x{n}xf32> {{
  %w = graph.param "w" : tensor<{n}x{k}xf32>
  %0 = graph.linear %x, %w : (tensor<{m}x{k}xf32>, tensor<{n}x{k}xf32>) -> tensor<{m}x{n}xf32>
  func.return %0 : tensor<{m}x{n}xf32>
}}"""
    _close(_run(text, [x], {"w": w}), x @ w.T, k)


@pytest.mark.parametrize(
    "bt,m,n,k", [(2, 3, 5, 17), (3, 17, 31, 4), (2, 1, 33, 100), (5, 4, 16, 20), (2, 37, 32, 20)]
)
def test_batched_matmul(bt, m, n, k):
    """A batch dim on both operands (B follows the batch loop) ..."""
    a, b = _data((bt, m, k), (bt, k, n))
    ta, tb, tc = f"{bt}x{m}x{k}", f"{bt}x{k}x{n}", f"{bt}x{m}x{n}"
    text = f"""
func.func @main(%a: tensor<{ta}xf32>, %b: tensor<{tb}xf32>) -> tensor<{tc}xf32> {{
  %0 = graph.matmul %a, %b : (tensor<{ta}xf32>, tensor<{tb}xf32>) -> tensor<{tc}xf32>
  func.return %0 : tensor<{tc}xf32>
}}"""
    _close(_run(text, [a, b]), a @ b, k)


@pytest.mark.parametrize(
    "bt,m,n,k", [(2, 3, 5, 17), (3, 1, 31, 33), (2, 17, 10, 100), (4, 2, 8, 16), (3, 37, 32, 20)]
)
def test_batched_linear(bt, m, n, k):
    """... and on the input only (a linear layer over [B, T, K], the weight shared)."""
    x, w = _data((bt, m, k), (n, k))
    tx, tw, ty = f"{bt}x{m}x{k}", f"{n}x{k}", f"{bt}x{m}x{n}"
    text = f"""
func.func @main(%x: tensor<{tx}xf32>, %w: tensor<{tw}xf32>) -> tensor<{ty}xf32> {{
  %0 = graph.linear %x, %w : (tensor<{tx}xf32>, tensor<{tw}xf32>) -> tensor<{ty}xf32>
  func.return %0 : tensor<{ty}xf32>
}}"""
    _close(_run(text, [x, w]), x @ w.T, k)


def _first_schedule(text: str) -> tuple[str, bool]:
    """The best default schedule of the model's one gemm-shaped kernel, and whether it
    applies to it (else the kernel would get a fallback, or te-to-loop's plain nest)."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.passes.schedule.default import default_scripts, gemm_operands, try_script
    from dlpc.passes.schedule.nest import analyse

    m = parse_module(text)
    lower(m, "loop", PipelineOptions(opt_level=2))
    (kernel,) = [k for k in kernels(m) if (n := analyse(k)) and gemm_operands(k, n)]
    script = default_scripts(m, kernel.sym)[0]
    return script, try_script(m, script)


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("op", ["matmul", "linear"])
def test_best_schedule_applies(op, m, n, k):
    """Every shape gets its first-choice schedule: the dot kernel for a linear layer of
    up to 8 rows (or fewer than 16 columns) and k >= 16, or of up to 16 rows when k >= 256
    (w here is an argument, no weight: DOT_LONG_K), the tensorized gemm otherwise,
    with a register tile that fits the registers and keeps enough accumulators (M = 17
    -> 17 x 16, M = 37 -> 8-row tiles and a 5-row remainder, N = 101 -> 3 x 101)."""
    wshape = f"{n}x{k}" if op == "linear" else f"{k}x{n}"
    text = f"""
func.func @main(%x: tensor<{m}x{k}xf32>, %w: tensor<{wshape}xf32>) -> tensor<{m}x{n}xf32> {{
  %0 = graph.{op} %x, %w : (tensor<{m}x{k}xf32>, tensor<{wshape}xf32>) -> tensor<{m}x{n}xf32>
  func.return %0 : tensor<{m}x{n}xf32>
}}"""
    script, applies = _first_schedule(text)
    assert applies, script
    if op == "linear" and (m <= 8 or n < 16 or (m <= 16 and k >= 256)) and k >= 16:
        assert " dot" in script
        return
    assert " gemm" in script

    def factor(inner: str) -> int:
        line = next(ln for ln in script.splitlines() if ln.endswith(f", {inner}"))
        return int(line.split(" by ")[1].split()[0])

    # gemmN: M in tiles of N + a remainder tile; gemmNxM: N in tiles of M columns too
    tail = re.search(r" gemm(\d+)(?:x(\d+))?$", script, re.M)
    mr = int(tail.group(1)) if tail else factor("i0i")
    nr = int(tail.group(2)) if tail and tail.group(2) else factor("i1j")
    vectors = -(-nr // 16)
    assert mr * vectors <= 24, script  # the accumulators fit the register file
    # enough independent accumulators to keep the FMA units busy (8, or the whole of C
    # when C is smaller), and rows at least half a vector wide (N permitting): not the
    # 1 x N strips or 1-wide columns that divisors of M or N alone gave for primes
    assert mr * vectors >= min(8, m * -(-n // 16)), script
    assert nr >= min(n, 8), script


@pytest.mark.parametrize("m,n,k", [(32, 256, 784), (17, 64, 100), (64, 96, 128)])
def test_weight_gemm_with_a_small_a_is_one_k_block_read_in_place(m, n, k):
    """A weight gemm whose A fits in L2 (A_IN_PLACE_BYTES) is one k block with A read in
    place: no k split, no pack of A, so the zero init and the fused bias + relu fold into
    the accumulator tile (no init or epilogue nest is left) and match numpy."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower

    x, w, bias = _data((m, k), (n, k), (n,))
    text = f"""
func.func @main(%x: tensor<{m}x{k}xf32>) -> tensor<{m}x{n}xf32> {{
  %w = graph.param "w" : tensor<{n}x{k}xf32>
  %b = graph.param "b" : tensor<{n}xf32>
  %0 = graph.linear %x, %w, %b : (tensor<{m}x{k}xf32>, tensor<{n}x{k}xf32>, tensor<{n}xf32>) -> tensor<{m}x{n}xf32>
  %1 = graph.relu %0 : (tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  func.return %1 : tensor<{m}x{n}xf32>
}}"""
    script, applies = _first_schedule(text)
    assert applies and " gemm" in script, script
    assert "_Ap" not in script and "split" in script and "/r0 by" not in script, script
    module = parse_module(text)
    lower(module, "loop", PipelineOptions(opt_level=2, schedule=True))
    names = {lp.loop_name for kern in kernels(module) for lp in kern.loops()}
    assert not any(name and name.endswith(("_init", "_post")) for name in names), names
    _close(_run(text, [x], {"w": w, "b": bias}), np.maximum(x @ w.T + bias, 0), k)


@pytest.mark.parametrize(
    "m,n,k,parallel", [(1, 256, 784, True), (1, 16, 64, False), (16, 64, 192, False)]
)
def test_a_weight_streaming_kernel_below_the_serial_threshold_stays_parallel(m, n, k, parallel):
    """Under SERIAL_WORK a kernel is serial, unless it streams (a linear layer at batch 1
    reads each weight once: two threads read it through two caches); a 16-row linear of
    similar work, or a tiny one, stays serial. Numerics either way."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.passes.schedule.default import SERIAL_WORK

    assert m * n * k < SERIAL_WORK
    x, w = _data((m, k), (n, k))
    text = f"""
func.func @main(%x: tensor<{m}x{k}xf32>) -> tensor<{m}x{n}xf32> {{
  %w = graph.param "w" : tensor<{n}x{k}xf32>
  %0 = graph.linear %x, %w : (tensor<{m}x{k}xf32>, tensor<{n}x{k}xf32>) -> tensor<{m}x{n}xf32>
  func.return %0 : tensor<{m}x{n}xf32>
}}"""
    module = parse_module(text)
    lower(module, "loop", PipelineOptions(opt_level=2, schedule=True))
    (kernel,) = [kn for kn in kernels(module) if kn.sym == "linear_0"]
    assert any(lp.parallel is not None for lp in kernel.loops()) == parallel
    _close(_run(text, [x], {"w": w}), x @ w.T, k)


PIPE_CASES = [  # (op, batch dims, M, N, K): tiles of 2-4 rows and whole vectors
    ("linear_weight", (), 4, 256, 784),  # the mlp's first layer at batch 4
    ("linear_weight", (), 3, 256, 784),  # ... at batch 3 and 2: the packed weight's gemm,
    ("linear_weight", (), 2, 256, 784),  # no longer the dot kernel (gemm_plans)
    ("linear_weight", (), 20, 64, 4096),  # A packed, k in blocks of 512
    ("matmul", (), 4, 64, 2),  # the shortest reduction it takes
    ("matmul", (), 20, 64, 33),
    ("matmul", (2,), 4, 32, 20),  # B follows the batch loop
    ("linear", (3,), 4, 64, 20),  # B shared by the leading loop
]


@pytest.mark.parametrize("op,bt,m,n,k", PIPE_CASES)
def test_tiles_of_few_rows_carry_the_b_row(op, bt, m, n, k, monkeypatch):
    """A tile of 2-4 rows whose width is whole vectors is `gemm_pipe` (B's row carried in
    registers from one k to the next), which applies and matches numpy, as the plain
    `gemm` tile of the same schedule (PIPE_ROWS = 0) does. (The IR sums the same
    products in the same order; whether GCC contracts each multiply-add into an FMA in
    the same places is its choice, so the two are not compared bit for bit.)"""
    from dlpc import api
    from dlpc.passes.schedule import default

    monkeypatch.setattr(api, "_artifact_key", lambda *args: None)  # no warm compile: the
    # second compile below must run the pipeline again, with PIPE_ROWS changed
    lead = "".join(f"{d}x" for d in bt)
    tx, ty = f"{lead}{m}x{k}", f"{lead}{m}x{n}"
    tw = f"{lead}{k}x{n}" if op == "matmul" else f"{n}x{k}"
    graph_op = "matmul" if op == "matmul" else "linear"
    if op == "linear_weight":
        args, w_def = f"%x: tensor<{tx}xf32>", f'%w = graph.param "w" : tensor<{tw}xf32>\n'
    else:
        args, w_def = f"%x: tensor<{tx}xf32>, %w: tensor<{tw}xf32>", ""
    text = f"""
func.func @main({args}) -> tensor<{ty}xf32> {{
  {w_def}  %0 = graph.{graph_op} %x, %w : (tensor<{tx}xf32>, tensor<{tw}xf32>) -> tensor<{ty}xf32>
  func.return %0 : tensor<{ty}xf32>
}}"""
    x, w = _data((*bt, m, k), (*bt, k, n) if op == "matmul" else (n, k))
    inputs, weights = ([x], {"w": w}) if op == "linear_weight" else ([x, w], None)
    want = x @ w if op == "matmul" else x @ w.T
    script, applies = _first_schedule(text)
    assert applies and " gemm_pipe" in script, script
    carried, source = _run_source(text, inputs, weights)
    assert "_row[" in source
    _close(carried, want, k)
    monkeypatch.setattr(default, "PIPE_ROWS", 0)  # the plain gemm tile
    script, applies = _first_schedule(text)
    assert applies and " gemm_pipe" not in script and " gemm" in script, script
    plain, source = _run_source(text, inputs, weights)
    assert "_row[" not in source
    _close(plain, want, k)


def _run_source(text: str, inputs: list[np.ndarray], weights=None) -> tuple[np.ndarray, str]:
    model = Model(parse_module(text), weights or {}, "gemm_shape", None)
    compiled = dlpc.compile(model, target="c")
    (got,) = compiled(*inputs)
    return got, compiled.source
