"""What a tensor is to the model: the classes of tensors whose INT8 range needs a rule of its own.

The range method ``auto`` (:mod:`trtwidgets.core.calibration.auto_ranges`) picks the range of
each tensor from its statistics, except where the graph says more than the histogram can:

* a **Softmax output** is bounded in ``[0, 1]`` and its few large values are the ones that
  matter (the attention a token pays); a clipping method cuts them (entropy gave a ViT's
  attention probabilities an amax of 0.139);
* **attention logits**, the product of two activations (``Q @ K^T``, scaled, masked) that a
  Softmax reads: Softmax turns their largest values into the weights, so clipping them
  changes which tokens are attended;
* **LayerNorm** inputs, inner tensors and outputs (a ``LayerNormalization`` op, or the
  ``ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div`` pattern exporters write): the
  residual stream and the normalised activations of transformers hold a few channels far
  larger than the rest (outlier features) that the next layers depend on;
* **GELU** inputs and inner tensors (``x * 0.5 * (1 + erf(x / sqrt 2))``, or tanh's form).

The patterns are :mod:`.graph_patterns`' (the same ones placement rule 4 keeps free of Q/DQ),
so a tensor is named as the export names it. :func:`tensor_roles` maps each such tensor to its
role; every other tensor has none.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Set

import onnx

from .graph_patterns import ConstIndex, find_protected_patterns, node_key, nonconst_inputs

__all__ = ["ROLES", "ROLE_TEXT", "tensor_roles"]

#: The roles, most specific first: a tensor with two roles gets the first.
ROLES = ("softmax_output", "attention_logits", "softmax_input", "layernorm_internal", "layernorm_output",
         "layernorm_input", "gelu_internal", "gelu_input", "gelu_output")
#: Each role in words (messages, the calibration's reasons).
ROLE_TEXT = {
    "softmax_output": "Softmax output",
    "attention_logits": "attention logits (a product of two activations that a Softmax reads)",
    "softmax_input": "Softmax input",
    "layernorm_internal": "inside a LayerNorm",
    "layernorm_output": "LayerNorm output",
    "layernorm_input": "LayerNorm input",
    "gelu_internal": "inside a GELU",
    "gelu_input": "GELU input",
    "gelu_output": "GELU output",
}
#: Element-wise ops between an attention MatMul and its Softmax (scale, mask, bias, cast).
_LOGIT_STEPS = ("Mul", "Div", "Add", "Sub", "Where", "Cast", "Reshape", "Transpose")


def _pattern_edges(graph: onnx.GraphProto, nodes: Iterable[int], index: ConstIndex):
    """``(inputs, outputs)`` of a pattern: activations it reads from outside, tensors it writes that are read outside."""
    members = [graph.node[i] for i in nodes]
    written = {o for n in members for o in n.output if o}
    inside = {node_key(n) for n in members}
    graph_outputs = {o.name for o in graph.output}
    inputs = [t for n in members for t in nonconst_inputs(n, index) if t not in written]
    outputs = [o for n in members for o in n.output if o and (
        o in graph_outputs or any(node_key(c) not in inside for c in index.consumers.get(o, [])))]
    return list(dict.fromkeys(inputs)), list(dict.fromkeys(outputs))


def _attention_logits(tensor: str, index: ConstIndex, limit: int = 4) -> List[str]:
    """The tensors from a MatMul of two activations to ``tensor`` (a Softmax input) through scale / mask steps."""
    chain: List[str] = []
    t: Optional[str] = tensor
    for _ in range(limit + 1):
        if t is None:
            return []
        chain.append(t)
        prod = index.producer.get(t)
        if prod is None:
            return []
        if prod.op_type == "MatMul":
            return chain if len(nonconst_inputs(prod, index)) == 2 else []
        if prod.op_type not in _LOGIT_STEPS:
            return []
        acts = nonconst_inputs(prod, index)
        # A mask added to the logits is an activation too: follow the operand a MatMul wrote, if any.
        t = next((a for a in acts if index.producer.get(a) is not None
                  and index.producer[a].op_type in ("MatMul",) + _LOGIT_STEPS), acts[0] if acts else None)
    return []


def tensor_roles(model) -> Dict[str, str]:
    """Tensor name -> role (one of :data:`ROLES`) for the tensors of Softmax, LayerNorm and GELU patterns.

    Parameters
    ----------
    model : onnx.ModelProto, LoadedModel or path

    Returns
    -------
    dict
        Only tensors with a role; at most one role each (the first of :data:`ROLES` that applies).
    """
    from .load import as_model_proto

    graph = as_model_proto(model).graph
    index = ConstIndex(graph)
    found: Dict[str, Set[str]] = {}

    def mark(tensors: Iterable[str], role: str) -> None:
        for t in tensors:
            found.setdefault(t, set()).add(role)

    for p in find_protected_patterns(graph, index):
        inputs, outputs = _pattern_edges(graph, p.nodes, index)
        mark(p.internal_tensors, f"{p.kind}_internal" if p.kind != "softmax" else "softmax_input")
        mark(outputs, f"{p.kind}_output")
        if p.kind == "softmax":
            for t in inputs:
                logits = _attention_logits(t, index)
                mark(logits, "attention_logits")
                if not logits:
                    mark([t], "softmax_input")
        else:
            mark(inputs, f"{p.kind}_input")
    return {t: next(r for r in ROLES if r in roles) for t, roles in found.items()}
