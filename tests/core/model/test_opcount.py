from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from trtwidgets import demo
from trtwidgets.core.model.opcount import count_macs

ROOT = Path(__file__).resolve().parents[3]


def _resnet_module():
    spec = importlib.util.spec_from_file_location("bench_resnet50", ROOT / "benchmarks" / "resnet50.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_conv_and_matmul_counts_by_hand():
    w = numpy_helper.from_array(np.zeros((8, 2, 3, 3), np.float32), "w")  # groups=2: 4 in-channels per group
    m = numpy_helper.from_array(np.zeros((200, 5), np.float32), "m")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1], group=2, strides=[2, 2]),
         helper.make_node("Flatten", ["c"], ["f"], axis=1),
         helper.make_node("MatMul", ["f", "m"], ["y"], name="mm")],
        "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 4, 10, 10])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], [w, m])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    macs = count_macs(model, {"x": (3, 4, 10, 10)})
    assert macs.per_node["conv"] == 3 * 8 * 5 * 5 * 2 * 9
    assert macs.per_node["mm"] == 3 * 5 * 200  # (3, 200) x (200, 5)
    assert macs.total == macs.per_node["conv"] + macs.per_node["mm"] and macs.ops == 2 * macs.total
    assert macs.tops(1e-6) == pytest.approx(macs.ops / 1e-6 / 1e12)


def test_resnet50_is_about_4_gmacs_per_image():
    model = _resnet_module().resnet50(batch=2, materialize=False)
    macs = count_macs(model)
    per_image = macs.total / 2
    assert 4.0e9 < per_image < 4.2e9, per_image
    assert sum(1 for n in model.graph.node if n.op_type == "Conv") == 54  # 53 + the 1x1 classifier


def test_demo_model_needs_shapes():
    from trtwidgets.core.common.errors import UserError

    with pytest.raises(UserError, match="unknown"):
        count_macs(demo.MODEL_PATH)
    # The classifier head's MatMul sits behind a computed Reshape: counted as unknown, convs still counted.
    macs = count_macs(demo.MODEL_PATH, {"x": (1, 3, 48, 192)}, strict=False)
    assert 1e6 < macs.total < 1e9
    assert all(not n.startswith("Conv") for n in macs.unknown)
