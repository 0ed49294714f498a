"""The worst channel group sees what a pooled cosine cannot: a detector's class scores."""

from __future__ import annotations

import numpy as np
import pytest

from tests.core.accuracy.detector_outputs import packed_output, perturb_scores
from trtwidgets.core.accuracy.metrics import ComparisonError, cosine_similarity
from trtwidgets.core.accuracy.output_groups import (ChannelGroup, ChannelLayout, blind_spots, channel_layout,
                                                    check_outputs, detector_layout, group_metrics)


def test_detector_layout_in_both_orders():
    first = detector_layout((1, 15, 8400))
    last = detector_layout((1, 8400, 15))
    assert first.axis == 1 and last.axis == 2
    assert [(g.name, g.start, g.stop) for g in first.groups] == [("boxes", 0, 4), ("scores", 4, 15)]
    assert detector_layout((1, 15, 20)) is None  # too few anchors to be anchors
    assert detector_layout((1, 3, 224, 224)) is None


def test_softmax_sequences_are_not_detections():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 40, 500))
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)  # [N, T, C] CTC probabilities
    assert detector_layout(probs.shape) is not None  # by shape alone it could be
    assert detector_layout(probs.shape, probs) is None
    assert channel_layout(probs.shape, reference=probs).kind == "whole"
    det = packed_output()
    assert detector_layout(det.shape, det).kind == "detector"


def test_channel_layout_defaults():
    assert channel_layout((2, 1000)).axis is None
    seg = channel_layout((2, 21, 64, 64))
    assert seg.axis == 1 and len(seg.groups) == 21
    wide = channel_layout((2, 256, 8, 8))
    assert len(wide.groups) == 32 and wide.groups[-1].stop == 256
    assert channel_layout((4, 7, 3), channel_axis=-1).axis == 2


def test_pooled_cosine_blind_but_worst_group_sees_score_noise():
    ref = packed_output()
    cand = perturb_scores(ref, std=0.1)
    assert cosine_similarity(ref, cand) > 0.999
    check = check_outputs({"out": ref}, {"out": cand})
    worst = check.worst
    assert worst.group == "scores"
    assert worst.cosine < 0.9
    boxes = [g for g in check.groups if g.group == "boxes"][0]
    assert boxes.cosine == pytest.approx(1.0)
    assert boxes.energy_share > 0.999
    assert any("cannot see scores" in n for n in check.notes)


def test_identical_outputs_are_perfect_and_groups_follow_layout():
    ref = packed_output(layout="channels_last")
    check = check_outputs({"o": ref}, {"o": ref.copy()})
    assert {g.group for g in check.groups} == {"boxes", "scores"}
    assert all(g.cosine == pytest.approx(1.0) and g.snr_db == float("inf") for g in check.groups)


def test_constant_channel_does_not_turn_rounding_into_error():
    rng = np.random.default_rng(0)
    ref = rng.normal(0, 1, (4, 3, 8, 8))
    ref[:, 2] = 0.5  # a channel that never moves
    cand = ref + rng.normal(0, 1e-4, ref.shape)
    gm = group_metrics(ref, cand, "x")
    assert min(g.cosine for g in gm) > 0.99


def test_given_layout_and_missing_output():
    ref = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    layout = ChannelLayout(2, (ChannelGroup("a", 0, 2), ChannelGroup("b", 2, 4)), "given")
    assert [g.group for g in group_metrics(ref, ref, "x", layout)] == ["a", "b"]
    with pytest.raises(ComparisonError, match="no output named 'y'"):
        check_outputs({"x": ref, "y": ref}, {"x": ref})
    with pytest.raises(ComparisonError, match="shape"):
        group_metrics(ref, ref[:1], "x")


def test_blind_spots_name_outputs_the_target_ignores():
    ref = packed_output()
    check = check_outputs({"det": ref, "aux": ref[:, :4]}, {"det": ref, "aux": ref[:, :4]}, target_outputs=["det"])
    assert any("does not look at output 'aux'" in n for n in check.notes)
    assert blind_spots(check.groups, None) == tuple(n for n in check.notes if "cannot see" in n)
    d = check.to_dict()
    assert d["worst"]["output"] in ("det", "aux") and len(d["groups"]) == len(check.groups)
