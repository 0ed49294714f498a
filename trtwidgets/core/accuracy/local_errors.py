"""The noise a node adds by itself: each node re-run alone on the candidate's own inputs.

The ``"local"`` growth of :func:`~trtwidgets.core.accuracy.layer_errors.layer_errors`:
every compared node becomes a one-node ONNX model, run in ONNX Runtime (or
``onnx.reference`` without it) on the tensors the candidate (e.g. a TensorRT
debug build) fed it, and its output is compared with the candidate's. What the
node inherits or amplifies from upstream cancels out; what is left is its own
loss, the best guide for which layers to keep out of INT8.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, cast

import numpy as np
import onnx

from .metrics import ComparisonError, OutputMetrics, compare_tensor
from .noise_db import nsr_db
from ..model.onnx_graph import GraphIndex

__all__ = ["local_errors"]


def _node_model(proto: onnx.ModelProto, index: GraphIndex, node: onnx.NodeProto,
                feeds: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    inputs: List[onnx.ValueInfoProto] = []
    inits: List[onnx.TensorProto] = []
    for name in node.input:
        if not name or name in [i.name for i in inputs] or name in [t.name for t in inits]:
            continue
        if name in feeds:
            a = feeds[name]
            inputs.append(onnx.helper.make_tensor_value_info(
                name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
        else:
            inits.append(onnx.numpy_helper.from_array(index.constant_value(name), name))
    outputs = [onnx.ValueInfoProto(name=o) for o in node.output if o]
    graph = onnx.helper.make_graph([node], "node", inputs, outputs, inits)
    m = onnx.helper.make_model(graph, opset_imports=list(proto.opset_import))
    m.ir_version = proto.ir_version
    return m


def _evaluate_node(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> Optional[List[np.ndarray]]:
    from ..common.ort import is_available, open_session

    try:
        if is_available():
            sess = open_session(model, optimization="disable", log_severity=4, purpose="run one node alone")
            return sess.run(None, feeds)
        from onnx.reference import ReferenceEvaluator

        return cast(List[np.ndarray], ReferenceEvaluator(model).run(None, dict(feeds)))
    except Exception:
        return None


def _folded_constant(proto: onnx.ModelProto, index: GraphIndex, name: str,
                     cache: Dict[str, Optional[np.ndarray]]) -> Optional[np.ndarray]:
    """Value of a tensor computed from constants only (e.g. Reshape(const, const)), else None."""
    if name in cache:
        return cache[name]
    graph_inputs = {i.name for i in proto.graph.input} - set(index.initializers)
    needed, stack, ok = set(), [name], True
    while stack and ok:
        t = stack.pop()
        if t in needed or t in index.initializers:
            continue
        node = index.producer.get(t)
        if node is None or t in graph_inputs:
            ok = False
            break
        needed.add(t)
        stack.extend(i for i in node.input if i)
    value = None
    if ok:
        nodes = [n for n in proto.graph.node if any(o in needed for o in n.output)]
        used = {i for n in nodes for i in n.input if i in index.initializers}
        graph = onnx.helper.make_graph(nodes, "const", [], [onnx.ValueInfoProto(name=name)],
                                       [index.initializers[i] for i in sorted(used)])
        m = onnx.helper.make_model(graph, opset_imports=list(proto.opset_import))
        m.ir_version = proto.ir_version
        values = _evaluate_node(m, {})
        value = None if values is None else np.asarray(values[0])
    cache[name] = value
    return value


def local_errors(proto: onnx.ModelProto, reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray],
                  metrics: Mapping[str, OutputMetrics]) -> Dict[str, float]:
    """Output -> NSR dB of the candidate against the model's node run on the candidate's inputs."""
    index = GraphIndex(proto.graph)
    graph_inputs = {i.name for i in proto.graph.input}
    folded: Dict[str, Optional[np.ndarray]] = {}
    out: Dict[str, float] = {}
    for node in proto.graph.node:
        targets = [o for o in node.output if o in metrics]
        if not targets or any(a.type == onnx.AttributeProto.GRAPH for a in node.attribute):
            continue
        feeds: Dict[str, np.ndarray] = {}
        ok = True
        for name in node.input:
            if not name or index.is_constant(name):
                continue
            # Candidate values where compared; tensors both sides share exactly (graph inputs,
            # shape arithmetic the reference exposes) from the reference.
            if name in metrics:
                feeds[name] = np.asarray(candidate[name])
            elif name in reference and (name in graph_inputs or name not in candidate):
                feeds[name] = np.asarray(reference[name])
            elif name in candidate:
                feeds[name] = np.asarray(candidate[name])
            else:
                value = _folded_constant(proto, index, name, folded)
                if value is None:
                    ok = False
                    break
                feeds[name] = value
        if not ok:
            continue
        for k, v in list(feeds.items()):
            ref_v = reference.get(k)
            if ref_v is not None and v.dtype != np.asarray(ref_v).dtype:
                feeds[k] = v.astype(np.asarray(ref_v).dtype)
        values = _evaluate_node(_node_model(proto, index, node, feeds), feeds)
        if values is None:
            continue
        by_name = dict(zip([o for o in node.output if o], values))
        for o in targets:
            try:
                m = compare_tensor(by_name[o], candidate[o], topk=(), name=o)
            except (ComparisonError, KeyError):
                continue
            out[o] = nsr_db(m)
    return out
