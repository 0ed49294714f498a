"""Where Q/DQ pairs go so that TensorRT fuses them: the placement rules.

TensorRT builds an explicitly quantized network exactly as the Q/DQ nodes say,
so *where* they sit decides which layers run in INT8 (or FP8) and which fusions
stay possible. This module decides placement only; :mod:`.export` writes the
nodes. The rules follow NVIDIA's "Q/DQ layer-placement recommendations" (TensorRT
developer guide) as implemented by TensorRT Model Optimizer (``modelopt.onnx``)
and pytorch-quantization:

1. **Weighted layers**: every input of Conv, ConvTranspose, Gemm and MatMul quantized (activations per tensor,
   weights per channel); their outputs are not, so epilogues still fuse.
2. **Residual add** (:mod:`.residual_adds`): the skip input quantized so the add fuses into the conv branch; both
   inputs after a gated activation (SiLU, HardSwish); a region choice overrides it.
3. **Pooling, where it helps**: a pool's input quantized when every reader of its output reads it quantized.
4. **Never inside LayerNorm, Softmax or GELU**, found as single ops and as their decomposed patterns.
5. **Matrix-vector layers stay float** (``skip_matrix_vector``): memory bound, INT8 gains nothing there.
6. **Grouped convolutions whose output is read in float stay float** (``keep_float_output_grouped_convs``):
   TensorRT 8.6 cannot fuse them.
7. **User exclusions** (by name, regex or op type) and **a node set** (the plan's) keep layers in high precision.
8. **Dense INT8 regions** (``dense_int8``, :mod:`.dense_int8`): quantize as an implicit INT8 engine runs.
9. **Data movement shares one scale** (:mod:`.scale_groups`): Split, Concat, MaxPool, nearest Resize.
10. **A weighted layer that reads a Softmax stays float** (YOLOv8's DFL conv).
11. **MatMul/Gemm layers that TensorRT 8.x compiles with Myelin next to a recurrence stay float** (:mod:`.myelin`).
12. **Sibling INT8 convs that all write float stay float** (TensorRT below 10, :mod:`.sibling_layers`).
13. **Myelin's MatMul weights in FP32 on the INT8 grid** (TensorRT below 10, :func:`.myelin.myelin_matmuls`).

Each rule's reasons and GPU evidence: ``docs/placement.md`` ("The placement rules").

Why hand-written and not a library: modelopt implements these rules but needs
torch, cupy and onnxruntime-gpu, far too heavy for a CPU / Binder tool whose core
must import on Python 3.9 with only numpy and onnx. onnx-graphsurgeon is light,
but placement only needs producer/consumer lookups, which
:class:`~trtwidgets.core.model.onnx_graph.GraphIndex` already gives over plain
``onnx`` protos; one less dependency keeps the core installable everywhere.
"""

from __future__ import annotations

from typing import AbstractSet, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import onnx

from ..model.onnx_graph import WEIGHTED_OPS, GraphIndex, attribute
from .dense_int8 import POOL_OPS, conv_output_reads, grouped_output_edges, shared_reads
from .exclusions import QdqExclusionError, kept_float_by_plan, match_exclusions
from .fusions import epilogue_end
from ..model.graph_patterns import (PROTECTED_OPS, PatternMatch, ConstIndex, node_key,
                             find_protected_patterns, node_label)
from .myelin import recurrent_myelin_layers
from .placement_records import Placement, QuantEdge, Skip, WeightSite
from .region_choices import FLOAT, choice_nodes
from .residual_adds import place_residual_adds
from .scale_groups import scale_group_edges, softmax_fed_layers_float

__all__ = [
    "WEIGHTED_OPS", "POOL_OPS", "COPY_OPS", "QdqExclusionError",
    "QuantEdge", "WeightSite", "Skip", "PatternMatch", "Placement",
    "node_label", "find_protected_patterns", "match_exclusions", "place_qdq", "PROTECTED_OPS",
]

#: Ops that only move data: a Q/DQ commutes with them.
COPY_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity")

# Which inputs of a weighted op carry data (the rest, e.g. bias, stay float).
_DATA_INPUTS = {"Conv": (0, 1), "ConvTranspose": (0, 1), "Gemm": (0, 1), "MatMul": (0, 1)}
_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                onnx.TensorProto.DOUBLE)


# ---------------------------------------------------------------------------- rules


def _weight_axis(node: onnx.NodeProto, input_index: int, rank: int) -> Optional[int]:
    op = node.op_type
    if input_index != 1 or rank < 1:
        return None
    if op == "Conv":
        return 0
    if op == "ConvTranspose":
        return 1 if rank > 1 else None
    if op == "Gemm":
        return 0 if attribute(node, "transB", 0) else (1 if rank > 1 else None)
    if op == "MatMul":
        return rank - 1 if rank > 1 else None
    return None


def _const_rank(index: GraphIndex, name: str) -> int:
    if name in index.initializers:
        return len(index.initializers[name].dims)
    arr = index.constant(name)
    return 0 if arr is None else arr.ndim





def _static_shapes(model) -> Dict[str, Tuple[Optional[int], ...]]:
    if not isinstance(model, onnx.ModelProto):
        return {}
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        return {}
    shapes: Dict[str, Tuple[Optional[int], ...]] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            # Unknown dims are None (exports write them as dim_param, unset, or a -1 dim_value).
            shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                                    for d in tt.shape.dim)
    return shapes


def _matrix_vector(node: onnx.NodeProto, shapes: Mapping[str, Tuple[Optional[int], ...]]) -> Optional[str]:
    """Why a weighted layer is a matrix-vector product (no INT8 speed-up), or None."""
    if node.op_type in ("Conv", "ConvTranspose"):
        shape = shapes.get(node.input[0])
        # With a static batch > 1 it is a real matrix product; a dynamic batch is usually 1 at inference.
        if shape and len(shape) > 2 and all(d == 1 for d in shape[2:]) and shape[0] in (None, 1):
            return "its input is 1x1 spatially (e.g. squeeze-excite after a global pool): a matrix-vector product"
    elif node.op_type in ("MatMul", "Gemm"):
        shape = shapes.get(node.output[0])
        if shape and len(shape) >= 2 and (shape[-1] == 1 or shape[-2] == 1):
            return "its output has a dimension of 1: a matrix-vector product"
    return None





def place_qdq(model, *, nodes: Optional[AbstractSet[str]] = None, exclude: Iterable[str] = (),
             exclude_op_types: Iterable[str] = (), skip_matrix_vector: bool = True,
             keep_float_output_grouped_convs: bool = True, dense_int8: bool = False, trt_version=None,
             choices: Optional[Mapping[str, str]] = None) -> Placement:
    """Decide where Q/DQ go (see the module docstring for the rules).

    Parameters
    ----------
    model : onnx.ModelProto or onnx.GraphProto
    nodes : set of str, optional
        The weighted layers (node labels) that may run in INT8; every other weighted layer
        stays in high precision ("kept float by the plan"). None: every layer the rules allow.
    exclude : iterable of str
        Node names, output tensor names or regular expressions to keep in high precision.
    exclude_op_types : iterable of str
        Op types to keep in high precision (e.g. ``"MatMul"``).
    skip_matrix_vector : bool
        Leave layers that are matrix-vector products (a Conv on a 1x1 spatial
        input, a MatMul/Gemm with an output dimension of 1, as far as static shape
        inference tells) in high precision: they are memory bound, INT8 gives no
        speed-up, and they cost accuracy (modelopt excludes GEMV MatMuls alike).
    keep_float_output_grouped_convs : bool
        Leave a grouped (e.g. depthwise) Conv in high precision when its output,
        after what TensorRT fuses into it, is read in float (rule 6): TensorRT 8.6
        cannot fuse such a layer and computed wrong results on that path.
    dense_int8 : bool
        Quantize the way an implicit INT8 engine runs (rule 8): a grouped conv whose
        output is read in float is quantized *with* its output (a Q/DQ on the tensor
        it writes, before a gated activation), so TensorRT fuses it INT8 in and out
        (it stays float only where it writes a graph output); a quantized layer
        whose output (after its fused epilogue) is read in float only by point-wise,
        pooling or Concat layers writes it quantized; and every such reader of a
        quantized tensor reads it through the same Q/DQ, so its producer writes INT8
        once instead of a float tensor plus a separate quantize layer. Wins over
        ``keep_float_output_grouped_convs``.
    trt_version : str, optional
        The TensorRT the model is for. Below 10, or None (unknown: the form every
        TensorRT builds), MatMul/Gemm layers that Myelin compiles with a recurrence stay
        float (rule 11).
    choices : mapping of str to str, optional
        Node label -> placement choice (:mod:`.region_choices`: a residual Add's ``"skip"`` or ``"both"``,
        ``"float"`` for a node without weights that reads its inputs in float).

    Returns
    -------
    Placement

    Raises
    ------
    QdqExclusionError
        An exclusion that matches nothing, or ``nodes`` naming a layer the model does not have.
    """
    graph = model.graph if isinstance(model, onnx.ModelProto) else model
    index = ConstIndex(graph)
    pos = {node_key(n): i for i, n in enumerate(graph.node)}
    excluded, warnings = match_exclusions(graph, list(exclude), list(exclude_op_types))
    by_user = tuple(node_label(graph.node[i]) for i in sorted(excluded))
    if nodes is not None:
        for i, why in kept_float_by_plan(graph, nodes).items():
            excluded.setdefault(i, why)
    patterns = find_protected_patterns(graph, index)
    shapes = _static_shapes(model) if skip_matrix_vector else {}
    protected_nodes = {i for p in patterns for i in p.nodes}
    internal = {t: p.kind for p in patterns for t in p.internal_tensors}
    myelin_float = recurrent_myelin_layers(graph, trt_version)
    chosen = choice_nodes(graph, choices or {})
    floats = {i: "reads its inputs in float (its placement choice)" for i, c in chosen.items() if c == FLOAT}

    # Rule 6 needs the finished placement (which reads get a Q), and leaving a conv float
    # removes the Q on its input, which can leave another grouped conv's output read in
    # float: place, find such convs, and place again until none is added (the set only grows).
    keep_float: Dict[int, str] = {}
    dense: Dict[int, str] = {}  # grouped conv -> the tensor it writes, quantized (dense_int8)
    while True:
        edges, weights, skipped, fused_adds, float_readers = _place(
            graph, index, pos, excluded, internal, protected_nodes, shapes, skip_matrix_vector, keep_float,
            myelin_float, chosen)
        if not keep_float_output_grouped_convs and not dense_int8:
            break
        quantized = {e.node for e in edges if e.rule == "weighted-op input"}
        found = {}
        dense.clear()
        for i in sorted(quantized - set(keep_float)):
            node = graph.node[i]
            if node.op_type != "Conv" or (attribute(node, "group", 1) or 1) <= 1:
                continue
            # A gated activation (decomposed HardSwish / Swish) is a pointwise layer of its own after a grouped
            # conv: TensorRT 8.6 left such a depthwise conv unfused in FP32 (tests/gpu/test_qdq_blocks.py, H100).
            end = epilogue_end(index, node.output[0], fused_adds.get(i, set()), through_gates=False)
            readers = float_readers(end)
            if readers and dense_int8 and "the graph output" not in readers and \
                    "no quantized reader" not in readers and end not in internal:
                dense[i] = end
            elif readers:
                found[i] = _grouped_reason(readers)
        if not found:
            break
        keep_float.update(found)
    if dense_int8:
        edges.extend(grouped_output_edges(graph, index, pos, edges, dense, keep_float))
        ends = {i: epilogue_end(index, graph.node[i].output[0], fused_adds.get(i, set()))
                for i in {e.node for e in edges if e.rule == "weighted-op input"} - set(dense)
                if graph.node[i].op_type in ("Conv", "ConvTranspose")}
        edges.extend(conv_output_reads(graph, index, pos, edges, ends, internal))
        edges.extend(shared_reads(graph, index, pos, edges, {**excluded, **floats}, internal))

    edges, weights, skipped, shared = _family_rules(graph, index, pos, edges, weights, skipped, patterns,
                                                    {**excluded, **floats}, internal)
    edges = [e for e in edges if e.node not in floats]  # rules 3 and 8 on a node its choice keeps float
    edges.sort(key=lambda e: (e.node, e.input_index))
    return Placement(edges=tuple(edges), weights=tuple(weights), skipped=tuple(skipped), patterns=patterns,
                   excluded=by_user, warnings=warnings,
                   shared_scales=shared)


def _family_rules(graph, index, pos, edges, weights, skipped, patterns, excluded, internal):
    """Rules 10 (a Softmax-fed weighted layer stays float) and 9 (data movement shares one scale)."""
    edges, weights, more_skips = softmax_fed_layers_float(graph, index, list(edges), list(weights), patterns)
    more, shared = scale_group_edges(graph, index, pos, edges, excluded, internal)
    edges.extend(more)
    pooled = {e.node_label for e in edges}
    # A pool rule 3 left float but rule 9 quantized: drop the stale reason.
    skipped = [s for s in skipped if not (s.rule == 3 and s.node_label in pooled)] + more_skips
    return edges, weights, skipped, shared


def _by_rule(rule: int, node_label: str, op_type: str, reason: str, tensor: str = "") -> Skip:
    """A :class:`Skip` that names the rule (the module docstring's number) that made it."""
    return Skip(node_label, op_type, reason, tensor, rule=rule)


def _grouped_reason(readers: Sequence[str]) -> str:
    shown = ", ".join(dict.fromkeys(readers))
    return ("kept in high precision: a grouped (e.g. depthwise) convolution whose output is read in float "
            f"(by {shown}), not through a QuantizeLinear. TensorRT 8.6 cannot fuse such a layer: it dequantizes "
            "the weights and the input separately and runs the convolution in FP16, and on an H200 that path "
            "gave wrong results (demo cls engine cosine 0.75 vs FP32; 0.993 with these convolutions left float). "
            "keep_float_output_grouped_convs=False quantizes it anyway")


def _place(graph: onnx.GraphProto, index: ConstIndex, pos: Dict[tuple, int], excluded: Dict[int, str],
           internal: Dict[str, str], protected_nodes: Set[int], shapes: Mapping[str, Tuple[Optional[int], ...]],
           skip_matrix_vector: bool, keep_float: Mapping[int, str], myelin_float: Mapping[int, str],
           choices: Mapping[int, str]):
    """Rules 1-3 once, with the nodes in ``keep_float`` (rule 6) and ``myelin_float`` (rule 11) left in high precision.

    Returns the edges, weight sites, skips, the residual adds fused into each
    convolution (conv index -> node keys) and a function giving the float
    readers of a tensor (empty when every read is quantized).
    """
    edges: List[QuantEdge] = []
    weights: List[WeightSite] = []
    skipped: List[Skip] = []
    fused_adds: Dict[int, Set[tuple]] = {}

    def edge(i: int, k: int, rule: str) -> bool:
        node = graph.node[i]
        tensor = node.input[k]
        if tensor in internal:
            skipped.append(_by_rule(4, node_label(node), node.op_type, f"input is inside a {internal[tensor]} pattern", tensor))
            return False
        edges.append(QuantEdge(tensor, i, k, node_label(node), node.op_type, rule))
        return True

    _place_weighted(graph, index, excluded, internal, shapes, skip_matrix_vector, keep_float, myelin_float, edge,
                    weights, skipped)
    place_residual_adds(graph, index, pos, excluded, protected_nodes, edge, edges, skipped, fused_adds, choices)
    float_readers = _place_pooling(graph, index, pos, excluded, edge, edges, skipped)
    return edges, weights, skipped, fused_adds, float_readers


def _place_weighted(graph: onnx.GraphProto, index: ConstIndex, excluded: Dict[int, str], internal: Dict[str, str],
                    shapes: Mapping[str, Tuple[Optional[int], ...]], skip_matrix_vector: bool,
                    keep_float: Mapping[int, str], myelin_float: Mapping[int, str],
                    edge: Callable[[int, int, str], bool], weights: List[WeightSite], skipped: List[Skip]) -> None:
    """Rule 1: weighted layers (their data inputs through ``edge``, their weights as weight sites)."""
    for i, node in enumerate(graph.node):
        if node.op_type not in WEIGHTED_OPS or node.domain not in ("", "ai.onnx"):
            continue
        label = node_label(node)
        if i in excluded:
            skipped.append(_by_rule(7, label, node.op_type, excluded[i]))
            continue
        if i in myelin_float:
            skipped.append(_by_rule(11, label, node.op_type, myelin_float[i]))
            continue
        gemv = _matrix_vector(node, shapes) if skip_matrix_vector else None
        if gemv:
            skipped.append(_by_rule(5, label, node.op_type, f"kept in high precision: {gemv}"))
            continue
        if i in keep_float:
            skipped.append(_by_rule(6, label, node.op_type, keep_float[i]))
            continue
        data = [k for k in _DATA_INPUTS[node.op_type] if k < len(node.input) and node.input[k]]
        consts = [k for k in data if index.is_constant(node.input[k])]
        if node.op_type in ("Conv", "ConvTranspose") and 1 not in consts:
            skipped.append(_by_rule(1, label, node.op_type, "weights are not constant (computed at run time)"))
            continue
        if len(consts) == len(data):
            skipped.append(_by_rule(1, label, node.op_type, "all inputs are constant (folded by TensorRT)"))
            continue
        folded = [node.input[k] for k in consts if not index.is_direct_constant(node.input[k])]
        if folded:
            skipped.append(_by_rule(1, label, node.op_type, "weights are computed from constants at build time; fold them "
                                "first (polygraphy surgeon sanitize --fold-constants)", folded[0]))
            continue
        bad = [node.input[k] for k in consts if index.constant_dtype(node.input[k]) not in _FLOAT_TYPES]
        if bad:
            skipped.append(_by_rule(1, label, node.op_type, "weights are not floating point", bad[0]))
            continue
        if any(internal.get(node.input[k]) for k in data if k not in consts):
            skipped.append(_by_rule(4, label, node.op_type, "an input is inside a protected pattern"))
            continue
        for k in data:
            if k in consts:
                weights.append(WeightSite(node.input[k], i, k, label, node.op_type,
                                          _weight_axis(node, k, _const_rank(index, node.input[k]))))
            else:
                edge(i, k, "weighted-op input")


def _place_pooling(graph: onnx.GraphProto, index: GraphIndex, pos: Dict[tuple, int], excluded: Dict[int, str],
                   edge: Callable[[int, int, str], bool], edges: List[QuantEdge], skipped: List[Skip]
                   ) -> Callable[[str], List[str]]:
    """Rule 3: pooling, from the outputs backwards so that pool -> pool -> MatMul chains resolve.

    Returns the function giving the float readers of a tensor, over the finished placement.
    """
    quantized_reads = {(e.node, e.input_index) for e in edges}

    def float_readers(tensor: str, depth: int = 0) -> List[str]:
        """Who reads ``tensor`` in float (empty: every read goes through a Q)."""
        if any(o.name == tensor for o in graph.output):
            return ["the graph output"]
        cons = index.consumers.get(tensor, [])
        if not cons or depth > 6 or all(c.op_type in ("Shape", "Size") for c in cons):
            return ["no quantized reader"]
        found: List[str] = []
        for c in cons:
            if c.op_type in ("Shape", "Size"):
                continue  # reads only the shape, not the values
            ci = pos[node_key(c)]
            ks = [k for k, t in enumerate(c.input) if t == tensor]
            if all((ci, k) in quantized_reads for k in ks):
                continue
            if c.op_type in COPY_OPS and ks == [0] and ci not in excluded:
                found.extend(float_readers(c.output[0], depth + 1))
                continue
            found.append(node_label(c))
        return found

    for i in range(len(graph.node) - 1, -1, -1):
        node = graph.node[i]
        if node.op_type not in POOL_OPS or not node.input:
            continue
        if i in excluded:
            skipped.append(_by_rule(7, node_label(node), node.op_type, excluded[i]))
            continue
        if not float_readers(node.output[0]):
            if edge(i, 0, "pooling input (the pool runs in INT8 between quantized tensors)"):
                quantized_reads.add((i, 0))
        else:
            skipped.append(_by_rule(3, node_label(node), node.op_type,
                                "its output is not read quantized, so INT8 pooling would not pay off"))
    return float_readers

