"""A plan's latency, measured: which candidates to build, the pick by measured time, estimate beside measurement.

The planner's latency is a hypothesis (a cost model, or an implicit build's choices).
Where a GPU is present the candidates are built and timed
(:mod:`trtwidgets.trt.plan_measure`); this module holds the decisions, which need no
GPU and are tested on numbers:

* :func:`measure_targets`: which candidates to build besides FP16 and implicit INT8:
  the estimate's pick and the fastest others that meet the target, one per distinct
  set of INT8 layers (a change of ranges alone changes no latency).
* :func:`apply_measurements`: the pick again, by measured time
  (:func:`~..engine.measured.pick_measured`: never a candidate slower than FP16
  beyond the run's noise), written into a plan's data (``plan.json``) under
  ``measured``, with every measurement beside its estimate. An interrupted run keeps
  what it measured (``status: "partial"``).
* :func:`estimate_record`: what a plan that was not measured says about itself: that
  its latency is an estimate and how far such estimates have been off on the zoo
  (:data:`ESTIMATE_ERROR_FILE`, measured ratios from committed GPU runs).

Plans are handled as their ``to_dict()`` data so that ``trtwidgets plan measure``
rewrites a ``plan.json`` without losing fields it does not know.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Callable, List, Mapping, Optional, Sequence, Union

from ..common.errors import UserError
from ..engine.measured import (FP16, INT8_IMPLICIT, QDQ, Measurement, known_estimates, measurement_rows,
                               pick_measured)

__all__ = ["ESTIMATE_ERROR_FILE", "MEASURE_HINT", "MEASURE_TOP", "apply_measurements", "candidate_estimate_ms",
           "candidate_job_name", "engine_accuracy_text", "estimate_error_entries", "estimate_record", "estimate_text", "finish_latency",
           "measure_targets", "measurement_source"]

#: Candidates built and timed besides FP16 and implicit INT8 (each a build of a few seconds to minutes).
MEASURE_TOP = 3
#: How far the planner's latency has been off on the zoo: estimated against measured ratios to FP16,
#: from committed GPU runs (``benchmarks/estimate_error.py`` regenerates it).
ESTIMATE_ERROR_FILE = Path(__file__).with_name("estimate_error.json")
#: Where to measure when this machine cannot.
MEASURE_HINT = ("build and time the candidates on a GPU machine: `trtwidgets plan measure PLAN_DIR` "
                "(or plan --measure there)")


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def measure_targets(doc: Mapping, top: int = MEASURE_TOP) -> List[int]:
    """Indices of the candidates to build and time, besides FP16 (index 0) and implicit INT8.

    The estimate's pick first (when it quantizes anything), then the candidates that meet
    the target by estimated latency (unknown estimates last: a measurement is what they
    need), one per distinct set of INT8 layers, at most ``top``. A candidate that misses
    the target is never measured: it cannot be picked.
    """
    cands = doc["candidates"]
    rec = int(doc.get("recommended", 0))
    order = sorted((i for i, c in enumerate(cands) if c.get("quantized") and c.get("meets_target")),
                   key=lambda i: (i != rec, not _finite(cands[i].get("latency_us")),
                                  cands[i].get("latency_us") if _finite(cands[i].get("latency_us")) else 0.0, i))
    seen = set()
    out: List[int] = []
    for i in order:
        placement = frozenset(cands[i]["quantized"])
        if placement in seen:
            continue
        seen.add(placement)
        out.append(i)
        if len(out) >= top:
            break
    return out


def candidate_job_name(index: int, cand: Mapping) -> str:
    """The measurement's name of candidate ``index`` (unique: the index leads)."""
    return f"#{index} {cand['name']}"


def _ms(us) -> float:
    return float(us) / 1000.0 if _finite(us) else float("nan")


def _index_of(name: str) -> Optional[int]:
    if name == FP16:
        return 0
    if name.startswith("#"):
        head = name[1:].split(" ", 1)[0]
        return int(head) if head.isdigit() else None
    return None


def _json_row(row: Mapping) -> dict:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}


def apply_measurements(doc: Mapping, measurements: Sequence[Measurement], *, rounds: int, interrupted: bool = False,
                       built: int = 0, cached: int = 0, shapes: Optional[Mapping] = None,
                       settings: Optional[Mapping] = None, implicit_cache: Optional[str] = None,
                       check: Optional[Mapping] = None) -> dict:
    """The plan's data with its pick made again by measured time, judged on the engines where they were checked.

    Parameters
    ----------
    doc : mapping
        A plan's ``to_dict()`` (or ``plan.json``).
    measurements : sequence of Measurement
        FP16 (named ``"fp16"``), implicit INT8 and candidates named by :func:`candidate_job_name`;
        each with its engine's ``accuracy`` on the held-back samples where it was checked
        (:mod:`.engine_check`).
    rounds, interrupted, built, cached, shapes, settings
        How the run went (:class:`trtwidgets.trt.measure.MeasureReport`), recorded as is.
    implicit_cache : str, optional
        The calibration cache implicit INT8 was built with (what deploying it needs).
    check : mapping, optional
        How the engines were judged (samples, notes), recorded as is.

    Returns
    -------
    dict
        A new plan dict: ``recommended`` and ``reason`` by measurement (FP16 whenever no
        candidate that meets the target was measured faster than FP16 beyond the noise), a
        note per candidate left out and why, and ``measured``: the status (``"measured"`` or
        ``"partial"``), the measurements, the measured pick and one row per engine with
        estimate and measurement side by side.

    Notes
    -----
    A candidate competes when ONNX Runtime scored it meeting the target and its engine, where
    checked, meets it too. Implicit INT8 competes only when its engine was checked and meets
    the target (ONNX Runtime cannot predict it). When implicit INT8 is the fastest beyond the
    noise, it is ``measured["pick"]`` (with its calibration cache), and ``recommended`` stays
    the best Q/DQ candidate (what ``plan export`` writes, and what TensorRT 10/11 build).
    """
    out = dict(doc)
    cands = list(doc["candidates"])
    before = int(doc.get("recommended", 0))
    notes = list(doc.get("notes", ()))
    meets = _eligibility(cands, measurements, notes)
    rows = measurement_rows(measurements)
    record = _record(doc, measurements, rows, rounds, interrupted, built, cached, shapes, settings, check)
    notes += [f"engine check: {n}" for n in (check or {}).get("notes", ())]
    try:
        pick = pick_measured(measurements, meets)
    except UserError as err:
        # No FP16 time (its build failed, or Ctrl-C came first): nothing can be judged against it.
        record["status"] = "partial"
        record["pick"] = None
        out["measured"] = record
        out["reason"] = f"{doc.get('reason', '')} Not measured: {err.what} The pick is still the estimate's; " \
                        f"{MEASURE_HINT}."
        out["notes"] = notes + [f"measurement: {err.what}"]
        return out
    pick, exportable, implicit = _implicit_or_export(pick, measurements, meets, doc, notes)
    after = _index_of(exportable.name) if exportable.name != FP16 else 0
    out["recommended"] = after
    old = next((r for r in rows if r["candidate"] == before and r["kind"] == QDQ), None)
    if implicit is not None:
        record["pick"] = dict(pick.to_dict(), candidate=None, kind=INT8_IMPLICIT, calibration_cache=implicit_cache,
                              accuracy=dict(implicit.accuracy or {}),
                              export=dict(exportable.to_dict(), candidate=after))
        out["reason"] = _implicit_reason(cands, after, pick, exportable, rounds, implicit, implicit_cache)
    else:
        record["pick"] = dict(pick.to_dict(), candidate=after)
        out["reason"] = _reason(cands, before, after, pick, rounds, interrupted, old,
                                next((m for m in measurements if m.name == pick.name), None))
    out["notes"] = notes + [f"measured: {n}" for n in pick.notes]
    out["measured"] = record
    return out


def _record(doc: Mapping, measurements: Sequence[Measurement], rows: List[dict], rounds: int, interrupted: bool,
            built: int, cached: int, shapes, settings, check) -> dict:
    """``measured`` of plan.json, before the pick: how the run went and one row per engine."""
    for row, m in zip(rows, measurements):
        row["candidate"] = _index_of(m.name) if m.kind != INT8_IMPLICIT else None
        row["rounds"] = len(m.round_ms)
        row["error"] = m.error
        row["engine_accuracy"] = dict(m.accuracy) if m.accuracy is not None else None
    record = {"status": "partial" if interrupted else "measured", "rounds": int(rounds),
              "interrupted": bool(interrupted), "built": int(built), "cached": int(cached),
              "shapes": {k: list(v) for k, v in (shapes or {}).items()}, "settings": dict(settings or {}),
              "measurements": [dict(m.to_dict(), candidate=r["candidate"]) for m, r in zip(measurements, rows)],
              "rows": [_json_row(r) for r in rows], "estimate_pick": int(doc.get("recommended", 0)),
              "estimate_reason": doc.get("reason", "")}
    if check is not None:
        record["engine_check"] = dict(check)
    return record


def _implicit_or_export(pick, measurements: Sequence[Measurement], meets: Mapping[str, bool], doc: Mapping,
                        notes: List[str]):
    """``(pick, best exportable pick, implicit INT8's Measurement or None)``.

    Implicit INT8 stays the pick only when it is faster than the best Q/DQ export (or FP16) beyond
    the noise: as fast, the export wins (its accuracy is fixed by the export, and it builds on 10/11).
    """
    implicit = next((m for m in measurements if m.name == pick.name and m.kind == INT8_IMPLICIT), None)
    exportable = pick
    if implicit is not None:
        exportable = pick_measured([m for m in measurements if m.kind != INT8_IMPLICIT], meets)
        noise = max(implicit.spread_ms, next(m for m in measurements if m.name == exportable.name).spread_ms)
        if exportable.median_ms <= implicit.median_ms + noise:
            notes.append(f"measured: implicit INT8 ({implicit.median_ms:.4f} ms) met the target on its engine but "
                         f"was not faster than {exportable.name} ({exportable.median_ms:.4f} ms) beyond the noise "
                         f"({noise:.4f} ms).")
            implicit = None
    exportable = _prefer_accurate(exportable, measurements, meets, doc)
    return (pick if implicit is not None else exportable), exportable, implicit


def _eligibility(cands: Sequence[Mapping], measurements: Sequence[Measurement], notes: List[str]) -> dict:
    """Name -> whether the engine may be picked: ONNX Runtime's verdict and the engine's own, where checked."""
    meets = {}
    for m in measurements:
        engine = (m.accuracy or {}).get("meets")
        if (m.accuracy or {}).get("error"):
            notes.append(f"{m.name}: timed, not judged on the held-back samples ({m.accuracy['error']}).")
        if m.kind == QDQ:
            i = _index_of(m.name)
            if i is None or not 0 <= i < len(cands):
                continue
            predicted = bool(cands[i]["meets_target"])
            meets[m.name] = predicted and engine is not False
            if predicted and engine is False:
                notes.append(f"{m.name}: ONNX Runtime scored it meeting the target; its engine misses it on the "
                             f"held-back samples ({engine_accuracy_text(m.accuracy)}): not recommended.")
        elif m.kind == INT8_IMPLICIT and engine is not None:
            meets[m.name] = bool(engine)
    return meets


def engine_accuracy_text(acc: Optional[Mapping]) -> str:
    """An engine's accuracy on the held-back samples in words ("" when not checked)."""
    if not acc:
        return ""
    if acc.get("error"):
        return f"not judged: {acc['error']}"
    parts = []
    if acc.get("metric") is not None and acc.get("metric_reference") is not None:
        parts.append(f"metric {float(acc['metric']):.4f} vs FP32 {float(acc['metric_reference']):.4f}")
    if acc.get("cosine") is not None:
        parts.append(f"worst group cosine {float(acc['cosine']):.4f}")
    n = acc.get("samples")
    return ", ".join(parts) + (f", {n} samples" if n else "")


def _judge(doc: Mapping):
    """The plan's one definition of "better" (:class:`~.judge.Judge`), from its recorded target."""
    from .judge import Judge
    from .plan_values import PlanTarget

    t = doc.get("target") or {}
    cosine, snr = t.get("cosine"), t.get("snr_db")
    metric = (lambda outputs: 0.0) if t.get("metric") or (cosine is None and snr is None) else None
    return Judge(PlanTarget(cosine=cosine, snr_db=snr, metric=metric, metric_name=str(t.get("metric") or "")))


def _prefer_accurate(pick, measurements: Sequence[Measurement], meets: Mapping[str, bool], doc: Mapping):
    """Among candidates as fast as the pick as far as the run can tell (within the noise), the more accurate
    (on its engine where the engines were judged)."""
    from ..engine.measured import MeasuredPick
    from .plan_values import PlanAccuracy

    if pick.name == FP16:
        return pick
    best = next(m for m in measurements if m.name == pick.name)
    tied = [m for m in measurements if m.kind == QDQ and m.ok and meets.get(m.name)
            and m.median_ms <= best.median_ms + max(best.spread_ms, m.spread_ms)]
    judge = _judge(doc)

    def loss(m: Measurement) -> float:  # the engine's own accuracy where it was judged, else ONNX Runtime's
        judged = m.accuracy if (m.accuracy or {}).get("meets") is not None else None
        acc = judged or doc["candidates"][_index_of(m.name)].get("accuracy") or {}
        return judge.loss(PlanAccuracy(float(acc.get("cosine") or 0.0), float(acc.get("snr_db") or 0.0),
                                       acc.get("metric"), acc.get("metric_reference")))

    chosen = min(tied, key=lambda m: (loss(m), m.median_ms, m.name))
    if chosen.name == best.name:
        return pick
    noise = max(chosen.spread_ms, next(m for m in measurements if m.kind == FP16 and m.ok).spread_ms)
    return MeasuredPick(chosen.name, chosen.median_ms, pick.fp16_ms, noise,
                        f"{chosen.name}: {chosen.median_ms:.4f} ms, within the noise of the fastest ({best.name}, "
                        f"{best.median_ms:.4f} ms) and more accurate; measured.",
                        pick.notes + (f"{best.name}: as fast as {chosen.name} within the noise, less accurate.",))


def _reason(cands: Sequence[Mapping], before: int, after: int, pick, rounds: int, interrupted: bool,
            old: Optional[Mapping], measured: Optional[Measurement] = None) -> str:
    head = f"Partial measurement (interrupted; {rounds} round{'s' if rounds != 1 else ''}): " if interrupted else ""
    if after:
        c = cands[after]
        text = (f"{c['name']}: measured {1 / pick.speedup:.3f}x FP16 ({pick.median_ms:.4f} ms against FP16's "
                f"{pick.fp16_ms:.4f} ms, median of {rounds} interleaved rounds, noise {pick.noise_ms:.4f} ms), "
                f"the fastest measured candidate that meets the target, {len(c['quantized'])} INT8 layers"
                + (f"; its engine meets the target on the held-back samples ({engine_accuracy_text(measured.accuracy)})"
                   if measured is not None and (measured.accuracy or {}).get("meets") else "") + ".")
    else:
        why = pick.reason[len("FP16: "):] if pick.reason.startswith("FP16: ") else pick.reason
        text = f"FP16 is best here (measured): {why}"
    if before != after and before and before < len(cands):
        measured = (f"measured {old['vs_fp16']:.3f}x FP16" if old is not None and _finite(old.get("vs_fp16"))
                    else "not measured")
        text += f" The estimate had picked {cands[before]['name']} ({measured}; see the notes)."
    return head + text


def _implicit_reason(cands: Sequence[Mapping], after: int, pick, exportable, rounds: int, implicit: Measurement,
                     cache: Optional[str]) -> str:
    text = (f"Implicit INT8 (TensorRT's calibrator with this plan's ranges{f', cache {cache}' if cache else ''}): measured "
            f"{1 / pick.speedup:.3f}x FP16 ({pick.median_ms:.4f} ms against FP16's {pick.fp16_ms:.4f} ms, median of "
            f"{rounds} interleaved rounds, noise {pick.noise_ms:.4f} ms), the fastest engine, and its engine meets the "
            f"target on the held-back samples ({engine_accuracy_text(implicit.accuracy)}). Build it with INT8+FP16 and "
            "that calibration cache (TensorRT 8.x/9.x; implicit INT8 is deprecated in 10 and gone in 11).")
    if after:
        text += (f" The fastest Q/DQ export, what `plan export` writes: {cands[after]['name']}, "
                 f"{1 / exportable.speedup:.3f}x FP16.")
    else:
        text += " No Q/DQ export beat FP16: `plan export` writes FP16."
    return text


# -- the estimate's own record ------------------------------------------------------------------


def estimate_error_entries(source: Optional[str] = None, path: Optional[Path] = None) -> List[dict]:
    """The zoo's estimated and measured ratios to FP16 (of one ``latency_source`` when given).

    Entries without both ratios are skipped; a missing or empty file is no entry ("not yet measured").
    """
    p = Path(path) if path is not None else ESTIMATE_ERROR_FILE
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for e in doc.get("entries", []) if isinstance(doc, dict) else []:
        if not isinstance(e, dict) or not (_finite(e.get("estimated_x_fp16")) and _finite(e.get("measured_x_fp16"))):
            continue
        if source is None or e.get("latency_source") == source:
            out.append(e)
    return out


def estimate_text(source: str, path: Optional[Path] = None) -> str:
    """How far the planner's ``source`` latency ("estimate" or "oracle") has been off on the zoo, in a sentence."""
    what = {"estimate": "the cost model's estimate",
            "oracle": "estimated from an implicit INT8 build's per-layer choices (oracle)"}.get(source, f"{source}")
    entries = estimate_error_entries(source, path)
    if not entries:
        return (f"The latency is {what}, not a measurement; how far it is off on the zoo is not yet measured "
                f"(no entry in {ESTIMATE_ERROR_FILE.name}). To be sure, {MEASURE_HINT}.")
    ratios = [e["measured_x_fp16"] / e["estimated_x_fp16"] for e in entries]
    cases = "; ".join(f"{e.get('model', '?')} b{e.get('batch', '?')}: estimated {e['estimated_x_fp16']:.2f}x FP16, "
                      f"measured {e['measured_x_fp16']:.2f}x ({e.get('gpu', '?')}, TensorRT {e.get('trt', '?')})"
                      for e in entries)
    span = f"{min(ratios):.2f}" if f"{min(ratios):.2f}" == f"{max(ratios):.2f}" else \
        f"{min(ratios):.2f}-{max(ratios):.2f}"
    return (f"The latency is {what}, not a measurement: on the zoo the measured time relative to FP16 was {span} "
            f"times the estimated one ({cases}). To be sure, {MEASURE_HINT}.")


def estimate_record(source: str, path: Optional[Path] = None) -> dict:
    """``plan.json``'s ``measured`` of a plan that was not measured: the status, the zoo's record, in words."""
    return {"status": "estimate", "latency_source": source, "zoo": estimate_error_entries(source, path),
            "text": estimate_text(source, path)}


def candidate_estimate_ms(cand: Mapping) -> float:
    """A candidate's estimated time in ms (NaN when unknown), as a measurement job carries it."""
    return _ms(cand.get("latency_us"))



# -- the planner's last phase -------------------------------------------------------------------

def measurement_source(measure: Union[bool, Callable, None], progress=True) -> Optional[Callable]:
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


def finish_latency(plan, model, source: Optional[Callable]):
    """The plan with its latency's standing: measured by ``source``, or an estimate that says how far off it has been.

    A candidate whose estimate is unknown (NaN) is never picked by estimate (:class:`~.judge.Judge`); the
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
    rec = estimate_record(plan.pick.latency_source or "estimate")
    # Latency decided the pick only where an INT8 candidate met the target; otherwise accuracy did.
    reason = plan.reason + (" Not measured: an estimate (see the notes)." if accurate else "")
    return dataclasses.replace(plan, measured=rec, notes=plan.notes + (rec["text"],), reason=reason)
