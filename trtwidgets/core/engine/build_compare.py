"""Two or more builds of one model, side by side.

Engine layers of different builds are matched first by name, then by the ONNX
nodes fused into them (the same nodes, else the largest overlap): an FP16 and an
INT8 build of a model usually fuse alike, while a Q/DQ build adds the Q/DQ and
weight names to its layers' names. What the comparison shows:

* the precision counts of each build;
* the matched layers whose precision or tactic differ, and layers present in
  some builds only (typically reformats);
* per-layer and total latency where a profile is attached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..common.errors import InspectorError
from .inspector_json import EngineGraph, EngineLayer, as_graph

__all__ = ["MatchedLayer", "BuildComparison", "compare_builds"]


@dataclass(frozen=True)
class MatchedLayer:
    """One layer across builds.

    Attributes
    ----------
    key : str
        The layer's name in the first build that has it.
    match : str
        ``"name"``, ``"onnx_nodes"`` (same fused nodes), ``"overlap"`` (some
        fused nodes in common) or ``"unmatched"`` (present in one build only).
    layers : tuple of (EngineLayer or None)
        One slot per build.
    latency_ms : tuple of (float or None)
    """

    key: str
    match: str
    layers: Tuple[Optional[EngineLayer], ...]
    latency_ms: Tuple[Optional[float], ...]

    @property
    def precisions(self) -> Tuple[Optional[str], ...]:
        return tuple(layer.precision if layer is not None else None for layer in self.layers)

    @property
    def tactics(self) -> Tuple[Optional[str], ...]:
        return tuple(layer.tactic if layer is not None else None for layer in self.layers)

    @property
    def precision_differs(self) -> bool:
        return len(set(self.precisions)) > 1

    @property
    def tactic_differs(self) -> bool:
        return len(set(self.tactics)) > 1


@dataclass(frozen=True)
class BuildComparison:
    """The matched layers of several builds (see :func:`compare_builds`)."""

    labels: Tuple[str, ...]
    graphs: Tuple[EngineGraph, ...]
    rows: Tuple[MatchedLayer, ...]
    has_latency: Tuple[bool, ...]

    def precision_counts(self):
        """pandas.DataFrame: layers per precision (rows) and build (columns)."""
        import pandas as pd

        from .inspector_json import PRECISIONS

        data = {label: graph.precision_counts() for label, graph in zip(self.labels, self.graphs)}
        frame = pd.DataFrame(data).fillna(0).astype("int64")
        order = [p for p in PRECISIONS if p in frame.index] + sorted(p for p in frame.index if p not in PRECISIONS)
        frame = frame.reindex(order)
        frame.index.name = "precision"
        return frame

    def total_latency_ms(self) -> Dict[str, Optional[float]]:
        """Sum of per-layer times of each build (None without a profile)."""
        out: Dict[str, Optional[float]] = {}
        for j, label in enumerate(self.labels):
            if not self.has_latency[j]:
                out[label] = None
                continue
            out[label] = float(sum(t for r in self.rows if (t := r.latency_ms[j]) is not None))
        return out

    def table(self, only_differences: bool = False):
        """pandas.DataFrame, one row per matched layer.

        Columns ``layer, match, <label> precision, <label> tactic[, <label> ms]``
        per build, then ``precision_differs`` and ``tactic_differs``.
        """
        import pandas as pd

        records = []
        for row in self.rows:
            if only_differences and not (row.precision_differs or row.tactic_differs):
                continue
            rec: Dict[str, Any] = {"layer": row.key, "match": row.match}
            for j, label in enumerate(self.labels):
                layer = row.layers[j]
                rec[f"{label} name"] = layer.name if layer is not None else ""
                rec[f"{label} precision"] = layer.precision if layer is not None else ""
                rec[f"{label} tactic"] = layer.tactic if layer is not None else ""
                if self.has_latency[j]:
                    ms = row.latency_ms[j]
                    rec[f"{label} ms"] = float("nan") if ms is None else ms
            rec["precision_differs"] = row.precision_differs
            rec["tactic_differs"] = row.tactic_differs
            records.append(rec)
        columns = ["layer", "match"]
        for j, label in enumerate(self.labels):
            columns += [f"{label} name", f"{label} precision", f"{label} tactic"]
            if self.has_latency[j]:
                columns.append(f"{label} ms")
        columns += ["precision_differs", "tactic_differs"]
        return pd.DataFrame.from_records(records, columns=columns)


def _jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def compare_builds(builds: Any, labels: Optional[Sequence[str]] = None, profiles: Any = None) -> BuildComparison:
    """Match the layers of two or more builds.

    Parameters
    ----------
    builds : mapping label -> source, or sequence of sources
        Each source is an EngineGraph, a build result, inspector JSON text or a path.
    labels : sequence of str, optional
        Names of the builds (default: the mapping's keys, or ``build 1``, ``build 2``...).
    profiles : mapping label -> profile, or sequence, optional
        Per-layer timings of each build (see :func:`trtwidgets.core.engine.layer_times.read_profile`);
        ``None`` entries for builds without one.

    Returns
    -------
    BuildComparison
    """
    from .layer_times import read_profile

    labels, sources = _labelled_sources(builds, labels)
    graphs = tuple(as_graph(src) for src in sources)
    if isinstance(profiles, Mapping):
        prof_list = [profiles.get(label) for label in labels]
    elif profiles is None:
        prof_list = [None] * len(graphs)
    else:
        prof_list = list(profiles)
    times = [read_profile(p) if p is not None else None for p in prof_list]

    n = len(graphs)
    slots: List[List[Optional[EngineLayer]]] = [[layer] + [None] * (n - 1) for layer in graphs[0].layers]
    kinds: List[str] = ["unmatched"] * len(slots)
    for j, graph in enumerate(graphs[1:], start=1):
        _match_build(slots, kinds, graph, j, n)
    rows = []
    for row, kind in zip(slots, kinds):
        present = [layer for layer in row if layer is not None]
        if len(present) < 2:
            kind = "unmatched"
        lat = tuple((t.get(layer.name) if (t := times[j]) is not None and layer is not None else None)
                    for j, layer in enumerate(row))
        rows.append(MatchedLayer(present[0].name, kind, tuple(row), lat))
    return BuildComparison(tuple(labels), graphs, tuple(rows), tuple(t is not None for t in times))


def _labelled_sources(builds: Any, labels: Optional[Sequence[str]]) -> Tuple[List[str], List[Any]]:
    """(labels, sources) of ``builds``; InspectorError unless there are two or more, one label each."""
    if isinstance(builds, Mapping):
        labels = list(labels or builds.keys())
        sources = list(builds.values())
    else:
        sources = list(builds)
        labels = list(labels or [f"build {i + 1}" for i in range(len(sources))])
    if len(sources) < 2 or len(labels) != len(sources):
        raise InspectorError(f"Comparing needs two or more builds with one label each; got {len(sources)} builds "
                             f"and {len(labels)} labels.", None, "Pass two or more builds (and as many labels).")
    return labels, sources


def _match_build(slots: List[List[Optional[EngineLayer]]], kinds: List[str], graph: EngineGraph, j: int,
                 n: int) -> None:
    """Put build ``j``'s layers into ``slots`` (rows of the ``n`` builds): by name, then by the same ONNX
    nodes, then by the most overlapping ONNX nodes; a new row for a layer that matches nothing."""
    by_name: Dict[str, List[int]] = {}
    for i, row in enumerate(slots):
        for layer in row[:j]:
            if layer is not None:
                by_name.setdefault(layer.name, []).append(i)
                break
    pending: List[EngineLayer] = []
    for layer in graph.layers:
        idx = next((i for i in by_name.get(layer.name, []) if slots[i][j] is None), None)
        if idx is None:
            pending.append(layer)
        else:
            slots[idx][j] = layer
            kinds[idx] = "name" if kinds[idx] in ("unmatched", "name") else kinds[idx]
    row_nodes = [frozenset(n_ for layer in row[:j] if layer is not None for n_ in layer.onnx_nodes)
                 for row in slots]
    still: List[EngineLayer] = []
    for layer in pending:
        nodes = frozenset(layer.onnx_nodes)
        idx = next((i for i, rn in enumerate(row_nodes) if nodes and rn == nodes and slots[i][j] is None), None)
        if idx is None:
            still.append(layer)
        else:
            slots[idx][j] = layer
            kinds[idx] = "onnx_nodes" if kinds[idx] != "overlap" else kinds[idx]
    for layer in still:
        nodes = frozenset(layer.onnx_nodes)
        best, best_score = None, 0.0
        for i, rn in enumerate(row_nodes):
            if slots[i][j] is None:
                score = _jaccard(nodes, rn)
                if score > best_score:
                    best, best_score = i, score
        if best is None:
            slots.append([None] * j + [layer] + [None] * (n - j - 1))
            kinds.append("unmatched")
            row_nodes.append(nodes)
        else:
            slots[best][j] = layer
            kinds[best] = "overlap"
