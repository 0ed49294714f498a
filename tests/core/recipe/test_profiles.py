from __future__ import annotations

import pytest

from trtwidgets.core.common.errors import RecipeError
from trtwidgets.core.model.load import load_model
from trtwidgets.core.recipe.profiles import (Profile, ShapeRange, default_profiles, profile_problems,
                                             range_problems)

from tests.core.recipe_models import summary_of, two_input_model


@pytest.fixture(scope="module")
def summary():
    return summary_of(two_input_model())


def good_profile():
    return Profile({"x": ShapeRange((1, 3, 32, 32), (4, 3, 64, 64), (8, 3, 128, 128)),
                    "mask": ShapeRange((1, 16), (4, 16), (8, 16))})


def test_valid_profile_has_no_problems(summary):
    assert profile_problems([good_profile()], summary) == []


def test_min_greater_than_max_names_input_and_dim(summary):
    p = Profile({**good_profile().shapes, "x": ShapeRange((1, 3, 200, 32), (4, 3, 64, 64), (8, 3, 128, 128))})
    problems = profile_problems([p], summary)
    assert any("input 'x' dimension 2 (H): min 200 is greater than max 128" in m for m in problems), problems


def test_opt_outside_range(summary):
    p = Profile({**good_profile().shapes, "x": ShapeRange((1, 3, 32, 32), (4, 3, 64, 300), (8, 3, 128, 128))})
    problems = profile_problems([p], summary)
    assert any("input 'x' dimension 3 (W): opt 300 is outside [min, max] = [32, 128]" in m for m in problems), problems


def test_rank_mismatch(summary):
    problems = range_problems("x", ShapeRange((1, 3, 32), (1, 3, 32), (1, 3, 32)), summary.inputs[0].shape)
    assert len(problems) == 3 and "rank 3" in problems[0] and "rank 4" in problems[0]


def test_static_dim_must_match(summary):
    p = Profile({**good_profile().shapes, "mask": ShapeRange((1, 16), (4, 17), (8, 16))})
    problems = profile_problems([p], summary)
    assert problems == ["profile 0: input 'mask' dimension 1 is static (16) in the model, but the profile has opt=17."]


def test_every_dynamic_input_covered_by_every_profile(summary):
    second = Profile({"x": good_profile().shapes["x"]})
    problems = profile_problems([good_profile(), second], summary)
    assert len(problems) == 1 and problems[0].startswith("profile 1: dynamic input 'mask' has no shape range")


def test_unknown_input_and_no_profile(summary):
    p = Profile({**good_profile().shapes, "y": ShapeRange((1,), (1,), (1,))})
    assert any("'y' is not an input of the model" in m for m in profile_problems([p], summary))
    assert "no optimization profile" in profile_problems([], summary)[0]


def test_zero_dimension_rejected(summary):
    p = Profile({**good_profile().shapes, "mask": ShapeRange((0, 16), (4, 16), (8, 16))})
    assert any("min is 0" in m for m in profile_problems([p], summary))


def test_non_integer_dims_rejected():
    with pytest.raises(RecipeError, match="not an integer"):
        ShapeRange((1, 3.5), (1, 3), (1, 3))
    with pytest.raises(RecipeError, match="list of integers"):
        ShapeRange("1x3", (1, 3), (1, 3))


def test_profile_round_trip_and_copy():
    shapes = {"x": ShapeRange((1,), (2,), (3,))}
    p = Profile(shapes)
    shapes["y"] = ShapeRange((1,), (1,), (1,))
    assert set(p.shapes) == {"x"}, "a profile must not share the caller's dict"
    assert Profile.from_dict(p.to_dict()) == p
    with pytest.raises(RecipeError, match="unknown keys"):
        ShapeRange.from_dict({"min": [1], "opt": [1], "max": [1], "mxa": [2]})


def test_default_profiles_from_data(summary):
    data = {"x": [(2, 3, 48, 160), (2, 3, 48, 192), (2, 3, 48, 192), (1, 3, 32, 100)], "mask": (2, 16)}
    (p,) = default_profiles(summary, data)
    x = p.shapes["x"]
    assert x.opt == (2, 3, 48, 192)  # the most frequent shape
    assert x.min == (1, 3, 32, 100) and x.max == (2, 3, 48, 192)
    assert p.shapes["mask"] == ShapeRange((1, 16), (2, 16), (2, 16))
    assert profile_problems([p], summary) == []


def test_default_profiles_max_batch_and_fallback(summary):
    (p,) = default_profiles(summary, max_batch=16, fallback_dim=64)
    assert p.shapes["x"] == ShapeRange((1, 3, 64, 64), (1, 3, 64, 64), (16, 3, 64, 64))
    assert p.shapes["mask"] == ShapeRange((1, 16), (1, 16), (16, 16))
    assert profile_problems([p], summary) == []


def test_default_profiles_static_model_needs_none():
    assert default_profiles(summary_of(two_input_model((1, 3, 8, 8), (1, 16)))) == ()


def test_default_profiles_demo_model(cls_model_path):
    summary = load_model(cls_model_path).summary
    (p,) = default_profiles(summary)
    assert p.shapes["x"].opt == (1, 3, 48, 192)
    assert profile_problems([p], summary) == []
    (p8,) = default_profiles(summary, {"x": (8, 3, 48, 192)})
    assert p8.shapes["x"] == ShapeRange((1, 3, 48, 192), (8, 3, 48, 192), (8, 3, 48, 192))


def test_profile_shapes_are_read_only():
    p = good_profile()
    with pytest.raises(TypeError):
        p.shapes["y"] = ShapeRange((1,), (1,), (1,))
    with pytest.raises(TypeError):
        del p.shapes["x"]
    assert set(p.shapes) == {"x", "mask"}


def test_profile_equality_hash_and_copies_survive_read_only_shapes():
    import copy
    import pickle

    p = good_profile()
    assert p == good_profile() and p != Profile({"x": good_profile().shapes["x"]})
    assert hash(p) == hash(good_profile()), "equal profiles hash alike"
    assert {p, good_profile()} == {p}
    for twin in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert twin == p
        with pytest.raises(TypeError):
            twin.shapes["y"] = ShapeRange((1,), (1,), (1,))
    assert Profile(p.shapes) == p, "a profile accepts another profile's read-only shapes"
