from __future__ import annotations

import json
import math

import numpy as np
import pytest

from trtwidgets.core.common.errors import UserError
from trtwidgets.core.accuracy.metrics import (
    ComparisonError,
    OutputMetrics,
    compare_outputs,
    compare_tensor,
    cosine_similarity,
    snr_db,
    topk_agreement,
    worst_output,
)


def test_cosine_matches_definition_and_edge_cases():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 5)).astype(np.float32)
    b = rng.normal(size=(4, 5)).astype(np.float32)
    expected = float(np.sum(a * b) / np.linalg.norm(a) / np.linalg.norm(b))
    assert cosine_similarity(a, b) == pytest.approx(expected, rel=1e-6)
    assert cosine_similarity(a, 3 * a) == pytest.approx(1.0)
    assert cosine_similarity(a, -a) == pytest.approx(-1.0)
    assert cosine_similarity(np.zeros(3), np.zeros(3)) == 1.0
    assert cosine_similarity(np.zeros(3), np.ones(3)) == 0.0
    # Large values must not overflow to inf/nan.
    big = np.full(10, 1e200)
    assert cosine_similarity(big, big) == pytest.approx(1.0)


def test_snr_db():
    ref = np.array([1.0, -1.0, 2.0, -2.0])
    noisy = ref + np.array([0.1, -0.1, 0.1, -0.1])
    expected = 10 * math.log10(np.sum(ref**2) / np.sum((ref - noisy) ** 2))
    assert snr_db(ref, noisy) == pytest.approx(expected)
    assert snr_db(ref, ref) == math.inf
    assert snr_db(np.zeros(4), np.ones(4)) == -math.inf


def test_topk_agreement_rows_and_k_larger_than_classes():
    ref = np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.2, 0.3, 0.5]])
    cand = np.array([[0.2, 0.7, 0.1], [0.1, 0.8, 0.1], [0.1, 0.3, 0.6]])
    agree = topk_agreement(ref, cand, topk=(1, 2, 5))
    assert agree[1] == pytest.approx(2 / 3)
    # top-2 sets: {1,0}/{1,0}; {0,1 or 2}/{1,0 or 2}; {2,1}/{2,1}
    assert set(agree) == {1, 2}
    assert 0.5 < agree[2] <= 1.0
    assert topk_agreement(np.ones((3, 1)), np.ones((3, 1))) == {}


def test_compare_tensor_against_numpy():
    rng = np.random.default_rng(1)
    ref = rng.normal(size=(8, 10)).astype(np.float32)
    cand = ref + rng.normal(scale=0.01, size=ref.shape).astype(np.float32)
    m = compare_tensor(ref, cand)
    diff = np.abs(ref.astype(np.float64) - cand.astype(np.float64))
    assert m.max_abs == pytest.approx(diff.max())
    assert m.mean_abs == pytest.approx(diff.mean())
    assert m.cosine > 0.999
    assert 30 < m.snr_db < 50
    assert m.ok and m.shape == (8, 10)
    assert m.topk_agreement[1] <= 1.0 and 5 in m.topk_agreement


def test_nan_in_candidate_is_reported_not_propagated():
    ref = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    cand = ref.copy()
    cand[0, 1] = np.nan
    m = compare_tensor(ref, cand)
    assert not m.ok
    assert m.nonfinite_candidate == 1 and m.nonfinite_reference == 0 and m.nonfinite_mismatch == 1
    assert m.max_abs == math.inf
    assert not math.isnan(m.cosine) and m.cosine == pytest.approx(1.0)
    assert m.snr_db == math.inf  # the finite positions agree exactly
    assert m.mean_abs == 0.0
    assert m.topk_agreement[1] == pytest.approx(0.5)  # the NaN row disagrees


def test_matching_nonfinite_values_agree():
    ref = np.array([1.0, np.nan, np.inf, -np.inf])
    m = compare_tensor(ref, ref.copy())
    assert m.ok and m.nonfinite_reference == 3 and m.max_abs == 0.0
    other = np.array([1.0, np.nan, -np.inf, -np.inf])
    assert compare_tensor(ref, other).nonfinite_mismatch == 1


def test_compare_outputs_names_and_shapes():
    ref = {"a": np.ones((2, 3)), "b": np.zeros(4)}
    cand = {"a": np.ones((2, 3)), "b": np.zeros(4), "extra": np.ones(1)}
    out = compare_outputs(ref, cand)
    assert list(out) == ["a", "b"]
    assert out["a"].snr_db == math.inf
    with pytest.raises(ComparisonError) as err:
        compare_outputs(ref, {"a": np.ones((2, 3))})
    assert "'b'" in err.value.what and isinstance(err.value, UserError)
    with pytest.raises(ComparisonError, match="shape"):
        compare_outputs({"a": np.ones((2, 3))}, {"a": np.ones((3, 3))})
    # Same size, other shape (e.g. a squeezed batch axis): compared after reshaping.
    assert compare_outputs({"a": np.ones((1, 6))}, {"a": np.ones(6)})["a"].max_abs == 0.0
    assert list(compare_outputs(ref, cand, names=["b"])) == ["b"]


def test_to_dict_is_strict_json_and_round_trips():
    ref = np.array([[1.0, 2.0]])
    cand = np.array([[1.0, np.nan]])
    m = compare_tensor(ref, cand)
    text = json.dumps(m.to_dict(), allow_nan=False)
    back = OutputMetrics.from_dict(json.loads(text))
    assert back == m


def test_worst_output_prefers_nonfinite_then_low_snr():
    ref = {"a": np.arange(10.0), "b": np.arange(10.0), "c": np.arange(10.0)}
    cand = {"a": np.arange(10.0) + 0.001, "b": np.arange(10.0) + 1.0, "c": np.arange(10.0)}
    assert worst_output(compare_outputs(ref, cand)) == "b"
    cand["c"] = cand["c"].copy()
    cand["c"][3] = np.inf
    assert worst_output(compare_outputs(ref, cand)) == "c"
    assert worst_output({}) is None
