from __future__ import annotations

import pytest

from trtwidgets.core.common.errors import RecipeError
from trtwidgets.core.recipe.fields import CalibratorSpec


def test_calibrator_spec_checks():
    with pytest.raises(RecipeError, match="neither a range method nor a calibration cache"):
        CalibratorSpec(kind="toolkit")
    with pytest.raises(RecipeError, match="belong to the toolkit"):
        CalibratorSpec(kind="trt_entropy2", method="max")
    with pytest.raises(RecipeError, match="outside"):
        CalibratorSpec(kind="toolkit", method="percentile", percentile=0)
    with pytest.raises(RecipeError, match="amax override"):
        CalibratorSpec(kind="toolkit", method="max", amax_overrides={"t": -1.0})
    assert CalibratorSpec(kind="trt_minmax").trt_name == "minmax"


def test_calibrator_spec_owns_a_copy_of_amax_overrides():
    overrides = {"x": 1.0}
    cal = CalibratorSpec(kind="toolkit", method="max", amax_overrides=overrides)
    overrides["x"] = 9.0
    assert cal.amax_overrides == {"x": 1.0}
    assert CalibratorSpec(kind="toolkit", method="max", amax_overrides=cal.amax_overrides) == cal
