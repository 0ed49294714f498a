"""The export's records as the model holds them: scales after the float part's conversion, and what it changed.

:class:`~..qdq_writer.QdqWriter` records each Q/DQ pair and stored weight with FP32 scales; the float
part's conversion (:func:`~.convert.convert_float_part`) then rounds the scales to FP16 / BF16 and
re-quantizes a weight whose scale rounds to 0, listing each value it wrote anew by the index of the Q/DQ
node reading it (:class:`~.convert.QdqValue`). :func:`as_written` joins the two: the report then says
what the file holds, and the export check reads it from there.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from ..export_report import QuantizedTensor, QuantizedWeight
from ...model.onnx_graph import graph_values
from .report import FloatPartReport

__all__ = ["as_written"]

_QDQ = ("QuantizeLinear", "DequantizeLinear")
_TYPE_NAMES: Dict[int, str] = {onnx.TensorProto.FLOAT: "fp32", onnx.TensorProto.FLOAT16: "fp16", onnx.TensorProto.BFLOAT16: "bf16"}


def as_written(activations: Sequence[QuantizedTensor], weights: Sequence[QuantizedWeight], before: onnx.ModelProto,
               after: onnx.ModelProto, conversion: FloatPartReport,
               original: Callable[[str], Optional[np.ndarray]]
               ) -> Tuple[Tuple[QuantizedTensor, ...], Tuple[QuantizedWeight, ...]]:
    """``(activations, weights)`` with the scales and values ``after`` holds.

    Parameters
    ----------
    activations, weights
        The writer's records (FP32 scales), their nodes named as in ``before``.
    before : onnx.ModelProto
        The Q/DQ model before the float part's conversion (its node order is the one ``conversion`` indexes).
    after : onnx.ModelProto
        The converted model.
    conversion : FloatPartReport
        What the conversion wrote anew (:attr:`~.convert.FloatPartReport.qdq_values`).
    original : callable
        Weight name -> its float value in the model before Q/DQ (the rounding error is measured against it).
    """
    at = {n.name: i for i, n in enumerate(before.graph.node) if n.op_type in _QDQ and n.name}
    changed = {(v.node_index, v.slot): v.name for v in conversion.qdq_values}
    new_values, old_values = graph_values(after.graph), graph_values(before.graph)
    acts = tuple(_activation(a, changed.get((at.get(a.quantize_node, -1), 1)), new_values) for a in activations)
    ws = []
    for w in weights:
        i = at.get(w.dequantize_node, -1)
        ws.append(_weight(w, changed.get((i, 1)), changed.get((i, 0)), new_values, old_values, original))
    return acts, tuple(ws)


def _activation(a: QuantizedTensor, name: Optional[str], values: Dict[str, onnx.TensorProto]) -> QuantizedTensor:
    if name is None or name not in values:
        return a
    t = values[name]
    return dataclasses.replace(a, scale=float(numpy_helper.to_array(t).astype(np.float32)),
                               scale_type=_TYPE_NAMES.get(t.data_type, str(t.data_type)))


def _weight(w: QuantizedWeight, scale_name: Optional[str], values_name: Optional[str],
            new: Dict[str, onnx.TensorProto], old: Dict[str, onnx.TensorProto],
            original: Callable[[str], Optional[np.ndarray]]) -> QuantizedWeight:
    if scale_name is None or scale_name not in new or w.scale_name not in old:
        return w
    s_old = numpy_helper.to_array(old[w.scale_name]).astype(np.float32)
    s_new = numpy_helper.to_array(new[scale_name]).astype(np.float32)
    changes: Dict[str, Any] = dict(scale_name=scale_name, scale_type=_TYPE_NAMES.get(new[scale_name].data_type, "fp32"),
                   scale_min=float(s_new.min()) if s_new.size else float("nan"),
                   scale_max=float(s_new.max()) if s_new.size else float("nan"),
                   scales_rounded=int(np.count_nonzero(s_new != s_old)))
    stored = old.get(w.values_name)
    if values_name is not None and values_name in new and stored is not None:
        moved = numpy_helper.to_array(new[values_name]) != numpy_helper.to_array(stored)
        if w.axis is not None and moved.ndim:
            moved = np.moveaxis(moved, w.axis, 0).reshape(moved.shape[w.axis], -1).any(axis=1)
        changes.update(values_name=values_name, requantized_channels=int(np.count_nonzero(moved)))
        stored = new[values_name]
    if stored is not None and w.stored != "float32 on the int8 grid":
        changes["max_rel_error"] = _rel_error(original(w.tensor), _decoded(stored), s_new, w.axis, w.max_rel_error)
    return dataclasses.replace(w, **changes)


def _decoded(t: onnx.TensorProto) -> np.ndarray:
    """The float32 values of stored codes (INT8 integers, or FP8 E4M3FN codes read from their bytes)."""
    if t.data_type == onnx.TensorProto.FLOAT8E4M3FN and t.raw_data:
        from ..fp8 import e4m3fn_to_float

        return e4m3fn_to_float(np.frombuffer(t.raw_data, np.uint8).reshape(tuple(t.dims)))
    return numpy_helper.to_array(t).astype(np.float32)


def _rel_error(weight: Optional[np.ndarray], values: np.ndarray, scale: np.ndarray, axis: Optional[int],
               fallback: float) -> float:
    """``max|W - values * scale| / max|W|`` (``fallback`` when the float weight is not at hand)."""
    if weight is None or weight.shape != values.shape:
        return fallback
    w = np.asarray(weight, np.float32)
    bshape = tuple(scale.size if i == axis else 1 for i in range(w.ndim)) if axis is not None else ()
    back = values * scale.reshape(bshape)
    top = float(np.abs(w).max()) if w.size else 0.0
    return float(np.abs(back - w).max() / top) if top > 0 else 0.0
