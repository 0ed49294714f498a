"""``trtwidgets calibrate`` end to end on the bundled model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trtwidgets import demo
from trtwidgets.cli import main
from trtwidgets.core.calibration.cache import read_cache
from trtwidgets.core.calibration.ranges import METHODS
from trtwidgets.core.calibration.stats import load_stats


def test_json_report_cache_and_stats(tmp_path, capsys, cls_model_path):
    cache, stats = tmp_path / "cls.cache", tmp_path / "cls.npz"
    rc = main(["calibrate", str(cls_model_path), "--data", "demo", "--method", "max", "--cache", str(cache),
               "--stats", str(stats), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == 32 and out["seconds"] > 0
    x = out["tensors"]["x"]
    assert set(x["amax"]) == set(METHODS) and x["amax"]["max"] == pytest.approx(1.0, abs=0.01)
    assert set(x["sqnr_db"]) == set(METHODS) and set(x["clipped"]) == set(METHODS)
    c = read_cache(cache)
    assert c.header == "TRT-8600-MinMaxCalibration"
    assert set(c.amax) == set(out["tensors"])
    for name, t in out["tensors"].items():
        assert c.amax[name] == pytest.approx(t["amax"]["max"], rel=1e-6)
    assert load_stats(stats).samples == 32


def test_npy_folder_with_shape_and_adapt(tmp_path, capsys, cls_model_path):
    data = tmp_path / "data"
    data.mkdir()
    for i, feed in enumerate(demo.sample_inputs(1)[:3]):
        np.save(data / f"{i}.npy", feed["x"][:, :, :40, :150])
    rc = main(["calibrate", str(cls_model_path), "--data", str(data), "--shape", "x:1x3x48x192", "--adapt", "x:pad",
               "--cache", str(tmp_path / "c.cache"), "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert text.startswith("3 samples") and "cache (entropy)" in text
    assert read_cache(tmp_path / "c.cache").algorithm == "EntropyCalibration2"
    rc = main(["calibrate", str(cls_model_path), "--data", str(data), "--shape", "x:1x3x48x192", "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "opt shape 1x3x48x192" in err and "adapt" in err


@pytest.mark.parametrize("args,message", [
    (["--data", "{tmp}/missing"], "No calibration data"),
    (["--data", "demo", "--shape", "x=1x3"], "is not INPUT:DIMS"),
    (["--data", "demo", "--adapt", "x:stretch"], "is not INPUT:MODE"),
    (["--data", "{tmp}"], "holds no"),
    (["--data", "demo", "--shape", "x:1x3x48"], "has 3 dims (1x3x48); the input has 4"),
    (["--data", "demo", "--shape", "y:1x3x48x192"], "which the model does not have"),
])
def test_bad_input_exits_2_with_an_explanation(tmp_path, capsys, cls_model_path, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["calibrate", str(cls_model_path), *args, "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_resume_adds_to_earlier_statistics(tmp_path, capsys, cls_model_path):
    first = tmp_path / "first.npz"
    assert main(["calibrate", str(cls_model_path), "--data", "demo", "--max-samples", "8", "--stats", str(first),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples"] == 8
    assert main(["calibrate", str(cls_model_path), "--data", "demo", "--resume", str(first), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples"] == 40


PREPROCESS = {"input": "x", "resize": [48, 192], "layout": "NCHW", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}


@pytest.fixture()
def image_folder(tmp_path):
    import shutil

    import skimage

    folder = tmp_path / "images"
    folder.mkdir()
    for name in ("astronaut.png", "coffee.png", "chelsea.png"):
        shutil.copy(Path(skimage.data_dir) / name, folder / name)
    return folder


def test_image_folder_with_preprocess_matches_the_python_api(tmp_path, capsys, cls_model_path, image_folder):
    from trtwidgets.core.calibration.data import spec_for
    from trtwidgets.core.calibration.collect import collect_stats

    rc = main(["calibrate", str(cls_model_path), "--data", str(image_folder), "--shape", "x:1x3x48x192", "--json",
               "--preprocess", json.dumps(PREPROCESS)])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["samples"] == 3
    want = collect_stats(cls_model_path, spec_for(str(image_folder), preprocessing=PREPROCESS), progress=False,
                         opt_shapes={"x": [1, 3, 48, 192]})
    assert doc["tensors"]["x"]["max"] == pytest.approx(want.tensors["x"].max)
    # From a file too.
    cfg = tmp_path / "pre.json"
    cfg.write_text(json.dumps(PREPROCESS))
    assert main(["calibrate", str(cls_model_path), "--data", str(image_folder), "--json", "--preprocess", str(cfg)]) == 0
    assert json.loads(capsys.readouterr().out)["samples"] == 3


@pytest.mark.parametrize("value, message", [
    (None, "--preprocess"),                       # an image folder without it: the CLI way is named
    ("{'input': 'x'}", "not valid JSON"),         # Python syntax is not JSON (and is never evaluated)
    ("[1, 2]", "not a JSON object"),
    ("nope.json", "neither a JSON object nor a file"),
])
def test_bad_preprocess_exits_2(capsys, cls_model_path, image_folder, value, message):
    args = ["calibrate", str(cls_model_path), "--data", str(image_folder)]
    if value is not None:
        args += ["--preprocess", value]
    assert main(args) == 2
    assert message in capsys.readouterr().err
