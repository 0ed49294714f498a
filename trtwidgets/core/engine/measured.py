"""Picking by measured latency: pure decisions over engines timed in interleaved rounds.

An estimate is a hypothesis; a plan's pick goes by what the GPU measured. The timing
itself is :mod:`trtwidgets.trt.measure` (FP16, implicit INT8 and Q/DQ candidates,
built once per placement and timed A B C A B C ... in several rounds); this module
holds what needs no GPU, so it is tested on committed numbers:

* :func:`placement_key`: one key per distinct Q/DQ placement. Q/DQ scale values are
  zeroed before hashing, because a change of ranges alone changes no latency.
* :class:`Measurement`: one engine's per-round medians, overall median and spread
  (the largest minus the smallest round median: the run's noise for that engine).
* :func:`pick_measured`: the fastest candidate that meets accuracy, never one measured
  slower than FP16 beyond the noise; FP16 when no candidate beats it beyond the noise.
* :class:`MeasuredLatency`: a latency model (``kind = "measured"``) whose
  ``estimate(int8_layers)`` is the measured time of a measured placement, NaN otherwise.
* :func:`known_estimates`: estimates that are NaN or unknown are never a reason to pick;
  this drops them and says "cannot estimate; measure".
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..common.errors import UserError

__all__ = ["FP16", "INT8_IMPLICIT", "MeasuredLatency", "MeasuredPick", "Measurement", "known_estimates",
           "measurement_rows", "pick_measured", "placement_key"]

#: Measurement kinds: the FP16 baseline, TensorRT's implicit INT8 (picked only when its engine was judged on the
#: held-back samples and met the target), Q/DQ candidates.
FP16 = "fp16"
INT8_IMPLICIT = "int8_implicit"
QDQ = "qdq"

_QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


def _zero_tensor(t: onnx.TensorProto) -> None:
    arr = onnx.numpy_helper.to_array(t)
    t.CopyFrom(onnx.numpy_helper.from_array(np.zeros_like(arr), t.name))


def placement_key(model: onnx.ModelProto, length: int = 16) -> str:
    """A hash of the model's graph with every Q/DQ scale value zeroed: equal for equal placements.

    Two exports of one model that differ only in their ranges (calibration method,
    percentile, amax overrides) get the same key, so they share one build; a Q/DQ pair
    added, removed or moved changes it. Names, doc strings and metadata are left out.

    Parameters
    ----------
    model : onnx.ModelProto
    length : int
        Hex characters kept.
    """
    g = onnx.GraphProto()
    g.CopyFrom(model.graph)
    g.ClearField("doc_string")
    scales = {n.input[1] for n in g.node if n.op_type in _QDQ_OPS and len(n.input) > 1}
    for t in g.initializer:
        if t.name in scales:
            _zero_tensor(t)
    for n in g.node:
        if n.op_type == "Constant" and n.output and n.output[0] in scales:
            for a in n.attribute:
                if a.name == "value":
                    _zero_tensor(a.t)
    h = hashlib.sha256(g.SerializeToString(deterministic=True))
    for op in model.opset_import:
        h.update(f"{op.domain}:{op.version};".encode())
    return h.hexdigest()[:length]


def _json_float(v: float):
    return float(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


@dataclass(frozen=True)
class Measurement:
    """One engine's time, from interleaved rounds.

    Attributes
    ----------
    name : str
        ``"fp16"``, ``"int8_implicit"`` or the candidate's name.
    kind : str
        :data:`FP16`, :data:`INT8_IMPLICIT` or :data:`QDQ`.
    round_ms : tuple of float
        The median time of each round, milliseconds (GPU time of one run).
    key : str
        The build's cache key (placement + build settings).
    estimate_ms : float
        The planner's estimate for this candidate (NaN when none), shown beside the measurement.
    int8_layers : frozenset of str
        The candidate's INT8 layers (for :class:`MeasuredLatency`).
    build_seconds : float
        0 when the engine came from the cache.
    cached : bool
    error : str
        Why it has no time (build failed, interrupted), else empty.
    accuracy : dict, optional
        The engine's own accuracy on the plan's held-back samples
        (:meth:`~trtwidgets.core.plan.engine_check.EngineCheck.verdict`: the worst channel
        group, the task metric, ``meets``), or ``{"error": ...}``; None when not checked.
    """

    name: str
    kind: str
    round_ms: Tuple[float, ...] = ()
    key: str = ""
    estimate_ms: float = float("nan")
    int8_layers: FrozenSet[str] = field(default_factory=frozenset)
    build_seconds: float = 0.0
    cached: bool = False
    error: str = ""
    accuracy: Optional[Mapping] = field(default=None, compare=False)

    @property
    def median_ms(self) -> float:
        """The median of the round medians (NaN without a round)."""
        finite = [t for t in self.round_ms if math.isfinite(t)]
        return float(np.median(finite)) if finite else float("nan")

    @property
    def spread_ms(self) -> float:
        """Largest minus smallest round median (0 with one round, NaN without)."""
        finite = [t for t in self.round_ms if math.isfinite(t)]
        return float(max(finite) - min(finite)) if finite else float("nan")

    @property
    def ok(self) -> bool:
        """Measured: no error and a finite median."""
        return not self.error and math.isfinite(self.median_ms)

    def to_dict(self) -> dict:
        """The record for plan.json (estimate and measurement side by side)."""
        return {"name": self.name, "kind": self.kind, "round_ms": [_json_float(t) for t in self.round_ms],
                "median_ms": _json_float(self.median_ms), "spread_ms": _json_float(self.spread_ms),
                "estimate_ms": _json_float(self.estimate_ms), "key": self.key,
                "int8_layers": sorted(self.int8_layers), "build_seconds": float(self.build_seconds),
                "cached": bool(self.cached), "error": self.error,
                **({"accuracy": dict(self.accuracy)} if self.accuracy is not None else {})}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Measurement":
        """Inverse of :meth:`to_dict`."""
        return cls(name=str(d["name"]), kind=str(d["kind"]), round_ms=tuple(float(t) for t in d.get("round_ms", ())),
                   key=str(d.get("key", "")), estimate_ms=float(d.get("estimate_ms", "nan")),
                   int8_layers=frozenset(d.get("int8_layers", ())), build_seconds=float(d.get("build_seconds", 0.0)),
                   cached=bool(d.get("cached", False)), error=str(d.get("error", "")),
                   accuracy=dict(d["accuracy"]) if isinstance(d.get("accuracy"), Mapping) else None)


@dataclass(frozen=True)
class MeasuredPick:
    """What the measurements recommend.

    Attributes
    ----------
    name : str
        The pick: a candidate's name, or ``"fp16"``.
    median_ms, fp16_ms : float
    noise_ms : float
        The noise the pick was judged against: the larger round spread of the pick and FP16.
    reason : str
        Why, in words.
    notes : tuple of str
        What was left out and why (slower than FP16, accuracy not met, not measured), and
        implicit INT8's time for reference.
    """

    name: str
    median_ms: float
    fp16_ms: float
    noise_ms: float
    reason: str
    notes: Tuple[str, ...] = ()

    @property
    def speedup(self) -> float:
        """FP16 time / pick time (1.0 for FP16)."""
        return self.fp16_ms / self.median_ms if self.median_ms > 0 else float("nan")

    def to_dict(self) -> dict:
        """For plan.json."""
        return {"name": self.name, "median_ms": _json_float(self.median_ms), "fp16_ms": _json_float(self.fp16_ms),
                "noise_ms": _json_float(self.noise_ms), "speedup": _json_float(self.speedup), "reason": self.reason,
                "notes": list(self.notes)}


def _fp16(measurements: Sequence[Measurement]) -> Measurement:
    base = [m for m in measurements if m.kind == FP16 and m.ok]
    if not base:
        raise UserError("There is no FP16 measurement to judge the candidates against.",
                        "A candidate is recommended only when it is measured no slower than FP16.",
                        "Measure FP16 too (it is built first); if its build failed, fix that first.")
    return base[0]


def pick_measured(measurements: Sequence[Measurement], meets: Mapping[str, bool],
                  prefer_fp16_within_noise: bool = True) -> MeasuredPick:
    """The fastest candidate that meets accuracy and is not slower than FP16 beyond the noise.

    Parameters
    ----------
    measurements : sequence of Measurement
        FP16 (required), implicit INT8 and the Q/DQ candidates.
    meets : mapping
        Candidate name -> whether it meets the accuracy target. A candidate not in it is
        never picked (its accuracy is unknown). Implicit INT8 competes only when it is in it
        with True: its engine was run on the held-back samples and met the target (ONNX
        Runtime cannot predict it); otherwise it is reported as a reference.
    prefer_fp16_within_noise : bool
        When the fastest eligible candidate beats FP16 by no more than the noise, pick FP16
        (as fast as far as the run can tell, and more accurate).

    Returns
    -------
    MeasuredPick
    """
    base = _fp16(measurements)
    notes: List[str] = []
    eligible: List[Measurement] = []
    for m in measurements:
        if m.kind == FP16:
            continue
        if not m.ok:
            notes.append(f"{m.name}: not measured ({m.error or 'no time'}).")
            continue
        noise = max(base.spread_ms, m.spread_ms)
        ratio = m.median_ms / base.median_ms
        if m.kind == INT8_IMPLICIT and not meets.get(m.name, False):
            why = ("its engine misses the accuracy target on the held-back samples" if m.name in meets
                   else "its accuracy was not checked on the engine")
            notes.append(f"implicit INT8 (reference, not a candidate: {why}): {m.median_ms:.4f} ms, "
                         f"{ratio:.3f}x FP16.")
            continue
        if m.median_ms > base.median_ms + noise:
            notes.append(f"{m.name}: {m.median_ms:.4f} ms is slower than FP16 ({base.median_ms:.4f} ms) beyond "
                         f"the noise ({noise:.4f} ms); never recommended.")
            continue
        if not meets.get(m.name, False):
            notes.append(f"{m.name}: " + ("does not meet the accuracy target." if m.name in meets
                                          else "accuracy not known; not recommended."))
            continue
        eligible.append(m)
    if not eligible:
        return MeasuredPick(FP16, base.median_ms, base.median_ms, base.spread_ms,
                            "FP16: no candidate that meets accuracy was measured at or below FP16's time.",
                            tuple(notes))
    best = min(eligible, key=lambda m: (m.median_ms, m.spread_ms, m.name))
    noise = max(base.spread_ms, best.spread_ms)
    if prefer_fp16_within_noise and best.median_ms >= base.median_ms - noise:
        return MeasuredPick(FP16, base.median_ms, base.median_ms, noise,
                            f"FP16: the fastest candidate ({best.name}, {best.median_ms:.4f} ms) is not faster than "
                            f"FP16 ({base.median_ms:.4f} ms) beyond the noise ({noise:.4f} ms).", tuple(notes))
    return MeasuredPick(best.name, best.median_ms, base.median_ms, noise,
                        f"{best.name}: {best.median_ms:.4f} ms against FP16's {base.median_ms:.4f} ms "
                        f"({base.median_ms / best.median_ms:.2f}x, noise {noise:.4f} ms), measured; meets accuracy.",
                        tuple(notes))


class MeasuredLatency:
    """A latency model over measurements: the measured time of a measured placement, NaN otherwise.

    ``estimate(int8_layers)`` has the latency models' signature: the set of layers run in
    INT8 -> milliseconds. The empty set is FP16 (everything in the float part).

    Attributes
    ----------
    kind : str
        ``"measured"``.
    """

    kind = "measured"

    def __init__(self, measurements: Iterable[Measurement]):
        self._times: Dict[FrozenSet[str], float] = {}
        for m in measurements:
            if not m.ok or m.kind == INT8_IMPLICIT:
                continue
            layers = frozenset() if m.kind == FP16 else frozenset(m.int8_layers)
            self._times.setdefault(layers, m.median_ms)

    def estimate(self, int8_layers: Iterable[str]) -> float:
        """Measured milliseconds of exactly this INT8 set, or NaN when it was not measured."""
        return self._times.get(frozenset(int8_layers), float("nan"))

    def __len__(self) -> int:
        return len(self._times)


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


def measurement_rows(measurements: Sequence[Measurement]) -> List[dict]:
    """Estimate and measurement side by side, one row per engine (for plan.html, the Pareto chart, the zoo table).

    Each row: ``name, kind, estimate_ms, measured_ms, spread_ms, vs_fp16`` (measured / FP16's measured),
    ``estimate_vs_fp16`` (estimate / FP16's estimate) and ``estimate_error`` (how far the estimated ratio to
    FP16 was off the measured one: ``estimate_vs_fp16 / vs_fp16 - 1``; NaN where either is unknown).
    Ratios, not milliseconds, are compared: a cost model's absolute times are not meant to be right.
    """
    base = next((m for m in measurements if m.kind == FP16 and m.ok), None)
    fp16_ms = base.median_ms if base is not None else float("nan")
    fp16_est = base.estimate_ms if base is not None else float("nan")
    rows = []
    for m in measurements:
        vs = m.median_ms / fp16_ms if m.ok and fp16_ms > 0 else float("nan")
        est_vs = m.estimate_ms / fp16_est if math.isfinite(m.estimate_ms) and fp16_est > 0 else float("nan")
        err = est_vs / vs - 1.0 if math.isfinite(est_vs) and math.isfinite(vs) and vs > 0 else float("nan")
        rows.append({"name": m.name, "kind": m.kind, "estimate_ms": m.estimate_ms, "measured_ms": m.median_ms,
                     "spread_ms": m.spread_ms, "vs_fp16": vs, "estimate_vs_fp16": est_vs, "estimate_error": err})
    return rows
