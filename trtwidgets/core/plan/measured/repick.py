"""A plan picked again by measured time: which candidates to build, the new pick, the planner's last phase.

The planner's latency is a hypothesis (a cost model, or an implicit build's choices).
Where a GPU is present the candidates are built and timed
(:mod:`trtwidgets.trt.plan_measure`); this module holds the decisions, which need no
GPU and are tested on numbers:

* :func:`measure_targets`: which candidates to build besides FP16 and implicit INT8:
  the estimate's pick and the fastest others that meet the target, one per distinct
  set of INT8 layers (a change of ranges alone changes no latency).
* :func:`apply_measurements`: the plan with its pick made again by measured time
  (:func:`~.pick.pick_measured`: a candidate only when it wins FP16's paired rounds by the
  sign test; FP16 of the same graph: the rewritten one where the plan has it and it was measured)
  and its :class:`~.standing.PlanMeasurement`, every measurement beside its
  estimate. An interrupted run keeps what it measured (status ``"partial"``).
* :func:`finish_latency`: the planner's last phase: measured by a source, or an
  :class:`~.standing.EstimateStanding` saying how far estimates have been off.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, List, Mapping, Optional, Sequence, Tuple, Union

from ...common.errors import UserError
from ..judge import Judge
from ..plan_artifact import Plan
from ..plan_values import Candidate, PlanAccuracy, positive_finite, ratio
from .measurement import FP16, INT8_IMPLICIT, QDQ, MeasuredRow, Measurement, candidate_index
from .paired import paired_rounds
from .pick import NONE, MeasuredPick, known_estimates, pick_measured
from .standing import MEASURE_HINT, CheckSummary, EstimateStanding, PlanMeasurement

__all__ = ["MEASURE_TOP", "apply_measurements", "candidate_job_name", "finish_latency", "measure_targets",
           "measurement_source"]

#: Candidates built and timed besides FP16 and implicit INT8 (each a build of a few seconds to minutes).
MEASURE_TOP = 3


def measure_targets(plan: Plan, top: int = MEASURE_TOP) -> List[int]:
    """Indices of the candidates to build and time, besides FP16 (index 0) and implicit INT8.

    The estimate's pick first (when it quantizes anything), then the candidates that meet
    the target by estimated latency (unknown estimates last: a measurement is what they
    need), one per distinct set of INT8 layers, at most ``top``. A candidate that misses
    the target is never measured: it cannot be picked.
    """
    cands = plan.candidates
    rec = plan.recommended
    if top <= 0:
        return []
    order = sorted((i for i, c in enumerate(cands) if c.quantized and c.meets_target),
                   key=lambda i: (i != rec, not positive_finite(cands[i].latency_us),
                                  cands[i].latency_us if positive_finite(cands[i].latency_us) else 0.0, i))
    seen = set()
    out: List[int] = []
    for i in order:
        placement = frozenset(cands[i].quantized)
        if placement in seen:
            continue
        seen.add(placement)
        out.append(i)
        if len(out) >= top:
            break
    return out


def candidate_job_name(index: int, cand: Candidate) -> str:
    """The measurement's name of candidate ``index`` (unique: the index leads)."""
    return f"#{index} {cand.name}"


def apply_measurements(plan: Plan, measurements: Sequence[Measurement], *, rounds: int, interrupted: bool = False,
                       built: int = 0, cached: int = 0, shapes: Optional[Mapping] = None,
                       settings: Optional[Mapping] = None, implicit_cache: Optional[str] = None,
                       check: Optional[CheckSummary] = None) -> Plan:
    """The plan with its pick made again by measured time, judged on the engines where they were checked.

    Parameters
    ----------
    plan : Plan
    measurements : sequence of Measurement
        FP16 (named ``"fp16"``), implicit INT8 and candidates named by :func:`candidate_job_name`;
        each with its engine's verdict on the held-back samples where it was checked
        (:mod:`..engine_check`).
    rounds, interrupted, built, cached, shapes, settings
        How the run went (:class:`trtwidgets.trt.measure.MeasureReport`), recorded as is.
    implicit_cache : str, optional
        The calibration cache implicit INT8 was built with (what deploying it needs).
    check : CheckSummary, optional
        How the engines were judged.

    Returns
    -------
    Plan
        A new plan: ``recommended`` and ``reason`` by measurement (FP16 whenever no candidate that
        meets the target wins FP16's paired rounds by the sign test, :mod:`.paired`), a note per
        candidate left out and why, and ``measured``. Where FP16 of the rewritten graph
        (``Candidate.rewritten``) was measured (an FP16 measurement named by :func:`candidate_job_name`)
        and meets the target, it is the FP16 every Q/DQ candidate must beat (the same graph), the reason
        says the rewrites' own gain (its time / FP16 as given's), and it is the pick itself where no Q/DQ
        candidate beats it and it wins FP16 as given's paired rounds.

    Notes
    -----
    A candidate competes when ONNX Runtime scored it meeting the target and its engine, where
    checked, meets it too. Implicit INT8 competes only when its engine was checked and meets
    the target (ONNX Runtime cannot predict it). When implicit INT8 is the fastest and wins the
    paired rounds, it is ``measured.pick`` (with its calibration cache), and ``recommended`` stays
    the best Q/DQ candidate (what ``plan export`` writes, and what TensorRT 10/11 build).
    """
    before = plan.recommended
    notes = list(plan.notes)
    meets = _eligibility(plan.candidates, measurements, notes)
    record = PlanMeasurement(tuple(measurements), rounds, interrupted, built, cached, shapes or {}, settings or {},
                             estimate_pick=before, estimate_reason=plan.reason, check=check)
    notes += [f"engine check: {n}" for n in (check.notes if check is not None else ())]
    # Every Q/DQ candidate is judged against the FP16 engine of its own graph: the rewritten one where it was timed.
    timed, given, rewritten = _same_graph(plan.candidates, measurements, meets, notes)
    versus = dict(meets, **{FP16: meets.get(rewritten.name, False)}) if rewritten is not None else meets
    try:
        pick = pick_measured(timed, versus)
    except UserError as err:
        # No FP16 time (its build failed, or Ctrl-C came first): nothing can be judged against it.
        return dataclasses.replace(plan, measured=record, estimate=None, notes=tuple(notes + [f"measurement: {err.what}"]),
                                   reason=f"{plan.reason} Not measured: {err.what} The pick is still the estimate's; "
                                          f"{MEASURE_HINT}.")
    if pick.name == NONE:
        return dataclasses.replace(plan, recommended=None, measured=dataclasses.replace(record, pick=pick),
                                   estimate=None, notes=tuple(notes + [f"measured: {n}" for n in pick.notes]),
                                   reason=f"No candidate meets the target (measured): {pick.reason}")
    pick, exportable, implicit = _implicit_or_export(pick, timed, versus, plan, notes)
    gain = ""
    if rewritten is not None:
        exportable, gain = _float_of_graph(exportable, given, rewritten, meets)
        pick = exportable if implicit is None else pick
    after = None if exportable.name == NONE else candidate_index(exportable.name) if exportable.name != FP16 else 0
    exportable = dataclasses.replace(exportable, candidate=after)
    if implicit is not None:
        record = dataclasses.replace(record, pick=dataclasses.replace(pick, candidate=None), export=exportable,
                                     implicit_cache=implicit_cache)
        reason = _implicit_reason(plan.candidates, after, pick, exportable, rounds, implicit, implicit_cache)
    else:
        record = dataclasses.replace(record, pick=exportable)
        old = record.row_of(before) if before else None
        reason = _reason(plan.candidates, before, after, exportable, rounds, interrupted, old,
                         next((m for m in measurements if m.name == exportable.name), None),
                         "FP16 of the rewritten graph" if rewritten is not None else "FP16")
    if gain:
        reason += " " + gain
    return dataclasses.replace(plan, recommended=after, reason=reason, measured=record, estimate=None,
                               notes=tuple(notes + [f"measured: {n}" for n in pick.notes]))


def _implicit_or_export(pick: MeasuredPick, measurements: Sequence[Measurement], meets: Mapping[str, bool],
                        plan: Plan, notes: List[str]):
    """``(pick, best exportable pick, implicit INT8's Measurement or None)``.

    Implicit INT8 stays the pick only when it wins the best Q/DQ export's (or FP16's) paired rounds by the
    sign test (:mod:`.paired`): as fast, the export wins (its accuracy is fixed by the export, and it builds
    on 10/11).
    """
    implicit = next((m for m in measurements if m.name == pick.name and m.kind == INT8_IMPLICIT), None)
    exportable = pick
    if implicit is not None:
        exportable = pick_measured([m for m in measurements if m.kind != INT8_IMPLICIT], meets)
        if exportable.name == NONE:  # no Q/DQ engine nor FP16 meets the target: implicit INT8 alone does
            return pick, exportable, implicit
        paired = paired_rounds(implicit, next(m for m in measurements if m.name == exportable.name))
        if not paired.faster:
            notes.append(f"measured: implicit INT8 ({implicit.median_ms:.4f} ms) met the target on its engine but "
                         f"was not faster than {exportable.name} ({exportable.median_ms:.4f} ms) by the paired "
                         f"rounds: {paired.text()}.")
            implicit = None
    exportable = _prefer_accurate(exportable, measurements, meets, plan)
    return (pick if implicit is not None else exportable), exportable, implicit


def _eligibility(cands: Sequence[Candidate], measurements: Sequence[Measurement], notes: List[str]) -> dict:
    """Name -> whether the engine may be picked: ONNX Runtime's verdict and the engine's own, where checked."""
    meets = {FP16: bool(cands and cands[0].meets_target)}  # FP16 is judged like every candidate
    for m in measurements:
        engine = m.judged
        if m.name == FP16 and engine is False:
            meets[FP16] = False
            notes.append(f"FP16's engine misses the target on the held-back samples ({m.accuracy_text}).")
        if m.accuracy is not None and m.accuracy.error:
            notes.append(f"{m.name}: timed, not judged on the held-back samples ({m.accuracy.error}).")
        if m.kind == QDQ or (m.kind == FP16 and m.name != FP16):  # a Q/DQ candidate, or the rewritten graph's FP16
            i = candidate_index(m.name)
            if i is None or not 0 <= i < len(cands):
                continue
            predicted = cands[i].meets_target
            meets[m.name] = predicted and engine is not False
            if predicted and engine is False:
                notes.append(f"{m.name}: ONNX Runtime scored it meeting the target; its engine misses it on the "
                             f"held-back samples ({m.accuracy_text}): not recommended.")
        elif m.kind == INT8_IMPLICIT and engine is not None:
            meets[m.name] = bool(engine)
    return meets


def _same_graph(cands: Sequence[Candidate], measurements: Sequence[Measurement], meets: Mapping[str, bool],
                notes: List[str]) -> Tuple[List[Measurement], Optional[Measurement], Optional[Measurement]]:
    """``(the measurements the pick compares, FP16 as given, FP16 of the rewritten graph)``.

    Where FP16 of the rewritten graph was timed, it stands in for FP16 (named ``"fp16"``) and FP16 as given is
    left out: the Q/DQ candidates are written on the rewritten graph, and a gain over FP16 of another graph would
    count the rewrites' gain as INT8's. FP16 as given is returned apart, for :func:`_float_of_graph`. Otherwise
    (no such candidate, its build failed, or it misses the target) the measurements are FP16 as given's, the
    rewritten one left out with a note. The third item is None then.
    """
    rewritten = next((m for m in measurements if m.kind == FP16 and m.name != FP16
                      and _rewritten_index(cands, m) is not None), None)
    given = next((m for m in measurements if m.name == FP16), None)
    if rewritten is None:
        return list(measurements), given, None
    others = [m for m in measurements if m is not rewritten and m is not given]
    if not rewritten.ok or not meets.get(rewritten.name, False):
        why = (f"not measured ({rewritten.error or 'no time'})" if not rewritten.ok else "misses the target")
        notes.append(f"{rewritten.name}: {why}; the Q/DQ candidates are compared with FP16 of the graph as given, "
                     "so their measured gain includes the rewrites'.")
        return ([given] if given is not None else []) + others, given, None
    return [dataclasses.replace(rewritten, name=FP16)] + others, given, rewritten


def _rewritten_index(cands: Sequence[Candidate], m: Measurement) -> Optional[int]:
    """The index of the rewritten graph's FP16 candidate that ``m`` measured, or None."""
    i = candidate_index(m.name)
    return i if i is not None and 0 <= i < len(cands) and cands[i].rewritten else None


def _float_of_graph(pick: MeasuredPick, given: Optional[Measurement], rewritten: Measurement,
                    meets: Mapping[str, bool]) -> Tuple[MeasuredPick, str]:
    """``(the pick, a sentence on the rewrites' own gain)``, the pick made against FP16 of the rewritten graph.

    A Q/DQ pick stays. Where the pick is that FP16 (named ``"fp16"``: no Q/DQ candidate beat it), the float pick is
    FP16 of the rewritten graph when it wins FP16 as given's paired rounds by the sign test, or when FP16 as given
    has no time or misses the target and it meets it; else FP16 as given, as fast as far as the run can tell.
    """
    paired = paired_rounds(rewritten, given) if given is not None and given.ok else None
    if paired is not None and given is not None:
        gain = (f"Against FP16 of the rewritten graph ({rewritten.median_ms:.4f} ms), the graph the Q/DQ candidates "
                f"are written on; the rewrites alone: {ratio(rewritten.median_ms, given.median_ms):.3f}x FP16 as "
                f"given ({given.median_ms:.4f} ms), {paired.text()}.")
    else:
        gain = (f"Against FP16 of the rewritten graph ({rewritten.median_ms:.4f} ms), the graph the Q/DQ candidates "
                "are written on; FP16 as given has no time, so the rewrites' own gain is unknown.")
    if pick.name != FP16:
        return pick, gain
    given_ok = given is not None and given.ok and meets.get(FP16, False)
    if meets.get(rewritten.name, False) and (not given_ok or (paired is not None and paired.faster)):
        noise = max(rewritten.spread_ms, given.spread_ms) if given is not None and given.ok else rewritten.spread_ms
        base_ms = given.median_ms if given is not None and given.ok else math.nan
        why = (f"{paired.text()}" if given_ok and paired is not None
               else "FP16 as given " + ("misses the target" if given is not None and given.ok else "has no time"))
        return MeasuredPick(rewritten.name, rewritten.median_ms, base_ms, noise,
                            f"{rewritten.name}: {rewritten.median_ms:.4f} ms against FP16 as given's "
                            f"{base_ms:.4f} ms ({why}); no Q/DQ candidate that meets the target beats it by the "
                            "paired rounds; measured. Build the rewritten float model with FP16 (`plan export` "
                            "writes it).", pick.notes, paired=paired), gain
    if given is None or not given.ok:
        return pick, gain
    reason = pick.reason
    if meets.get(rewritten.name, False):
        reason += (f" FP16 of the rewritten graph is not faster than FP16 as given by the paired rounds "
                   f"({paired.text() if paired is not None else 'not compared'}): FP16 as given.")
    return dataclasses.replace(pick, median_ms=given.median_ms, fp16_ms=given.median_ms, reason=reason), gain


def _as_scored(acc: Optional[PlanAccuracy]) -> PlanAccuracy:
    """An accuracy with unknown parts counted as the worst (a cosine or SNR never scored cannot win a tie)."""
    if acc is None:
        return PlanAccuracy(0.0, 0.0)
    cos = acc.cosine if acc.cosine is not None and math.isfinite(acc.cosine) else 0.0
    snr = acc.snr_db if acc.snr_db is not None and math.isfinite(acc.snr_db) else 0.0
    return dataclasses.replace(acc, cosine=cos, snr_db=snr)


def _prefer_accurate(pick: MeasuredPick, measurements: Sequence[Measurement], meets: Mapping[str, bool],
                     plan: Plan) -> MeasuredPick:
    """Among candidates as fast as the pick as far as the run can tell (the pick does not win their paired
    rounds by the sign test) and, where FP16 meets the target, faster than FP16 by the same test, the more
    accurate (on its engine where the engines were judged)."""
    if pick.name == FP16:
        return pick
    best = next(m for m in measurements if m.name == pick.name)
    fp16 = next(m for m in measurements if m.kind == FP16 and m.ok)
    tied = [m for m in measurements if m.kind == QDQ and m.ok and meets.get(m.name)
            and (m is best or not paired_rounds(best, m).faster)
            and (m is best or meets.get(FP16) is False or paired_rounds(m, fp16).faster)]
    judge = Judge(plan.target)

    def loss(m: Measurement) -> float:  # the engine's own accuracy where it was judged, else ONNX Runtime's
        judged = m.accuracy.accuracy if m.accuracy is not None and m.judged is not None else None
        i = candidate_index(m.name)
        assert i is not None, "only Q/DQ candidates tie"
        return judge.loss(_as_scored(judged or plan.candidates[i].accuracy))

    chosen = min(tied, key=lambda m: (loss(m), m.median_ms, m.name))
    if chosen.name == best.name:
        return pick
    against = paired_rounds(best, chosen)
    return MeasuredPick(chosen.name, chosen.median_ms, pick.fp16_ms, max(chosen.spread_ms, fp16.spread_ms),
                        f"{chosen.name}: {chosen.median_ms:.4f} ms, as fast as the fastest ({best.name}, "
                        f"{best.median_ms:.4f} ms, {against.text()}) and more accurate; measured.",
                        pick.notes + (f"{best.name}: not faster than {chosen.name} by the paired rounds, less "
                                      "accurate.",), paired=paired_rounds(chosen, fp16))


def _reason(cands: Sequence[Candidate], before: Optional[int], after: Optional[int], pick: MeasuredPick, rounds: int, interrupted: bool,
            old: Optional[MeasuredRow], measured: Optional[Measurement] = None, base: str = "FP16") -> str:
    head = f"Partial measurement (interrupted; {rounds} round{'s' if rounds != 1 else ''}): " if interrupted else ""
    if after and cands[after].rewritten:
        text = pick.reason
    elif after:
        c = cands[after]
        won = f", {pick.paired.text()}" if pick.paired is not None else ""
        text = (f"{c.name}: measured {pick.vs_fp16:.3f}x {base} ({pick.median_ms:.4f} ms against {base}'s "
                f"{pick.fp16_ms:.4f} ms, median of {rounds} interleaved rounds{won}, larger round spread "
                f"{pick.noise_ms:.4f} ms), the fastest measured candidate that meets the target, "
                f"{len(c.quantized)} INT8 layers"
                + (f"; its engine meets the target on the held-back samples ({measured.accuracy_text})"
                   if measured is not None and measured.judged else "") + ".")
    else:
        why = pick.reason[len("FP16: "):] if pick.reason.startswith("FP16: ") else pick.reason
        text = f"FP16 is best here (measured): {why}"
    if before != after and before and before < len(cands):
        was = f"measured {old.vs_fp16:.3f}x FP16" if old is not None and positive_finite(old.vs_fp16) else "not measured"
        text += f" The estimate had picked {cands[before].name} ({was}; see the notes)."
    return head + text


def _implicit_reason(cands: Sequence[Candidate], after: Optional[int], pick: MeasuredPick, exportable: MeasuredPick,
                     rounds: int, implicit: Measurement, cache: Optional[str]) -> str:
    won = f", {pick.paired.text()}" if pick.paired is not None else ""
    text = (f"Implicit INT8 (TensorRT's calibrator with this plan's ranges{f', cache {cache}' if cache else ''}): "
            f"measured {pick.vs_fp16:.3f}x FP16 ({pick.median_ms:.4f} ms against FP16's {pick.fp16_ms:.4f} ms, "
            f"median of {rounds} interleaved rounds{won}, larger round spread {pick.noise_ms:.4f} ms), the fastest "
            f"engine, and its engine meets the target on the held-back samples ({implicit.accuracy_text}). "
            "Build it with INT8+FP16 and that calibration cache (TensorRT 8.x/9.x; implicit INT8 is deprecated in 10 "
            "and gone in 11).")
    if after and cands[after].rewritten:
        text += (f" The fastest model `plan export` writes: {cands[after].name}, the rewritten float model "
                 f"built with FP16 (no Q/DQ export beat it), {exportable.vs_fp16:.3f}x FP16.")
    elif after:
        text += (f" The fastest Q/DQ export, what `plan export` writes: {cands[after].name}, "
                 f"{exportable.vs_fp16:.3f}x FP16.")
    elif after is None:
        text += " No Q/DQ export nor FP16 meets the target: `plan export` writes nothing."
    else:
        text += " No Q/DQ export beat FP16: `plan export` writes FP16."
    return text


# -- the planner's last phase -------------------------------------------------------------------

def measurement_source(measure: Union[bool, Callable, None]) -> Optional[Callable]:
    """The planner's ``measure=``: None (estimate only) or a callable ``f(plan, model) -> Plan``.

    Core never imports ``trtwidgets.trt`` (the layering rule): ``measure=True`` (this GPU) is
    turned into the TensorRT measurement source by ``trtwidgets.plan`` (:mod:`trtwidgets.plan_api`),
    the CLI and the App before they call the planner.
    """
    if not measure:
        return None
    if callable(measure):
        return measure
    raise UserError("measure=True needs the TensorRT side, which this core function does not import.",
                    "trtwidgets.core.plan.planner.plan takes a measurement source (a callable); "
                    "trtwidgets.plan builds one from TensorRT and the GPU.",
                    "Call trtwidgets.plan(..., measure=True), or pass "
                    "measure=lambda plan, model: trtwidgets.trt.plan_measure.measure_plan(plan, model).")


def finish_latency(plan: Plan, model, source: Optional[Callable]) -> Plan:
    """The plan with its latency's standing: measured by ``source``, or an estimate that says how far off it has been.

    A candidate whose estimate is unknown (NaN) is never picked by estimate (:class:`~..judge.Judge`); the
    plan names them and asks for a measurement.
    """
    notes = list(plan.notes)
    accurate = {c.name: c.latency_us for c in plan.candidates if c.quantized and c.meets_target}
    _, unknown = known_estimates(accurate)
    if unknown:
        notes.append(unknown)
    if source is not None and plan.interrupted:
        notes.append("not measured: the search was interrupted")
    plan = dataclasses.replace(plan, notes=tuple(notes))
    if source is not None and not plan.interrupted:
        return source(plan, model)
    standing = EstimateStanding.of((plan.pick or plan.candidates[0]).latency_source or "estimate")
    # Latency decided the pick only where an INT8 candidate met the target; otherwise accuracy did.
    reason = plan.reason + (" Not measured: an estimate (see the notes)." if accurate else "")
    return dataclasses.replace(plan, estimate=standing, notes=plan.notes + (standing.text,), reason=reason)
