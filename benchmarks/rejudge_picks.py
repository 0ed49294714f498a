"""The zoo's committed measured plans judged again by today's pick rule (issue 44: the paired sign test).

Each record's measured plan (``benchmarks/results/trust/zoo_gpu/<job>.json``, the issue-24 run, and
``benchmarks/results/peer/zoo_run/<job>.json``, the runs beside ModelOpt) holds every engine's rounds in
order and the pick the rule of its day made. The pick is made again from those rounds
(:func:`~trtwidgets.core.plan.measured.repick.apply_measurements`, pure, no GPU) and printed beside the
recorded one, with the fastest candidate's paired rounds against FP16::

    python benchmarks/rejudge_picks.py            # a table
    python benchmarks/rejudge_picks.py --json     # the rows as JSON

``tests/core/plan/test_rejudged_picks.py`` holds the picks that changed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trtwidgets.core.plan.measured.paired import paired_rounds  # noqa: E402
from trtwidgets.core.plan.measured.repick import apply_measurements  # noqa: E402
from trtwidgets.core.plan.plan_artifact import Plan  # noqa: E402

RECORDS = {"zoo_gpu": ROOT / "benchmarks" / "results" / "trust" / "zoo_gpu",
           "zoo_run": ROOT / "benchmarks" / "results" / "peer" / "zoo_run"}


def _name(plan: Plan, index) -> str:
    return "nothing" if index is None else ("FP16" if index == 0 else f"#{index} {plan.candidates[index].name}")


def _fastest_eligible(reason: str):
    """The candidate an FP16 pick's reason names as the fastest that met the target (``FP16: the fastest
    candidate (NAME, ...``), or None."""
    head = "FP16: the fastest candidate ("
    return reason[len(head):].split(", ")[0] if reason.startswith(head) else None


def rejudge(folder: Path) -> List[Dict]:
    """One row per measured record in ``folder``: the recorded pick, today's, and the best candidate's pairs."""
    rows = []
    for path in sorted(folder.glob("*-b*.json")):
        doc = json.loads(path.read_text())
        if doc.get("status") != "measured" or not (doc.get("plan") or {}).get("measured"):
            continue
        recorded = Plan.from_dict(doc["plan"], path.stem)
        m = recorded.measured
        as_planned = dataclasses.replace(recorded, measured=None, recommended=m.estimate_pick,
                                         reason=m.estimate_reason)
        again = apply_measurements(as_planned, m.measurements, rounds=m.rounds, interrupted=m.interrupted)
        pick = again.measured.pick
        # The engine the rule judged against FP16: the pick, or for an FP16 pick the fastest candidate that met
        # the target (None when no candidate did).
        judged = pick.name if pick.name != "fp16" else _fastest_eligible(pick.reason)
        compared = next((x for x in m.measurements if x.name == judged), None)
        pairs = paired_rounds(compared, m.fp16()) if compared is not None else None
        rows.append({"job": path.stem, "rounds": m.rounds,
                     "recorded": _name(recorded, recorded.recommended), "recorded_measured": m.pick.name,
                     "now": _name(again, again.recommended), "now_measured": pick.name,
                     "changed": m.pick.name != pick.name, "judged": judged,
                     "x_fp16": round(compared.median_ms / m.fp16().median_ms, 3) if compared is not None else None,
                     "won": None if pairs is None else f"{pairs.won}/{pairs.pairs}",
                     "p": None if pairs is None else float(f"{pairs.p:.2g}"), "reason": pick.reason})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    out = {name: rejudge(folder) for name, folder in RECORDS.items()}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for name, rows in out.items():
        print(f"{name}:")
        print(f"  {'job':<12} {'rounds':>6}  {'recorded pick':<34} {'pick now':<34} judged engine: x FP16, pairs won, p")
        for r in rows:
            mark = "*" if r["changed"] else " "
            tail = f"{r['x_fp16']}, {r['won']}, p={r['p']}" if r["won"] else "-"
            print(f"{mark} {r['job']:<12} {r['rounds']:>6}  {r['recorded_measured'][:34]:<34} "
                  f"{r['now_measured'][:34]:<34} {tail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
