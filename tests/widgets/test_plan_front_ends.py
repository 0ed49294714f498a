"""The Plan step as a front end (issues 30 and 34): it plans with the session's calibration and held-back
folder, so the App, the CLI and the API pick the same candidate; it runs in the background and Cancel keeps
what was found; the notes of a step are shown in it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import pytest

import trtwidgets as tw
from tests.conftest import ROOT
from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.widgets import App, CalibrateStep, PlanStep, Session
from trtwidgets.widgets.app import PLAN


def _summary(plan):
    return (plan.pick.name, plan.recommended, plan.ranges.method,
            [(c.name, frozenset(c.quantized), round(float(c.accuracy.cosine), 5)) for c in plan.candidates])


@pytest.fixture(scope="module")
def compute_bound_model(tmp_path_factory):
    """A conv stack whose samples make it compute bound (16x64x56x56 at batch 16), so that INT8 pays by the cost
    model and the pick is a real choice. (The demo classifier's layers are small: at batch 32 INT8 ran 0.89-0.99x FP16
    on the GPU, and the cost model, whose INT8 speed-up grows with a layer's work, estimates no gain there.)"""
    root = tmp_path_factory.mktemp("stack_data")
    onnx.save(conv_stack(), root / "stack.onnx")
    for sub, n, seed in (("data", 12, 5), ("held", 6, 6)):
        (root / sub).mkdir()
        for i, feed in enumerate(feeds(n, size=56, seed=seed)):
            np.save(root / sub / f"s{i:02d}.npy", feed["x"])
    return root


def test_the_app_the_cli_and_the_api_pick_the_same_candidate(compute_bound_model, tmp_path):
    root = compute_bound_model
    model, data, held = root / "stack.onnx", str(root / "data"), str(root / "held")
    api = tw.plan(tw.load(model), data, held_back=held, batch_size=16, progress=False)
    cli = subprocess.run([sys.executable, "-m", "trtwidgets", "plan", str(model), "--data", data,
                          "--held-back", held, "--batch", "16", "--out", str(tmp_path / "cli"), "--no-progress"],
                         capture_output=True, text=True, cwd=tmp_path, env=_env())
    assert cli.returncode == 0, cli.stderr
    from_cli = tw.Plan.load(tmp_path / "cli")
    app = App(model_path=model, data=data, held_back=held, out_dir=str(tmp_path / "app"))
    assert app.calibrate(progress=False), app.error.value
    app.plan_step.batch.value = 16
    assert app.plan(), app.plan_step.status.value
    from_app = app.session.plan
    assert api.pick.quantized, api.table()  # a real choice was made
    assert _summary(from_app) == _summary(api) == _summary(from_cli)
    # The App says which samples were held back: the folder's files.
    assert from_app.held_back.source == "held-back data" and len(from_app.held_back.held_back) == 6
    assert "s00.npy" in app.plan_step.status.value
    # The held-back data changes afterwards: the plan is kept, and the Plan tab says it is out of date.
    assert app.use_held_back("")
    assert app.session.plan is from_app and app.tabs.get_title(PLAN).endswith("(stale)")
    assert "held-back data changed" in app.banner.value and "held-back data changed" in app.plan_step.stale_note.value


def _env():
    import os

    return dict(os.environ, PYTHONPATH=str(ROOT))


def test_the_plan_step_plans_with_the_sessions_calibration_overrides_included(tmp_path):
    onnx.save(conv_stack(), tmp_path / "stack.onnx")
    s = Session()
    assert s.load(tmp_path / "stack.onnx")
    s.calibration = tw.calibrate(s.model, feeds(16), progress=False)  # as from a file: cal = tw.Calibration.load(...)
    s.calibration = s.calibration.with_override("r1", 2.5)  # what the explorer's Apply override does
    step = PlanStep(s, data=feeds(), out_dir=tmp_path / "out")
    assert step.run(), step.status.value
    assert dict(s.plan.ranges.overrides) == {"r1": 2.5} and s.plan.ranges.amax["r1"] == 2.5
    assert "the session's calibration" in step.inputs_note.value and s.stale == {}
    # The calibration changes afterwards: the plan is kept and said to be out of date.
    s.calibration = s.calibration.without_override("r1")
    assert "plan" in s.stale and "calibration changed" in step.stale_note.value and step.plan is s.plan


def test_the_plan_runs_in_the_background_and_cancel_keeps_what_was_found_within_5_s(tmp_path):
    onnx.save(conv_stack(), tmp_path / "stack.onnx")
    s = Session()
    assert s.load(tmp_path / "stack.onnx")
    # 56x56 samples at batch 16: compute bound, INT8 pays, so the search measures every layer's cost.
    step = PlanStep(s, data=feeds(24, size=56), out_dir=tmp_path / "out")
    step.batch.value = 16
    step.target.value = 0.9999999
    reached = threading.Event()
    phases = []

    def watch(change):
        phases.append(change["new"])
        if "layer cost" in change["new"]:
            reached.set()

    step.phase.observe(watch, "value")
    t = time.perf_counter()
    assert step.start()
    assert time.perf_counter() - t < 2.0 and step.running  # the kernel is free while it plans
    assert step.run_button.disabled and not step.cancel_button.disabled and not step.start()  # one at a time
    assert reached.wait(300), f"the search never reached the layer costs: {phases}"
    clicked = time.perf_counter()
    step.cancel_button.click()
    step.wait(60)
    took = time.perf_counter() - clicked
    assert not step.running and took < 5.0, f"Cancel took {took:.1f} s"
    plan = s.plan
    assert plan is not None and plan.interrupted
    assert [c.name for c in plan.candidates][0] == "FP16 (no INT8)" and any("cancel" in n for n in plan.notes)
    assert "Interrupted" in step.status.value and step.chart_box.children
    assert not step.run_button.disabled and step.cancel_button.disabled
    # Progress was shown per phase, with counts.
    assert any("range methods" in p and "/5" in p for p in phases)  # auto (the calibration's) and the four others


def test_the_notes_of_a_step_are_shown_in_it_onnx_runtimes_errors_among_them(tmp_path):
    from tests.core.common.test_ort_log import cubic_3d

    onnx.save(cubic_3d(), tmp_path / "cubic.onnx")
    s = Session()
    assert s.load(tmp_path / "cubic.onnx")
    step = CalibrateStep(s)
    errors = []
    step.on_error(errors.append)
    x = np.ones((1, 4, 8), np.float32)
    assert step.calibrate(data=[{"x": x}, {"x": x}], progress=False) is False
    assert errors and errors[-1]
    # ONNX Runtime's own error, in the step, naming the node and what it means (not only in the server log).
    assert "/backbone/embeddings/Resize" in step.notes_view.value and "Cubic" in step.notes_view.value
    assert "While collecting statistics" in step.notes_view.value and len(step.notes) >= 1
