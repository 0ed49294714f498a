"""A plan as the plain-text table the CLI prints, from its data (a :class:`~.plan_values.Plan` or ``plan.json``).

One row per candidate: INT8 and float layer counts, the predicted accuracy, the
estimated time relative to FP16 and, once measured, the measured time relative to
FP16 with its spread beside it (estimate and measurement side by side), and where the
engines were judged on the held-back samples, each engine's own verdict. A measured
implicit INT8 engine gets a row of its own (``=>`` when it is the measured pick).
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional

__all__ = ["implicit_row", "measured_rows_by_candidate", "plan_table"]


def implicit_row(doc: Mapping) -> Optional[dict]:
    """Implicit INT8's measured row (``doc["measured"]["rows"]``), or None when it was not measured."""
    rows = (doc.get("measured") or {}).get("rows") or []
    return next((r for r in rows if r.get("kind") == "int8_implicit"), None)


def measured_rows_by_candidate(doc: Mapping) -> Dict[int, dict]:
    """Candidate index -> its measured row (``doc["measured"]["rows"]``, written by :mod:`.measured_plan`)."""
    measured = doc.get("measured") or {}
    rows = measured.get("rows") or []
    return {int(r["candidate"]): r for r in rows if r.get("candidate") is not None}


def _num(v, fmt: str, width: int) -> str:
    return format(float(v), fmt).rjust(width) if isinstance(v, (int, float)) and math.isfinite(v) else "-".rjust(width)


def _engine(row) -> str:
    """An engine's verdict on the held-back samples, 12 wide: its metric (or cosine) and whether it meets."""
    acc = (row or {}).get("engine_accuracy") or {}
    if acc.get("meets") is None:
        return " " * 12
    value = acc.get("metric") if acc.get("metric") is not None else acc.get("cosine")
    return f"{_num(value, '.4f', 7)} {'ok' if acc['meets'] else 'miss':>4}"


def plan_table(doc: Mapping) -> str:
    """The candidates of a plan's data as a table; the recommended one marked ``->``."""
    cands = doc["candidates"]
    measured = measured_rows_by_candidate(doc)
    all_rows = (doc.get("measured") or {}).get("rows") or []
    judged = any((r.get("engine_accuracy") or {}).get("meets") is not None for r in all_rows)
    any_metric = any((c.get("accuracy") or {}).get("metric") is not None for c in cands)
    header = (f"{'':2}{'candidate':<44}{'INT8':>6}{'float':>7}{'cosine':>9}{'SNR dB':>8}"
              + ("   metric" if any_metric else "") + f"{'est. x FP16':>13}"
              + (f"{'meas. x FP16':>14}{'spread ms':>11}" if measured else "")
              + (f"{'on engine':>13}" if judged else "") + "  target")
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
        engine = " " + _engine(row) if judged else ""
        rows.append(f"{mark:2}{c['name'][:43]:<44}{len(c['quantized']):>6}{len(c['kept']):>7}"
                    f"{_num(acc.get('cosine'), '.4f', 9)}{_num(acc.get('snr_db'), '.1f', 8)}{metric}"
                    f"{_num(est, '.3f', 13)}{meas}{engine}  {'meets' if c.get('meets_target') else 'misses'}")
    rows.extend(_implicit_line(doc, any_metric, judged))
    return "\n".join(rows)


def _implicit_line(doc: Mapping, any_metric: bool, judged: bool) -> List[str]:
    """Implicit INT8's line (``=>`` when it is the measured pick), or nothing when it has no time."""
    row = implicit_row(doc)
    if row is None or not isinstance(row.get("vs_fp16"), (int, float)) or not math.isfinite(row["vs_fp16"]):
        return []
    pick = (doc.get("measured") or {}).get("pick") or {}
    mark = "=>" if pick.get("kind") == "int8_implicit" else ""
    acc = row.get("engine_accuracy") or {}
    verdict = {True: "meets", False: "misses"}.get(acc.get("meets"), "not judged")
    return [f"{mark:2}{'implicit INT8 (TensorRT calibrator)':<44}{'-':>6}{'-':>7}{'-':>9}{'-':>8}"
            + ("-".rjust(9) if any_metric else "") + "-".rjust(13)
            + _num(row.get("vs_fp16"), ".3f", 14) + _num(row.get("spread_ms"), ".4f", 11)
            + (" " + _engine(row) if judged else "") + f"  {verdict}"]
