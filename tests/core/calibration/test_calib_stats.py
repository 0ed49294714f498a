"""Streaming statistics: exact widening and merging, NaN/Inf, interrupt and resume, stats files."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.core.calib_models import conv_relu_model, nan_model, save
from trtwidgets import demo
from trtwidgets.core.calibration.collect import collect_stats, float_tensor_names
from trtwidgets.core.common.errors import StatsError
from trtwidgets.core.calibration.histogram import HistogramAccumulator
from trtwidgets.core.calibration.stats import ActivationStats, load_stats, save_stats


def _assert_same(a: ActivationStats, b: ActivationStats, first: bool = True):
    assert list(a.tensors) == list(b.tensors)
    assert a.samples == b.samples
    for name, t in a.tensors.items():
        u = b.tensors[name]
        assert (t.count, t.nan_count, t.inf_count) == (u.count, u.nan_count, u.inf_count), name
        assert t.min == u.min and t.max == u.max, name
        assert t.hist_max == u.hist_max, name
        assert not first or t.first_absmax == u.first_absmax or (np.isnan(t.first_absmax) and np.isnan(u.first_absmax)), name
        np.testing.assert_array_equal(t.hist, u.hist, err_msg=name)


def test_widening_rebins_exactly_whatever_the_order():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(0, s, 5000).astype(np.float32) for s in (0.01, 0.3, 7.0, 0.2, 120.0)]
    one = HistogramAccumulator("t", 1024)
    one.update(np.concatenate(chunks))
    for order in ([0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3]):
        acc = HistogramAccumulator("t", 1024)
        for i in order:
            acc.update(chunks[i])
        t, u = acc.to_stats(), one.to_stats()
        assert t.hist_max == u.hist_max and t.min == u.min and t.max == u.max
        np.testing.assert_array_equal(t.hist, u.hist)
    t = one.to_stats()
    # The range is the next power of two above |x|max, and the histogram holds every value.
    assert t.hist_max / 2 <= t.absmax < t.hist_max and t.hist.sum() == t.count == 25000
    assert len(t.hist) == 1024


def test_nan_and_inf_are_counted_never_ranged():
    acc = HistogramAccumulator("t", 256)
    acc.update(np.array([1.0, np.nan, -np.inf, np.inf, -2.0, np.nan], np.float32))
    acc.update(np.array([np.nan], np.float32))
    t = acc.to_stats()
    assert (t.count, t.nan_count, t.inf_count, t.min, t.max) == (2, 3, 2, -2.0, 1.0)
    assert t.hist.sum() == 2
    zeros = HistogramAccumulator("z", 256)
    zeros.update(np.zeros(10, np.float32))
    assert zeros.to_stats().hist_max == 0 and zeros.to_stats().hist[0] == 10
    zeros.update(np.array([3.0], np.float32))
    z = zeros.to_stats()
    assert z.hist_max == 4.0 and z.hist[0] == 10 and z.hist.sum() == 11


def test_collection_names_match_the_onnx_graph(cls_model_path):
    inputs, acts = float_tensor_names(onnx.load(str(cls_model_path)))
    stats = collect_stats(cls_model_path, demo.sample_inputs(4)[:1], progress=False)
    assert inputs == ["x"]
    assert list(stats.tensors) == inputs + acts
    graph = onnx.load(str(cls_model_path)).graph
    produced = {o for n in graph.node for o in n.output}
    assert set(acts) <= produced and len(acts) > 200
    assert graph.output[0].name in stats.tensors
    assert stats.samples == 4 and stats.input_shapes == {"x": (4, 3, 48, 192)}


def test_merge_of_two_halves_equals_one_pass(cls_model_path):
    feeds = demo.sample_inputs(1)
    whole = collect_stats(cls_model_path, feeds, progress=False, num_bins=2048)
    first = collect_stats(cls_model_path, feeds[:11], progress=False, num_bins=2048)
    second = collect_stats(cls_model_path, feeds[11:], progress=False, num_bins=2048)
    _assert_same(first.merge(second), whole)
    # In the other order everything is the same but the first batch (which TensorRT's entropy range starts from).
    _assert_same(second.merge(first), whole, first=False)
    assert second.merge(first).tensors["x"].first_absmax == second.tensors["x"].first_absmax
    # Continuing from earlier statistics is the same as merging.
    _assert_same(collect_stats(cls_model_path, feeds[11:], stats=first, progress=False), whole)


def test_nonfinite_activations_are_reported(tmp_path):
    path = save(nan_model(), tmp_path / "nan.onnx")
    x = np.array([[-1.0, 0.0, 2.0, 4.0], [1.0, -4.0, 0.0, 9.0]], np.float32)
    stats = collect_stats(path, [{"x": x}], progress=False)
    s, r = stats.tensors["s"], stats.tensors["r"]
    assert (s.nan_count, s.inf_count, s.count, s.max) == (2, 0, 6, 3.0)
    assert (r.nan_count, r.inf_count, r.count) == (0, 2, 6)
    assert stats.nonfinite() == {"s": (2, 0), "r": (0, 2)}
    assert "shape" not in stats.tensors  # int64 tensors are not activations


class _Interrupting:
    """Yields ``n`` feeds, then behaves like Ctrl-C."""

    def __init__(self, feeds, n):
        self.feeds, self.n = feeds, n

    def __iter__(self):
        for i, f in enumerate(self.feeds):
            if i == self.n:
                raise KeyboardInterrupt
            yield f


def test_interrupt_keeps_stats_and_resume_completes(cls_model_path):
    feeds = demo.sample_inputs(2)
    partial = collect_stats(cls_model_path, _Interrupting(feeds, 5), progress=False)
    assert partial.interrupted and partial.samples == 10 and partial.batches == 5
    # Every tensor holds exactly the five completed batches.
    _assert_same(partial, collect_stats(cls_model_path, feeds[:5], progress=False))
    done = collect_stats(cls_model_path, feeds[5:], stats=partial, progress=False)
    assert not done.interrupted and done.samples == 32
    _assert_same(done, collect_stats(cls_model_path, feeds, progress=False))


def test_memory_does_not_grow_with_samples(cls_model_path):
    small = collect_stats(cls_model_path, demo.sample_inputs(1)[:2], progress=False)
    big = collect_stats(cls_model_path, demo.sample_inputs(1), progress=False)
    assert {t.hist.nbytes for t in small.tensors.values()} == {t.hist.nbytes for t in big.tensors.values()}


def test_stats_file_round_trip_without_pickles(tmp_path, cls_model_path):
    stats = collect_stats(cls_model_path, demo.sample_inputs(8), progress=False)
    path = save_stats(stats, tmp_path / "sub" / "stats.npz")
    assert [p.name for p in path.parent.iterdir()] == ["stats.npz"]  # no temp file left behind
    again = load_stats(path)
    _assert_same(again, stats)
    assert again.model_sha256 == stats.model_sha256 and again.input_shapes == stats.input_shapes
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(StatsError, match="not a trtwidgets statistics file"):
        load_stats(tmp_path / "other.npz")
    with pytest.raises(StatsError, match="No statistics file"):
        load_stats(tmp_path / "missing.npz")


def test_merging_other_models_stats_is_refused(tmp_path, cls_model_path):
    path = save(conv_relu_model(), tmp_path / "conv.onnx")
    x = np.ones((1, 3, 8, 8), np.float32)
    conv = collect_stats(path, [{"x": x}], progress=False)
    cls = collect_stats(cls_model_path, demo.sample_inputs(1)[:1], progress=False)
    with pytest.raises(StatsError, match="two different models"):
        conv.merge(cls)
    with pytest.raises(StatsError, match="another model"):
        collect_stats(path, [{"x": x}], stats=cls, progress=False)


def test_progress_bar_counts_samples(cls_model_path, capsys):
    collect_stats(cls_model_path, demo.sample_inputs(2)[:2], progress=True)
    err = capsys.readouterr().err
    assert "4/4" in err and "sample/s" in err


def test_large_tensors_are_counted_in_chunks_with_the_same_result(monkeypatch):
    from trtwidgets.core.calibration import histogram

    rng = np.random.default_rng(9)
    x = rng.normal(0, 3, 10007).astype(np.float32)
    whole = HistogramAccumulator("t", 512)
    whole.update(x)
    monkeypatch.setattr(histogram, "CHUNK", 1000)
    chunked = HistogramAccumulator("t", 512)
    chunked.update(x)
    np.testing.assert_array_equal(whole.to_stats().hist, chunked.to_stats().hist)
    assert chunked.to_stats().hist.sum() == x.size


def _tensorrt_histogram(batches, bins=2048):
    """TensorRT 8.6's entropy histogram, written from its documented behaviour, on raw values.

    The range is the first batch's max |x|; a later batch larger than the range doubles it and
    merges neighbouring bins; a value equal to the range's end is counted in the last bin.
    """
    rng_end, hist = 0.0, np.zeros(bins, np.int64)
    for b in batches:
        a = np.abs(np.asarray(b, np.float64).ravel())
        if rng_end == 0:
            rng_end = float(a.max())
        while a.max() > rng_end:
            hist = np.concatenate([hist.reshape(bins // 2, 2).sum(1), np.zeros(bins // 2, np.int64)])
            rng_end *= 2
        hist += np.histogram(np.minimum(a, rng_end), bins=bins, range=(0, rng_end))[0]
    return hist, rng_end


def test_tensorrt_grid_histogram_is_kept_exactly():
    rng = np.random.default_rng(4)
    # A discrete input (8-bit image values) and a widening range, like the demo model's x.
    batches = [(rng.integers(0, 256, 3000) / 127.5 - 1.0).astype(np.float32) * s for s in (0.9, 1.0, 0.5, 2.5)]
    acc = HistogramAccumulator("t", 8192)
    for b in batches:
        acc.update(b)
    t = acc.to_stats()
    want, end = _tensorrt_histogram(batches)
    assert t.trt_range == pytest.approx(end) and t.trt_range == pytest.approx(0.9 * 4)
    # np.histogram computes bin indices in float64, the accumulator in float32: allow a value on an edge to move.
    assert t.trt_hist.sum() == want.sum() == 12000
    assert np.abs(t.trt_hist - want).sum() <= 4, np.nonzero(t.trt_hist != want)


def test_tensorrt_grid_histogram_survives_save_load_and_merge(tmp_path):
    rng = np.random.default_rng(5)
    acc_a, acc_b = HistogramAccumulator("t"), HistogramAccumulator("t")
    acc_a.update(rng.normal(0, 1, 4000).astype(np.float32))
    acc_b.update(rng.normal(0, 9, 4000).astype(np.float32))
    a, b = acc_a.to_stats(), acc_b.to_stats()
    stats = ActivationStats(tensors={"t": a}, samples=1, model_sha256="x")
    back = load_stats(save_stats(stats, tmp_path / "s.npz")).tensors["t"]
    np.testing.assert_array_equal(back.trt_hist, a.trt_hist)
    assert back.trt_range == a.trt_range
    merged = a.merge(b)
    # a's grid, doubled as TensorRT would have for b's values after a's; every value still counted.
    assert merged.trt_range == a.trt_range * 2 ** int(np.ceil(np.log2(b.absmax / a.trt_range)))
    assert merged.trt_hist.sum() == 8000 and merged.trt_range >= b.absmax


def test_statistics_without_the_tensorrt_grid_still_load(tmp_path):
    acc = HistogramAccumulator("t")
    acc.update(np.linspace(-1, 1, 100, dtype=np.float32))
    t = acc.to_stats()
    import dataclasses

    old = dataclasses.replace(t, trt_hist=None, trt_range=float("nan"))
    back = load_stats(save_stats(ActivationStats(tensors={"t": old}, samples=1, model_sha256="x"),
                                 tmp_path / "old.npz")).tensors["t"]
    assert back.trt_hist is None
    from trtwidgets.core.calibration.ranges import compute_amax

    # Without TensorRT's grid, entropy falls back to re-binning the fine histogram.
    assert 0 < compute_amax(back, "entropy") <= 1.0 + 1e-6
    resumed = HistogramAccumulator.from_stats(back)
    assert resumed.trt_range == pytest.approx(1.0) and resumed.trt_hist.sum() == 100


def test_merging_with_statistics_without_the_tensorrt_grid_drops_it():
    import dataclasses

    acc_a, acc_b = HistogramAccumulator("t"), HistogramAccumulator("t")
    acc_a.update(np.linspace(-1, 1, 50, dtype=np.float32))
    acc_b.update(np.linspace(-3, 3, 50, dtype=np.float32))
    old = dataclasses.replace(acc_b.to_stats(), trt_hist=None, trt_range=float("nan"))
    merged = acc_a.to_stats().merge(old)
    # A TensorRT histogram of a's values alone would hide b's: none, and entropy re-bins the fine histogram.
    assert merged.trt_hist is None and merged.count == 100
