"""ONNX MelWeightMatrix: its five scalar inputs decide the output's shape and values, so they
must be known at import time; the matrix is computed then with numpy (onnx's reference
formula). A model whose graph inputs feed it is specialised on their values, as for
Reshape's shape. (A node whose inputs are all constants is folded before it gets here.)"""

from __future__ import annotations

import numpy as np

from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import Const, NodeContext, onnx_dtype_to_numpy


@handles("MelWeightMatrix")
def mel_weight_matrix(imp: NodeContext):
    a = imp.attrs({"output_datatype": 1})
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    bins, dft, rate, low, high = (imp.required_const(i, n).reshape(-1) for i, n in enumerate(names))
    dt = onnx_dtype_to_numpy(a["output_datatype"])
    if dt is None or dt.kind not in "fiu":
        raise imp.error(f"attribute 'output_datatype' = {a['output_datatype']} is not supported")
    if bins.size != 1 or dft.size != 1 or rate.size != 1 or low.size != 1 or high.size != 1:
        raise imp.error("inputs must be scalars")
    from onnx.reference.ops.op_mel_weight_matrix import MelWeightMatrix

    n_bins, n_dft = int(bins[0]), int(dft[0])
    if n_bins < 1 or n_dft < 2 or not 0 <= float(low[0]) < float(high[0]):
        raise imp.error(
            f"num_mel_bins {n_bins}, dft_length {n_dft} and edges {float(low[0])} .. "
            f"{float(high[0])} Hz do not define a matrix"
        )
    args = (bins[0], dft[0], rate[0], low[0], high[0])
    (m,) = MelWeightMatrix._run(None, *args, output_datatype=a["output_datatype"])  # type: ignore[arg-type]
    return [Const(np.asarray(m, dt))]
