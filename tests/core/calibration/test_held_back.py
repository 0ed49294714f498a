"""Held-back data: a seeded random split that names its files, and a warning when stats saw the held-back samples."""

from __future__ import annotations

import numpy as np
import pytest

from tests.core.calib_models import conv_relu_model, save
from trtwidgets.core.calibration.collect import collect_stats
from trtwidgets.core.calibration.held_back import (HeldBackSplit, feed_fingerprints,
                                                   sample_fingerprint, split_labelled, split_names,
                                                   stats_overlap_note)
from trtwidgets.core.calibration.stats import ActivationStats, load_stats, save_stats
from trtwidgets.core.common.errors import UserError


def _feeds(n, seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=(1, 3, 8, 8)).astype(np.float32)} for _ in range(n)]


def test_random_split_is_seeded_named_and_not_the_tail():
    names = [f"img_{i:03d}.npy" for i in range(40)]
    split = split_names(names, 0.25, seed=0)
    assert len(split.held_back) == 10 and len(split.calibration) == 30
    assert set(split.held_back) | set(split.calibration) == set(names)
    assert split == split_names(names, 0.25, seed=0)
    assert split.held_back != tuple(names[-10:])
    assert split_names(names, 0.25, seed=1).held_back != split.held_back
    assert list(split.held_back) == sorted(split.held_back)  # data order kept
    d = split.to_dict()
    assert d["seed"] == 0 and d["fraction"] == 0.25 and d["held_back"] == list(split.held_back)
    assert len(split_names(["a", "b"], 0.9).calibration) == 1  # at least one on each side


@pytest.mark.parametrize("names, fraction, message", [
    (["a"], 0.25, "at least 2 samples"),
    (["a", "a", "b"], 0.25, "names repeat"),
    (["a", "b"], 1.0, "leaves nothing"),
    (["a", "b"], 0.0, "leaves nothing"),
])
def test_bad_splits_are_user_errors(names, fraction, message):
    with pytest.raises(UserError, match=message):
        split_names(names, fraction)


def test_split_labelled_keeps_a_files_samples_together_and_takes_given_data():
    feeds = _feeds(12)
    labelled = [(f"f{i // 2}", f) for i, f in enumerate(feeds)]  # two samples per file
    calib, held, split = split_labelled(labelled, 0.34, seed=3)
    assert len(calib) + len(held) == 12 and len(held) == 4
    held_ids = {id(f) for f in held}
    for k in range(6):
        assert (id(feeds[2 * k]) in held_ids) == (id(feeds[2 * k + 1]) in held_ids)
    calib, held, split = split_labelled(labelled, held_back=[("h0", feeds[0])])
    assert len(calib) == 12 and len(held) == 1
    assert split.source == "held-back data" and split.held_back == ("h0",) and split.seed is None
    with pytest.raises(UserError, match="held-back data is empty"):
        split_labelled(labelled, held_back=[])


def _fingerprints(feeds):
    return [p for feed in feeds for p in feed_fingerprints(feed)]


def test_fingerprint_is_the_same_in_any_batch():
    feeds = _feeds(4)
    single = _fingerprints(feeds)
    batch = feed_fingerprints({"x": np.concatenate([f["x"] for f in feeds])})
    assert single == batch and len(set(single)) == 4
    assert sample_fingerprint({"x": feeds[0]["x"][0]}) == single[0]
    assert sample_fingerprint({"x": feeds[0]["x"][0].astype(np.float64)}) != single[0]


def test_fingerprints_follow_each_inputs_batch_axis():
    rng = np.random.default_rng(0)
    items = [{"input": rng.normal(size=(512,)), "state": rng.normal(size=(2, 128))} for _ in range(3)]
    feed = {"input": np.stack([i["input"] for i in items]), "state": np.stack([i["state"] for i in items], axis=1),
            "sr": np.array(16000)}
    axes = {"input": 0, "state": 1, "sr": None}
    prints = feed_fingerprints(feed, axes)
    assert len(set(prints)) == 3
    one = {"input": feed["input"][1:2], "state": feed["state"][:, 1:2], "sr": feed["sr"]}
    assert feed_fingerprints(one, axes) == [prints[1]]
    assert len(feed_fingerprints({"frames": np.zeros((94, 576))}, {"frames": None})) == 1


def test_stats_record_samples_and_warn_on_held_back(tmp_path):
    model = save(conv_relu_model(channels=3), tmp_path / "m.onnx")
    feeds = _feeds(8)
    stats = collect_stats(model, feeds, progress=False)
    assert len(stats.sample_hashes) == 8
    assert stats_overlap_note(stats, _fingerprints(feeds[6:])).startswith("2 of the 2 held-back samples")
    calib_only = collect_stats(model, feeds[:6], progress=False)
    assert stats_overlap_note(calib_only, _fingerprints(feeds[6:])) is None
    loaded = load_stats(save_stats(stats, tmp_path / "s.npz"))
    assert loaded.sample_hashes == stats.sample_hashes
    merged = calib_only.merge(collect_stats(model, feeds[7:], progress=False))
    assert "1 of the 2" in stats_overlap_note(merged, _fingerprints(feeds[6:]))
    old = ActivationStats(tensors={}, samples=8, model_sha256="")
    assert "do not record which samples" in stats_overlap_note(old, _fingerprints(feeds[6:]))
    assert stats_overlap_note(stats, []) is None
    assert isinstance(split_names(["a", "b"]), HeldBackSplit)
