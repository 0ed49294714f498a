"""Choosing each pattern's scheme by its sub-model's measured time, and the candidate that combines the choices.

A scheme replaces the default only when its sub-model is faster beyond the noise (the larger round spread
of the two) and it is offered: buildable on TensorRT 8.6 and, where it was scored, accurate enough on the
held-back samples. The choices of every pattern together make one candidate (:func:`combined_candidate`),
which one whole-model build confirms against FP16 and the base export
(:func:`trtwidgets.trt.plan_measure.measure_plan`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

from ..plan_values import Candidate, PlanAccuracy
from .records import PatternRecord, RegionSearch, SchemeResult
from .schemes import combined_choices

__all__ = ["choose_scheme", "choose_schemes", "combined_candidate", "region_lines", "schemes_table"]


def _ok(s: SchemeResult) -> bool:
    return s.timing is not None and s.timing.ok


def choose_scheme(rec: PatternRecord) -> PatternRecord:
    """``rec`` with ``chosen`` and ``reason`` set from its schemes' timings."""
    d = rec.default
    offered = [s for s in rec.schemes if not s.default and s.offered and _ok(s)]
    left = [f"{s.scheme} ({s.note or ('misses the target' if s.meets_target is False else 'not timed')})"
            for s in rec.schemes if not s.default and not (s.offered and _ok(s))]
    tail = f"; not offered: {', '.join(left)}" if left else ""
    if not offered:
        return dataclasses.replace(rec, chosen=d.scheme, reason=f"no other scheme was timed and offered{tail}")
    best = min(offered, key=lambda s: s.median_ms)
    if not _ok(d):
        why = d.timing.error if d.timing is not None else "not timed"
        return dataclasses.replace(rec, chosen=best.scheme, reason=f"the default {d.scheme} has no time ({why}); "
                                   f"{best.scheme} ran {best.median_ms:.4f} ms{tail}")
    noise = max(d.spread_ms, best.spread_ms)
    ratio = best.median_ms / d.median_ms
    text = (f"{best.scheme} {best.median_ms:.4f} ms against {d.scheme} {d.median_ms:.4f} ms ({ratio:.3f}x, noise "
            f"{noise:.4f} ms)")
    if best.median_ms < d.median_ms - noise:
        return dataclasses.replace(rec, chosen=best.scheme, reason=f"faster beyond the noise: {text}{tail}")
    return dataclasses.replace(rec, chosen=d.scheme, reason=f"kept the default, no scheme faster beyond the noise: "
                               f"{text}{tail}")


def choose_schemes(search: RegionSearch) -> RegionSearch:
    """Every pattern's choice (:func:`choose_scheme`)."""
    return dataclasses.replace(search, patterns=tuple(choose_scheme(p) for p in search.patterns))


def _worst(accs: Sequence[PlanAccuracy]) -> Optional[PlanAccuracy]:
    if not accs:
        return None
    metric = [a.metric for a in accs if a.metric is not None]
    return PlanAccuracy(cosine=min(a.cosine for a in accs), snr_db=min(a.snr_db for a in accs),
                        metric=min(metric) if metric else None,
                        metric_reference=accs[0].metric_reference if metric else None,
                        worst_group=min(accs, key=lambda a: a.cosine).worst_group)


def combined_candidate(search: RegionSearch, cands: Sequence[Candidate]) -> Optional[Candidate]:
    """The base candidate with every pattern's chosen scheme, or None when every pattern kept its default.

    Its accuracy is not the combination's (ONNX Runtime is not run where the schemes are timed): it is the
    worst of the chosen schemes' own (each scored alone over the base), and it meets the target when each
    of them did; the engine check judges the combined engine (:mod:`~..engine_check`).
    """
    picked = {p.name: p.chosen for p in search.patterns if p.chosen and p.chosen != p.default.scheme}
    if not picked:
        return None
    base = cands[search.base]
    choices, floats = combined_choices(search.patterns, picked)
    chosen: List[SchemeResult] = [s for p in search.patterns if p.name in picked
                                  if (s := p.scheme(picked[p.name])) is not None]
    accs = [s.accuracy for s in chosen if s.accuracy is not None]
    worst = (_worst(accs + [base.accuracy]) if accs else None) or base.accuracy
    meets = base.meets_target and all(s.meets_target is not False for s in chosen)
    names = ", ".join(f"{p.kind} {picked[p.name]} x{len(p.instances)}" for p in search.patterns if p.name in picked)
    quantized = tuple(n for n in base.quantized if n not in set(floats))
    kept = tuple(base.kept) + tuple((n, "kept float by its region's scheme (a branch kept float)") for n in floats)
    return Candidate(f"{base.name} + region schemes ({names})"[:200], quantized, kept, worst, math.nan,
                     base.fp16_latency_us, "measured", meets, tuple(choices.items()))


def schemes_table(search: RegionSearch) -> List[Tuple[str, str, str, str, str, str, str]]:
    """Rows ``(pattern, instances, scheme, ms, spread, accuracy, verdict)`` for printing."""
    rows = []
    for p in search.patterns:
        for s in p.schemes:
            acc = s.accuracy
            rows.append((p.name, str(len(p.instances)), s.scheme + (" (default)" if s.default else ""),
                         f"{s.median_ms:.4f}" if math.isfinite(s.median_ms) else "-",
                         f"{s.spread_ms:.4f}" if math.isfinite(s.spread_ms) else "-",
                         (f"{acc.metric:.4f}" if acc is not None and acc.metric is not None else
                          f"cos {acc.cosine:.4f}" if acc is not None else "-"),
                         "chosen" if s.scheme == p.chosen else ("not buildable" if not s.buildable else "")))
    return rows


def region_lines(search: Optional[RegionSearch]) -> List[str]:
    """A line per pattern: its instances, the schemes' times and the choice (what the CLI prints)."""
    if search is None:
        return []
    out = []
    for p in search.patterns:
        times = ", ".join(f"{s.scheme} {s.median_ms:.4f} ms" if math.isfinite(s.median_ms) else f"{s.scheme} -"
                          for s in p.schemes)
        out.append(f"region {p.name} ({p.kind}, {len(p.instances)} instances, {p.description[:60]}): {times}"
                   + (f"; chosen {p.chosen}: {p.reason}" if p.chosen else "; not measured"))
    if search.combined is not None:
        out.append(f"region schemes combined: candidate {search.combined}")
    return out
