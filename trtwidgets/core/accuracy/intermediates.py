"""Intermediate tensors of an ONNX model, and the FP32 reference run that exposes them.

Per-layer error analysis compares the same tensors on two sides: ONNX Runtime
runs the model with every float intermediate added as a graph output
(:func:`with_intermediate_outputs`, :func:`run_reference`), and TensorRT builds a
debug engine with the same names marked as network outputs
(``trtwidgets.trt.debug_build``, which asks :func:`float_intermediates` for them).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
import onnx

from ..common.errors import UserError
from ..model.load import as_model_proto
from ..model.onnx_graph import GraphIndex

__all__ = ["float_intermediates", "with_intermediate_outputs", "run_reference"]

_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16)


def float_intermediates(proto: onnx.ModelProto) -> List[str]:
    """Names of the float tensors produced by nodes, in topological (node) order.

    Graph outputs are included; constants, shape arithmetic (anything computed
    from ``Shape``/``Size`` and constants only) and tensors whose type shape
    inference cannot tell are float are left out.
    """
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:
        inferred = proto
    types: Dict[str, int] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    # Only tensors that carry data derived from the inputs: shape arithmetic (Shape ->
    # Cast -> Div ...) is float in ONNX but a shape tensor in TensorRT, which cannot
    # be marked as an output and says nothing about accuracy.
    data = {i.name for i in proto.graph.input}
    names: List[str] = []
    seen = set()
    for node in proto.graph.node:
        if node.op_type in ("Constant", "Shape", "Size"):
            continue
        if not any(i in data for i in node.input if i):
            continue
        for out in node.output:
            if not out:
                continue
            data.add(out)
            if out not in seen and types.get(out) in _FLOAT_TYPES:
                seen.add(out)
                names.append(out)
    return names


def with_intermediate_outputs(proto: onnx.ModelProto, names: Optional[Sequence[str]] = None) -> onnx.ModelProto:
    """A copy of ``proto`` whose graph outputs also include ``names``.

    Parameters
    ----------
    proto : onnx.ModelProto
        Not modified.
    names : sequence of str, optional
        Tensors to expose; default :func:`float_intermediates`.

    Raises
    ------
    UserError
        A name is not produced by any node.
    """
    names = float_intermediates(proto) if names is None else list(names)
    index = GraphIndex(proto.graph)
    unknown = [n for n in names if n not in index.producer]
    if unknown:
        raise UserError(
            f"No node produces {', '.join(repr(n) for n in unknown[:5])}" + (" ..." if len(unknown) > 5 else "") + ".",
            "Only node outputs can be exposed as intermediate outputs.",
            "Pick names from float_intermediates(model).",
        )
    from ..calibration.collect import instrumented_model

    return instrumented_model(proto, names)


def run_reference(
    model,
    feeds: Mapping[str, np.ndarray],
    names: Optional[Sequence[str]] = None,
    providers: Optional[Sequence[str]] = None,
) -> Dict[str, np.ndarray]:
    """Run a model in ONNX Runtime (CPU by default) and return the named tensors.

    Parameters
    ----------
    model : str, path, onnx.ModelProto or LoadedModel
    feeds : mapping
        Input name -> array.
    names : sequence of str, optional
        Intermediate tensors to return besides the graph outputs; ``"all"`` is not
        accepted, pass ``float_intermediates(proto)``.
    providers : sequence of str, optional
        ORT execution providers; default CPU only (the FP32 reference).
    """
    from ..common.ort import open_session

    proto = as_model_proto(model)
    if names:
        proto = with_intermediate_outputs(proto, names)
    # No graph fusions: the reference must compute each exposed tensor as written.
    sess = open_session(proto, providers=providers, optimization="disable", purpose="compute the FP32 reference")
    out_names = sess.output_names
    values = sess.run(out_names, feeds)
    return dict(zip(out_names, values))
