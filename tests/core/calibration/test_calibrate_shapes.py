"""calibrate_shapes: one calibration per shape and one over all of them, for a Q/DQ export's fixed scales."""

from __future__ import annotations

import pytest

from trtwidgets.core.calibrate.shapes import ALL, calibrate_shapes
from trtwidgets.core.common.errors import CalibrationDataError
from trtwidgets.demo import dynamic_lesson


def _data(lengths=(4, 32)):
    return {f"L={n}": [{"tokens": dynamic_lesson.tokens(4, n, seed=i)} for i in range(2)] for n in lengths}


def test_a_summed_range_grows_with_the_length_and_the_merged_one_covers_every_length():
    cals = calibrate_shapes(dynamic_lesson.sum_pool_model(), _data(), method="max")
    assert list(cals) == ["L=4", "L=32", ALL]
    assert cals["L=32"].amax["pooled"] > 2 * cals["L=4"].amax["pooled"]
    assert cals[ALL].amax["pooled"] == pytest.approx(max(c.amax["pooled"] for c in cals.values()), rel=1e-3)
    assert cals[ALL].stats.input_shapes["tokens"] == (4, -1, 16)
    assert cals[ALL].stats.samples == cals["L=4"].stats.samples + cals["L=32"].stats.samples


def test_no_data_and_a_label_taken_by_the_merge_are_refused():
    with pytest.raises(CalibrationDataError):
        calibrate_shapes(dynamic_lesson.sum_pool_model(), {})
    with pytest.raises(CalibrationDataError, match="merged"):
        calibrate_shapes(dynamic_lesson.sum_pool_model(), {ALL: []})
