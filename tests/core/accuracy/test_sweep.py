from __future__ import annotations

import numpy as np
import pytest

from trtwidgets import demo
from trtwidgets.core.accuracy.sweep import plan_sweep, run_sweep
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.load import load_model


def test_plan_sweep_qdq_and_errors():
    report_layers = ["c3", "c1", "c2"]
    plan = plan_sweep(report_layers, steps=(0, 1, 2, 10, 10), mode="qdq_exclude")
    assert [s.n for s in plan] == [0, 1, 2, 3]
    assert plan[2].exclude == ("c3", "c1") and plan[0].exclude == ()
    assert plan_sweep(report_layers, mode="auto", trt_major=11)[1].mode == "qdq_exclude"
    with pytest.raises(UserError, match="recipe"):
        plan_sweep(report_layers, mode="layer_precision")
    with pytest.raises(UserError, match="Unknown sweep mode"):
        plan_sweep(report_layers, mode="fp4")


def test_run_sweep_records_failures_and_latency():
    from trtwidgets.core.accuracy.metrics import compare_tensor

    plan = plan_sweep(["a", "b"], steps=(0, 1, 2), mode="qdq_exclude")
    ref = np.arange(10.0)

    def build(step):
        if step.n == 1:
            raise UserError("build failed", "because", "fix it")
        return step.n

    def evaluate(n):
        return {"y": compare_tensor(ref, ref + 1.0 / (1 + n))}

    seen = []
    result = run_sweep(plan, build, evaluate, benchmark=lambda n: 1.0 + n, on_step=seen.append)
    assert [r.step.n for r in result.steps] == [0, 1, 2] and len(seen) == 3
    assert result.steps[1].error.startswith("build failed") and result.steps[1].metrics == {}
    assert result.steps[2].worst_snr_db > result.steps[0].worst_snr_db
    assert result.steps[2].median_ms == 3.0
    assert len(result.to_rows()) == 3


def test_layer_precision_plan_uses_recipe():
    from trtwidgets.core.recipe.recipe import Recipe

    base = Recipe.for_model(load_model(demo.MODEL_PATH)).replace(flags=("int8",))
    plan = plan_sweep(["conv_a", "conv_b"], steps=(0, 2), recipe=base, trt_major=8)
    assert plan[0].recipe == base and plan[0].mode == "layer_precision"
    r2 = plan[1].recipe
    assert "fp16" in r2.flags and "int8" in r2.flags and r2.precision_constraints == "prefer"
    assert [(lp.pattern, lp.precision) for lp in r2.layer_precisions] == [("conv_a", "fp16"), ("conv_b", "fp16")]
    assert plan[1].to_dict()["recipe"]["flags"]
    with pytest.raises(UserError, match="TensorRT 11"):
        plan_sweep(["conv_a"], recipe=base, mode="layer_precision", trt_major=11)
