"""Calibration data sources, validation and adaptation to the opt shape."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.core.calib_models import conv_relu_model, two_input_model
from trtwidgets.core.calibration.data import CalibrationDataSpec, iter_feeds, spec_for
from trtwidgets.core.calibration.shape_adapt import adapt_array, describe_adaptation
from trtwidgets.core.common.errors import CalibrationDataError
from trtwidgets.core.model.load import summarize


@pytest.fixture(scope="module")
def conv_summary():
    return summarize(conv_relu_model())


def test_spec_round_trips_through_json():
    spec = CalibrationDataSpec(kind="image_dir", path="/data/crops", batch_size=8, max_samples=100,
                               preprocessing={"input": "x", "resize": [48, 192], "layout": "NCHW", "mean": [0.5] * 3,
                                              "std": [0.5] * 3, "dtype": "float32"},
                               adapt={"x": "resize"}, opt_shapes={"x": [8, 3, 48, 192]})
    again = CalibrationDataSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    with pytest.raises(CalibrationDataError, match="Unknown calibration data settings: colour"):
        CalibrationDataSpec.from_dict({**spec.to_dict(), "colour": 1})
    with pytest.raises(CalibrationDataError, match="declared preprocessing"):
        CalibrationDataSpec(kind="image_dir", path="/data")
    with pytest.raises(CalibrationDataError, match="Unknown adaptation 'stretch'"):
        CalibrationDataSpec(adapt={"x": "stretch"})


def test_npy_and_npz_folder_is_rebatched_in_file_order(tmp_path, conv_summary):
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=(n, 3, 8, 8)).astype(np.float32) for n in (1, 3, 2)]
    np.save(tmp_path / "a.npy", arrays[0])
    np.savez(tmp_path / "b.npz", x=arrays[1])
    np.savez(tmp_path / "c.npz", arrays[2])  # unnamed array feeds the only input
    (tmp_path / "notes.txt").write_text("ignored")
    feeds = list(iter_feeds(str(tmp_path), conv_summary, batch_size=4))
    assert [f["x"].shape[0] for f in feeds] == [4, 2]
    np.testing.assert_array_equal(np.concatenate([f["x"] for f in feeds]), np.concatenate(arrays))
    assert sum(f["x"].shape[0] for f in iter_feeds(str(tmp_path), conv_summary, max_samples=5)) == 5


def test_pickled_arrays_are_refused(tmp_path, conv_summary):
    np.save(tmp_path / "evil.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CalibrationDataError, match="never unpickled"):
        list(iter_feeds(str(tmp_path), conv_summary))


def test_empty_sources_are_errors(tmp_path, conv_summary):
    with pytest.raises(CalibrationDataError, match="holds no"):
        list(iter_feeds(CalibrationDataSpec(kind="npy_dir", path=str(tmp_path)), conv_summary))
    with pytest.raises(CalibrationDataError, match="empty"):
        list(iter_feeds([], conv_summary))
    with pytest.raises(CalibrationDataError, match="does not exist"):
        list(iter_feeds(str(tmp_path / "missing"), conv_summary))


def test_validation_names_input_and_expected_and_found(conv_summary):
    x = np.zeros((1, 3, 8, 8), np.float32)
    with pytest.raises(CalibrationDataError) as e:
        list(iter_feeds([{"x": x.astype(np.float64)}], conv_summary))
    assert "'x'" in e.value.what and "float32" in e.value.what and "float64" in e.value.what
    with pytest.raises(CalibrationDataError) as e:
        list(iter_feeds([{"x": x[0]}], conv_summary))
    assert "expected rank 4" in e.value.what and "found rank 3" in e.value.what and "batch axis" in e.value.fix
    with pytest.raises(CalibrationDataError) as e:
        list(iter_feeds([{"x": np.zeros((1, 4, 8, 8), np.float32)}], conv_summary))
    assert "expected shape Nx3xHxW" in e.value.what and "1x4x8x8" in e.value.what
    with pytest.raises(CalibrationDataError, match="Missing: x"):
        list(iter_feeds([{"image": x}], conv_summary))


def test_multi_input_npz_and_npy_ambiguity(tmp_path):
    summary = summarize(two_input_model())
    np.savez(tmp_path / "s0.npz", a=np.ones((1, 2), np.float32), b=np.ones((1, 2), np.float32), c=np.ones((1, 2), np.float32))
    assert len(list(iter_feeds(str(tmp_path), summary))) == 1
    np.save(tmp_path / "s1.npy", np.ones((1, 2), np.float32))
    with pytest.raises(CalibrationDataError, match="model has 3 inputs"):
        list(iter_feeds(str(tmp_path), summary))


def test_image_folder_with_declared_preprocessing(tmp_path, conv_summary):
    from PIL import Image

    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "0.png")
    Image.fromarray(pixels[::-1]).save(tmp_path / "1.png")
    spec = CalibrationDataSpec(kind="image_dir", path=str(tmp_path),
                               preprocessing={"input": "x", "layout": "NCHW", "mean": [0.5] * 3, "std": [0.5] * 3})
    feeds = list(iter_feeds(spec, conv_summary))
    assert [f["x"].shape for f in feeds] == [(1, 3, 20, 30)] * 2
    expected = (pixels.astype(np.float32) / 255 - 0.5) / 0.5
    np.testing.assert_allclose(feeds[0]["x"][0], expected.transpose(2, 0, 1), atol=1e-6)
    resized = list(iter_feeds(spec.replace(preprocessing={**spec.preprocessing, "resize": [10, 15]}), conv_summary))
    assert resized[0]["x"].shape == (1, 3, 10, 15)
    assert spec_for(str(tmp_path), preprocessing=spec.preprocessing).kind == "image_dir"
    with pytest.raises(CalibrationDataError, match="declared preprocessing"):
        spec_for(str(tmp_path))


def test_adaptation_to_opt_shape(conv_summary):
    x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
    padded = adapt_array(x, [2, 3, 6, 8], "pad", "x")
    assert padded.shape == (2, 3, 6, 8) and padded[:, :, 4:].sum() == 0 and padded[:, :, :, 6:].sum() == 0
    np.testing.assert_array_equal(padded[:, :, :4, :6], x)
    cut = adapt_array(x, [2, 3, 2, 3], "truncate", "x")
    np.testing.assert_array_equal(cut, x[:, :, :2, :3])
    resized = adapt_array(x, [2, 3, 8, 12], "resize", "x")
    assert resized.shape == (2, 3, 8, 12) and resized.min() >= x.min() and resized.max() <= x.max()
    np.testing.assert_allclose(adapt_array(np.ones((1, 3, 4, 6), np.float32), [1, 3, 7, 5], "resize"), 1.0)
    with pytest.raises(CalibrationDataError, match="padding cannot shrink"):
        adapt_array(x, [2, 3, 2, 6], "pad", "x")
    feeds = list(iter_feeds([{"x": x}], conv_summary, opt_shapes={"x": [1, 3, 6, 8]}, adapt={"x": "pad"}))
    assert [f["x"].shape for f in feeds] == [(1, 3, 6, 8)] * 2
    with pytest.raises(CalibrationDataError, match="differs from the calibration opt shape"):
        list(iter_feeds([{"x": x}], conv_summary, opt_shapes={"x": [1, 3, 6, 8]}))


def test_describe_adaptation_says_what_tensorrt_sees(conv_summary):
    text = describe_adaptation(conv_summary, {"x": [1, 3, 48, 192]}, {"x": "pad"}, {"x": (1, 3, 32, 100)})
    assert "opt shape 1x3x48x192" in text and "zero-padded" in text and "dim 2: 32 -> 48" in text
    text = describe_adaptation(conv_summary, {"x": [1, 3, 48, 192]}, {}, {"x": (1, 3, 32, 100)})
    assert "Choose pad, truncate or resize" in text
    assert "already have that shape" in describe_adaptation(conv_summary, {"x": [1, 3, 8, 8]}, {}, {"x": (1, 3, 8, 8)})
    assert "has no opt shape" in describe_adaptation(conv_summary, {})
