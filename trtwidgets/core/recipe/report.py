"""A self-contained HTML report, assembled from sections.

Pure: sections are HTML fragments made here from plain values, every
model-provided name escaped. Figures are made by :mod:`trtwidgets.plots.report_html`
and passed in as ready fragments (:class:`Section` with ``raw=True``), so this
module needs neither plotly nor pandas at import time.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

_STYLE = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1200px;color:#202124}
h1{font-size:24px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
table.trtw-report{border-collapse:collapse;font-size:12px;margin:8px 0}
table.trtw-report th,table.trtw-report td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top;
max-width:420px;overflow-wrap:anywhere}
table.trtw-report th{background:#f5f5f5}
.trtw-note{color:#5f6368;font-size:13px}
.trtw-error{background:#fdecea;border-left:4px solid #d93025;padding:4px 8px;margin:4px 0;white-space:pre-wrap}
.trtw-warning{background:#fff4e5;border-left:4px solid #e37400;padding:4px 8px;margin:4px 0}
.trtw-info{background:#e8f0fe;border-left:4px solid #1a73e8;padding:4px 8px;margin:4px 0}
pre{font-size:11px;white-space:pre-wrap;background:#f8f9fa;padding:6px}
"""


def esc(value: Any) -> str:
    """``str(value)`` escaped for HTML text and attributes."""
    return html.escape("" if value is None else str(value), quote=True)


@dataclass(frozen=True)
class Section:
    """One titled part of the report.

    Attributes
    ----------
    title : str
        Plain text (escaped when rendered).
    body : str
        An HTML fragment, already safe (made by the functions of this module or
        by :mod:`trtwidgets.plots.report_html`).
    anchor : str
        The section's id in the document.
    """

    title: str
    body: str = field(repr=False)
    anchor: str = ""


def _anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-") or "section"


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v)
    return str(v)


def table(rows: Iterable[Any], columns: Sequence[str], caption: Optional[str] = None,
          limit: Optional[int] = None) -> str:
    """An escaped HTML table; ``rows`` are mappings (read by ``columns``) or sequences."""
    rows = list(rows)
    shown = rows if limit is None else rows[:limit]
    parts = ['<table class="trtw-report">']
    if caption:
        parts.append(f"<caption style='text-align:left;font-weight:bold'>{esc(caption)}</caption>")
    parts.append("<thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in columns) + "</tr></thead><tbody>")
    for row in shown:
        cells = [row.get(c) for c in columns] if isinstance(row, Mapping) else list(row)
        parts.append("<tr>" + "".join(f"<td>{esc(_fmt(v))}</td>" for v in cells) + "</tr>")
    parts.append("</tbody></table>")
    if limit is not None and len(rows) > limit:
        parts.append(f"<div class='trtw-note'>showing {limit} of {len(rows)} rows</div>")
    return "".join(parts)


def note(text: str, kind: str = "info") -> str:
    """A boxed note (``info``, ``warning`` or ``error``); ``text`` is escaped."""
    return f"<div class='trtw-{esc(kind)}'>{esc(text)}</div>"


def paragraph(text: str) -> str:
    return f"<p>{esc(text)}</p>"


def section(title: str, *parts: str) -> Section:
    """A section from safe fragments (use :func:`table`, :func:`note`, :func:`paragraph`)."""
    return Section(title, "".join(parts), _anchor(title))


# -- sections for the steps ------------------------------------------------------------------


def summary_section(summary, recipe=None, extra: Optional[Mapping[str, Any]] = None) -> Section:
    """The model (inputs, outputs, size) and the recipe's main choices."""
    rows = [("model", summary.path),
            ("opset", summary.opset),
            ("nodes", summary.node_count),
            ("parameters", f"{summary.param_count:,}"),
            ("Q/DQ nodes", summary.qdq.count)]
    if recipe is not None:
        cal = recipe.calibrator
        rows += [("flags", ", ".join(recipe.flags) or "none (FP32)"),
                 ("precision constraints", recipe.precision_constraints),
                 ("calibrator", cal.kind + (f" ({cal.method})" if cal.method else "")),
                 ("calibration shapes", "; ".join(f"{k}: {list(v)}" for k, v in recipe.calibration_shapes.items())
                  or "static"),
                 ("amax overrides", len(cal.amax_overrides))]
    for k, v in (extra or {}).items():
        rows.append((k, v))
    io_rows = [{"kind": kind, "name": t.name, "dtype": t.dtype,
                "shape": list(t.shape) if t.has_shape else "unknown shape"}
               for kind, ts in (("input", summary.inputs), ("output", summary.outputs)) for t in ts]
    return section("Summary", table(rows, ["item", "value"]), table(io_rows, ["kind", "name", "dtype", "shape"]))


def findings_section(findings: Sequence[Any]) -> Section:
    """Lint findings: code, severity, message, fix."""
    if not findings:
        return section("Lint findings", note("No findings: nothing TensorRT is known to refuse or ignore."))
    rows = [{"severity": f.severity, "code": f.code, "message": f.message, "fix": f.fix,
             "nodes": ", ".join(list(f.nodes)[:5]) + (" ..." if len(f.nodes) > 5 else "")} for f in findings]
    return section("Lint findings", table(rows, ["severity", "code", "message", "fix", "nodes"]))


def ranges_section(ranges: Mapping[str, Mapping[str, Any]], method: str, stats=None, limit: Optional[int] = 400,
                   description: str = "", chosen: Optional[Mapping[str, str]] = None) -> Section:
    """Amax per tensor and method, the exported method's SQNR and clipped share, lowest SQNR first.

    ``chosen`` (tensor -> method) is what ``auto`` exports for each tensor (``Calibration.choices``); such a
    tensor's SQNR and clipped share are its chosen method's.
    """
    methods = sorted({m for per in ranges.values() for m in per})
    chosen = dict(chosen or {})
    rows = []
    for name, per in ranges.items():
        r = per.get(chosen.get(name, method))
        row: Dict[str, Any] = {"tensor": name}
        row.update({m: per[m].amax for m in methods if m in per})
        row["SQNR dB"] = None if r is None else r.sqnr_db
        row["clipped"] = None if r is None else f"{100 * r.clipped_fraction:.4f}%"
        if stats is not None and name in stats.tensors:
            t = stats.tensors[name]
            row["min x"], row["max x"] = t.min, t.max
        rows.append(row)
    rows.sort(key=lambda r: r["SQNR dB"] if r["SQNR dB"] is not None and not math.isnan(r["SQNR dB"]) else math.inf)
    cols = ["tensor"] + methods + ["SQNR dB", "clipped"] + (["min x", "max x"] if stats is not None else [])
    head = paragraph(description) if description else ""
    return section("Ranges per tensor", head,
                   paragraph(f"amax per range method; SQNR and clipped share for the exported method ({method}"
                             + (": each tensor's own" if chosen else "") + "), lowest SQNR first."),
                   table(rows, cols, limit=limit))


def layer_table_section(title: str, table_rows: List[Mapping[str, Any]], columns: Sequence[str],
                        warnings: Sequence[str] = (), stale: str = "", limit: Optional[int] = 500) -> Section:
    """One engine's per-layer table (rows from ``layer_table(...).to_dict('records')``)."""
    parts = [note(w, "warning") for w in warnings]
    if stale:
        parts.append(note(f"This build does not match the recipe: {stale}", "warning"))
    parts.append(table(table_rows, columns, limit=limit))
    return section(title, *parts)


def precision_summary_section(summaries: Mapping[str, Mapping[str, Any]]) -> Section:
    """Layers per precision per build (``summary_dict`` output per build label)."""
    rows = []
    for label, s in summaries.items():
        for precision, d in s.get("precisions", {}).items():
            rows.append({"build": label, "precision": precision, "layers": d["layers"],
                         "share": f"{100 * d['share']:.1f}%",
                         "time share": "" if d.get("time_share") is None else f"{100 * d['time_share']:.1f}%"})
        for code, n in s.get("why_not_int8", {}).items():
            rows.append({"build": label, "precision": f"why not INT8: {code}", "layers": n})
    return section("Precision summary", table(rows, ["build", "precision", "layers", "share", "time share"]))


def steps_section(steps: Sequence[Mapping[str, Any]]) -> Section:
    """What ran, what was skipped and why (``{"step", "status", "detail"}`` each)."""
    return section("Steps", table(steps, ["step", "status", "detail"]))


def render_document(title: str, sections: Sequence[Section], head: str = "", subtitle: str = "") -> str:
    """The whole HTML document: a table of contents, then every section.

    Parameters
    ----------
    title : str
        Plain text.
    sections : sequence of Section
    head : str
        Safe HTML for ``<head>`` (e.g. plotly.js, embedded once).
    subtitle : str
        Plain text under the title.
    """
    toc = "".join(f"<li><a href='#{esc(s.anchor)}'>{esc(s.title)}</a></li>" for s in sections)
    body = "".join(f"<h2 id='{esc(s.anchor)}'>{esc(s.title)}</h2>{s.body}" for s in sections)
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>{_STYLE}</style>{head}</head><body>"
            f"<h1>{esc(title)}</h1>" + (f"<div class='trtw-note'>{esc(subtitle)}</div>" if subtitle else "")
            + f"<ul>{toc}</ul>{body}</body></html>")
