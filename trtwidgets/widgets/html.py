"""Escaped HTML fragments that the widgets share: tables, findings, errors.

Everything that reaches HTML here is escaped, because names come from models
and files a user did not write (a node may be called ``<img src=x onerror=...>``).
Only the fixed markup of this module is not escaped. Pure string building: no
ipywidgets import, so it is testable and reusable by any widget.
"""

from __future__ import annotations

import html
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..core.common.errors import UserError

#: Background / border colours per finding severity (readable in light and dark themes).
SEVERITY_COLORS = {
    "error": ("#fdecea", "#d93025"),
    "warning": ("#fff4e5", "#e37400"),
    "info": ("#e8f0fe", "#1a73e8"),
}

_TABLE_STYLE = "border-collapse:collapse;font-size:12px;margin:4px 0"
_CELL_STYLE = "border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top"


def esc(value: Any) -> str:
    """``str(value)`` escaped for HTML text and attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def html_table(rows: Iterable[Any], columns: Optional[Sequence[str]] = None, caption: Optional[str] = None) -> str:
    """An HTML table with every header and cell escaped.

    Parameters
    ----------
    rows : iterable of sequence or mapping
        One row per item; mappings are read by ``columns``.
    columns : sequence of str, optional
        Header labels (and the keys of mapping rows). Without it there is no header.
    caption : str, optional
        A caption above the table.
    """
    parts = [f'<table style="{_TABLE_STYLE}">']
    if caption:
        parts.append(f'<caption style="text-align:left;font-weight:bold">{esc(caption)}</caption>')
    if columns:
        parts.append("<thead><tr>" + "".join(f'<th style="{_CELL_STYLE}">{esc(c)}</th>' for c in columns)
                     + "</tr></thead>")
    parts.append("<tbody>")
    for row in rows:
        cells = [row.get(c, "") for c in columns] if isinstance(row, Mapping) and columns else list(row)
        parts.append("<tr>" + "".join(f'<td style="{_CELL_STYLE}">{esc(v)}</td>' for v in cells) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def findings_html(findings: Sequence[Any]) -> str:
    """Lint findings as coloured panels (severity, code, message, why, fix, nodes).

    Parameters
    ----------
    findings : sequence of trtwidgets.core.model.lint.Finding
    """
    if not findings:
        return '<div class="trtw-findings" style="color:#188038">No findings: nothing known to go wrong.</div>'
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITY_COLORS}
    parts = [f'<div class="trtw-findings"><div style="font-weight:bold">Lint: {counts["error"]} error(s), '
             f'{counts["warning"]} warning(s), {counts["info"]} info</div>']
    for f in findings:
        bg, border = SEVERITY_COLORS.get(f.severity, ("#f1f3f4", "#5f6368"))
        nodes = ""
        if f.nodes:
            shown = ", ".join(esc(n) for n in f.nodes[:10]) + (f" and {len(f.nodes) - 10} more" if len(f.nodes) > 10 else "")
            nodes = f'<div style="font-size:11px;color:#5f6368">nodes: <code>{shown}</code></div>'
        parts.append(
            f'<div class="trtw-finding trtw-{esc(f.severity)}" data-code="{esc(f.code)}" '
            f'style="background:{bg};border-left:4px solid {border};padding:4px 8px;margin:4px 0">'
            f'<div><b style="color:{border}">{esc(f.severity.upper())}</b> <code>{esc(f.code)}</code> {esc(f.message)}</div>'
            + (f"<div><i>Why:</i> {esc(f.why)}</div>" if f.why else "")
            + (f"<div><i>Fix:</i> {esc(f.fix)}</div>" if f.fix else "")
            + nodes + "</div>")
    parts.append("</div>")
    return "".join(parts)


def error_html(err: Any) -> str:
    """An error panel: a UserError's what / why / fix, or any message text. Empty input gives ''."""
    if err is None or err == "":
        return ""
    bg, border = SEVERITY_COLORS["error"]
    if isinstance(err, UserError):
        body = f"<div><b>{esc(err.what)}</b></div>"
        body += f"<div><i>Why:</i> {esc(err.why)}</div>" if err.why else ""
        body += f"<div><i>Fix:</i> {esc(err.fix)}</div>" if err.fix else ""
    else:
        body = f'<div style="white-space:pre-wrap">{esc(err)}</div>'
    return (f'<div class="trtw-error" style="background:{bg};border-left:4px solid {border};padding:4px 8px;'
            f'margin:4px 0">{body}</div>')


def disclosure(summary: str, body_html: str) -> str:
    """A one-line ``summary`` (escaped) that opens onto ``body_html`` (already escaped by the caller)."""
    return (f"<details style='margin:2px 0'><summary style='cursor:pointer;color:#1a73e8'>{esc(summary)}</summary>"
            f"<div style='padding:2px 0 2px 12px'>{body_html}</div></details>")


def summary_html(summary: Any) -> str:
    """A model summary (``trtwidgets.core.model.load.ModelSummary``) as escaped tables."""
    from ..core.model.dim_text import dim_text, tensor_shape_text

    s = summary
    q = s.qdq
    qdq = (f"{q.count} ({q.quantize} Q, {q.dequantize} DQ; per-tensor {q.per_tensor}, per-channel {q.per_channel}; "
           + ", ".join(f"{k} {v}" for k, v in q.dtypes.items()) + ")") if q.count else "none"
    if q.dynamic_scale:
        qdq += f"; dynamic scale: {', '.join(q.dynamic_scale)}"
    overview = [
        ("path", s.path),
        ("producer", s.producer or "-"),
        ("IR / opset", f"{s.ir_version} / " + ", ".join(f"{d or 'ai.onnx'}:{v}" for d, v in s.opsets.items())),
        ("nodes", s.node_count),
        ("parameters", f"{s.param_count:,} ({s.param_bytes / 1e6:.2f} MB)"),
        ("initializer dtypes", ", ".join(f"{k} {v}" for k, v in s.initializer_dtypes.items()) or "-"),
        ("Q/DQ nodes", qdq),
        ("external data", "yes" if s.external_data else "no"),
        ("sha256", s.sha256[:16] + "…" if s.sha256 else "-"),
    ]
    io_rows = []
    for kind, tensors in (("input", s.inputs), ("output", s.outputs)):
        for t in tensors:
            # Exporters' names (p2o.DynamicDimension.0) read as N×3×H×W; see core.model.dim_text.
            # Whole names: a table cell wraps, and a cut name cannot be told from its neighbours.
            dyn = ", ".join(f"dim {i} ({dim_text(n, i, len(t.shape), None)})" for i, n in t.dynamic_dims.items()) \
                or "static"
            io_rows.append((kind, t.name, t.dtype, tensor_shape_text(t, limit=None), dyn))
    ops = list(s.op_counts.items())
    return ('<div class="trtw-summary">'
            + html_table(overview, ("", "value"), caption="Model")
            + html_table(io_rows, ("", "name", "dtype", "shape", "dynamic dims"), caption="Inputs and outputs")
            # Real models have dozens of op types; folded so the findings stay in view.
            + f"<details><summary>Operators ({len(ops)} types, {s.node_count} nodes)</summary>"
            + html_table(ops, ("op", "count")) + "</details>"
            + "</div>")
