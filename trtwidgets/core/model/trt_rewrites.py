"""Exact graph rewrites that let TensorRT skip work it cannot skip on the graph as exported.

Neither pattern is a precision question, so no Q/DQ placement can remove its cost:

* **a Concat of a Split's outputs** (``split_concat``): a CSP/C2f block concatenates both halves of a
  Split with what followed, and TensorRT copies each half into the Concat; the rewrite concatenates the
  Split's input itself (the same tensor), and most of those copies go.
* **a softmax whose bins a 1x1 convolution with one output weighs** (``expectation_head``): a
  distribution-focal-loss head (YOLOv8/v11, PP-YOLOE, RTMDet) runs its softmax over the innermost axis and
  a Transpose then puts the bins on the channels; with the Transpose moved before it, the Softmax runs on
  the convolution's layout and TensorRT merges the two Transposes.

Each rewrite is exact (the same arithmetic on the same values, ``tests/core/model/test_trt_rewrites.py``),
keeps every node name it does not replace, and leaves the model's inputs and outputs as they are. Nothing
here changes which layers run INT8; the Q/DQ export places on the rewritten graph
(``QdqOptions(rewrites=...)``, default :data:`DEFAULT_REWRITES`). Measurements: docs/placement.md,
"Graph rewrites", and docs/evidence.md, "trt_rewrites".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .graph_patterns import node_label
from .onnx_graph import GraphIndex, attribute, default_opset

__all__ = ["DEFAULT_REWRITES", "EXPECTATION_FORMS", "REWRITES", "Rewritten", "apply_rewrites", "expectation_heads",
           "fold_split_concat"]

SPLIT_CONCAT = "split_concat"
EXPECTATION_HEAD = "expectation_head"
#: Every rewrite, with what it does (for options and messages).
REWRITES = {SPLIT_CONCAT: "a Concat reads a Split's input instead of all its outputs in order",
            EXPECTATION_HEAD: "a softmax whose bins a 1x1 convolution weighs (a DFL head) runs on the convolution's "
                              "layout: the Transpose moved before it"}
#: What the Q/DQ export applies by default (``QdqOptions.rewrites``).
DEFAULT_REWRITES = (SPLIT_CONCAT, EXPECTATION_HEAD)


@dataclass(frozen=True)
class Rewritten:
    """A rewritten model and what changed.

    Attributes
    ----------
    model : onnx.ModelProto
        A copy of the model given, rewritten; the model given itself where nothing was (do not mutate it).
    changes : tuple of (str, str)
        ``(rewrite, node label)`` per place rewritten: the Concat or the Softmax.
    """

    model: onnx.ModelProto
    changes: Tuple[Tuple[str, str], ...]


def _reads(graph: onnx.GraphProto) -> set:
    """Every tensor name a node reads, subgraphs (If/Loop/Scan bodies reading outer tensors) included."""
    out = set()
    for n in graph.node:
        out.update(n.input)
        for a in n.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else
                        list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else []):
                out |= _reads(sub)
    return out


def _drop_unused(graph: onnx.GraphProto, candidates: set) -> None:
    """Remove the nodes of ``candidates`` (by first output) that nothing reads any more, and the initializers only
    they read; every other node and initializer stays as the model had it (dead or not)."""
    outputs = {o.name for o in graph.output}
    read = _reads(graph) | outputs
    dead = [i for i, n in enumerate(graph.node) if n.output and n.output[0] in candidates
            and not any(o in read for o in n.output if o)]
    if not dead:
        return
    freed = {t for i in dead for t in graph.node[i].input}
    for i in reversed(dead):
        del graph.node[i]
    _drop_freed_initializers(graph, freed)


def _drop_freed_initializers(graph: onnx.GraphProto, freed: set) -> None:
    """Remove the initializers among ``freed`` (inputs of nodes a rewrite took out) that nothing reads now."""
    read = _reads(graph) | {o.name for o in graph.output}
    keep = [t for t in graph.initializer if t.name in read or t.name not in freed]
    if len(keep) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(keep)


def fold_split_concat(model: onnx.ModelProto) -> Rewritten:
    """Concat inputs that are all outputs of one Split, in order and on the Split's axis, become the Split's input.

    The Split stays while anything else reads one of its outputs.
    """
    split_outs = {o for n in model.graph.node if n.op_type == "Split" for o in n.output}
    if not any(n.op_type == "Concat" and split_outs & set(n.input) for n in model.graph.node):
        return Rewritten(model, ())  # nothing to do: no copy of a large model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    index = GraphIndex(g)
    changes: List[Tuple[str, str]] = []
    splits: set = set()
    for node in g.node:
        if node.op_type != "Concat":
            continue
        axis = attribute(node, "axis")
        ins = list(node.input)
        new: List[str] = []
        i = 0
        changed = False
        while i < len(ins):
            prod = index.producer.get(ins[i])
            if (prod is not None and prod.op_type == "Split" and attribute(prod, "axis", 0) == axis
                    and len(prod.output) > 1 and ins[i] == prod.output[0]
                    and ins[i:i + len(prod.output)] == list(prod.output)):
                new.append(prod.input[0])
                splits.add(prod.output[0])
                i += len(prod.output)
                changed = True
            else:
                new.append(ins[i])
                i += 1
        if changed:
            del node.input[:]
            node.input.extend(new)
            changes.append((SPLIT_CONCAT, node_label(node)))
    if changes:
        _drop_unused(g, splits)
    return Rewritten(m, tuple(changes))


def _conv_expectation(index: GraphIndex, conv: onnx.NodeProto) -> Optional[Tuple[np.ndarray, Optional[np.ndarray]]]:
    """The weights ``(K,)`` and bias of a 1x1, stride-1, unpadded, ungrouped Conv with one output channel."""
    w = index.constant(conv.input[1]) if len(conv.input) > 1 else None
    if w is None or w.ndim != 4 or w.shape[0] != 1 or w.shape[2:] != (1, 1):
        return None
    if (attribute(conv, "group", 1) != 1 or any(s != 1 for s in attribute(conv, "strides", [1, 1]))
            or any(d != 1 for d in attribute(conv, "dilations", [1, 1])) or any(attribute(conv, "pads", [0, 0, 0, 0]))
            or attribute(conv, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID")):
        return None
    b = None
    if len(conv.input) > 2 and conv.input[2]:
        b = index.constant(conv.input[2])
        if b is None:
            return None
    return w.reshape(-1).astype(np.float32), (None if b is None else b.reshape(-1).astype(np.float32))


#: The forms :func:`expectation_heads` can write (timed on the GPU by ``benchmarks/yolo_variants.py`` and
#: ``scripts/gpu_peer_yolo.py``: ``benchmarks/results/rewrites/dfl_forms.json``; ``softmax_first`` is the default's).
EXPECTATION_FORMS = ("reduce", "softmax_first", "mul_sum")


def _match_expectation(index: GraphIndex, node: onnx.NodeProto, opset: int, outputs: set):
    """``(softmax axis, Transpose or None, Conv, weights, bias)`` where ``node`` is a Softmax whose bins one 1x1 Conv
    with one output weighs and sums (through at most one Transpose that puts the bins on the channel axis).

    The structure gives the rank: the Conv's weights are 4-D, so its input, and the Softmax's, is rank 4 (no shape
    inference, which on a large model with attention softmaxes would run on every export)."""
    if len(node.output) != 1 or node.output[0] in outputs:
        return None
    readers = index.consumers.get(node.output[0], [])
    if len(readers) != 1:
        return None
    t, nxt = None, readers[0]
    if nxt.op_type == "Transpose":
        later = index.consumers.get(nxt.output[0], [])
        perm = attribute(nxt, "perm")
        if perm is None or len(perm) != 4 or len(later) != 1 or nxt.output[0] in outputs:
            return None
        t, nxt = nxt, later[0]
    if nxt.op_type != "Conv" or nxt.input[0] != (t.output[0] if t is not None else node.output[0]):
        return None
    wb = _conv_expectation(index, nxt)
    if wb is None:
        return None
    axis = attribute(node, "axis", -1 if opset >= 13 else 1)
    axis = axis + 4 if axis < 0 else axis
    if opset < 13 and axis != 3:
        return None  # before opset 13 a Softmax flattens from its axis on: one axis only when it is the last
    if (list(attribute(t, "perm")).index(axis) if t is not None else axis) != 1:
        return None  # the bins must land on the Conv's channels
    return axis, t, nxt, wb[0], wb[1]


def _reduce(op: str, x: str, out: str, axis: int, name: str, opset: int,
            inits: List[onnx.TensorProto]) -> onnx.NodeProto:
    """A keepdims reduction over ``axis``, its axes an input or an attribute as ``opset`` wants."""
    if opset >= (13 if op == "ReduceSum" else 18):
        ax = f"{name}_axes"
        inits.append(numpy_helper.from_array(np.array([axis], dtype=np.int64), ax))
        return helper.make_node(op, [x, ax], [out], name=name, keepdims=1)
    return helper.make_node(op, [x], [out], name=name, axes=[axis], keepdims=1)


def _head_nodes(form: str, node: onnx.NodeProto, hit, opset: int, inits: List[onnx.TensorProto]):
    """The nodes that replace one expectation head in ``form``, and which of its nodes (by output) they replace."""
    axis, t, conv, w, b = hit
    base, x = node_label(node), node.input[0]
    if form == "softmax_first":
        moved = f"{base}/bins_on_channels"
        return ([helper.make_node("Transpose", [x], [moved], name=node_label(t), perm=list(attribute(t, "perm"))),
                 helper.make_node("Softmax", [moved], [t.output[0]], name=base, axis=1), conv],
                [node.output[0], t.output[0]])
    shape = [1, 1, 1, 1]
    shape[axis] = w.size
    w_name = f"{base}/bin_values"
    inits.append(numpy_helper.from_array(w.reshape(shape), w_name))
    replaced = []
    if form == "reduce":
        mx, d, e, s, we, num, q = (f"{base}/{k}" for k in ("max", "centred", "exp", "sum", "weighted", "num", "mean"))
        new = [_reduce("ReduceMax", x, mx, axis, f"{base}/Max", opset, inits),
               helper.make_node("Sub", [x, mx], [d], name=f"{base}/Centre"),
               helper.make_node("Exp", [d], [e], name=f"{base}/Exp"),
               _reduce("ReduceSum", e, s, axis, f"{base}/Sum", opset, inits),
               helper.make_node("Mul", [e, w_name], [we], name=f"{base}/Weigh"),
               _reduce("ReduceSum", we, num, axis, f"{base}/WeighedSum", opset, inits),
               helper.make_node("Div", [num, s], [q], name=f"{base}/Expectation")]
        replaced.append(node.output[0])
    else:  # mul_sum
        we, q = f"{base}/weighted", f"{base}/mean"
        new = [helper.make_node("Mul", [node.output[0], w_name], [we], name=f"{base}/Weigh"),
               _reduce("ReduceSum", we, q, axis, f"{base}/Expectation", opset, inits)]
    if b is not None:
        inits.append(numpy_helper.from_array(b.reshape(1, 1, 1, 1), f"{base}/bin_bias"))
        new.append(helper.make_node("Add", [q, f"{base}/bin_bias"], [f"{base}/mean_bias"], name=f"{base}/Bias"))
        q = f"{base}/mean_bias"
    if t is not None:
        new.append(helper.make_node("Transpose", [q], [conv.output[0]], name=node_label(t),
                                    perm=list(attribute(t, "perm"))))
        replaced.append(t.output[0])
    else:
        new.append(helper.make_node("Identity", [q], [conv.output[0]], name=node_label(conv)))
    return new, replaced


def _splice(g: onnx.GraphProto, replace: Dict[str, List[onnx.NodeProto]], drop: set,
            inits: List[onnx.TensorProto]) -> None:
    """Put ``replace[output]`` where the node writing ``output`` was, drop the nodes writing ``drop``, add ``inits``."""
    nodes: List[onnx.NodeProto] = []
    freed: set = set()
    for n in g.node:
        first = n.output[0] if n.output else None
        if first in drop or first in replace:
            freed.update(n.input)
        if first in drop:
            continue
        nodes.extend(replace.get(first, [n]) if first is not None else [n])
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(inits)
    # Only what the rewrite left unread goes (a Conv replaced by a multiply and a sum: its weights).
    _drop_freed_initializers(g, freed)
    # Shapes recorded for tensors that no longer exist would mislead shape inference.
    names = {tn for n in g.node for tn in list(n.input) + list(n.output)}
    keep = [v for v in g.value_info if v.name in names]
    del g.value_info[:]
    g.value_info.extend(keep)


def expectation_heads(model: onnx.ModelProto, form: str = "reduce") -> Rewritten:
    """Rewrite each softmax-expectation head (a distribution-focal-loss decoder) into ``form``, the same result.

    The head is ``Softmax(bins) [-> Transpose] -> Conv 1x1 (one output)``: the expectation of a distribution over
    the bins. Forms (each exact; the Conv's output tensor keeps its name and shape):

    * ``"reduce"``: ``exp(x - max) . w / sum(exp(x - max))`` with reductions over the bins where they lie;
    * ``"softmax_first"``: the Transpose before the Softmax, so that the Softmax runs on the Conv's layout (opset 13);
    * ``"mul_sum"``: the Softmax as it is, the expectation as a multiply and a sum over the bins, the Transpose
      after it (on a tensor with the bins summed away).
    """
    if form not in EXPECTATION_FORMS:
        raise ValueError(f"unknown form {form!r}; known: {', '.join(EXPECTATION_FORMS)}")
    opset = default_opset(model)
    outputs = {o.name for o in model.graph.output}
    found = GraphIndex(model.graph)
    if not any(n.op_type == "Softmax" and _match_expectation(found, n, opset, outputs) for n in model.graph.node):
        return Rewritten(model, ())  # no copy of a large model (a transformer's attention softmaxes) for nothing
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    index = GraphIndex(g)
    outputs = {o.name for o in g.output}
    changes: List[Tuple[str, str]] = []
    replace: Dict[str, List[onnx.NodeProto]] = {}
    drop: set = set()
    inits: List[onnx.TensorProto] = []
    for node in g.node:
        if node.op_type != "Softmax":
            continue
        hit = _match_expectation(index, node, opset, outputs)
        if hit is None or (form == "softmax_first" and (hit[1] is None or opset < 13)):
            continue
        new, replaced = _head_nodes(form, node, hit, opset, inits)
        replace[hit[2].output[0]] = new
        drop |= set(replaced)
        kind = EXPECTATION_HEAD if form == "softmax_first" else f"{EXPECTATION_HEAD}:{form}"
        changes.append((kind, node_label(node)))
    if changes:
        _splice(g, replace, drop, inits)
    return Rewritten(m, tuple(changes))


def _expectation_head(model: onnx.ModelProto) -> Rewritten:
    return expectation_heads(model, "softmax_first")


_FUNCS = {SPLIT_CONCAT: fold_split_concat, EXPECTATION_HEAD: _expectation_head}


def apply_rewrites(model: onnx.ModelProto, rewrites: Sequence[str]) -> Rewritten:
    """Apply ``rewrites`` (names in :data:`REWRITES`) in order; unknown names are a ValueError."""
    unknown = [r for r in rewrites if r not in _FUNCS]
    if unknown:
        raise ValueError(f"unknown rewrite(s) {', '.join(map(repr, unknown))}; known: {', '.join(REWRITES)}")
    changes: List[Tuple[str, str]] = []
    out = model
    for r in rewrites:
        step = _FUNCS[r](out)
        out = step.model
        changes.extend(step.changes)
    return Rewritten(out, tuple(changes))
