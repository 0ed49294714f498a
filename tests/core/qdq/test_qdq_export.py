"""Q/DQ export on tiny models: node structure, scales, axes, opsets, FP8, failures, atomic save."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from trtwidgets.core.accuracy.metrics import cosine_similarity
from trtwidgets.core.model.onnx_graph import GraphIndex, attribute
from trtwidgets.core.qdq.export import (QdqExportError, QdqOptions, QdqSpec, build_qdq, quantize_weight,
                                        save_qdq_model)

from tests.core import qdq_models as qm


def _calibrated(model, seed=0):
    # 32 calibration samples: with fewer, tiny tensors' held-back values exceed the range and clip.
    feeds = qm.random_feeds(model, 32, seed=seed)
    return qm.max_amax(model, feeds), qm.random_feeds(model, 3, seed=seed + 100)


def _dq_of(model, consumer_name, input_index):
    """The DequantizeLinear feeding ``consumer.input[input_index]``, or None."""
    idx = GraphIndex(model.graph)
    node = next(n for n in model.graph.node if n.name == consumer_name)
    prod = idx.producer.get(node.input[input_index])
    return prod if prod is not None and prod.op_type == "DequantizeLinear" else None


def test_exported_model_runs_and_stays_close_to_float():
    model = qm.residual_cnn()
    amax, held_back = _calibrated(model)
    result = build_qdq(model, QdqSpec(amax))
    q = result.model
    for feed in held_back:
        ref, got = qm.run(model, feed), qm.run(q, feed)
        # Three int8 convs with max ranges: each adds ~40 dB SQNR noise; 0.999 leaves margin.
        assert cosine_similarity(ref, got) > 0.999
        assert not np.array_equal(ref, got)  # it really is quantized
    rep = result.report
    assert set(rep.quantized_layers) == {"convA", "convB", "convC"}
    # Dense INT8 (the default): the residual Add reads convC's output quantized too (rule 8).
    assert {a.tensor for a in rep.activations} == {"x", "t", "r", "pool", "convC"}
    sparse = build_qdq(model, QdqSpec(amax, QdqOptions(dense_int8=False))).report
    assert {a.tensor for a in sparse.activations} == {"x", "t", "r", "pool"}


def test_activation_qdq_is_symmetric_int8_with_scale_amax_over_127():
    model = qm.residual_cnn()
    amax, _ = _calibrated(model)
    # rules 1-7: the residual's conv branch stays float
    q = build_qdq(model, QdqSpec(amax, QdqOptions(dense_int8=False, trt_version="8.6"))).model  # FP32 scales
    idx = GraphIndex(q.graph)
    qs = [n for n in q.graph.node if n.op_type == "QuantizeLinear"]
    assert len(qs) == 4
    for node in qs:
        tensor = node.input[0]
        scale = float(idx.constant(node.input[1]))
        zp = idx.constant(node.input[2])
        assert scale == pytest.approx(amax[tensor] / 127, rel=1e-6)
        assert zp.dtype == np.int8 and zp.shape == () and int(zp) == 0
        (dq,) = [c for c in idx.consumers[node.output[0]]]
        assert dq.op_type == "DequantizeLinear" and list(dq.input[1:]) == list(node.input[1:])
    # The residual add reads the skip input through the same Q/DQ as convB; its conv branch stays float.
    add_dq = _dq_of(q, "residual", 0)
    assert add_dq is not None and list(add_dq.output) == list(_dq_of(q, "convB", 0).output)
    assert _dq_of(q, "residual", 1) is None


def test_weights_are_int8_initializers_with_per_channel_dequantize():
    model = qm.residual_cnn()
    amax, _ = _calibrated(model)
    q = build_qdq(model, QdqSpec(amax, QdqOptions(trt_version="8.6"))).model  # FP32 scales, as 8.6 reads them
    idx = GraphIndex(q.graph)
    original = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for conv, w in (("convA", "wA"), ("convB", "wB"), ("convC", "wC")):
        dq = _dq_of(q, conv, 1)
        assert dq is not None and attribute(dq, "axis") == 0
        qw = idx.constant(dq.input[0])
        scale = idx.constant(dq.input[1])
        assert qw.dtype == np.int8 and np.abs(qw).max() == 127
        ref = original[w]
        assert scale.shape == (ref.shape[0],)
        np.testing.assert_allclose(scale, np.abs(ref).reshape(ref.shape[0], -1).max(1) / 127, rtol=1e-6)
        back = qw.astype(np.float32) * scale[:, None, None, None]
        assert np.abs(back - ref).max() <= scale.max() / 2 + 1e-7
    # The float weights are gone from the file (only their int8 copies remain).
    assert not {"wA", "wB", "wC"} & {t.name for t in q.graph.initializer}


@pytest.mark.parametrize("weights_per_channel", [True, False])
def test_per_channel_axes_for_gemm_matmul_and_convtranspose(weights_per_channel):
    model = qm.weighted_ops()
    amax, held_back = _calibrated(model)
    q = build_qdq(model, QdqSpec(amax, QdqOptions(weights_per_channel=weights_per_channel))).model
    expected = {"gemm_tb": (0, 6), "gemm_nt": (1, 7), "matmul": (1, 12), "deconv": (1, 9)}
    idx = GraphIndex(q.graph)
    for name, (axis, channels) in expected.items():
        dq = _dq_of(q, name, 1)
        scale = idx.constant(dq.input[1])
        if weights_per_channel:
            assert attribute(dq, "axis") == axis and scale.shape == (channels,)
        else:
            assert attribute(dq, "axis") is None and scale.shape == ()
    # Four int8 layers; one scale per weight tensor costs precision on small channels.
    bound = 0.999 if weights_per_channel else 0.995
    for feed in held_back:
        assert cosine_similarity(qm.run(model, feed), qm.run(q, feed)) > bound


def test_constant_node_weights_and_missing_kernel_shape():
    model = qm.constant_weight_conv(kernel_shape=False)
    amax, held_back = _calibrated(model)
    q = build_qdq(model, QdqSpec(amax)).model
    conv = next(n for n in q.graph.node if n.op_type == "Conv")
    assert attribute(conv, "kernel_shape") == [3, 3]  # TensorRT 8.6 needs it with DQ weights
    assert not any(n.op_type == "Constant" for n in q.graph.node)  # the float Constant is dropped
    assert _dq_of(q, "conv", 1) is not None
    for feed in held_back:
        assert cosine_similarity(qm.run(model, feed), qm.run(q, feed)) > 0.999


def test_old_opset_is_upgraded_and_still_matches():
    model = qm.residual_cnn(opset=11)
    amax, held_back = _calibrated(model)
    result = build_qdq(model, QdqSpec(amax, QdqOptions(trt_version="8.6")))  # per-channel Q/DQ needs opset 13
    assert (result.report.opset_from, result.report.opset_to) == (11, 13)
    assert [o.version for o in result.model.opset_import if o.domain in ("", "ai.onnx")] == [13]
    # Upgraded, it computes what the same export of the model written at opset 13 computes.
    same = build_qdq(qm.residual_cnn(opset=13), QdqSpec(amax, QdqOptions(trt_version="8.6"))).model
    for feed in held_back:
        assert cosine_similarity(qm.run(same, feed), qm.run(result.model, feed)) > 0.99999


def test_fp8_export_uses_e4m3_types_opset19_and_runs():
    model = qm.residual_cnn()
    amax, held_back = _calibrated(model)
    result = build_qdq(model, QdqSpec(amax, QdqOptions(precision="fp8", high_precision="fp32")))
    q = result.model
    assert result.report.opset_to == 19
    idx = GraphIndex(q.graph)
    for n in q.graph.node:
        if n.op_type == "QuantizeLinear":
            assert idx.constant_dtype(n.input[2]) == onnx.TensorProto.FLOAT8E4M3FN
            assert float(idx.constant(n.input[1])) == pytest.approx(amax[n.input[0]] / 448, rel=1e-6)
    dq = _dq_of(q, "convA", 1)
    assert idx.constant_dtype(dq.input[0]) == onnx.TensorProto.FLOAT8E4M3FN
    # FP8 weights default to one scale per tensor: TensorRT's FP8 kernels take per-tensor scales.
    assert attribute(dq, "axis") is None and idx.constant(dq.input[1]).shape == ()
    from trtwidgets.core.model.lint import lint

    codes = {f.code for f in lint(q, flags=("fp16", "fp8"), trt_version="10.8")}
    assert "FP8_PER_CHANNEL" not in codes and "QDQ_MODEL" in codes
    for feed in held_back:
        # E4M3 keeps 3 mantissa bits: ~30 dB per tensor, so a looser bound than INT8.
        assert cosine_similarity(qm.run(model, feed), qm.run(q, feed)) > 0.99


def test_tensors_without_a_range_stay_float_and_so_do_their_layers():
    model = qm.residual_cnn()
    amax, held_back = _calibrated(model)
    del amax["t"]
    amax["pool"] = 0.0  # an always-zero tensor's range: accepted, and it stays float
    result = build_qdq(model, QdqSpec(amax))
    rep = result.report
    assert set(rep.quantized_layers) == {"convA"}
    reasons = {(s.node_label, s.tensor): s.reason for s in rep.skipped}
    assert "not in the statistics" in reasons[("convB", "t")]
    assert "not in the statistics" in reasons[("residual", "t")]
    assert "amax is 0.0" in reasons[("convC", "pool")]
    assert "weights left float" in reasons[("convB", "wB")]
    assert _dq_of(result.model, "convB", 1) is None and _dq_of(result.model, "convB", 0) is None
    for feed in held_back:
        assert cosine_similarity(qm.run(model, feed), qm.run(result.model, feed)) > 0.999


def test_input_model_is_not_modified():
    model = qm.residual_cnn()
    before = model.SerializeToString()
    amax, _ = _calibrated(model)
    _ = build_qdq(model, QdqSpec(amax, QdqOptions(exclude=["convC"]))).model
    assert model.SerializeToString() == before


def test_refuses_already_quantized_models_bad_precision_and_low_opset():
    model = qm.residual_cnn()
    amax, _ = _calibrated(model)
    q = build_qdq(model, QdqSpec(amax)).model
    with pytest.raises(QdqExportError, match="already contains Q/DQ"):
        _ = build_qdq(q, QdqSpec(amax)).model
    with pytest.raises(QdqExportError, match="Unknown precision"):
        _ = build_qdq(model, QdqSpec(amax, QdqOptions(precision="int4"))).model
    with pytest.raises(QdqExportError, match="too low"):
        _ = build_qdq(model, QdqSpec(amax, QdqOptions(precision="fp8", opset=17))).model


def test_report_summary_and_dict():
    model = qm.residual_cnn()
    amax, _ = _calibrated(model)
    rep = build_qdq(model, QdqSpec(amax, QdqOptions(exclude=["convC"]))).report
    text = rep.summary()
    assert "quantized layers    2" in text and "residual add: skip input: 1" in text
    assert "convC" in text and "excluded by the user" in text
    d = rep.to_dict()
    assert d["quantized_layers"] == ["convA", "convB"] and d["excluded"] == ["convC"]


def test_quantize_weight_per_channel_error_bound_and_zero_channel():
    w = np.random.default_rng(1).standard_normal((4, 3, 2, 2)).astype(np.float32)
    w[2] = 0.0
    q, scale, err = quantize_weight(w, 0)
    assert q.dtype == np.int8 and scale.shape == (4,)
    assert scale[2] == 1.0 and not q[2].any()
    back = q.astype(np.float32) * scale[:, None, None, None]
    assert np.all(np.abs(back - w) <= scale[:, None, None, None] / 2 + 1e-7)
    assert 0 < err <= 0.5 / 127 + 1e-6


def test_save_is_atomic_and_replaces(tmp_path):
    model = qm.residual_cnn()
    amax, _ = _calibrated(model)
    q = build_qdq(model, QdqSpec(amax)).model
    out = tmp_path / "sub" / "m.qdq.onnx"
    save_qdq_model(model, out)
    save_qdq_model(q, out)
    assert onnx.load(str(out)).SerializeToString() == q.SerializeToString()
    assert [p.name for p in out.parent.iterdir()] == ["m.qdq.onnx"]  # no temporary file left
    with pytest.raises(QdqExportError, match="is a directory"):
        save_qdq_model(q, tmp_path)


def test_constants_read_only_inside_a_subgraph_survive():
    from onnx import TensorProto, helper

    model = qm.residual_cnn()
    # An If whose branches read a Constant of the outer graph; nothing at the top level reads it.
    then_g = helper.make_graph([helper.make_node("Identity", ["k_outer"], ["k_then"])], "then", [],
                               [helper.make_tensor_value_info("k_then", TensorProto.FLOAT, [1])])
    else_g = helper.make_graph([helper.make_node("Identity", ["k_outer"], ["k_else"])], "else", [],
                               [helper.make_tensor_value_info("k_else", TensorProto.FLOAT, [1])])
    g = model.graph
    g.node.extend([
        helper.make_node("Constant", [], ["k_outer"], name="k", value=numpy_helper.from_array(np.ones(1, np.float32))),
        helper.make_node("Constant", [], ["cond"], name="c", value=numpy_helper.from_array(np.array(True))),
        helper.make_node("If", ["cond"], ["k_out"], name="if", then_branch=then_g, else_branch=else_g),
    ])
    g.output.append(helper.make_tensor_value_info("k_out", TensorProto.FLOAT, [1]))
    amax, held_back = _calibrated(qm.residual_cnn())
    q = build_qdq(model, QdqSpec(amax)).model
    assert "k_outer" in {o for n in q.graph.node for o in n.output}
    sess_out = qm.run(q, held_back[0], output="k_out")
    assert sess_out.tolist() == [1.0]
