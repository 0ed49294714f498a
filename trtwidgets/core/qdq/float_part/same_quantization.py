"""The FP32 reference of the export check, quantized as the export is: its Q/DQ scales and stored weights.

Converting the float part to FP16 (or BF16) rounds every Q/DQ scale to that type (raising a
QuantizeLinear scale below 2**-14, re-quantizing a stored weight whose scale rounds to 0). Compared
with the unrounded scales, the values next to an INT8 step flip: that is the scales' rounding, not
the float part's precision. :func:`carrying_scales` gives the FP32 reference the values the
conversion wrote (its own record, :attr:`~.report.FloatPartReport.qdq_values`),
widened back to FP32, so that the check (:mod:`..export_check`) compares the float parts alone.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .report import FloatPartReport
from ...model.graph_patterns import node_label

__all__ = ["carrying_scales", "same_quantization"]

_QDQ = ("QuantizeLinear", "DequantizeLinear")


def _graph_values(graph: onnx.GraphProto):
    """``(initializers by name, Constant value by output, Cast (input, to) by output)`` of ``graph``."""
    inits = {t.name: t for t in graph.initializer}
    consts: Dict[str, onnx.TensorProto] = {}
    casts: Dict[str, Tuple[str, int]] = {}
    for n in graph.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = a.t
        elif n.op_type == "Cast" and n.input and n.output:
            casts[n.output[0]] = (n.input[0], next((a.i for a in n.attribute if a.name == "to"), 0))
    return inits, consts, casts


def _constant(values, name: str) -> Optional[np.ndarray]:
    """The constant value of tensor ``name`` (an initializer or a Constant, through Casts), or None when computed."""
    inits, consts, casts = values
    to: List[int] = []
    while name in casts and name not in inits and name not in consts and len(to) < 8:
        name, t = casts[name]
        to.append(t)
    t = inits.get(name, consts.get(name))
    if t is None:
        return None
    a = numpy_helper.to_array(t)
    for dtype in reversed(to):  # the Casts, innermost first: a Cast to FP16 rounds, one to FP32 widens exactly
        a = a.astype(helper.tensor_dtype_to_np_dtype(dtype))
    return a


def same_quantization(model: onnx.ModelProto, reference: onnx.ModelProto, conversion: FloatPartReport
                       ) -> Tuple[onnx.ModelProto, int, int, str]:
    """``(reference, scales replaced, stored weights replaced, the model's scale type)``: ``reference`` (the Q/DQ
    model with an FP32 float part) given the Q/DQ scales and stored weight values that the float part's conversion
    wrote into ``model``, widened back to FP32.

    The conversion rounds every Q/DQ scale to the float part's type (raising a QuantizeLinear scale below
    2**-14 to 2**-14, re-quantizing a stored weight whose scale rounds to 0): compared with the unrounded
    scales, the values next to an INT8 step flip, which is the scales' rounding, not the float part's
    precision. With the same scales and integers on both sides, the cosine measures the float part alone.
    Which values those are is the conversion's own record (``conversion.qdq_values``: the reading node by its
    index in the FP32 model, the input, the name in ``model``), not a guess from node names. A scale that other
    nodes read too gets a copy of its own, so that only the Q/DQ nodes read the new values.

    Raises
    ------
    ValueError
        A record whose node is not the reference's (the reference is not the model that was converted).
    """
    ref_values, values = _graph_values(reference.graph), _graph_values(model.graph)
    changes: Dict[Tuple[int, int], np.ndarray] = {}  # (node index, input index) -> new value
    kinds: Dict[str, str] = {}
    for v in conversion.qdq_values:
        n = reference.graph.node[v.node_index] if 0 <= v.node_index < len(reference.graph.node) else None
        if n is None or n.op_type not in _QDQ or node_label(n) != v.node or len(n.input) <= v.slot:
            raise ValueError(f"the conversion wrote {v.name} for node {v.node} (#{v.node_index}), which the "
                             "reference does not have there")
        old, new = _constant(ref_values, n.input[v.slot]), _constant(values, v.name)
        if old is None or new is None or new.shape != old.shape:
            continue
        if v.slot == 1:
            new = new.astype(np.float32)
        elif new.dtype != old.dtype:
            continue
        if not np.array_equal(old, new):
            changes[(v.node_index, v.slot)] = new
            kinds[n.input[v.slot]] = "scale" if v.slot == 1 else "weight"
    scale_type = conversion.dtype.upper() if any(v.slot == 1 for v in conversion.qdq_values) else ""
    if not changes:
        return reference, 0, 0, scale_type
    ref = onnx.ModelProto()
    ref.CopyFrom(reference)
    _apply(ref.graph, changes)
    n_scales = sum(1 for v in kinds.values() if v == "scale")
    return ref, n_scales, len(kinds) - n_scales, scale_type


def _apply(graph: onnx.GraphProto, changes: Mapping[Tuple[int, int], np.ndarray]) -> None:
    """Give each (node, input) of ``changes`` its new value: the initializer itself when only those inputs read
    it (all alike), else a copy of its own per input."""
    readers: Dict[str, List[Tuple[int, int]]] = {}
    for i, n in enumerate(graph.node):
        for k, x in enumerate(n.input):
            readers.setdefault(x, []).append((i, k))
    inits = {t.name: t for t in graph.initializer}
    listed = {v.name for v in graph.input}
    taken = set(inits) | {o for n in graph.node for o in n.output} | listed
    for name in dict.fromkeys(graph.node[i].input[k] for i, k in changes):
        slots = [(i, k) for i, k in readers[name] if (i, k) in changes]
        new_values = [changes[s] for s in slots]
        if name in inits and len(slots) == len(readers[name]) and \
                all(np.array_equal(new_values[0], v) for v in new_values[1:]):
            inits[name].CopyFrom(numpy_helper.from_array(new_values[0], name))
            continue
        for j, ((i, k), v) in enumerate(zip(slots, new_values)):  # shared with other readers: a copy each
            new = f"{name}__export_{j}"
            while new in taken:
                new += "_"
            taken.add(new)
            graph.initializer.append(numpy_helper.from_array(v, new))
            if inits and listed & set(inits):  # IR < 4: every initializer is a graph input too
                graph.input.append(helper.make_tensor_value_info(
                    new, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
            graph.node[i].input[k] = new


def carrying_scales(model: onnx.ModelProto, reference: onnx.ModelProto,
                     conversion: Optional[FloatPartReport], notes: List[str]) -> onnx.ModelProto:
    """The reference carrying the model's Q/DQ scales (:func:`same_quantization`), with its note; the reference
    as given (and why) when there is no record of the conversion or the record does not fit."""
    if conversion is None:
        if any(n.op_type in _QDQ for n in model.graph.node):
            notes.append("no record of the float part's conversion came with the reference: it keeps its own Q/DQ "
                         "scales, so the cosine includes their rounding to the float part's type")
        return reference
    try:
        ref, n_scales, n_weights, low = same_quantization(model, reference, conversion)
    except Exception as exc:
        notes.append(f"the reference keeps its FP32 Q/DQ scales ({type(exc).__name__}: {str(exc)[:200]}): the "
                     "cosine includes the scales' rounding to the float part's type")
        return reference
    if n_scales or n_weights:
        what = f"{n_scales} Q/DQ scale{'s' if n_scales != 1 else ''}"
        if n_weights:
            what += f" and {n_weights} re-quantized weight{'s' if n_weights != 1 else ''}"
        notes.append(f"the FP32 reference carries the export's {low or 'low-precision'} values ({what}), widened "
                     "to FP32: the cosine compares the float parts under the same quantization")
    return ref
