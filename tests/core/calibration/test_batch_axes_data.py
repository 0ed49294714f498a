"""Calibration data is read along each input's own batch axis (issue 24), as the planner reads it.

The model is shaped like a voice-activity detector: ``x [N, 4]``, an LSTM-like ``state [2, N, 8]``
(batch on axis 1) and a scalar sample rate ``sr``; no dim is named, as in Silero VAD, so the axes
come from the dynamic dims and the batch-2 check.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.calibration.collect import collect_stats, float_tensor_names
from trtwidgets.core.calibration.data import iter_labelled_feeds
from trtwidgets.core.calibration.sample_axes import SampleAxes
from trtwidgets.core.common.errors import CalibrationDataError
from trtwidgets.core.model.load import load_model


def _vad_like():
    """x [N, 4] @ w -> + state [2, N, 8] -> Tanh = stateN; mean over the 2 layers, times sr / 16000 = out [N, 8]."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8), "w")
    k = numpy_helper.from_array(np.array(1 / 16000, np.float32), "k")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("Add", ["state", "xw"], ["s2"]),
             helper.make_node("Tanh", ["s2"], ["stateN"]),
             helper.make_node("ReduceMean", ["stateN"], ["h"], axes=[0], keepdims=0),
             helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["srf", "k"], ["scale"]),
             helper.make_node("Mul", ["h", "scale"], ["out"])]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4]),
           helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, None, 8]),
           helper.make_tensor_value_info("sr", TensorProto.INT64, [])]
    outs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [None, 8]),
            helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, None, 8])]
    model = helper.make_model(helper.make_graph(nodes, "vad_like", ins, outs, [w, k]),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.fixture()
def vad(tmp_path):
    import onnx

    path = tmp_path / "vad_like.onnx"
    onnx.save(_vad_like(), str(path))
    return load_model(path)


def _sample(rng, n=1):
    return {"x": rng.normal(size=(n, 4)).astype(np.float32),
            "state": rng.normal(size=(2, n, 8)).astype(np.float32), "sr": np.array(16000, np.int64)}


def test_per_sample_files_calibrate_with_the_state_whole(tmp_path, vad):
    rng = np.random.default_rng(0)
    data = tmp_path / "calib"
    data.mkdir()
    samples = [_sample(rng) for _ in range(5)]
    samples[3]["state"][1, 0, 5] = 7.5  # the largest value, in layer 1: cutting state to [1, 1, 8] would lose it
    for i, s in enumerate(samples):
        np.savez(data / f"{i:04d}.npz", **s)
    stats = collect_stats(vad, str(data), progress=False)
    assert stats.samples == 5 and not stats.interrupted
    assert stats.input_shapes == {"x": (1, 4), "state": (2, 1, 8), "sr": ()}
    inputs, acts = float_tensor_names(vad.proto)
    assert set(inputs + acts) == {"x", "state", "xw", "s2", "stateN", "h", "srf", "scale", "out"}
    for name in inputs + acts:
        t = stats.tensors[name]
        assert t.count > 0 and np.isfinite(t.min) and np.isfinite(t.max), name
    assert stats.tensors["state"].max == pytest.approx(7.5)
    assert stats.tensors["state"].count == 5 * 2 * 8 and stats.tensors["x"].count == 5 * 4


def test_the_python_entry_reads_the_same_way(tmp_path, vad):
    import trtwidgets as tw

    rng = np.random.default_rng(1)
    data = tmp_path / "calib"
    data.mkdir()
    for i in range(3):
        np.savez(data / f"{i}.npz", **_sample(rng))
    cal = tw.calibrate(vad, str(data), progress=False)
    assert cal.stats.samples == 3 and cal.stats.input_shapes["state"] == (2, 1, 8)


def test_a_multi_sample_file_is_cut_along_each_inputs_own_axis(tmp_path, vad):
    rng = np.random.default_rng(2)
    data = tmp_path / "calib"
    data.mkdir()
    whole = _sample(rng, 3)
    np.savez(data / "three.npz", **whole)
    axes = SampleAxes(vad.summary, model=vad)
    feeds = list(iter_labelled_feeds(str(data), vad.summary, axes=axes))
    assert axes.inputs == {"x": 0, "state": 1, "sr": None}
    assert [label.endswith("three.npz") for label, _ in feeds] == [True] * 3
    for i, (_, f) in enumerate(feeds):
        np.testing.assert_array_equal(f["x"], whole["x"][i:i + 1])
        np.testing.assert_array_equal(f["state"], whole["state"][:, i:i + 1])
        assert f["sr"].shape == () and int(f["sr"]) == 16000
    # Joined again along the same axes, the scalar passed once.
    two = [f for _, f in iter_labelled_feeds(str(data), vad.summary, batch_size=2, axes=SampleAxes(vad.summary, vad))]
    assert [(f["x"].shape, f["state"].shape, f["sr"].shape) for f in two] == [((2, 4), (2, 2, 8), ()),
                                                                            ((1, 4), (2, 1, 8), ())]
    np.testing.assert_array_equal(np.concatenate([f["state"] for f in two], axis=1), whole["state"])
    # --max-samples cuts each input along its own axis too (the state is not read row by row on axis 0).
    stats = collect_stats(vad, str(data), progress=False, max_samples=2)
    assert stats.samples == 2 and stats.tensors["state"].count == 2 * 2 * 8
    assert collect_stats(vad, str(data), progress=False).samples == 3


def test_samples_of_a_file_joined_with_the_next_files(tmp_path, vad):
    rng = np.random.default_rng(3)
    data = tmp_path / "calib"
    data.mkdir()
    parts = [_sample(rng, n) for n in (1, 3, 2)]
    for i, p in enumerate(parts):
        np.savez(data / f"{i}.npz", **p)
    feeds = [f for _, f in iter_labelled_feeds(str(data), vad.summary, batch_size=4, axes=SampleAxes(vad.summary, vad))]
    assert [f["state"].shape[1] for f in feeds] == [4, 2]
    np.testing.assert_array_equal(np.concatenate([f["state"] for f in feeds], axis=1),
                                  np.concatenate([p["state"] for p in parts], axis=1))


def test_the_users_batch_axis_wins(tmp_path, vad):
    rng = np.random.default_rng(4)
    data = tmp_path / "calib"
    data.mkdir()
    np.savez(data / "three.npz", **_sample(rng, 3))
    # 'none': the file is one sample, fed whole.
    stats = collect_stats(vad, str(data), progress=False, batch_axis="none")
    assert stats.samples == 1 and stats.input_shapes["state"] == (2, 3, 8)
    # A wrong axis for the state: its 2 layers do not match the 3 samples of x, and the message says what to give.
    with pytest.raises(CalibrationDataError) as err:
        collect_stats(vad, str(data), progress=False, batch_axis="x:0,state:0")
    assert "different numbers of samples" in err.value.what and "--batch-axis" in err.value.fix
    assert "x: 3 (axis 0), state: 2 (axis 0)" in err.value.why


def test_frames_of_one_sample_are_not_cut(tmp_path):
    """x [T, 4] with T dynamic looks batched, but CumSum over T does not split: one sample of T frames."""
    import onnx

    nodes = [helper.make_node("CumSum", ["x", "zero"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "frames", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
                          [numpy_helper.from_array(np.array(0, np.int64), "zero")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "frames.onnx"))
    loaded = load_model(tmp_path / "frames.onnx")
    data = tmp_path / "calib"
    data.mkdir()
    frames = np.random.default_rng(5).normal(size=(5, 4)).astype(np.float32) + 1
    np.savez(data / "a.npz", x=frames)
    np.savez(data / "b.npz", x=frames[:3])
    stats = collect_stats(loaded, str(data), progress=False)
    assert stats.samples == 2 and stats.input_shapes["x"] == (-1, 4)
    assert stats.tensors["x"].count == 8 * 4
    # With --max-samples the first file is read bounded, then again whole once its axis proves no batch.
    stats = collect_stats(loaded, str(data), progress=False, max_samples=1)
    assert stats.samples == 1 and stats.input_shapes["x"] == (5, 4)
