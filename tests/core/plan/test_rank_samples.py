"""How many held-back samples the planner ranks layers on (``phases.rank_samples``): fewer only for large inputs."""

from __future__ import annotations

import numpy as np
import pytest

from trtwidgets.core.plan.phases import RANK_MAX_VALUES, rank_samples


def _feeds(n, *shapes):
    return [{f"in{i}": np.zeros(s, np.float32) for i, s in enumerate(shapes)} for _ in range(n)]


@pytest.mark.parametrize("n, shapes, ranked", [
    (8, [(1, 3, 480, 640)], 4),      # the U-Net of the plan-time benchmark: 0.92M values a sample
    (8, [(1, 3, 320, 320)], 8),      # the zoo's 320x320 detectors: every held-back sample, as before the bound
    (32, [(1, 3, 224, 224)], 16),    # a classifier: at most 16
    (4, [(1, 3, 1024, 1024)], 4),    # a 1024x1024 detector: never fewer than 4 ...
    (2, [(1, 3, 1024, 1024)], 2),    # ... unless fewer are held back
    (40, [(1, 64), (1, 64)], 16),    # text: two small inputs
])
def test_ranking_takes_fewer_samples_only_where_they_are_large(n, shapes, ranked):
    assert rank_samples(_feeds(n, *shapes)) == ranked


def test_the_bound_is_on_all_inputs_of_a_sample():
    half = RANK_MAX_VALUES // 8  # two inputs of half that size each: 8 samples hold RANK_MAX_VALUES * 2 values
    assert rank_samples(_feeds(16, (half,), (half,))) == 4
    assert rank_samples(_feeds(16, (half,))) == 8
