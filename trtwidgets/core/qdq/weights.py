"""Symmetric per-channel weight quantization (INT8 and FP8 E4M3) for DequantizeLinear weights."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from ..calibration.fake_quant import QMAX, quantize_symmetric, weight_scales
from .fp8 import e4m3fn_to_float, float_to_e4m3fn

__all__ = ["PRECISIONS", "quantize_weight", "weight_tensor"]

#: Supported precisions -> (largest quantized magnitude, minimum opset).
PRECISIONS = {"int8": (QMAX["int8"], 13), "fp8": (QMAX["fp8"], 19)}


def quantize_weight(w: np.ndarray, axis: Optional[int], precision: str = "int8"
                    ) -> Tuple[np.ndarray, np.ndarray, float]:
    """Symmetric quantization of a weight tensor.

    Parameters
    ----------
    w : numpy.ndarray
        Float weights.
    axis : int or None
        Per-channel axis, or None for one scale.
    precision : {"int8", "fp8"}

    Returns
    -------
    (q, scale, max_rel_error)
        ``q`` is int8 values (int8) or E4M3FN codes (uint8); ``scale`` is float32 of
        shape ``(w.shape[axis],)`` or ``()``; ``max_rel_error`` is the largest
        round-trip error relative to ``max|w|``.
    """
    qmax = PRECISIONS[precision][0]
    w = np.asarray(w, dtype=np.float32)
    scale, bshape = weight_scales(w, axis, qmax)
    if precision == "int8":
        q = quantize_symmetric(w, scale.reshape(bshape), qmax).astype(np.int8)
        back = q.astype(np.float32) * scale.reshape(bshape)
    else:
        q = float_to_e4m3fn(w / scale.reshape(bshape))
        back = e4m3fn_to_float(q) * scale.reshape(bshape)
    top = float(np.abs(w).max()) if w.size else 0.0
    err = float(np.abs(back - w).max() / top) if top > 0 else 0.0
    return q, scale, err


def weight_tensor(name: str, arr: np.ndarray, precision: str) -> onnx.TensorProto:
    if precision == "fp8" and arr.dtype == np.uint8:
        t = onnx.TensorProto()
        t.name = name
        t.data_type = onnx.TensorProto.FLOAT8E4M3FN
        t.dims.extend(arr.shape)
        t.raw_data = np.ascontiguousarray(arr).tobytes()
        return t
    return numpy_helper.from_array(np.ascontiguousarray(arr), name)
