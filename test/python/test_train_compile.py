"""The training step's compile path: kernels alike up to names share one C function (a
backward repeats its kernels), and kernels that differ in anything else keep their own;
verify_ir, which checks alike ops once, still catches what module.verify() catches."""

import re

import numpy as np
import pytest
from xdsl.dialects.builtin import TensorType, f32
from xdsl.utils.exceptions import DiagnosticException

import dlpc
from dlpc.dialects.loop import KernelOp, verify_ir
from dlpc.frontends.text import parse_model
from dlpc.passes.pipeline import parse_module


def _functions_and_calls(source: str) -> tuple[list[str], list[str]]:
    defined = re.findall(r"^__attribute__.*static \w+ (kernel_\w+)\(", source, re.M)
    called = re.findall(r"^  (kernel_\w+)\(", source, re.M)
    return defined, called


def test_kernels_alike_up_to_names_share_one_function():
    # x * 2 and y * 3 differ only in their buffers (the constants are arguments)
    model = parse_model(
        "model m(x: f32[4, 8], y: f32[4, 8]) {\n"
        "  return reduce_sum(x * 2.0, axes=[1]) * reduce_sum(y * 3.0, axes=[1])\n"
        "}",
        "<test>",
    )
    fn = dlpc.compile(model, target="c")
    defined, called = _functions_and_calls(fn.source)
    assert len(called) == 5 and len(defined) == 3  # mul, reduce_sum, the product
    assert called[0] == called[2] and called[1] == called[3]
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
    (out,) = fn(x, y)
    np.testing.assert_allclose(out, (2 * x).sum(1) * (3 * y).sum(1), rtol=1e-5)


def test_kernels_that_differ_keep_their_own_functions():
    model = parse_model(
        "model m(x: f32[4, 8], y: f32[4, 6]) {\n"
        "  return reduce_sum(x, axes=[1]) + reduce_sum(y, axes=[1])\n"
        "}",
        "<test>",
    )
    fn = dlpc.compile(model, target="c")
    defined, called = _functions_and_calls(fn.source)
    assert len(set(called)) == len(called) == len(defined)
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((4, n)).astype(np.float32) for n in (8, 6))
    (out,) = fn(x, y)
    np.testing.assert_allclose(out, x.sum(1) + y.sum(1), rtol=1e-5)


# verify_ir checks a loop.for once per kind (properties, annotations, body arguments) and
# graph ops once per kind (operand and result types, properties): what it must still see
ALIKE_LOOPS = """
func.func @main(%x: memref<16xf32>, %y: memref<16xf32>) {
  loop.kernel "a" {
    loop.for %i = 0 to 16 step 1 {name = "i0"} {
      %v = memref.load %x[%i] : memref<16xf32>
      memref.store %v, %y[%i] : memref<16xf32>
    }
  }
  loop.kernel "b" {
    loop.for %i = 0 to 16 step 1 {name = "i0"} {
      %v = memref.load %y[%i] : memref<16xf32>
      memref.store %v, %x[%i] : memref<16xf32>
    }
  }
  func.return
}
"""


def test_verify_ir_catches_a_loop_alike_a_good_one_outside_any_kernel():
    module = parse_module(ALIKE_LOOPS)
    verify_ir(module)
    kernel_b = [op for op in module.walk() if isinstance(op, KernelOp)][1]
    loop = kernel_b.block.first_op
    assert loop is not None
    loop.detach()  # now in @main's block, after kernel "a"'s alike loop was verified
    block = kernel_b.parent_block()
    assert block is not None
    block.insert_op_before(loop, kernel_b)
    with pytest.raises(DiagnosticException) as xdsl:
        module.verify()
    with pytest.raises(DiagnosticException) as ours:
        verify_ir(module)
    assert str(ours.value) == str(xdsl.value)


def test_verify_ir_catches_a_graph_op_of_a_wrong_type_after_good_ones():
    module = parse_module(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %a = graph.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
        "  %b = graph.add %a, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
        "  %c = graph.add %b, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
        "  func.return %c : tensor<4xf32>\n"
        "}"
    )
    verify_ir(module)
    first = next(op for op in module.walk() if op.name == "graph.add")
    # an add of the same operand types whose result type is not the inferred one
    bad = type(first).create(operands=list(first.operands), result_types=[TensorType(f32, [8])])
    block = first.parent_block()
    assert block is not None and first.next_op is not None
    block.insert_op_before(bad, first.next_op.next_op)
    with pytest.raises(DiagnosticException) as xdsl:
        module.verify()
    with pytest.raises(DiagnosticException) as ours:
        verify_ir(module)
    assert str(ours.value) == str(xdsl.value)
