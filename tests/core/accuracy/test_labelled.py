"""score_classifier and mean_tensor_sqnr."""

from __future__ import annotations

import numpy as np
import pytest

from trtwidgets.core.accuracy.labelled import mean_tensor_sqnr, score_classifier
from trtwidgets.core.calibration.histogram import HistogramAccumulator
from trtwidgets.core.calibration.stats import ActivationStats
from trtwidgets.core.common.errors import UserError


def test_scores_against_labels_and_reference():
    ref = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    cand = np.array([[0.8, 0.2], [0.3, 0.7], [0.4, 0.6], [0.3, 0.7]])
    s = score_classifier(ref, cand, [0, 1, 0, 0])
    assert s.accuracy == 0.5          # right on samples 0 and 1
    assert s.agreement == 0.75        # sample 2 flipped
    assert 5 < s.snr_db < 30 and s.samples == 4
    assert "accuracy 0.500" in s.line()
    assert score_classifier(ref, ref, [0, 1, 0, 1]).snr_db == float("inf")


def test_mismatched_labels_are_a_user_error():
    with pytest.raises(UserError, match="do not match"):
        score_classifier(np.zeros((3, 2)), np.zeros((3, 2)), [0, 1])


def _stats(values):
    acc = HistogramAccumulator("t")
    acc.update(values)
    t = acc.to_stats()
    return ActivationStats(tensors={"t": t}, samples=1, model_sha256="")


def test_mean_tensor_sqnr_falls_when_amax_is_far_too_large():
    v = np.random.default_rng(0).normal(0, 1, 50_000)
    st = _stats(v)
    good, bad = mean_tensor_sqnr(st, {"t": 4.0}), mean_tensor_sqnr(st, {"t": 400.0})
    assert good > 30 > bad
    assert np.isnan(mean_tensor_sqnr(st, {"other": 1.0}))
