"""Issue 44: every FP16-float-part export loads in ONNX Runtime's default session and computes what it did.

ORT's extended optimizer fuses DequantizeLinear -> Concat -> QuantizeLinear into QLinearConcat, which takes no
FP16 scales (found on the PP-OCRv4 text detector exported for TensorRT 10.16). The export now writes the
QuantizeLinear reading such a Concat in FP32 (:mod:`trtwidgets.core.qdq.ort_concat`); these tests hold it to
what ONNX Runtime really does, with the form written before (``qdq_models.previous_concat_form``) as the witness.
What TensorRT builds from both forms is compared on the GPU (``tests/gpu/test_ort_concat_forms.py``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import trtwidgets as tw
from tests.core.qdq_models import _model, _vi, _w, max_amax, previous_concat_form, random_feeds
from trtwidgets.core.qdq.ort_concat import ORT_CONCAT_REASON, fp32_concat_quantizers


def _concat_cnn():
    """x -> convA, convB -> Concat -> convC -> out: a Concat between quantized convolutions."""
    nodes = [helper.make_node("Conv", ["x", "wA"], ["a"], name="convA", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wB"], ["b"], name="convB", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b"], ["cat"], name="cat", axis=1),
             helper.make_node("Conv", ["cat", "wC"], ["out"], name="convC", kernel_shape=[1, 1])]
    return _model(nodes, [_vi("x", [1, 8, 8, 8])], [_vi("out", [1, 8, 8, 8])],
                  [_w("wA", 8, 8, 3, 3), _w("wB", 8, 8, 3, 3), _w("wC", 8, 16, 1, 1)])


def _export(model, trt_version):
    amax = max_amax(model, random_feeds(model))
    return tw.export_qdq(model, amax, options=tw.QdqOptions(trt_version=trt_version))


def _session(proto, level=None):
    """A session as a user opens one: default SessionOptions unless ``level`` is given; None when ORT refuses."""
    opts = ort.SessionOptions()
    if level is not None:
        opts.graph_optimization_level = level
    try:
        return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception:
        return None


def _cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _same_outputs(new, old, feeds, min_cosine=0.998):
    """``new`` in the default session against ``old`` with ORT's fusions off (the only way it loads)."""
    a = _session(new)
    b = _session(old, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    assert a is not None and b is not None
    for feed in feeds:
        for x, y in zip(a.run(None, feed), b.run(None, feed)):
            assert _cosine(x, y) >= min_cosine


def test_an_fp16_export_with_a_concat_between_quantizers_loads_in_the_default_session():
    ex = _export(_concat_cnn(), "10.16")
    assert _session(ex.model) is not None
    old = previous_concat_form(ex.model)
    assert _session(old) is None, "ORT loads the previous form now: the FP32 quantizer is not needed"
    _same_outputs(ex.model, old, random_feeds(_concat_cnn(), n=3, seed=1))
    # The quantizer after the Concat reads it through a Cast, with its scale's FP16 value in FP32; nothing else moved.
    q = next(n for n in ex.model.graph.node if n.op_type == "QuantizeLinear" and n.input[0].startswith("cat"))
    inits = {t.name: t for t in ex.model.graph.initializer}
    assert inits[q.input[1]].data_type == TensorProto.FLOAT
    assert numpy_helper.to_array(inits[q.input[1]]) == numpy_helper.to_array(inits["cat_scale"]).astype(np.float32)
    assert [r for r in ex.report.high_precision.kept_fp32 if r[1] == ORT_CONCAT_REASON] == [(q.name, ORT_CONCAT_REASON)]
    assert sum(n.op_type == "Cast" for n in ex.model.graph.node) == sum(n.op_type == "Cast" for n in old.graph.node) + 1


def test_an_fp32_export_is_written_as_before():
    """TensorRT 8.6's export keeps FP32 scales: ORT's QLinearConcat takes them, and nothing changes."""
    ex = _export(_concat_cnn(), "8.6")
    assert _session(ex.model) is not None
    assert not any(n.op_type == "Cast" for n in ex.model.graph.node)
    assert fp32_concat_quantizers(ex.model.graph) == []


def _qdq_op(op, n_in, attrs=None, scale=np.float16):
    """Every input DequantizeLinear'd, the output QuantizeLinear'd, scales in ``scale``'s type: ORT's fusion pattern."""
    s = numpy_helper.from_array(np.array(0.05, scale), "s")
    z = numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = []
    for i in range(n_in):
        nodes += [helper.make_node("QuantizeLinear", [f"x{i}", "s", "z"], [f"q{i}"]),
                  helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"d{i}"])]
    nodes += [helper.make_node(op, [f"d{i}" for i in range(n_in)], ["y"], **(attrs or {})),
              helper.make_node("QuantizeLinear", ["y", "s", "z"], ["qy"]),
              helper.make_node("DequantizeLinear", ["qy", "s", "z"], ["out"])]
    t = helper.np_dtype_to_tensor_dtype(np.dtype(scale))
    g = helper.make_graph(nodes, op, [helper.make_tensor_value_info(f"x{i}", t, [1, 4, 8, 8]) for i in range(n_in)],
                          [helper.make_tensor_value_info("out", t, None)], initializer=[s, z])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("op, n_in, attrs", [
    ("Add", 2, {}), ("Mul", 2, {}), ("GlobalAveragePool", 1, {}), ("AveragePool", 1, {"kernel_shape": [2, 2]}),
    ("MaxPool", 1, {"kernel_shape": [2, 2]}), ("Sigmoid", 1, {}), ("LeakyRelu", 1, {}), ("Softmax", 1, {}),
    ("Conv", 2, {}), ("MatMul", 2, {})])
def test_ort_fuses_no_other_fp16_pattern_into_an_op_that_refuses_it(op, n_in, attrs):
    """The module's claim: of ORT's QDQ fusions, only the Concat's needs the FP32 quantizer (ORT 1.32)."""
    assert _session(_qdq_op(op, n_in, attrs)) is not None, f"ORT now refuses {op} with FP16 scales: handle it too"


def test_the_concat_pattern_is_the_one_refused_and_the_rewrite_is_what_loads():
    m = _qdq_op("Concat", 2, {"axis": 1})
    assert _session(m) is None
    rows = fp32_concat_quantizers(m.graph)
    assert len(rows) == 1 and _session(m) is not None
    assert fp32_concat_quantizers(m.graph) == []  # once is enough: the Concat's reader is a Cast now


def test_a_concat_that_onnx_runtime_does_not_fuse_is_left_alone():
    """Not every input a DequantizeLinear, or a reader that is not a QuantizeLinear: ORT's rule does not match."""
    one_float = _qdq_op("Concat", 2, {"axis": 1})
    one_float.graph.node[4].input[1] = "x1"  # one input is a float tensor
    assert fp32_concat_quantizers(one_float.graph) == [] and _session(one_float) is not None
    also_read = _qdq_op("Concat", 2, {"axis": 1})
    also_read.graph.node.append(helper.make_node("Relu", ["y"], ["r"]))
    also_read.graph.output.append(helper.make_tensor_value_info("r", TensorProto.FLOAT16, None))
    assert fp32_concat_quantizers(also_read.graph) == [] and _session(also_read) is not None


def _det_model() -> Path:
    # find_spec, not import: rapidocr_onnxruntime imports cv2, which its models do not need.
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("rapidocr_onnxruntime is not installed (its PP-OCRv4 detector is the model of issue 44)")
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "ch_PP-OCRv4_det_infer.onnx"


def test_the_pp_ocr_text_detectors_tensorrt_10_export_loads_in_the_default_session():
    from benchmarks.zoo_shapes import fix_static

    model = fix_static(onnx.load(str(_det_model())), {"x": [1, 3, 320, 320]})
    ex = _export(model, "10.16")
    rows = [r for r in ex.report.high_precision.kept_fp32 if r[1] == ORT_CONCAT_REASON]
    assert rows and _session(ex.model) is not None
    old = previous_concat_form(ex.model)
    assert _session(old) is None
    _same_outputs(ex.model, old, random_feeds(model, n=2, seed=1))
