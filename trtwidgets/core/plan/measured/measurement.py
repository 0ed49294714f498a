"""One engine's measured time: the placement it builds, its interleaved rounds, estimate beside measurement.

The timing itself is :mod:`trtwidgets.trt.measure` (FP16, implicit INT8 and Q/DQ candidates,
built once per placement and timed A B C A B C ... in several rounds); this module holds
what needs no GPU, so it is tested on committed numbers:

* :func:`placement_key`: one key per distinct Q/DQ placement. Q/DQ scale values are
  zeroed before hashing, because a change of ranges alone changes no latency.
* :func:`qdq_values_key`: the Q/DQ scales and zero points themselves, which the placement key
  leaves out: an engine's build key takes both, since its accuracy depends on them.
* :class:`Measurement`: one engine's per-round medians, overall median and spread
  (the largest minus the smallest round median: the run's noise for that engine), and its
  verdict on the plan's held-back samples.
* :class:`MeasuredRow` / :func:`measurement_rows`: estimate and measurement side by side, as
  ratios to FP16.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import FrozenSet, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ...common.serial import json_float, read_float
from ..plan_values import EngineVerdict, ratio

__all__ = ["FP16", "INT8_IMPLICIT", "QDQ", "MeasuredRow", "Measurement", "candidate_index", "fp16_of",
           "measurement_rows", "placement_key", "qdq_values_key"]

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
    percentile, amax overrides) get the same key: they time alike, but compute differently,
    so an engine's build key adds :func:`qdq_values_key`. A Q/DQ pair added, removed or moved
    changes it, and so does any type. Names, doc strings and metadata are left out.

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


def _qdq_params(graph: onnx.GraphProto) -> List[str]:
    """The names a Q/DQ node reads as its scale or zero point, each once, in graph order."""
    return list(dict.fromkeys(x for n in graph.node if n.op_type in _QDQ_OPS for x in n.input[1:3] if x))


def qdq_values_key(model: onnx.ModelProto, length: int = 16) -> str:
    """A hash of every Q/DQ scale and zero point of the model: equal only for equal ranges.

    What :func:`placement_key` zeroes on purpose. Only the tensors a QuantizeLinear or
    DequantizeLinear reads as its scale or zero point are hashed, each as its name, element type,
    shape and values (an initializer's or a ``Constant``'s): a few hundred numbers, not the
    weights again. A scale computed by other nodes (a ``Cast`` of an initializer) is hashed by
    :func:`placement_key` already, which keeps every tensor it does not zero, and every type.

    Parameters
    ----------
    model : onnx.ModelProto
    length : int
        Hex characters kept.
    """
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant" and n.output}
    h = hashlib.sha256()
    for name in _qdq_params(g):
        h.update(name.encode() + b"\0")
        if name in inits:
            arr = onnx.numpy_helper.to_array(inits[name])  # raw_data or typed fields: the same values
            h.update(f"{inits[name].data_type}:{arr.shape}:".encode() + np.ascontiguousarray(arr).tobytes())
        elif name in consts:  # value, value_float, value_floats ...: what it holds, not its node's name
            for a in consts[name].attribute:
                h.update(a.SerializeToString(deterministic=True))
    return h.hexdigest()[:length]


def _finite_or_none(v: float) -> Optional[float]:
    return float(v) if v is not None and math.isfinite(v) else None


@dataclass(frozen=True)
class Measurement:
    """One engine's time, from interleaved rounds.

    Attributes
    ----------
    name : str
        ``"fp16"``, ``"int8_implicit"`` or the candidate's job name (``"#3 INT8 where it pays"``).
    kind : str
        :data:`FP16`, :data:`INT8_IMPLICIT` or :data:`QDQ`.
    round_ms : tuple of float
        The median time of each round, milliseconds (GPU time of one run).
    key : str
        The build's cache key (placement + build settings).
    estimate_ms : float
        The planner's estimate for this candidate (NaN when none), shown beside the measurement.
    int8_layers : frozenset of str
        The candidate's INT8 layers.
    build_seconds : float
        0 when the engine came from the cache.
    cached : bool
    error : str
        Why it has no time (build failed, interrupted), else empty.
    accuracy : EngineVerdict, optional
        The engine judged on the plan's held-back samples
        (:meth:`~trtwidgets.core.plan.engine_check.EngineCheck.verdict`); None when not checked.
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
    accuracy: Optional[EngineVerdict] = field(default=None, compare=False)

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

    @property
    def judged(self) -> Optional[bool]:
        """The engine's own verdict on the held-back samples: True / False, None when not judged."""
        return self.accuracy.meets if self.accuracy is not None else None

    @property
    def accuracy_text(self) -> str:
        """The engine's accuracy on the held-back samples, in words."""
        return self.accuracy.text() if self.accuracy is not None else "not judged"

    def to_dict(self) -> dict:
        """The record for plan.json (estimate and measurement side by side)."""
        return {"name": self.name, "kind": self.kind, "round_ms": [json_float(t) for t in self.round_ms],
                "median_ms": json_float(self.median_ms), "spread_ms": json_float(self.spread_ms),
                "estimate_ms": json_float(self.estimate_ms), "key": self.key,
                "int8_layers": sorted(self.int8_layers), "build_seconds": float(self.build_seconds),
                "cached": bool(self.cached), "error": self.error,
                **({"accuracy": self.accuracy.to_dict()} if self.accuracy is not None else {})}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Measurement":
        """Inverse of :meth:`to_dict` (plan.json's record, checked by :mod:`..plan_file`)."""
        return cls(name=str(d["name"]), kind=str(d["kind"]), round_ms=tuple(read_float(t) for t in d.get("round_ms", ())),
                   key=str(d.get("key", "")), estimate_ms=read_float(d.get("estimate_ms", "nan")),
                   int8_layers=frozenset(d.get("int8_layers", ())), build_seconds=float(d.get("build_seconds", 0.0)),
                   cached=bool(d.get("cached", False)), error=str(d.get("error", "")),
                   accuracy=EngineVerdict.from_dict(d["accuracy"]) if d.get("accuracy") is not None else None)


@dataclass(frozen=True)
class MeasuredRow:
    """One engine's estimate and measurement side by side (plan.html, the table, the Pareto chart, the zoo).

    Ratios, not milliseconds, are compared: a cost model's absolute times are not meant to be right.

    Attributes
    ----------
    name, kind : str
    candidate : int, optional
        The candidate's index in the plan (0 for FP16; None for implicit INT8 or an unknown name).
    estimate_ms, measured_ms, spread_ms : float
    vs_fp16 : float
        Measured / FP16's measured.
    estimate_vs_fp16 : float
        Estimate / FP16's estimate.
    estimate_error : float
        How far the estimated ratio to FP16 was off the measured one: ``estimate_vs_fp16 / vs_fp16 - 1``
        (NaN where either is unknown).
    rounds : int
    error : str
    engine : EngineVerdict, optional
        The engine's verdict on the held-back samples.
    """

    name: str
    kind: str
    candidate: Optional[int]
    estimate_ms: float
    measured_ms: float
    spread_ms: float
    vs_fp16: float
    estimate_vs_fp16: float
    estimate_error: float
    rounds: int = 0
    error: str = ""
    engine: Optional[EngineVerdict] = None

    def to_dict(self) -> dict:
        """For plan.json (JSON has no NaN: None)."""
        num = {k: _finite_or_none(getattr(self, k)) for k in ("estimate_ms", "measured_ms", "spread_ms", "vs_fp16",
                                                               "estimate_vs_fp16", "estimate_error")}
        return {"name": self.name, "kind": self.kind, **num, "candidate": self.candidate, "rounds": self.rounds,
                "error": self.error, "engine_accuracy": self.engine.to_dict() if self.engine is not None else None}


def candidate_index(name: str) -> Optional[int]:
    """The candidate a measurement's name stands for: 0 for ``"fp16"``, N for ``"#N ..."``, else None."""
    if name == FP16:
        return 0
    if name.startswith("#"):
        head = name[1:].split(" ", 1)[0]
        return int(head) if head.isdigit() else None
    return None


def fp16_of(measurements: Sequence[Measurement]) -> Optional[Measurement]:
    """FP16 of the model as given with a time (named ``"fp16"``), else the first FP16 engine with one, else None.

    A plan with FP16 of the rewritten graph measures two FP16 engines; ratios "x FP16" are to the model as given.
    """
    timed = [m for m in measurements if m.kind == FP16 and m.ok]
    return next((m for m in timed if m.name == FP16), timed[0] if timed else None)


def measurement_rows(measurements: Sequence[Measurement]) -> List[MeasuredRow]:
    """Estimate and measurement side by side, one row per engine (see :class:`MeasuredRow`)."""
    base = fp16_of(measurements)
    fp16_ms = base.median_ms if base is not None else float("nan")
    fp16_est = base.estimate_ms if base is not None else float("nan")
    rows = []
    for m in measurements:
        # Every ratio through ratio(): a time of 0, infinity or NaN is no ratio (NaN), never a division.
        vs = ratio(m.median_ms, fp16_ms) if m.ok else float("nan")
        est_vs = ratio(m.estimate_ms, fp16_est)
        err = ratio(est_vs, vs) - 1.0
        rows.append(MeasuredRow(m.name, m.kind, candidate_index(m.name) if m.kind != INT8_IMPLICIT else None,
                                m.estimate_ms, m.median_ms, m.spread_ms, vs, est_vs, err, len(m.round_ms), m.error,
                                m.accuracy))
    return rows
