"""Fuzz the sample loaders: .npy/.npz and image files (random bytes, mutations of real ones) and the
image preprocessing settings; what loads must pass the feed check or be refused by it, never crash."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trtwidgets import demo
from trtwidgets.core.calibration.data import CalibrationDataSpec
from trtwidgets.core.calibration.sources import load_array_file, load_image

from .fuzzing import fuzz_settings, json_mutated, mutated, only_user_errors

_DIR = Path(tempfile.mkdtemp(prefix="trtwidgets-fuzz-samples-"))
CROP = demo.sample_images()[0]  # a real 48x192 RGB crop


def _bytes(save) -> bytes:
    buf = io.BytesIO()
    save(buf)
    return buf.getvalue()


NPY = _bytes(lambda b: np.save(b, demo.preprocess(CROP)[:, :, :8, :8]))
NPZ = _bytes(lambda b: np.savez(b, x=demo.preprocess(CROP)[:, :, :8, :8]))
PNG = _bytes(lambda b: __import__("PIL.Image", fromlist=["Image"]).fromarray(CROP[:8, :16]).save(b, format="PNG"))
PRE = {"input": "x", "resize": [8, 16], "layout": "NCHW", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}


def _array_file(suffix: str, data: bytes):
    path = _DIR / f"sample{suffix}"
    path.write_bytes(data)
    result = only_user_errors(load_array_file, path, ["x"])
    assert isinstance(result, dict) or str(path) in result.what
    return result


@fuzz_settings(300)
@given(st.binary(max_size=300), st.sampled_from([".npy", ".npz"]))
def test_random_bytes_as_arrays(data, suffix):
    _array_file(suffix, data)


@pytest.mark.slow
@fuzz_settings(600)
@given(mutated(NPY))
def test_mutations_of_a_real_npy(data):
    _array_file(".npy", data)


@pytest.mark.slow
@fuzz_settings(700)
@given(mutated(NPZ))
def test_mutations_of_a_real_npz(data):
    _array_file(".npz", data)


@pytest.mark.slow
@fuzz_settings(500)
@given(mutated(PNG))
def test_mutations_of_a_real_png(data):
    path = _DIR / "sample.png"
    path.write_bytes(data)
    result = only_user_errors(load_image, path, PRE)
    assert isinstance(result, np.ndarray) or str(path) in result.what


@fuzz_settings(600)
@given(json_mutated(PRE))
@example(dict(PRE, mean=[1e308, 0.0, 0.0]))  # found: float32 overflow warned (an error under pytest)
@example(dict(PRE, std=[0, 1, 1]))  # a division by zero made every pixel Inf
@example(dict(PRE, resize=[0, 16]))
@example(dict(PRE, scale="x"))  # was a ValueError from np.float32("x")
def test_preprocessing_settings(pre):
    """A spec takes the settings or refuses them; settings it takes can be applied to a real image."""
    spec = only_user_errors(CalibrationDataSpec, kind="image_dir", path=str(_DIR), preprocessing=pre)
    if isinstance(spec, CalibrationDataSpec):
        path = _DIR / "ok.png"
        path.write_bytes(PNG)
        only_user_errors(load_image, path, spec.preprocessing)


@fuzz_settings(500)
@given(json_mutated(CalibrationDataSpec(kind="image_dir", path="/data", batch_size=2, max_samples=3, preprocessing=PRE,
                                        adapt={"x": "pad"}, opt_shapes={"x": [1, 3, 8, 16]}).to_dict()))
@example({"kind": "npy_dir", "path": "/d", "batch_size": "x"})  # was a ValueError from int("x")
@example({"kind": "demo", "opt_shapes": {"x": [0, 3, 48, 192]}})  # a zero dim: the endless loop of issue 16
@example({"kind": "demo", "opt_shapes": [1, 2]})
def test_calibration_data_settings(d):
    only_user_errors(CalibrationDataSpec.from_dict, json.loads(json.dumps(d)))
