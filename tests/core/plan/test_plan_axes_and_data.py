"""The planner on models that break "axis 0 is the batch", and its held-back split."""

from __future__ import annotations

import numpy as np
import pytest

from tests.core.plan.axis_models import (frames_feeds, frames_model, pooled_frames_model, time_major_feeds,
                                         time_major_model)
from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.batch_axis import BatchAxes, find_batch_axes
from trtwidgets.core.model.load import LoadedModel, summarize
from trtwidgets.core.plan.plan_data import labels_for_held, read_plan_data, run_samples
from trtwidgets.core.plan.planner import plan
from trtwidgets.core.plan.plan_values import PlanTarget
from trtwidgets.core.qdq.options import QdqOptions

TRT10 = QdqOptions(trt_version="10.16")


def _loaded(proto):
    from pathlib import Path

    return LoadedModel(Path("m.onnx"), proto, summarize(proto))


@pytest.mark.parametrize("named", [True, False])
def test_a_time_major_output_is_gathered_along_its_real_batch_axis(named):
    model = time_major_model(named=named)
    samples = time_major_feeds(5)
    axes = find_batch_axes(model, sample=samples[0])
    assert axes.outputs == {"logits": 1}
    out = run_samples(model, samples, axes, batch=4)
    # Batch first: sample i's [T, 1, K] output is out[i], whatever the batch it ran in.
    one = run_samples(model, samples[3:4], axes)
    assert out["logits"].shape == (5, 16, 12)
    np.testing.assert_allclose(out["logits"][3], one["logits"][0], rtol=1e-5, atol=1e-6)


def test_plan_reaches_a_pick_on_a_time_major_output():
    p = plan(time_major_model(named=False), time_major_feeds(12), progress=False, options=TRT10,
             target=PlanTarget.for_metric("top1-agreement"))
    assert p.batch_axes.outputs == {"logits": 1}
    assert any("'logits': batch axis 1" in n for n in p.notes)
    assert p.candidates[0].accuracy.metric == pytest.approx(1.0)  # FP16 agrees with FP32 on every step's class
    assert p.target.metric_name == "top-1 agreement (logits)"


def test_plan_runs_a_model_without_a_batch_axis_sample_by_sample():
    # [94, 16] is one sample of frames x features: cutting axis 0 gave "expected 94x16, found 1x16" before.
    p = plan(frames_model(), frames_feeds(10), progress=False, options=TRT10)
    assert p.batch_axes.inputs == {"x": None} and p.batch_axes.outputs == {"y": None}
    assert any("one at a time" in n for n in p.notes)
    assert p.any_meets_target and len(p.held_back.held_back) == 2 + 1 - 1  # round(10 * 0.25) = 2
    assert p.input_shapes == {"x": (94, 16)}


def test_a_dynamic_axis_0_that_does_not_split_in_a_batch_2_run_is_not_the_batch():
    data = read_plan_data(_loaded(pooled_frames_model()), frames_feeds(6))
    assert data.axes.inputs == {"x": None} and "no output splits" in data.axes.reasons["x"]
    assert len(data.calib) + len(data.held) == 6 and data.held[0]["x"].shape == (94, 16)
    # The user's word still wins.
    assert read_plan_data(_loaded(pooled_frames_model()), frames_feeds(2), batch_axis="x:0").axes.inputs == {"x": 0}


def test_batch_axis_none_is_the_users_word():
    # The model says axis 0 is dynamic; the user says the frames are one sample.
    data = read_plan_data(_loaded(conv_stack()), feeds(6), batch_axis="none")
    assert data.axes.inputs == {"x": None} and data.run_batch() == 1
    with pytest.raises(UserError, match="not an axis"):
        read_plan_data(_loaded(conv_stack()), feeds(6), batch_axis="x:first")


def test_the_held_back_split_is_seeded_random_and_named():
    data = [dict(f) for f in feeds(20)]
    a = read_plan_data(_loaded(conv_stack()), data, seed=0)
    b = read_plan_data(_loaded(conv_stack()), data, seed=0)
    c = read_plan_data(_loaded(conv_stack()), data, seed=1)
    assert a.split.held_back == b.split.held_back and a.split.held_back != c.split.held_back
    assert len(a.split.held_back) == 5 and a.split.to_dict()["seed"] == 0
    # Not the last 25% in data order.
    assert a.split.held_back != tuple(f"sample {i}" for i in range(15, 20))
    for i, sample in zip(a.held_index, a.held):
        np.testing.assert_array_equal(sample["x"], data[i]["x"])
    labels = np.arange(20)
    np.testing.assert_array_equal(labels_for_held(labels, a), list(a.held_index))
    with pytest.raises(UserError, match="labels for 20 samples"):
        labels_for_held(np.arange(7), a)


def test_plan_records_the_held_back_files(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for i, f in enumerate(feeds(8)):
        np.save(d / f"s{i}.npy", f["x"])
    p = plan(conv_stack(), str(d), progress=False, options=TRT10, seed=3)
    doc = p.to_dict()["held_back"]
    assert doc["source"] == "random split" and doc["seed"] == 3 and len(doc["held_back"]) == 2
    assert all(name.endswith(".npy") for name in doc["held_back"] + doc["calibration"])
    assert not set(doc["held_back"]) & set(doc["calibration"])


def test_statistics_collected_on_the_held_back_samples_are_caught():
    import trtwidgets as tw

    model = _loaded(conv_stack())
    data = [dict(f) for f in feeds(12)]
    cal = tw.calibrate(model, data, progress=False)  # saw all 12
    p = plan(model, data, calibration=cal, progress=False, options=TRT10)
    assert any("were also used to collect the statistics" in n for n in p.notes), p.notes
    # Statistics that saw only some of the held-back samples: those leave the held-back part.
    split = read_plan_data(model, data).split
    seen = [data[int(name.split()[-1])] for name in split.held_back[:1]] + data[:2]
    cal_part = tw.calibrate(model, seen, progress=False)
    p2 = plan(model, data, calibration=cal_part, progress=False, options=TRT10)
    assert any("accuracy is measured on the other" in n for n in p2.notes), p2.notes
    assert len(p2.held_back.held_back) == len(split.held_back) - 1


def test_plain_axes_default_keeps_the_old_evaluator_form():
    from trtwidgets.core.plan.plan_eval import Evaluator

    model = conv_stack()
    ev = Evaluator(model, feeds(3), {})
    out = ev.run(model, ev.feeds)
    assert out["y"].shape == (3, 64, 1, 1)
    assert isinstance(BatchAxes({"x": 0}, {"y": 0}), BatchAxes)


def test_labels_without_a_metric_are_refused_before_any_data_is_read(tmp_path):
    import numpy as np
    import pytest

    from trtwidgets.core.common.errors import UserError
    from trtwidgets.core.plan.planner import plan

    # The target refuses them as it is made: before the model or the data is read.
    with pytest.raises(UserError, match="labels were given without a metric") as err:
        plan(tmp_path / "absent.onnx", tmp_path / "absent", target=PlanTarget(labels=np.zeros(4, np.int64)))
    assert "Target.for_metric('top1', labels)" in err.value.fix


def _batch_pinned_model():
    """A static batch-1 model whose Reshape target holds the batch (1, -1): it runs at batch 1 only."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.full((4, 3, 3, 3), 0.1, np.float32), "w")
    target = numpy_helper.from_array(np.array([1, -1], np.int64), "target")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                               helper.make_node("Relu", ["c"], ["r"], name="relu"),
                               helper.make_node("Reshape", ["r", "target"], ["y"], name="flatten")], "pinned",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])], [w, target])
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_batch_the_model_pins_is_refused_before_the_search():
    rng = np.random.default_rng(0)
    data = [{"x": rng.random((1, 3, 8, 8), dtype=np.float32)} for _ in range(8)]
    with pytest.raises(UserError) as err:
        plan(_batch_pinned_model(), data, batch_size=32, progress=False, options=TRT10)
    text = str(err.value)
    assert "cannot run at the shapes asked for (x [32, 3, 8, 8])" in text and "flatten" in text
    assert "dynamic batch" in err.value.fix
    # At its own batch the same model plans, its output read along axis 0: a batch-2 run of it came out along
    # axis 1 (the pinned Reshape folded the second sample in), which is not the batch.
    p = plan(_batch_pinned_model(), data, batch_size=1, progress=False, options=TRT10)
    assert p.input_shapes == {"x": (1, 3, 8, 8)}
    assert p.batch_axes.outputs["y"] == 0 and "pins the batch" in p.batch_axes.reasons["y"]
