"""The planner's accuracy search: candidates between all paying layers in INT8 and FP16.

What INT8 costs in each paying layer alone, per-tensor ranges for the costliest,
then a bisection over the gain-per-cost order (:mod:`.plan_search`); every probe is
a candidate, timed by one :class:`~.latency.LatencyModel` and judged by one
:class:`~.judge.Judge`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..common.cancel import check
from .judge import Judge
from .latency import LatencyModel
from .phases import Progress
from .plan_eval import Evaluator
from .plan_search import bisect_prefix, gain_per_cost, layer_costs_alone, tune_ranges
from .plan_values import Candidate, PlanAccuracy

__all__ = ["WRITTEN_FLOAT", "Candidates", "Search", "accuracy_search", "as_written", "every_layer_misses",
           "measure_layer_costs", "tune_worst_ranges", "prefix_bisection"]


@dataclass
class Candidates:
    """The candidates so far, each timed by one latency model and judged by one judge."""

    latency: LatencyModel
    judge: Judge
    items: List[Candidate] = field(default_factory=list)
    #: The FP32 island's extra time (us) in every candidate that keeps it (0: the float part needs no island).
    island_us: float = 0.0

    def __post_init__(self) -> None:
        self.fp16_us = self.latency.estimate(())

    def make(self, name: str, quantized: Sequence[str], kept: Sequence[Tuple[str, str]],
             acc: PlanAccuracy, float_island: bool = True) -> Candidate:
        """A candidate timed by the latency model, plus the FP32 island's time (:attr:`island_us`) where it keeps
        the island (every candidate but FP16 as given: ``float_island=False``)."""
        us = self.latency.estimate(quantized) + (self.island_us if float_island else 0.0)
        return Candidate(name, tuple(quantized), tuple(kept), acc, us, self.fp16_us, self.latency.kind,
                         self.judge.meets(acc))

    def add(self, name: str, quantized: Sequence[str], kept: Sequence[Tuple[str, str]], acc: PlanAccuracy,
            float_island: bool = True) -> Candidate:
        c = self.make(name, quantized, kept, acc, float_island)
        self.items.append(c)
        return c


@dataclass(frozen=True)
class Search:
    """What the accuracy phases share: the evaluator, the judge, every quantizable layer, progress.

    ``on_progress(phase, done, total)`` hears of each unit of work (see :class:`~.phases.Progress`).
    """

    ev: Evaluator
    judge: Judge
    layers: Tuple[str, ...]
    progress: bool
    say: Callable[[str], None]
    on_progress: Optional[Callable[[str, int, int], None]] = None


#: Why a layer of a candidate's node set runs float in its written model (the export placed it so).
WRITTEN_FLOAT = ("kept float by the export with this node set: TensorRT 8.6 cannot build it in INT8 beside the "
                 "layers kept float (placement rule 12: sibling INT8 convolutions that all write float)")


def as_written(chosen: Sequence[str], written: Sequence[str], kept: Sequence[Tuple[str, str]]
               ) -> Tuple[Tuple[str, ...], Tuple[Tuple[str, str], ...]]:
    """``(quantized, kept)`` of a candidate as its model is written: the layers of ``chosen`` the export ran in INT8
    (``written``, its report's), and the others kept with the reason, so plan.json lists exactly the INT8 layers of
    the model it exports."""
    ran = set(written)
    return (tuple(n for n in chosen if n in ran),
            tuple(kept) + tuple((n, WRITTEN_FLOAT) for n in chosen if n not in ran))


def measure_layer_costs(s: Search, amax: Mapping[str, float], pays: Sequence[str], latency: LatencyModel,
                        max_ranked: int) -> Dict[str, float]:
    """What INT8 costs in each paying layer alone (the ``max_ranked`` layers INT8 saves most on)."""
    ranked = sorted(pays, key=lambda n: -latency.gain_us(n))[:max_ranked]
    s.say(f"measuring what INT8 costs in each of {len(ranked)} layers")
    with Progress(len(ranked), s.progress, "layer cost", s.on_progress) as bar:
        return layer_costs_alone(s.ev, amax, ranked, s.judge, tick=bar.tick)


def tune_worst_ranges(s: Search, amax: Dict[str, float], per_method: Mapping[str, Tuple[PlanAccuracy, Dict]],
                      cost: Dict[str, float], pays: Sequence[str]) -> bool:
    """The costliest layers' inputs may take another method; kept only if the model as a whole is no worse.

    Changes ``amax`` and ``cost`` in place; True when the ranges changed.
    """
    worst = sorted(cost, key=lambda n: -cost[n])[:4]
    s.say(f"choosing per-tensor ranges for the {len(worst)} costliest layers")
    before = dict(amax)
    if not tune_ranges(s.ev, amax, {m: v[1] for m, v in per_method.items()}, worst, s.judge):
        return False
    # A range better for a layer alone must not hurt the model as a whole: check, else undo.
    if s.judge.loss(s.ev.score(amax, pays, rank=True)[0]) <= s.judge.loss(s.ev.score(before, pays, rank=True)[0]):
        cost.update(layer_costs_alone(s.ev, amax, worst, s.judge))
        return True
    amax.clear()
    amax.update(before)
    return False


def prefix_bisection(s: Search, cands: Candidates, amax: Mapping[str, float], pays: Sequence[str],
                     kept_latency: Sequence[Tuple[str, str]], cost: Mapping[str, float], latency: LatencyModel,
                     full_meets: bool) -> List[int]:
    """The longest gain-per-cost prefix of ``pays`` that meets the target; each probe is a candidate."""
    order = gain_per_cost(pays, {n: latency.gain_us(n) for n in pays}, cost)
    rank = {n: i for i, n in enumerate(order)}
    s.say("finding how many layers INT8 can take within the target")

    def probe(k: int):
        chosen = order[:k]
        float_layers = [n for n in pays if n not in chosen]
        acc, written = s.ev.score(amax, chosen)
        kept = tuple(kept_latency) + tuple(
            (n, f"kept in high precision for accuracy (INT8 here costs {cost.get(n, 0.0):.4f} of the target "
                f"measure alone; rank {rank[n] + 1} of {len(order)} by gain per cost)") for n in float_layers)
        c = cands.add(f"INT8 in the {k} layers most worth it", *as_written(chosen, written, kept), acc)
        return acc, c.meets_target

    # With Dask workers, the probe and the two that may follow it are answered side by side (no-op in one process).
    return bisect_prefix(order, probe, full_meets, ahead=lambda ks: s.ev.prefetch((amax, order[:k], False) for k in ks))


def every_layer_misses(s: Search, cands: Candidates, amax: Mapping[str, float], cost: Mapping[str, float],
                       kept_latency: Sequence[Tuple[str, str]]) -> Optional[str]:
    """Why no INT8 candidate can meet the target, or None: the least costly layer alone misses it.

    Errors of a mostly-float model add up, so every candidate with an INT8 layer costs at least as much as its
    least costly layer alone: when that one misses the target on every held-back sample, per-tensor ranges and
    the bisection cannot find a candidate, and the search stops (a ViT-S under a task metric spent 100 s there
    to conclude the same). Its candidate is kept, judged on every sample.
    """
    check()  # a cancel during the costs stops here, though every score it asks for was remembered
    if not cost:
        return None
    best = min(cost, key=lambda n: (cost[n], n))
    acc, written = s.ev.score(amax, {best})  # every held-back sample: the rank subset alone does not stop the search
    if not written or s.judge.meets(acc):
        return None
    c = cands.add("INT8 in the 1 layer costing least", *as_written([best], written, kept_latency), acc)
    return (f"every layer alone misses the target in INT8: the least costly, {best}, alone: "
            f"{'; '.join(c.accuracy.failures(s.judge.target)) or 'misses'}; no candidate with an INT8 layer can "
            "meet it, so the search stopped there (no per-tensor ranges, no bisection)")


def accuracy_search(s: Search, cands: Candidates, amax: Dict[str, float], per_method, pays: List[str],
                    kept_latency: List[Tuple[str, str]], latency: LatencyModel, max_ranked: int,
                    seconds: Dict[str, float], notes: List[str]) -> None:
    """Candidates between all-paying-layers and FP16: costs alone, per-tensor ranges, prefix bisection."""
    base, written = s.ev.score(amax, pays)
    c_pays = cands.add("INT8 where it pays", *as_written(pays, written, kept_latency), base)
    if c_pays.meets_target:
        notes.append("every layer where INT8 pays keeps the target: no layer was ranked by accuracy cost")
        return
    t = time.perf_counter()
    cost = measure_layer_costs(s, amax, pays, latency, max_ranked)
    seconds["sensitivity"] = time.perf_counter() - t
    lost = every_layer_misses(s, cands, amax, cost, kept_latency)
    if lost:
        notes.append(lost)
        return
    t = time.perf_counter()
    if tune_worst_ranges(s, amax, per_method, cost, pays):
        base, _ = s.ev.score(amax, pays)
        c_pays = cands.items[-1] = cands.make(c_pays.name + " (tuned ranges)", c_pays.quantized, c_pays.kept, base)
    seconds["per-tensor ranges"] = time.perf_counter() - t
    t = time.perf_counter()
    prefix_bisection(s, cands, amax, pays, kept_latency, cost, latency, c_pays.meets_target)
    seconds["search"] = time.perf_counter() - t


