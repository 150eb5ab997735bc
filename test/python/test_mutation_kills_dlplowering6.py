"""dlp-lowering's decisions no test compared before seed 50 (issue 35), on hand-written loop
IR: the window matcher (dlp_select/window.py) on a strided, padded conv and each near miss
it must refuse (one edit each, every refusal reached once), a batched conv whose epilogue
runs as scalar loops, numerics on the simulator against numpy; the attention fold's
`reader` and `fits` refusals one condition at a time; and the cost model's choices (tasks,
tile, ping-pong, SRAM staging, the estimate) pinned exactly per kernel and per chain."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
from test_mutation_kills_dlplowering5 import ATTN, _fused, _main, _pack_module, _row_chain_folds
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, Float64Type, MemRefType
from xdsl.utils.exceptions import DiagnosticException
from xdsl.utils.test_value import create_ssa_value

import dlpc
from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.passes import pipeline
from dlpc.passes.lower import _dlp_attn, _dlp_columns, _dlp_copy, _dlp_fuse
from dlpc.passes.lower import loop_to_dlp as ltd
from dlpc.passes.lower._dlp_build import latencies
from dlpc.passes.lower._dlp_copy import lower_copy
from dlpc.passes.lower.dlp_pack_params import pack_params
from dlpc.passes.lower.dlp_reshape_aliases import DlpReshapeAliases
from dlpc.passes.lower.dlp_select._matching import linear_form
from dlpc.targets.dlp import resolve

# x[1, 2, 5, 6] * w[3, 2, 3, 2], stride (2, 1), padding top 1 (bottom 1 reached), left 0
CONV = """builtin.module {
  func.func @main(%x: memref<1x2x5x6xf32> {dlpc.name = "x"}, %w: memref<3x2x3x2xf32> {dlpc.name = "w"}, %out0: memref<1x3x3x5xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
    loop.kernel "conv" attributes {origin = "graph.conv2d"} {
      loop.for %n = 0 to 1 step 1 {name = "n"} {
        loop.for %co = 0 to 3 step 1 {name = "co", parallel} {
          loop.for %oh = 0 to 3 step 1 {name = "oh"} {
            loop.for %ow = 0 to 5 step 1 {name = "ow"} {
              %acc = memref.alloca() : memref<f32>
              %zero = arith.constant 0.000000e+00 : f32
              memref.store %zero, %acc[] : memref<f32>
              loop.for %ci = 0 to 2 step 1 {name = "ci", reduction} {
                loop.for %kh = 0 to 3 step 1 {name = "kh", reduction} {
                  loop.for %kw = 0 to 2 step 1 {name = "kw", reduction} {
                    %c2 = arith.constant 2 : index
                    %oh2 = arith.muli %oh, %c2 : index
                    %ohk = arith.addi %oh2, %kh : index
                    %c1 = arith.constant 1 : index
                    %row = arith.subi %ohk, %c1 : index
                    %col = arith.addi %ow, %kw : index
                    %c0 = arith.constant 0 : index
                    %above = arith.cmpi sge, %row, %c0 : index
                    %c5 = arith.constant 5 : index
                    %below = arith.cmpi slt, %row, %c5 : index
                    %inside = arith.andi %above, %below : i1
                    %cell = scf.if %inside -> (f32) {
                      %xv = memref.load %x[%n, %ci, %row, %col] : memref<1x2x5x6xf32>
                      scf.yield %xv : f32
                    } else {
                      %fill = arith.constant 0.000000e+00 : f32
                      scf.yield %fill : f32
                    }
                    %wv = memref.load %w[%co, %ci, %kh, %kw] : memref<3x2x3x2xf32>
                    %prod = arith.mulf %cell, %wv : f32
                    %part = memref.load %acc[] : memref<f32>
                    %next = arith.addf %part, %prod : f32
                    memref.store %next, %acc[] : memref<f32>
                  }
                }
              }
              %total = memref.load %acc[] : memref<f32>
              memref.store %total, %out0[%n, %co, %oh, %ow] : memref<1x3x3x5xf32>
            }
          }
        }
      }
    }
    func.return
  }
}
"""
# two images, the work loop over them (a BatchConvSelection)
BATCHED = (
    CONV.replace("1x2x5x6", "2x2x5x6")
    .replace("1x3x3x5", "2x3x3x5")
    .replace("loop.for %n = 0 to 1", "loop.for %n = 0 to 2")
)
NO_MATCH = "no intrinsic pattern matches its loop nest"
PARAMS = {
    "channels_in": 2,
    "height": 5,
    "width": 6,
    "kernel_h": 3,
    "kernel_w": 2,
    "stride_h": 2,
    "stride_w": 1,
    "pad_top": 1,
    "pad_left": 0,
    "pad_bottom": 1,
    "pad_right": 0,
}


def _dlp(text: str):
    """(dlp ops by name, the conv2d's attributes, the kernel's dlpc.scalar or None)."""
    out = lower_to_dlp(pipeline.parse_module(text))
    ops = Counter(op.name for op in out.walk())
    convs = [op for op in out.walk() if op.name == "dlp.conv2d"]
    params = {k: v.value.data for k, v in convs[0].attributes.items()} if convs else None  # type: ignore[attr-defined]
    (kernel,) = [op for op in out.walk() if op.name == "dlp.kernel"]
    reason = kernel.attributes.get("dlpc.scalar")
    return ops, params, reason.data if reason is not None else None  # type: ignore[attr-defined]


def _conv_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)))
    out = np.zeros((x.shape[0], 3, 3, 5), np.float32)
    for n in range(x.shape[0]):
        for co in range(3):
            for oh in range(3):
                for ow in range(5):
                    out[n, co, oh, ow] = (xp[n, :, 2 * oh : 2 * oh + 3, ow : ow + 2] * w[co]).sum()
    return out


def _run(text: str, images: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(images)
    x = rng.standard_normal((images, 2, 5, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    (out,) = compile_dlp(pipeline.parse_module(text), name="m")(x, params={"w": w})
    return out, x, w


def test_strided_padded_conv_takes_the_intrinsic_with_its_window():
    ops, params, reason = _dlp(CONV)
    assert ops["dlp.conv2d"] == 1 and reason is None
    assert params == PARAMS
    out, x, w = _run(CONV, 1)
    np.testing.assert_allclose(out, _conv_ref(x, w), rtol=1e-4, atol=1e-5)


def test_batched_conv_with_a_scalar_epilogue():
    """Two images a task step, each convolved into the scratch tile and its epilogue
    (a compare and select: no vector intrinsic) run as scalar loops on it."""
    text = BATCHED.replace(
        "memref.store %total, %out0",
        "%zr = arith.constant 0.000000e+00 : f32\n"
        "%pos = arith.cmpf ogt, %total, %zr : f32\n"
        "%relu = arith.select %pos, %total, %zr : f32\n"
        "memref.store %relu, %out0",
    )
    ops, params, reason = _dlp(text)
    assert ops["dlp.conv2d"] == 1 and params == PARAMS
    assert reason is not None and reason.startswith("its epilogue is not vector intrinsics")
    out, x, w = _run(text, 2)
    np.testing.assert_allclose(out, np.maximum(_conv_ref(x, w), 0), rtol=1e-4, atol=1e-5)


def test_batched_conv_takes_the_intrinsic():
    ops, params, reason = _dlp(BATCHED)
    assert ops["dlp.conv2d"] == 1 and params == PARAMS and reason is None
    out, x, w = _run(BATCHED, 2)
    np.testing.assert_allclose(out, _conv_ref(x, w), rtol=1e-4, atol=1e-5)


def _aligned(images: int) -> str:
    """CONV over images of 2 x 4 x 8 floats into 4 x 2 x 8 (both 256 bytes, whole vectors
    apart): several images a task step (BatchConvSelection.max_tile)."""
    text = BATCHED
    for old, new in [
        ("2x2x5x6", f"{images}x2x4x8"),
        ("3x2x3x2", "4x2x3x1"),
        ("2x3x3x5", f"{images}x4x2x8"),
        ("loop.for %n = 0 to 2", f"loop.for %n = 0 to {images}"),
        ("loop.for %co = 0 to 3", "loop.for %co = 0 to 4"),
        ("loop.for %oh = 0 to 3", "loop.for %oh = 0 to 2"),
        ("loop.for %ow = 0 to 5", "loop.for %ow = 0 to 8"),
        ("loop.for %kw = 0 to 2", "loop.for %kw = 0 to 1"),
        ("%c5 = arith.constant 5 : index", "%c5 = arith.constant 4 : index"),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    return text


def _aligned_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 0)))  # (rows 2 oh - 1 + kh, from -1)
    out = np.zeros((x.shape[0], 4, 2, 8), np.float32)
    for co in range(4):
        for oh in range(2):
            window = xp[:, :, 2 * oh : 2 * oh + 3, :]  # n, ci, kh, ow
            out[:, co, oh, :] = np.einsum("nckw,ck->nw", window, w[co, :, :, 0])
    return out


@pytest.mark.parametrize("epilogue", ["select", "residual"])
def test_batched_conv_several_images_a_step(epilogue):
    """64 images, 2 or 8 a task step: each image's conv and its epilogue at its own
    offset in the tile, as scalar loops (a compare and select) or vector ops reading a
    tiled operand (a residual add). Numerics against numpy."""
    text = _aligned(64)
    if epilogue == "select":
        text = text.replace(
            "memref.store %total, %out0",
            "%zr = arith.constant 0.000000e+00 : f32\n"
            "%pos = arith.cmpf ogt, %total, %zr : f32\n"
            "%relu = arith.select %pos, %total, %zr : f32\n"
            "memref.store %relu, %out0",
        )
        plan = (16, 2, True, True, "BatchConvSelection", 620.9375)
    else:
        text = (
            text.replace(
                "%out0: memref<64x4x2x8xf32>) attributes {dlpc.num_inputs = 1",
                '%res: memref<64x4x2x8xf32> {dlpc.name = "res"}, %out0: memref<64x4x2x8xf32>) '
                "attributes {dlpc.num_inputs = 1",
            )
            .replace(
                "memref.store %total, %out0",
                "%rv = memref.load %res[%n, %co, %oh, %ow] : memref<64x4x2x8xf32>\n"
                "%sum = arith.addf %total, %rv : f32\n"
                "memref.store %sum, %out0",
            )
            .replace('dlpc.params = ["w"]', 'dlpc.params = ["w", "res"]')
        )
        plan = (8, 8, False, True, "BatchConvSelection", 487.5)
    assert _figures(text) == {"conv": plan}
    ops, params, reason = _dlp(text)
    assert ops["dlp.conv2d"] == 1
    assert (reason is not None) == (epilogue == "select")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 2, 4, 8)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 1)).astype(np.float32)
    res = rng.standard_normal((64, 4, 2, 8)).astype(np.float32)
    weights = {"w": w} if epilogue == "select" else {"w": w, "res": res}
    (out,) = compile_dlp(pipeline.parse_module(text), name="m")(x, params=weights)
    ref = _aligned_ref(x, w)
    ref = np.maximum(ref, 0) if epilogue == "select" else ref + res
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def _depthwise(edits: list[tuple[str, str]] = ()) -> str:  # type: ignore[assignment]
    """_aligned(1) with channel c of the output reading channel c of 4 input channels
    through its one filter: planes of 4 x 8 in, 2 x 8 out (whole vectors)."""
    text = _aligned(1)
    for old, new in [
        ("1x2x4x8", "1x4x4x8"),
        ("4x2x3x1", "4x1x3x1"),
        ("loop.for %ci = 0 to 2", "loop.for %ci = 0 to 1"),
        ("%x[%n, %ci, %row, %col]", "%x[%n, %co, %row, %col]"),
        *edits,
    ]:
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_depthwise_conv_takes_the_intrinsic():
    ops, params, reason = _dlp(_depthwise())
    assert ops["dlp.conv2d"] == 1 and reason is None
    assert params == {
        **PARAMS,
        "channels_in": 1,
        "height": 4,
        "width": 8,
        "kernel_w": 1,
        "pad_bottom": 0,
    }
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 4, 4, 8)).astype(np.float32)
    w = rng.standard_normal((4, 1, 3, 1)).astype(np.float32)
    (out,) = compile_dlp(pipeline.parse_module(_depthwise()), name="m")(x, params={"w": w})
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 0)))
    ref = np.zeros((1, 4, 2, 8), np.float32)
    for c in range(4):
        for oh in range(2):
            ref[0, c, oh] = (xp[0, c, 2 * oh : 2 * oh + 3, :] * w[c, 0, :, :]).sum(axis=0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


DEPTHWISE_MISSES = {
    # two filter channels a filter
    "a filter of two channels": [("4x1x3x1", "4x2x3x1")],
    # input planes of 5 x 8 floats (160 bytes), output planes still 2 x 8
    "input planes not whole vectors": [
        ("1x4x4x8", "1x4x5x8"),
        ("%c5 = arith.constant 4 : index", "%c5 = arith.constant 5 : index"),
    ],
    # output planes of 2 x 7 floats (56 bytes), input planes still 4 x 8
    "output planes not whole vectors": [
        ("4x1x3x1", "4x1x3x2"),
        ("1x4x2x8", "1x4x2x7"),
        ("loop.for %ow = 0 to 8", "loop.for %ow = 0 to 7"),
        ("loop.for %kw = 0 to 1", "loop.for %kw = 0 to 2"),
    ],
}


@pytest.mark.parametrize("case", list(DEPTHWISE_MISSES))
def test_depthwise_near_misses_keep_scalar_loops(case):
    ops, params, reason = _dlp(_depthwise(DEPTHWISE_MISSES[case]))
    assert ops["dlp.conv2d"] == 0 and params is None and reason == NO_MATCH


_KW_BODY = (
    "                    %c2 = arith.constant 2 : index\n",
    "                    memref.store %next, %acc[] : memref<f32>\n",
)


def _kw_body(text: str, new: str) -> str:
    start, end = text.index(_KW_BODY[0]), text.index(_KW_BODY[1]) + len(_KW_BODY[1])
    return text[:start] + new + text[end:]


# (base, old, new): one edit each; every one a refusal of its own in window.py
NEAR_MISSES = {
    "an op between the init and the reduction": (
        CONV,
        "memref.store %zero, %acc[] : memref<f32>\n",
        "memref.store %zero, %acc[] : memref<f32>\n%early = arith.addi %oh, %ow : index\n",
    ),
    "the total read from another buffer": (
        CONV,
        "%total = memref.load %acc[] : memref<f32>",
        "%total = memref.load %x[%n, %co, %oh, %ow] : memref<1x2x5x6xf32>",
    ),
    "the sum stored from the product": (
        CONV,
        "memref.store %next, %acc[] : memref<f32>",
        "memref.store %prod, %acc[] : memref<f32>",
    ),
    "the sum doubled, no product": (
        CONV,
        "%next = arith.addf %part, %prod : f32",
        "%next = arith.addf %part, %part : f32",
    ),
    "the product doubled, the sum dropped": (
        CONV,
        "%next = arith.addf %part, %prod : f32",
        "%next = arith.addf %prod, %prod : f32",
    ),
    "a float op beside the product": (
        CONV,
        "%prod = arith.mulf %cell, %wv : f32",
        "%neg = arith.negf %wv : f32\n%prod = arith.mulf %cell, %wv : f32",
    ),
    "padding of one": (
        CONV,
        "%fill = arith.constant 0.000000e+00 : f32",
        "%fill = arith.constant 1.000000e+00 : f32",
    ),
    "the guard computes": (
        CONV,
        "scf.yield %xv : f32",
        "%xv2 = arith.negf %xv : f32\nscf.yield %xv2 : f32",
    ),
    "a batch of two read at image 0": (CONV, "1x2x5x6", "2x2x5x6"),
    "a 3-d input": (
        CONV,
        "%xv = memref.load %x[%n, %ci, %row, %col] : memref<1x2x5x6xf32>",
        "%xv = memref.load %x3[%ci, %row, %col] : memref<2x5x6xf32>",
    ),
    "the image index by the channel": (
        CONV,
        "%x[%n, %ci, %row, %col]",
        "%x[%ci, %ci, %row, %col]",
    ),
    "the row squared": (
        CONV,
        "%x[%n, %ci, %row, %col]",
        "%x[%n, %ci, %rowsq, %col]",
    ),
    "rows from the kernel twice": (
        CONV,
        "%ohk = arith.addi %oh2, %kh : index",
        "%kh2 = arith.muli %kh, %c2 : index\n%ohk = arith.addi %oh2, %kh2 : index",
    ),
    "columns from the row loop": (
        CONV,
        "%col = arith.addi %ow, %kw : index",
        "%colw = arith.addi %ow, %kw : index\n%col = arith.addi %colw, %oh : index",
    ),
    "columns without the kernel": (
        CONV,
        "%col = arith.addi %ow, %kw : index",
        "%col = arith.addi %ow, %ow : index",
    ),
    "rows shifted down": (
        CONV,
        "%row = arith.subi %ohk, %c1 : index",
        "%row = arith.addi %ohk, %c1 : index",
    ),
    "a filter also read at channel 0": (
        CONV,
        "%total = memref.load %acc[] : memref<f32>",
        "%total = memref.load %acc[] : memref<f32>\n%c0e = arith.constant 0 : index\n"
        "%w0 = memref.load %w[%c0e, %c0e, %c0e, %c0e] : memref<3x2x3x2xf32>",
    ),
    "one input channel of two": (CONV, "loop.for %ci = 0 to 2", "loop.for %ci = 0 to 1"),
    "the channel shifted": (CONV, "%x[%n, %ci, %row, %col]", "%x[%n, %cip, %row, %col]"),
    "depthwise with the full filter": (
        CONV,
        "%x[%n, %ci, %row, %col]",
        "%x[%n, %co, %row, %col]",
    ),
    "one column short": (CONV, "loop.for %ow = 0 to 5", "loop.for %ow = 0 to 4"),
    "batched, the image also read at image 0": (
        BATCHED,
        "%total = memref.load %acc[] : memref<f32>",
        "%total = memref.load %acc[] : memref<f32>\n%c0e = arith.constant 0 : index\n"
        "%x0 = memref.load %x[%c0e, %c0e, %c0e, %c0e] : memref<2x2x5x6xf32>",
    ),
}
# what an edit needs besides itself (a value it reads, the shapes it implies)
_EXTRA = {
    "a 3-d input": [
        (
            '    loop.kernel "conv"',
            "    %x3 = memref.reinterpret_cast %x to offset: [0], sizes: [2, 5, 6], strides: "
            "[30, 6, 1] : memref<1x2x5x6xf32> to memref<2x5x6xf32>\n"
            '    loop.kernel "conv"',
        )
    ],
    "the row squared": [
        (
            "%col = arith.addi %ow, %kw : index",
            "%col = arith.addi %ow, %kw : index\n%rowsq = arith.muli %row, %row : index",
        )
    ],
    "the channel shifted": [
        (
            "%col = arith.addi %ow, %kw : index",
            "%col = arith.addi %ow, %kw : index\n%cip = arith.addi %ci, %c1 : index",
        )
    ],
    "depthwise with the full filter": [
        ("loop.for %ci = 0 to 2", "loop.for %ci = 0 to 1"),
        ("1x2x5x6", "1x3x5x6"),
    ],
}
# the refusals not reached by one edit of CONV
WHOLE_EDITS = {
    "an accumulation of three ops": _kw_body(
        CONV,
        "%part = memref.load %acc[] : memref<f32>\n%next = arith.addf %part, %part : f32\n"
        "memref.store %next, %acc[] : memref<f32>\n",
    ),
    "depthwise over planes of 30 floats": CONV.replace(
        "loop.for %ci = 0 to 2", "loop.for %ci = 0 to 1"
    )
    .replace("1x2x5x6", "1x3x5x6")
    .replace("3x2x3x2", "3x1x3x2")
    .replace("%x[%n, %ci, %row, %col]", "%x[%n, %co, %row, %col]"),
    "padding read unguarded": CONV[: CONV.index("%cell = scf.if")]
    + "%cell = memref.load %x[%n, %ci, %row, %col] : memref<1x2x5x6xf32>\n"
    + CONV[CONV.index("%wv = memref.load") :],
}


def _near_miss(case: str) -> str:
    if case in WHOLE_EDITS:
        return WHOLE_EDITS[case]
    base, old, new = NEAR_MISSES[case]
    assert old in base, old
    text = base.replace(old, new)
    for a, b in _EXTRA.get(case, []):
        assert a in text, a
        text = text.replace(a, b)
    return text


@pytest.mark.parametrize("case", [*NEAR_MISSES, *WHOLE_EDITS])
def test_window_near_misses_keep_scalar_loops(case):
    ops, params, reason = _dlp(_near_miss(case))
    assert ops["dlp.conv2d"] == 0 and ops["dlp.pool"] == 0 and params is None
    assert reason == NO_MATCH


def test_near_misses_refused_for_the_edit_alone():
    """Each near miss but its edit is CONV or BATCHED, which match (the refusals above are
    the edits')."""
    for base in (CONV, BATCHED):
        assert _dlp(base)[0]["dlp.conv2d"] == 1


# ---- the attention fold's refusals (_dlp_attn.reader, fits) and its matcher's


@pytest.fixture(scope="module")
def attn_loop(tmp_path_factory) -> str:
    """test_mutation_kills_dlplowering5's attention model as loop-to-dlp receives it."""
    path = tmp_path_factory.mktemp("attn") / "m.dlpc"
    path.write_text(ATTN)
    model = dlpc.load(path)
    opts = pipeline.PipelineOptions(target="dlp")
    module = pipeline.lower(model.module.clone(), "loop", opts, weights=dict(model.weights))
    DlpReshapeAliases().apply(Context(), module)
    return str(module)


def _chains(text: str):
    """(the attention, the row chain reading it, the description) as lower_module finds them."""
    desc = resolve(None)
    module = pipeline.parse_module(text)
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    prepared = {k: ltd._prepare(k, desc, True, True, True) for k in kernels}
    plans = {k: plan for k, (direct, plan) in prepared.items() if plan is not None}
    chains = [
        f
        for run in _dlp_fuse.chains(kernels, plans)
        for f in _dlp_fuse.segments(
            run, plans, desc, True, lambda k: ltd._flops(k.block), ltd._estimate
        )
    ]
    fused_kernels = {k for f in chains for k in f.kernels}
    swaps = {v: s for v, s in _dlp_fuse.swaps(kernels).items() if s.kernel not in fused_kernels}
    attn = _dlp_attn.match(chains[0].kernels, swaps)
    assert attn is not None
    (row,) = [f for f in chains[1:] if _dlp_attn.reader(attn, f.plans) is not None]
    return attn, row, desc, chains, plans


def test_fits_on_the_row_chain_and_each_refusal(attn_loop):
    attn, row, desc, _, _ = _chains(attn_loop)
    assert (row.tasks, row.tile, row.bands, row.sram) == (8, 2, 1, False)
    assert _dlp_attn.fits(attn, row, desc)
    assert not _dlp_attn.fits(attn, dataclasses.replace(row, bands=2), desc)
    assert not _dlp_attn.fits(attn, dataclasses.replace(row, tile=1), desc)
    # the last member's work loop of 32 iterations, not the 16 rows
    last = copy.copy(row.plans[-1])
    (wide,) = [
        lp for k in row.kernels for lp in k.walk() if isinstance(lp, ForOp) and lp.trip_count == 32
    ][:1]
    last.work = wide
    assert not _dlp_attn.fits(attn, dataclasses.replace(row, plans=[*row.plans[:-1], last]), desc)
    # rows of 16 floats are not aligned to 128 bytes; heads of 32 would be
    wide_vec = dataclasses.replace(desc, vector_align=128)
    assert not _dlp_attn.fits(dataclasses.replace(attn, depth=32), row, wide_vec)
    assert not _dlp_attn.fits(dataclasses.replace(attn, depth=8), row, desc)
    f64 = create_ssa_value(MemRefType(Float64Type(), [1, 2, 16, 16]))
    assert not _dlp_attn.fits(dataclasses.replace(attn, q=f64), row, desc)


def test_fits_up_to_each_capacity_exactly(attn_loop):
    attn, row, desc, _, _ = _chains(attn_loop)
    extra = _dlp_attn.extra_bytes(attn, row.tile, desc)
    use = {"nram": 0, "wram": 0, "sram": 0}
    for plan in row.plans:
        for space, n in plan.space_bytes(row.tile, False, row.sram).items():
            use[space] += n
    assert use == {"nram": 5260, "wram": 4096, "sram": 0}
    assert extra == {"nram": 1728, "wram": 4096, "sram": 4096}
    for space in use:
        need = use[space] + extra[space]
        exact = dataclasses.replace(desc, **{f"{space}_bytes": need})
        short = dataclasses.replace(desc, **{f"{space}_bytes": need - 1})
        assert _dlp_attn.fits(attn, row, exact)
        assert not _dlp_attn.fits(attn, row, short)


READER_MISSES = {
    # the merged rows read by columns: tiled, not along the rows
    "read by columns": (
        "%49 = memref.load %reshape_3[%i0_14, %i1_14, %r0_5]",
        "%49 = memref.load %reshape_3[%i0_14, %r0_5, %i1_14]",
    ),
    # the next row's: tiled at an offset
    "read a row on": (
        "%49 = memref.load %reshape_3[%i0_14, %i1_14, %r0_5]",
        "%one = arith.constant 1 : index\n%i1n = arith.addi %i1_14, %one : index\n"
        "%49 = memref.load %reshape_3[%i0_14, %i1n, %r0_5]",
    ),
}


READER_MISSES_ALONE = {
    **READER_MISSES,
    # every other row: a stride of 2 rows a work iteration
    "every other row": (
        "%49 = memref.load %reshape_3[%i0_14, %i1_14, %r0_5]",
        "%two = arith.constant 2 : index\n%i1d = arith.muli %i1_14, %two : index\n"
        "%49 = memref.load %reshape_3[%i0_14, %i1d, %r0_5]",
    ),
    # row 0's first 16 columns, one a work iteration: tiled along the columns
    "a column a row": (
        "%49 = memref.load %reshape_3[%i0_14, %i1_14, %r0_5]",
        "%z0 = arith.constant 0 : index\n%49 = memref.load %reshape_3[%i0_14, %z0, %i1_14]",
    ),
    # the rows of image 1: the dims before the rows not 0
    "another image's rows": (
        "%49 = memref.load %reshape_3[%i0_14, %i1_14, %r0_5]",
        "%one = arith.constant 1 : index\n%49 = memref.load %reshape_3[%one, %i1_14, %r0_5]",
    ),
}


def _reader(text: str):
    """(the attention, the plan of the row chain's first member) of the loop IR `text`."""
    kernels = [k for k in pipeline.parse_module(text).walk() if isinstance(k, KernelOp)]
    by_name = {k.sym: k for k in kernels}
    attn = _dlp_attn.match([by_name[n] for n in _CHAIN], _dlp_fuse.swaps(kernels))
    _, plan = ltd._prepare(by_name["linear_add_1"], resolve(None), True, True, True)
    assert attn is not None and plan is not None
    return attn, plan


def test_reader_is_the_merged_rows_plan(attn_loop):
    attn, plan = _reader(attn_loop)
    got = _dlp_attn.reader(attn, [plan])
    assert got is not None and got.value in attn.merged
    assert (got.kind, got.dim, got.a, got.rlo, got.rhi, got.prefix) == ("tiled", 1, 1, 0, 0, (0,))


@pytest.mark.parametrize("case", list(READER_MISSES_ALONE))
def test_reader_refuses_alone(attn_loop, case):
    old, new = READER_MISSES_ALONE[case]
    assert attn_loop.count(old) == 1, old
    attn, plan = _reader(attn_loop.replace(old, new))
    assert _dlp_attn.reader(attn, [plan]) is None


@pytest.mark.parametrize("case", list(READER_MISSES))
def test_reader_refuses_other_reads_of_the_merged_rows(attn_loop, case):
    old, new = READER_MISSES[case]
    assert attn_loop.count(old) == 1, old
    text = attn_loop.replace(old, new)
    fused = _fused(text)
    assert not _row_chain_folds(fused), fused


MATCH_MISSES = {
    "scores over two images": ("loop.for %i0_7 = 0 to 1 step 1", "loop.for %i0_7 = 0 to 2 step 1"),
    "scores stored twice": (
        "memref.store %23, %matmul_mul[%i0_7, %i1_7, %i2_7, %i3_3] : memref<1x2x16x16xf32>",
        "memref.store %23, %matmul_mul[%i0_7, %i1_7, %i2_7, %i3_3] : memref<1x2x16x16xf32>\n"
        "memref.store %23, %matmul_mul[%i0_7, %i1_7, %i3_3, %i2_7] : memref<1x2x16x16xf32>",
    ),
    "sum starts at the scale": (
        "%16 = arith.constant 0.000000e+00 : f32",
        "%16 = memref.load %__constant[] : memref<f32>",
    ),
    "scaled by a constant": (
        "%22 = memref.load %__constant[] : memref<f32>",
        "%22 = arith.constant 2.500000e-01 : f32",
    ),
    "row maximum stored twice": (
        "memref.store %max, %softmax_12_max[%i0_8, %i1_8, %i2_8] : memref<1x2x16xf32>",
        "memref.store %max, %softmax_12_max[%i0_8, %i1_8, %i2_8] : memref<1x2x16xf32>\n"
        "memref.store %max, %__constant[] : memref<f32>",
    ),
}


@pytest.mark.parametrize("case", list(MATCH_MISSES))
def test_matcher_refuses(attn_loop, case):
    old, new = MATCH_MISSES[case]
    assert attn_loop.count(old) == 1, old
    kernels = [
        k
        for k in pipeline.parse_module(attn_loop.replace(old, new)).walk()
        if isinstance(k, KernelOp)
    ]
    by_name = {k.sym: k for k in kernels}
    chain = [by_name[n] for n in _CHAIN]
    assert _dlp_attn.match(chain, _dlp_fuse.swaps(kernels)) is None


def test_matcher_refuses_rows_of_other_lengths(attn_loop):
    # the softmax's per-row buffers of 17 rows, the scores of 16
    text = attn_loop.replace("memref<1x2x16xf32>", "memref<1x2x17xf32>")
    kernels = [k for k in pipeline.parse_module(text).walk() if isinstance(k, KernelOp)]
    by_name = {k.sym: k for k in kernels}
    assert _dlp_attn.match([by_name[n] for n in _CHAIN], _dlp_fuse.swaps(kernels)) is None


_CHAIN = [
    "matmul_mul_0",
    "softmax_12_max",
    "softmax_12_exp",
    "softmax_12_sum",
    "softmax_12",
    "matmul_13",
]


# ---- the cost model's choices, exactly (loop_to_dlp._choose_tile / _choose_clusters /
# _estimate, _dlp_fuse.segments / estimate) on the default description: 16 cores, 4 a cluster

# (tasks, tile, ping-pong, SRAM staging, selection, the estimate in cycles) per kernel
ATTN_PLANS = {
    "linear_0": (4, 4, False, False, "MatmulSelection", 588.0),
    "matmul_mul_0": (2, 1, False, True, "MatmulSelection", 450.0390625),
    "softmax_12_max": (2, 1, False, False, "ReduceSelection", 414.625),
    "softmax_12_exp": (2, 1, False, False, "ElementwiseSelection", 428.625),
    "softmax_12_sum": (2, 1, False, False, "ReduceSelection", 414.625),
    "softmax_12": (2, 1, False, False, "ElementwiseSelection", 428.625),
    "matmul_13": (2, 1, False, False, "MatmulSelection", 446.0),
    "linear_add_1": (8, 2, False, False, "MatmulSelection", 458.75),
    "layer_norm_18_mean": (16, 1, False, False, "ReduceSelection", 401.8046875),
    "layer_norm_18_rstd": (16, 1, False, False, "ReduceSelection", 402.890625),
    "layer_norm_18": (16, 1, False, True, "ElementwiseSelection", 407.078125),
}
DIRECT = {"slice_1", "slice_2", "slice_3", "transpose_5", "transpose_7", "transpose_9"}


def _figures(text: str) -> dict:
    desc = resolve(None)
    out = {}
    for k in pipeline.parse_module(text).walk():
        if not isinstance(k, KernelOp):
            continue
        direct, plan = ltd._prepare(k, desc, True, True, True)
        if plan is None:
            assert direct is not None
            out[k.sym] = "direct"
            continue
        assert plan.groups == 1 or plan.outer is not None
        out[k.sym] = (
            plan.tasks,
            plan.tile,
            plan.double,
            plan.sram,
            type(plan.selection).__name__,
            ltd._estimate(plan, ltd._flops(k.block)),
        )
    return out


def test_each_kernel_plan_and_estimate(attn_loop):
    got = _figures(attn_loop)
    assert {k for k, v in got.items() if v == "direct"} == DIRECT | {"transpose_14"}
    assert {k: v for k, v in got.items() if v != "direct"} == ATTN_PLANS


def test_chains_and_their_estimates(attn_loop):
    _, _, desc, chains, plans = _chains(attn_loop)
    got = [
        (
            [k.sym for k in f.kernels],
            f.tasks,
            f.tile,
            f.sram,
            f.bands,
            _dlp_fuse.estimate(f.kernels, plans, desc, True, lambda k: ltd._flops(k.block)),
        )
        for f in chains
    ]
    assert got == [
        (
            ["matmul_mul_0", *_CHAIN[1:]],
            2,
            1,
            False,
            8,
            430.0390625,
        ),
        (
            ["linear_add_1", "layer_norm_18_mean", "layer_norm_18_rstd", "layer_norm_18"],
            8,
            2,
            False,
            1,
            469.40625,
        ),
    ]


EW = """builtin.module {{
  func.func @main(%x: memref<{r}x{c}xf32> {{dlpc.name = "x"}}, %b: memref<{c}xf32> {{dlpc.name = "b"}}, %out0: memref<{r}x{c}xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = ["b"], dlpc.num_outputs = 1 : i64}} {{
    loop.kernel "bias_relu" attributes {{origin = "graph.add"}} {{
      loop.for %i = 0 to {r} step 1 {{name = "i", parallel}} {{
        loop.for %j = 0 to {c} step 1 {{name = "j", vectorize}} {{
          %xv = memref.load %x[%i, %j] : memref<{r}x{c}xf32>
          %bv = memref.load %b[%j] : memref<{c}xf32>
          %s = arith.addf %xv, %bv : f32
          %z = arith.constant 0.000000e+00 : f32
          %r = arith.maximumf %s, %z : f32
          memref.store %r, %out0[%i, %j] : memref<{r}x{c}xf32>
        }}
      }}
    }}
    func.return
  }}
}}
"""


@pytest.mark.parametrize(
    "rows, cols, plan",
    [
        # long rows: one cluster, 8 rows a tile, ping-pong, the bias staged
        (64, 1024, (4, 8, True, True, "ElementwiseSelection", 5160.0)),
        # many short rows: every core, 128 rows a tile, ping-pong
        (4096, 64, (16, 128, True, True, "ElementwiseSelection", 20490.0)),
        # one row a core, nothing to overlap
        (16, 16, (16, 1, False, True, "ElementwiseSelection", 402.375)),
    ],
)
def test_elementwise_plans(rows, cols, plan):
    assert _figures(EW.format(r=rows, c=cols)) == {"bias_relu": plan}


def test_conv_plans():
    assert _figures(CONV) == {"conv": (3, 1, False, True, "ConvSelection", 404.1015625)}
    assert _figures(BATCHED) == {"conv": (2, 1, False, True, "BatchConvSelection", 407.6171875)}


# ---- plan_buffers: what it refuses to tile, and its one diagnostic

COPY = """builtin.module {{
  func.func @main(%x: memref<8x16xf32> {{dlpc.name = "x"}}, %out0: memref<{o}xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
    loop.kernel "k" attributes {{origin = "graph.copy"}} {{
      loop.for %i = 0 to 8 step 1 {{name = "i", parallel}} {{
        loop.for %j = 0 to 16 step 1 {{name = "j"}} {{
          %v = memref.load %x[%i, %j] : memref<8x16xf32>
          {idx}
          memref.store %v, %out0[{at}] : memref<{o}xf32>
        }}
      }}
    }}
    func.return
  }}
}}
"""
X = np.arange(128, dtype=np.float32).reshape(8, 16)


def test_a_buffer_written_by_every_iteration_is_not_tiled():
    """out[j] stored by every row i: no work loop (one task runs the kernel in order), the
    last row's values."""
    text = COPY.format(o="16", idx="", at="%j")
    (kernel,) = [
        op for op in lower_to_dlp(pipeline.parse_module(text)).walk() if op.name == "dlp.kernel"
    ]
    assert kernel.attributes["tasks"].value.data == 1  # type: ignore[attr-defined]
    (out,) = compile_dlp(pipeline.parse_module(text), name="m")(X)
    np.testing.assert_array_equal(out, X[7])


def test_rows_stored_in_reverse():
    idx = "%c7 = arith.constant 7 : index\n%ri = arith.subi %c7, %i : index"
    text = COPY.format(o="8x16", idx=idx, at="%ri, %j")
    (out,) = compile_dlp(pipeline.parse_module(text), name="m")(X)
    np.testing.assert_array_equal(out, X[::-1])


def test_a_dynamic_shape_is_one_diagnostic():
    text = COPY.format(o="?x16", idx="", at="%i, %j")
    with pytest.raises(DiagnosticException) as err:
        lower_to_dlp(pipeline.parse_module(text))
    assert str(err.value) == "loop-to-dlp needs static shapes; kernel 'k' uses memref<?x16xf32>"


# ---- a linear over a few rows split by columns (_dlp_columns): its model and choice


def _columns(m: int, k: int, n: int, bias: bool = True) -> _dlp_columns.Columns:
    b = create_ssa_value(MemRefType(Float32Type(), [n])) if bias else None
    return _dlp_columns.Columns(None, None, None, b, None, m, k, n)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "shape, by_tasks",
    [
        ((16, 64, 192, True), {2: 1347.75, 4: 981.875, 8: 803.9375, 12: 744.625}),
        ((16, 64, 192, False), {2: 1320.0, 4: 968.0, 8: 797.0, 12: 740.0}),
        ((64, 256, 512, True), {2: 21026.0, 4: 10941.0, 8: 7700.0, 12: 8340.0}),
        ((2, 64, 64, True), {2: 705.25, 4: 653.625, 8: 628.4375, 12: 618.9921875}),
    ],
)
def test_columns_cycles(shape, by_tasks):
    desc = resolve(None)
    c = _columns(*shape)
    assert {t: _dlp_columns.cycles(c, desc, t) for t in by_tasks} == by_tasks


@pytest.mark.parametrize(
    "shape, chosen",
    [
        ((16, 64, 192, True), (744.625, 12, 16)),
        # 2 tasks of 48 or 3 of 32 columns (4 of 24 unaligned; 6 is no whole number of
        # clusters): 3
        ((4, 64, 96, True), (727.5833333333334, 3, 32)),
        ((64, 256, 512, True), (7700.0, 8, 64)),
        ((2, 64, 64, True), (653.625, 4, 16)),
        # no block of whole DMA alignments divides 40 columns
        ((16, 64, 40, True), (None, 0, 0)),
    ],
)
def test_columns_choice(shape, chosen):
    c = _columns(*shape)
    got = _dlp_columns.choose(c, resolve(None))
    assert (got, c.tasks, c.block) == chosen


def test_columns_fit_up_to_each_capacity_exactly():
    """16 x 64 by 192 on 12 tasks of 16 columns (the only split that fits below): the
    input (4096 bytes) + a bias block (64) + two output blocks (2 x 1024) in NRAM, a block
    of weight rows (4096) in WRAM, the input (4096) in SRAM."""
    desc = resolve(None)
    for space, need in {"nram": 6208, "wram": 4096, "sram": 4096}.items():
        c = _columns(16, 64, 192)
        exact = dataclasses.replace(desc, **{f"{space}_bytes": need})
        assert _dlp_columns.choose(c, exact) == 744.625 and c.tasks == 12
        c = _columns(16, 64, 192)
        short = dataclasses.replace(desc, **{f"{space}_bytes": need - 1})
        assert _dlp_columns.choose(c, short) is None


# ---- a chain's common plan (_dlp_fuse._choose / _common)


def _runs(text: str, multicore: bool = True):
    desc = resolve(None)
    kernels = [k for k in pipeline.parse_module(text).walk() if isinstance(k, KernelOp)]
    prepared = {k: ltd._prepare(k, desc, True, multicore, True) for k in kernels}
    plans = {k: plan for k, (_, plan) in prepared.items() if plan is not None}
    return desc, plans, _dlp_fuse.chains(kernels, plans)


def test_chain_choices_on_many_cores_and_one(attn_loop):
    """(cycles, tasks, staged in SRAM, bands): the attention chain in 8 bands of its 2
    heads' rows, the row chain on 8 tasks; on one core each on one task."""
    got = {}
    for multicore in (True, False):
        desc, plans, runs = _runs(attn_loop, multicore)
        flops = lambda k: ltd._flops(k.block)  # noqa: E731
        got[multicore] = [_dlp_fuse._choose(r, plans, desc, multicore, flops) for r in runs]
    assert got == {
        True: [(430.0390625, 2, False, 8), (469.40625, 8, False, 1)],
        False: [(600.0390625, 1, False, 1), (649.0, 1, False, 1)],
    }


def test_chain_members_fit_side_by_side_up_to_the_byte(attn_loop):
    desc, plans, runs = _runs(attn_loop)
    needs = [{"nram": 16720, "wram": 2048}, {"nram": 3084, "wram": 4096}]
    for run, need in zip(runs, needs, strict=True):
        for space, n in need.items():
            exact = dataclasses.replace(desc, **{f"{space}_bytes": n})
            short = dataclasses.replace(desc, **{f"{space}_bytes": n - 1})
            assert _dlp_fuse._common(run, plans, exact, True) is not None
            assert _dlp_fuse._common(run, plans, short, True) is None


# ---- elementwise selection (dlp_select/elementwise.py): which intrinsics, and the answer

EWX = """builtin.module {{
  func.func @main(%x: memref<4x16xf32> {{dlpc.name = "x"}}, %b: memref<16xf32> {{dlpc.name = "b"}}, %s: memref<f32> {{dlpc.name = "s"}}, %t: memref<f32> {{dlpc.name = "t"}}, %out0: memref<4x16xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = ["b", "s", "t"], dlpc.num_outputs = 1 : i64}} {{
    loop.kernel "ew" attributes {{origin = "graph.add"}} {{
      loop.for %i = 0 to 4 step 1 {{name = "i", parallel}} {{
        loop.for %j = 0 to 16 step 1 {{name = "j", vectorize}} {{
          %xv = memref.load %x[%i, %j] : memref<4x16xf32>
          %bv = memref.load %b[%j] : memref<16xf32>
          %sv = memref.load %s[] : memref<f32>
          %tv = memref.load %t[] : memref<f32>
{body}
          memref.store %r, %out0[%i, %j] : memref<4x16xf32>
        }}
      }}
    }}
    func.return
  }}
}}
"""
_RNG = np.random.default_rng(5)
EX = _RNG.standard_normal((4, 16)).astype(np.float32)
EB = _RNG.standard_normal(16).astype(np.float32)
ES, ET = np.float32(1.5), np.float32(-0.75)
# body -> (the intrinsics chosen, the answer)
ELEMENTWISE = {
    "negated": ("%r = arith.negf %xv : f32", ["dlp.mul_scalar"], -EX),
    "times two scalars": (
        "%st = arith.mulf %sv, %tv : f32\n%r = arith.mulf %xv, %st : f32",
        ["dlp.mul_scalar"],
        EX * (ES * ET),
    ),
    "over a scalar": ("%r = arith.divf %xv, %sv : f32", ["dlp.mul_scalar"], EX / ES),
    "row minus x": ("%r = arith.subf %bv, %xv : f32", ["dlp.cycle_sub", "dlp.mul_scalar"], EB - EX),
    "x minus row": ("%r = arith.subf %xv, %bv : f32", ["dlp.cycle_sub"], EX - EB),
    "exp of the row": (
        "%eb = math.exp %bv : f32\n%r = arith.addf %xv, %eb : f32",
        ["dlp.add", "dlp.exp"],
        EX + np.exp(EB),
    ),
    "the row stored": (
        "%r = arith.addf %bv, %sv : f32",
        ["dlp.add_scalar"],
        np.broadcast_to(EB + ES, (4, 16)),
    ),
    "scalar minus x": (
        "%r = arith.subf %sv, %xv : f32",
        ["dlp.add_scalar", "dlp.mul_scalar"],
        ES - EX,
    ),
    "x over row": ("%r = arith.divf %xv, %bv : f32", ["dlp.div"], EX / EB),
    "row over x": ("%r = arith.divf %bv, %xv : f32", ["dlp.div"], EB / EX),
}
_MOVES = {"dlp.kernel", "dlp.task_id", "dlp.memcpy_async", "dlp.wait_dma", "dlp.core_id"}


@pytest.mark.parametrize("case", list(ELEMENTWISE))
def test_elementwise_selection_and_answer(case):
    body, chosen, ref = ELEMENTWISE[case]
    text = EWX.format(body=body)
    lowered = lower_to_dlp(pipeline.parse_module(text))
    names = {op.name for op in lowered.walk() if op.name.startswith("dlp.")} - _MOVES
    assert sorted(names - {"dlp.sync_cluster"}) == chosen
    params = {"b": EB, "s": np.array(ES), "t": np.array(ET)}
    (out,) = compile_dlp(pipeline.parse_module(text), name="m")(EX, params=params)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


# ---- dlp-lowering seed 50's killable survivors (drawn on d8df231)


def test_latencies_count_ceil_of_each_group_over_the_queue():
    """_dlp_build.latencies: ceil(n / depth) latencies a group; an empty group none, a
    full queue one (seed 50: `-(-n // depth)` -> `-(~n // depth)` charged one more there)."""
    desc = resolve(None)  # a queue of 8, 200 cycles a latency
    assert (desc.dma_queue_depth, desc.dma_latency_cycles) == (8, 200)
    assert latencies(desc, [0]) == 0
    assert latencies(desc, [0, 1, 8, 9, 16]) == (0 + 1 + 1 + 2 + 2) * 200
    three = dataclasses.replace(desc, dma_queue_depth=3)
    assert latencies(three, [3, 4, 6, 7]) == (1 + 2 + 2 + 3) * 200


_NO_RESIDUAL = [
    ("            %56 = memref.load %x[%i0_14, %i1_14, %i2_14] : memref<1x16x32xf32>\n", ""),
    ("%57 = arith.addf %56, %55 : f32", "%57 = arith.addf %55, %55 : f32"),
]


def _row_chain_cycles(text: str, depth: int) -> tuple[int, float]:
    """(tasks, _dlp_fuse._cycles with SRAM staging) of the row chain (linear, layer norm)
    planned for a description with a DMA queue of `depth`: wo staged, bo, g and beta each
    task's own, their first copies issued with the staging (`early`)."""
    desc = dataclasses.replace(resolve(None), dma_queue_depth=depth)
    kernels = [k for k in pipeline.parse_module(text).walk() if isinstance(k, KernelOp)]
    prepared = {k: ltd._prepare(k, desc, True, True, True) for k in kernels}
    plans = {k: plan for k, (_, plan) in prepared.items() if plan is not None}
    run = _dlp_fuse.chains(kernels, plans)[1]
    flops = lambda k: ltd._flops(k.block)  # noqa: E731
    fused = _dlp_fuse.plan_chain(run, plans, desc, True, flops)
    assert fused is not None
    staged = [
        p.name
        for p in fused.plans[0].buffers.values()
        if p.kind == "whole" and fused.plans[0].stages(p)
    ]
    assert staged == ["wo"]
    stored = _dlp_fuse._stored(run, fused.plans)
    return fused.tasks, _dlp_fuse._cycles(fused.plans, [flops(k) for k in run], stored, True)


@pytest.mark.parametrize(
    "residual, depth, expected",
    [
        # one staged + 0 early (a queue of 1): the staging group is 1 copy, not 0
        (True, 1, (16, 1642.578125)),
        # 1 staged + 2 early: a group of 3, one latency on a queue of 3
        (True, 3, (12, 846.8541666666666)),
        # 1 staged + 1 early on a queue of 2 (not 2 early): groups 2, 3 + 1 load
        (False, 2, (16, 841.328125)),
        (True, 8, (8, 655.40625)),
    ],
)
def test_chain_cycles_with_staged_and_early_copies(attn_loop, residual, depth, expected):
    """seed 50's _dlp_fuse.py:363 (`staged + early` -> `&`) and :362 (`depth - staged` ->
    `depth ** staged`) each change one of these."""
    text = attn_loop
    for old, new in [] if residual else _NO_RESIDUAL:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    assert _row_chain_cycles(text, depth) == expected


def test_chain_staging_offered_up_to_the_sram_capacity(attn_loop):
    """_dlp_fuse._staging: the row chain's whole buffers (wo 4096 bytes, bo, g, beta 128
    each) staged only where all 4480 fit in SRAM (seed 50: `elements * bytes` -> `+`
    summed 1280 and offered staging at 4479)."""
    desc = resolve(None)
    _, plans, runs = _runs(attn_loop)
    members = [plans[k] for k in runs[1]]
    for cap, options in [(4480, [False, True]), (4479, [False])]:
        first = copy.copy(members[0])
        first.desc = dataclasses.replace(desc, sram_bytes=cap)
        assert _dlp_fuse._staging([first, *members[1:]]) == options


# ---- a kernel as direct copies (_dlp_copy.copy_pieces): its pieces exactly, or None

COPYK = """builtin.module {{
  func.func @main(%x: memref<4x6xf32> {{dlpc.name = "x"}}, %y: memref<4x2xf32> {{dlpc.name = "y"}}, %out0: memref<{o}xf32>) attributes {{dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
    loop.kernel "k" attributes {{origin = "graph.copy"}} {{
      loop.for %i = 0 to {ri} step 1 {{name = "i", parallel}} {{
        loop.for %j = 0 to {rj} step 1 {{name = "j"}} {{
{body}
        }}
      }}
    }}
    func.return
  }}
}}
"""


def _pieces(body: str, o: str = "4x4", ri: int = 4, rj: int = 4):
    module = pipeline.parse_module(COPYK.format(body=body, o=o, ri=ri, rj=rj))
    (kernel,) = [op for op in module.walk() if isinstance(op, KernelOp)]
    got = _dlp_copy.copy_pieces(kernel)
    if got is None:
        return None
    _, sources, pieces = got
    return [s.name_hint for s in sources], pieces


COPIES = {
    "slice": (
        "%c2 = arith.constant 2 : index\n%j2 = arith.addi %j, %c2 : index\n%v = memref.load %x[%i, %j2] : memref<4x6xf32>\nmemref.store %v, %out0[%i, %j] : memref<4x4xf32>",
        {},
    ),
    "concat": (
        "%c4 = arith.constant 4 : index\n%in = arith.cmpi slt, %j, %c4 : index\n%v = scf.if %in -> (f32) {\n%a = memref.load %x[%i, %j] : memref<4x6xf32>\nscf.yield %a : f32\n} else {\n%j4 = arith.subi %j, %c4 : index\n%b = memref.load %y[%i, %j4] : memref<4x2xf32>\nscf.yield %b : f32\n}\nmemref.store %v, %out0[%i, %j] : memref<4x6xf32>",
        dict(o="4x6", rj=6),
    ),
    "transpose": (
        "%v = memref.load %x[%j, %i] : memref<4x6xf32>\nmemref.store %v, %out0[%i, %j] : memref<6x4xf32>",
        dict(o="6x4", ri=6, rj=4),
    ),
    "select": (
        "%c4 = arith.constant 4 : index\n%in = arith.cmpi slt, %j, %c4 : index\n%jj = arith.select %in, %j, %c4 : index\n%v = memref.load %x[%i, %jj] : memref<4x6xf32>\nmemref.store %v, %out0[%i, %j] : memref<4x6xf32>",
        dict(o="4x6", rj=6),
    ),
    "constant stored": (
        "%v = arith.constant 1.0 : f32\nmemref.store %v, %out0[%i, %j] : memref<4x4xf32>",
        {},
    ),
    "float constant": (
        "%f = arith.constant 1.0 : f32\n%v = memref.load %x[%i, %j] : memref<4x6xf32>\nmemref.store %v, %out0[%i, %j] : memref<4x4xf32>",
        {},
    ),
    "scaled": (
        "%v = memref.load %x[%i, %j] : memref<4x6xf32>\n%w = arith.mulf %v, %v : f32\nmemref.store %w, %out0[%i, %j] : memref<4x4xf32>",
        {},
    ),
    "alloca": (
        "%t = memref.alloca() : memref<f32>\n%v = memref.load %x[%i, %j] : memref<4x6xf32>\nmemref.store %v, %out0[%i, %j] : memref<4x4xf32>",
        {},
    ),
    "every row to row 0": (
        "%c0 = arith.constant 0 : index\n%v = memref.load %x[%i, %j] : memref<4x6xf32>\nmemref.store %v, %out0[%c0, %j] : memref<4x4xf32>",
        {},
    ),
    "past the source": (
        "%c5 = arith.constant 5 : index\n%j5 = arith.addi %j, %c5 : index\n%v = memref.load %x[%i, %j5] : memref<4x6xf32>\nmemref.store %v, %out0[%i, %j] : memref<4x4xf32>",
        {},
    ),
    "past the destination": (
        "%c1 = arith.constant 1 : index\n%j1 = arith.addi %j, %c1 : index\n%v = memref.load %x[%i, %j] : memref<4x6xf32>\nmemref.store %v, %out0[%i, %j1] : memref<4x4xf32>",
        {},
    ),
    "before the source": (
        "%c1 = arith.constant 1 : index\n%j1 = arith.subi %j, %c1 : index\n%v = memref.load %x[%i, %j1] : memref<4x6xf32>\nmemref.store %v, %out0[%i, %j] : memref<4x4xf32>",
        {},
    ),
    "gather": (
        "%v = memref.load %x[%i, %j] : memref<4x6xf32>\n%k = arith.fptosi %v : f32 to i64\n%kk = arith.index_cast %k : i64 to index\n%w = memref.load %x[%i, %kk] : memref<4x6xf32>\nmemref.store %w, %out0[%i, %j] : memref<4x4xf32>",
        {},
    ),
    "in place": (
        "%c1 = arith.constant 1 : index\n%j1 = arith.addi %j, %c1 : index\n%v = memref.load %out0[%i, %j1] : memref<4x4xf32>\nmemref.store %v, %out0[%i, %j] : memref<4x4xf32>",
        dict(rj=3),
    ),
    "load from y into a longer row": (
        "%v = memref.load %y[%i, %j] : memref<4x2xf32>\nmemref.store %v, %out0[%i, %j] : memref<4x2xf32>",
        dict(o="4x2", rj=2),
    ),
    "i32 index math": (
        "%c1 = arith.constant 1 : i32\n%v = memref.load %x[%i, %j] : memref<4x6xf32>\nmemref.store %v, %out0[%i, %j] : memref<4x4xf32>",
        {},
    ),
}

# (sources, [(destination offset, source, source offset, elements)]) or None (not a copy)
PIECES = {
    "slice": (["x"], [(0, 0, 2, 4), (4, 0, 8, 4), (8, 0, 14, 4), (12, 0, 20, 4)]),
    "concat": (
        ["x", "y"],
        [(0, 0, 0, 4), (4, 1, 0, 2), (6, 0, 6, 4), (10, 1, 2, 2)]
        + [(12, 0, 12, 4), (16, 1, 4, 2), (18, 0, 18, 4), (22, 1, 6, 2)],
    ),
    "transpose": (["x"], [(4 * r + c, 0, 6 * c + r, 1) for r in range(6) for c in range(4)]),
    "select": (
        ["x"],
        [(0, 0, 0, 5), (5, 0, 4, 1), (6, 0, 6, 5), (11, 0, 10, 1)]
        + [(12, 0, 12, 5), (17, 0, 16, 1), (18, 0, 18, 5), (23, 0, 22, 1)],
    ),
    "load from y into a longer row": (["y"], [(0, 0, 0, 8)]),
    "i32 index math": (["x"], [(0, 0, 0, 4), (4, 0, 6, 4), (8, 0, 12, 4), (12, 0, 18, 4)]),
}


@pytest.mark.parametrize("case", list(COPIES))
def test_copy_pieces(case):
    body, kw = COPIES[case]
    assert _pieces(body, **kw) == PIECES.get(case)


# ---- linear index forms (dlp_select/_matching.linear_form)

FORMS = """builtin.module {
  func.func @f(%a: index, %b: index) {
    %c3 = arith.constant 3 : index
    %c5 = arith.constant 5 : index
    %m = arith.muli %c3, %a : index
    %n = arith.muli %a, %c3 : index
    %p = arith.muli %a, %b : index
    %q = arith.addi %p, %a : index
    %ic = arith.index_cast %m : index to i64
    %d = arith.divsi %a, %c3 : index
    %s = arith.subi %a, %a : index
    %t = arith.subi %n, %c5 : index
    %u = arith.addi %t, %b : index
    %k = arith.muli %c3, %c5 : index
    func.return
  }
}"""


def test_linear_forms():
    (fn,) = [op for op in pipeline.parse_module(FORMS).ops if isinstance(op, func.FuncOp)]
    a, b = fn.body.block.args
    values = {r.name_hint: r for op in fn.body.block.ops for r in op.results}
    free = SimpleNamespace(fixed={})
    got = {name: linear_form(free, v) for name, v in values.items()}  # type: ignore[arg-type]
    assert got == {
        "c3": {1: 3},
        "c5": {1: 5},
        "m": {a: 3},  # (the constant on the left)
        "n": {a: 3},
        "p": None,  # a product of two variables
        "q": None,
        "ic": {a: 3},
        "d": None,  # a quotient
        "s": {},  # a - a: no term left, not even a constant
        "t": {a: 3, 1: -5},
        "u": {a: 3, 1: -5, b: 1},
        "k": {1: 15},
    }
    # b an extent-1 loop's variable, fixed at 7: a constant
    fixed = SimpleNamespace(fixed={b: 7})
    assert linear_form(fixed, values["u"]) == {a: 3, 1: 2}  # type: ignore[arg-type]
    assert linear_form(fixed, values["p"]) == {a: 7}  # type: ignore[arg-type]


# ---- row reductions (dlp_select/reduce.py): the intrinsic, and each near miss refused

REDUCE = """builtin.module {
  func.func @main(%x: memref<4x16xf32> {dlpc.name = "x"}, %s: memref<f32> {dlpc.name = "s"}, %out0: memref<4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["s"], dlpc.num_outputs = 1 : i64} {
    loop.kernel "rows" attributes {origin = "graph.reduce_sum"} {
      loop.for %i = 0 to 4 step 1 {name = "i", parallel} {
        %acc = memref.alloca() : memref<f32>
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r = 0 to 16 step 1 {name = "r", reduction} {
          %xv = memref.load %x[%i, %r] : memref<4x16xf32>
          %part = memref.load %acc[] : memref<f32>
          %next = arith.addf %part, %xv : f32
          memref.store %next, %acc[] : memref<f32>
        }
        %total = memref.load %acc[] : memref<f32>
        memref.store %total, %out0[%i] : memref<4xf32>
      }
    }
    func.return
  }
}
"""
RX = np.random.default_rng(6).standard_normal((4, 16)).astype(np.float32)
REDUCE_MAX = [
    ("%zero = arith.constant 0.000000e+00 : f32", "%zero = arith.constant 0xFF800000 : f32"),
    ("%next = arith.addf %part, %xv : f32", "%next = arith.maximumf %part, %xv : f32"),
]


@pytest.mark.parametrize("kind", ["sum", "max"])
def test_row_reduction_takes_the_intrinsic(kind):
    text = REDUCE
    for old, new in REDUCE_MAX if kind == "max" else []:
        text = text.replace(old, new)
    ops, _, reason = _dlp(text)
    assert ops[f"dlp.reduce_{kind}"] == 1 and reason is None
    params = {"s": np.array(np.float32(2.0))}
    (out,) = compile_dlp(pipeline.parse_module(text), name="m")(RX, params=params)
    ref = RX.sum(axis=1) if kind == "sum" else RX.max(axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


REDUCE_MISSES = {
    "an op before the reduction": (
        "memref.store %zero, %acc[] : memref<f32>\n",
        "memref.store %zero, %acc[] : memref<f32>\n%early = arith.addi %i, %i : index\n",
    ),
    "the total read from the scale": (
        "%total = memref.load %acc[] : memref<f32>",
        "%total = memref.load %s[] : memref<f32>",
    ),
    "a body of three": (
        "          %xv = memref.load %x[%i, %r] : memref<4x16xf32>\n",
        "",
    ),
    "the partial sum doubled": (
        "%next = arith.addf %part, %xv : f32",
        "%next = arith.addf %part, %part : f32",
    ),
    "the scale summed": (
        "%part = memref.load %acc[] : memref<f32>\n          %next = arith.addf %part, %xv : f32",
        "%sv = memref.load %s[] : memref<f32>\n%part = memref.load %acc[] : memref<f32>\n"
        "%next = arith.addf %part, %sv : f32",
    ),
    "a sum from one": (
        "%zero = arith.constant 0.000000e+00 : f32",
        "%zero = arith.constant 1.000000e+00 : f32",
    ),
    "a maximum from zero": (
        "%next = arith.addf %part, %xv : f32",
        "%next = arith.maximumf %part, %xv : f32",
    ),
    "a product": ("%next = arith.addf %part, %xv : f32", "%next = arith.mulf %part, %xv : f32"),
    "the sum stored from the load": (
        "memref.store %next, %acc[] : memref<f32>",
        "memref.store %xv, %acc[] : memref<f32>",
    ),
    "the reduction from 1": ("loop.for %r = 0 to 16", "loop.for %r = 1 to 16"),
}


@pytest.mark.parametrize("case", list(REDUCE_MISSES))
def test_row_reduction_near_misses_keep_scalar_loops(case):
    old, new = REDUCE_MISSES[case]
    assert REDUCE.count(old) == 1, old
    text = REDUCE.replace(old, new)
    if case == "a body of three":
        text = text.replace("%next = arith.addf %part, %xv", "%next = arith.addf %part, %part")
    ops, _, reason = _dlp(text)
    assert ops["dlp.reduce_sum"] == ops["dlp.reduce_max"] == 0
    assert reason == NO_MATCH


# ---- dlp-lowering seed 51's killable survivors (drawn on 457e6c2)


@pytest.mark.parametrize(
    "channel",
    [
        "%chan = arith.addi %co, %c0 : index",  # {co: 1, 1: 0}
        "%chan = arith.addi %co, %ci : index",  # {co: 1, ci: 1}
        "%cc = arith.addi %co, %ci : index\n%chan = arith.addi %cc, %c0 : index",
        "%chan = arith.subi %co, %c0 : index",
    ],
)
def test_depthwise_channel_written_with_a_zero_or_the_unit_loop(channel):
    """Channel c reads channel c however its index is written: co, co + 0, co + ci (ci
    the filter's one channel), co + ci + 0 (seed 51: window.py:234, the form
    {co: 1, ci: 1, 1: 0} mutated to a key 0 no form has, refused the last)."""
    text = _depthwise(
        [
            (
                "%inside = arith.andi %above, %below : i1",
                f"%inside = arith.andi %above, %below : i1\n{channel}",
            ),
            ("%x[%n, %co, %row, %col]", "%x[%n, %chan, %row, %col]"),
        ]
    )
    ops, params, reason = _dlp(text)
    assert ops["dlp.conv2d"] == 1 and reason is None
    assert params is not None and params["channels_in"] == 1


def test_packed_params_keep_one_attribute_dictionary_an_argument():
    """After packing, @main has exactly one argument-attribute dictionary per argument
    (seed 51: dlp_pack_params.py:226, `n - 1 - len(old)` -> `n - 1 // len(old)`, appended
    n more past the arguments, which the printer then dropped)."""
    module = _pack_module()
    assert pack_params(module, 64, 64) == ["packed.0", "packed.1"]
    fn = _main(module)
    assert fn.arg_attrs is not None
    assert len(fn.arg_attrs.data) == len(fn.body.block.args) == 10
    names = [d.data["dlpc.name"].data for d in fn.arg_attrs.data if "dlpc.name" in d.data]  # type: ignore[attr-defined]
    assert names == ["x", "s", "w", "b", "i", "j", "d", "packed.0", "packed.1"]


def test_head_split_copies_against_one_transposed_item(attn_loop):
    """A head split at batch 1 (transpose_5: [1, 16, 2, 16] -> [1, 2, 16, 16]) as direct
    copies on 8 tasks (205 cycles) or one item of 512 floats loaded, transposed (a C block
    of 16: twice) and stored (456): the copies (seed 51: loop_to_dlp.py:1038, `moved +
    item * ..` -> `moved % item * ..`, made the item cheaper)."""
    desc = resolve(None)
    kernels = {k.sym: k for k in pipeline.parse_module(attn_loop).walk() if isinstance(k, KernelOp)}
    split = kernels["transpose_5"]
    direct = lower_copy(split, desc, True, strided=False)
    one = ltd._one_item_plan(split, desc)
    assert direct is not None and one is not None
    assert (one.selection.item, one.selection.c) == (512, 16)  # type: ignore[union-attr]
    assert ltd._copy_cycles(direct, desc) == 205.0
    assert ltd._one_item_cycles(one) == 456.0
    built, plan = ltd._prepare(split, desc, True, True, True)
    assert built is not None and plan is None
    assert ltd._one_item_plan(kernels["slice_1"], desc) is None


# ---- dlp-lowering seed 52's killable survivors (drawn on 6b5fa65)

# a linear over 16 rows by 192 columns (test_dlp_columns' shape), as graph-to-loop writes it
LINEAR = """builtin.module {
  func.func @main(%x: memref<1x16x64xf32> {dlpc.name = "x"}, %w: memref<192x64xf32> {dlpc.name = "w"}, %b: memref<192xf32> {dlpc.name = "b"}, %out0: memref<1x16x192xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w", "b"], dlpc.num_outputs = 1 : i64} {
    loop.kernel "linear_0" attributes {origin = "graph.linear"} {
      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2 = 0 to 192 step 1 {name = "i2"} {
            %acc = memref.alloca() : memref<f32>
            %0 = arith.constant 0.000000e+00 : f32
            memref.store %0, %acc[] : memref<f32>
            loop.for %r0 = 0 to 64 step 1 {name = "r0", reduction} {
              %1 = memref.load %x[%i0, %i1, %r0] : memref<1x16x64xf32>
              %2 = memref.load %w[%i2, %r0] : memref<192x64xf32>
              %3 = arith.mulf %1, %2 : f32
              %4 = memref.load %acc[] : memref<f32>
              %5 = arith.addf %4, %3 : f32
              memref.store %5, %acc[] : memref<f32>
            }
            %sum = memref.load %acc[] : memref<f32>
            %6 = memref.load %b[%i2] : memref<192xf32>
            %7 = arith.addf %sum, %6 : f32
            memref.store %7, %out0[%i0, %i1, %i2] : memref<1x16x192xf32>
          }
        }
      }
    }
    func.return
  }
}"""


def test_columns_refuse_a_store_not_at_the_row_and_column():
    """_dlp_columns.match: the linear by columns; with its store at [0, i1, i1] (not the
    column) no match (seed 52: _dlp_columns.py:116, `==` -> `>=` on the index lists,
    compared two different SSA values: a TypeError)."""
    (kernel,) = [k for k in pipeline.parse_module(LINEAR).walk() if isinstance(k, KernelOp)]
    c = _dlp_columns.match(kernel)
    assert c is not None and (c.m, c.k, c.n) == (16, 64, 192)
    old = "memref.store %7, %out0[%i0, %i1, %i2]"
    assert LINEAR.count(old) == 1
    text = LINEAR.replace(old, "memref.store %7, %out0[%i0, %i1, %i1]")
    (kernel,) = [k for k in pipeline.parse_module(text).walk() if isinstance(k, KernelOp)]
    assert _dlp_columns.match(kernel) is None


def test_linear_estimate_with_early_copies_on_a_short_queue(attn_loop):
    """linear_add_1 on a DMA queue of 3: wo staged in SRAM, its own copies of bo and x
    early; 16 tasks staged (636 cycles), not 12 unstaged (seed 52: loop_to_dlp.py:592,
    `wholes - early + loads` -> `+ early`, counted the early copies twice)."""
    desc = dataclasses.replace(resolve(None), dma_queue_depth=3)
    kernels = {k.sym: k for k in pipeline.parse_module(attn_loop).walk() if isinstance(k, KernelOp)}
    k = kernels["linear_add_1"]
    _, plan = ltd._prepare(k, desc, True, True, True)
    assert plan is not None
    assert (plan.tasks, plan.sram, ltd._estimate(plan, ltd._flops(k.block))) == (16, True, 636.0)


def test_attention_matcher_refuses_the_scale_times_a_constant(attn_loop):
    """The scores stored as the scale times 4 (no sum in them): no attention (seed 52:
    _dlp_attn.py:109, `g.memref is acc` -> `is not acc`, took the scale for both factors)."""
    old = "%23 = arith.mulf %sum_1, %22 : f32"
    assert attn_loop.count(old) == 1
    text = attn_loop.replace(
        old, "%c4 = arith.constant 4.000000e+00 : f32\n%23 = arith.mulf %22, %c4 : f32"
    )
    kernels = [k for k in pipeline.parse_module(text).walk() if isinstance(k, KernelOp)]
    by_name = {k.sym: k for k in kernels}
    assert _dlp_attn.match([by_name[n] for n in _CHAIN], _dlp_fuse.swaps(kernels)) is None


def test_copy_pieces_through_a_remainder():
    """out[i, j] = x[i, (j + 2) remui 4]: rows rotated by 2 (seed 52: _dlp_copy.py:71,
    remui's `%` -> `+`)."""
    body = (
        "%c2 = arith.constant 2 : index\n%c4 = arith.constant 4 : index\n"
        "%j2 = arith.addi %j, %c2 : index\n%jr = arith.remui %j2, %c4 : index\n"
        "%v = memref.load %x[%i, %jr] : memref<4x6xf32>\n"
        "memref.store %v, %out0[%i, %j] : memref<4x4xf32>"
    )
    rows = [(4 * r, 0, 6 * r + 2, 2) for r in range(4)]
    wrapped = [(4 * r + 2, 0, 6 * r, 2) for r in range(4)]
    assert _pieces(body) == (["x"], [p for pair in zip(rows, wrapped) for p in pair])


def test_untiled_kernel_ops_exactly():
    """The kernel one task runs (out[j] stored by every row): its dlp IR's ops counted,
    no index add of a zero slot (seed 52: _dlp_build.py:433, `_const(slot) != 0` -> `!= 1`,
    added the zero)."""
    text = COPY.format(o="16", idx="", at="%j")
    ops = Counter(op.name for op in lower_to_dlp(pipeline.parse_module(text)).walk())
    assert ops["arith.addi"] == 1 and ops["arith.muli"] == 1


# ---- seed 52's _dlp_fuse.py:362 (killable, tested after its recheck)

# x + y + z + b then times the scalar c: a chain with 3 tile loads, b staged, c its own
CHAIN3 = """builtin.module {
  func.func @main(%x: memref<16x256xf32> {dlpc.name = "x"}, %y: memref<16x256xf32> {dlpc.name = "y"}, %z: memref<16x256xf32> {dlpc.name = "z"}, %b: memref<256xf32> {dlpc.name = "b"}, %c: memref<f32> {dlpc.name = "c"}, %out0: memref<16x256xf32>) attributes {dlpc.num_inputs = 3 : i64, dlpc.params = ["b", "c"], dlpc.num_outputs = 1 : i64} {
    %t = memref.alloc() : memref<16x256xf32>
    loop.kernel "sum3" attributes {origin = "graph.add"} {
      loop.for %i = 0 to 16 step 1 {name = "i", parallel} {
        loop.for %j = 0 to 256 step 1 {name = "j", vectorize} {
          %xv = memref.load %x[%i, %j] : memref<16x256xf32>
          %yv = memref.load %y[%i, %j] : memref<16x256xf32>
          %zv = memref.load %z[%i, %j] : memref<16x256xf32>
          %bv = memref.load %b[%j] : memref<256xf32>
          %s1 = arith.addf %xv, %yv : f32
          %s2 = arith.addf %s1, %zv : f32
          %s3 = arith.addf %s2, %bv : f32
          memref.store %s3, %t[%i, %j] : memref<16x256xf32>
        }
      }
    }
    loop.kernel "scale" attributes {origin = "graph.mul"} {
      loop.for %i2 = 0 to 16 step 1 {name = "i", parallel} {
        loop.for %j2 = 0 to 256 step 1 {name = "j", vectorize} {
          %tv = memref.load %t[%i2, %j2] : memref<16x256xf32>
          %cv = memref.load %c[] : memref<f32>
          %m = arith.mulf %tv, %cv : f32
          memref.store %m, %out0[%i2, %j2] : memref<16x256xf32>
        }
      }
    }
    memref.dealloc %t : memref<16x256xf32>
    func.return
  }
}
"""


def test_chain_cycles_with_three_tile_loads_on_a_queue_of_three():
    """b staged, c each task's own and issued early, x, y, z loaded with it: groups of 2,
    4 and 1 on a queue of 3 (seed 52: _dlp_fuse.py:362, `wholes - staged` -> `wholes //
    staged`, issued 2 early copies of the 1 own buffer)."""
    desc = dataclasses.replace(resolve(None), dma_queue_depth=3)
    kernels = [k for k in pipeline.parse_module(CHAIN3).walk() if isinstance(k, KernelOp)]
    plans = {k: p for k in kernels for _, p in [ltd._prepare(k, desc, True, True, True)] if p}
    (run,) = _dlp_fuse.chains(kernels, plans)
    common = _dlp_fuse._common(run, plans, desc, True, 16)
    assert common is not None
    with common:
        members = common.members
        staged = [
            p.name
            for m in members
            for p in m.buffers.values()
            if p.kind == "whole" and members[0].stages(p)
        ]
        flops = [ltd._flops(k.block) for k in run]
        cycles = _dlp_fuse._cycles(members, flops, _dlp_fuse._stored(run, members), True)
    assert staged == ["b"]
    assert cycles == 862.5390625


# ---- dlp-lowering seed 53's killable survivors (drawn on 0e1daa9)

POOL = """builtin.module {
  func.func @main(%x: memref<1x4x4x8xf32> {dlpc.name = "x"}, %out0: memref<1x4x2x4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
    loop.kernel "pool" attributes {origin = "graph.max_pool2d"} {
      loop.for %n = 0 to 1 step 1 {name = "n"} {
        loop.for %c = 0 to 4 step 1 {name = "c", parallel} {
          loop.for %oh = 0 to 2 step 1 {name = "oh"} {
            loop.for %ow = 0 to 4 step 1 {name = "ow"} {
              %acc = memref.alloca() : memref<f32>
              %ninf = arith.constant 0xFF800000 : f32
              memref.store %ninf, %acc[] : memref<f32>
              loop.for %kh = 0 to 2 step 1 {name = "kh", reduction} {
                loop.for %kw = 0 to 2 step 1 {name = "kw", reduction} {
                  %c2 = arith.constant 2 : index
                  %oh2 = arith.muli %oh, %c2 : index
                  %row = arith.addi %oh2, %kh : index
                  %ow2 = arith.muli %ow, %c2 : index
                  %col = arith.addi %ow2, %kw : index
                  %c0 = arith.constant 0 : index
                  CHANNEL
                  %xv = memref.load %x[%n, %ch, %row, %col] : memref<1x4x4x8xf32>
                  %part = memref.load %acc[] : memref<f32>
                  %next = arith.maximumf %part, %xv : f32
                  memref.store %next, %acc[] : memref<f32>
                }
              }
              %total = memref.load %acc[] : memref<f32>
              memref.store %total, %out0[%n, %c, %oh, %ow] : memref<1x4x2x4xf32>
            }
          }
        }
      }
    }
    func.return
  }
}
"""


@pytest.mark.parametrize(
    "channel",
    [
        "%ch = arith.addi %c, %c0 : index",
        "%ch = arith.subi %c, %c0 : index",
        "%ch = arith.addi %c0, %c : index",
    ],
)
def test_pool_channel_written_with_a_zero(channel):
    """A 2 x 2 max pool whose channel index is c + 0 or c - 0 takes dlp.pool (seed 53:
    window.py:309, the form {c: 1, 1: 0} mutated to a key 0, refused it)."""
    out = lower_to_dlp(pipeline.parse_module(POOL.replace("CHANNEL", channel)))
    assert Counter(op.name for op in out.walk())["dlp.pool"] == 1
