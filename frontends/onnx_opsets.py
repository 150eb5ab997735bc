"""Older opsets: which operators mean below opset 13 what they mean at 13, and the rewrite
that turns an older node's form into the opset-13 form the handlers read.

The handlers implement each operator as of opset 13 (and the newer versions they check
with `op_version`). A node of a model below 13 is imported when the version of its
operator under the model's opset is at least `SAME_SINCE[op]`: the versions from there to
opset 13's differ only in the element types they allow or in attributes whose defaults
keep the old meaning (ONNX's operator changelog, one line each below). An older form whose
meaning is the same but whose arguments moved (an attribute that became an input at 13:
Unsqueeze's `axes`, Slice-1's `starts`) is rewritten by `upgrade` into the opset-13 node.
Any other older version is refused in one line naming the operator and the opset.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# operator -> the first version whose tensor semantics are those at opset 13
SAME_SINCE: dict[str, int] = {
    # elementwise: v1 had `consumed_inputs` (6 dropped it); later versions add types
    **dict.fromkeys(
        "Abs Neg Exp Log Sqrt Relu Tanh Sigmoid Reciprocal Floor Ceil Elu Selu HardSigmoid "
        "LeakyRelu InstanceNormalization".split(),
        6,
    ),
    # binary: 7 replaced the `broadcast`/`axis` attributes by numpy broadcasting
    **dict.fromkeys("Add Sub Mul Div Pow Equal Less Greater And Or Xor PRelu Gemm".split(), 7),
    # variadic: 8 added broadcasting
    **dict.fromkeys("Max Min Sum Mean".split(), 8),
    # unchanged but for types (or for attributes added later with a neutral default)
    **dict.fromkeys(
        "Identity Not Transpose Shape Size MatMul Flatten SpaceToDepth DepthToSpace Conv "
        "MaxPool AveragePool GlobalAveragePool GlobalMaxPool Softplus Softsign "
        "LpNormalization ArgMax ArgMin ReduceMax ReduceMin ReduceMean ReduceProd ReduceL1 "
        "ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare".split(),
        1,
    ),
    "Concat": 4,  # 1 had a default axis
    "Reshape": 5,  # 1 had `shape` as an attribute of other semantics
    "Cast": 6,  # 1 named the target type by a string
    "Tile": 6,  # 1 took `tiles` and `axis`
    "BatchNormalization": 9,  # 7 had `spatial`, before it `is_test`
    "Gather": 11,  # 11 defined negative indices
    "ConvTranspose": 11,  # 11 redefined output_shape / pads
    "Resize": 11,  # 10 had Upsample's coordinates and no roi
    "Upsample": 7,  # deprecated at 10 (Resize); 9 made 7's `scales` attribute an input
    "Scatter": 9,  # deprecated for ScatterElements; 11 defined negative indices
    **dict.fromkeys("ScatterElements ScatterND GatherND".split(), 11),  # (the first)
    "TopK": 10,  # 1 took `k` as an attribute; 11 added largest / sorted (default 1)
    **dict.fromkeys("OneHot Compress".split(), 9),  # 11 added negative indices / axis
    "ReverseSequence": 10,  # (the first)
    "NonMaxSuppression": 10,  # (the first; 11 changed types only)
    "Unique": 11,  # (the first)
    **dict.fromkeys("RNN GRU LSTM".split(), 7),  # 1 had `output_sequence`; 14 added layout
    # 10 quantized per tensor only (13 added `axis` for per-axis scales)
    **dict.fromkeys("QuantizeLinear DequantizeLinear".split(), 10),
    **dict.fromkeys("MatMulInteger ConvInteger QLinearMatMul QLinearConv".split(), 10),
    # attribute -> input at 13 (rewritten by `upgrade`); same meaning since
    "Unsqueeze": 1,
    "Squeeze": 1,
    "ReduceSum": 1,
    "Split": 2,  # 1 took `split` as an input or an attribute
    "Slice": 1,  # 1 had starts/ends/axes attributes, 10 made them inputs and added steps
    "Pad": 2,  # 2 had pads/value attributes, 11 made them inputs
    "Clip": 6,  # 6 had min/max attributes, 11 made them inputs
    # 1 and 11 flatten the input to 2-D at `axis` (default 1): the same as 13 only when
    # that axis is the last one (checked by `upgrade`)
    "Softmax": 1,
    "LogSoftmax": 1,
}

# attribute -> input position, for the operators whose attribute became an input
_MOVED: dict[str, list[tuple[str, int, Any]]] = {
    "Unsqueeze": [("axes", 1, np.int64)],
    "Squeeze": [("axes", 1, np.int64)],
    "ReduceSum": [("axes", 1, np.int64)],
    "Split": [("split", 1, np.int64)],
    "Slice": [("starts", 1, np.int64), ("ends", 2, np.int64), ("axes", 3, np.int64)],
    "Pad": [("pads", 1, np.int64), ("value", 2, np.float32)],
    "Clip": [("min", 1, np.float32), ("max", 2, np.float32)],
    "Upsample": [("scales", 1, np.float32)],
}


def version_of(op_type: str, opset: int, domain: str = "") -> int | None:
    """The since-version of `op_type`'s schema under `opset` (None: unknown operator)."""
    from onnx import defs

    try:
        return defs.get_schema(op_type, opset, domain).since_version
    except Exception:  # noqa: BLE001 - an unknown operator: the dispatcher reports it
        return None


def accepted(op_type: str, opset: int, domain: str, target: int) -> tuple[bool, int]:
    """(whether a node of `op_type` at `opset` means what it means at `target`, the
    version of the operator at `target`)."""
    old, new = version_of(op_type, opset, domain), version_of(op_type, target, domain)
    if old is None or new is None or old == new:
        return True, new or 0
    return old >= SAME_SINCE.get(op_type, new), new


def upgrade(imp: Any, node, version: int):
    """`node` (of schema `version`, below opset 13) in its opset-13 form: a moved attribute
    becomes a constant input (named after the node; its value in `imp.env`). Raises
    imp.error where the old meaning differs for this node."""
    from onnx import NodeProto, helper

    from dlpc.frontends.onnx_values import Const

    if node.op_type in ("Softmax", "LogSoftmax") and version < 13:
        rank = len(imp.shape(imp.env[node.input[0]]))
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 1)
        if (axis + rank if axis < 0 else axis) != rank - 1:
            raise imp.error(
                f"opset {imp.opset} is not supported for '{node.op_type}' over axis {axis} of "
                f"a rank-{rank} input (before opset 13 it flattens to 2-D; '{node.op_type}' "
                f"changed at opset 13)"
            )
        return node
    moved = _MOVED.get(node.op_type)
    if not moved or not any(a.name == m[0] for a in node.attribute for m in moved):
        return node
    new = NodeProto()
    new.CopyFrom(node)
    new.ClearField("attribute")
    new.attribute.extend(a for a in node.attribute if a.name not in {m[0] for m in moved})
    given = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    inputs = list(node.input)
    for name, pos, dtype in moved:
        if name not in given:
            continue
        while len(inputs) <= pos:
            inputs.append("")
        key = f"{node.output[0]}__{node.op_type}_{name}"
        imp.env[key] = Const(np.asarray(given[name], dtype=dtype), key)
        inputs[pos] = key
    if node.op_type == "Slice" and "axes" not in given and len(inputs) > 3 and not inputs[3]:
        inputs = inputs[:3]
    new.ClearField("input")
    new.input.extend(inputs)
    return new
