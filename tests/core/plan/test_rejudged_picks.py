"""Issue 44: the zoo's committed measured plans judged again by the paired sign test (``benchmarks/rejudge_picks.py``).

The records keep every engine's rounds in order, so today's rule runs on them without a GPU. Three picks of the
runs beside ModelOpt change, each an INT8 candidate that won FP16's paired rounds while a round's spread exceeded
its gain; the issue-24 run's picks all stand.
"""

from __future__ import annotations

import pytest

from benchmarks.rejudge_picks import RECORDS, main, rejudge

CHANGED = {  # job -> (recorded pick, pick now, pairs won, p)
    "resnet-b1": ("fp16", "#1 INT8 everywhere the rules allow", "9/9", 0.002),
    "yolo-b1": ("fp16", "#2 INT8 where it pays", "13/15", 0.0037),
    "yolo320-b1": ("fp16", "#1 INT8 everywhere the rules allow", "8/9", 0.02),
}


@pytest.fixture(scope="module")
def rows():
    return {name: {r["job"]: r for r in rejudge(folder)} for name, folder in RECORDS.items()}


def test_the_issue_24_runs_picks_all_stand(rows):
    assert len(rows["zoo_gpu"]) >= 9 and not [j for j, r in rows["zoo_gpu"].items() if r["changed"]]


def test_three_picks_beside_modelopt_change_to_int8_that_won_the_paired_rounds(rows):
    changed = {j: r for j, r in rows["zoo_run"].items() if r["changed"]}
    assert set(changed) == set(CHANGED)
    for job, (old, new, won, p) in CHANGED.items():
        r = changed[job]
        assert (r["recorded_measured"], r["won"], r["p"]) == (old, won, p), r
        assert r["now_measured"].startswith(new) and r["x_fp16"] < 1.0
        assert f"faster in {won.replace('/', ' of ')} paired rounds" in r["reason"]


def test_the_script_prints_each_job_old_and_new(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "zoo_gpu:" in out and "zoo_run:" in out
    assert sum(line.startswith("*") for line in out.splitlines()) == len(CHANGED)
