"""``trtwidgets.plan`` (trtwidgets/plan_api.py): the core planner, with measure=True meaning this GPU."""

from __future__ import annotations

import inspect

import pytest

import trtwidgets as tw
from trtwidgets.core.plan.planner import plan as core_plan


def test_tw_plan_keeps_the_core_signature_and_docstring():
    assert tw.plan.__doc__ == core_plan.__doc__
    assert inspect.signature(tw.plan) == inspect.signature(core_plan)


def test_measure_true_without_tensorrt_fails_before_the_search(monkeypatch):
    from trtwidgets import trt

    if trt.available():
        pytest.skip("TensorRT is installed here: tests/gpu measure for real")

    def no_search(*args, **kwargs):  # the search must not start when nothing can be measured
        raise AssertionError("the planner ran")

    monkeypatch.setattr("trtwidgets.plan_api._core_plan", no_search)
    with pytest.raises(Exception) as err:
        tw.plan("model.onnx", "samples/", measure=True)
    assert "Traceback" not in str(err.value) and getattr(err.value, "fix", "")
