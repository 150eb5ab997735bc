"""The graph dialect's typed properties: accessors with defaults, `make` from Python
values, the printed form (a default left out) and its round trip, and the keyword table
(`ATTRS`) the frontends read, derived from the properties."""

from __future__ import annotations

import io

import pytest
from xdsl.dialects.builtin import TensorType, f32, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import graph as g
from dlpc.passes.pipeline import parse_module


def _args(*shapes: tuple[int, ...]) -> list[SSAValue]:
    return list(Block(arg_types=[TensorType(f32, s) for s in shapes]).args)


def _text(op: Operation, generic: bool = False) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(op)
    return out.getvalue()


def test_accessors_apply_defaults():
    x, w = _args((1, 3, 8, 8), (4, 3, 3, 3))
    conv = g.Conv2DOp.make(x, w)
    assert (conv.strides, conv.pads, conv.dilations, conv.groups) == (
        (1, 1),
        (0, 0, 0, 0),
        (1, 1),
        1,
    )
    (y,) = _args((4, 16))
    assert g.SoftmaxOp.make(y).axis == -1 and g.ConcatOp.make(y).axis == 0
    assert g.ReduceSumOp.make(y).keepdims is False and g.ReduceSumOp.make(y).axes == ()
    assert g.MatMulOp.make(y, _args((16, 2))[0]).transpose_a is False
    clip = g.ClipOp.make(y, min=0.0)
    assert (clip.min, clip.max) == (0.0, float("inf"))


def test_short_pairs_and_pads_expand():
    (x,) = _args((1, 2, 9, 9))
    pool = g.MaxPool2DOp.make(x, kernel=[3], strides=[2], pads=[1, 0])
    assert (pool.kernel, pool.strides, pool.pads) == ((3, 3), (2, 2), (1, 0, 1, 0))
    assert pool.out_shape == (1, 2, 5, 4)


def test_print_leaves_defaults_out_and_round_trips():
    x, w = _args((1, 3, 8, 8), (4, 3, 3, 3))
    conv = g.Conv2DOp.make(x, w, strides=[2, 2], pads=[1, 1, 1, 1], groups=1)
    text = _text(conv)
    assert "{strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} :" in text
    assert "groups" not in text and "dilations" not in text
    assert "<{strides = array<i64: 2, 2>" in _text(conv, generic=True)
    source = """
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32> {
  %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}
"""
    parsed = next(op for op in parse_module(source).walk() if isinstance(op, g.Conv2DOp))
    assert (parsed.strides, parsed.pads, parsed.groups) == ((2, 2), (1, 1, 1, 1), 1)
    printed = _text(parsed)  # the explicit default dropped, as make's op prints
    assert printed[printed.index("{") :] == text[text.index("{") :]


def test_attrs_table_is_derived_from_the_properties():
    assert g.Conv2DOp.ATTRS["groups"] == ("int", 1)
    assert g.Conv2DOp.ATTRS["strides"] == ("ints", (1, 1))
    assert g.AvgPool2DOp.ATTRS["count_include_pad"] == ("bool", False)
    assert g.GeluOp.ATTRS["approximate"] == ("str", "none")
    assert g.ReshapeOp.ATTRS["shape"][1] is g.REQUIRED
    assert g.CastOp.ATTRS["to"][0] == "type"
    assert g.ReluOp.ATTRS == {}


def test_make_names_a_missing_or_unknown_property():
    (x,) = _args((4, 16))
    with pytest.raises(VerifyException, match="graph.reshape requires attribute 'shape'"):
        g.ReshapeOp.make(x)
    with pytest.raises(VerifyException, match="graph.relu has no attribute 'axis'"):
        g.ReluOp.make(x, axis=1)
    assert g.CastOp.make(x, to=i64).out_type.get_element_type() == i64


def test_every_graph_op_is_a_documented_class():
    for cls in g.GRAPH_OPS:
        assert cls.__doc__ and cls.name in cls.__doc__, cls.__name__
        assert cls.__name__.endswith("Op")


def test_has_default_properties():
    (x,) = _args((4, 16))
    assert g.GeluOp.make(x).has_default_properties()
    assert g.GeluOp.make(x, approximate="none").has_default_properties()
    assert not g.GeluOp.make(x, approximate="tanh").has_default_properties()
    assert g.ReluOp.make(x).has_default_properties()
