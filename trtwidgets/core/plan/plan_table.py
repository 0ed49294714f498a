"""A plan as the plain-text table the CLI prints, from its data (a :class:`~.plan_values.Plan` or ``plan.json``).

One row per candidate: INT8 and float layer counts, the predicted accuracy, the
estimated time relative to FP16 and, once measured, the measured time relative to
FP16 with its spread beside it (estimate and measurement side by side).
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping

__all__ = ["measured_rows_by_candidate", "plan_table"]


def measured_rows_by_candidate(doc: Mapping) -> Dict[int, dict]:
    """Candidate index -> its measured row (``doc["measured"]["rows"]``, written by :mod:`.measured_plan`)."""
    measured = doc.get("measured") or {}
    rows = measured.get("rows") or []
    return {int(r["candidate"]): r for r in rows if r.get("candidate") is not None}


def _num(v, fmt: str, width: int) -> str:
    return format(float(v), fmt).rjust(width) if isinstance(v, (int, float)) and math.isfinite(v) else "-".rjust(width)


def plan_table(doc: Mapping) -> str:
    """The candidates of a plan's data as a table; the recommended one marked ``->``."""
    cands = doc["candidates"]
    measured = measured_rows_by_candidate(doc)
    any_metric = any((c.get("accuracy") or {}).get("metric") is not None for c in cands)
    header = (f"{'':2}{'candidate':<44}{'INT8':>6}{'float':>7}{'cosine':>9}{'SNR dB':>8}"
              + ("   metric" if any_metric else "") + f"{'est. x FP16':>13}"
              + (f"{'meas. x FP16':>14}{'spread ms':>11}" if measured else "") + "  target")
    rows: List[str] = [header]
    for i, c in enumerate(cands):
        acc = c.get("accuracy") or {}
        mark = "->" if i == doc.get("recommended") else ""
        speedup = c.get("speedup_vs_fp16")
        est = 1 / speedup if isinstance(speedup, (int, float)) and speedup else math.nan
        metric = _num(acc.get("metric"), ".4f", 9) if any_metric else ""
        row = measured.get(i)
        meas = (_num(row.get("vs_fp16"), ".3f", 14) + _num(row.get("spread_ms"), ".4f", 11) if row is not None
                else " " * 25) if measured else ""
        rows.append(f"{mark:2}{c['name'][:43]:<44}{len(c['quantized']):>6}{len(c['kept']):>7}"
                    f"{_num(acc.get('cosine'), '.4f', 9)}{_num(acc.get('snr_db'), '.1f', 8)}{metric}"
                    f"{_num(est, '.3f', 13)}{meas}  {'meets' if c.get('meets_target') else 'misses'}")
    return "\n".join(rows)
