"""A Concat between quantizers in an FP16/BF16 float part, written so that ONNX Runtime's default session loads it.

ONNX Runtime's extended optimizer (on by default) fuses ``DequantizeLinear -> Concat ->
QuantizeLinear`` into ``QLinearConcat``, which takes FP32 scales only, so an export with FP16
scales fails to load. :func:`fp32_concat_quantizers` writes each QuantizeLinear that reads such a
Concat in FP32: its input through a ``Cast`` to FP32, its scale an FP32 initializer of the same
value. The fusion no longer matches, and the model computes what it did (the Cast widens exactly).

TensorRT builds the same engine: in a weakly typed build (TensorRT 10) the Q/DQ layers alone fix
where INT8 runs, and the Concat's quantizer is still moved backward and equal-scale pairs removed;
a strongly typed build (TensorRT 11) keeps the Cast as a layer unless it fuses it into the quantizer.
Evidence: docs/evidence.md, "ort_concat".
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..model.graph_patterns import node_label
from ..model.onnx_graph import graph_values
from .float_part.storage import fresh_name

__all__ = ["ORT_CONCAT_REASON", "fp32_concat_quantizers"]

#: Why such a QuantizeLinear is written in FP32 (a row of the float part's ``kept_fp32``).
ORT_CONCAT_REASON = ("reads a Concat of dequantized tensors: ONNX Runtime's default session fuses DequantizeLinear -> "
                     "Concat -> QuantizeLinear into QLinearConcat, which takes FP32 scales only; the same scale in "
                     "FP32 and a Cast keep the pattern unfused (what TensorRT builds is the same)")


def _fused_concats(graph: onnx.GraphProto, values: Dict[str, onnx.TensorProto]) -> Dict[str, List[onnx.NodeProto]]:
    """Concat output -> the QuantizeLinears reading it, for each Concat ONNX Runtime's rule would fuse with a
    scale that is not FP32 (an FP32 export matches too, and loads: QLinearConcat takes its scales)."""
    made_by = {o: n for n in graph.node for o in n.output}
    readers: Dict[str, List[onnx.NodeProto]] = {}
    for n in graph.node:
        for x in n.input:
            readers.setdefault(x, []).append(n)
    outputs = {v.name for v in graph.output}

    def low_scale(n: onnx.NodeProto) -> bool:
        t = values.get(n.input[1]) if len(n.input) > 1 else None
        return t is not None and t.data_type != onnx.TensorProto.FLOAT

    out = {}
    for n in graph.node:
        if n.op_type != "Concat" or n.output[0] in outputs:
            continue
        read = [x for x in n.input if x]
        dqs = [d for x in read if (d := made_by.get(x)) is not None]
        qs = readers.get(n.output[0], [])
        if dqs and qs and len(dqs) == len(read) and all(d.op_type == "DequantizeLinear" for d in dqs) \
                and all(q.op_type == "QuantizeLinear" for q in qs) and any(map(low_scale, dqs + qs)):
            out[n.output[0]] = qs
    return out


def fp32_concat_quantizers(graph: onnx.GraphProto) -> List[Tuple[str, str]]:
    """Write each QuantizeLinear that reads a Concat of DequantizeLinears in FP32 (see the module docstring).

    Parameters
    ----------
    graph : onnx.GraphProto
        A Q/DQ model's graph with its float part converted; changed in place (Casts inserted before the
        QuantizeLinears, in topological order; an FP32 copy of each scale they read).

    Returns
    -------
    list of (str, str)
        Each QuantizeLinear written in FP32 (its label) and why.
    """
    values = graph_values(graph)
    fused = _fused_concats(graph, values)
    if not fused:
        return []
    taken = {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}
    taken |= {v.name for v in graph.input}
    casts: Dict[str, onnx.NodeProto] = {}  # Concat output -> its Cast to FP32
    wide: Dict[str, str] = {}              # low-precision scale -> its FP32 copy
    rows = []
    nodes = []
    for n in graph.node:
        qs = fused.get(n.input[0]) if n.op_type == "QuantizeLinear" else None
        if qs is not None and any(q is n for q in qs):
            src, scale = n.input[0], n.input[1]
            if src not in casts:
                out = fresh_name(f"{src}__fp32", taken)
                casts[src] = helper.make_node("Cast", [src], [out], name=fresh_name(f"{out}_Cast", taken),
                                              to=onnx.TensorProto.FLOAT)
                nodes.append(casts[src])
            if values[scale].data_type != onnx.TensorProto.FLOAT and scale not in wide:
                wide[scale] = fresh_name(f"{scale}__fp32", taken)
                arr = numpy_helper.to_array(values[scale]).astype(np.float32)  # exact: FP16/BF16 fit in FP32
                graph.initializer.append(numpy_helper.from_array(arr, wide[scale]))
            n.input[0], n.input[1] = casts[src].output[0], wide.get(scale, scale)
            rows.append((node_label(n), ORT_CONCAT_REASON))
        nodes.append(n)
    del graph.node[:]
    graph.node.extend(nodes)
    return rows
