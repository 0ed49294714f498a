"""``scripts/gpu_zoo_measure.py``'s job queue on the CPU: a job either runs to its record or does not start.

The GPU machine's sessions end at a fixed time. ``--deadline`` stops the workers, losing the job in progress
(det b1 on 2026-11-27, after 12 minutes of builds); ``--last-start`` stops only the claiming of new jobs, so every
job started finishes and writes its record. Here no GPU is needed: a job whose plan folder is missing fails at
once and still writes its record, which is what the queue is judged by.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu_zoo_measure.py"


def _run(tmp_path, *extra):
    out = tmp_path / "out"
    cmd = [sys.executable, str(SCRIPT), "--plans", str(tmp_path / "no_plans"), "--models", str(tmp_path),
           "--out", str(out), "--work", str(tmp_path / "work"), "--cache-dir", str(tmp_path / "cache"),
           "--jobs", "cls-b1,cls-b32", "--workers", "1", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}, done.stdout


def test_without_a_last_start_every_job_is_taken_and_recorded(tmp_path):
    records, said = _run(tmp_path)
    assert set(records) == {"cls-b1", "cls-b32"}
    assert all(r["status"] == "failed" and "no_plans" in r["error"] + r.get("where", "") for r in records.values())
    assert "no new job" not in said


def test_after_the_last_start_no_job_is_claimed_and_none_is_cut(tmp_path):
    records, said = _run(tmp_path, "--last-start", "0.001")  # passed before the worker process is up
    assert records == {}
    assert "no new job after --last-start: cls-b1 left" in said
