"""Repeated patterns of a graph: regions with one structural signature, found by structure, never by name.

A network repeats a few blocks many times: YOLOv8's C2f bottleneck, its SPPF and neck Concats, the
detection head's branches, a ResNet's basic block, a MobileNet inverted residual, a transformer layer's
attention and MLP halves. What placement choice is fastest for one instance of a block (where the Q/DQ
border sits, whether a Concat shares one scale) holds for all of them, so the measured placement search
(:mod:`trtwidgets.core.plan.regions`) times one instance per pattern and applies the verdict to all.

A **region** is anchored at one node and takes the nodes that belong to it by topology:

* ``residual`` (``Add``) and ``gate`` (``Mul``) of two activations that share an ancestor within
  :data:`MAX_REGION_NODES` nodes: every node on a path from their lowest common ancestor to the join
  (a residual block with its shortcut, a squeeze-excite gate, a transformer half with its skip);
* ``concat``: a ``Concat`` of convolution feature maps, with the data-movement ops that feed it
  (``Split``, ``MaxPool``, nearest ``Resize``, reshapes): a C2f/CSP concat, an SPPF, a neck join;
* ``branch``: a tensor read by two or more weighted layers (a detection head's box and class branches,
  attention's Q, K and V), each reader followed through its epilogue and the chain of single-reader
  weighted layers after it, up to the next join.

A region's **signature** is a hash of its canonical form: op types, the attributes that change the
kernel (kernel shape, strides, dilations, pads, grouped or depthwise, a constant or computed second
input, a Resize's mode, a Concat's or Split's arity) and the topology (which node reads which, which
region input is read where), with the inputs of commutative ops ordered by their own sub-signature.
Channel counts and names are left out: the C2f bottleneck at 16 channels and at 128 is one pattern.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import onnx

from ..model.onnx_graph import WEIGHTED_OPS, attribute
from .fusions import epilogue_end, fused_conv, gated_branch
from ..model.graph_patterns import ConstIndex, node_key, node_label, nonconst_inputs

__all__ = ["KINDS", "MAX_REGION_NODES", "RegionInstance", "RegionPattern", "find_regions", "node_signature"]

#: Region kinds, in the order patterns are listed.
KINDS = ("residual", "concat", "branch", "gate")
#: A join whose inputs meet only further up than this many nodes is not a block (a U-Net's long skip).
MAX_REGION_NODES = 64
_COMMUTATIVE = ("Add", "Mul", "Sum", "Max", "Min")
_MOVEMENT = ("Split", "MaxPool", "Resize", "Upsample", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
             "Identity")


@dataclass(frozen=True)
class RegionInstance:
    """One occurrence of a pattern.

    Attributes
    ----------
    anchor : str
        The label of the node that defines it (the join, the Concat, the first reader of a branch point).
    nodes : tuple of str
        Its nodes' labels, in graph order.
    inputs : tuple of str
        The activations it reads from outside (in first-use order of the canonical form).
    outputs : tuple of str
        The tensors it writes that are read outside it or are graph outputs.
    weighted : tuple of str
        Its weighted layers (Conv, ConvTranspose, Gemm, MatMul), in graph order.
    joins : tuple of str
        The nodes a placement scheme is about: the residual Add, the Concat and its movement ops, the
        branch point's readers.
    branches : tuple of tuple of str
        ``branch``: the weighted layers of each reader's chain, in canonical order (the k-th branch of one
        instance is the k-th of every other).
    """

    anchor: str
    nodes: Tuple[str, ...]
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    weighted: Tuple[str, ...]
    joins: Tuple[str, ...] = ()
    branches: Tuple[Tuple[str, ...], ...] = ()

    def to_dict(self) -> dict:
        return {"anchor": self.anchor, "nodes": list(self.nodes), "inputs": list(self.inputs),
                "outputs": list(self.outputs), "weighted": list(self.weighted), "joins": list(self.joins),
                "branches": [list(b) for b in self.branches]}


@dataclass(frozen=True)
class RegionPattern:
    """Regions of one structural signature.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    signature : str
        16 hex characters of the canonical form's hash.
    description : str
        The canonical form in words (op types in order), for tables.
    instances : tuple of RegionInstance
        In graph order of their anchors.
    gated : bool
        ``residual``: the branch that fuses into a convolution ends in a gated activation (SiLU, HardSwish).
    """

    kind: str
    signature: str
    description: str
    instances: Tuple[RegionInstance, ...]
    gated: bool = False

    @property
    def name(self) -> str:
        """``kind:signature`` (unique in a model)."""
        return f"{self.kind}:{self.signature}"


# ---------------------------------------------------------------------------- canonical form


def _kernel(node: onnx.NodeProto, index: ConstIndex) -> Tuple:
    w = node.input[1] if len(node.input) > 1 else ""
    dims = tuple(index.initializers[w].dims) if w in index.initializers else ()
    kernel = tuple(attribute(node, "kernel_shape", None) or dims[2:])
    rank = len(kernel)
    group = int(attribute(node, "group", 1) or 1)
    grouping = "dw" if group > 1 and len(dims) > 1 and dims[1] == 1 else ("g" if group > 1 else "")
    return (kernel, tuple(attribute(node, "strides", None) or (1,) * rank),
            tuple(attribute(node, "dilations", None) or (1,) * rank),
            tuple(attribute(node, "pads", None) or (0,) * (2 * rank)), grouping)


def node_signature(node: onnx.NodeProto, index: ConstIndex) -> str:
    """What of ``node`` a pattern must match: op type and the attributes that change its kernel."""
    op = node.op_type
    if op in ("Conv", "ConvTranspose"):
        return f"{op}{_kernel(node, index)}"
    if op in ("MaxPool", "AveragePool"):
        return f"{op}({tuple(attribute(node, 'kernel_shape', None) or ())},{tuple(attribute(node, 'strides', None) or ())})"
    if op in ("Resize", "Upsample"):
        return f"{op}({attribute(node, 'mode', b'nearest')!r})"
    if op == "Concat":
        return f"Concat({attribute(node, 'axis', 0)},{len(node.input)})"
    if op == "Split":
        return f"Split({attribute(node, 'axis', 0)},{len(node.output)})"
    consts = [k for k, t in enumerate(node.input) if t and index.is_constant(t)]
    return f"{op}{tuple(consts)}" if consts else op


class _Canon:
    """The canonical form of one region: a sub-signature per node, then a numbering from the anchor back."""

    def __init__(self, index: ConstIndex, members: Set[tuple], nodes: Mapping[tuple, onnx.NodeProto]) -> None:
        self.index, self.members, self.nodes = index, members, nodes
        self.sub: Dict[tuple, str] = {}

    def _producer(self, tensor: str) -> Optional[tuple]:
        p = self.index.producer.get(tensor)
        k = node_key(p) if p is not None else None
        return k if k in self.members else None

    def _inputs(self, key: tuple) -> List[str]:
        node = self.nodes[key]
        ins = nonconst_inputs(node, self.index)
        if node.op_type in _COMMUTATIVE:
            ins = sorted(ins, key=lambda t: self.subsig(t))
        return ins

    def subsig(self, tensor: str) -> str:
        key = self._producer(tensor)
        if key is None:
            return "in"
        if key not in self.sub:
            self.sub[key] = ""  # a cycle cannot happen in an ONNX graph; this only guards the recursion
            node = self.nodes[key]
            parts = [self.subsig(t) for t in self._inputs(key)]
            out = list(node.output).index(tensor) if len(node.output) > 1 else 0
            self.sub[key] = hashlib.sha1(f"{node_signature(node, self.index)}|{out}|{parts}".encode()).hexdigest()[:12]
        return self.sub[key]

    def form(self, roots: Sequence[str]) -> Tuple[List[str], List[str], List[str]]:
        """``(canonical lines, region inputs in first-use order, op types in order)`` from ``roots`` backwards."""
        number: Dict[tuple, int] = {}
        ins: List[str] = []
        lines: List[str] = []
        ops: List[str] = []

        def visit(tensor: str) -> str:
            key = self._producer(tensor)
            if key is None:
                if tensor not in ins:
                    ins.append(tensor)
                return f"in{ins.index(tensor)}"
            node = self.nodes[key]
            out = list(node.output).index(tensor)
            if key not in number:
                refs = [visit(t) for t in self._inputs(key)]
                number[key] = len(number)
                lines.append(f"{number[key]}={node_signature(node, self.index)}{refs}")
                ops.append(node.op_type)
            return f"n{number[key]}.{out}"

        for r in sorted(roots, key=self.subsig):
            visit(r)
        return lines, ins, ops


# ---------------------------------------------------------------------------- regions


class _Finder:
    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.index = ConstIndex(graph)
        self.by_key = {node_key(n): n for n in graph.node}
        self.pos = {node_key(n): i for i, n in enumerate(graph.node)}
        self.outputs = {o.name for o in graph.output}

    def ancestors(self, tensor: str, limit: int) -> Dict[str, int]:
        """Tensor -> distance, walking producers' activation inputs breadth first (at most ``limit`` tensors)."""
        dist = {tensor: 0}
        todo = deque([tensor])
        while todo and len(dist) < limit:
            t = todo.popleft()
            prod = self.index.producer.get(t)
            if prod is None:
                continue
            for i in nonconst_inputs(prod, self.index):
                if i not in dist:
                    dist[i] = dist[t] + 1
                    todo.append(i)
        return dist

    def between(self, top: str, join: onnx.NodeProto) -> Optional[Set[tuple]]:
        """The nodes on a path from ``top`` to ``join`` (``join`` included); None past :data:`MAX_REGION_NODES`."""
        above: Set[tuple] = set()
        todo = [t for t in nonconst_inputs(join, self.index)]
        seen: Set[str] = set()
        while todo:
            t = todo.pop()
            if t in seen or t == top:
                continue
            seen.add(t)
            prod = self.index.producer.get(t)
            if prod is None or len(above) > 4 * MAX_REGION_NODES:
                return None  # a graph input other than top: the branches do not meet at top
            above.add(node_key(prod))
            todo.extend(nonconst_inputs(prod, self.index))
        return (above | {node_key(join)}) if len(above) < MAX_REGION_NODES else None

    def instance(self, anchor: onnx.NodeProto, members: Set[tuple], roots: Sequence[str],
                 joins: Iterable[str] = (), chains: Sequence[Tuple[Set[tuple], str]] = ()
                 ) -> Tuple[RegionInstance, str, List[str]]:
        canon = _Canon(self.index, members, self.by_key)
        lines, ins, ops = canon.form(roots)
        ordered = sorted(members, key=self.pos.__getitem__)
        produced = {o for k in members for o in self.by_key[k].output if o}
        outs = [o for o in dict.fromkeys(o for k in ordered for o in self.by_key[k].output if o)
                if o in self.outputs or any(node_key(c) not in members for c in self.index.consumers.get(o, []))]
        outs = [o for o in outs if o in produced]
        labels = tuple(node_label(self.by_key[k]) for k in ordered)
        weighted = tuple(node_label(self.by_key[k]) for k in ordered if self.by_key[k].op_type in WEIGHTED_OPS)
        sig = hashlib.sha1("\n".join(lines).encode()).hexdigest()[:16]
        branches = tuple(tuple(node_label(self.by_key[k]) for k in sorted(chain, key=self.pos.__getitem__)
                               if self.by_key[k].op_type in WEIGHTED_OPS)
                         for chain, end in sorted(chains, key=lambda c: (canon.subsig(c[1]), self.pos[
                             node_key(self.index.producer[c[1]])])))
        inst = RegionInstance(node_label(anchor), labels, tuple(ins), tuple(outs), weighted, tuple(joins), branches)
        return inst, sig, ops


def _join_region(f: _Finder, node: onnx.NodeProto):
    """A residual or gate region at ``node`` (an Add or Mul of two activations), or None."""
    ins = nonconst_inputs(node, f.index)
    if len(ins) != 2 or ins[0] == ins[1]:
        return None
    da = f.ancestors(ins[0], 4 * MAX_REGION_NODES)
    db = f.ancestors(ins[1], 4 * MAX_REGION_NODES)
    common = set(da) & set(db)
    if not common:
        return None
    top = min(common, key=lambda t: (da[t] + db[t], t))
    members = f.between(top, node)
    if members is None or not any(f.by_key[k].op_type in WEIGHTED_OPS for k in members):
        return None
    kind = "residual" if node.op_type == "Add" else "gate"
    end = node.output[0]
    if kind == "residual":  # an activation after the add (ResNet's ReLU) is the block's, fused with it
        end = epilogue_end(f.index, end, set())
        t = node.output[0]
        while t != end:
            nxt = f.index.consumers[t][0]
            members.add(node_key(nxt))
            t = nxt.output[0]
    inst, sig, ops = f.instance(node, members, [end], (node_label(node),))
    gated = kind == "residual" and any(gated_branch(f.index, t) for t in ins
                                       if fused_conv(f.index, t, {}, f.pos) is not None)
    return kind, sig, ops, inst, gated


def _movement_feeders(f: _Finder, concat: onnx.NodeProto) -> Set[tuple]:
    members = {node_key(concat)}
    todo = list(nonconst_inputs(concat, f.index))
    while todo:
        t = todo.pop()
        prod = f.index.producer.get(t)
        if prod is None or prod.op_type not in _MOVEMENT or node_key(prod) in members:
            continue
        if prod.op_type in ("Resize", "Upsample") and attribute(prod, "mode", b"nearest") not in (b"nearest", "nearest"):
            continue
        members.add(node_key(prod))
        todo.extend(nonconst_inputs(prod, f.index)[:1])
    return members


def _concat_region(f: _Finder, node: onnx.NodeProto):
    from .dense_int8 import conv_feature_map

    ins = nonconst_inputs(node, f.index)
    if len(ins) < 2:
        return None
    members = _movement_feeders(f, node)
    sources = [t for k in members for t in nonconst_inputs(f.by_key[k], f.index)
               if node_key(f.index.producer[t]) not in members] if members else []
    if not (conv_feature_map(f.index, node.output[0]) or any(conv_feature_map(f.index, t) for t in sources)):
        return None  # a Concat of shapes, token ids or a transformer's heads: no feature maps, no INT8 movement
    joins = [node_label(f.by_key[k]) for k in sorted(members, key=f.pos.__getitem__)]
    inst, sig, ops = f.instance(node, members, [node.output[0]], joins)
    return "concat", sig, ops, inst, False


def _chain(f: _Finder, reader: onnx.NodeProto, limit: int = 4) -> Tuple[Set[tuple], str]:
    """``reader`` with its epilogue and the single-reader weighted layers after it; ``(nodes, last tensor)``."""
    members: Set[tuple] = set()
    node = reader
    end = reader.output[0]
    for _ in range(limit):
        end = epilogue_end(f.index, node.output[0], set())
        # the epilogue's nodes: everything between the layer's output and ``end`` (gates are two readers)
        members.add(node_key(node))
        frontier = [node.output[0]]
        while frontier:
            t = frontier.pop()
            if t == end:
                continue
            for c in f.index.consumers.get(t, []):
                if node_key(c) not in members:
                    members.add(node_key(c))
                    frontier.extend(c.output)
        cons = f.index.consumers.get(end, [])
        if len(cons) != 1 or cons[0].op_type not in WEIGHTED_OPS or end in f.outputs:
            break
        node = cons[0]
    return members, end


def _branch_region(f: _Finder, tensor: str):
    readers = [c for c in f.index.consumers.get(tensor, []) if c.op_type in WEIGHTED_OPS
               and c.input and c.input[0] == tensor]
    if len(readers) < 2:
        return None
    members: Set[tuple] = set()
    chains = []
    for r in readers:
        chain, end = _chain(f, r)
        if chain & members:
            return None
        members |= chain
        chains.append((chain, end))
    anchor = min(readers, key=lambda n: f.pos[node_key(n)])
    inst, sig, ops = f.instance(anchor, members, [e for _, e in chains], [node_label(r) for r in readers], chains)
    return "branch", sig, ops, inst, False


def find_regions(model, kinds: Sequence[str] = KINDS) -> Tuple[RegionPattern, ...]:
    """The model's repeated patterns (see the module docstring), most instances first within each kind.

    Parameters
    ----------
    model : onnx.ModelProto or onnx.GraphProto
        The float model.
    kinds : sequence of str
        Which kinds of region to look for.

    Returns
    -------
    tuple of RegionPattern
        Every pattern found, also those with a single instance (a block that occurs once is still a block
        whose placement can be chosen).
    """
    graph = model.graph if isinstance(model, onnx.ModelProto) else model
    f = _Finder(graph)
    found: Dict[Tuple[str, str], list] = {}
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        got = None
        if (node.op_type == "Add" and "residual" in kinds) or (node.op_type == "Mul" and "gate" in kinds):
            got = _join_region(f, node)
        elif node.op_type == "Concat" and "concat" in kinds:
            got = _concat_region(f, node)
        if got is not None and got[0] in kinds:
            found.setdefault((got[0], got[1]), []).append(got)
    if "branch" in kinds:
        for t in dict.fromkeys(t for n in graph.node for t in n.input if t and not f.index.is_constant(t)):
            got = _branch_region(f, t)
            if got is not None:
                found.setdefault((got[0], got[1]), []).append(got)
    patterns = []
    for (kind, sig), items in found.items():
        ops = items[0][2]
        patterns.append(RegionPattern(kind, sig, " > ".join(ops), tuple(i[3] for i in items),
                                      any(i[4] for i in items)))
    return tuple(sorted(patterns, key=lambda p: (KINDS.index(p.kind), -len(p.instances), p.signature)))
