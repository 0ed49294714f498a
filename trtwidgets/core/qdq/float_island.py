"""A float part you can trust: FP16 judged on held-back samples, and the nodes that break it kept FP32.

Some graphs cannot run every float tensor in FP16 (a ``1e-10`` added before a ``Log`` becomes 0; a
variance squares values above 256; an ``Exp`` leaves FP16's range). :func:`check_float_part` judges
the float part in FP16 by the one verdict (:func:`~..accuracy.verdict.evaluate`), every tensor rounded
where it is written (:func:`~.float_part.storage.storage_emulation`), and when it fails, finds an
**FP32 island**:

1. **Suspects, by rule:** nodes reading a constant FP16 cannot hold (non-zero below FP16's smallest
   subnormal, or above 65504) and nodes whose FP32 output on the held-back samples leaves FP16's range.
2. **Suspects, measured:** on a few held-back samples, the nodes where NaN or Inf first appears, and
   those whose outputs FP16 moves most (the share of values more than 1% off FP32's, above their
   inputs' share: an underflow to 0 before a ``Log`` counts, where an energy-weighted error would not).
3. **Decided by the held-back check:** the suspects are kept FP32 with the nodes around them (within
   1, 2, 4 ... steps through float tensors) until the float part meets the target (at most
   :data:`MAX_ISLAND` computing nodes, never every weighted layer, :data:`MAX_TRIES` checks); measured
   suspects are added where growing is not enough. Each node kept carries its reason.

Magnitude rules only propose; the held-back check decides (unlike ModelOpt's AutoCast, which keeps
nodes FP32 by data magnitude, initializer range and op type).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..accuracy.reference import Reference
from ..accuracy.target import Target
from ..accuracy.verdict import Verdict, evaluate
from ..model.graph_patterns import node_label
from ..model.onnx_graph import WEIGHTED_OPS

__all__ = ["FloatPartCheck", "MAX_ISLAND", "MAX_TRIES", "check_float_part", "float_part_model", "island_name"]

#: FP16's largest finite value, and its smallest positive (subnormal) one.
_FP16_MAX = 65504.0
_FP16_TINY = 2.0 ** -24
#: The island never grows past this many nodes: beyond it the float part is FP32, not FP16 with an island.
MAX_ISLAND = 64
#: Held-back checks of island candidates at most (1, 2, 4 ... measured suspects).
MAX_TRIES = 7
#: Held-back samples the per-node comparison runs on.
ANALYSIS_SAMPLES = 4


@dataclass(frozen=True)
class FloatPartCheck:
    """The float part in low precision, judged, and the FP32 island that makes it meet the target.

    Attributes
    ----------
    dtype : str
        ``"fp16"`` or ``"bf16"``.
    verdict : Verdict
        The float model in ``dtype`` (the nodes given as ``keep_fp32`` kept FP32) against FP32.
    island : tuple of str
        Nodes (names, or first outputs of unnamed nodes: what ``keep_fp32`` takes) kept FP32 besides the
        given ones; empty when the float part meets the target as it is, or when no island was found.
    reasons : mapping of str to str
        Island node -> why it is kept FP32.
    island_verdict : Verdict, optional
        The float model with the island kept FP32; None when none was tried.
    notes : tuple of str
    """

    dtype: str
    verdict: Verdict
    island: Tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)
    island_verdict: Optional[Verdict] = None
    notes: Tuple[str, ...] = ()

    @property
    def meets(self) -> bool:
        """Whether the float part meets the target as written."""
        return bool(self.verdict.meets)

    @property
    def fixed(self) -> bool:
        """Whether the island makes it meet the target."""
        return bool(self.island and self.island_verdict is not None and self.island_verdict.meets)

    def describe(self, limit: int = 8) -> str:
        """The island in words: each node and why."""
        shown = [f"{n} ({self.reasons.get(n, 'kept FP32')})" for n in self.island[:limit]]
        more = f" and {len(self.island) - limit} more" if len(self.island) > limit else ""
        return "; ".join(shown) + more


def island_name(node: onnx.NodeProto) -> str:
    """How ``keep_fp32`` names a node: its name, else its first output."""
    return node.name or (node.output[0] if node.output else node_label(node))


def float_part_model(model, dtype: str = "fp16", keep_fp32: Sequence[str] = ()) -> onnx.ModelProto:
    """``model`` with its float part in ``dtype`` (``keep_fp32`` kept FP32) as TensorRT's kernels hold it: every
    tensor rounded to ``dtype`` where it is written, computed in FP32 by ONNX Runtime."""
    from ..model.load import as_model_proto
    from .float_part.convert import convert_float_part
    from .float_part.storage import storage_emulation

    copy = onnx.ModelProto()
    copy.CopyFrom(as_model_proto(model))
    converted, _ = convert_float_part(copy, dtype, keep_fp32=tuple(keep_fp32), require_opset=False)
    return storage_emulation(converted)[0]


def _judge(model, dtype: str, keep: Sequence[str], reference: Reference, target: Optional[Target]) -> Verdict:
    # As written: ORT's cast propagation would move the emulation's roundings (and an FP32 Add's epsilon with them).
    return evaluate(reference.run(float_part_model(model, dtype, keep), optimization="disable"), reference, target)


def _constant_suspects(proto: onnx.ModelProto) -> Dict[str, str]:
    """Nodes reading a float constant that ``dtype`` cannot hold -> why."""
    from ..model.onnx_graph import GraphIndex

    index = GraphIndex(proto.graph)
    out: Dict[str, str] = {}
    for n in proto.graph.node:
        if n.op_type in ("Constant", "Shape", "Reshape", "Cast", "QuantizeLinear", "DequantizeLinear"):
            continue
        for x in n.input:
            value = index.constant(x) if x else None
            if value is None or value.dtype.kind != "f" or value.size > 4096 or not value.size:
                continue
            mag = np.abs(value[np.isfinite(value)].astype(np.float64))
            if np.any((mag > 0) & (mag < _FP16_TINY)):
                out[island_name(n)] = f"reads the constant {float(mag[mag > 0].min()):.3g}, which FP16 holds as 0"
            elif np.any(mag > _FP16_MAX):
                out[island_name(n)] = f"reads the constant {float(mag.max()):.3g}, beyond FP16's 65504"
    return out


def _exposed(proto: onnx.ModelProto, names: Sequence[str]) -> onnx.ModelProto:
    from ..accuracy.intermediates import with_intermediate_outputs

    return with_intermediate_outputs(proto, list(names))


def _moved(ref: np.ndarray, got: np.ndarray) -> float:
    """The share of values that ``got`` moves more than 1% away from FP32's ``ref`` (NaN/Inf included)."""
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64)
    if not ref.size or ref.size != got.size:
        return 0.0
    got = got.reshape(ref.shape)
    ok = np.isfinite(ref)
    off = ~np.isfinite(got) | (np.abs(got - ref) > 1e-2 * np.abs(ref) + 1e-30)
    return float(np.count_nonzero(off & ok)) / max(1, int(np.count_nonzero(ok)))


def _measured_suspects(proto: onnx.ModelProto, dtype: str, keep: Sequence[str], feeds: Sequence[Mapping],
                       axes) -> Tuple[Dict[str, str], List[Tuple[str, str]]]:
    """``({node: why NaN/Inf first appears there}, [(node, why)] ranked by how many values FP16 moves in it)``.

    FP32 and the float part in ``dtype`` run with every float tensor exposed; a node's own share is its
    output's share of values moved more than 1% (:func:`_moved`) above its inputs' largest, so a node
    that only carries its input's error ranks low. Nodes whose FP32 output leaves FP16's range come first.
    """
    from ..accuracy.intermediates import float_intermediates
    from ..accuracy.reference import run_samples

    names = float_intermediates(proto)
    fp32 = run_samples(_exposed(proto, names), feeds, axes, 1, optimization="disable", purpose="expose FP32's tensors")
    low = run_samples(_exposed(float_part_model(proto, dtype, keep), names), feeds, axes, 1, optimization="disable",
                      purpose=f"expose the {dtype.upper()} float part's tensors")
    producer = {o: n for n in proto.graph.node for o in n.output}
    shares = {t: _moved(fp32[t], low[t]) for t in names if t in fp32 and t in low}
    bad = {t for t in shares if np.any(np.isfinite(fp32[t]) & ~np.isfinite(np.asarray(low[t], np.float64)))}
    first_bad: Dict[str, str] = {}
    ranked: List[Tuple[float, str, str]] = []
    for t, share in shares.items():
        node = producer.get(t)
        if node is None:
            continue
        name = island_name(node)
        ins = [i for i in node.input if i in shares]
        if t in bad and not any(i in bad for i in ins):
            first_bad[name] = "NaN or Inf first appears here in FP16 where FP32 is finite"
            continue
        ref = np.asarray(fp32[t], np.float64)
        peak = float(np.max(np.abs(ref[np.isfinite(ref)]))) if np.isfinite(ref).any() else 0.0
        if peak > _FP16_MAX:
            ranked.append((math.inf, name, f"its FP32 output reaches {peak:.3g}, beyond FP16's 65504"))
            continue
        before = max((shares[i] for i in ins), default=0.0)
        if share - before > 1e-3:
            ranked.append((share - before, name, f"FP16 moves {share:.1%} of its output's values by more than 1% "
                                                 f"({before:.1%} of its inputs')"))
    ranked.sort(key=lambda r: -r[0])
    return first_bad, [(n, why) for _, n, why in ranked]


def _neighbours(proto: onnx.ModelProto) -> Dict[str, List[str]]:
    """Node -> the nodes it shares a computed tensor with (producers and consumers), by ``island_name``."""
    producer = {o: island_name(n) for n in proto.graph.node for o in n.output}
    out: Dict[str, List[str]] = {island_name(n): [] for n in proto.graph.node}
    for n in proto.graph.node:
        if n.op_type in ("Constant", "Shape", "Size"):
            continue
        me = island_name(n)
        for x in n.input:
            other = producer.get(x)
            if other is not None and other != me:
                out[me].append(other)
                out.setdefault(other, []).append(me)
    return out


def _grown(seeds: Sequence[str], steps: int, near: Mapping[str, Sequence[str]]) -> List[str]:
    """``seeds`` and every node within ``steps`` of them, nearest first."""
    order = list(dict.fromkeys(seeds))
    frontier = list(order)
    for _ in range(steps):
        frontier = [m for n in frontier for m in near.get(n, ()) if m not in order]
        frontier = list(dict.fromkeys(frontier))
        order += frontier
    return order


#: Ops that move values without computing new ones: they hold FP16's values exactly, and count for no island size.
_DATA_MOVEMENT = {"Reshape", "Transpose", "Unsqueeze", "Squeeze", "Concat", "Slice", "Pad", "Cast", "Shape", "Gather",
                  "Identity", "Flatten", "Expand", "Tile", "Split", "Constant", "ConstantOfShape", "Range", "Size"}


def _ancestors(proto: onnx.ModelProto, names: Sequence[str]) -> List[str]:
    """Every node that computes what ``names`` read, nearest first (the island's input side)."""
    producer = {o: n for n in proto.graph.node for o in n.output}
    by_name = {island_name(n): n for n in proto.graph.node}
    out: List[str] = []
    todo = [x for name in names if name in by_name for x in by_name[name].input]
    while todo:
        node = producer.get(todo.pop(0))
        if node is None or island_name(node) in out or island_name(node) in names:
            continue
        out.append(island_name(node))
        todo.extend(node.input)
    return out


def _candidates(seeds: Sequence[str], near, upstream: Sequence[str], keep: Sequence[str]):
    """Islands to try, smallest first: the seeds, the block around them (1, 2, 4 steps), then with everything
    upstream of them (a front end whose values FP16 cannot hold feeds the seeds in FP16)."""
    seen = set()
    for steps, up in ((0, False), (1, False), (2, False), (4, False), (2, True), (8, True)):
        island = [n for n in list(_grown(seeds, steps, near)) + (list(upstream) if up else []) if n not in keep]
        island = list(dict.fromkeys(island))
        if island and tuple(island) not in seen:
            seen.add(tuple(island))
            yield island


def check_float_part(model, reference: Reference, target: Optional[Target], dtype: str = "fp16",
                     keep_fp32: Sequence[str] = (), find_island: bool = True) -> FloatPartCheck:
    """Judge the float part in ``dtype`` on the held-back samples and, when it fails, find its FP32 island.

    Parameters
    ----------
    model : LoadedModel, onnx.ModelProto or path
        The float model.
    reference : Reference
        The held-back samples and FP32's outputs on them.
    target : Target
        Bound to ``reference`` (:meth:`~..accuracy.target.Target.bound`).
    dtype : {"fp16", "bf16"}
    keep_fp32 : sequence of str
        Nodes the user keeps FP32 already.
    find_island : bool
        Look for an island when the float part fails.

    Returns
    -------
    FloatPartCheck
    """
    from ..model.load import as_model_proto

    proto = as_model_proto(model)
    keep = tuple(keep_fp32)
    verdict = _judge(proto, dtype, keep, reference, target)
    if verdict.meets or not find_island:
        return FloatPartCheck(dtype, verdict)
    reasons = dict(_constant_suspects(proto))
    first_bad, ranked = _measured_suspects(proto, dtype, keep, list(reference.feeds[:ANALYSIS_SAMPLES]),
                                           reference.axes)
    reasons.update(first_bad)
    seeds = [n for n in reasons if n not in keep] or [n for n, _ in ranked[:1]]
    reasons.update({n: why for n, why in ranked[:1] if n in seeds and n not in reasons})
    near = _neighbours(proto)
    best: Optional[Tuple[Tuple[str, ...], Verdict]] = None
    math_ops = {island_name(n) for n in proto.graph.node if n.op_type not in _DATA_MOVEMENT}
    weighted = {island_name(n) for n in proto.graph.node if n.op_type in WEIGHTED_OPS}
    cap = MAX_ISLAND
    upstream = _ancestors(proto, seeds)
    tried = 0
    for island in _candidates(seeds, near, upstream, keep):
        # An island is a part of an FP16 float part: at most MAX_ISLAND computing nodes, and some weighted layer
        # left in FP16 (keeping every one FP32 is the FP32 model, not FP16 with an island).
        if sum(n in math_ops for n in island) > cap or (weighted and weighted <= set(island) | set(keep)) \
                or tried >= MAX_TRIES:
            break
        got = _judge(proto, dtype, keep + tuple(island), reference, target)
        tried += 1
        if best is None or _better(got, best[1]):
            best = (tuple(island), got)
        if got.meets:
            break
    if best is not None and not best[1].meets and tried < MAX_TRIES:  # the block is not enough: measured suspects too
        room = cap - sum(n in math_ops for n in best[0])
        extra = [n for n, _ in ranked if n not in best[0] and n not in keep and n in math_ops][:max(0, room)]
        if extra:
            island = list(best[0]) + extra
            got = _judge(proto, dtype, keep + tuple(island), reference, target)
            if _better(got, best[1]):
                best = (tuple(island), got)
    if best is None:
        return FloatPartCheck(dtype, verdict, notes=(f"no node was found to keep FP32: the {dtype.upper()} float part "
                                                     "misses the target without a cause the per-node comparison "
                                                     "could name",))
    island_t, got = best
    why = dict(ranked)
    for n in island_t:
        if n not in reasons:
            reasons[n] = why.get(n, f"computes what {seeds[0]} reads" if n in upstream else
                                 f"computes with {seeds[0]} (kept FP32 as one block with it)")
    notes = () if got.meets else (f"keeping {len(island_t)} nodes FP32 still misses the target ({'; '.join(got.why)}): "
                                  "the float part needs FP32 beyond an island (--high-precision fp32)",)
    return FloatPartCheck(dtype, verdict, island_t, {n: reasons[n] for n in island_t}, got, notes)


def _better(a: Verdict, b: Verdict) -> bool:
    """Whether verdict ``a`` is closer to the target than ``b`` (meeting first, then finite, then the scores)."""
    def key(v: Verdict):
        acc = v.accuracy
        return (bool(v.meets), not v.non_finite, -len(v.why),
                acc.cosine if acc is not None and acc.cosine == acc.cosine else -1.0)
    return key(a) > key(b)
