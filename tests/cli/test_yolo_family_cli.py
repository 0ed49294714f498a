"""Issue 21 end to end: a YOLOv8-layout model as shipped (every dim dynamic, anchors from Range) through the CLI."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.core.qdq import dynamic_models as dm
from trtwidgets.cli import main


@pytest.fixture(scope="module")
def yolo(tmp_path_factory):
    from trtwidgets.core.calibration.collect import collect_stats
    from trtwidgets.core.calibration.stats import save_stats

    root = tmp_path_factory.mktemp("tiny_yolo")
    path = root / "tiny_yolo.onnx"
    onnx.save(dm.tiny_yolo(), str(path))
    rng = np.random.default_rng(0)
    data = root / "data"
    data.mkdir()
    for i in range(8):
        np.save(data / f"s{i}.npy", rng.random((1, 3, 64, 64)).astype(np.float32))
    stats = collect_stats(str(path), [{"images": rng.random((1, 3, 64, 64)).astype(np.float32)} for _ in range(4)],
                          progress=False)
    return path, save_stats(stats, root / "stats.npz"), data


def _run(model_path, feeds):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    return [sess.run(None, f)[0] for f in feeds]


@pytest.mark.parametrize("version", ["8.6", "10.16", "11.4"])
def test_export_qdq_writes_a_model_that_runs_at_any_size(capsys, tmp_path, yolo, version):
    path, stats, _ = yolo
    out = tmp_path / f"yolo_{version}.qdq.onnx"
    code = main(["export-qdq", str(path), "--stats", str(stats), "--trt-version", version, "--out", str(out)])
    text, err = capsys.readouterr()
    assert code == 0 and f"wrote {out}" in text, err
    # The DFL conv reads a Softmax: float (rule 10); the Range chain is FP32 in an FP16 float part.
    assert "dfl_conv" in text
    rng = np.random.default_rng(5)
    feeds = [{"images": rng.random(s).astype(np.float32)} for s in [(1, 3, 64, 64), (2, 3, 96, 128)]]
    got, ref = _run(out, feeds), _run(path, feeds)
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        cos = float(np.dot(g.ravel(), r.ravel()) / (np.linalg.norm(g) * np.linalg.norm(r)))
        assert cos > 0.99


def test_export_qdq_with_data_checks_the_fp16_float_part(capsys, tmp_path, yolo):
    path, stats, data = yolo
    out = tmp_path / "yolo.qdq.onnx"
    code = main(["export-qdq", str(path), "--stats", str(stats), "--trt-version", "10.16", "--out", str(out),
                 "--data", str(data), "--samples", "4"])
    text, err = capsys.readouterr()
    assert code in (0, 1) and f"wrote {out}" in text, err


@pytest.mark.parametrize("version", ["8.6", "10.16", "11.4"])
def test_plan_succeeds(capsys, tmp_path, yolo, version):
    path, _, data = yolo
    code = main(["plan", str(path), "--data", str(data), "--trt-version", version, "--out", str(tmp_path / "plan"),
                 "--no-progress"])
    text, err = capsys.readouterr()
    assert code == 0, err
    assert (tmp_path / "plan" / "plan.json").is_file()
