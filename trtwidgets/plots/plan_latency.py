"""plan.html's latency section: whether the latency was measured, and each estimate beside its measurement."""

from __future__ import annotations

import html
import math
from typing import Mapping

__all__ = ["latency_section_html"]


def _num(v, fmt: str) -> str:
    return format(float(v), fmt) if isinstance(v, (int, float)) and math.isfinite(v) else "-"


def latency_section_html(doc: Mapping) -> str:
    """The section as HTML: the estimate's record in words, or the measured engines in a table (names escaped)."""
    measured = doc.get("measured") or {}
    status = measured.get("status")
    if not status:
        return ""
    if status == "estimate":
        return f"<h2>Latency: an estimate</h2><p>{html.escape(str(measured.get('text', '')))}</p>"
    settings = measured.get("settings") or {}
    head = (f"<h2>Latency: measured{' (partial: interrupted)' if status == 'partial' else ''}</h2>"
            f"<p>{html.escape(str(settings.get('gpu', '?')))}, TensorRT {html.escape(str(settings.get('trt', '?')))}, "
            f"{int(measured.get('rounds', 0))} interleaved rounds; {int(measured.get('built', 0))} engines built, "
            f"{int(measured.get('cached', 0))} from the cache. The estimated and measured times are compared as "
            "ratios to FP16 (a cost model's milliseconds are not meant to be right).</p>")
    cells = ("engine", "estimated x FP16", "measured ms", "spread ms", "measured x FP16", "estimate off by", "note")
    rows = ["<tr>" + "".join(f"<th>{c}</th>" for c in cells) + "</tr>"]
    for r in measured.get("rows") or ():
        err = r.get("estimate_error")
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
            html.escape(str(r.get("name", ""))), _num(r.get("estimate_vs_fp16"), ".3f"),
            _num(r.get("measured_ms"), ".4f"),
            _num(r.get("spread_ms"), ".4f"), _num(r.get("vs_fp16"), ".3f"),
            (f"{err:+.0%}" if isinstance(err, (int, float)) and math.isfinite(err) else "-"),
            html.escape(str(r.get("error") or ""))[:300])) + "</tr>")
    return head + "<table border='1' cellpadding='4' style='border-collapse:collapse'>" + "".join(rows) + "</table>"
