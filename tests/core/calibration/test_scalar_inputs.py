"""A scalar input (a sample rate) has no batch axis: feeds re-batch around it instead of indexing it."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from trtwidgets.core.calibration.data import iter_feeds
from trtwidgets.core.model.load import summarize


def _vad_like():
    """input [N, 4] float, sr () int64 -> output = input * 2 (sr is read but does not change the values)."""
    nodes = [helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["srf", "zero"], ["z"]),
             helper.make_node("Add", ["input", "z"], ["a"]),
             helper.make_node("Add", ["a", "a"], ["output"])]
    g = helper.make_graph(nodes, "vad", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 4]),
                                         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 4])],
                          initializer=[helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_scalar_inputs_pass_through_rebatching():
    summary = summarize(_vad_like())
    samples = [{"input": np.full((1, 4), float(i), np.float32), "sr": np.array(16000, np.int64)} for i in range(5)]
    feeds = list(iter_feeds(samples, summary, batch_size=2))
    assert [f["input"].shape[0] for f in feeds] == [2, 2, 1]
    assert all(f["sr"].shape == () and int(f["sr"]) == 16000 for f in feeds)
    assert [float(f["input"][0, 0]) for f in feeds] == [0.0, 2.0, 4.0]
    single = list(iter_feeds(samples, summary, batch_size=1, max_samples=3))
    assert len(single) == 3 and single[2]["sr"].shape == ()
