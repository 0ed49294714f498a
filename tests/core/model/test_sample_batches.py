"""The one sample batcher: files cut into samples, samples joined into runs, outputs gathered batch first.

Calibration's feed loop, the planner's held-back split and run, and the engine check all go through
:mod:`trtwidgets.core.model.sample_batches`; these tests hold it to what each did before it was one.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.core.model.test_batch_axis import time_major
from trtwidgets.core.common.errors import CalibrationDataError, UserError
from trtwidgets.core.model.batch_axis import BatchAxes, find_batch_axes
from trtwidgets.core.model.sample_batches import SampleBatcher, SampleCutter, gather_outputs, run_in_batches


def test_a_file_of_several_samples_is_cut_along_each_inputs_batch_axis():
    feed = {"x": np.arange(3 * 2 * 4, dtype=np.float32).reshape(2, 3, 4), "sr": np.array(16000)}
    cutter = SampleCutter({"x": 1, "sr": None})
    parts = cutter.split(feed, strict=True)
    assert len(parts) == 3 and parts[1]["x"].shape == (2, 1, 4) and parts[2]["sr"] == 16000
    np.testing.assert_array_equal(parts[1]["x"][:, 0], feed["x"][:, 1])
    np.testing.assert_array_equal(cutter.join(parts)["x"], feed["x"])  # joined back along the same axis
    assert len(SampleCutter({"x": None, "sr": None}).split(feed, strict=True)) == 1
    with pytest.raises(UserError, match="different numbers of samples") as err:
        SampleCutter({"a": 0, "b": 0}).split({"a": np.zeros((2, 3)), "b": np.zeros((3, 3))}, strict=True)
    assert isinstance(err.value, CalibrationDataError) and "--batch-axis" in err.value.fix
    # Not strict (a feed used as it is): counted by its first batched input.
    assert len(SampleCutter({"a": 0, "b": 0}).split({"a": np.zeros((2, 3)), "b": np.zeros((3, 3))})) == 2


def test_a_static_leading_one_beside_batched_inputs_passes_whole():
    # A [1, C] parameter broadcast over the batch: calibration passed it whole, and so does the planner now.
    feed = {"x": np.zeros((4, 3)), "p": np.ones((1, 3))}
    parts = SampleCutter({"x": 0, "p": 0}, fixed={"p"}).split(feed, strict=True)
    assert len(parts) == 4 and all(p["p"].shape == (1, 3) and p["x"].shape == (1, 3) for p in parts)
    # Every input fixed (a static batch-1 model): the file's rows are still its samples.
    assert len(SampleCutter({"x": 0}, fixed={"x"}).split({"x": np.zeros((5, 3))}, strict=True)) == 5


def test_samples_come_with_or_without_their_batch_axis():
    cutter = SampleCutter({"X": 0, "sr": None})
    rng = np.random.default_rng(0)
    without, with_axis = rng.normal(size=(5, 4)), rng.normal(size=(1, 5, 4))
    a = cutter.with_batch_axes({"X": without, "sr": np.array(8000), "extra": 1}, ranks={"X": 3})
    b = cutter.with_batch_axes({"X": with_axis, "sr": np.array(8000)}, ranks={"X": 3})
    assert a["X"].shape == b["X"].shape == (1, 5, 4) and set(a) == {"X", "sr"}  # the model's inputs only
    assert cutter.join([a, b])["X"].shape == (2, 5, 4)
    # Without the model's rank a sample is taken to come without the axis (as numpy stacks).
    assert cutter.with_batch_axes({"X": with_axis, "sr": np.array(1)})["X"].shape == (1, 1, 5, 4)


def test_gather_outputs_batch_first_round_trip_time_major():
    axes = BatchAxes({"X": 0}, {"Y": 1})
    x = np.random.default_rng(0).normal(size=(2, 5, 4))
    y = np.transpose(x, (1, 0, 2))  # what the model does: [T, N, C]
    together = gather_outputs([{"Y": y[:, i:i + 1]} for i in range(2)], axes)
    assert together["Y"].shape == (2, 5, 4)
    np.testing.assert_array_equal(together["Y"], x)
    no_axis = gather_outputs([{"Y": np.full((94, 8), float(i))} for i in range(3)], BatchAxes({"X": None}, {"Y": None}))
    assert no_axis["Y"].shape == (3, 94, 8)


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_run_in_batches_time_major_in_onnx_runtime(batch_size):
    ort = pytest.importorskip("onnxruntime")
    model = time_major()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    axes = find_batch_axes(model)
    rng = np.random.default_rng(0)
    samples = [{"X": rng.normal(size=(1, 5, 4)).astype(np.float32)} for _ in range(7)]
    samples[3] = {"X": samples[3]["X"][0]}  # one sample without its batch axis
    out = run_in_batches(lambda feed: dict(zip(["Y"], sess.run(None, feed))), samples, axes, batch_size,
                         ranks={"X": 3})
    assert out["Y"].shape == (7, 5, 4)  # batch first, whatever the batching
    np.testing.assert_array_equal(out["Y"][6], samples[6]["X"][0])
    np.testing.assert_array_equal(out["Y"][3], samples[3]["X"])


def test_run_in_batches_groups_runs_of_the_batch_size_and_feeds_the_rest():
    calls = []
    axes = BatchAxes({"X": 0}, {"Y": 0})

    def run(feed):
        calls.append(feed["X"].shape[0])
        assert feed["X"].flags.c_contiguous
        return {"Y": feed["X"] * 2}

    samples = [{"X": np.full((1, 3), float(i), np.float32)} for i in range(7)]
    out = run_in_batches(run, samples, axes, batch_size=3, ranks={"X": 2})
    assert calls == [3, 3, 1]
    np.testing.assert_array_equal(out["Y"][:, 0], 2.0 * np.arange(7))


def test_run_in_batches_without_batch_axis_runs_one_at_a_time():
    calls = []
    axes = BatchAxes({"X": None}, {"Y": None})

    def run(feed):
        calls.append(feed["X"].shape)
        return {"Y": feed["X"].sum(axis=1)}

    out = run_in_batches(run, [{"X": np.full((94, 576), float(i))} for i in range(3)], axes, batch_size=8)
    assert calls == [(94, 576)] * 3 and out["Y"].shape == (3, 94)
    with pytest.raises(UserError, match="runs nothing"):
        run_in_batches(run, [], axes, batch_size=0)
    assert run_in_batches(run, [], axes) == {}


def test_calibration_runs_and_the_planners_runs_are_the_same_cuts():
    """A file re-batched by calibration's stream and the planner's cut-then-run give the same runs."""
    rng = np.random.default_rng(3)
    files = [("a.npz", {"x": rng.normal(size=(2, 5, 4)).astype(np.float32), "sr": np.array(16000)}),
             ("b.npz", {"x": rng.normal(size=(2, 3, 4)).astype(np.float32), "sr": np.array(16000)})]
    cutter = SampleCutter({"x": 1, "sr": None})
    stream = SampleBatcher(cutter, 3, None)
    streamed = [feed for label, f in files for _, feed in stream.add(label, f)] + [f for _, f in stream.flush()]
    assert [f["x"].shape[1] for f in streamed] == [3, 3, 2]
    samples = [s for _, f in files for s in cutter.split(f, strict=True)]
    axes = BatchAxes({"x": 1, "sr": None}, {"y": 1})
    planned = []
    out = run_in_batches(lambda feed: planned.append(feed) or {"y": feed["x"]}, samples, axes, batch_size=3,
                         ranks={"x": 3, "sr": 0})
    # BatchAxes.batched is False here (sr has no batch axis): the planner runs one sample at a time ...
    assert [f["x"].shape[1] for f in planned] == [1] * 8
    # ... and its outputs, batch first, are calibration's runs put together.
    np.testing.assert_array_equal(np.moveaxis(np.concatenate([f["x"] for f in streamed], axis=1), 1, 0), out["y"])


def test_a_stream_stops_at_max_samples_and_never_joins_unequal_unbatched_inputs():
    cutter = SampleCutter({"x": 0, "sr": None})
    stream = SampleBatcher(cutter, 4, 5)
    runs = list(stream.add("a", {"x": np.zeros((3, 2)), "sr": np.array(8000)}))
    runs += list(stream.add("b", {"x": np.ones((3, 2)), "sr": np.array(16000)}))  # another rate: a run of its own
    runs += list(stream.flush())
    assert [(label, f["x"].shape[0], int(f["sr"])) for label, f in runs] == [("a", 3, 8000), ("b", 2, 16000)]
    assert stream.done() and stream.seen == 5
