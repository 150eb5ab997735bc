"""Write a small ONNX model for the onnx-*.test lit tests.

python onnx-make-model.py OUT.onnx [good|unsupported-op|unsupported-attr|symbolic]
"""

import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

out, kind = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "good"
rng = np.random.default_rng(0)
inits = [
    numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "fc.weight"),
    numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "fc.bias"),
    numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat"),
]
act = {
    "unsupported-op": helper.make_node("Rleu", ["h"], ["a"], name="act"),
    "unsupported-attr": helper.make_node("Relu", ["h"], ["a"], name="act", alpha=0.5),
}.get(kind, helper.make_node("Relu", ["h"], ["a"], name="act"))
nodes = [
    helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], name="fc", transB=1),
    act,
    helper.make_node("Reshape", ["a", "flat"], ["y"], name="flatten"),
]
batch = "N" if kind == "symbolic" else 2
graph = helper.make_graph(
    nodes,
    "mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16])],
    inits,
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), out)
