"""One progress protocol: calibrate, plan and a measurement's events are ProgressEvents, to one kind of callable."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import trtwidgets as tw
from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.core.common.progress import ProgressEvent, split_progress
from trtwidgets.core.plan.plan_values import PlanTarget
from trtwidgets.trt.build_job import MeasureProgress


def test_split_progress_reads_the_three_forms_and_refuses_others():
    sink = [].append
    assert split_progress(True) == (True, None) and split_progress(False) == (False, None)
    assert split_progress(None) == (False, None) and split_progress(sink) == (False, sink)
    with pytest.raises(TypeError, match="callable that receives a ProgressEvent"):
        split_progress("yes")


def test_calibrate_sends_its_batches_as_events():
    events = []
    data = [{"x": np.random.default_rng(i).standard_normal((2, 64, 56, 56)).astype(np.float32)} for i in range(3)]
    cal = tw.calibrate(conv_stack(), data, progress=events.append)
    assert cal.stats.samples == 6
    kinds = [e.kind for e in events]
    assert kinds[0] == "start" and kinds[-1] == "finish" and set(kinds[1:-1]) == {"step"}
    assert {e.phase for e in events} == {"calibration statistics"}
    done = [e.step for e in events if e.kind == "step"]
    assert done == sorted(set(done)) and done[-1] == events[-1].step == 6  # samples so far, each batch
    assert all(isinstance(e, ProgressEvent) for e in events)


def test_plan_sends_phase_starts_and_counted_units_and_the_old_callbacks_still_work_with_a_warning():
    events, steps, units = [], [], []
    kw = dict(shapes={"x": (16, 64, 56, 56)}, target=PlanTarget(cosine=0.9999999), regions=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new form warns of nothing
        new = tw.plan(conv_stack(), feeds(), progress=events.append, **kw)
    starts = [e.phase for e in events if e.kind == "start"]
    assert "reading data" in starts and "collecting statistics" in starts
    costs = [e for e in events if e.kind == "step" and e.phase == "layer cost"]
    assert costs and costs[-1].step == costs[-1].total >= 1
    with pytest.warns(DeprecationWarning, match="progress=f") as caught:
        old = tw.plan(conv_stack(), feeds(), progress=False, on_step=steps.append,
                      on_progress=lambda *a: units.append(a), **kw)
    assert caught[0].filename == __file__  # the user's line, not the toolkit's
    assert steps == starts and units == [(e.phase, e.step, e.total) for e in events if e.kind == "step"]
    assert [c.name for c in old.candidates] == [c.name for c in new.candidates]


def test_a_measurements_events_are_progress_events_with_their_own_words():
    e = MeasureProgress.of("build", 2, 5, "fp16", cached=True)
    assert isinstance(e, ProgressEvent) and (e.kind, e.phase, e.step, e.total, e.detail) == ("step", "build", 2, 5,
                                                                                               "fp16")
    assert (e.stage, e.done, e.name) == ("build", 2, "fp16")
    assert e.text() == "builds 2/5 done, 3 left (fp16 cached)"
    assert MeasureProgress.of("time", 3, 9).text() == "timing round 3/9"
    assert ProgressEvent("step", "layer cost", step=4, total=96, detail="conv1").text() == "layer cost 4/96 (conv1)"
