"""Lint rules on the graph's structure: no inputs, a cycle, shapes too large for any engine.

Each of these models used to pass lint with "no findings" and then fail later
with a message about something else (calibration's ``.npy`` advice for a model
without inputs; ONNX Runtime's or TensorRT's own errors for a cycle or a
3,000,000,000-wide dimension).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import onnx

from .context import LintContext, node_name

__all__ = ["check_no_inputs", "check_cycles", "check_huge_shapes", "find_cycle", "INT32_MAX"]

#: The largest int32: TensorRT before 10 holds dims in int32, and a tensor of more elements needs 64-bit indexing.
INT32_MAX = 2**31 - 1
_SHOWN = 5


def check_no_inputs(ctx: LintContext) -> None:
    """NO_INPUTS: the graph has no inputs (all folded into initializers, or a constant-only graph)."""
    if ctx.summary.inputs:
        return
    ctx.add("NO_INPUTS", "The model has no inputs: every run computes the same constants.",
            "A graph without inputs has nothing to feed: calibration has no samples to run, and an engine built "
            "from it only reproduces constants. Exporters do this when the example input was captured as a "
            "constant (or all inputs were folded into initializers).",
            "Re-export with the real inputs as graph inputs (torch.onnx.export(model, args, input_names=[...])); "
            "`trtwidgets summary MODEL` lists the inputs a model has.")


def find_cycle(graph: onnx.GraphProto) -> Optional[List[onnx.NodeProto]]:
    """The nodes of one cycle in ``graph`` (in data-flow order), or None when it is acyclic."""
    nodes = list(graph.node)
    producer: Dict[str, int] = {}
    for i, n in enumerate(nodes):
        for out in n.output:
            if out:
                producer.setdefault(out, i)
    preds = [sorted({producer[x] for x in n.input if x in producer}) for n in nodes]
    succs: List[List[int]] = [[] for _ in nodes]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    # Kahn: what no topological order can place is a cycle or lies downstream of one.
    indeg = [len(ps) for ps in preds]
    ready = [i for i, d in enumerate(indeg) if d == 0]
    while ready:
        i = ready.pop()
        for j in succs[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    left = {i for i, d in enumerate(indeg) if d > 0}
    if not left:
        return None
    # Every node left has a predecessor left: walking back from any of them must come round to a node seen.
    walk: List[int] = []
    seen: Dict[int, int] = {}
    i = min(left)
    while i not in seen:
        seen[i] = len(walk)
        walk.append(i)
        i = next(p for p in preds[i] if p in left)
    return [nodes[j] for j in reversed(walk[seen[i]:])]


def check_cycles(ctx: LintContext) -> None:
    """GRAPH_CYCLE: a node depends on its own output, directly or through others."""
    cycle = find_cycle(ctx.proto.graph)
    if cycle is None:
        return
    names = [node_name(n) for n in cycle]
    shown = " -> ".join(names[:8]) + (f" -> ... ({len(names)} nodes)" if len(names) > 8 else "") + f" -> {names[0]}"
    ctx.add("GRAPH_CYCLE", f"The graph has a cycle: {shown}.",
            "An ONNX graph is acyclic: each node runs once, after the nodes that feed it. A node that needs its own "
            "output can never run; TensorRT's parser and ONNX Runtime refuse the model.",
            "Repair the export: the node inputs on the cycle name the wrong tensors (often a renamed or duplicated "
            "output name). Loops belong in a Loop or Scan node.", names)


def _value_infos(graph: onnx.GraphProto):
    for kind, items in (("input", graph.input), ("output", graph.output), ("tensor", graph.value_info)):
        for vi in items:
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                yield kind, vi.name, [d.dim_value if d.HasField("dim_value") else None
                                      for d in vi.type.tensor_type.shape.dim]


def _describe(kind: str, name: str, dims: Sequence[Optional[int]]) -> str:
    shape = "x".join("?" if d is None else str(d) for d in dims)
    return f"{kind} {name!r} [{shape}]"


def check_huge_shapes(ctx: LintContext) -> None:
    """HUGE_SHAPE: a declared dim beyond int32, or a static tensor of more than 2**31-1 elements."""
    wide, big = [], []
    for kind, name, dims in _value_infos(ctx.proto.graph):
        if any(d is not None and d > INT32_MAX for d in dims):
            wide.append((kind, name, dims))
            continue
        elements = 1
        for d in dims:
            elements *= d if d else 1
        if all(d for d in dims) and elements > INT32_MAX:
            big.append((kind, name, dims, elements))
    if not wide and not big:
        return
    old_trt = ctx.trt is not None and ctx.trt.major < 10
    parts = [_describe(k, n, d) for k, n, d in wide] + [f"{_describe(k, n, d)} ({e:,} elements)" for k, n, d, e in big]
    shown = "; ".join(parts[:_SHOWN]) + (f"; and {len(parts) - _SHOWN} more" if len(parts) > _SHOWN else "")
    ctx.add("HUGE_SHAPE", f"{len(parts)} tensor shape(s) too large for 32-bit dims or indexing: {shown}.",
            "TensorRT before 10 keeps dimensions in int32 (at most 2,147,483,647) and indexes tensors with 32 bits; "
            "later versions take such tensors only in some layers, and one float32 tensor of 2**31 elements is "
            "8 GiB. A dimension this large is usually a unit or export mistake (a byte count, a product of axes).",
            "Check the export's shapes (onnx.shape_inference, `trtwidgets summary MODEL`); re-export with the "
            "intended sizes, or split the tensor.",
            [n for _, n, _ in wide] + [n for _, n, _, _ in big], severity="error" if old_trt and wide else None)
