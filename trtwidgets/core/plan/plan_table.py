"""A plan as the plain-text table the CLI prints, and the few rows of its ``repr``.

One row per candidate: INT8 and float layer counts, the predicted accuracy, the
estimated time relative to FP16 and, once measured, the measured time relative to
FP16 with its spread beside it (estimate and measurement side by side), and where the
engines were judged on the held-back samples, each engine's own verdict. A measured
implicit INT8 engine gets a row of its own (``=>`` when it is the measured pick).
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Tuple

from .measured.measurement import MeasuredRow

__all__ = ["measured_rows_by_candidate", "plan_table", "short_rows", "table_rows"]


def measured_rows_by_candidate(plan) -> Dict[int, MeasuredRow]:
    """Candidate index -> its measured row (none when the :class:`~.plan_artifact.Plan` was not measured)."""
    if plan.measured is None:
        return {}
    return {r.candidate: r for r in plan.measured.rows() if r.candidate is not None}


def _num(v, fmt: str, width: int) -> str:
    return format(float(v), fmt).rjust(width) if isinstance(v, (int, float)) and math.isfinite(v) else "-".rjust(width)


def _estimate(ratio: float, c) -> str:
    """The estimated ratio to FP16, 13 wide; "cannot est." where the cost model gave none (never a number)."""
    if math.isfinite(ratio) or not c.quantized:
        return _num(ratio, ".3f", 13)
    return "cannot est.".rjust(13)


def _engine(row: Optional[MeasuredRow]) -> str:
    """An engine's verdict on the held-back samples, 12 wide: its metric (or cosine) and whether it meets."""
    verdict = row.engine if row is not None else None
    if verdict is None or verdict.meets is None:
        return " " * 12
    acc = verdict.accuracy
    value = None if acc is None else (acc.metric if acc.metric is not None else acc.cosine)
    return f"{_num(value, '.4f', 7)} {'ok' if verdict.meets else 'miss':>4}"


#: A column of the table: (key, header, text width (0: free), right-aligned).
_COLUMNS = (("name", "candidate", 44, False), ("int8", "INT8", 6, True), ("float", "float", 7, True),
            ("cosine", "cosine", 9, True), ("snr", "SNR dB", 8, True), ("metric", "metric", 9, True),
            ("est", "est. x FP16", 13, True), ("meas", "meas. x FP16", 14, True), ("spread", "spread ms", 11, True),
            ("engine", "on engine", 13, True), ("target", "target", 0, False))


def table_rows(plan) -> Tuple[List[Tuple[str, str, str, int, bool]], List[Tuple[str, Dict[str, str]]]]:
    """The table as cells: ``(columns, rows)``, one row per candidate (and implicit INT8's, once measured).

    ``columns`` are ``(key, header, ..., width, right)`` of the columns this plan shows; each row is
    ``(mark, {key: text})`` with ``mark`` ``"->"`` for the recommendation, ``"=>"`` for implicit INT8 as the
    measured pick. Names are whole here (:func:`plan_table` cuts them to its width; plan.html escapes them).
    """
    cands = plan.candidates
    measured = measured_rows_by_candidate(plan)
    all_rows = plan.measured.rows() if plan.measured is not None else []
    judged = any(r.engine is not None and r.engine.meets is not None for r in all_rows)
    any_metric = any(c.accuracy.metric is not None for c in cands)
    shown = {"metric": any_metric, "meas": bool(measured), "spread": bool(measured), "engine": judged}
    columns = [(k, h, h, w, r) for k, h, w, r in _COLUMNS if shown.get(k, True)]
    rows: List[Tuple[str, Dict[str, str]]] = []
    for i, c in enumerate(cands):
        acc = c.accuracy
        row = measured.get(i)
        cells = {"name": c.name, "int8": str(len(c.quantized)), "float": str(len(c.kept)),
                 "cosine": _num(acc.cosine, ".4f", 0), "snr": _num(acc.snr_db, ".1f", 0),
                 "metric": _num(acc.metric, ".4f", 0), "est": _estimate(c.vs_fp16, c).strip(),
                 "meas": _num(row.vs_fp16, ".3f", 0) if row is not None else "",
                 "spread": _num(row.spread_ms, ".4f", 0) if row is not None else "",
                 "engine": _engine(row).strip(), "target": _verdict(c)}
        rows.append(("->" if i == plan.recommended else "", cells))
    rows.extend(_implicit_row(plan))
    return columns, rows


def plan_table(plan) -> str:
    """The candidates of a plan as a plain-text table; the recommended one marked ``->``."""
    columns, rows = table_rows(plan)

    def line(mark: str, cells: Mapping[str, str]) -> str:
        text = f"{mark:2}"
        for key, _, _, width, right in columns:
            value = cells.get(key, "")
            if key == "name":
                text += f"{value[:width - 1]:<{width}}"
            elif key == "target":
                text += f"  {value}"
            else:
                text += value.rjust(width) if value or right else " " * width
        return text

    header = line("", {k: h for k, h, _, _, _ in columns})
    return "\n".join([header] + [line(mark, cells) for mark, cells in rows])


def _verdict(c) -> str:
    """``meets`` / ``misses``, and why where the scores cannot show it (NaN or Inf where FP32 is finite)."""
    if c.accuracy.non_finite:
        return f"misses: {c.accuracy.non_finite} NaN/Inf where FP32 is finite"
    return "meets" if c.meets_target else "misses"


def _implicit_row(plan) -> List[Tuple[str, Dict[str, str]]]:
    """Implicit INT8's row (``=>`` when it is the measured pick), or nothing when it has no time."""
    row = plan.measured.implicit_row() if plan.measured is not None else None
    if row is None or not math.isfinite(row.vs_fp16):
        return []
    meets = row.engine.meets if row.engine is not None else None
    cells = {"name": "implicit INT8 (TensorRT calibrator)", "int8": "-", "float": "-", "cosine": "-", "snr": "-",
             "metric": "-", "est": "-", "meas": _num(row.vs_fp16, ".3f", 0), "spread": _num(row.spread_ms, ".4f", 0),
             "engine": _engine(row).strip(), "target": "not judged" if meets is None else "meets" if meets else "misses"}
    return [("=>" if plan.measured.implicit_is_pick else "", cells)]


def short_rows(plan, limit: int) -> List[str]:
    """A few lines for ``repr(plan)``: FP16, the pick and the first others, each with its INT8 count,
    cosine, time relative to FP16 (measured where it was) and whether it meets the target."""
    measured = measured_rows_by_candidate(plan)
    shown = sorted(set(range(min(limit, len(plan.candidates)))) | {0} | ({plan.recommended} - {None}))
    lines = [f"  {'#':>3} {'candidate':<40}{'INT8':>6}{'cosine':>9}{'x FP16':>9}  target"]
    for i in shown:
        c = plan.candidates[i]
        row = measured.get(i)
        ratio = row.vs_fp16 if row is not None and math.isfinite(row.vs_fp16) else c.vs_fp16
        lines.append(f"{'->' if i == plan.recommended else '':2}{i:>3} {c.name[:39]:<40}{len(c.quantized):>6}"
                     f"{_num(c.accuracy.cosine, '.4f', 9)}{_num(ratio, '.3f', 8)}{'m' if row is not None else ' '}"
                     f"  {'meets' if c.meets_target else 'misses'}")
    if len(plan.candidates) > len(shown):
        lines.append(f"  ... {len(plan.candidates) - len(shown)} more candidates")
    if measured:
        lines.append("  (m: measured on the GPU; the others estimated)")
    return lines
