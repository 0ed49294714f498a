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

from .judge import Judge
from .plan_values import PlanAccuracy

__all__ = ["layer_costs_alone", "tune_ranges", "bisect_prefix", "gain_per_cost", "border_search"]


def layer_costs_alone(ev, amax: Mapping[str, float], layers: Sequence[str], judge: Judge,
                      tick: Optional[Callable[[], None]] = None) -> Dict[str, float]:
    """Layer -> loss (:meth:`.Judge.loss`) of the model with only that layer in INT8 (every other weighted layer float)."""
    out: Dict[str, float] = {}
    ev.prefetch((amax, {layer}, True) for layer in layers)  # independent questions: side by side on Dask workers
    for layer in layers:
        acc, quantized = ev.score(amax, {layer}, rank=True)
        out[layer] = judge.loss(acc) if quantized else 0.0
        if tick is not None:
            tick()
    return out


def tune_ranges(ev, amax: Dict[str, float], per_method: Mapping[str, Mapping[str, float]], layers: Sequence[str],
                judge: Judge) -> int:
    """For each of ``layers`` (alone in INT8), give its input tensor the range method with the least loss.

    Changes ``amax`` in place; returns how many tensors changed method.
    """
    changed = 0
    for layer in layers:
        node = ev.node(layer)
        tensor = node.input[0] if node is not None and node.input else None
        if tensor is None or tensor not in amax:
            continue
        best_val = amax[tensor]
        trials = [dict(amax, **{tensor: v[tensor]}) for v in per_method.values()
                  if v.get(tensor) is not None and v[tensor] != amax[tensor]]
        ev.prefetch((a, {layer}, True) for a in [amax] + trials)
        best = judge.loss(ev.score(amax, {layer}, rank=True)[0])
        for values in per_method.values():
            alt = values.get(tensor)
            if alt is None or alt == amax[tensor]:
                continue
            trial = dict(amax)
            trial[tensor] = alt
            value = judge.loss(ev.score(trial, {layer}, rank=True)[0])
            if value < best - 1e-6:
                best, best_val = value, alt
        if best_val != amax[tensor]:
            amax[tensor] = best_val
            changed += 1
    return changed


def bisect_prefix(order: Sequence[str], evaluate: Callable[[int], Tuple[PlanAccuracy, bool]],
                  full_meets: bool, max_probes: int = 7,
                  ahead: Optional[Callable[[List[int]], None]] = None) -> List[int]:
    """Prefix lengths probed to find the longest prefix of ``order`` that meets the target.

    ``evaluate(k)`` scores the model with the first ``k`` layers of ``order`` in INT8
    (and records the candidate); ``full_meets`` says whether all of them already do. ``ahead(ks)``, when given,
    hears of the probe about to be asked and the two that may follow it (either way it goes), so that workers
    can answer them side by side; the probes asked, and so the result, are the same.
    """
    if full_meets or not order:
        return []
    lo, hi = 0, len(order)  # lo meets (nothing quantized), hi does not
    probed: List[int] = []
    while hi - lo > 1 and len(probed) < max_probes:
        mid = (lo + hi) // 2
        if ahead is not None:
            ahead([k for k in dict.fromkeys((mid, (lo + mid) // 2, (mid + hi) // 2)) if lo < k < hi])
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


def border_search(pays: List[str], allowed: Sequence[str], latency: Callable[[Sequence[str]], float]
                  ) -> Tuple[List[str], List[str], List[str]]:
    """Local search over which layers run INT8, counting the reformats at INT8/float borders.

    A layer that pays alone may not pay once its borders are counted (drop it); a
    layer that does not pay alone may remove two borders between INT8 neighbours
    (add it). Moves are taken while they lower the estimated total.

    Returns
    -------
    (quantized, dropped, added)
    """
    current = list(pays)
    best = latency(current)
    dropped: List[str] = []
    added: List[str] = []
    for _ in range(4):
        changed = False
        for layer in list(allowed):
            trial = [n for n in current if n != layer] if layer in current else current + [layer]
            t = latency(trial)
            if t < best - 1e-9:
                (dropped if layer in current else added).append(layer)
                current, best, changed = trial, t, True
        if not changed:
            break
    dropped = [n for n in dropped if n not in current]
    added = [n for n in added if n in current]
    return [n for n in allowed if n in current], dropped, added
