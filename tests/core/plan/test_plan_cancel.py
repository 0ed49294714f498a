"""Stopping a plan: a cancel token returns the Plan of what was found within seconds, and an ORT run in flight stops."""

from __future__ import annotations

import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.core.common.cancel import Cancelled, cancel_scope, check
from trtwidgets.core.common.ort import open_session
from trtwidgets.core.plan.phases import METHOD_ORDER
from trtwidgets.core.plan.plan_artifact import Plan
from trtwidgets.core.plan.plan_values import PlanTarget
from trtwidgets.core.plan.planner import plan


def _slow_model(n: int = 400, size: int = 768) -> onnx.ModelProto:
    """A chain of ``n`` MatMuls of ``size`` x ``size``: seconds to minutes of work on a CPU, one kernel at a time."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32), "w")
    nodes, t = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("MatMul", [t, "w"], [f"m{i}"], name=f"mm{i}"))
        t = f"m{i}"
    graph = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
                              [helper.make_tensor_value_info(t, TensorProto.FLOAT, [size, size])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _set_later(token, seconds: float) -> threading.Thread:
    def later():
        time.sleep(seconds)
        token.set()

    t = threading.Thread(target=later, daemon=True)
    t.start()
    return t


def test_a_cancel_stops_an_onnx_runtime_run_in_flight():
    model = _slow_model()
    sess = open_session(model, threads=1)
    x = np.eye(768, dtype=np.float32)
    token = threading.Event()
    t = time.perf_counter()
    with cancel_scope(token):
        _set_later(token, 0.3)
        with pytest.raises(Cancelled):
            sess.run(None, {"x": x})
    took = time.perf_counter() - t
    # 400 kernels of 0.45 GMAC each: many seconds on one thread; the cancel ends it within a second or two.
    assert took < 3.0
    with cancel_scope(token), pytest.raises(Cancelled):
        check()  # once set, every later unit of work stops at once
    check()  # outside a scope nothing is watched


def test_a_token_without_is_set_is_refused():
    from trtwidgets.core.common.errors import UserError

    with pytest.raises(UserError, match="is_set"):
        with cancel_scope(object()):
            pass


def _cancel_when(phase: str, token, delay: float, when: dict):
    """A progress callable that cancels (from another thread, ``delay`` s later) once ``phase`` has done a unit."""

    def on_event(e):
        if e.kind == "step" and e.phase == phase and e.step >= 1 and "at" not in when:
            when["at"] = time.perf_counter() + delay
            if delay:
                _set_later(token, delay)
            else:  # at once: a phase whose remaining units take less than any delay is still cut short
                token.set()

    return on_event


def test_cancel_during_the_layer_costs_returns_a_valid_partial_plan_within_5_s(tmp_path):
    token = threading.Event()
    when: dict = {}
    steps = []
    cancel_at = _cancel_when("layer cost", token, 0.0, when)

    def on_event(e):
        if e.kind == "start":
            steps.append(e.phase)
        cancel_at(e)

    p = plan(conv_stack(), feeds(), shapes={"x": (16, 64, 56, 56)}, progress=on_event,
             target=PlanTarget(cosine=0.9999999), cancel=token)
    returned = time.perf_counter()
    assert "at" in when, "the search never reached the layer costs"
    assert returned - when["at"] < 5.0
    assert p.interrupted and p.to_dict()["interrupted"] is True
    names = [c.name for c in p.candidates]
    assert names[0] == "FP16 (no INT8)" and "INT8 where it pays" in names
    assert any("cancel" in n for n in p.notes)
    assert any(s.startswith("measuring") for s in steps)
    # What it returns is a plan like any other: saved and read back by its own checks.
    p.save_json(tmp_path / "plan.json")
    back = Plan.load(tmp_path / "plan.json")
    assert back.interrupted and [c.name for c in back.candidates] == names
    assert back.recommended == p.recommended


def test_cancel_before_any_candidate_returns_fp16_only():
    token = threading.Event()
    token.set()  # cancelled before it starts: what was found is nothing but the model and its data
    t = time.perf_counter()
    p = plan(conv_stack(), feeds(), progress=False, cancel=token)
    assert time.perf_counter() - t < 5.0
    # FP16 is judged like every candidate: unscored, it is not recommended either.
    assert p.interrupted and len(p.candidates) == 1 and p.pick is None and "before FP16 was scored" in p.reason
    assert any("cancelled before any INT8 candidate" in n for n in p.notes)
    Plan.from_dict(p.to_dict())


def test_progress_reports_each_phase_unit():
    seen = []
    plan(conv_stack(), feeds(), shapes={"x": (16, 64, 56, 56)}, target=PlanTarget(cosine=0.9999999),
         progress=lambda e: seen.append((e.phase, e.step, e.total)) if e.kind == "step" else None)
    methods = [s for s in seen if s[0] == "range methods"]
    # The calibration's own method (auto by default) and each of the four others.
    assert methods[0][1] == 0 and methods[-1][1] == methods[-1][2] == 1 + len(METHOD_ORDER) == 5
    costs = [s for s in seen if s[0] == "layer cost"]
    assert costs and costs[-1][1] == costs[-1][2] >= 1
