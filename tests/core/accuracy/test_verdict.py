"""One verdict (issue 42): every check judges a candidate's outputs against FP32's by one Target."""

from __future__ import annotations

import numpy as np
import pytest

from trtwidgets.core.accuracy.target import DEFAULT_COSINE, Target
from trtwidgets.core.accuracy.verdict import ZERO_ATOL, Scores, Verdict, evaluate
from trtwidgets.core.common.errors import UserError

RNG = np.random.default_rng(0)
REF = {"scores": RNG.standard_normal((8, 10)).astype(np.float32), "mask": RNG.random((8, 3, 4, 4)).astype(np.float32)}


def _near(scale=1e-3):
    return {k: v + scale * RNG.standard_normal(v.shape).astype(np.float32) for k, v in REF.items()}


def test_a_close_candidate_meets_the_default_target_and_a_noisy_one_says_why():
    assert Target().cosine == DEFAULT_COSINE == 0.99
    good = evaluate(_near(), REF, Target())
    assert good.meets and good.why == () and good.samples == 8 and good.accuracy.cosine > 0.999
    bad = evaluate(_near(0.5), REF, Target())
    assert bad.meets is False and len(bad.why) == 1 and bad.why[0].startswith("cosine ")
    assert f"{bad.accuracy.cosine:.4f}" in bad.why[0] and "worst channel group" in bad.why[0]
    # Scored, not judged: no target.
    assert evaluate(_near(), REF, None).meets is None


def test_nan_where_fp32_is_finite_fails_whatever_the_scores_and_is_counted_per_output():
    got = _near()
    got["mask"][0, 0, 0, :2] = np.nan
    v = evaluate(got, REF, Target())
    assert v.meets is False and v.non_finite and dict(v.non_finite_outputs) == {"scores": 0, "mask": 2}
    assert v.why[0] == "2 output values are NaN or Inf where FP32's are finite"
    assert v.accuracy.cosine > 0.999  # the scores cannot see it: the count is what fails it
    back = Verdict.from_dict(v.to_dict())
    assert back.meets is False and dict(back.non_finite_outputs) == {"mask": 2} and back.why == v.why


def test_an_output_fp32_writes_as_zero_is_judged_by_absolute_error():
    """Issue 45: an all-zero FP32 output (a mask with nothing in it) failed even the FP32 engine at cosine 0."""
    ref = {"mask": np.zeros((4, 2, 3, 3), np.float32)}
    same_engine = {"mask": np.full((4, 2, 3, 3), 1e-7, np.float32)}  # another implementation's rounding
    v = evaluate(same_engine, ref, Target())
    assert v.meets and v.accuracy.cosine == 1.0 and "zero in FP32" in v.accuracy.worst_group
    wrong = {"mask": np.full((4, 2, 3, 3), 10 * ZERO_ATOL, np.float32)}
    assert evaluate(wrong, ref, Target()).meets is False


def test_a_task_metric_is_judged_by_its_drop_below_fp32s_own_score():
    def top1(reference, candidate):  # the user's signature, everywhere
        return float(np.mean(reference["scores"].argmax(1) == candidate["scores"].argmax(1)))

    target, _ = Target.for_metric(top1, max_metric_drop=0.1).bound(REF)
    assert target.metric_reference == 1.0
    flipped = _near()
    flipped["scores"][:2] = -flipped["scores"][:2]  # two of eight samples change their class
    v = evaluate(flipped, REF, target)
    assert v.meets is False and v.accuracy.metric == pytest.approx(0.75)
    assert "0.7500 < 0.9000" in v.why[0] and v.accuracy.metric_reference == 1.0
    assert evaluate(_near(), REF, target).meets


def test_scores_judge_the_same_way_as_evaluate():
    s = Scores(cosine=0.995, snr_db=25.0, metric=0.9, metric_reference=0.95)
    t = Target(cosine=0.99, snr_db=30.0, metric_name="m", max_metric_drop=0.01)
    assert s.failures(t) == (s.failures(t)[0], s.failures(t)[1]) and not s.meets(t)
    assert [w.split(" ")[0] for w in s.failures(t)] == ["SNR", "m"]


def test_another_models_outputs_are_refused():
    with pytest.raises(UserError, match="no output 'mask'"):
        evaluate({"scores": REF["scores"]}, REF, Target())
    with pytest.raises(UserError, match="has shape"):
        evaluate({"scores": REF["scores"], "mask": REF["mask"][:4]}, REF, Target())
