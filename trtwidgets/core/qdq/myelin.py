"""Layers that TensorRT 8.x hands to its Myelin backend, and what that means for INT8.

TensorRT 8.x compiles some subgraphs with Myelin instead of its per-layer kernels, and Myelin 8.6
cannot take INT8 weight constants (``convertMyelinWeightsToFp32 ... weights.type() != kINT8``).
Two kinds of weighted layers end up there:

* **Batched MatMuls** (activations of rank 3 or more): :func:`myelin_matmuls`. The export writes
  their weights in FP32 on the INT8 grid with their own Q/DQ pair (placement rule 13), and the
  planner keeps them in high precision below TensorRT 10, where INT8 does not pay. A rank-2 MatMul
  (a classifier's FC) becomes a convolution and is unaffected.
* **MatMul/Gemm layers next to a recurrence** (:func:`recurrent_myelin_layers`, placement rule
  11): TensorRT 8.6 gives a recurrence to Myelin together with the point-wise and data-movement ops
  around it and the MatMul/Gemm layers they connect; these stay in high precision (no Q/DQ, no INT8
  weights) for TensorRT 8.x.

The target decides as :func:`myelin_target` says; an unknown version is treated as 8.x.
Evidence: docs/placement.md (rules 11 and 13) and docs/evidence.md, "myelin".
"""

from __future__ import annotations

from collections import deque
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Union

import onnx

from ..model.onnx_graph import WEIGHTED_OPS
from ..model.graph_patterns import node_label

__all__ = ["myelin_matmuls", "myelin_target", "recurrent_myelin_layers", "MYELIN_QDQ_SLOWDOWN", "MYELIN_REASON",
           "MYELIN_RECURRENT_REASON", "RECURRENT_OPS"]

#: A Q/DQ MatMul in Myelin (TensorRT 8.x) against its FP16 time: MiniLM-L6 at batch 32 measured 1.59x (H200).
MYELIN_QDQ_SLOWDOWN = 1.5
MYELIN_REASON = ("TensorRT 8.x compiles this batched MatMul with Myelin, where INT8 does not pay: a Q/DQ "
                 "transformer ran 1.59x slower than FP16 there (MiniLM-L6, batch 32, H200); TensorRT 10+ differs")
MYELIN_RECURRENT_REASON = (
    "kept in high precision: TensorRT 8.x compiles this layer with Myelin together with the recurrence next to it, "
    "and Myelin 8.6 cannot take INT8 weights: the captcha CRNN's Q/DQ model with INT8 weights on its LSTM cells "
    "and classifier failed to build with 'convertMyelinWeightsToFp32 ... Assertion params.weights.type() != "
    "DataType::kINT8 failed' (H100, TensorRT 8.6); the rule holds for TensorRT 8.x only")

#: Ops that carry a state across time steps (ONNX's recurrent layers and loops).
RECURRENT_OPS = ("LSTM", "GRU", "RNN", "Loop", "Scan")
_MATMULS = ("MatMul", "Gemm")
#: Ops between a recurrence and its neighbours that Myelin takes with it: data movement, then point-wise math
#: (the captcha CRNN's region began at the last conv's residual Add, scale and ReLU).
_MOVEMENT = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Concat", "Split", "Slice",
             "Gather", "Expand", "Tile", "ReverseSequence", "Cast", "Dropout")
_POINTWISE = ("Add", "Sub", "Mul", "Div", "Neg", "Abs", "Max", "Min", "Sum", "Mean", "Relu", "LeakyRelu", "PRelu",
              "Elu", "Selu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Softplus", "Softsign", "Clip", "Exp",
              "Log", "Sqrt", "Reciprocal", "Pow", "Erf", "Gelu", "BatchNormalization")
_CONNECTING = frozenset(_MOVEMENT + _POINTWISE)
#: Of these ops only the first input is data; the rest (shapes, indices, bounds, scales) are not followed.
_FIRST_INPUT_ONLY = frozenset(("Reshape", "Squeeze", "Unsqueeze", "Split", "Slice", "Gather", "Expand", "Tile",
                               "ReverseSequence", "Dropout", "Clip", "BatchNormalization"))


def myelin_target(trt_version) -> Optional[bool]:
    """True for TensorRT 8.x, False for 10 and later, None when the version is unknown."""
    if trt_version is None:
        return None
    from ..model.trt_version import parse_trt_version

    return parse_trt_version(trt_version).major < 10


def myelin_matmuls(proto: onnx.ModelProto, nodes: Iterable[int], trt_version,
                   shapes: Optional[Mapping[str, Sequence[int]]] = None) -> Set[int]:
    """The MatMuls among ``nodes`` (indices into ``graph.node``) that TensorRT 8.x compiles with Myelin.

    Empty for TensorRT 10 and later; an unknown version is treated as 8.x. A MatMul counts when one
    of its activation inputs (never a weight: a weight's rank says nothing) has rank 3 or more. Ranks
    come from shape inference, completed where a Reshape's target is computed (:func:`_completed_ranks`),
    then from ``shapes`` (tensor -> shape, e.g. a sample run's); a rank still open counts, since the
    FP32 weight form builds either way. Evidence: docs/evidence.md, "myelin".
    """
    if myelin_target(trt_version) is False:
        return set()
    wanted = {i for i in nodes if proto.graph.node[i].op_type == "MatMul"}
    if not wanted:
        return set()
    constants = {t.name for t in proto.graph.initializer}
    constants.update(o for n in proto.graph.node if n.op_type == "Constant" for o in n.output)
    acts = {i: [x for x in proto.graph.node[i].input if x and x not in constants] for i in wanted}
    ranks = {k: len(v) for k, v in (shapes or {}).items() if v is not None}
    if any(x not in ranks for xs in acts.values() for x in xs):
        ranks = {**_completed_ranks(proto), **ranks}
    return {i for i, xs in acts.items() if not xs or any(x not in ranks or ranks[x] >= 3 for x in xs)}


def _completed_ranks(proto: onnx.ModelProto, rounds: int = 4) -> Dict[str, int]:
    """Tensor ranks from shape inference, and where a Reshape's target is computed, the target's length.

    Exporters build a Reshape's target from ``Shape`` (``Shape -> Slice -> Cast -> Concat`` with a
    constant, as paddle2onnx writes ``reshape(x, [batch, -1])``); ONNX shape inference leaves the
    result's rank open, and everything after it. The target's length is plain arithmetic on the
    lengths of 1-D integer tensors; a Reshape whose target length is known is given that rank and
    inference runs again (a few rounds: a later Reshape may depend on an earlier one). Empty when
    shape inference fails.
    """
    from onnx import helper, numpy_helper

    values = {t.name: t for t in proto.graph.initializer}
    values.update({n.output[0]: n.attribute[0].t for n in proto.graph.node
                   if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value"})
    consts = {k: numpy_helper.to_array(t) for k, t in values.items() if len(t.dims) <= 1 and t.data_type in _INTS}
    ranks: Dict[str, int] = {}
    work = proto
    for _ in range(rounds):
        try:
            work = onnx.shape_inference.infer_shapes(work)
        except Exception:
            return ranks
        types = {v.name: v.type.tensor_type for v in list(work.graph.value_info) + list(work.graph.input)
                 + list(work.graph.output)}
        ranks = {k: len(t.shape.dim) for k, t in types.items() if t.HasField("shape")}
        length = _vector_lengths(work.graph.node, ranks, consts)
        hinted = 0
        for n in work.graph.node:
            out = n.output[0] if n.output else ""
            elem = types[n.input[0]].elem_type if n.input and n.input[0] in types else 0
            if n.op_type != "Reshape" or out in ranks or n.input[1] not in length or not elem:
                continue
            for v in [v for v in work.graph.value_info if v.name == out]:  # an exporter's entry without a shape
                work.graph.value_info.remove(v)
            work.graph.value_info.append(helper.make_tensor_value_info(out, elem, [None] * length[n.input[1]]))
            hinted += 1
        if not hinted:
            break
    return ranks


_INTS = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)


def _vector_lengths(nodes, ranks: Mapping[str, int], consts) -> Dict[str, int]:
    """Lengths of the 1-D integer tensors a Reshape target is made of (``Shape``, ``Slice``, ``Concat``, ...)."""
    length = {k: int(v.size) for k, v in consts.items() if v.ndim == 1}
    scalars = {k for k, v in consts.items() if v.ndim == 0}
    for n in nodes:
        op, ins, out = n.op_type, list(n.input), (n.output[0] if n.output else "")
        if op == "Shape" and ins[0] in ranks:
            a = {x.name: x.i for x in n.attribute}
            length[out] = len(range(ranks[ins[0]])[a.get("start", 0):a.get("end", ranks[ins[0]])])
        elif op in ("Cast", "Identity", "Neg", "Abs") and ins[0] in length:
            length[out] = length[ins[0]]
        elif op in ("Add", "Sub", "Mul", "Div") and ins and all(i in length or i in scalars for i in ins) \
                and any(i in length for i in ins):
            length[out] = max(length[i] for i in ins if i in length)
        elif op == "Concat" and ins and all(i in length for i in ins):
            length[out] = sum(length[i] for i in ins)
        elif op == "Unsqueeze" and ins[0] in scalars:
            length[out] = 1
        elif op == "Gather" and len(ins) > 1 and ins[1] in consts:
            idx = consts[ins[1]]
            if idx.ndim == 0:
                scalars.add(out)
            else:
                length[out] = int(idx.size)
        elif op == "Slice" and ins[0] in length and all(i in consts for i in ins[1:3]) \
                and consts[ins[1]].size == 1 == consts[ins[2]].size:
            step = int(consts[ins[4]].ravel()[0]) if len(ins) > 4 and ins[4] in consts else 1
            end = int(min(consts[ins[2]].ravel()[0], 2 ** 62))
            length[out] = len(range(length[ins[0]])[int(consts[ins[1]].ravel()[0]):end:step or 1])
    return length


def recurrent_myelin_layers(model: Union[onnx.ModelProto, onnx.GraphProto], trt_version) -> Dict[int, str]:
    """The MatMul/Gemm layers with constant weights that TensorRT 8.x compiles with Myelin along with a recurrence.

    Returns node index (in ``graph.node``) -> reason; empty for TensorRT 10 and later or
    a model without a recurrence. A recurrence is an ``LSTM``, ``GRU``, ``RNN``, ``Loop``
    or ``Scan`` node, or an unrolled cell: MatMul/Gemm layers that share one constant
    weight where one's output reaches another's input through point-wise and
    data-movement ops only (the hidden state carried from step to step, as a traced
    ``LSTMCell`` loop exports it). Taken with it are the MatMul/Gemm layers whose input
    comes from, or whose output goes to, the recurrence (or a layer already taken)
    through point-wise and data-movement ops only, and every layer sharing a constant
    weight with a taken one (the same layer at another time step). Convolutions stay
    TensorRT's own and bound the region, as does any other op.
    """
    if myelin_target(trt_version) is False:
        return {}
    graph = model.graph if isinstance(model, onnx.ModelProto) else model
    nodes = list(graph.node)
    constants = {t.name for t in graph.initializer}
    constants.update(o for n in nodes if n.op_type == "Constant" for o in n.output)
    producer: Dict[str, int] = {}
    consumers: Dict[str, List[int]] = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer[o] = i
        for x in _inputs(n):
            consumers.setdefault(x, []).append(i)

    def data_inputs(n: onnx.NodeProto) -> List[str]:
        xs = _inputs(n)
        if n.op_type in _FIRST_INPUT_ONLY:
            xs = xs[:1]
        return [x for x in xs if x and x not in constants]

    def reads_as_data(n: onnx.NodeProto, tensor: str) -> bool:
        return tensor in data_inputs(n)

    # Weighted MatMul/Gemm layers, grouped by the constant weight they read.
    weight_of: Dict[int, str] = {}
    by_weight: Dict[str, List[int]] = {}
    for i, n in enumerate(nodes):
        if n.op_type in _MATMULS and n.domain in ("", "ai.onnx"):
            consts = [x for x in n.input[:2] if x in constants]
            acts = [x for x in n.input[:2] if x and x not in constants]
            if len(consts) == 1 and acts:
                weight_of[i] = consts[0]
                by_weight.setdefault(consts[0], []).append(i)

    def downstream(starts: Iterable[int], stop) -> Set[int]:
        """Nodes reading (as data) the outputs of ``starts``, through connecting ops; ``stop(i)`` ends a path."""
        seen: Set[int] = set()
        queue = deque(starts)
        while queue:
            i = queue.popleft()
            for o in nodes[i].output:
                for c in consumers.get(o, ()):
                    if c in seen or not reads_as_data(nodes[c], o):
                        continue
                    seen.add(c)
                    if not stop(c) and nodes[c].op_type in _CONNECTING:
                        queue.append(c)
        return seen

    # Seeds: recurrent ops, and unrolled cells (a shared weight whose layer feeds a later copy of itself).
    origin: Dict[int, str] = {i: f"{n.op_type} {node_label(n)}" for i, n in enumerate(nodes)
                              if n.op_type in RECURRENT_OPS and n.domain in ("", "ai.onnx")}
    for weight, members in by_weight.items():
        if len(members) < 2:
            continue
        mset = set(members)
        reached = downstream(members, lambda c: nodes[c].op_type in WEIGHTED_OPS)
        if reached & mset:
            origin.update({i: f"the unrolled recurrent cell of weight {weight}" for i in members})
    if not origin:
        return {}

    # Grow the region from the seeds: MatMul/Gemm layers joined to it through connecting ops, either way.
    region: Dict[int, str] = dict(origin)
    queue = deque(region)
    while queue:
        r = queue.popleft()
        why = region[r]
        found = downstream([r], lambda c: nodes[c].op_type in WEIGHTED_OPS or c in region)
        found |= _upstream(r, nodes, producer, data_inputs, region)
        for f in sorted(found):
            if f in region or nodes[f].op_type not in _MATMULS:
                continue
            for j in [f] + by_weight.get(weight_of.get(f, ""), []):
                if j not in region:
                    region[j] = why
                    queue.append(j)
    return {i: f"{MYELIN_RECURRENT_REASON} (with {why})" for i, why in sorted(region.items()) if i in weight_of}


def _inputs(node: onnx.NodeProto) -> List[str]:
    """A node's inputs, with the outer-scope names its subgraphs (Loop/Scan/If bodies) read."""
    xs = [x for x in node.input if x]
    for attr in node.attribute:
        for g in list(attr.graphs) + ([attr.g] if attr.HasField("g") else []):
            inner = {o for n in g.node for o in n.output} | {v.name for v in g.input} | {t.name for t in g.initializer}
            xs.extend(x for n in g.node for x in _inputs(n) if x not in inner and x not in xs)
    return xs


def _upstream(start: int, nodes, producer: Mapping[str, int], data_inputs, region) -> Set[int]:
    """Producers of ``start``'s data inputs, through connecting ops (a weighted op or a region node ends a path)."""
    seen: Set[int] = set()
    queue = deque([start])
    while queue:
        i = queue.popleft()
        for x in data_inputs(nodes[i]):
            p = producer.get(x)
            if p is None or p in seen:
                continue
            seen.add(p)
            if nodes[p].op_type in _CONNECTING and p not in region:
                queue.append(p)
    return seen
