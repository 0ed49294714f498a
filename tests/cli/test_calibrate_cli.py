"""``trtwidgets calibrate`` end to end on the bundled model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.interrupts import InterruptAfter
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
    assert out["samples"] == len(demo.calibration_inputs()) and out["seconds"] > 0
    x = out["tensors"]["x"]
    assert set(x["amax"]) == set(METHODS) and x["amax"]["max"] == pytest.approx(1.0, abs=0.01)
    assert set(x["sqnr_db"]) == set(METHODS) and set(x["clipped"]) == set(METHODS)
    c = read_cache(cache)
    assert c.header == "TRT-8600-MinMaxCalibration"
    assert set(c.amax) == set(out["tensors"])
    for name, t in out["tensors"].items():
        assert c.amax[name] == pytest.approx(t["amax"]["max"], rel=1e-6)
    assert load_stats(stats).samples == len(demo.calibration_inputs())


def test_npy_folder_with_shape_and_adapt(tmp_path, capsys, cls_model_path):
    data = tmp_path / "data"
    data.mkdir()
    for i, feed in enumerate(demo.sample_inputs(1)[:3]):
        np.save(data / f"{i}.npy", feed["x"][:, :, :40, :150])
    rc = main(["calibrate", str(cls_model_path), "--data", str(data), "--shape", "x:1x3x48x192", "--adapt", "x:pad",
               "--cache", str(tmp_path / "c.cache"), "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert text.startswith("3 samples") and "cache (auto (" in text  # auto, the default: each tensor's method
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
    assert json.loads(capsys.readouterr().out)["samples"] == 8 + len(demo.calibration_inputs())


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


# --------------------------------------------------------------------------- issue 16: hostile input

def _in_thread(fn, seconds: float = 60.0):
    """``fn()`` on a daemon thread; fails (instead of hanging the suite) if it has not returned in ``seconds``."""
    import threading

    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s (a loop that never ends?)"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture()
def npy_folder(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for i, feed in enumerate(demo.sample_inputs(1)[:2]):
        np.save(data / f"{i}.npy", feed["x"])
    return data


@pytest.mark.parametrize("shape", ["x:0x3x48x192", "x:1x0x48x192", "x:1x3x48x0"])
def test_a_zero_dim_is_refused_not_an_endless_loop(capsys, cls_model_path, npy_folder, shape):
    # Issue 16: --shape x:0x3x48x192 spun at 100% CPU (a batch of 0 is never full).
    rc = _in_thread(lambda: main(["calibrate", str(cls_model_path), "--data", str(npy_folder), "--shape", shape,
                                  "--no-progress"]))
    err = capsys.readouterr().err
    assert rc == 2 and "below 1" in err and "Fix:" in err and "Traceback" not in err


@pytest.mark.parametrize("option", ["--batch-size", "--max-samples"])
def test_a_zero_batch_size_or_sample_count_is_refused(capsys, cls_model_path, npy_folder, option):
    rc = _in_thread(lambda: main(["calibrate", str(cls_model_path), "--data", str(npy_folder), option, "0",
                                  "--no-progress"]))
    assert rc == 2 and "is not positive" in capsys.readouterr().err


def test_an_all_nan_sample_is_refused_naming_the_file(tmp_path, capsys, cls_model_path):
    # Issue 16: exit 0, a warning per tensor, and a cache of 18 of 253 tensors.
    data = tmp_path / "nan"
    data.mkdir()
    np.save(data / "s0.npy", np.full((1, 3, 48, 192), np.nan, np.float32))
    rc = main(["calibrate", str(cls_model_path), "--data", str(data), "--cache", str(tmp_path / "o.cache"),
               "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and str(data / "s0.npy") in err and "NaN" in err and "Fix:" in err
    assert not (tmp_path / "o.cache").exists()


def test_nan_made_inside_the_model_is_one_line_and_a_partial_cache_is_refused(tmp_path, capsys):
    from tests.core.calib_models import nan_model, save

    model = save(nan_model(), tmp_path / "nan.onnx")
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "a.npy", np.full((2, 4), -1.0, np.float32))  # Sqrt(-1): every value of 's' is NaN
    cache, stats = tmp_path / "o.cache", tmp_path / "o.npz"
    rc = main(["calibrate", model, "--data", str(data), "--cache", str(cache), "--stats", str(stats), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "No cache written" in err and "1 of 5 tensors have no range (s)" in err
    assert not cache.exists() and load_stats(stats).samples == 2  # the statistics are kept
    np.save(data / "a.npy", np.array([[-1.0, 0.0, 2.0, 4.0]], np.float32))  # some NaN, some Inf, all have a range
    rc = main(["calibrate", model, "--data", str(data), "--cache", str(cache), "--no-progress"])
    err = capsys.readouterr().err
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning")]
    assert rc == 0 and cache.exists()
    assert warnings == ["warning: 2 of 5 tensors had NaN/Inf values, left out of their ranges (s, r); "
                        "--json gives the counts per tensor"]


def test_a_malformed_cache_line_stops_export_qdq_before_it_writes(tmp_path, capsys, cls_model_path):
    # Issue 16: the line was skipped and a Q/DQ model with nothing quantized was written (exit 1).
    cache = tmp_path / "bad.cache"
    cache.write_text("TRT-8600-EntropyCalibration2\nx: 3c01f09e\nfoo: zzzz\n")
    out = tmp_path / "q.onnx"
    rc = main(["export-qdq", str(cls_model_path), "--cache", str(cache), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and f"{cache}, line 3: 'foo: zzzz'" in err and "Fix:" in err
    assert not out.exists()


def test_interrupting_calibration_keeps_and_says_what_it_finished(tmp_path, capsys, cls_model_path, monkeypatch):
    import trtwidgets.core.calibration.data as data_mod

    stats = tmp_path / "s.npz"
    real = data_mod.spec_for
    # The edge: the sample source is interrupted after 3 samples; everything from there on is the real code.
    monkeypatch.setattr(data_mod, "_raw_samples",
                        lambda source, names, spec, *rows_left: ((f"sample {k}", f) for k, f in enumerate(InterruptAfter(3))))
    assert data_mod.spec_for is real
    rc = main(["calibrate", str(cls_model_path), "--data", "demo", "--stats", str(stats), "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 130 and "3 samples" in out and "interrupted: the statistics of the 3 samples done so far" in out
    # The write rule: a partial result goes under its own name, never over --stats.
    partial = tmp_path / "s.partial.npz"
    assert not stats.exists() and f"--resume {partial}" in err
    saved = load_stats(partial)
    assert saved.samples == 3 and saved.interrupted
