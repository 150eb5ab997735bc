"""passes/lower/_dlp_columns.py: a linear over a few rows split by output columns (each
task a block of weight rows, the input staged once per cluster, the output a strided
store), on the simulator against the numpy reference."""

from dlp_select_cases import lowered, matches_reference

import dlpc
from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.dialects.loop import KernelOp
from dlpc.passes.lower import _dlp_columns
from dlpc.targets.dlp import resolve

LINEAR = """model m(x: f32[1, {m}, 64]) {{
  param w: f32[{n}, 64] = kaiming(seed=1)
  param b: f32[{n}] = normal(seed=2)
  return {body}
}}
"""


def tasks_of(module) -> list[tuple[int, int]]:
    """Per dlp kernel: tasks and strided copies."""
    out = []
    for k in lower_to_dlp(module.clone()).walk():
        if k.name == "dlp.kernel":
            strided = sum(op.name == "dlp.memcpy_strided_async" for op in k.walk())
            out.append((k.attributes["tasks"].value.data, strided))
    return out


def test_qkv_shaped_linear_by_columns(tmp_path):
    # 16 rows x 192 outputs: 12 tasks of 16 columns, one strided store each
    text = LINEAR.format(m=16, n=192, body="linear(x, w, b)")
    model, module, ops = lowered(tmp_path, text)
    assert tasks_of(module) == [(12, 1)]
    assert ops["dlp.matmul"] == ops["dlp.cycle_add"] == ops["dlp.sync_cluster"] == 1
    matches_reference(model, module)


def test_linear_without_bias_by_columns(tmp_path):
    text = LINEAR.format(m=16, n=192, body="matmul(x, transpose(w, perm=[1, 0]))")
    model, module, ops = lowered(tmp_path, text)  # (the transpose folded into the weight)
    assert tasks_of(module) == [(12, 1)]
    assert ops["dlp.cycle_add"] == 0 and ops["dlp.matmul"] == 1
    matches_reference(model, module)


def test_the_estimate_is_the_simulators(tmp_path):
    text = LINEAR.format(m=16, n=192, body="linear(x, w, b)")
    model, module, _ = lowered(tmp_path, text)
    desc = resolve(None)
    (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
    c = _dlp_columns.match(kernel)
    assert c is not None and (c.m, c.k, c.n) == (16, 64, 192)
    estimate = _dlp_columns.choose(c, desc)
    assert estimate is not None and c.tasks == 12
    f = compile_dlp(module, name="m")
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    f(*inputs, params=weights)
    (report,) = f.report
    assert abs(report.cycles - estimate) <= 0.1 * report.cycles


def test_one_row_and_unaligned_blocks_keep_the_row_plan(tmp_path):
    # one row: the row plan splits the columns already; 40 columns: no block of a whole
    # number of DMA alignments (16 floats) divides them
    for m, n in ((1, 192), (16, 40)):
        model, module, _ = lowered(tmp_path, LINEAR.format(m=m, n=n, body="linear(x, w, b)"))
        (kernel,) = [k for k in module.walk() if isinstance(k, KernelOp)]
        c = _dlp_columns.match(kernel)
        assert c is None or _dlp_columns.choose(c, resolve(None)) is None
        assert all(strided == 0 for _, strided in tasks_of(module))
        matches_reference(model, module)
