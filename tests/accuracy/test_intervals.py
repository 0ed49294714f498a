"""Wilson intervals for top-1, and paired flips between two models on the same labelled samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trtwidgets.core.accuracy.intervals import Flips, paired_flips, top1, wilson_interval
from trtwidgets.core.common.errors import UserError


def test_wilson_interval_matches_the_textbook_values():
    # Newcombe (1998), table I: 81 of 263 -> 0.2553-0.3662 at 95%; 15 of 148 -> 0.0624-0.1605.
    lo, hi = wilson_interval(81, 263)
    assert (round(lo, 4), round(hi, 4)) == (0.2553, 0.3662)
    lo, hi = wilson_interval(15, 148)
    assert (round(lo, 4), round(hi, 4)) == (0.0624, 0.1605)


def test_wilson_interval_stays_in_zero_one_and_narrows_with_n():
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0
    assert wilson_interval(10, 10)[0] < 1.0  # all right on 10 samples is not certainty
    wide, narrow = wilson_interval(123, 128), wilson_interval(1230, 1280)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    assert wilson_interval(95, 100, 0.99)[0] < wilson_interval(95, 100, 0.9)[0]


@pytest.mark.parametrize("correct, n, conf", [(5, 0, 0.95), (-1, 10, 0.95), (11, 10, 0.95), (5, 10, 1.0)])
def test_a_count_that_is_not_a_proportion_is_a_user_error(correct, n, conf):
    with pytest.raises(UserError):
        wilson_interval(correct, n, conf)


def test_top1_reads_scores_or_predicted_labels():
    labels = np.array([0, 1, 1, 0, 1])
    scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.7, 0.3], [0.1, 0.9]])
    a, b = top1(scores, labels), top1(scores.argmax(1), labels)
    assert (a.correct, a.n) == (b.correct, b.n) == (4, 5) and a.accuracy == 0.8
    assert a.low < 0.8 < a.high and "4 of 5" in str(a)
    with pytest.raises(UserError, match="labels for"):
        top1(scores, labels[:3])


def test_paired_flips_count_each_direction_and_the_mcnemar_p_value():
    labels = np.zeros(100, np.int64)
    ref = np.zeros(100, np.int64)
    ref[:5] = 1  # reference wrong on 0..4
    cand = np.zeros(100, np.int64)
    cand[3:13] = 1  # candidate wrong on 3..12: fixes 0..2, breaks 5..12
    f = paired_flips(labels, ref, cand)
    assert (f.right_to_wrong, f.wrong_to_right, f.both_wrong, f.both_right) == (8, 3, 2, 87)
    assert f.n == 100 and f.net == -5
    # exact two-sided binomial: 2 * P(X <= 3 | 11, 0.5)
    assert f.p_value == pytest.approx(2 * sum(math.comb(11, i) for i in range(4)) / 2 ** 11)
    assert Flips(0, 0, 10, 0).p_value == 1.0 and Flips(0, 20, 0, 0).p_value < 1e-5
    # equal accuracy can hide disagreement: the flips see it
    same_acc = paired_flips(labels, ref, np.roll(ref, 50))
    assert same_acc.net == 0 and same_acc.right_to_wrong == 5


def test_flips_need_the_same_samples():
    with pytest.raises(UserError, match="scored 3 and 2"):
        paired_flips([0, 0, 0], [0, 0, 0], [0, 0])
