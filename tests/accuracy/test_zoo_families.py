"""benchmarks/zoo_families.py's CPU parts: the families' user metrics (imported by name) and sample folders."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from trtwidgets.core.accuracy.task_metrics import parse_task_metric

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    sys.path.insert(0, str(BENCH))
    try:
        import zoo_families

        yield zoo_families
    finally:
        sys.path.remove(str(BENCH))


def test_at_least_eight_families_each_with_a_metric(families):
    assert len(families.FAMILIES) >= 8
    for name, fam in families.FAMILIES.items():
        assert callable(fam["model"]) and callable(fam["data"]) and fam["metric"], name
    assert {"yolo", "vit", "vad", "captcha", "det"} <= set(families.FAMILIES)


def test_time_major_ctc_metric_by_module_name(families):
    from trtwidgets.core.model.batch_axis import BatchAxes
    from trtwidgets.core.model.sample_batches import gather_outputs

    rng = np.random.default_rng(0)
    runs = [{"logits": rng.normal(size=(20, 3, 37)).astype(np.float32)} for _ in range(2)]  # [T, N, C] per run
    ref = gather_outputs(runs, BatchAxes({"image": 0}, {"logits": 1}))  # batch first: [6, 20, 37], blank = 36
    assert ref["logits"].shape == (6, 20, 37)
    metric = parse_task_metric("zoo_families:ctc_last_blank_agreement", ref, own=True)  # as --metric imports it
    assert metric.reference_value == 1.0
    worse = ref["logits"].copy()
    worse[:3] = rng.normal(size=(3, 20, 37))  # three samples read differently
    assert metric({"logits": worse}) == pytest.approx(0.5)


def test_ctc_and_vad_metrics(families):
    probs = np.zeros((2, 5, 4), np.float32)
    probs[0, :, 1] = 1  # "1"
    probs[1, [0, 2], 2] = 1  # "2 2" with a blank between
    probs[1, [1, 3, 4], 0] = 1
    assert families._ctc(probs.argmax(-1), 0) == [(1,), (2, 2)]
    assert families.ctc_agreement({"o": probs}, {"o": probs}) == 1.0
    ref = {"output": np.array([[0.9], [0.1], [0.6], [0.4]])}
    assert families.vad_agreement(ref, {"output": np.array([[0.8], [0.2], [0.4], [0.4]])}) == 0.75


def test_samples_are_cut_along_each_inputs_batch_axis(families, tmp_path):
    feeds = {"input": np.arange(6, dtype=np.float32).reshape(3, 2), "state": np.zeros((2, 3, 4)),
             "sr": np.array(16000)}
    folder = families.write_samples(tmp_path / "s", feeds, {"state": 1})
    files = sorted(folder.glob("*.npz"))
    assert len(files) == 3
    with np.load(files[2]) as f:
        assert f["input"].shape == (1, 2) and f["input"][0, 0] == 4
        assert f["state"].shape == (2, 1, 4) and f["sr"].shape == ()


def test_the_peer_summary_is_made_from_the_zoo_runs_records(families):
    """README's table of the zoo beside ModelOpt: every job of the committed run, each cell from its record."""
    import json

    run = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "peer" / "zoo_run"
    rows = {line.split(" | ")[0].lstrip("| "): line for line in families.peer_summary(run).splitlines()[2:]}
    jobs = [json.loads(p.read_text()) for p in sorted(run.glob("*-b*.json"))]
    assert set(rows) == {j["job"] for j in jobs if "peers" in j}
    for job in jobs:
        if job.get("status") != "measured":
            assert "not measured" in rows[job["job"]]
            continue
        ms = {m["name"]: m for m in job["plan"]["measured"]["measurements"]}
        fp16, pick = ms["fp16"], ms[job["plan"]["measured"]["pick"]["name"]]
        assert f"{fp16['median_ms']:.4f}" in rows[job["job"]]
        assert f"{pick['name']}: {pick['median_ms'] / fp16['median_ms']:.3f}x" in rows[job["job"]]
    assert "the 8.6 parser refuses its FP16 scales" in rows["resnet-b32"]
