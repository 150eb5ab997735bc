"""int8 versions of the example models, as onnxruntime quantizes them: the example
exported to ONNX op by op (`models.onnx_from_graph`), onnxruntime's `quant_pre_process`
(shape inference and constant folding, so weights are initializers), then
`quantize_static` in QDQ format (QuantizeLinear / DequantizeLinear pairs around float
ops, int8 activations and weights, per-channel weight scales, int32 biases) calibrated on
`CALIBRATION` batches of seeded standard-normal inputs.

    path = int8_model("mlp", tmp_dir, batch=1)     # -> tmp_dir / "mlp_int8.onnx"

Used by bench/models.py (its "int8" rows: dlpc against onnxruntime on the same file) and by
test/python/test_quantized.py (dlpc's numerics against onnxruntime's)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

CALIBRATION = 8


def int8_model(
    name: str, where: Path, batch: int = 1, seed: int = 0, activations: str = "int8"
) -> Path:
    """The int8 QDQ file of example `name` (activations "int8" or "uint8")."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import models  # (bench/models.py: the examples and their ONNX export)

    from dlpc import api

    model = api.load(models.example_path(name, where), batch=batch)
    float_path = where / f"{name}.onnx"
    models.onnx_from_graph(model, float_path)
    pre_path = where / f"{name}_pre.onnx"
    quant_pre_process(str(float_path), str(pre_path))
    graph = onnx.load(str(pre_path)).graph
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
    rng = np.random.default_rng(seed)
    batches = [
        {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
        for _ in range(CALIBRATION)
    ]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.left = iter(batches)

        def get_next(self):
            return next(self.left, None)

    out = where / (f"{name}_int8.onnx" if activations == "int8" else f"{name}_{activations}.onnx")
    quantize_static(
        str(pre_path),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8 if activations == "int8" else QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )
    return out
