"""ONNX operator handlers: one function per operator, `HANDLERS[op_type](importer)`.

Each handler reads the current node through the importer (a `NodeContext`: `imp.attrs`,
`imp.input`, `imp.const`, `imp.emit`) and returns the node's output values (graph SSA values or
import-time `Const`s). Attributes a handler does not list are rejected by `imp.attrs`;
attribute values it cannot honour are rejected by `imp.require`, so nothing is dropped.

Nodes whose inputs are all known at import time never reach a handler: the importer folds
them (see `dlpc.frontends.onnx`).

One module per operator family, each registering its handlers with `@handles` (registry.py)
when imported here: elementwise.py, nn.py (MatMul, Gemm, convolutions, pooling),
normalization.py, reduce.py, tensor.py (data movement and shapes), resize.py, control.py
(If, Loop, Scan onto graph.if / graph.loop), math_ops.py (Sin ... Atanh, Floor, Ceil,
Round), bitwise.py (BitwiseAnd / Or / Xor / Not, BitShift), scan_ops.py (CumSum, CumProd,
Hardmax, EyeLike), linalg.py (Det of n <= 3), quant.py (QuantizeLinear,
DequantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv),
recurrent.py (RNN, GRU, LSTM unrolled), indexing.py (ScatterElements, ScatterND, GatherND, TopK),
vision.py (LpPool, LRN, Col2Im, GridSample, MaxUnpool as compositions of graph ops),
text.py (TfIdfVectorizer over integer tokens), spectral.py (MelWeightMatrix at import time),
sequence.py (SplitToSequence as a list of tensors, a graph output only).
"""

from __future__ import annotations

from dlpc.frontends.onnx_ops import (  # noqa: F401 - imported to register their handlers
    bitwise,
    control,
    elementwise,
    indexing,
    linalg,
    math_ops,
    nn,
    normalization,
    quant,
    recurrent,
    reduce,
    resize,
    scan_ops,
    sequence,
    spectral,
    tensor,
    text,
    vision,
)
from dlpc.frontends.onnx_ops.registry import HANDLERS, handles, supported_operators

__all__ = ["HANDLERS", "handles", "supported_operators"]
