"""Which candidate is better: one definition, used by the method choice, the layer costs, the pick and the report.

A candidate first has to meet the target (:meth:`PlanAccuracy.meets`). Its
accuracy is then one number, :meth:`Judge.loss`, measured the way the target
measures: the task metric's drop below the float model's, the output cosine's
distance from 1 (when the target names a cosine, or names nothing but a metric),
the SNR's shortfall below 60 dB (when the target names an SNR; otherwise a small
tie-break). Lower is better. Among candidates that meet the target the faster
wins, and on a tie the lower loss (:meth:`Judge.rank`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from .plan_values import Candidate, PlanAccuracy, PlanTarget

__all__ = ["Judge", "MIN_GAIN"]

#: INT8 must save at least this fraction of FP16's time (by an estimate) to be recommended.
MIN_GAIN = 0.02
#: SNR above this many dB counts as perfect.
_SNR_CEILING = 60.0


@dataclass(frozen=True)
class Judge:
    """The planner's one ordering of candidates, for one target."""

    target: PlanTarget

    def meets(self, acc: PlanAccuracy) -> bool:
        """Whether ``acc`` keeps every part of the target."""
        return acc.meets(self.target)

    def loss(self, acc: PlanAccuracy) -> float:
        """How far ``acc`` is from the float model, as the target measures it (0 is lossless)."""
        t = self.target
        drop = 0.0
        if acc.metric is not None and acc.metric_reference is not None:
            drop = max(0.0, acc.metric_reference - acc.metric)
        snr_short = max(0.0, _SNR_CEILING - min(acc.snr_db, _SNR_CEILING)) / _SNR_CEILING
        cos_short = max(0.0, 1.0 - acc.cosine)
        uses_cosine = t.cosine is not None or t.snr_db is None
        # NaN or Inf where FP32 is finite: worse than any score (the scores cannot see those values).
        broken = 1.0 if acc.non_finite else 0.0
        return (broken + drop + (cos_short if uses_cosine else 1e-3 * cos_short)
                + (snr_short if t.snr_db is not None else 1e-3 * snr_short))

    def rank(self, c: Candidate) -> Tuple[bool, float, float]:
        """Sort key of a candidate: meeting the target first, then the faster, then the lower loss."""
        return (not c.meets_target, round(c.latency_us, 3), self.loss(c.accuracy))

    def pick(self, cands: Sequence[Candidate]) -> Tuple[Optional[int], str]:
        """``(index, why)``: the fastest candidate that meets the target; None when none does.

        FP16 is judged like every candidate: the float candidates (no INT8 layer: FP16, FP16 with an
        FP32 island) are the baseline only where they meet the target, and an INT8 candidate must be
        faster than that baseline to be picked. Where no float candidate meets the target, the fastest
        accurate INT8 candidate is picked whatever its speed; where no candidate meets it, nothing is.
        """
        base = next((i for i, c in enumerate(cands) if not c.quantized and c.meets_target), None)
        accurate = [i for i, c in enumerate(cands) if c.meets_target and c.quantized]
        # An unknown (NaN) latency is never a reason to pick: only candidates with a known speed-up compete.
        good = [i for i in accurate if math.isfinite(cands[i].speedup)]
        if base is None:
            return self._without_float(cands, good or accurate)
        if not good:
            if accurate:
                return base, (f"Cannot estimate the latency of the {len(accurate)} INT8 candidates that meet the "
                              "target (see the notes: outside what the cost model's calibration on the zoo supports, "
                              f"or shapes it cannot see): {cands[base].name} until they are measured. "
                              "Measure them on a GPU: plan --measure, or `trtwidgets plan measure PLAN_DIR`.")
            why = ("no INT8 candidate keeps the accuracy target" if any(c.quantized for c in cands)
                   else "no layer is expected to be faster in INT8")
            return base, f"{_float_name(cands, base)} is best here: {why}."
        best = min(good, key=lambda i: self.rank(cands[i]))
        c = cands[best]
        why_not = self.not_worth_it(c)
        if why_not:
            return base, why_not.replace("FP16 is best here", f"{_float_name(cands, base)} is best here", 1)
        gain = 1 - c.vs_fp16
        return best, (f"{c.name}: the fastest candidate that meets the target, {gain:.0%} faster than FP16 "
                      f"({c.latency_source}), {len(c.quantized)} INT8 layers"
                      + (f", {len(c.kept)} kept in high precision" if c.kept else "") + ".")

    def _without_float(self, cands: Sequence[Candidate], accurate: Sequence[int]) -> Tuple[Optional[int], str]:
        """The pick when no float candidate meets the target: the fastest accurate INT8 one, or none."""
        fp16 = next((c for c in cands if not c.quantized), None)
        missed = (f"FP16 misses it ({'; '.join(fp16.accuracy.failures(self.target)) or 'not scored'})"
                  if fp16 is not None else "FP16 was not scored")
        if accurate:
            best = min(accurate, key=lambda i: self.rank(cands[i]))
            return best, (f"{cands[best].name}: the fastest candidate that meets the target; {missed}, so no "
                          "float engine is an alternative.")
        return None, (f"No candidate meets the target, not even FP16: {missed}. Nothing is recommended: keep the "
                      "nodes that break the float part in FP32 (--keep-fp32, the notes name them), or relax the "
                      "target.")

    @staticmethod
    def not_worth_it(c: Candidate) -> Optional[str]:
        """Why the fastest accurate INT8 candidate still loses to FP16, or None.

        An estimate must promise a clear gain; a timing (oracle, measurement) needs only to promise one.
        """
        margin = MIN_GAIN if c.latency_source == "estimate" else 0.0
        speedup = c.speedup
        if not math.isfinite(speedup):  # an estimate of 0, infinity or NaN: no ratio to weigh, never a division
            return (f"FP16 until measured: cannot estimate the latency of {c.name} (its shapes are unknown to the "
                    "estimate). Measure it on a GPU: plan --measure, or `trtwidgets plan measure PLAN_DIR`.")
        if speedup > 1 + margin:
            return None
        return (f"FP16 is best here: INT8 gains nothing (the best INT8 candidate that meets the target is "
                f"{c.vs_fp16:.2f}x FP16, {c.latency_source}).")


def _float_name(cands: Sequence[Candidate], i: int) -> str:
    """How the reason names a float candidate: FP16, or FP16 with its island."""
    name = cands[i].name
    return "FP16" if name.startswith("FP16 (no INT8)") else name
