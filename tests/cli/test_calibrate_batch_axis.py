"""``trtwidgets calibrate --data DIR`` on a model whose state is batched on axis 1 and whose sample rate is a scalar."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from tests.core.calibration.test_batch_axes_data import _sample, _vad_like
from trtwidgets.cli import main
from trtwidgets.core.calibration.stats import load_stats


@pytest.fixture()
def vad_path(tmp_path):
    path = tmp_path / "vad_like.onnx"
    onnx.save(_vad_like(), str(path))
    return str(path)


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_calibrate_a_folder_of_per_sample_npz(tmp_path, capsys, vad_path):
    rng = np.random.default_rng(0)
    data = tmp_path / "calib"
    data.mkdir()
    for i in range(4):
        np.savez(data / f"{i:04d}.npz", **_sample(rng))
    stats = tmp_path / "stats.npz"
    rc, out, err = _run(capsys, "calibrate", vad_path, "--data", data, "--stats", stats, "--no-progress", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["samples"] == 4
    assert set(doc["tensors"]) == {"x", "state", "xw", "s2", "stateN", "h", "srf", "scale", "out"}
    assert load_stats(stats).input_shapes == {"x": (1, 4), "state": (2, 1, 8), "sr": ()}


def test_a_multi_sample_file_and_the_batch_axis_option(tmp_path, capsys, vad_path):
    rng = np.random.default_rng(1)
    data = tmp_path / "calib"
    data.mkdir()
    np.savez(data / "three.npz", **_sample(rng, 3))
    common = ["calibrate", vad_path, "--data", data, "--no-progress", "--json"]
    rc, out, err = _run(capsys, *common)
    assert rc == 0, err
    assert json.loads(out)["samples"] == 3
    rc, out, err = _run(capsys, *common, "--batch-axis", "x:0,state:1,sr:none", "--batch-size", "2")
    assert rc == 0, err
    assert json.loads(out)["samples"] == 3
    rc, out, err = _run(capsys, *common, "--batch-axis", "none")
    assert rc == 0, err
    assert json.loads(out)["samples"] == 1
    rc, out, err = _run(capsys, *common, "--batch-axis", "x:0,state:0")
    assert rc == 2 and "different numbers of samples" in err and "--batch-axis" in err
    rc, out, err = _run(capsys, *common, "--batch-axis", "state:x")
    assert rc == 2 and "is not an axis" in err
