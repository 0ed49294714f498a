"""Builds side by side, the way TREx compares engines: latency, spread, precisions, task metric.

One row per build: its median latency and spread, its INT8 / FP16 / FP32 layer counts,
and a task metric given by the caller (the engine itself cannot be run where a saved
build is read, so the caller says what the metric was measured on). Two sources:

* saved build folders (``timings.json`` with the latency of 200 runs, the inspector JSON);
* a *measured* folder: a measurements JSON written on a GPU machine, where the builds
  were timed in interleaved rounds (medians and spreads per build) and each build's layer
  table was kept (:func:`read_measured_folder`).

Nothing here invents a number: a missing latency or metric is NaN, and the notebooks
say so.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from .build_records import recorded_latency
from .inspector_json import as_graph, parse_inspector_json

__all__ = ["BUILD_TABLE_COLUMNS", "build_row", "build_rows", "read_measured_folder", "fastest"]

#: The columns of a build table, in order.
BUILD_TABLE_COLUMNS = ("build", "median_ms", "spread_ms", "INT8", "FP16", "FP32", "other", "metric", "metric_source")

_NAN = float("nan")
_MAIN = ("INT8", "FP16", "FP32")


def _counts(counts: Mapping[str, int]) -> Dict[str, int]:
    out = {p: int(counts.get(p, 0)) for p in _MAIN}
    out["other"] = int(sum(v for k, v in counts.items() if k not in _MAIN))
    return out


def build_row(name: str, build: Any, metric: float = _NAN, metric_source: str = "") -> dict:
    """One build as a row of :data:`BUILD_TABLE_COLUMNS`.

    Parameters
    ----------
    name : str
        The label shown.
    build : SavedBuild, build result, or anything :func:`as_graph` reads
        Its recorded latency (``timings.json``) gives ``median_ms`` and ``spread_ms``
        (p90 minus the fastest run: how far a typical slow run is from the best one).
    metric : float
        The task metric measured for this build (NaN: not measured).
    metric_source : str
        What the metric was measured on (e.g. "ONNX Runtime, the FP32 model").
    """
    lat = recorded_latency(build)
    median = float(lat.median_ms) if lat is not None else _NAN
    spread = float(lat.p90_ms - lat.min_ms) if lat is not None else _NAN
    row = {"build": name, "median_ms": median, "spread_ms": spread}
    row.update(_counts(as_graph(build).precision_counts()))
    row.update(metric=float(metric), metric_source=metric_source)
    return row


def build_rows(builds: Mapping[str, Any], metrics: Optional[Mapping[str, float]] = None,
               sources: Optional[Mapping[str, str]] = None) -> List[dict]:
    """:func:`build_row` for every ``label -> build``, in order."""
    metrics, sources = metrics or {}, sources or {}
    return [build_row(k, b, metrics.get(k, _NAN), sources.get(k, "")) for k, b in builds.items()]


def fastest(rows: List[dict]) -> Optional[dict]:
    """The row with the smallest finite median latency, or None."""
    timed = [r for r in rows if isinstance(r.get("median_ms"), float) and math.isfinite(r["median_ms"])]
    return min(timed, key=lambda r: r["median_ms"]) if timed else None


def _entries(doc: Any, depth: int = 2) -> List[dict]:
    """The per-build records of a measurements document (a list, or a dict holding one, e.g. plan.json's)."""
    if isinstance(doc, list):
        return [e for e in doc if isinstance(e, dict)]
    if isinstance(doc, dict):
        for key in ("measurements", "builds", "rows", "engines", "candidates"):
            if isinstance(doc.get(key), list):
                return [e for e in doc[key] if isinstance(e, dict)]
            if isinstance(doc.get(key), dict):
                return [dict(v, name=v.get("name", k)) for k, v in doc[key].items() if isinstance(v, dict)]
        if depth:
            for value in doc.values():
                found = _entries(value, depth - 1) if isinstance(value, dict) else []
                if found:
                    return found
    return []


def _median_spread(entry: Mapping) -> tuple:
    rounds = [float(t) for t in entry.get("round_ms") or () if isinstance(t, (int, float)) and math.isfinite(t)]
    median = entry.get("median_ms", entry.get("measured_ms"))
    if median is None and rounds:
        rounds_sorted = sorted(rounds)
        mid = len(rounds_sorted) // 2
        median = rounds_sorted[mid] if len(rounds_sorted) % 2 else (rounds_sorted[mid - 1] + rounds_sorted[mid]) / 2
    spread = entry.get("spread_ms")
    if spread is None and rounds:
        spread = max(rounds) - min(rounds)
    as_float = lambda v: float(v) if isinstance(v, (int, float)) else _NAN
    return as_float(median), as_float(spread)


def _entry_counts(entry: Mapping, folder: Path) -> Dict[str, int]:
    for key in ("precision_counts", "precisions", "layers"):
        value = entry.get(key)
        if isinstance(value, dict) and isinstance(value.get("precisions"), dict):
            value = value["precisions"]  # scripts/gpu_measured_plan.py: {"precisions": {...}, "layers": n, ...}
        if isinstance(value, dict) and value and all(isinstance(v, int) for v in value.values()):
            return _counts(value)
    name = str(entry.get("name", ""))
    for sub in (folder / name, folder / "builds" / name):
        graph = sub / "engine.graph.json"
        if graph.is_file():
            return _counts(parse_inspector_json(graph).precision_counts())
    return {p: -1 for p in _MAIN + ("other",)}


def read_measured_folder(folder: Union[str, os.PathLike]) -> Optional[List[dict]]:
    """Rows of :data:`BUILD_TABLE_COLUMNS` from a folder of builds measured on a GPU machine.

    The folder holds a measurements JSON (``*.json`` with a list of per-build records,
    or a dict with ``measurements``/``builds``/``rows``: each record a ``name``, a
    ``median_ms`` or ``measured_ms`` (or ``round_ms``, the per-round medians), a
    ``spread_ms``, optional ``precision_counts`` and task metric ``metric`` /
    ``top1``) and, per build, a ``<name>/engine.graph.json`` for its layer counts
    where the record has none. Layer counts that are nowhere are -1.

    Returns
    -------
    list of dict or None
        None when the folder or a measurements JSON is absent: nothing is made up.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.json")):
        try:
            entries = _entries(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
        entries = [e for e in entries if "name" in e and any(k in e for k in ("median_ms", "measured_ms", "round_ms"))]
        if not entries:
            continue
        rows = []
        for e in entries:
            median, spread = _median_spread(e)
            metric = e.get("metric", e.get("top1", _NAN))
            row = {"build": str(e["name"]), "median_ms": median, "spread_ms": spread}
            row.update(_entry_counts(e, folder))
            row.update(metric=float(metric) if isinstance(metric, (int, float)) else _NAN,
                       metric_source=str(e.get("metric_source", path.name)))
            rows.append(row)
        return rows
    return None
