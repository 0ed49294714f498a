"""The planner's accuracy sees every output's channel groups; task metrics by name, by module, by callable."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from tests.core.plan.axis_models import detector_feeds, packed_detector_model
from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.plan.plan_accuracy import score_outputs, target_notes
from trtwidgets.core.plan.plan_target import metric_factory
from trtwidgets.core.plan.plan_values import PlanTarget
from trtwidgets.core.plan.planner import plan
from trtwidgets.core.qdq.options import QdqOptions

TRT10 = QdqOptions(trt_version="10.16")


def _packed(n=4, anchors=256, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    boxes = rng.uniform(0, 640, (n, 4, anchors))
    scores = rng.uniform(0, 1, (n, classes, anchors))
    return np.concatenate([boxes, scores], axis=1).astype(np.float32)


def test_the_score_of_a_packed_detector_output_is_its_worst_group_not_the_pooled_cosine():
    ref = _packed()
    cand = ref.copy()
    rng = np.random.default_rng(1)
    cand[:, 4:] = np.clip(cand[:, 4:] + rng.normal(0, 0.25, cand[:, 4:].shape), 0, 1)  # the scores only
    score = score_outputs({"output0": ref}, {"output0": cand})
    assert score.pooled_cosine > 0.999  # the boxes hide the damage from a pooled cosine
    assert score.worst == "output0[scores]" and score.cosine < 0.95
    # Damage to the boxes alone is seen as well, in the boxes group.
    boxes_hit = ref.copy()
    boxes_hit[:, :4] += rng.normal(0, 80, boxes_hit[:, :4].shape)
    assert score_outputs({"output0": ref}, {"output0": boxes_hit}).worst == "output0[boxes]"


def test_every_output_counts():
    ref = {"a": np.ones((4, 10), np.float32), "b": np.linspace(-1, 1, 40, dtype=np.float32).reshape(4, 10)}
    cand = {"a": ref["a"].copy(), "b": -ref["b"]}
    score = score_outputs(ref, cand)
    assert score.worst == "b[all]" and score.cosine < 0


def test_target_notes_say_what_the_target_cannot_see():
    ref = {"output0": _packed(), "aux": np.ones((4, 8), np.float32)}
    pooled = target_notes(ref, PlanTarget(cosine=None, metric_factory=lambda *a: None), ("output0",), True)
    assert any("pooled cosine/SNR" in n and "scores" in n for n in pooled)
    assert any("'aux'" in n and "not checked" in n for n in pooled)
    default = target_notes(ref, PlanTarget())
    assert any("worst channel group instead" in n for n in default) and not any("warning" in n for n in default)


def test_plan_with_the_detection_metric_on_a_packed_detector_output():
    p = plan(packed_detector_model(), detector_feeds(12), progress=False, options=TRT10,
             target=PlanTarget.for_metric("detection"))
    assert p.target.metric_name == "detection F1@0.25 (output0)" and p.target.cosine is None
    assert p.candidates[0].accuracy.metric_reference == 1.0
    assert all(c.accuracy.worst_group.startswith("output0[") for c in p.candidates)
    assert p.any_meets_target
    # The detection F1's own allowance (F1 >= 0.95 against FP32), recorded; a candidate is judged by it.
    assert p.target.max_metric_drop == 0.05 and p.to_dict()["target"]["max_metric_drop"] == 0.05
    for c in p.candidates:
        assert c.meets_target == (c.accuracy.metric >= 1.0 - 0.05), c
    # A drop the user gives wins over the metric's own.
    strict = plan(packed_detector_model(), detector_feeds(12), progress=False, options=TRT10,
                  target=PlanTarget(cosine=None, max_metric_drop=0.001, metric_factory=metric_factory("detection")))
    assert strict.target.max_metric_drop == 0.001
    for c in strict.candidates:
        assert c.meets_target == (c.accuracy.metric >= 1.0 - 0.001), c


def test_plan_with_a_pooled_cosine_metric_warns_that_it_is_blind_to_the_scores():
    p = plan(packed_detector_model(), detector_feeds(12), progress=False, options=TRT10,
             target=PlanTarget.for_metric("cosine"))
    assert any(n.startswith("warning: the target's metric is a pooled cosine/SNR") for n in p.notes), p.notes


def test_plan_default_target_is_checked_on_channel_groups():
    p = plan(packed_detector_model(), detector_feeds(12), progress=False, options=TRT10)
    assert any("the target is checked on the worst channel group" in n for n in p.notes), p.notes
    full = p.candidates[1]
    assert full.accuracy.cosine <= full.accuracy.pooled_cosine
    assert p.to_dict()["candidates"][1]["accuracy"]["worst_group"].startswith("output0[")


def test_plan_takes_the_users_metric_by_module_name_and_as_a_callable(tmp_path, monkeypatch):
    (tmp_path / "my_task_metrics.py").write_text(textwrap.dedent("""
        import numpy as np

        def sign_agreement(reference, candidate):
            r, c = reference["y"], candidate["y"]
            return float(np.mean(np.sign(r - r.mean()) == np.sign(c - r.mean())))

        def wrong(reference):
            return 1.0
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    p = plan(conv_stack(), feeds(12), progress=False, options=TRT10,
             target=PlanTarget.for_metric("my_task_metrics:sign_agreement"))
    assert p.target.metric_name == "my_task_metrics:sign_agreement"
    assert p.candidates[0].accuracy.metric_reference == 1.0 and p.candidates[1].accuracy.metric is not None

    calls = []

    def mine(reference, candidate):
        calls.append(1)
        return float(np.mean(np.abs(reference["y"] - candidate["y"]) < 0.05))

    p2 = plan(conv_stack(), feeds(12), progress=False, options=TRT10,
              target=PlanTarget.for_metric(mine, cosine=0.5, max_metric_drop=0.2))
    assert calls and p2.target.cosine == 0.5 and p2.target.max_metric_drop == 0.2
    # A metric of the user's own, with no drop given: the default of 0.01.
    assert plan(conv_stack(), feeds(12), progress=False, options=TRT10,
                target=PlanTarget.for_metric(mine)).target.max_metric_drop == 0.01
    with pytest.raises(UserError, match="does not take"):
        plan(conv_stack(), feeds(12), progress=False, target=PlanTarget.for_metric("my_task_metrics:wrong"))


def test_a_metric_infinite_on_fp32_is_refused_with_the_fix():
    with pytest.raises(UserError, match="scores inf on FP32") as err:
        plan(conv_stack(), feeds(8), progress=False, target=PlanTarget.for_metric(lambda r, c: float("inf")))
    assert "--target-snr" in err.value.fix
    with pytest.raises(UserError, match="snr is not a task metric") as err:  # an SNR is a target, said before work
        plan(conv_stack(), feeds(8), progress=False, target=PlanTarget.for_metric("snr"))
    assert "--target-snr" in err.value.fix
