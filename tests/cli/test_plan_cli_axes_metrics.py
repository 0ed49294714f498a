"""``trtwidgets plan`` on models whose batch is not axis 0, with task metrics, and its held-back data."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import onnx

from tests.core.plan.axis_models import (detector_feeds, frames_feeds, frames_model, packed_detector_model,
                                         time_major_feeds, time_major_model)
from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.cli import main


def _folder(path, samples):
    path.mkdir()
    for i, f in enumerate(samples):
        if len(f) == 1:
            np.save(path / f"s{i:03d}.npy", next(iter(f.values())))
        else:
            np.savez(path / f"s{i:03d}.npz", **f)
    return path


def _plan(tmp_path, model, samples, *extra):
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    out = tmp_path / "plan"
    code = main(["plan", str(path), "--data", str(_folder(tmp_path / "data", samples)), "--out", str(out),
                 "--no-progress", "--trt-version", "10.16", *extra])
    doc = json.loads((out / "plan.json").read_text()) if (out / "plan.json").exists() else None
    return code, doc


def test_plan_runs_on_frames_without_a_batch_axis(tmp_path, capsys):
    code, doc = _plan(tmp_path, frames_model(), frames_feeds(8))
    text = capsys.readouterr().out
    assert code == 0, text
    assert doc["batch_axes"]["inputs"] == {"x": None} and "one at a time" in text
    assert "accuracy of the pick: worst channel group y[all]" in text and "held back: 2 samples (random split" in text


def test_plan_reads_a_time_major_output_batch_first_for_the_metric(tmp_path, capsys):
    code, doc = _plan(tmp_path, time_major_model(named=False), time_major_feeds(12), "--metric", "top1-agreement")
    assert code == 0, capsys.readouterr().out
    assert doc["batch_axes"]["outputs"] == {"logits": 1}
    assert doc["target"]["metric"] == "top-1 agreement (logits)"


def test_batch_axis_from_the_command_line(tmp_path, capsys):
    code, doc = _plan(tmp_path, conv_stack(), feeds(8), "--batch-axis", "none")
    assert code == 0 and doc["batch_axes"]["inputs"] == {"x": None}
    assert doc["batch_axes"]["reasons"]["x"] == "--batch-axis"
    capsys.readouterr()
    code, _ = _plan(tmp_path / "bad", conv_stack(), feeds(4), "--batch-axis", "x:two") if (tmp_path / "bad").mkdir() \
        is None else (None, None)
    assert code == 2 and "not an axis" in capsys.readouterr().err


def test_plan_with_the_detection_metric_and_the_held_back_files(tmp_path, capsys):
    code, doc = _plan(tmp_path, packed_detector_model(), detector_feeds(12), "--metric", "detection", "--seed", "7")
    assert code == 0, capsys.readouterr().out
    assert doc["target"]["metric"] == "detection F1@0.25 (output0)"
    held = doc["held_back"]
    assert held["source"] == "random split" and held["seed"] == 7 and len(held["held_back"]) == 3
    assert all(name.endswith(".npy") for name in held["held_back"])


def test_plan_with_your_own_metric_module(tmp_path, capsys, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "team_metrics.py").write_text(textwrap.dedent("""
        import numpy as np

        def close_enough(reference, candidate):
            return float(np.mean(np.abs(reference["y"] - candidate["y"]) < 0.1))
    """))
    monkeypatch.syspath_prepend(str(lib))
    code, doc = _plan(tmp_path, conv_stack(), feeds(8), "--metric", "team_metrics:close_enough")
    assert code == 0, capsys.readouterr().out
    assert doc["target"]["metric"] == "team_metrics:close_enough"
    code, _ = _plan(tmp_path / "x", conv_stack(), feeds(8), "--metric", "team_metrics:missing") \
        if (tmp_path / "x").mkdir() is None else (None, None)
    assert code == 2 and "has no function 'missing'" in capsys.readouterr().err


def test_top1_labels_follow_the_random_split(tmp_path, capsys):
    model = conv_stack()
    samples = feeds(8)
    # Labels for every sample of --data: the split picks the held-back ones (here: the model's own classes).
    from trtwidgets.core.qdq.validate import run_model

    out, _ = run_model(model, samples)
    labels = np.argmax(out["y"].reshape(8, -1), axis=1)
    np.save(tmp_path / "labels.npy", labels)
    code, doc = _plan(tmp_path, model, samples, "--metric", "top1", "--labels", str(tmp_path / "labels.npy"))
    assert code == 0, capsys.readouterr().out
    assert doc["candidates"][0]["accuracy"]["metric_reference"] == 1.0  # FP32 matches the labels it was given
