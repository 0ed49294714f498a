"""numpy types of TensorRT data types, without ``tensorrt.nptype``.

``tensorrt.nptype`` lives in the ``tensorrt`` package, not in the bare
``tensorrt_bindings`` extension, so the common types are mapped by name and
``nptype`` is only asked for the rest.
"""

from __future__ import annotations

import numpy as np

from ..core.common.errors import TensorRTUnavailable, UserError
from .probe import enum_name, probe

__all__ = ["NUMPY_TYPES", "nptype", "numpy_dtype"]

#: TensorRT DataType name -> numpy dtype name.
NUMPY_TYPES = {"FLOAT": "float32", "HALF": "float16", "INT8": "int8", "INT32": "int32", "INT64": "int64",
               "BOOL": "bool", "UINT8": "uint8"}


def nptype(trt, dtype) -> np.dtype:
    """numpy dtype of a network input's TensorRT DataType, for calibration batches and scratch buffers.

    Raises
    ------
    TensorRTUnavailable
        A type numpy has no equivalent for, on a TensorRT without ``nptype``.
    """
    name = enum_name(dtype)
    if name in NUMPY_TYPES:
        return np.dtype(NUMPY_TYPES[name])
    fn = probe(trt, "nptype")
    if fn is None:
        raise TensorRTUnavailable(f"Network input type {name} has no numpy equivalent for calibration.",
                                  fix="Calibrate a model whose inputs are float32/float16/int8/int32.")
    return np.dtype(fn(dtype))


def numpy_dtype(trt_module, dtype) -> np.dtype:
    """The numpy dtype of an engine I/O tensor's ``tensorrt.DataType``.

    Raises
    ------
    UserError
        Types numpy cannot hold (BF16, FP8, INT4).
    """
    name = enum_name(dtype)
    if name in NUMPY_TYPES:
        return np.dtype(NUMPY_TYPES[name])
    fn = probe(trt_module, "nptype")
    try:
        if fn is not None:
            return np.dtype(fn(dtype))
    except Exception:
        pass
    raise UserError(f"TensorRT type {name} has no numpy equivalent.", None,
                    "Keep the engine's inputs and outputs in float32/float16/int32 (cast in the model).")
