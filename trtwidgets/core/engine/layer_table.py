"""Per-layer precision table (pandas) from an engine graph.

One row per engine layer, in execution order: what it fused, which precision
and memory layout its inputs and outputs use, its weights, its kernel, its time
when a profile is attached, and why it is not INT8. pandas is imported inside
the functions, so that ``trtwidgets.core`` imports without it.
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Union

from ..common.errors import InspectorError
from .inspector_json import PRECISIONS, EngineGraph
from .layer_times import read_profile

__all__ = ["COLUMNS", "PRECISION_COLORS", "layer_table", "precision_summary", "styled", "prebuild_table",
           "prebuild_summary", "filter_table"]

#: Columns of :func:`layer_table`, in order.
COLUMNS = ("name", "type", "layer_type", "onnx_nodes", "precision", "input_precision", "output_precision",
           "input_format", "output_format", "weights_type", "bias_type", "tactic", "latency_ms",
           "why_not_int8", "why_not_int8_reason")

#: One colour per precision, used by the Styler and the bar chart alike.
PRECISION_COLORS = {
    "INT8": "#2ca02c", "FP8": "#17becf", "INT4": "#8c564b", "FP4": "#bcbd22",
    "FP16": "#1f77b4", "BF16": "#9467bd", "FP32": "#ff7f0e", "FP64": "#d62728",
    "INT32": "#7f7f7f", "INT64": "#7f7f7f", "UINT8": "#7f7f7f", "BOOL": "#7f7f7f",
    "N/A": "#c7c7c7", "UNKNOWN": "#c7c7c7",
}
# Light backgrounds for table cells (same hues).
_CELL_COLORS = {
    "INT8": "#d4f4d4", "FP8": "#d2f4f7", "INT4": "#eadbd5", "FP4": "#f1f1c9",
    "FP16": "#d6e6f5", "BF16": "#e6dcf0", "FP32": "#ffe3c8", "FP64": "#f6d0d0",
    "N/A": "#eeeeee", "UNKNOWN": "#eeeeee",
}


def _join_unique(values: Iterable[str]) -> str:
    out: List[str] = []
    for v in values:
        if v and v not in out:
            out.append(v)
    return ", ".join(out)


def layer_table(graph: Union[EngineGraph, str, os.PathLike], profile: Any = None, recipe: Any = None,
                calibration: Any = None, qdq_tensors: Optional[Iterable[str]] = None, explain: bool = True,
                kept_float: Any = None):
    """The per-layer precision table of an engine.

    Parameters
    ----------
    graph : EngineGraph, or inspector JSON text/path
    profile : optional
        Per-layer timings (see :func:`read_profile`); fills ``latency_ms``.
    recipe, calibration, qdq_tensors, kept_float : optional
        Passed to :func:`~trtwidgets.core.engine.why_not_int8.why_not_int8`.
    explain : bool, default True
        Fill ``why_not_int8`` (a code) and ``why_not_int8_reason`` (a short reason naming the tensor
        or node); each cause is explained once in ``table.attrs["why_not_int8_causes"]``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`, one row per layer in execution order. List-like
        values (ONNX nodes, per-tensor precisions) are ``", "``-joined strings,
        so the table filters with vectorised string operations and writes to CSV.
        ``attrs["why_not_int8_causes"]``: one dict per cause (``code``, ``title``,
        ``explanation``, ``layers``), most layers first (see
        :func:`~trtwidgets.core.engine.why_not_int8.group_causes`).
    """
    import pandas as pd

    from .inspector_json import as_graph
    from .why_not_int8.causes import group_causes
    from .why_not_int8.explain import why_not_int8

    if not isinstance(graph, EngineGraph):
        graph = as_graph(graph)
    times = read_profile(profile) if profile is not None else {}
    reasons = (why_not_int8(graph, recipe, calibration, qdq_tensors, kept_float) if explain
               else (None,) * len(graph.layers))
    rows = []
    for layer, reason in zip(graph.layers, reasons):
        rows.append((
            layer.name,
            layer.type,
            layer.layer_type,
            ", ".join(layer.onnx_nodes),
            layer.precision,
            _join_unique(t.precision for t in layer.inputs),
            _join_unique(t.precision for t in layer.outputs),
            _join_unique(t.layout for t in layer.inputs),
            _join_unique(t.layout for t in layer.outputs),
            layer.weights.precision if layer.weights else "",
            layer.bias.precision if layer.bias else "",
            layer.tactic,
            times.get(layer.name, math.nan),
            reason.code if reason else "",
            (reason.short or reason.sentence) if reason else "",
        ))
    table = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    table["latency_ms"] = table["latency_ms"].astype("float64")
    table.attrs["warnings"] = [w.message for w in graph.warnings]
    table.attrs["source"] = graph.source
    table.attrs["why_not_int8_causes"] = [
        {"code": c.code, "title": c.title, "explanation": c.explanation, "layers": c.layers}
        for c in group_causes(reasons)]
    return table


def precision_summary(table):
    """Count and share of layers per precision, and share of time where latency is known.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`layer_table`.

    Returns
    -------
    pandas.DataFrame
        Index ``precision`` (in :data:`~trtwidgets.core.engine.inspector_json.PRECISIONS`
        order); columns ``layers``, ``share`` (0-1), ``time_ms`` and
        ``time_share`` (NaN where no layer of that precision has a latency).
    """
    import pandas as pd

    counts = table["precision"].value_counts()
    order = [p for p in PRECISIONS if p in counts.index] + sorted(p for p in counts.index if p not in PRECISIONS)
    out = pd.DataFrame({"layers": counts.reindex(order).astype("int64")})
    out.index.name = "precision"
    out["share"] = out["layers"] / max(int(out["layers"].sum()), 1)
    timed = table.dropna(subset=["latency_ms"])
    time = timed.groupby("precision")["latency_ms"].sum().reindex(order)
    total = float(timed["latency_ms"].sum())
    out["time_ms"] = time.astype("float64")
    out["time_share"] = time / total if total > 0 else math.nan
    return out


def summary_dict(table) -> dict:
    """:func:`precision_summary` as plain JSON-ready data (the CLI's ``--json``)."""
    summary = precision_summary(table)
    per = {}
    for precision, row in summary.iterrows():
        per[precision] = {
            "layers": int(row["layers"]),
            "share": round(float(row["share"]), 6),
            "time_ms": None if math.isnan(row["time_ms"]) else round(float(row["time_ms"]), 6),
            "time_share": None if math.isnan(row["time_share"]) else round(float(row["time_share"]), 6),
        }
    why = table.loc[table["why_not_int8"] != "", "why_not_int8"].value_counts()
    return {"layers": int(len(table)), "precisions": per,
            "why_not_int8": {str(k): int(v) for k, v in why.items()},
            "warnings": list(table.attrs.get("warnings", []))}


def filter_table(table, text: str = "", precision: Optional[str] = None, layer_type: Optional[str] = None,
                 sort_by: Optional[str] = None, ascending: bool = True, why: Optional[str] = None):
    """Rows matching a text (in name or ONNX nodes), a precision, a type and a why-not-INT8 code, optionally sorted.

    Vectorised (pandas string operations), so it stays fast on thousands of layers.
    """
    mask = None
    if text:
        needle = text.lower()
        mask = (table["name"].str.lower().str.contains(needle, regex=False)
                | table["onnx_nodes"].str.lower().str.contains(needle, regex=False))
    if precision:
        m = table["precision"] == precision
        mask = m if mask is None else mask & m
    if layer_type:
        m = table["type"] == layer_type
        mask = m if mask is None else mask & m
    if why:
        m = table["why_not_int8"] == why
        mask = m if mask is None else mask & m
    out = table if mask is None else table[mask]
    if sort_by:
        out = out.sort_values(sort_by, ascending=ascending, kind="stable", na_position="last")
    return out


def styled(table, max_rows: Optional[int] = None, precision_columns: Optional[Sequence[str]] = None):
    """The table as a pandas Styler: a colour per precision, names HTML-escaped.

    Parameters
    ----------
    table : pandas.DataFrame
    max_rows : int, optional
        Render only the first rows (the widget shows "showing N of M").
    precision_columns : sequence of str, optional
        Columns to colour by precision (default: the precision and type columns
        of :func:`layer_table`; a comparison table passes its ``<build> precision`` columns).
    """
    shown = table if max_rows is None else table.head(max_rows)
    wanted = precision_columns or ("precision", "input_precision", "output_precision", "weights_type", "bias_type")
    columns = [c for c in wanted if c in shown.columns]

    def colour(value):
        first = str(value).split(",")[0].strip()
        bg = _CELL_COLORS.get(first)
        return f"background-color: {bg}" if bg else ""

    styler = shown.style.format(escape="html", na_rep="", precision=4)
    if columns:
        styler = styler.map(colour, subset=columns) if hasattr(styler, "map") else styler.applymap(colour, subset=columns)
    return styler


def prebuild_table(rows: Sequence[Any]):
    """The network's layers before the build: requested precision and output types.

    Parameters
    ----------
    rows : sequence of mapping
        From ``trtwidgets.trt.layer_info.network_layers(network)``: each with
        ``index``, ``name``, ``type``, where the TensorRT version has them
        ``precision`` and ``precision_is_set``, ``inputs`` (names) and
        ``outputs`` (``name``, ``dtype``, ``shape``, ``type_is_set``).

    Returns
    -------
    pandas.DataFrame
        Columns ``index, name, type, requested_precision, precision_is_set,
        output_types, output_type_is_set, inputs, outputs``. TensorRT 11 has no
        layer precision: those cells are empty.
    """
    import pandas as pd

    def enum(value) -> str:
        s = "" if value is None else str(value)
        return s.rsplit(".", 1)[-1] if s.startswith(("DataType.", "LayerType.")) else s

    records = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InspectorError(f"Network layer {i} is {type(row).__name__}, not an object.",
                                 "The pre-build view takes one mapping per network layer (network_layers.json).",
                                 "Pass trtwidgets.trt.layer_info.network_layers(network) or the rows of "
                                 "network_layers.json.")
        outs = list(row.get("outputs") or ())
        out_dicts = [o if isinstance(o, Mapping) else {"name": str(o)} for o in outs]
        set_flags = [o.get("type_is_set") for o in out_dicts]
        records.append({
            "index": int(row.get("index", i)),
            "name": str(row.get("name", "")),
            "type": enum(row.get("type")),
            "requested_precision": enum(row.get("precision")) if "precision" in row else "",
            "precision_is_set": bool(row.get("precision_is_set", False)),
            "output_types": ", ".join(enum(o.get("dtype")) for o in out_dicts if o.get("dtype") is not None),
            "output_type_is_set": any(bool(f) for f in set_flags if f is not None),
            "inputs": ", ".join(str(n) for n in (row.get("inputs") or ()) if n is not None),
            "outputs": ", ".join(str(o.get("name", "")) for o in out_dicts),
        })
    columns = ["index", "name", "type", "requested_precision", "precision_is_set", "output_types",
               "output_type_is_set", "inputs", "outputs"]
    return pd.DataFrame.from_records(records, columns=columns)


def prebuild_summary(table) -> dict:
    """The pre-build view in brief, JSON-ready: layer counts per type and requested precision, and pinned layers.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`prebuild_table`.

    Returns
    -------
    dict
        ``layers``, ``types`` (type -> count, most frequent first), ``requested_precisions``
        (precision -> count; empty where the TensorRT version has no layer precision),
        ``precision_set`` and ``output_type_set`` (names of the layers whose precision or
        output type was set before the build).
    """
    def counts(column):
        values = table.loc[table[column] != "", column].value_counts()
        return {str(k): int(v) for k, v in values.items()}

    return {"layers": int(len(table)), "types": counts("type"), "requested_precisions": counts("requested_precision"),
            "precision_set": [str(n) for n in table.loc[table["precision_is_set"], "name"]],
            "output_type_set": [str(n) for n in table.loc[table["output_type_is_set"], "name"]]}


_HTML_STYLE = (
    "<style>.trtw-layers{border-collapse:collapse;font-size:12px}"
    ".trtw-layers th,.trtw-layers td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top;"
    "max-width:360px;overflow-wrap:anywhere}"
    ".trtw-layers th{position:sticky;top:0;background:#f5f5f5}"
    + "".join(f".trtw-p-{p.replace('/', '')}{{background:{c}}}" for p, c in _CELL_COLORS.items())
    + "</style>"
)


def table_html(table, max_rows: Optional[int] = 200, columns: Optional[Sequence[str]] = None,
               precision_columns: Optional[Sequence[str]] = None) -> str:
    """A compact, escaped HTML table with a colour per precision (faster than the Styler).

    Parameters
    ----------
    table : pandas.DataFrame
    max_rows : int or None
        Render only the first rows.
    columns : sequence of str, optional
        Columns to show (default: all).
    precision_columns : sequence of str, optional
        Columns whose cells are coloured by precision (as in :func:`styled`).
    """
    import html as _html

    cols = [c for c in (columns or table.columns) if c in table.columns]
    coloured = set(precision_columns or ("precision", "input_precision", "output_precision", "weights_type",
                                         "bias_type"))
    shown = table if max_rows is None else table.head(max_rows)
    parts = [_HTML_STYLE, '<table class="trtw-layers"><thead><tr>',
             "".join(f"<th>{_html.escape(str(c))}</th>" for c in cols), "</tr></thead><tbody>"]
    values = [shown[c].tolist() for c in cols]
    for i in range(len(shown)):
        cells = []
        for c, vals in zip(cols, values):
            v = vals[i]
            if isinstance(v, float):
                text = "" if math.isnan(v) else f"{v:.4g}"
            else:
                text = _html.escape(str(v))
            if c in coloured and text:
                first = text.split(",")[0].strip().replace("/", "")
                cells.append(f'<td class="trtw-p-{first}">{text}</td>' if first.isalnum() else f"<td>{text}</td>")
            else:
                cells.append(f"<td>{text}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)
