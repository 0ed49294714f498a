"""A stale result says what changed in words a person reads, not as two JSON dumps (seen in issue 15's walk)."""

from __future__ import annotations

from trtwidgets.core.recipe.staleness import stale_reason


def test_an_object_change_names_only_the_keys_that_changed():
    made = {"model": "m", "calibrator": {"amax_overrides": {}, "kind": "none", "method": None, "percentile": 99.99}}
    now = {"model": "m", "calibrator": {"amax_overrides": {}, "kind": "toolkit", "method": "entropy", "percentile": 99.99}}
    assert stale_reason(made, now) == "the calibrator changed (kind: none -> toolkit, method: none -> entropy)"


def test_lists_and_model_changes_read_as_before():
    assert stale_reason({"model": "m", "flags": ["fp16", "int8"]}, {"model": "m", "flags": ["fp16"]}) == \
        "the precision flags changed (fp16, int8 -> fp16)"
    assert stale_reason({"model": "a"}, {"model": "b"}) == "the model changed since it was made"
