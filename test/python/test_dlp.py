"""The DLP target: description loading, loop-to-dlp numerics on the simulator (every
example, every lowering option), the simulator's run-time checks and its report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.backends.dlp_c import emit_dlp_c, lower_to_dlp
from dlpc.backends.runtime.dlp_sim import compile_dlp, format_report
from dlpc.diagnostics import DlpcError
from dlpc.passes import pipeline
from dlpc.targets.dlp import DlpTarget, resolve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["mlp", "lenet", "resnet", "transformer", "mobilenet"]
TESTS = ROOT / "test"


def loop_module(name: str):
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=1)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions())
    return model, module


def parse(path: Path):
    return pipeline.parse_module(path.read_text(), str(path))


def close(out, ref):
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


# ------------------------------------------------------------------ descriptions


def test_default_description_is_textbook_dlp():
    d = DlpTarget()
    assert (d.clusters, d.cores_per_cluster, d.cores) == (4, 4, 16)
    assert d.capacity("nram") == 512 * 1024 and d.has_intrinsic("matmul")


def test_description_from_toml_and_json(tmp_path):
    assert resolve("tiny").nram_bytes == 4096
    assert resolve(str(ROOT / "targets" / "dlp.toml")) == DlpTarget(name="dlp")
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"name": "j", "clusters": 2, "intrinsics": {"add": 8}}))
    d = resolve(str(p))
    assert d.clusters == 2 and d.throughput("add") == 8 and d.throughput("mul") == 64


@pytest.mark.parametrize(
    "text, message",
    [
        ("clusterz = 2", "unknown target field 'clusterz'"),
        ("nram_bytes = -4", "'nram_bytes' must be a positive integer"),
        ("dma_align = 48", "'dma_align' must be a power of two"),
        ("name = [", "cannot read target description"),
    ],
)
def test_bad_description(tmp_path, text, message):
    p = tmp_path / "bad.toml"
    p.write_text(text + "\n")
    with pytest.raises(DlpcError, match=message):
        resolve(str(p))


# ------------------------------------------------------------------ numerics


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_matches_reference_on_simulator(name):
    model, module = loop_module(name)
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    f = compile_dlp(module, name=name)
    (out,) = f(*inputs, params=weights)
    (ref,) = dlpc.api.reference(model, inputs)
    close(out, ref)
    # one report per dlp kernel; each loop kernel is one, or a member of a fused chain
    dlp_kernels = [k for k in lower_to_dlp(module).walk() if k.name == "dlp.kernel"]
    assert [r.name for r in f.report] == [k.sym for k in dlp_kernels]
    covered = [
        m
        for k in dlp_kernels
        for m in (
            k.attributes["dlpc.fused"].data.split(",") if "dlpc.fused" in k.attributes else [k.sym]
        )
    ]
    assert covered == [k.sym for k in module.walk() if k.name == "loop.kernel"]
    assert all(r.seconds > 0 for r in f.report)


@pytest.mark.parametrize(
    "options",
    [
        dict(double_buffer=False),
        dict(multicore=False),
        dict(intrinsics=False),
        dict(double_buffer=False, multicore=False, intrinsics=False),
    ],
)
def test_lowering_options_keep_numerics(options):
    model, module = loop_module("mlp")
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    (out,) = compile_dlp(module, name="mlp", **options)(*inputs, params=weights)
    close(out, dlpc.api.reference(model, inputs)[0])


@pytest.mark.parametrize(
    "test", ["loop-to-dlp.mlir", "loop-to-dlp-double-buffer.mlir", "loop-to-dlp-conv.mlir"]
)
def test_lit_inputs_on_tiny_target(test):
    """The lit inputs, lowered for `tiny` (tiles, ping-pong), against numpy loops."""
    module = parse(TESTS / "passes" / test)
    rng = np.random.default_rng(1)
    from xdsl.dialects import func

    for fn in [op for op in module.body.block.ops if isinstance(op, func.FuncOp)]:
        single = module.clone()
        for other in [op for op in single.body.block.ops if op.sym_name.data != fn.sym_name.data]:
            other.detach()
        f = compile_dlp(single, "tiny", name=fn.sym_name.data)
        args = [
            rng.standard_normal(tuple(a.type.get_shape())).astype(np.float32) for a in fn.args[:-1]
        ]
        (out,) = f(*args[: f.num_inputs], params=args[f.num_inputs :])
        close(out, _numpy_of(fn.sym_name.data, args))


# ------------------------------------------------------------------ pooling and copies

POOLS = {
    "max_pad_stride_ceil": "max_pool2d(x, kernel=3, strides=2, pads=[1, 1, 1, 1], ceil_mode=true)",
    "max_plain": "max_pool2d(x, kernel=2, strides=2)",
    "avg_exclude_pad_ceil": "avg_pool2d(x, kernel=3, strides=2, pads=[1, 1, 1, 1], ceil_mode=true, count_include_pad=false)",
    "avg_include_pad": "avg_pool2d(x, kernel=3, strides=2, pads=[1, 0, 1, 0], count_include_pad=true)",
    "avg_include_pad_ceil": "avg_pool2d(x, kernel=2, strides=2, pads=[1, 1, 0, 0], ceil_mode=true, count_include_pad=true)",
    "avg_plain": "avg_pool2d(x, kernel=2, strides=2)",
}
COPIES = {  # expression, whether it is contiguous enough for direct GDRAM2GDRAM copies
    "reshape": ("reshape(x, shape=[1, 6, 81])", True),
    "concat": ("concat(x, x, axis=1)", True),
    "slice_rows": ("slice(x, starts=[1, 2], ends=[3, 7], axes=[1, 2])", True),
    "slice_strided": ("slice(x, starts=[0], ends=[9], axes=[3], steps=[2])", False),
    "transpose": ("transpose(x, perm=[0, 1, 3, 2])", False),
}


def _run_small(tmp_path, expr: str, desc=None, args: str = "x: f32[1, 6, 9, 9]"):
    path = tmp_path / "m.dlpc"
    path.write_text(f"model m({args}) {{\n  return {expr}\n}}\n")
    model = dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(schedule=False))
    inputs = dlpc.api.random_inputs(model)
    f = compile_dlp(module, desc, name="m")
    (out,) = f(*inputs, params={})
    close(out, dlpc.api.reference(model, inputs)[0])
    (rep,) = f.report
    return rep, emit_dlp_c(module.clone(), resolve(desc))


@pytest.mark.parametrize("desc", [None, "tiny"])
@pytest.mark.parametrize("pool", POOLS)
def test_pooling_selects_dlp_pool(tmp_path, pool, desc):
    """Pooling (padding, stride, ceil_mode, count_include_pad) runs as `dlp.pool` (the
    window work counted as intrinsic cycles) and matches the reference."""
    rep, c = _run_small(tmp_path, POOLS[pool], desc)
    assert rep.intrinsic_cycles > 0
    assert ("__bang_maxpool(" if pool.startswith("max") else "__bang_sumpool(") in c


@pytest.mark.parametrize("copy", COPIES)
def test_copies_go_gdram_to_gdram_when_contiguous(tmp_path, copy):
    expr, direct = COPIES[copy]
    rep, c = _run_small(tmp_path, expr)
    if direct:
        assert set(rep.bytes) == {"gdram->gdram"} and rep.level_bytes()["nram"] == 0
        assert rep.level_bytes()["gdram"] == 2 * rep.bytes["gdram->gdram"]  # read and written
        assert re.search(r"__memcpy_async\([^;]*GDRAM2GDRAM[,)]", c)  # (or strided)
    else:
        assert "gdram->gdram" not in rep.bytes and rep.level_bytes()["nram"] > 0


def test_gather_and_bool_buffers_stay_staged(tmp_path):
    """A gather's source offsets depend on data and a select reads i1 (one-byte) buffers:
    neither is a direct copy, both run staged and match the reference."""
    rep, _ = _run_small(tmp_path, "gather(x, i, axis=0)", args="x: f32[10, 8], i: i64[3]")
    assert "gdram->gdram" not in rep.bytes
    rep, _ = _run_small(tmp_path, "where(c, x, y)", args="c: i1[4, 8], x: f32[4, 8], y: f32[4, 8]")
    assert rep.bytes["gdram->nram"] == 4 * 8 * (1 + 4 + 4)


def _numpy_of(name, args):
    if name == "bias_relu":
        return np.maximum(args[0] + args[1], 0)
    if name == "linear":
        return args[0] @ args[1].T + args[2]
    if name == "transpose":
        return args[0].T
    if name == "scale":
        return args[0] * 3
    if name == "exp_sum":
        return np.exp(args[0] - args[1][:, None]).sum(axis=1)
    if name == "conv":
        x, w, b = args
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 4, 8, 8), np.float32)
        for kh in range(3):
            for kw in range(3):
                out += np.einsum(
                    "nchw,oc->nohw", xp[:, :, kh : kh + 8, kw : kw + 8], w[:, :, kh, kw]
                )
        return np.maximum(out + b[None, :, None, None], 0)
    if name == "depthwise":
        x, w = args
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        return sum(
            xp[:, :, kh : kh + 4, kw : kw + 4] * w[None, :, 0, kh, kw, None, None]
            for kh in range(3)
            for kw in range(3)
        )
    raise AssertionError(name)


MATMUL = """
func.func @main(%a: memref<64x24xf32>, %b: memref<24x16xf32>, %out0: memref<64x16xf32>) attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "matmul_0" attributes {origin = "graph.matmul"} {
    loop.for %i0 = 0 to 64 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r0 = 0 to 24 step 1 {name = "r0", reduction} {
          %x = memref.load %a[%i0, %r0] : memref<64x24xf32>
          %y = memref.load %b[%r0, %i1] : memref<24x16xf32>
          %p = arith.mulf %x, %y : f32
          %o = memref.load %acc[] : memref<f32>
          %q = arith.addf %o, %p : f32
          memref.store %q, %acc[] : memref<f32>
        }
        %s = memref.load %acc[] : memref<f32>
        %h = arith.constant 5.000000e-01 : f32
        %t = arith.subf %s, %h : f32
        memref.store %t, %out0[%i0, %i1] : memref<64x16xf32>
      }
    }
  }
  func.return
}
"""


@pytest.mark.parametrize("desc", [None, "tiny"])
def test_matmul_over_rows(desc):
    """The rows form of matmul selection: A row tiles in NRAM, B whole in WRAM."""
    module = pipeline.parse_module(MATMUL)
    text = emit_dlp_c(module, desc)
    assert "__bang_matmul(" in text and "WRAM);" in text and "__bang_add_scalar(" in text
    rng = np.random.default_rng(2)
    a, b = (
        rng.standard_normal((64, 24), dtype=np.float32),
        rng.standard_normal((24, 16), dtype=np.float32),
    )
    (out,) = compile_dlp(module, desc, name="mm")(a, b)
    close(out, a @ b - 0.5)


# ------------------------------------------------------------------ report


def test_report_counts_bytes_and_dmas():
    module = parse(TESTS / "passes" / "loop-to-dlp-double-buffer.mlir")  # 256x16 * 3
    x = np.arange(256 * 16, dtype=np.float32).reshape(256, 16)
    f = compile_dlp(module, "tiny", name="scale")
    (out,) = f(x)
    close(out, x * 3)
    (rep,) = f.report
    assert rep.double_buffered and rep.tasks == 2
    assert rep.bytes["gdram->nram"] == x.nbytes and rep.bytes["nram->gdram"] == x.nbytes
    assert rep.dma_count >= 4 and rep.intrinsic_cycles > 0
    single = compile_dlp(module, "tiny", name="scale", double_buffer=False)
    single(x)
    # roofline: ping-pong hides the shorter of compute and transfer, single buffering adds
    # them; the shared GDRAM port bounds both from below
    port = 2 * x.nbytes / (resolve("tiny").gdram_bandwidth_gbs / resolve("tiny").clock_ghz)
    assert rep.cycles == pytest.approx(max(rep.compute_cycles, rep.transfer_cycles, port))
    one = single.report[0]
    assert one.cycles == pytest.approx(max(one.compute_cycles + one.transfer_cycles, port))
    assert "scale_0" in format_report(f.report)


# ------------------------------------------------------------------ run-time checks

KERNEL = """
func.func @main(%x: memref<64xf32>, %out: memref<64xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  dlp.kernel "k" attributes {{tasks = 1 : i64, dma_align = 64 : i64, vector_align = 64 : i64}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %n = arith.constant {count} : index
    %off = dlp.task_id
    %o = arith.addi %off, %c{offset} : index
    %a = memref.alloc() : memref<{size}xf32, #dlp.space<nram>>
    dlp.memcpy GDRAM2NRAM %a[%c0], %x[%c0], %n : memref<{size}xf32, #dlp.space<nram>>, memref<64xf32>
    dlp.relu %a[%o], %a[%c0], %c1 : memref<{size}xf32, #dlp.space<nram>>, memref<{size}xf32, #dlp.space<nram>>
    dlp.memcpy NRAM2GDRAM %out[%c0], %a[%c0], %c64 : memref<64xf32>, memref<{size}xf32, #dlp.space<nram>>
  }}
  func.return
}}
"""


@pytest.mark.parametrize(
    "count, offset, size, message",
    [
        (64, 0, 2048, "needs 8192 bytes of nram but the target has 4096"),
        (65, 0, 128, r"__memcpy: source \(260 bytes\) is not inside a gdram buffer"),
        (64, 1, 128, "__bang_active_relu: dst is not aligned to 64 bytes"),
        (64, 0, 32, r"__memcpy: destination \[0, 256\) overruns nram buffer 'v_a' \(128 bytes\)"),
    ],
)
def test_simulator_checks(count, offset, size, message):
    module = pipeline.parse_module(KERNEL.format(count=count, offset=offset, size=size))
    f = compile_dlp(module, "tiny", name="checks")
    with pytest.raises(DlpcError, match=message):
        f(np.ones(64, np.float32))


SHRUNK_ACC = """
func.func @main(%x: memref<64xf32>, %w: memref<256xf32>, %out: memref<64xf32>) attributes {{dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  dlp.kernel "mm" attributes {{tasks = 1 : i64, dma_align = 64 : i64, vector_align = 64 : i64}} {{
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %c256 = arith.constant 256 : index
    %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
    %wb = memref.alloc() : memref<256xf32, #dlp.space<wram>>
    %acc = memref.alloc() : memref<{acc}xf32, #dlp.space<nram>>
    dlp.memcpy GDRAM2NRAM %a[%c0], %x[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
    dlp.memcpy GDRAM2WRAM %wb[%c0], %w[%c0], %c256 : memref<256xf32, #dlp.space<wram>>, memref<256xf32>
    dlp.matmul %acc[%c0], %a[%c0], %wb[%c0], %c4, %c16, %c16 : memref<{acc}xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<256xf32, #dlp.space<wram>>
    dlp.memcpy NRAM2GDRAM %out[%c0], %acc[%c0], %c64 : memref<64xf32>, memref<{acc}xf32, #dlp.space<nram>>
  }}
  func.return
}}
"""


def test_an_operand_past_its_buffer_is_an_error_naming_op_and_buffer():
    """A 4x16 matmul result into an accumulator allocated for 32 floats: the NRAM arena
    holds the overrun (right answers without the check); the simulator refuses it."""
    x = np.arange(64, dtype=np.float32).reshape(4, 16) / 64
    w = np.eye(16, dtype=np.float32)[::-1].copy()
    ok = compile_dlp(pipeline.parse_module(SHRUNK_ACC.format(acc=64)), "tiny", name="mm")
    (out,) = ok(x.ravel(), w.ravel())
    assert np.allclose(out.reshape(4, 16), x @ w)
    small = compile_dlp(pipeline.parse_module(SHRUNK_ACC.format(acc=32)), "tiny", name="mm")
    message = r"kernel 'mm' task 0: __bang_matmul: dst \[0, 256\) overruns nram buffer 'v_acc' \(128 bytes\)$"
    with pytest.raises(DlpcError, match=message):
        small(x.ravel(), w.ravel())


def test_good_kernel_passes_checks():
    module = pipeline.parse_module(KERNEL.format(count=64, offset=0, size=128))
    (out,) = compile_dlp(module, "tiny", name="checks")(np.full(64, -2.0, np.float32))
    assert out[0] == 0.0 and np.all(out[1:] == -2.0)
    assert lower_to_dlp(module) is module  # already at the dlp level


def test_double_precision_runs_as_scalar_loops():
    """The intrinsics are f32: an f64 kernel keeps scalar loops (still DMA-tiled)."""
    module = pipeline.parse_module(
        (TESTS / "passes" / "loop-to-dlp-double-buffer.mlir")
        .read_text()
        .replace("f32", "f64")
        .replace("3.000000e+00", "3.0")
    )
    f = compile_dlp(module, "tiny", name="f64")
    assert "__bang_" not in f.source and "sizeof(double)" in f.source
    x = np.random.default_rng(3).standard_normal((256, 16))
    (y,) = f(x)
    np.testing.assert_allclose(y, 3 * x, rtol=1e-15)


SCATTER = """
func.func @scatter(%x: memref<8xindex>, %idx: memref<8xindex>, %out: memref<8xindex>) {
  loop.kernel "scatter_0" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      %j = memref.load %idx[%i0] : memref<8xindex>
      %v = memref.load %x[%i0] : memref<8xindex>
      memref.store %v, %out[%j] : memref<8xindex>
    }
  }
  func.return
}
"""


def test_a_scatter_is_not_a_copy():
    """Found by pyright (the evaluator's values were typed `object`): a store indexed by a
    loaded value made copy_pieces fail with numpy's 'inhomogeneous shape' ValueError
    instead of answering 'not a copy' (None)."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.lower._dlp_copy import copy_pieces

    module = pipeline.parse_module(SCATTER)
    assert copy_pieces(next(kernels(module))) is None
