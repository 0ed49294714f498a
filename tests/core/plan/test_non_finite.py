"""NaN is never judged as passing (issue 32): a candidate with NaN or Inf where FP32 is finite fails, in the
planner as on the engine; FP32's own NaN is said in the notes; references that are NaN throughout judge nothing."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.batch_axis import BatchAxes
from trtwidgets.core.plan.engine_check import EngineCheck
from trtwidgets.core.plan.plan_accuracy import non_finite_where_finite, reference_notes, score_outputs
from trtwidgets.core.plan.plan_values import EngineVerdict, PlanAccuracy, PlanTarget
from trtwidgets.core.plan.planner import plan
from trtwidgets.core.qdq.options import QdqOptions


def sqrt_model(held, margin: float, seed: int = 0, k: int = 16, n_out: int = 10) -> onnx.ModelProto:
    """``y = Sqrt(x @ w - m)``, ``m`` just below the smallest ``x @ w`` of the held-back samples in each column:
    FP32 is finite everywhere, and INT8's rounding of ``x`` and ``w`` takes some of those values below zero."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.3, (k, n_out)).astype(np.float32)
    fc = np.concatenate([h["x"] for h in held]) @ w
    m = (fc.min(0) - margin).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["fc"], name="fc"),
             helper.make_node("Sub", ["fc", "m"], ["d"], name="sub"),
             helper.make_node("Sqrt", ["d"], ["y"], name="sqrt")]
    graph = helper.make_graph(nodes, "sqrt_fc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n_out])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(m, "m")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _samples(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return [{"x": rng.random((1, 16), np.float32)} for _ in range(n)]


def test_an_int8_candidate_with_nan_where_fp32_is_finite_misses_whatever_its_cosine():
    calib, held = _samples(16, 1), _samples(4, 2)
    p = plan(sqrt_model(held, 3e-3), calib, held_back=held, progress=False, options=QdqOptions(trt_version="10.16"))
    int8 = p.candidates[1]
    # The scores leave non-finite positions out: the cosine stays high, and before issue 32 the candidate "met".
    assert int8.accuracy.cosine > 0.999 and int8.accuracy.non_finite >= 1
    assert not int8.meets_target and p.recommended == 0
    assert "NaN/Inf where FP32 is finite" in p.table()
    assert p.candidates[0].accuracy.non_finite == 0 and p.candidates[0].meets_target
    again = type(p).from_dict(p.to_dict())  # plan.json keeps the count
    assert again.candidates[1].accuracy.non_finite == int8.accuracy.non_finite and not again.candidates[1].meets_target


def test_fp32s_own_nan_is_reported_and_nan_everywhere_is_refused():
    calib, held = _samples(16, 1), _samples(4, 2)
    # m above the smallest values: FP32 itself takes Sqrt of negatives there.
    p = plan(sqrt_model(held, -0.05), calib, held_back=held, progress=False, options=QdqOptions(trt_version="10.16"))
    assert any("FP32's output 'y' holds" in n and "NaN or Inf" in n for n in p.notes), p.notes
    with pytest.raises(UserError, match="NaN or Inf in every value") as err:
        plan(sqrt_model(held, -1e6), calib, held_back=held, progress=False, options=QdqOptions(trt_version="10.16"))
    assert err.value.why and err.value.fix


def test_the_count_and_the_notes_on_numbers():
    ref = {"y": np.array([[1.0, np.nan, 2.0, 3.0]]), "s": np.array([[np.inf, np.inf]])}
    cand = {"y": np.array([[np.nan, np.nan, np.inf, 3.0]]), "s": np.array([[1.0, np.nan]])}
    assert non_finite_where_finite(ref, cand) == 2  # y[0] and y[2]; y[1] is NaN in FP32 too, s is never finite
    notes = reference_notes(ref)
    assert any("'y' holds 1 NaN or Inf of its 4" in n for n in notes) and any("'s' is NaN or Inf in every" in n
                                                                               for n in notes)
    assert score_outputs(ref, cand).non_finite == 2
    with pytest.raises(UserError):
        reference_notes({"s": ref["s"]})
    acc = PlanAccuracy(cosine=1.0, snr_db=60.0, non_finite=2)
    assert not acc.meets(PlanTarget(cosine=0.5)) and PlanAccuracy.from_dict(acc.to_dict()) == acc
    assert "non_finite" not in PlanAccuracy(cosine=1.0, snr_db=60.0).to_dict()  # plan.json as before


def test_the_engine_check_applies_the_same_rule():
    feeds = [{"x": np.ones((1, 4), np.float32)} for _ in range(2)]
    ref = {"y": np.array([[1.0, 2.0, np.nan, 4.0], [1.0, 2.0, 3.0, 4.0]], np.float32)}
    check = EngineCheck.of_plan(feeds, ref, BatchAxes({"x": 0}, {"y": 0}), PlanTarget(cosine=0.99), None)
    same_nan = check.verdict({"y": ref["y"].copy()})
    assert same_nan.meets and not same_nan.non_finite  # NaN where FP32 is NaN: the same model, not a failure
    broken = ref["y"].copy()
    broken[1, 0] = np.nan
    verdict = check.verdict({"y": broken})
    assert verdict.meets is False and verdict.non_finite and verdict.accuracy.non_finite == 1
    assert math.isfinite(verdict.accuracy.cosine) and verdict.accuracy.cosine > 0.99
    back = EngineVerdict.from_dict(verdict.to_dict())
    assert back.non_finite and back.accuracy.non_finite == 1
