"""The accuracy half of the planner: what each layer's INT8 costs, and how many layers the target allows.

A layer's cost is measured alone: the model with only that layer in INT8, against
FP32 on held-back samples (errors of a mostly-float model add up roughly, so the
costs rank well; leave-one-out from a fully quantized model is noisier). Layers
are then taken in order of latency gain per unit of cost, and a bisection finds
the longest prefix that still meets the target. Each probe is a candidate the
user sees, so the Pareto chart shows the trade-off the search walked.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .plan_values import PlanAccuracy

__all__ = ["loss", "layer_costs_alone", "tune_ranges", "bisect_prefix", "gain_per_cost"]


def loss(acc: PlanAccuracy) -> float:
    """One number to minimise: the metric's drop, else 1 - cosine (plus a little of each)."""
    drop = 0.0
    if acc.metric is not None and acc.metric_reference is not None:
        drop = max(0.0, acc.metric_reference - acc.metric)
    return drop + max(0.0, 1.0 - acc.cosine) + 1e-3 * max(0.0, 60.0 - min(acc.snr_db, 60.0)) / 60.0


def layer_costs_alone(ev, amax: Mapping[str, float], layers: Sequence[str], everything: Sequence[str],
                      tick: Optional[Callable[[], None]] = None) -> Dict[str, float]:
    """Layer -> loss of the model with only that layer in INT8 (every other weighted layer float)."""
    out: Dict[str, float] = {}
    for layer in layers:
        acc, quantized = ev.score(amax, [n for n in everything if n != layer], rank=True)
        out[layer] = loss(acc) if quantized else 0.0
        if tick is not None:
            tick()
    return out


def tune_ranges(ev, amax: Dict[str, float], per_method: Mapping[str, Mapping[str, float]], layers: Sequence[str],
                everything: Sequence[str]) -> int:
    """For each of ``layers`` (alone in INT8), give its input tensor the range method with the least loss.

    Changes ``amax`` in place; returns how many tensors changed method.
    """
    changed = 0
    for layer in layers:
        node = ev.node(layer)
        tensor = node.input[0] if node is not None and node.input else None
        if tensor is None or tensor not in amax:
            continue
        others = [n for n in everything if n != layer]
        best_val = amax[tensor]
        best = loss(ev.score(amax, others, rank=True)[0])
        for values in per_method.values():
            alt = values.get(tensor)
            if alt is None or alt == amax[tensor]:
                continue
            trial = dict(amax)
            trial[tensor] = alt
            value = loss(ev.score(trial, others, rank=True)[0])
            if value < best - 1e-6:
                best, best_val = value, alt
        if best_val != amax[tensor]:
            amax[tensor] = best_val
            changed += 1
    return changed


def bisect_prefix(order: Sequence[str], evaluate: Callable[[int], Tuple[PlanAccuracy, bool]],
                  full_meets: bool, max_probes: int = 7) -> List[int]:
    """Prefix lengths probed to find the longest prefix of ``order`` that meets the target.

    ``evaluate(k)`` scores the model with the first ``k`` layers of ``order`` in INT8
    (and records the candidate); ``full_meets`` says whether all of them already do.
    """
    if full_meets or not order:
        return []
    lo, hi = 0, len(order)  # lo meets (nothing quantized), hi does not
    probed: List[int] = []
    while hi - lo > 1 and len(probed) < max_probes:
        mid = (lo + hi) // 2
        _, meets = evaluate(mid)
        probed.append(mid)
        if meets:
            lo = mid
        else:
            hi = mid
    return probed


def gain_per_cost(layers: Sequence[str], gains: Mapping[str, float], costs: Mapping[str, float]) -> List[str]:
    """Layers ordered by latency gain per unit of accuracy cost (most worth quantizing first)."""
    eps = 1e-4
    return sorted(layers, key=lambda n: -(max(gains.get(n, 0.0), 0.0) + 1e-6) / (costs.get(n, 0.0) + eps))
