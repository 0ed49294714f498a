"""The Calibration from the shell: ``calibrate --out`` -> ``export-qdq --calibration`` / ``plan --calibration`` (issue 30)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.conftest import ROOT
from tests.core.plan.plan_models import conv_stack, feeds
from tests.interrupts import InterruptAfter
from trtwidgets.cli import main
from trtwidgets.core.calibration.calibration import Calibration


def _shell(*argv):
    """``python -m trtwidgets.cli ...`` in a process of its own, as a user types it."""
    return subprocess.run([sys.executable, "-m", "trtwidgets.cli", *map(str, argv)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def _scales(path) -> dict:
    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return {n.input[0]: float(inits[n.input[1]]) for n in model.graph.node
            if n.op_type == "QuantizeLinear" and n.input[1] in inits and inits[n.input[1]].size == 1}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A small conv model and a folder of its samples."""
    root = tmp_path_factory.mktemp("stack")
    onnx.save(conv_stack(), root / "m.onnx")
    (root / "data").mkdir()
    for i, f in enumerate(feeds(16)):
        np.save(root / "data" / f"s{i:03d}.npy", f["x"])
    return root


def test_calibrate_out_then_export_and_plan_from_the_shell(stack, tmp_path):
    import trtwidgets as tw

    model, data, cal_path = stack / "m.onnx", stack / "data", tmp_path / "cal.npz"
    made = _shell("calibrate", model, "--data", data, "--method", "max", "--out", cal_path, "--no-progress")
    assert made.returncode == 0, made.stderr
    assert f"calibration (max) -> {cal_path}" in made.stdout
    cal = Calibration.load(cal_path)
    assert cal.method == "max" and cal.stats.samples == 16 and cal.fingerprint == tw.Calibration.fit(
        cal.stats).fingerprint and cal.fingerprint.inputs[0][0] == "x" and str(data) in cal.data

    # An override chosen by hand on the laptop travels in the file to the export.
    tensor = tw.export_qdq(model, cal).report.activations[1].tensor
    cal.with_override(tensor, 0.5).save(tmp_path / "tuned.npz")
    # The command and the API share one default (the installed TensorRT, else 10 and 11: FP16 scales).
    exported = _shell("export-qdq", model, "--calibration", tmp_path / "tuned.npz", "--out", tmp_path / "q.onnx",
                      "--json")
    assert exported.returncode == 0, exported.stderr
    report = json.loads(exported.stdout)["report"]
    assert report["ranges"] == "max ranges from the calibration, 1 amax overrides"
    scales = _scales(tmp_path / "q.onnx")
    assert scales[tensor] == pytest.approx(0.5 / 127, rel=1e-3)
    # The same scales as the API writes from the same file.
    api = tw.export_qdq(model, tmp_path / "tuned.npz", tmp_path / "api.onnx")
    assert _scales(tmp_path / "api.onnx") == scales and len(api.report.activations) == len(scales)

    planned = _shell("plan", model, "--data", data, "--calibration", tmp_path / "tuned.npz", "--out",
                     tmp_path / "plan", "--no-progress", "--target-cosine", "0.5")
    assert planned.returncode in (0, 1), planned.stderr
    doc = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert doc["ranges"]["statistics"].startswith("the given calibration (max ranges from the calibration")
    assert doc["ranges"]["overrides"] == {tensor: 0.5} and doc["ranges"]["amax"][tensor] == 0.5


def test_export_qdq_method_refits_the_calibration(stack, tmp_path, capsys):
    cal = Calibration.fit(Calibration.load(_calibrated(stack, tmp_path, capsys)).stats, "max")
    rc = main(["export-qdq", str(stack / "m.onnx"), "--calibration", str(tmp_path / "cal.npz"), "--method",
               "percentile", "--percentile", "99.0", "--out", str(tmp_path / "q.onnx"), "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    report = json.loads(out)["report"]
    assert report["ranges"] == "percentile ranges from the calibration (percentile 99)"
    want = cal.refit(method="percentile", percentile=99.0).amax
    assert all(a["amax"] == pytest.approx(want[a["tensor"]]) for a in report["activations"])


def test_the_cache_calibrate_writes_holds_the_calibrations_amax(stack, tmp_path, capsys):
    from trtwidgets.core.calibration.cache import read_cache

    rc = main(["calibrate", str(stack / "m.onnx"), "--data", str(stack / "data"), "--method", "mse", "--out",
               str(tmp_path / "cal.npz"), "--cache", str(tmp_path / "c.cache"), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    cal = Calibration.load(tmp_path / "cal.npz")
    cache = read_cache(tmp_path / "c.cache")
    assert cache.amax.keys() == cal.amax.keys()
    assert all(cache.amax[t] == pytest.approx(v, rel=1e-6) for t, v in cal.amax.items())


def test_an_interrupted_calibration_goes_to_a_partial_file_and_resumes(cls_model_path, tmp_path, capsys,
                                                                      monkeypatch):
    import trtwidgets.core.calibration.data as data_mod

    out = tmp_path / "cal.npz"
    with monkeypatch.context() as m:
        # The edge: the sample source is interrupted after 3 samples; the rest is the real code.
        m.setattr(data_mod, "_raw_samples", lambda *a: ((f"sample {k}", f) for k, f in enumerate(InterruptAfter(3))))
        rc = main(["calibrate", str(cls_model_path), "--data", "demo", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    partial = tmp_path / "cal.partial.npz"
    assert rc == 130 and not out.exists() and f"--resume {partial}" in err and "the partial calibration" in err
    assert Calibration.load(partial).stats.interrupted
    # Continuing from it, over it (a calibration is statistics too).
    rc = main(["calibrate", str(cls_model_path), "--data", "demo", "--max-samples", "4", "--resume", str(partial),
               "--out", str(partial), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert Calibration.load(partial).stats.samples == 3 + 4


def _calibrated(stack, tmp_path, capsys):
    rc = main(["calibrate", str(stack / "m.onnx"), "--data", str(stack / "data"), "--method", "max", "--out",
               str(tmp_path / "cal.npz"), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    capsys.readouterr()
    return tmp_path / "cal.npz"
