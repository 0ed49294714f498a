"""Which float tensors must keep their FP32 type: read from the ONNX operator schemas.

Each ONNX operator schema types its inputs and outputs, either with a literal type
(``Resize``'s ``scales`` is ``tensor(float)``) or with a type variable whose
constraint lists the allowed types (``Range``'s ``T`` admits float, double and
int16/32/64, not float16). A float tensor may be written in a lower type (FP16,
BF16) only where every consumer's constraint for that input admits the type.

:func:`low_precision_blockers` finds those reads (the *pins*) and walks back from
each pinned tensor to its producer: a producer whose output shares a type variable
with some of its inputs (``Mul``, ``Concat``, ``Gather``...) must read those in the
same type, so they are pinned too; a producer whose output type is its own
(``Cast``, ``ConstantOfShape``, ``Constant``, ``Shape``) ends the walk. Every producer
reached is *kept*: it computes in FP32. This covers shape and index arithmetic
(``Range``, ``ConstantOfShape``, ``Expand``/``Tile``/``Reshape``/``Slice``
parameters), ``Resize`` scales, ``TopK``'s K and whatever the next opset adds, with
no list of ops to keep up to date.

Used by the float-part conversion (:mod:`trtwidgets.core.qdq.float_part.convert`) and by
lint (what the export will keep in FP32, and why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Mapping, Optional, Set, Tuple

import onnx
import onnx.defs

from .graph_patterns import node_label

__all__ = ["TypeBlockers", "allowed_input_types", "output_type_ties", "low_precision_blockers", "float_tensors",
           "onnx_type_name"]

_FLOATS = {onnx.TensorProto.FLOAT}


def onnx_type_name(elem_type: int) -> str:
    """``tensor(float16)`` for ``TensorProto.FLOAT16``, as the schemas write types."""
    name = onnx.helper.tensor_dtype_to_string(elem_type).replace("TensorProto.", "").lower()
    return {"float": "tensor(float)", "float16": "tensor(float16)", "bfloat16": "tensor(bfloat16)",
            "double": "tensor(double)"}.get(name, f"tensor({name})")


def _opsets(model: onnx.ModelProto) -> Dict[str, int]:
    return {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in model.opset_import}


def _schema(node: onnx.NodeProto, opsets: Mapping[str, int]):
    domain = "" if node.domain == "ai.onnx" else node.domain
    try:
        return onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
    except Exception:
        return None


def _formal(params, k: int):
    """The formal parameter that the ``k``-th actual input/output binds (variadic tails repeat)."""
    if k < len(params):
        return params[k]
    if params and params[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
        return params[-1]
    return None


def _allowed(schema, type_str: str) -> FrozenSet[str]:
    for c in schema.type_constraints:
        if c.type_param_str == type_str:
            return frozenset(c.allowed_type_strs)
    return frozenset([type_str])  # a literal type such as tensor(float)


def allowed_input_types(node: onnx.NodeProto, k: int, opsets: Mapping[str, int]) -> Optional[FrozenSet[str]]:
    """The types the schema allows for input ``k`` of ``node`` (None: no schema, a custom op)."""
    schema = _schema(node, opsets)
    if schema is None:
        return None
    p = _formal(schema.inputs, k)
    return None if p is None else _allowed(schema, p.type_str)


def output_type_ties(node: onnx.NodeProto, out_k: int, opsets: Mapping[str, int]) -> Optional[Tuple[int, ...]]:
    """Inputs of ``node`` whose type is tied to output ``out_k`` by one type variable (None: no schema)."""
    schema = _schema(node, opsets)
    if schema is None:
        return None
    out = _formal(schema.outputs, out_k)
    if out is None or out.type_str not in {c.type_param_str for c in schema.type_constraints}:
        return ()
    tied = []
    for k, x in enumerate(node.input):
        p = _formal(schema.inputs, k)
        if x and p is not None and p.type_str == out.type_str:
            tied.append(k)
    return tuple(tied)


def float_tensors(model: onnx.ModelProto, memo: Optional[dict] = None) -> Set[str]:
    """Names of the FP32 tensors of the top-level graph (shape inference, initializers, Constants).

    ``memo``: a dict kept across calls on Q/DQ copies of one graph (the planner's exports). Shape inference runs
    once; a later copy reuses its types, its new QuantizeLinear outputs being integers and its new
    DequantizeLinear outputs FP32 (the scale's type before a float part is converted). A node of any other
    kind the memo has not seen makes it infer again.
    """
    known = memo.get("float_types") if memo is not None else None
    if known is not None:
        found = _known_floats(model, *known)
        if found is not None:
            return found
    names = _inferred_floats(model)
    if memo is not None:
        typed = {o for n in model.graph.node for o in n.output} | {v.name for v in model.graph.input}
        memo["float_types"] = (frozenset(names), frozenset(typed))
    return names


def _known_floats(model: onnx.ModelProto, floats, typed) -> Optional[Set[str]]:
    """The float tensors of ``model`` from an earlier inference of the same graph with other Q/DQ nodes, or None."""
    out = {t.name for t in model.graph.initializer if t.data_type in _FLOATS}
    out.update(v.name for v in list(model.graph.input) + list(model.graph.output) if v.name in floats)
    for n in model.graph.node:
        for o in n.output:
            if o in typed:
                if o in floats:
                    out.add(o)
            elif n.op_type == "DequantizeLinear":
                out.add(o)
            elif n.op_type != "QuantizeLinear" and o:
                return None
    return out


def _inferred_floats(model: onnx.ModelProto) -> Set[str]:
    graph = model.graph
    names = {t.name for t in graph.initializer if t.data_type in _FLOATS}
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    for vi in list(inferred.graph.value_info) + list(graph.input) + list(graph.output):
        if vi.type.tensor_type.elem_type in _FLOATS:
            names.add(vi.name)
    typed = {vi.name for vi in list(inferred.graph.value_info) + list(graph.input) + list(graph.output)
             if vi.type.tensor_type.elem_type}
    opsets = _opsets(model)
    for n in graph.node:
        if _schema(n, opsets) is None and any(x in names for x in n.input):
            # A custom op inference cannot type: float in, float out is the common case (plugins).
            names.update(o for o in n.output if o and o not in typed)
        if n.op_type == "Constant":
            for a in n.attribute:
                if (a.name == "value" and a.t.data_type in _FLOATS) or a.name in ("value_float", "value_floats"):
                    names.update(n.output)
    return names


@dataclass(frozen=True)
class TypeBlockers:
    """Where a float part in a lower type must keep FP32.

    Attributes
    ----------
    reads : dict of (int, int) to str
        ``(node index, input index)`` whose schema refuses the lower type -> why.
    kept_nodes : dict of int to str
        Node index -> why it computes in FP32 (it produces a pinned tensor).
    pinned : dict of str to str
        Tensor -> why it stays FP32.
    """

    reads: Dict[Tuple[int, int], str]
    kept_nodes: Dict[int, str]
    pinned: Dict[str, str]


def _direct_reads(graph: onnx.GraphProto, opsets, floats: Set[str], low: str) -> Dict[Tuple[int, int], str]:
    reads: Dict[Tuple[int, int], str] = {}
    for i, n in enumerate(graph.node):
        for k, x in enumerate(n.input):
            if not x or x not in floats:
                continue
            allowed = allowed_input_types(n, k, opsets)
            # A custom op (allowed is None) is kept whole below: Casts at its inputs, producers untouched.
            if allowed is not None and low not in allowed:
                reads[(i, k)] = (f"{n.op_type} input {k} takes {', '.join(sorted(allowed))}, "
                                 f"not {low} (ONNX schema)")
    return reads


def _refused_outputs(n: onnx.NodeProto, i: int, opsets, floats: Set[str], low: str, kept: Dict[int, str],
                     pinned: Dict[str, str], todo: List[str]) -> None:
    """An output whose constraint refuses the low type (ConstantOfShape's T2 before BF16) keeps the node FP32."""
    schema = _schema(n, opsets)
    if schema is None:
        return
    for k, o in enumerate(n.output):
        p = _formal(schema.outputs, k) if o in floats else None
        if p is None or low in _allowed(schema, p.type_str):
            continue
        kept.setdefault(i, f"{n.op_type} output {k} takes {', '.join(sorted(_allowed(schema, p.type_str)))}, "
                           f"not {low} (ONNX schema)")
        for x in (n.input[j] for j in output_type_ties(n, k, opsets) or ()):
            if x in floats and x not in pinned:
                pinned[x] = f"tied by type to {n.op_type} output {o}, which stays FP32"
                todo.append(x)


def _walk_back(graph: onnx.GraphProto, opsets, floats: Set[str], kept: Dict[int, str], pinned: Dict[str, str],
               todo: List[str]) -> None:
    """From each pinned tensor to its producer (kept), and on through inputs tied to it by a type variable."""
    producer = {o: (i, k) for i, n in enumerate(graph.node) for k, o in enumerate(n.output) if o}
    seen: Set[str] = set()
    while todo:
        t = todo.pop()
        if t not in producer or t in seen:
            continue  # a graph input or an initializer: its FP32 value is read as it is
        seen.add(t)
        i, out_k = producer[t]
        node = graph.node[i]
        kept.setdefault(i, f"computes {t}, which stays FP32 ({pinned[t]})")
        ties = output_type_ties(node, out_k, opsets)
        if ties is None:  # a custom op: its inputs keep their types too
            ties = tuple(range(len(node.input)))
        for k in ties:
            x = node.input[k]
            if x and x in floats and x not in pinned:
                pinned[x] = f"tied by type to {node.op_type} output {t}, which stays FP32"
                todo.append(x)


def low_precision_blockers(model: onnx.ModelProto, low_type: int = onnx.TensorProto.FLOAT16,
                           extra: Optional[Mapping[str, str]] = None, floats: Optional[Set[str]] = None) -> TypeBlockers:
    """The reads, tensors and nodes that must stay FP32 if the float part becomes ``low_type``.

    Parameters
    ----------
    model : onnx.ModelProto
        A float (or Q/DQ) model; not modified.
    low_type : int
        ``TensorProto.FLOAT16`` or ``BFLOAT16``.
    extra : mapping of str to str, optional
        More tensors to pin (e.g. values read inside If/Loop bodies) -> why.
    floats : set of str, optional
        The model's FP32 tensors, when the caller has them (:func:`float_tensors`).

    Returns
    -------
    TypeBlockers
    """
    graph = model.graph
    opsets = _opsets(model)
    low = onnx_type_name(low_type)
    floats = float_tensors(model) if floats is None else floats
    reads = _direct_reads(graph, opsets, floats, low)
    pinned: Dict[str, str] = {}
    for (i, k), why in reads.items():
        pinned.setdefault(graph.node[i].input[k], f"read by {node_label(graph.node[i])}: {why}")
    for t, why in dict(extra or {}).items():
        pinned.setdefault(t, why)
    kept: Dict[int, str] = {}
    todo: List[str] = list(pinned)
    for i, n in enumerate(graph.node):
        _refused_outputs(n, i, opsets, floats, low, kept, pinned, todo)
    for (i, k), why in reads.items():
        # An output tied to a refused input (Range's T) is FP32 too: the node computes in FP32.
        node = graph.node[i]
        if any(k in (output_type_ties(node, o, opsets) or ()) for o in range(len(node.output))):
            kept.setdefault(i, why)
    _walk_back(graph, opsets, floats, kept, pinned, todo)
    # A custom op's float outputs are FP32 whatever the float part is.
    for i, n in enumerate(graph.node):
        if _schema(n, opsets) is None and any(x in floats for x in list(n.input) + list(n.output)):
            kept.setdefault(i, f"{n.domain or 'ai.onnx'}::{n.op_type} has no ONNX schema (a custom op): FP32 is safe")
    return TypeBlockers(reads=reads, kept_nodes=kept, pinned=pinned)
