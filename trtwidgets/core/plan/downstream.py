"""A candidate scored by running only what its quantizers change: the rest comes from one cached run.

A candidate of the planner is the float model (its float part as the export writes it) plus Q/DQ
nodes on the inputs of its INT8 layers. Every node upstream of the first quantizer computes exactly
what the float model computes, so running it again for each question (96 times for a ViT-S's layer
costs) repeats the same arithmetic. :class:`DownstreamRuns` runs the *base* model (the export with
no layer in INT8) once per set of samples, keeps the tensors a later question may start from, and
scores a candidate by running only the nodes its export changed and everything downstream of them,
fed those cached tensors.

Why the result is the same, to the last bit, as a run of the whole export: the sub-model is made of
the export's own nodes (nothing is rebuilt or re-typed here); the nodes it leaves out are compared
with the base model's byte for byte (the node and every initializer it reads), so what they would
compute is what the base run computed; both run with ONNX Runtime's graph optimizations off, the
level a Q/DQ model with a low-precision float part always runs at (:func:`~..common.ort.runs_unoptimized`),
so no fusion can differ between a sub-model and the whole; and the runs are cut into the same
batches (:func:`~..model.sample_batches.run_in_batches`).

Where a sub-model may start is ORT's to say. Even unoptimized, ORT runs an FP16 node that has no FP16
kernel on the CPU (MatMul, Add, Mul, Erf ...) in FP32 between Casts of its own, and a chain of such
nodes passes FP32 values from one to the next, never rounded to FP16: a ViT's residual stream and
LayerNorms are such a chain. Such a value cannot be fed (as FP16 it would be rounded; and what an
added Cast reads there depends on the graph around it: measured, it was neither), so the sub-model
starts only at tensors ORT writes as the model types them (:func:`cuttable_tensors`), running the
producers of the others too: a ViT-S block's layer runs about 70% of the model's nodes on average, not half,
and every question runs the saliency decoder (about three quarters of a run at a batch of 8), so a layer's
cost fell by 15% wall and 18% CPU (``benchmarks/downstream_ab.py``; a model ORT runs in FP32 from input to
output, such as a CNN, has nothing to cut, and every question runs whole).

Where any of this does not hold (an FP32 float part runs with ORT's basic fusions; a change upstream
of every cached tensor) the caller runs the whole export, as before; and the first question of each
cache is answered both ways and compared, bit for bit, so an ONNX Runtime that behaves otherwise
turns the shortcut off (:attr:`DownstreamRuns.disabled`, a note says so) instead of changing a
plan. ``tests/core/plan/test_downstream.py`` checks the scores against whole runs on real models.
"""

from __future__ import annotations

from typing import AbstractSet, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import onnx

__all__ = ["DownstreamRuns", "MAX_CACHE_BYTES", "MAX_SHARE", "changed_closure", "cuttable_tensors"]

#: A question whose sub-model holds more than this share of the model's nodes runs the whole export: building and
#: loading a sub-model costs about what the few nodes it leaves out save (ViT-S: a layer of block 1 or 2 ran 0.1-0.5 s
#: slower cut than whole, one of block 10 0.2 s faster).
MAX_SHARE = 0.75
#: The cached tensors of one set of samples may take at most this many bytes; above it the cache is dropped
#: and every question runs its whole export (a ViT-S saliency model at 224x224: 8 samples, 160 MB).
MAX_CACHE_BYTES = 1_500_000_000

Feeds = Sequence[Mapping[str, np.ndarray]]


def _inputs(node: onnx.NodeProto) -> List[str]:
    """Every tensor ``node`` reads, the reads of its subgraphs (If, Loop) included."""
    from ..model.onnx_graph import subgraph_reads

    reads = [t for t in node.input if t]
    if any(a.HasField("g") or a.graphs for a in node.attribute):
        reads += sorted(subgraph_reads([node]))
    return reads


def changed_closure(model: onnx.ModelProto, base: Mapping[bytes, bool], base_inits: Mapping[str, bytes],
                    cuttable: AbstractSet[str]) -> Tuple[List[int], Set[str]]:
    """``(node indices to run, tensors they read from outside)`` of ``model`` against the base model.

    A node is changed when the base model has no node serialized the same, or when it reads an initializer
    whose bytes differ from the base's; everything that reads a changed node's output is run too, and so is
    whatever produces a tensor they read that is not in ``cuttable`` (see :func:`_pulled`). The tensors read
    from outside are produced by unchanged nodes (so the base run computed them), or are graph inputs or
    initializers (left out of the set).
    """
    inits = {t.name: t for t in model.graph.initializer}
    differs: Dict[str, bool] = {}

    def init_differs(name: str) -> bool:
        if name not in differs:
            mine, theirs = inits.get(name), base_inits.get(name)
            differs[name] = theirs is None or mine is None or _init_bytes(mine) != theirs
        return differs[name]

    dirty: Set[str] = set()
    run: List[int] = []
    for i, node in enumerate(model.graph.node):
        reads = _inputs(node)
        if (any(t in dirty for t in reads) or node.SerializeToString() not in base
                or any(init_differs(t) for t in reads if t in inits)):
            run.append(i)
            dirty.update(t for t in node.output if t)
    return _pulled(model, run, cuttable)


def _pulled(model: onnx.ModelProto, run: Sequence[int], cuttable: AbstractSet[str]) -> Tuple[List[int], Set[str]]:
    """``run`` with the producers of every tensor it reads that cannot be fed (not in ``cuttable``), recursively,
    and the tensors it then reads from outside (graph inputs and initializers left out).

    A tensor can be fed when ONNX Runtime holds it as the model types it: an FP32 value that ORT passes between
    two FP16 nodes it runs in FP32 (:func:`~..common.ort.unoptimized_node_outputs`) would be rounded if fed.
    Constants, and what is computed from them alone, are run too: shape inference reads their values (a Slice's
    bounds, so a Resize's sizes), which it cannot read from an input.
    """
    g = model.graph
    outer = {t.name for t in g.initializer} | {i.name for i in g.input}
    producer = {t: i for i, n in enumerate(g.node) for t in n.output if t}
    picked = set(run)
    made = {t for i in run for t in g.node[i].output}
    todo = [t for i in run for t in _inputs(g.node[i]) if t not in made and t not in outer]
    while todo:
        t = todo.pop()
        i = producer.get(t)
        if i is None or i in picked or t in cuttable:
            continue
        picked.add(i)
        todo.extend(x for x in _inputs(g.node[i]) if x not in outer)
    nodes = sorted(picked)
    made = {t for i in nodes for t in g.node[i].output}
    return nodes, {t for i in nodes for t in _inputs(g.node[i]) if t not in made and t not in outer}


def cuttable_tensors(model: onnx.ModelProto) -> Set[str]:
    """Tensors of ``model`` a part of it may be fed from a cache and compute what it computes inside the whole:
    each written under its own name by its own node as ONNX Runtime runs the model unoptimized, not a constant
    (see :func:`_pulled`). Empty where ORT cannot say."""
    from ..common.ort import unoptimized_node_outputs

    ran = unoptimized_node_outputs(model)
    if ran is None:
        return set()
    static = {t.name for t in model.graph.initializer}
    for n in model.graph.node:
        if not n.op_type.startswith("Random") and all(t in static for t in _inputs(n)):
            static.update(t for t in n.output if t)
    return {t for n in model.graph.node if n.name for t in n.output
            if t and (n.name, t) in ran and t not in static}


def _init_bytes(t: onnx.TensorProto) -> bytes:
    """An initializer's content, compared as bytes (raw data, else the whole message)."""
    return t.raw_data if t.HasField("raw_data") and not t.external_data else t.SerializeToString()


def _sub_model(model: onnx.ModelProto, nodes: Sequence[int], feeds: Mapping[str, Sequence[np.ndarray]]
               ) -> onnx.ModelProto:
    """The nodes ``nodes`` of ``model`` as a model of their own: ``feeds`` (cached arrays, every batch's) and the
    graph inputs they read as inputs, the initializers they read, the model's outputs."""
    from onnx import helper

    g = model.graph
    picked = [g.node[i] for i in nodes]
    reads = {t for n in picked for t in _inputs(n)}
    inputs = [vi for vi in g.input if vi.name in reads]
    # Each cached tensor by its type and shape, a dimension left open where the batches differ (a last batch of
    # fewer samples): shape inference reads some inputs' shapes (a Resize's sizes).
    inputs += [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arrs[0].dtype),
                                             [d if all(a.shape[k] == d for a in arrs) else None
                                              for k, d in enumerate(arrs[0].shape)])
               for name, arrs in feeds.items()]
    made = {t for n in picked for t in n.output}
    graph = helper.make_graph(picked, g.name, inputs, [o for o in g.output if o.name in made],
                              [t for t in g.initializer if t.name in reads])
    sub = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    sub.functions.extend(model.functions)
    return sub


class DownstreamRuns:
    """The base model's run, cached per set of samples, and candidates scored from it (see the module docstring).

    Parameters
    ----------
    base : onnx.ModelProto
        The export with no layer in INT8 (the float part as every candidate writes it).
    run_batches : callable
        ``run_batches(run, feeds) -> outputs``: the evaluator's batching
        (:func:`~..model.sample_batches.run_in_batches` with its axes and batch), ``run(feed) -> outputs``
        called once per batch, in order.
    starts : sequence of str
        Node labels a question may change first (the weighted layers): their inputs and what runs beside
        their downstream part are cached.
    """

    def __init__(self, base: onnx.ModelProto, run_batches: Callable, starts: Sequence[str]) -> None:
        from ..model.graph_patterns import node_label

        self.base = base
        self.run_batches = run_batches
        self.serialized = {n.SerializeToString(): True for n in base.graph.node}
        self.base_inits = {t.name: _init_bytes(t) for t in base.graph.initializer}
        wanted = set(starts)
        self.cuttable = cuttable_tensors(base)
        self.keep = _frontiers(base, [i for i, n in enumerate(base.graph.node) if node_label(n) in wanted],
                               self.cuttable)
        # id(feeds) -> (feeds, per batch: the cached tensors and the model's outputs); the feeds are held, so an
        # id is not reused by another list while its entry is here.
        self._cache: Dict[int, Tuple[Feeds, Optional[List[Dict[str, np.ndarray]]]]] = {}
        self.runs = 0  # questions answered from the cache (for tests and the benchmark)
        self.checked = False  # the first answer was compared with a whole run and was the same
        self.disabled: Optional[str] = None  # why the shortcut is off (a whole run differed), or None

    def cached(self, feeds: Feeds) -> Optional[List[Dict[str, np.ndarray]]]:
        """The cached tensors of each batch of ``feeds`` (the base model run once), or None: over the budget."""
        entry = self._cache.get(id(feeds))
        if entry is None or entry[0] is not feeds:
            entry = self._cache[id(feeds)] = (feeds, self._run_base(feeds))
        return entry[1]

    def _run_base(self, feeds: Feeds) -> Optional[List[Dict[str, np.ndarray]]]:
        from ..calibration.collect import instrumented_model
        from ..common.ort import open_session

        outputs = [o.name for o in self.base.graph.output]
        extra = [t for t in sorted(self.keep) if t not in outputs]
        sess = open_session(instrumented_model(self.base, extra), optimization="disable",
                            purpose="run the float part once for the layer costs")
        kept: List[Dict[str, np.ndarray]] = []
        size = 0

        def run(feed):
            nonlocal size
            got = dict(zip(outputs + extra, sess.run(outputs + extra, feed)))
            kept.append(got)  # the model's outputs too: a candidate that changes none of an output's nodes has it
            size += sum(a.nbytes for a in got.values())
            if size > MAX_CACHE_BYTES:
                raise _OverBudget
            return {o: got[o] for o in outputs}

        try:
            self.run_batches(run, feeds)
        except _OverBudget:
            return None
        return kept

    def outputs(self, model: onnx.ModelProto, feeds: Feeds,
                whole: Callable[[], Dict[str, np.ndarray]]) -> Optional[Dict[str, np.ndarray]]:
        """``model``'s outputs on ``feeds`` from the cache, or None where it cannot answer (run the whole).

        ``whole()`` runs the whole model: the first answer is checked against it (see the module docstring).
        """
        if self.disabled is not None:
            return None
        out = self._outputs(model, feeds)
        if out is None or self.checked:
            return out
        full = whole()
        if set(out) == set(full) and all(np.array_equal(out[k], full[k], equal_nan=out[k].dtype.kind == "f")
                                         for k in full):
            self.checked = True
        else:
            from ..common.notes import note

            self.disabled = ("a candidate run from the cached float part differed from its whole run in this "
                             "ONNX Runtime: every candidate is run whole")
            note(self.disabled)
        return full

    def _outputs(self, model: onnx.ModelProto, feeds: Feeds) -> Optional[Dict[str, np.ndarray]]:
        from ..common.ort import open_session, runs_unoptimized

        if not runs_unoptimized(model):
            return None
        nodes, outside = changed_closure(model, self.serialized, self.base_inits, self.cuttable)
        if not outside or not outside <= self.keep:  # nothing to start from (the whole model), or not cached
            return None
        if len(nodes) > MAX_SHARE * len(model.graph.node):
            return None
        cache = self.cached(feeds)
        if cache is None:
            return None
        self.runs += 1
        names = [o.name for o in model.graph.output]
        calls = iter(cache)
        if not nodes:  # the base model itself (nothing quantized): its outputs as the base run gave them
            return self.run_batches(lambda feed: {o: next(calls)[o] for o in names}, feeds)
        sess = open_session(_sub_model(model, nodes, {t: [c[t] for c in cache] for t in outside}), optimization="disable",
                            purpose="score a candidate")
        made = list(sess.output_names)

        def run(feed):
            from_cache = next(calls)
            sub_feed = {t: from_cache[t] for t in outside}
            sub_feed.update((k, v) for k, v in feed.items() if k in sess.input_names)
            got = dict(zip(made, sess.run(made, sub_feed)))
            return {o: got[o] if o in got else from_cache[o] for o in names}

        return self.run_batches(run, feeds)


class _OverBudget(Exception):
    """The cached tensors outgrew :data:`MAX_CACHE_BYTES`."""


def _frontiers(model: onnx.ModelProto, starts: Sequence[int], cuttable: AbstractSet[str]) -> Set[str]:
    """Tensors to cache: for each start node, what it and its downstream part read from the rest of the graph."""
    g = model.graph
    readers: Dict[str, List[int]] = {}
    for i, n in enumerate(g.node):
        for t in _inputs(n):
            readers.setdefault(t, []).append(i)
    keep: Set[str] = set()
    for s in starts:
        down = {s}
        todo = [s]
        while todo:
            for t in g.node[todo.pop()].output:
                for r in readers.get(t, ()):
                    if r not in down:
                        down.add(r)
                        todo.append(r)
        keep |= _pulled(model, sorted(down), cuttable)[1]
    return keep
