"""plan.html's latency section: whether the latency was measured, and each estimate beside its measurement."""

from __future__ import annotations

import html
import math

__all__ = ["latency_section_html"]


def _num(v, fmt: str) -> str:
    return format(float(v), fmt) if isinstance(v, (int, float)) and math.isfinite(v) else "-"


def latency_section_html(plan) -> str:
    """A :class:`~trtwidgets.core.plan.plan_artifact.Plan`'s section as HTML: the estimate's record in words, or
    the measured engines in a table (names escaped); empty when the plan says neither."""
    if plan.measured is None:
        if plan.estimate is None:
            return ""
        return f"<h2>Latency: an estimate</h2><p>{html.escape(plan.estimate.text)}</p>" + _zoo_table(plan.estimate)
    m = plan.measured
    settings = m.settings
    head = (f"<h2>Latency: measured{' (partial: interrupted)' if m.status == 'partial' else ''}</h2>"
            f"<p>{html.escape(str(settings.get('gpu', '?')))}, TensorRT {html.escape(str(settings.get('trt', '?')))}, "
            f"{int(m.rounds)} interleaved rounds; {int(m.built)} engines built, "
            f"{int(m.cached)} from the cache. The estimated and measured times are compared as "
            "ratios to FP16 (a cost model's milliseconds are not meant to be right).</p>")
    cells = ("engine", "estimated x FP16", "measured ms", "spread ms", "measured x FP16", "estimate off by", "note")
    rows = ["<tr>" + "".join(f"<th>{c}</th>" for c in cells) + "</tr>"]
    for r in m.rows():
        err = r.estimate_error
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
            html.escape(r.name), _num(r.estimate_vs_fp16, ".3f"), _num(r.measured_ms, ".4f"),
            _num(r.spread_ms, ".4f"), _num(r.vs_fp16, ".3f"), (f"{err:+.0%}" if math.isfinite(err) else "-"),
            html.escape(r.error)[:300])) + "</tr>")
    return head + "<table border='1' cellpadding='4' style='border-collapse:collapse'>" + "".join(rows) + "</table>"


def _zoo_table(estimate) -> str:
    """How far such estimates have been off: one row per zoo engine (model, estimated and measured x FP16)."""
    rows = estimate.rows()
    if not rows:
        return ""
    head = "".join(f"<th>{c}</th>" for c in ("model", "estimated x FP16", "measured x FP16", "measured on"))
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return ("<table border='1' cellpadding='4' style='border-collapse:collapse'><caption>How far the estimate has "
            f"been off on the zoo</caption><tr>{head}</tr>{body}</table>")
