"""Issue 32: the FP16-float-part export that ONNX Runtime's default session refuses says what to set.

ORT's extended optimizer fuses DequantizeLinear -> Concat -> QuantizeLinear into QLinearConcat,
which takes no FP16 scales (found on a PaddleOCR detector exported for TensorRT 10.16). The
export keeps the model as TensorRT reads it and notes how to load it; these tests hold the note
to what ONNX Runtime really does.
"""

from __future__ import annotations

import onnxruntime as ort
import pytest
from onnx import helper

import trtwidgets as tw
from trtwidgets.core.qdq.export import ORT_FP16_SCALES_NOTE
from tests.core.qdq_models import _model, _vi, _w, max_amax, random_feeds


def _concat_cnn():
    """x -> convA, convB -> Concat -> convC -> out: a Concat between quantized convolutions."""
    nodes = [helper.make_node("Conv", ["x", "wA"], ["a"], name="convA", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wB"], ["b"], name="convB", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b"], ["cat"], name="cat", axis=1),
             helper.make_node("Conv", ["cat", "wC"], ["out"], name="convC", kernel_shape=[1, 1])]
    return _model(nodes, [_vi("x", [1, 8, 8, 8])], [_vi("out", [1, 8, 8, 8])],
                  [_w("wA", 8, 8, 3, 3), _w("wB", 8, 8, 3, 3), _w("wC", 8, 16, 1, 1)])


def _export(trt_version):
    model = _concat_cnn()
    amax = max_amax(model, random_feeds(model))
    return tw.export_qdq(model, amax, options=tw.QdqOptions(trt_version=trt_version))


def _loads(proto, level) -> bool:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = level
    try:
        ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - ORT's own INVALID_GRAPH: the claim under test
        return False
    return True


def test_fp16_scales_around_a_concat_are_noted_and_the_note_is_true():
    ex = _export("10.16")
    assert ORT_FP16_SCALES_NOTE in ex.report.warnings
    assert not _loads(ex.model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL), "ORT now loads it: drop the note"
    assert _loads(ex.model, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC), "the note's remedy does not work"


@pytest.mark.parametrize("trt_version", ["8.6"])
def test_fp32_scales_need_no_note(trt_version):
    ex = _export(trt_version)
    assert ORT_FP16_SCALES_NOTE not in ex.report.warnings
    assert _loads(ex.model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
