"""The Plan step, driven without a browser: the search, the chart click, the export."""

from __future__ import annotations

import onnx

from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets import demo
from trtwidgets.widgets.plan_step import PlanStep
from trtwidgets.widgets.session import Session


def test_plan_step_on_the_demo_says_fp16_and_shows_the_chart(tmp_path):
    session = Session()
    assert session.load(demo.MODEL_PATH)
    step = PlanStep(session, out_dir=tmp_path)
    assert step.run(), step.status.value
    assert "FP16 is best here" in step.status.value
    assert "FP16 (no INT8)" in step.table.value
    assert step.chart is not None and step.chart_box.children
    assert step.export_button.disabled  # nothing to export when FP16 is the pick
    step.select(1)  # what a click on point 1 does
    cand = step.plan.candidates[1]
    assert f"{len(cand.quantized)} INT8 layers" in step.detail.value
    # A candidate with layers kept float lists them with the reason.
    kept = next((i for i, c in enumerate(step.plan.candidates) if c.kept), None)
    if kept is not None:
        step.select(kept)
        assert "kept in high precision" in step.detail.value


def test_plan_step_exports_an_int8_pick(tmp_path):
    path = tmp_path / "stack.onnx"
    onnx.save(conv_stack(), path)
    session = Session()
    assert session.load(path)
    step = PlanStep(session, data=feeds(), out_dir=tmp_path / "out")
    step.batch.value = 256  # 256x64x8x8: compute bound, INT8 pays
    assert step.run(), step.status.value
    assert step.plan.pick.quantized, step.plan.table()
    assert not step.export_button.disabled
    written = step.export()
    assert written is not None and written.exists() and (tmp_path / "out" / "plan.json").exists()


def test_plan_step_without_model_or_data_says_what_to_do(tmp_path):
    session = Session()
    step = PlanStep(session)
    assert not step.run() and "Load one" in step.status.value
    path = tmp_path / "stack.onnx"
    onnx.save(conv_stack(), path)
    assert session.load(path)
    assert not step.run()
    assert "calibration data" in step.status.value and "Traceback" not in step.status.value


def test_plan_step_measure_without_a_gpu_says_where_to_measure(tmp_path):
    from trtwidgets import trt

    if trt.available():
        import pytest

        pytest.skip("TensorRT is installed here: tests/gpu measure for real")
    path = tmp_path / "stack.onnx"
    onnx.save(conv_stack(), path)
    session = Session()
    assert session.load(path)
    step = PlanStep(session, data=feeds(), out_dir=tmp_path / "out")
    step.measure.value = True
    assert not step.run() and step.plan is None
    assert "cannot build and time engines" in step.status.value and "plan measure PLAN_DIR" in step.status.value
    assert not step.run_button.disabled
    # Unticked, the same step plans, and the plan says its latency is an estimate.
    step.measure.value = False
    assert step.run(), step.status.value
    assert step.plan.latency_status == "estimate" and "Not measured" in step.status.value


def test_plan_step_takes_a_task_metric_by_name(tmp_path):
    path = tmp_path / "stack.onnx"
    onnx.save(conv_stack(), path)
    session = Session()
    assert session.load(path)
    step = PlanStep(session, data=feeds(12), out_dir=tmp_path / "out")
    step.metric.value = "top1-agreement"
    assert step.run(), step.status.value
    assert step.plan.target.metric_name == "top-1 agreement (y)" and step.plan.target.cosine is None
    step.metric.value = "no_such_module_here:f"
    assert not step.run() and "does not import" in step.status.value


def test_plan_step_exports_a_rewritten_fp16_pick_as_the_float_model(tmp_path):
    """FP16 of the rewritten graph as the pick (what a measured plan picks when the rewrites alone pay): the step
    writes the rewritten float model, not a Q/DQ model, and an earlier plan's model.qdq.onnx goes with the old set."""
    import dataclasses

    from tests.core import region_models as rm

    plan, path = rm.planned_c2f(tmp_path)
    session = Session()
    assert session.load(path)
    step = PlanStep(session, out_dir=tmp_path / "out")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "model.qdq.onnx").write_bytes(b"an earlier plan's pick")
    i = next(k for k, c in enumerate(plan.candidates) if c.rewritten)
    session.set_plan(dataclasses.replace(plan, recommended=i))  # what a measured run hands the step
    step.show(session.plan)
    assert not step.export_button.disabled
    written = step.export()
    assert written is not None and written.name == "model.rewritten.onnx", step.status.value
    got = onnx.load(str(written))
    assert not any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in got.graph.node)
    assert not (tmp_path / "out" / "model.qdq.onnx").exists() and (tmp_path / "out" / "plan.json").exists()
