"""Per-layer GPU times: TensorRT's IProfiler reports aggregated over runs, and every form of them read back.

The IProfiler glue is in ``trtwidgets.trt.profiler``; this module holds the
result value and its exports: a ``{layer: mean ms}`` mapping that
``core.engine.layer_table.layer_table(profile=...)`` attaches, and the JSON list that
``trtexec --exportProfile`` writes, so the same readers work on both. :func:`read_profile`
reads per-layer times from each form a user has (a mapping, a build's ``timings.json``,
trtexec's profile; an object, JSON text or a file), :func:`timings_from_doc` from a decoded document.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.atomic import write_text_atomic
from ..common.errors import InspectorError
from ..common.json_limits import SIDE_FILE_LIMITS, load_json

__all__ = ["LayerTime", "LayerTimings", "aggregate_layer_times", "read_profile", "timings_from_doc"]


@dataclass(frozen=True)
class LayerTime:
    """Times of one layer, milliseconds.

    Attributes
    ----------
    name : str
    count : int
        Reports TensorRT made for this layer (one per profiled run normally).
    total_ms, mean_ms, median_ms : float
        Sum over all reports; mean and median per profiled run.
    runs_seen : int, optional
        Profiled runs in which the layer was reported (None when run boundaries are unknown).
    zero_count : int
        Reports of exactly 0.0 ms (layers without a kernel of their own, e.g. no-op reshapes).
    """

    name: str
    count: int
    total_ms: float
    mean_ms: float
    median_ms: float
    runs_seen: Optional[int] = None
    zero_count: int = 0

    def to_dict(self) -> dict:
        return {"name": self.name, "count": self.count, "total_ms": self.total_ms,
                "mean_ms": self.mean_ms, "median_ms": self.median_ms, "runs_seen": self.runs_seen,
                "zero_count": self.zero_count}


@dataclass(frozen=True)
class LayerTimings:
    """All layers of one engine, in execution order.

    Attributes
    ----------
    layers : tuple of LayerTime
    runs : int
        Profiled runs.
    run_ms : float, optional
        Median time of a whole profiled run (CUDA events around it), which
        includes the profiler's own per-layer overhead.
    run_sums_ms : tuple of float
        Sum of the layer reports of each profiled run (empty when run
        boundaries are unknown).
    consistent_runs : bool, optional
        Whether every profiled run reported the same layers in the same order
        (None when run boundaries are unknown).
    """

    layers: Tuple[LayerTime, ...]
    runs: int
    run_ms: Optional[float] = None
    run_sums_ms: Tuple[float, ...] = ()
    consistent_runs: Optional[bool] = None

    @property
    def total_ms(self) -> float:
        """Sum of the per-layer means: the engine's time per run as the profiler sees it."""
        return float(sum(t.mean_ms for t in self.layers))

    def as_mapping(self) -> Dict[str, float]:
        """Layer name -> mean ms per run (what ``layer_table(profile=...)`` takes)."""
        return {t.name: t.mean_ms for t in self.layers}

    def top(self, n: int = 10) -> Tuple[LayerTime, ...]:
        """The ``n`` slowest layers."""
        return tuple(sorted(self.layers, key=lambda t: -t.mean_ms)[:n])

    def to_trt_profile(self) -> List[dict]:
        """The list ``trtexec --exportProfile`` writes: ``[{"count"}, {"name", "timeMs", "averageMs", ...}]``."""
        total = self.total_ms or 1.0
        out: List[dict] = [{"count": int(self.runs)}]
        for t in self.layers:
            out.append({"name": t.name, "timeMs": t.total_ms, "averageMs": t.mean_ms,
                        "medianMs": t.median_ms, "percentage": 100.0 * t.mean_ms / total})
        return out

    def write_trt_profile(self, path: Union[str, os.PathLike]) -> str:
        """Write :meth:`to_trt_profile` as JSON, atomically; returns the path."""
        path = os.fspath(path)
        write_text_atomic(path, json.dumps(self.to_trt_profile(), indent=1))
        return path

    def to_dict(self) -> dict:
        return {"runs": self.runs, "total_ms": self.total_ms, "run_ms": self.run_ms,
                "run_sums_ms": list(self.run_sums_ms), "consistent_runs": self.consistent_runs,
                "layers": [t.to_dict() for t in self.layers]}


def aggregate_layer_times(records: Sequence[Tuple[str, float]], runs: int, run_ms: Optional[float] = None,
                          run_ends: Optional[Sequence[int]] = None) -> LayerTimings:
    """Aggregate ``(layer name, ms)`` reports in the order TensorRT made them.

    Parameters
    ----------
    records : sequence of (str, float)
        One record per layer per run (a layer reported twice in one run adds up).
    runs : int
        Number of profiled runs; a layer's mean is its total divided by this.
    run_ms : float, optional
        Median wall time of a profiled run.
    run_ends : sequence of int, optional
        ``len(records)`` after each profiled run, so that reports can be told
        apart by run (per-run sums, in how many runs each layer appeared).
    """
    records = [(str(n), float(ms)) for n, ms in records]
    runs = max(int(runs), 1)
    chunks: List[List[Tuple[str, float]]] = []
    if run_ends is not None:
        start = 0
        for end in run_ends:
            chunks.append(records[start:int(end)])
            start = int(end)
    order: List[str] = []
    totals: Dict[str, List[float]] = {}
    for name, ms in records:
        if name not in totals:
            order.append(name)
            totals[name] = []
        totals[name].append(ms)
    per_run: Dict[str, List[float]] = {}
    for chunk in chunks:
        sums: Dict[str, float] = {}
        for name, ms in chunk:
            sums[name] = sums.get(name, 0.0) + ms
        for name, v in sums.items():
            per_run.setdefault(name, []).append(v)
    layers = []
    for name in order:
        arr = np.asarray(totals[name], dtype=np.float64)
        if chunks:
            seen: Optional[int] = len(per_run.get(name, ()))
            # Runs without a report count as 0 ms for the median.
            values = np.asarray(per_run.get(name, []) + [0.0] * (len(chunks) - len(per_run.get(name, ()))))
            median = float(np.median(values))
        else:
            seen = None
            median = float(np.median(arr)) if len(arr) == runs else float(arr.sum() / runs)
        layers.append(LayerTime(name=name, count=len(arr), total_ms=float(arr.sum()), mean_ms=float(arr.sum() / runs),
                                median_ms=median, runs_seen=seen, zero_count=int(np.count_nonzero(arr == 0.0))))
    sums_ms = tuple(float(sum(ms for _, ms in c)) for c in chunks)
    consistent = None
    if chunks:
        first = [n for n, _ in chunks[0]]
        consistent = all([n for n, _ in c] == first for c in chunks[1:])
    return LayerTimings(layers=tuple(layers), runs=runs, run_ms=run_ms, run_sums_ms=sums_ms, consistent_runs=consistent)


# --------------------------------------------------------------------------- reading times back

def timings_from_doc(doc) -> Tuple[Optional[Dict[str, float]], dict]:
    """``(layer -> mean ms, latency statistics)`` from a decoded timings document; ``(None, {})`` when it holds none.

    Understands the ``timings.json`` of ``tests/gpu/make_fixtures.py`` (``{"latency", "layers":
    LayerTimings.to_dict(), ...}``), ``LayerTimings.to_dict()`` itself, ``trtexec --exportProfile``
    records and a plain ``{layer: ms}`` mapping.

    Raises
    ------
    TypeError, ValueError
        A per-layer record holds a time that is not a number.
    """
    latency: dict = {}
    if isinstance(doc, dict):
        latency = doc["latency"] if isinstance(doc.get("latency"), dict) else {}
        if doc and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in doc.values()):
            return {str(k): float(v) for k, v in doc.items()}, {}
        layers = doc.get("layers")
        if isinstance(layers, dict):  # LayerTimings.to_dict()
            layers = layers.get("layers")
        if isinstance(layers, list):
            out = {str(r["name"]): float(r["mean_ms"] if "mean_ms" in r else r.get("averageMs", 0.0))
                   for r in layers if isinstance(r, dict) and "name" in r}
            return (out or None), latency
        return None, latency
    if isinstance(doc, list):  # trtexec --exportProfile
        out = {str(r["name"]): float(r.get("averageMs", 0.0)) for r in doc if isinstance(r, dict) and "name" in r}
        return (out or None), {}
    return None, {}


_PROFILE_FORMS = ("a {layer name: ms} mapping, the timings.json trtwidgets saves with a build "
                  "({\"latency\", \"layers\": {\"layers\": [{\"name\", \"mean_ms\"}, ...]}}), "
                  "or TensorRT's profile JSON (trtexec --exportProfile: [{\"count\"}, {\"name\", \"averageMs\"}, ...])")


def _profile_doc(profile: Any) -> Any:
    """``(decoded JSON, source name)`` of a profile given as text, bytes or a path."""
    text = profile.decode("utf-8", "replace") if isinstance(profile, bytes) else str(profile)
    if not isinstance(profile, os.PathLike) and text.lstrip()[:1] in ("[", "{"):
        source = "<profile text>"
    else:
        source = str(profile)
        try:
            text = Path(profile).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InspectorError(f"Could not read the profile {source}.", str(exc), "Check the path.") from None
    try:
        return load_json(text, source, SIDE_FILE_LIMITS, InspectorError, strict=False), source
    except json.JSONDecodeError as exc:
        raise InspectorError(f"The profile {source} is not JSON ({exc.msg}).",
                             f"Per-layer timings are {_PROFILE_FORMS}.",
                             "Export it again, or pass a {layer name: ms} mapping.") from None


def _trtexec_profile(records: Sequence[Any]) -> dict:
    out = {}
    count = next((r.get("count") for r in records if isinstance(r, Mapping) and "count" in r), None)
    for rec in records:
        if not isinstance(rec, Mapping) or "name" not in rec:
            continue  # the leading {"count": N} record
        if "averageMs" in rec:
            ms = float(rec["averageMs"])
        elif "timeMs" in rec:
            ms = float(rec["timeMs"]) / count if count else float(rec["timeMs"])
        else:
            continue
        out[str(rec["name"])] = ms
    return out


def read_profile(profile: Any) -> dict:
    """Per-layer average time in ms from a profile.

    Parameters
    ----------
    profile : LayerTimings, mapping, list, str or path
        ``LayerTimings`` (``trtwidgets.trt.profiler``); ``{layer name: ms}``; the
        ``timings.json`` saved with a build (``{"latency", "layers": LayerTimings.to_dict(), ...}``,
        read as :func:`trtwidgets.core.engine.saved_build.read_timings` does) or
        ``LayerTimings.to_dict()`` alone; or TensorRT's profile JSON (``trtexec
        --exportProfile``): ``[{"count": N}, {"name", "timeMs", "averageMs",
        "percentage"}, ...]``. Each as an object, as JSON text or as a JSON file.

    Returns
    -------
    dict
        Layer name -> average ms per inference.

    Raises
    ------
    InspectorError
        The profile is not JSON, holds no per-layer times, or has another shape.
    """
    if hasattr(profile, "as_mapping"):  # trtwidgets.core.engine.layer_times.LayerTimings
        profile = profile.as_mapping()
    source = "The profile"
    if isinstance(profile, (str, bytes, os.PathLike)):
        profile, name = _profile_doc(profile)
        source = f"The profile {name}"
    times = None
    latency_only = False
    try:
        if isinstance(profile, Mapping):
            if profile and all(not isinstance(v, (Mapping, list, tuple)) for v in profile.values()) \
                    and "layers" not in profile and "latency" not in profile:
                times = {str(k): float(v) for k, v in profile.items()}  # {layer name: ms}
            else:
                times, latency = timings_from_doc(dict(profile))
                latency_only = times is None and ("layers" in profile or bool(latency))
        elif isinstance(profile, (list, tuple)):
            times = _trtexec_profile(profile) or None
            latency_only = times is None
    except (TypeError, ValueError) as exc:
        raise InspectorError(f"{source} has a per-layer time that is not a number ({exc}).",
                             f"Per-layer timings are {_PROFILE_FORMS}.",
                             "Write the timings again, or pass a {layer name: ms} mapping.") from None
    if times:
        return times
    if latency_only:
        raise InspectorError(f"{source} has no per-layer times.",
                             "It holds whole-engine latency or an empty layer list only: the engine was timed "
                             "without a per-layer profiler (IProfiler), or no layer was reported.",
                             "Time the engine with per-layer profiling (trtwidgets.trt's benchmark with layer "
                             "times, or trtexec --exportProfile), or leave the profile out.")
    if isinstance(profile, Mapping):
        keys = list(profile)
        shape = f"an object with keys {', '.join(repr(k) for k in keys[:6])}{', ...' if len(keys) > 6 else ''}"
    else:
        shape = f"a JSON {type(profile).__name__}"
    raise InspectorError(f"{source} is {shape}, not per-layer timings.",
                         f"Per-layer timings are {_PROFILE_FORMS}.",
                         "Pass one of those, or leave the profile out (the CLI's --no-siblings, the "
                         "Inspector's use_siblings=False ignore a timings file beside the engine).")
