"""ONNX Resize: nearest upsampling by whole factors as a broadcast; any other resize as a
per-axis interpolation matrix computed at import (a gather for nearest, a matmul for
linear and cubic)."""

from __future__ import annotations

import math

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles, norm_axis
from dlpc.frontends.onnx_values import Const, NodeContext, Value


def _nearest_source(a: dict, size: int, out: int, scale: float) -> np.ndarray:
    """The input index each output index of a nearest Resize reads, per ONNX."""
    x = np.arange(out, dtype=np.float64)
    mode = a["coordinate_transformation_mode"]
    if mode == "asymmetric":
        v = x / scale
    elif mode == "align_corners":
        v = x * (size - 1) / (out - 1) if out > 1 else 0 * x
    elif mode == "tf_half_pixel_for_nn":  # (an axis not resized stays as it is, as in
        # onnxruntime: x + 0.5 rounded up would shift it by one)
        v = (x + 0.5) / scale if scale != 1 else x
    else:  # half_pixel, pytorch_half_pixel
        v = (x + 0.5) / scale - 0.5 if out > 1 or mode == "half_pixel" else 0 * x
    rounding = {
        "round_prefer_floor": lambda t: np.ceil(t - 0.5),
        "round_prefer_ceil": lambda t: np.floor(t + 0.5),
        "floor": np.floor,
        "ceil": np.ceil,
    }[a["nearest_mode"]]
    return np.clip(rounding(v), 0, size - 1).astype(np.int64)


@handles("Resize")
def resize(imp: NodeContext):
    """Nearest upsampling by whole factors (nn.Upsample(scale_factor=k) as exported) is
    out[..., i, j] = x[..., i // k, j // l]: a reshape, a broadcast and a reshape. Any other
    Resize is separable: per resized axis an (out, in) interpolation matrix M and an
    extrapolation vector c (tf_crop_and_resize) are computed at import with onnx's own 1-D
    interpolation, so y = M x + c along the axis: a gather for nearest, a matmul for
    linear and cubic (antialias too), axes applied from the last to the first as ONNX's
    recursion does."""
    a = imp.attrs(
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "half_pixel",
            "nearest_mode": "round_prefer_floor",
            "cubic_coeff_a": -0.75,
            "exclude_outside": 0,
            "extrapolation_value": 0.0,
            "antialias": 0,
            "keep_aspect_ratio_policy": "stretch",
            "axes": None,
        }
    )
    imp.require(a, "mode", ("nearest", "linear", "cubic"))
    imp.require(
        a,
        "coordinate_transformation_mode",
        (
            "half_pixel",
            "half_pixel_symmetric",
            "pytorch_half_pixel",
            "asymmetric",
            "align_corners",
            "tf_half_pixel_for_nn",
            "tf_crop_and_resize",
        ),
    )
    imp.require(a, "nearest_mode", ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"))
    imp.require(a, "keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller"))
    x = imp.required(0)
    roi, scales, sizes = imp.const(1, "roi"), imp.const(2, "scales"), imp.const(3, "sizes")
    return _resize(imp, a, x, roi, scales, sizes)


@handles("Upsample")
def upsample(imp: NodeContext):
    """The deprecated Upsample (opsets 7 to 9; its scales attribute becomes the input by
    onnx_opsets.upgrade) is Resize-10: output size floor(in * scale), asymmetric
    coordinates, nearest rounding down (onnxruntime's Upsample)."""
    a = imp.attrs({"mode": "nearest"})
    imp.require(a, "mode", ("nearest", "linear"))
    spec = {
        "mode": a["mode"],
        "coordinate_transformation_mode": "asymmetric",
        "nearest_mode": "floor",
        "cubic_coeff_a": -0.75,
        "exclude_outside": 0,
        "extrapolation_value": 0.0,
        "antialias": 0,
        "keep_aspect_ratio_policy": "stretch",
        "axes": None,
    }
    scales = imp.required_const(1, "scales")
    if any(s < 1 for s in scales.reshape(-1)):
        raise imp.error(f"'scales' {scales.reshape(-1).tolist()} must be at least 1")
    return _resize(imp, spec, imp.required(0), None, scales, None)


def _resize(imp: NodeContext, a: dict, x: Value, roi, scales, sizes) -> list[Value]:
    shape = imp.shape(x)
    r = len(shape)
    axes = [norm_axis(imp, int(v), r, "axes") for v in (a["axes"] or range(r))]
    scale, out = [1.0] * r, list(shape)
    for what, given in (("sizes", sizes), ("scales", scales)):
        if given is not None and given.size and given.size != len(axes):
            raise imp.error(f"'{what}' has {given.size} values for {len(axes)} axes")
    if sizes is not None and sizes.size:
        for k, ax in enumerate(axes):
            out[ax] = int(sizes.reshape(-1)[k])
            scale[ax] = out[ax] / shape[ax]
        policy = a["keep_aspect_ratio_policy"]
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            common = pick(scale[ax] for ax in axes)
            for ax in axes:
                scale[ax], out[ax] = common, int(common * shape[ax] + 0.5)
    elif scales is not None and scales.size:
        for k, ax in enumerate(axes):
            scale[ax] = float(scales.reshape(-1)[k])
            out[ax] = int(shape[ax] * scale[ax])
    else:
        raise imp.error("one of the inputs 'scales' and 'sizes' is required")
    full_roi = None
    if roi is not None and roi.size:
        if roi.size != 2 * len(axes):
            raise imp.error(f"'roi' has {roi.size} values; {len(axes)} axes need {2 * len(axes)}")
        full_roi = [0.0] * r + [1.0] * r
        flat = roi.reshape(-1)
        for k, ax in enumerate(axes):
            full_roi[ax], full_roi[r + ax] = float(flat[k]), float(flat[len(axes) + k])
    whole = _whole_factor_upsampling(a, shape, out, scale)
    if whole is not None and a["coordinate_transformation_mode"] != "tf_crop_and_resize":
        if all(f == 1 for f in whole):
            return [x]
        inter = [v for d in shape for v in (d, 1)]
        big = [v for d, f in zip(shape, whole) for v in (d, f)]
        y = imp.emit(graph.BroadcastOp, imp.reshape(x, inter), shape=big)
        return [imp.reshape(y, out)]
    y = x
    for ax in reversed(range(r)):
        roi_ax = None if full_roi is None else [full_roi[ax], full_roi[r + ax]]
        m, c = _resize_matrix(imp, a, shape[ax], out[ax], scale[ax], roi_ax)
        if out[ax] == shape[ax] and np.array_equal(m, np.eye(shape[ax])) and not c.any():
            continue
        y = _apply_along(imp, y, ax, m, c, a["mode"] == "nearest")
    return [y]


def _whole_factor_upsampling(a: dict, shape, out, scale) -> list[int] | None:
    """The per-axis factors when a nearest Resize repeats every element k times."""
    if a["mode"] != "nearest":
        return None
    factors = []
    for ax, (size, o) in enumerate(zip(shape, out)):
        if a["coordinate_transformation_mode"] == "tf_crop_and_resize":
            return None
        src = _nearest_source(a, size, o, scale[ax])
        k = o // size if size and o % size == 0 else 0
        if k < 1 or not np.array_equal(src, np.arange(o) // k):
            return None
        factors.append(k)
    return factors


def _resize_matrix(imp: NodeContext, a: dict, n_in: int, n_out: int, scale: float, roi):
    """(M, c) with y[o] = sum_j M[o, j] x[j] + c[o]: onnx's 1-D interpolation of the basis
    vectors (extrapolation value 0), and of zeros (the extrapolation value alone)."""
    from onnx.reference.ops import op_resize as ref

    if n_in * n_out > 1 << 22:
        raise imp.error(f"Resize of an axis from {n_in} to {n_out} is too large for dlpc")
    mode = a["mode"]
    if mode == "nearest" and a["coordinate_transformation_mode"] == "tf_half_pixel_for_nn":
        # (onnx's 1-D interpolation does not know this opset-11-to-17 mode: a selection)
        m = np.zeros((n_out, n_in))
        m[np.arange(n_out), _nearest_source(a, n_in, n_out, scale)] = 1.0
        return m, np.zeros(n_out)
    if mode == "nearest":

        def coeffs(ratio, scale):
            return ref._nearest_coeffs(ratio, mode=a["nearest_mode"])

    elif mode == "cubic":
        cubic = ref._cubic_coeffs_antialias if a["antialias"] else ref._cubic_coeffs

        def coeffs(ratio, scale):
            return cubic(ratio, scale, A=a["cubic_coeff_a"])

    else:
        coeffs = ref._linear_coeffs_antialias if a["antialias"] else ref._linear_coeffs

    def interp(data: np.ndarray, o: int, extrapolation: float) -> float:
        return float(
            ref._interpolate_1d_with_x(
                data,
                scale,
                n_out,
                float(o),
                coeffs,
                roi=roi,
                extrapolation_value=extrapolation,
                coordinate_transformation_mode=a["coordinate_transformation_mode"],
                exclude_outside=bool(a["exclude_outside"]),
            )
        )

    eye = np.eye(n_in)
    m = np.array([[interp(eye[j], o, 0.0) for j in range(n_in)] for o in range(n_out)])
    zeros = np.zeros(n_in)
    c = np.array([interp(zeros, o, float(a["extrapolation_value"])) for o in range(n_out)])
    return m.reshape(n_out, n_in), c


def _apply_along(imp: NodeContext, x: Value, ax: int, m: np.ndarray, c: np.ndarray, select: bool):
    """y = M x + c along axis `ax`: a gather of the selected positions when every row of M
    selects one element (nearest), else a matmul with M^T with `ax` moved last."""
    shape = imp.shape(x)
    n_out = m.shape[0]
    dt = imp.dtype(x)
    if select and np.all((m == 0) | (m == 1)) and np.all(m.sum(axis=1) <= 1):
        y = imp.emit(graph.GatherOp, x, Const(m.argmax(axis=1).astype(np.int64)), axis=ax)
        outside = m.sum(axis=1) == 0
        if outside.any():  # (tf_crop_and_resize: outside the roi, the extrapolation value)
            bshape = [1] * len(shape)
            bshape[ax] = n_out
            y = imp.emit(
                graph.WhereOp,
                Const(outside.reshape(bshape)),
                Const(c.astype(dt).reshape(bshape)),
                y,
            )
        return y
    perm = [i for i in range(len(shape)) if i != ax] + [ax]
    xt = imp.emit(graph.TransposeOp, x, perm=tuple(perm)) if ax != len(shape) - 1 else x
    rest = [shape[i] for i in perm[:-1]]
    flat = imp.reshape(xt, (math.prod(rest), shape[ax]))
    y = imp.emit(graph.MatMulOp, flat, Const(np.ascontiguousarray(m.T).astype(dt)))
    if c.any():
        y = imp.emit(graph.AddOp, y, Const(c.astype(dt)))
    y = imp.reshape(y, (*rest, n_out))
    if ax != len(shape) - 1:
        inv = [perm.index(i) for i in range(len(shape))]
        y = imp.emit(graph.TransposeOp, y, perm=tuple(inv))
    return y
