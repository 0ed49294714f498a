"""Placement rule 11: MatMul/Gemm layers that TensorRT 8.x compiles with Myelin next to a recurrence stay float.

TensorRT 8.6 gave the captcha CRNN's unrolled BiLSTM, the ops around it and its classifier
MatMul to one Myelin layer, and failed to build the Q/DQ model that had INT8 weights there
(``convertMyelinWeightsToFp32 ... weights.type() != kINT8``, H100).
"""

from __future__ import annotations

import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.model.onnx_graph import GraphIndex
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.myelin import MYELIN_RECURRENT_REASON, recurrent_myelin_layers
from trtwidgets.core.qdq.placement import place_qdq

from tests.core import qdq_models as qm

T, C, H, HIDDEN, CLASSES = 6, 2, 4, 8, 5


def _w(name, *shape):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(nodes, inits, out_shape):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, T])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def _cnn_to_sequence():
    """x [1, C, H, T] -> conv -> Transpose/Reshape -> seq [T, 1, 4*H] (time-major, as a CRNN feeds its RNN)."""
    nodes = [helper.make_node("Conv", ["x", "wc"], ["feat"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["feat"], ["feat_r"], name="relu"),
             helper.make_node("Transpose", ["feat_r"], ["feat_t"], name="to_time_major", perm=[3, 0, 1, 2]),
             helper.make_node("Reshape", ["feat_t", "seq_shape"], ["seq"], name="to_sequence")]
    return nodes, [_w("wc", 4, C, 3, 3), _i64("seq_shape", [T, 1, 4 * H])]


def crnn_lstm() -> onnx.ModelProto:
    """Conv -> Transpose/Reshape -> LSTM -> Squeeze/Reshape -> MatMul (constant weights) -> Add: logits [T, CLASSES]."""
    nodes, inits = _cnn_to_sequence()
    nodes += [helper.make_node("LSTM", ["seq", "lw", "lr", "lb"], ["lstm_y"], name="lstm", hidden_size=HIDDEN),
              helper.make_node("Squeeze", ["lstm_y", "axes1"], ["lstm_sq"], name="drop_direction"),
              helper.make_node("Reshape", ["lstm_sq", "rows"], ["lstm_2d"], name="to_rows"),
              helper.make_node("MatMul", ["lstm_2d", "w_out"], ["logits"], name="classifier"),
              helper.make_node("Add", ["logits", "b_out"], ["y"], name="classifier_bias")]
    inits += [_w("lw", 1, 4 * HIDDEN, 4 * H), _w("lr", 1, 4 * HIDDEN, HIDDEN), _w("lb", 1, 8 * HIDDEN),
              _i64("axes1", [1]), _i64("rows", [T, HIDDEN]), _w("w_out", HIDDEN, CLASSES), _w("b_out", CLASSES)]
    return _model(nodes, inits, [T, CLASSES])


def crnn_unrolled(steps: int = 3) -> onnx.ModelProto:
    """A traced RNN-cell loop: h_t = tanh(Gemm(x_t, W_ih) + Gemm(h_{t-1}, W_hh)), one Gemm pair per step
    sharing W_ih and W_hh (the first step has no state yet), then the steps' h stacked and read by a MatMul."""
    nodes, inits = _cnn_to_sequence()
    hs = []
    for t in range(steps):
        pre = f"ih{t}"
        nodes += [helper.make_node("Gather", ["seq", f"t{t}"], [f"x{t}"], name=f"step{t}/pick", axis=0),
                  helper.make_node("Gemm", [f"x{t}", "w_ih", "b_ih"], [f"ih{t}"], name=f"step{t}/ih", transB=1)]
        if t:
            pre = f"pre{t}"
            nodes += [helper.make_node("Gemm", [f"h{t}", "w_hh", "b_hh"], [f"hh{t}"], name=f"step{t}/hh", transB=1),
                      helper.make_node("Add", [f"ih{t}", f"hh{t}"], [pre], name=f"step{t}/add")]
        nodes += [helper.make_node("Tanh", [pre], [f"h{t + 1}"], name=f"step{t}/tanh"),
                  helper.make_node("Unsqueeze", [f"h{t + 1}", "axes0"], [f"hu{t}"], name=f"step{t}/stack")]
        inits.append(_i64(f"t{t}", t))
        hs.append(f"hu{t}")
    nodes += [helper.make_node("Concat", hs, ["hseq"], name="stack", axis=0),
              helper.make_node("MatMul", ["hseq", "w_out"], ["y"], name="classifier")]
    inits += [_w("w_ih", HIDDEN, 4 * H), _w("b_ih", HIDDEN), _w("w_hh", HIDDEN, HIDDEN), _w("b_hh", HIDDEN),
              _i64("axes0", [0]), _w("w_out", HIDDEN, CLASSES)]
    return _model(nodes, inits, [steps, 1, CLASSES])


def _skips(plan, rule=11):
    return {s.node_label: s.reason for s in plan.skipped if s.rule == rule}


def _quantized(plan):
    return {w.node_label for w in plan.weights}


def test_the_matmul_after_an_lstm_stays_float_for_trt86_and_is_quantized_for_trt10():
    model = crnn_lstm()
    trt8 = place_qdq(model, trt_version="8.6")
    assert set(_skips(trt8)) == {"classifier"}
    assert _skips(trt8)["classifier"].startswith(MYELIN_RECURRENT_REASON)
    assert "convertMyelinWeightsToFp32" in _skips(trt8)["classifier"]
    assert "LSTM lstm" in _skips(trt8)["classifier"]
    assert _quantized(trt8) == {"conv"}  # convolutions stay TensorRT's own: unaffected
    assert not any(e.node_label == "classifier" for e in trt8.edges)

    trt10 = place_qdq(model, trt_version="10.16")
    assert not _skips(trt10)
    assert _quantized(trt10) == {"conv", "classifier"}
    # Unknown target: the form every TensorRT builds.
    assert set(_skips(place_qdq(model))) == {"classifier"}


def test_the_export_for_trt86_writes_no_int8_weight_next_to_the_lstm():
    model = crnn_lstm()
    amax = qm.max_amax(model, qm.random_feeds(model, 4))
    result = build_qdq(model, QdqSpec(amax, QdqOptions(trt_version="8.6")))
    q = result.model
    idx = GraphIndex(q.graph)
    matmul = next(n for n in q.graph.node if n.name == "classifier")
    assert all(idx.producer.get(x) is None or idx.producer[x].op_type != "DequantizeLinear" for x in matmul.input)
    int8 = {t.name for t in q.graph.initializer if t.data_type == TensorProto.INT8 and t.dims}
    readers = {c.name for n in q.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in int8
               for c in idx.consumers.get(n.output[0], [])}
    assert readers == {"conv"}
    assert result.report.quantized_layers == ("conv",)
    kept = {s.node_label: s for s in result.report.skipped if s.rule == 11}
    assert MYELIN_RECURRENT_REASON in kept["classifier"].reason


def test_the_export_for_trt10_quantizes_the_matmul_after_the_lstm():
    model = crnn_lstm()
    amax = qm.max_amax(model, qm.random_feeds(model, 4))
    assert "classifier" in build_qdq(model, QdqSpec(amax, QdqOptions(trt_version="10.16"))).report.quantized_layers


def test_an_unrolled_cell_and_its_classifier_stay_float_for_trt86():
    model = crnn_unrolled()
    # As the planner places (its cost model, not rule 5, judges these one-row products).
    trt8 = place_qdq(model, trt_version="8.6", skip_matrix_vector=False)
    gemms = {"step0/ih", "step1/ih", "step1/hh", "step2/ih", "step2/hh"}
    assert set(_skips(trt8)) == gemms | {"classifier"}
    assert all("unrolled recurrent cell of weight w_hh" in r for r in _skips(trt8).values())
    assert _quantized(trt8) == {"conv"}
    assert _quantized(place_qdq(model, trt_version="10.16", skip_matrix_vector=False)) == gemms | {"conv", "classifier"}


def test_layers_without_a_recurrence_are_left_alone():
    # A classifier MLP (different weights, chained) and a weight shared by parallel branches (not chained).
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["a"], name="fc1", transB=1),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2"], ["b"], name="fc2", transB=1),
             helper.make_node("Gemm", ["x", "w1"], ["c"], name="fc1_twin", transB=1),
             helper.make_node("Add", ["b", "c"], ["y"], name="join")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                              [_w("w1", 8, 8), _w("w2", 8, 8)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert recurrent_myelin_layers(model, "8.6") == {}
    assert recurrent_myelin_layers(qm.transformer_block(), "8.6") == {}
    assert recurrent_myelin_layers(qm.residual_cnn(), None) == {}
