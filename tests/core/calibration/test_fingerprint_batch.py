"""Ranges made on a static batch-1 model fit its batch-N copy; any other dim that differs is still refused."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.calibration.fingerprint import ModelFingerprint, check_ranges_fit, fingerprint_of
from trtwidgets.core.common.errors import StatsError
from trtwidgets.core.model.load import as_loaded


def _conv(shape):
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1]),
                               helper.make_node("Relu", ["y"], ["z"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [w])
    return as_loaded(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def test_a_batch_1_plan_fits_the_batch_32_copy_with_a_note():
    made_on = fingerprint_of(_conv([1, 3, 8, 8]))
    notes = check_ranges_fit(_conv([32, 3, 8, 8]), ["x", "y", "z"], "plan.json", "plan", made_on)
    assert any("leading dim (batch) of 1, this model has 32" in n for n in notes), notes


@pytest.mark.parametrize("shape, phrase", [([1, 3, 16, 8], "dim 2 is 16 in the model, 8 in the file"),
                                           ([32, 3, 8, 9], "dim 3 is 9 in the model, 8 in the file"),
                                           ([1, 3, 8], "has 3 dims in the model, 4 in the file")])
def test_any_other_dim_that_differs_is_still_refused(shape, phrase):
    made_on = ModelFingerprint(sha256="", inputs=(("x", (1, 3, 8, 8)),))
    with pytest.raises(StatsError) as err:
        check_ranges_fit(_conv(shape), ["x", "y", "z"], "plan.json", "plan", made_on)
    assert phrase in str(err.value)


def test_the_same_batch_makes_no_note():
    made_on = fingerprint_of(_conv([1, 3, 8, 8]))
    assert not any("batch" in n for n in check_ranges_fit(_conv([1, 3, 8, 8]), ["x", "y", "z"], "p", "plan", made_on))
