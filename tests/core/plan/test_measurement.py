"""Measured latency: one engine's rounds, the pick by measured time, the measured latency model, on committed
numbers (figures of the kind issue 24 measured on an H100)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.common.errors import UserError
from trtwidgets.core.plan.measured.measurement import (FP16, INT8_IMPLICIT, QDQ, Measurement,
                                                       measurement_rows, placement_key, qdq_values_key)
from trtwidgets.core.plan.measured.paired import PAIRED_MIN_ROUNDS, paired_rounds
from trtwidgets.core.plan.measured.pick import MeasuredPick, known_estimates, pick_measured

# Five interleaved rounds (the fewest in which the paired sign test can decide), per-round medians in ms.
YOLO = [Measurement("fp16", FP16, (0.631, 0.628, 0.634, 0.630, 0.629)),
        Measurement("int8_implicit", INT8_IMPLICIT, (0.629, 0.633, 0.630, 0.631, 0.628)),
        Measurement("int8 everywhere (percentile)", QDQ, (1.15, 1.22, 1.13, 1.14, 1.16),
                    int8_layers=frozenset({"c1", "c2"}))]
SMALL = [Measurement("fp16", FP16, (0.320, 0.321, 0.319, 0.320, 0.322)),
         Measurement("int8_implicit", INT8_IMPLICIT, (0.302, 0.303, 0.301, 0.302, 0.302)),
         Measurement("pick", QDQ, (0.283, 0.284, 0.282, 0.283, 0.285), int8_layers=frozenset({"c1"})),
         Measurement("all int8", QDQ, (0.219, 0.220, 0.218, 0.219, 0.221), int8_layers=frozenset({"c1", "m1"}))]


def test_measurement_median_and_spread():
    m = Measurement("a", QDQ, (1.0, 1.3, 1.1), estimate_ms=0.9)
    assert m.median_ms == pytest.approx(1.1) and m.spread_ms == pytest.approx(0.3) and m.ok
    assert math.isnan(Measurement("b", QDQ).median_ms) and not Measurement("b", QDQ).ok
    assert not Measurement("c", QDQ, (1.0,), error="build failed").ok
    assert Measurement.from_dict(m.to_dict()) == m
    assert math.isnan(Measurement.from_dict(Measurement("b", QDQ).to_dict()).estimate_ms)


def test_a_candidate_slower_than_fp16_is_never_recommended():
    pick = pick_measured(YOLO, meets={"int8 everywhere (percentile)": True})
    assert pick.name == "fp16"
    assert any("slower than FP16" in n and "never recommended" in n for n in pick.notes)
    assert any("implicit INT8 (reference" in n for n in pick.notes)


def test_the_fastest_candidate_meeting_accuracy_wins():
    assert pick_measured(SMALL, meets={"pick": True, "all int8": True}).name == "all int8"
    pick = pick_measured(SMALL, meets={"pick": True, "all int8": False})
    assert pick.name == "pick" and pick.speedup == pytest.approx(0.320 / 0.283)
    assert any("all int8: does not meet" in n for n in pick.notes)
    unknown = pick_measured(SMALL, meets={})
    assert unknown.name == "fp16" and any("accuracy not known" in n for n in unknown.notes)


def test_a_candidate_that_does_not_win_the_paired_rounds_goes_to_fp16_unless_asked_otherwise():
    fp16 = Measurement("fp16", FP16, (0.320, 0.325, 0.318, 0.321, 0.322))
    three_of_five = [fp16, Measurement("c", QDQ, (0.317, 0.326, 0.317, 0.322, 0.321))]
    pick = pick_measured(three_of_five, {"c": True})
    assert pick.name == "fp16" and "faster in 3 of 5 paired rounds (one-sided sign test p = 0.5)" in pick.reason
    assert pick_measured(three_of_five, {"c": True}, prefer_fp16_within_noise=False).name == "c"
    # Slower in most pairs, but not by the test: allowed when asked; never when FP16 wins every pair.
    slower = [fp16, Measurement("c", QDQ, (0.326, 0.320, 0.319, 0.322, 0.321))]
    assert pick_measured(slower, {"c": True}, prefer_fp16_within_noise=False).name == "c"
    beyond = [fp16, Measurement("c", QDQ, (0.340, 0.341, 0.339, 0.338, 0.342))]
    pick = pick_measured(beyond, {"c": True}, prefer_fp16_within_noise=False)
    assert pick.name == "fp16" and any("FP16 faster in 5 of 5 paired rounds" in n for n in pick.notes)


def test_the_yolo_b1_case_a_gain_in_8_of_9_pairs_is_picked_though_one_round_spread_more():
    """Issue 44: faster than FP16 in 8 of 9 interleaved rounds, one slow round wider than the gain: picked now."""
    fp16 = Measurement("fp16", FP16, (0.62, 0.60, 0.61, 0.62, 0.60, 0.61, 0.63, 0.61, 0.60))
    int8 = Measurement("#1 INT8 everywhere", QDQ, (0.55, 0.54, 0.80, 0.55, 0.54, 0.56, 0.55, 0.54, 0.55))
    assert int8.median_ms > fp16.median_ms - max(fp16.spread_ms, int8.spread_ms)  # the spread rule kept FP16
    pick = pick_measured([fp16, int8], {int8.name: True})
    assert pick.name == int8.name and pick.paired.won == 8 and pick.paired.pairs == 9
    assert pick.paired.p == pytest.approx(10 / 512)
    assert "faster in 8 of 9 paired rounds (one-sided sign test p = 0.02)" in pick.reason
    assert "within the larger round spread" in pick.reason  # the second criterion, reported
    assert MeasuredPick.from_dict(pick.to_dict()) == pick
    # Three rounds won out of three cannot decide (p = 0.125): FP16, and the reason says why.
    short = pick_measured([Measurement("fp16", FP16, (0.62, 0.60, 0.61)), Measurement("c", QDQ, (0.5, 0.5, 0.5))],
                          {"c": True})
    assert short.name == "fp16" and "3 cannot reach p < 0.05, 5 can" in short.reason


def test_paired_rounds_drop_ties_and_rounds_without_a_time():
    a = Measurement("a", QDQ, (1.0, 2.0, float("nan"), 1.0, 0.5, 0.5))
    b = Measurement("b", QDQ, (2.0, 2.0, 1.0, 3.0, 1.0, 0.4))
    r = paired_rounds(a, b)
    assert (r.won, r.lost, r.pairs) == (3, 1, 4) and r.p == pytest.approx(5 / 16) and not r.faster
    assert paired_rounds(b, a).won == 1
    assert paired_rounds(Measurement("x", QDQ, (0.5,) * 15), Measurement("y", QDQ, (0.6,) * 13 + (0.4,) * 2)).p \
        == pytest.approx(121 / 32768)
    assert paired_rounds(a, Measurement("c", QDQ)).p == 1.0  # nothing to pair
    assert PAIRED_MIN_ROUNDS == 5


def test_failed_builds_and_no_fp16():
    ms = [SMALL[0], Measurement("x", QDQ, error="BuildError: no tactic")]
    pick = pick_measured(ms, {"x": True})
    assert pick.name == "fp16" and "x: not measured (BuildError: no tactic)." in pick.notes
    with pytest.raises(UserError, match="no FP16 measurement"):
        pick_measured(SMALL[1:], {"pick": True})


def test_unknown_estimates_are_never_a_reason_to_pick():
    known, note = known_estimates({"a": 0.3, "b": float("nan"), "c": None, "d": float("inf")})
    assert known == {"a": 0.3} and "Cannot estimate b, c, d" in note and "measure" in note
    known, note = known_estimates({"a": float("nan")})
    assert known == {} and "Cannot estimate the latency of any candidate" in note
    assert known_estimates({"a": 1.0}) == ({"a": 1.0}, None)


def _qdq_model(scale: float, quantize_second: bool = True, constant_scale: bool = False):
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    s = numpy_helper.from_array(np.array(scale, np.float32), "s")
    z = numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = []
    inits = [w, z]
    if constant_scale:
        nodes.append(helper.make_node("Constant", [], ["s"], value=s))
    else:
        inits.append(s)
    nodes += [helper.make_node("QuantizeLinear", ["X", "s", "z"], ["q"]),
              helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
              helper.make_node("MatMul", ["dq", "W"], ["h"])]
    if quantize_second:
        nodes += [helper.make_node("QuantizeLinear", ["h", "s", "z"], ["q2"]),
                  helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["dq2"]),
                  helper.make_node("Relu", ["dq2"], ["Y"])]
    else:
        nodes.append(helper.make_node("Relu", ["h"], ["Y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_placement_key_ignores_ranges_but_not_placement():
    a = placement_key(_qdq_model(0.1))
    assert a == placement_key(_qdq_model(0.7))
    assert a != placement_key(_qdq_model(0.1, quantize_second=False))
    assert placement_key(_qdq_model(0.1, constant_scale=True)) == placement_key(_qdq_model(0.5, constant_scale=True))
    renamed = _qdq_model(0.1)
    renamed.doc_string = "another export"
    assert placement_key(renamed) == a


def _engine_key(model):
    """What a build key takes from the model (trt/measure_builds.build_key adds the build settings)."""
    return placement_key(model), qdq_values_key(model)


def test_the_q_dq_values_key_tells_exports_that_differ_in_one_scale_or_zero_point():
    """Issue 44: exports differing only in their ranges share a placement key (they time alike), not an engine."""
    a = _qdq_model(0.1)
    assert _engine_key(a) == _engine_key(_qdq_model(0.1))  # the same export twice
    assert qdq_values_key(a) != qdq_values_key(_qdq_model(0.1000001))
    assert qdq_values_key(_qdq_model(0.1, constant_scale=True)) != qdq_values_key(_qdq_model(0.2, constant_scale=True))
    one_zero_point = _qdq_model(0.1)
    next(t for t in one_zero_point.graph.initializer if t.name == "z").CopyFrom(
        numpy_helper.from_array(np.array(1, np.int8), "z"))
    assert placement_key(one_zero_point) != placement_key(a) and qdq_values_key(one_zero_point) != qdq_values_key(a)
    # One scale of several: the second Q/DQ pair reads its own.
    two = _qdq_model(0.1)
    two.graph.initializer.append(numpy_helper.from_array(np.array(0.1, np.float32), "s2"))
    for n in two.graph.node[-3:-1]:
        n.input[1] = "s2"
    other = _qdq_model(0.1)
    other.graph.initializer.append(numpy_helper.from_array(np.array(0.2, np.float32), "s2"))
    for n in other.graph.node[-3:-1]:
        n.input[1] = "s2"
    assert placement_key(two) == placement_key(other) and qdq_values_key(two) != qdq_values_key(other)


def test_the_float_parts_types_are_in_the_engine_key():
    """An FP16 weight or a Cast to FP16 makes another engine (the placement key hashes every type)."""
    a = _qdq_model(0.1)
    half = _qdq_model(0.1)
    w = next(t for t in half.graph.initializer if t.name == "W")
    w.CopyFrom(numpy_helper.from_array(np.ones((4, 4), np.float16), "W"))
    assert _engine_key(half) != _engine_key(a)
    cast = _qdq_model(0.1)
    cast.graph.node.insert(0, helper.make_node("Cast", ["X"], ["X16"], to=TensorProto.FLOAT16))
    cast.graph.node[1].input[0] = "X16"
    cast32 = _qdq_model(0.1)
    cast32.graph.node.insert(0, helper.make_node("Cast", ["X"], ["X16"], to=TensorProto.FLOAT))
    cast32.graph.node[1].input[0] = "X16"
    assert _engine_key(cast) != _engine_key(cast32)


def test_estimate_and_measurement_side_by_side():
    # The YOLO pick: estimated 32% faster than FP16, measured 1.8x slower.
    ms = [Measurement("fp16", FP16, (0.63, 0.63, 0.63), estimate_ms=1.0),
          Measurement("pick", QDQ, (1.13, 1.15, 1.22), estimate_ms=0.68),
          Measurement("int8_implicit", INT8_IMPLICIT, (0.63, 0.62, 0.64))]
    rows = {r.name: r for r in measurement_rows(ms)}
    assert rows["fp16"].vs_fp16 == 1.0 and rows["fp16"].estimate_error == 0.0 and rows["fp16"].candidate == 0
    assert rows["pick"].vs_fp16 == pytest.approx(1.15 / 0.63)
    assert rows["pick"].estimate_error == pytest.approx(0.68 / (1.15 / 0.63) - 1.0)
    assert math.isnan(rows["int8_implicit"].estimate_error) and rows["int8_implicit"].vs_fp16 > 0
    assert rows["int8_implicit"].to_dict()["estimate_error"] is None  # plan.json has no NaN


def test_a_time_of_zero_or_infinity_is_no_ratio():
    """Issue 32: every ratio to FP16 goes through one guard; a zero or infinite time is NaN, never a division."""
    from trtwidgets.core.plan.measured.pick import MeasuredPick

    assert math.isnan(MeasuredPick("x", 1.0, 0.0, 0.1, "").speedup)
    assert math.isnan(MeasuredPick("x", 0.0, 1.0, 0.1, "").vs_fp16)
    assert MeasuredPick("x", 0.5, 1.0, 0.1, "").vs_fp16 == 0.5
    rows = measurement_rows([Measurement("fp16", FP16, (0.0, 0.0, 0.0), estimate_ms=math.inf),
                             Measurement("#1 a", QDQ, (0.2, 0.2, 0.2), estimate_ms=3.0)])
    assert all(math.isnan(r.vs_fp16) and math.isnan(r.estimate_vs_fp16) and math.isnan(r.estimate_error)
               for r in rows)
    pick = pick_measured([Measurement("fp16", FP16, (0.0, 0.0, 0.0)), Measurement("a", QDQ, (0.2, 0.2, 0.2))],
                         meets={"a": True})
    assert pick.name == "fp16"
