"""Labelled orientation crops for the demo classifier (scikit-image's scanned page)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("skimage")

from trtwidgets import demo  # noqa: E402
from trtwidgets.demo.orientation import orientation_crops, text_line_rows  # noqa: E402


def test_text_lines_are_found_on_the_page():
    from skimage import data

    rows = text_line_rows(data.page())
    assert len(rows) >= 5
    assert all(8 <= b - t <= 30 for t, b in rows)


def test_second_half_is_the_first_turned_and_labelled_180():
    images, labels = orientation_crops(6, seed=3)
    assert images.shape == (12, 48, 192, 3) and images.dtype == np.uint8
    np.testing.assert_array_equal(labels, [0] * 6 + [1] * 6)
    np.testing.assert_array_equal(images[6:], images[:6, ::-1, ::-1])


def test_halves_are_reproducible_and_differ():
    a, _ = orientation_crops(4, seed=1, half="left")
    b, _ = orientation_crops(4, seed=1, half="left")
    c, _ = orientation_crops(4, seed=1, half="right")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    with pytest.raises(ValueError):
        orientation_crops(1, half="top")


def test_the_demo_model_reads_the_labels_better_than_chance():
    ort = pytest.importorskip("onnxruntime")
    images, labels = orientation_crops(32, seed=0)
    sess = ort.InferenceSession(str(demo.MODEL_PATH), providers=["CPUExecutionProvider"])
    pred = sess.run(None, {"x": demo.preprocess(images)})[0].argmax(axis=1)
    assert np.mean(pred == labels) > 0.7
