"""Calibration statistics as a map-reduce on a real Dask cluster: the same statistics as one process."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.calibration.calibration import Calibration
from trtwidgets.core.calibration.collect import collect_stats
from trtwidgets.core.calibration.shards import ShardMerger, collect_shard, collect_stats_distributed
from trtwidgets.core.calibration.sample_axes import SampleAxes
from trtwidgets.core.model.load import as_loaded

pytest.importorskip("distributed")


def _model() -> onnx.ModelProto:
    """``x[N, 4] -> MatMul -> Relu -> Mul(a gate that is zero on the first batch) -> y``."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Relu", ["m"], ["r"], name="relu"),
             helper.make_node("Mul", ["r", "g"], ["y"], name="gate")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
                                           helper.make_tensor_value_info("g", TensorProto.FLOAT, ["N", 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _feeds(n_batches: int = 13, seed: int = 1):
    """Batches whose maximum grows and falls (TensorRT's grid doubles in the middle of the data), with values
    exactly at the first batch's maximum in later batches (the edge rule), and a gate that is zero at first."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_batches):
        x = rng.standard_normal((4, 4)).astype(np.float32) * (1.0 + 3.0 * (i % 5 == 3))
        if i == 0:
            first_max = np.abs(x).max()
        else:
            x[0, 0] = first_max if i % 2 else -2 * first_max  # at the end of the first grid, and of the doubled one
        g = np.zeros((4, 1), np.float32) if i < 3 else rng.uniform(0, 2, (4, 1)).astype(np.float32)
        out.append({"x": x, "g": g})
    return out


def _same(a, b) -> None:
    assert a.samples == b.samples and a.batches == b.batches and a.sample_hashes == b.sample_hashes
    assert list(a.tensors) == list(b.tensors)
    for name in a.tensors:
        ta, tb = a.tensors[name], b.tensors[name]
        assert (ta.count, ta.min, ta.max, ta.hist_max) == (tb.count, tb.min, tb.max, tb.hist_max), name
        np.testing.assert_array_equal(ta.hist, tb.hist, err_msg=name)
        assert ta.trt_range == tb.trt_range or (np.isnan(ta.trt_range) and np.isnan(tb.trt_range)), name
        np.testing.assert_array_equal(ta.trt_hist, tb.trt_hist, err_msg=name)
        assert ta.first_absmax == tb.first_absmax, name


@pytest.mark.parametrize("shard_batches", [1, 3])
def test_distributed_statistics_equal_one_process(dask_client, shard_batches):
    model, feeds = _model(), _feeds()
    one = collect_stats(model, feeds, progress=False)
    many = collect_stats_distributed(model, feeds, dask_client, progress=False, shard_batches=shard_batches)
    _same(one, many)
    a, b = Calibration.fit(one, "entropy"), Calibration.fit(many, "entropy")
    for method in ("entropy", "percentile", "mse", "max"):
        ra, rb = a.refit(method=method).amax, b.refit(method=method).amax
        assert ra.keys() == rb.keys()
        for name in ra:
            assert rb[name] == pytest.approx(ra[name], rel=1e-6), (method, name)


def test_a_shard_that_ran_without_its_seed_is_merged_only_after_collecting_again():
    """Shards merged out of their seeds' order: the merger names the stale tensor instead of merging wrongly."""
    model, feeds = _model(), _feeds()
    loaded = as_loaded(model)
    axes = SampleAxes(loaded.summary)
    labelled = [(f"b{i}", f) for i, f in enumerate(feeds)]
    first, rest = collect_shard(loaded, labelled[:4], {}, 8192, axes), labelled[4:]
    merger = ShardMerger()
    merger.accept(first)
    early = collect_shard(loaded, rest, {}, 8192, axes)  # ran before the seeds were known
    assert "y" in merger.stale(early) and "x" in merger.stale(early)
    again = collect_shard(loaded, rest, merger.seeds, 8192, axes)
    assert not merger.stale(again)
    merger.accept(again)
    _same(collect_stats(model, feeds, progress=False), merger.merged)


def test_distributed_collection_continues_earlier_statistics(dask_client):
    model, feeds = _model(), _feeds()
    part = collect_stats(model, feeds[:5], progress=False)
    one = collect_stats(model, feeds[5:], stats=part, progress=False)
    many = collect_stats_distributed(model, feeds[5:], dask_client, stats=part, progress=False, shard_batches=2)
    _same(one, many)


def test_tw_calibrate_on_a_client_gives_the_same_calibration(dask_client):
    import trtwidgets as tw

    model, feeds = _model(), _feeds()
    one = tw.calibrate(model, feeds, progress=False)
    many = tw.calibrate(model, feeds, progress=False, client=dask_client)
    _same(one.stats, many.stats)
    assert many.amax == one.amax and many.method == one.method


def test_a_worker_that_ran_one_in_memory_model_runs_the_next_one_as_itself():
    """Models built in memory have no file hash: a worker's session of the last model is not reused for another."""
    model = _model()
    other = onnx.ModelProto()
    other.CopyFrom(model)
    other.graph.node[2].op_type = "Add"  # same inputs and names, another computation
    for m in (model, other):
        loaded = as_loaded(m)
        shard = collect_shard(loaded, [("b0", _feeds(1)[0])], {}, 8192, SampleAxes(loaded.summary))
        one = collect_stats(m, _feeds(1), progress=False)
        assert shard.stats.tensors["y"].max == one.tensors["y"].max


def test_large_batches_travel_as_data_not_inside_the_task(dask_client):
    """A shard of megabytes is scattered, not put in the task graph (which Dask warns of, and moves slowly)."""
    import warnings

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "big",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3_000_000])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3_000_000])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.standard_normal((1, 3_000_000)).astype(np.float32)} for _ in range(3)]  # 12 MB each
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        many = collect_stats_distributed(model, feeds, dask_client, progress=False, shard_batches=2)
    assert not [w for w in seen if "large graph" in str(w.message)], [str(w.message) for w in seen]
    _same(collect_stats(model, feeds, progress=False), many)
