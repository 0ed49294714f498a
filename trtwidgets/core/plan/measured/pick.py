"""Picking by measured latency: the fastest engine that meets accuracy and wins FP16's paired rounds.

* :func:`pick_measured`: the fastest candidate that meets accuracy and is faster than FP16 by the
  paired rounds (:mod:`.paired`: the one-sided exact sign test, p < 0.05); FP16 when none is. A
  candidate FP16 beats by the same test is never recommended. The larger round spread is reported
  beside it, as a second criterion, not the decision.
* :func:`known_estimates`: estimates that are NaN or unknown are never a reason to pick;
  this drops them and says "cannot estimate; measure".

The plan's use of them is :mod:`.repick`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...common.errors import UserError
from ..plan_values import ratio
from ...common.serial import json_float, read_float
from .measurement import FP16, INT8_IMPLICIT, Measurement
from .paired import PairedRounds, paired_rounds

__all__ = ["MeasuredPick", "NONE", "known_estimates", "pick_measured"]

#: The measured pick's name when no engine meets the target, FP16 included.
NONE = ""


@dataclass(frozen=True)
class MeasuredPick:
    """What the measurements recommend.

    Attributes
    ----------
    name : str
        The pick: a candidate's name, or ``"fp16"``.
    median_ms, fp16_ms : float
    noise_ms : float
        The larger round spread of the pick and FP16, reported beside the paired test.
    reason : str
        Why, in words.
    notes : tuple of str
        What was left out and why (slower than FP16, accuracy not met, not measured), and
        implicit INT8's time for reference.
    candidate : int, optional
        The plan's candidate it is (0: FP16), once a plan's pick (:mod:`.repick`); None for
        implicit INT8 or outside a plan.
    paired : PairedRounds, optional
        The pick against FP16 round by round; for an FP16 pick, the fastest candidate's that it was
        judged by. None where no candidate was compared (and in plan.json files written before it).
    """

    name: str
    median_ms: float
    fp16_ms: float
    noise_ms: float
    reason: str
    notes: Tuple[str, ...] = ()
    candidate: Optional[int] = None
    paired: Optional[PairedRounds] = None

    @property
    def speedup(self) -> float:
        """FP16 time / pick time (1.0 for FP16; NaN unless both are finite and positive)."""
        return ratio(self.fp16_ms, self.median_ms)

    @property
    def vs_fp16(self) -> float:
        """Pick time / FP16 time (NaN unless both are finite and positive)."""
        return ratio(self.median_ms, self.fp16_ms)

    def to_dict(self) -> dict:
        """For plan.json."""
        out: Dict[str, Any] = {"name": self.name, "median_ms": json_float(self.median_ms), "fp16_ms": json_float(self.fp16_ms),
               "noise_ms": json_float(self.noise_ms), "speedup": json_float(self.speedup), "reason": self.reason,
               "notes": list(self.notes), "candidate": self.candidate}
        if self.paired is not None:
            out["paired"] = self.paired.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping) -> "MeasuredPick":
        """Inverse of :meth:`to_dict` (plan.json's record, checked by :mod:`..plan_file`)."""
        cand, paired = d.get("candidate"), d.get("paired")
        return cls(str(d["name"]), read_float(d.get("median_ms")), read_float(d.get("fp16_ms")),
                   read_float(d.get("noise_ms")), str(d.get("reason", "")), tuple(str(n) for n in d.get("notes", ())),
                   None if cand is None else int(cand), None if paired is None else PairedRounds.from_dict(paired))


def _fp16(measurements: Sequence[Measurement]) -> Measurement:
    base = [m for m in measurements if m.kind == FP16 and m.ok]
    if not base:
        raise UserError("There is no FP16 measurement to judge the candidates against.",
                        "A candidate is recommended only when it is measured no slower than FP16.",
                        "Measure FP16 too (it is built first); if its build failed, fix that first.")
    return base[0]


def pick_measured(measurements: Sequence[Measurement], meets: Mapping[str, bool],
                  prefer_fp16_within_noise: bool = True) -> MeasuredPick:
    """The fastest candidate that meets accuracy and is faster than FP16 by the paired rounds; else FP16.

    Parameters
    ----------
    measurements : sequence of Measurement
        FP16 (required), implicit INT8 and the Q/DQ candidates, timed in the same interleaved rounds.
    meets : mapping
        Candidate name -> whether it meets the accuracy target. A candidate not in it is
        never picked (its accuracy is unknown). Implicit INT8 competes only when it is in it
        with True: its engine was run on the held-back samples and met the target (ONNX
        Runtime cannot predict it); otherwise it is reported as a reference.
    prefer_fp16_within_noise : bool
        When no candidate that meets accuracy wins FP16's paired rounds by the sign test, pick FP16
        (as fast as far as the run can tell, and more accurate); False picks the fastest such candidate
        by median all the same.

    Returns
    -------
    MeasuredPick
        Its reason names the test, the rounds won and p, and the larger round spread beside them.
    """
    base = _fp16(measurements)
    notes: List[str] = []
    eligible: List[Measurement] = []
    # FP16 is judged like every candidate: where it misses the target it is no baseline to beat.
    fp16_meets = meets.get(FP16, True) is not False
    for m in measurements:
        if m.kind == FP16:
            continue
        if not m.ok:
            notes.append(f"{m.name}: not measured ({m.error or 'no time'}).")
            continue
        vs = ratio(m.median_ms, base.median_ms)
        if m.kind == INT8_IMPLICIT and not meets.get(m.name, False):
            why = ("its engine misses the accuracy target on the held-back samples" if m.name in meets
                   else "its accuracy was not checked on the engine")
            notes.append(f"implicit INT8 (reference, not a candidate: {why}): {m.median_ms:.4f} ms, "
                         f"{vs:.3f}x FP16.")
            continue
        slower = paired_rounds(base, m)
        if fp16_meets and slower.faster:
            notes.append(f"{m.name}: {m.median_ms:.4f} ms is slower than FP16 ({base.median_ms:.4f} ms): FP16 "
                         f"{slower.text()}; never recommended.")
            continue
        if not meets.get(m.name, False):
            notes.append(f"{m.name}: " + ("does not meet the accuracy target." if m.name in meets
                                          else "accuracy not known; not recommended."))
            continue
        eligible.append(m)
    if not eligible and not fp16_meets:
        return MeasuredPick(NONE, math.nan, base.median_ms, base.spread_ms,
                            "no measured engine meets the target, FP16 included: nothing is recommended.",
                            tuple(notes))
    if not eligible:
        return MeasuredPick(FP16, base.median_ms, base.median_ms, base.spread_ms,
                            "FP16: no candidate that meets accuracy was measured without FP16 beating it.",
                            tuple(notes))
    return _fastest(base, eligible, fp16_meets, prefer_fp16_within_noise, notes)


def _by_time(m: Measurement):
    return (m.median_ms, m.spread_ms, m.name)


def _fastest(base: Measurement, eligible: List[Measurement], fp16_meets: bool, prefer_fp16: bool,
             notes: List[str]) -> MeasuredPick:
    """The pick among ``eligible``: the fastest that wins FP16's paired rounds; FP16 when none does (see above)."""
    wins = {m.name: paired_rounds(m, base) for m in eligible}
    faster = [m for m in eligible if wins[m.name].faster]
    # Without a baseline that meets the target, the fastest that meets it is picked, won or not.
    best = min(faster if faster and fp16_meets else eligible, key=_by_time)
    paired, noise = wins[best.name], max(base.spread_ms, best.spread_ms)
    if not fp16_meets:
        notes.append("FP16 misses the target: the fastest candidate that meets it is picked, whatever its speed.")
    elif not faster and prefer_fp16:
        return MeasuredPick(FP16, base.median_ms, base.median_ms, noise,
                            f"FP16: the fastest candidate ({best.name}, {best.median_ms:.4f} ms against FP16's "
                            f"{base.median_ms:.4f} ms) is not faster than FP16 by the paired rounds: it was "
                            f"{paired.text()}, and p < 0.05 is needed.", tuple(notes), paired=paired)
    spread = "beyond" if best.median_ms < base.median_ms - noise else "within"
    return MeasuredPick(best.name, best.median_ms, base.median_ms, noise,
                        f"{best.name}: {best.median_ms:.4f} ms against FP16's {base.median_ms:.4f} ms "
                        f"({ratio(base.median_ms, best.median_ms):.2f}x), {paired.text()}; {spread} the larger round "
                        f"spread ({noise:.4f} ms); measured; meets accuracy.", tuple(notes), paired=paired)


def known_estimates(estimates: Mapping[str, Optional[float]]) -> Tuple[Dict[str, float], Optional[str]]:
    """Estimates that can be a reason to pick, and a note for the rest.

    Parameters
    ----------
    estimates : mapping
        Candidate name -> estimated ms (None or NaN/inf when the model could not estimate it,
        e.g. shapes that shape inference cannot resolve).

    Returns
    -------
    (dict, str or None)
        The finite, positive estimates; and, when any were dropped, a note that names them
        and says "cannot estimate; measure". When every estimate is unknown the dict is
        empty: such a plan picks nothing by estimate.
    """
    known: Dict[str, float] = {}
    unknown: List[str] = []
    for name, v in estimates.items():
        if v is None or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            unknown.append(name)
        else:
            known[name] = float(v)
    if not unknown:
        return known, None
    shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    if not known:
        return known, (f"Cannot estimate the latency of any candidate ({shown}): measure them on a GPU "
                       "(plan --measure, or `trtwidgets plan measure PLAN_DIR` on the GPU machine).")
    return known, (f"Cannot estimate {shown}; those are not picked by estimate: measure them on a GPU "
                   "(plan --measure).")
