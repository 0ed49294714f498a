"""Decode + class-wise NMS + F1 on synthetic YOLO outputs with known objects."""

from __future__ import annotations

import numpy as np
import pytest

from tests.core.accuracy.detector_outputs import packed_output, perturb_scores
from trtwidgets.core.accuracy.detection import Detections, box_iou, decode, detection_axis, match_counts, match_f1, nms
from trtwidgets.core.accuracy.metrics import cosine_similarity
from trtwidgets.core.common.errors import UserError


def test_decode_finds_each_object_once_in_either_layout():
    first = decode(packed_output(objects=5))
    last = decode(packed_output(objects=5, layout="channels_last"))
    assert [len(d) for d in first] == [5, 5, 5, 5]
    for a, b in zip(first, last):
        np.testing.assert_allclose(a.boxes, b.boxes)
        np.testing.assert_array_equal(a.classes, b.classes)
    assert match_f1(first, first) == 1.0


def test_box_iou_and_nms_are_class_wise():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [0, 0, 10, 10]], float)
    assert box_iou(boxes[:1], boxes[1:2])[0, 0] == pytest.approx(81 / 119)
    keep = nms(boxes, np.array([0.9, 0.8, 0.7]), np.array([0, 0, 1]), iou=0.5)
    assert keep.tolist() == [0, 2]  # box 1 suppressed by box 0; box 2 is another class


def test_match_counts_need_class_and_iou():
    ref = Detections(np.array([[0, 0, 10, 10.0]]), np.array([0.9]), np.array([3]))
    same = Detections(np.array([[0, 0, 10, 11.0]]), np.array([0.8]), np.array([3]))
    other_class = Detections(same.boxes, same.scores, np.array([2]))
    far = Detections(np.array([[50, 50, 60, 60.0]]), np.array([0.8]), np.array([3]))
    assert match_counts(ref, same) == (1, 0, 0)
    assert match_counts(ref, other_class) == (0, 1, 1)
    assert match_counts(ref, far) == (0, 1, 1)
    assert match_f1([ref], [far]) == 0.0
    empty = Detections(np.zeros((0, 4)), np.zeros(0), np.zeros(0, int))
    assert match_f1([empty], [empty]) == 1.0


def test_score_noise_a_pooled_cosine_misses_drops_f1():
    ref = packed_output()
    noisy = perturb_scores(ref, std=0.1)
    assert cosine_similarity(ref, noisy) > 0.999
    f1 = match_f1(decode(ref), decode(noisy))
    assert f1 < 0.5
    slight = perturb_scores(ref, std=0.002)
    assert match_f1(decode(ref), decode(slight)) == 1.0


def test_objectness_layout_multiplies_scores():
    out = np.zeros((1, 7, 100), np.float32)
    out[0, :4, :] = [[100], [100], [20], [20]]
    out[0, 4, 0], out[0, 5, 0], out[0, 6, 0] = 0.5, 0.9, 0.1  # objectness 0.5 x class 0.9 = 0.45
    d = decode(out, objectness=True)[0]
    assert len(d) == 1 and d.scores[0] == pytest.approx(0.45) and d.classes[0] == 0
    assert len(decode(out, score_threshold=0.5, objectness=True)[0]) == 0


def test_not_a_detector_output_is_a_user_error():
    with pytest.raises(UserError, match="not a packed YOLO output"):
        detection_axis((2, 1000))
    assert detection_axis((1, 15, 8400)) == 1 and detection_axis((1, 8400, 15)) == 2
