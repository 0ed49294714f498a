"""Profiles from the calibration data (issue 15): opt = the data's shape, min/max around it, a note."""

from __future__ import annotations

import pytest

from tests.own_models import dynamic_hw_model, encoder_model, image_samples, save, token_samples
from trtwidgets.core.model.load import load_model
from trtwidgets.core.recipe.data_defaults import (ADAPT_CHOICES, SINGLE_SAMPLE_MAX_BATCH, data_range,
                                                  fill_recipe_from_data, mismatched_inputs, profiles_from_data,
                                                  sample_shapes)
from trtwidgets.core.recipe.profiles import Profile, ShapeRange, default_profiles, profile_problems
from trtwidgets.core.recipe.recipe import Recipe


@pytest.fixture(scope="module")
def det(tmp_path_factory):
    d = tmp_path_factory.mktemp("det")
    return load_model(save(dynamic_hw_model(), d / "det.onnx")), d


def test_without_data_the_model_only_default_is_a_placeholder(det):
    model, _ = det
    (p,) = default_profiles(model.summary)
    assert p.shapes["x"].opt == (1, 3, 1, 1)  # what issue 15 saw; data replace it below


def test_opt_is_the_datas_shape_with_min_and_max_around_it(det):
    model, d = det
    shapes = sample_shapes(image_samples(d / "same", n=3, sizes=[(96, 128)]), model.summary)
    assert shapes == {"x": [(1, 3, 96, 128)] * 3}
    out = profiles_from_data(model.summary, shapes)
    rng = out.profiles[0].shapes["x"]
    # The samples are single (batch 1) and the batch is dynamic: min = opt = 1, but the engine may take more.
    assert (rng.min, rng.opt, rng.max) == ((1, 3, 48, 64), (1, 3, 96, 128), (SINGLE_SAMPLE_MAX_BATCH, 3, 192, 256))
    assert out.filled == ("x",)
    assert "opt 1x3x96x128 is the calibration data's shape" in out.note and "min 1x3x48x64" in out.note
    assert f"the samples are single, so the batch runs from 1 up to {SINGLE_SAMPLE_MAX_BATCH}" in out.note
    assert profile_problems(out.profiles, model.summary) == []


def test_a_batch_seen_in_the_data_is_its_max_and_a_static_batch_stays():
    rng = data_range(("N", 3, "H", "W"), [(4, 3, 64, 64), (4, 3, 64, 64)])
    assert (rng.min[0], rng.opt[0], rng.max[0]) == (1, 4, 4)
    rng = data_range((1, 3, "H", "W"), [(1, 3, 64, 64)])
    assert (rng.min[0], rng.opt[0], rng.max[0]) == (1, 1, 1)


def test_samples_of_several_sizes_span_what_was_seen_and_opt_is_the_most_frequent():
    rng = data_range(("N", 3, "H", "W"), [(1, 3, 64, 64), (1, 3, 96, 128), (1, 3, 96, 128), (2, 3, 80, 100)])
    assert (rng.min, rng.opt, rng.max) == ((1, 3, 64, 64), (1, 3, 96, 128), (2, 3, 96, 128))
    assert data_range(("N", 3, "H", "W"), [(1, 96)]) is None  # no sample of the model's rank


def test_a_range_the_user_set_is_kept_and_the_mismatch_named(det):
    model, _ = det
    mine = Profile({"x": ShapeRange((1, 3, 32, 32), (1, 3, 64, 64), (1, 3, 128, 128))})
    out = profiles_from_data(model.summary, {"x": [(1, 3, 96, 128)]}, [mine])
    assert out.profiles == (mine,) and out.filled == () and out.note == ""
    assert mismatched_inputs(mine.opt_shapes(), {"x": [(1, 3, 96, 128), (1, 3, 64, 64)]}) == {"x": ((1, 3, 96, 128),)}
    assert mismatched_inputs(mine.opt_shapes(), {"x": [(4, 3, 64, 64)]}) == {}  # the batch is not a mismatch


def test_integer_inputs_of_an_encoder_get_the_sequence_length(tmp_path):
    model = load_model(save(encoder_model(), tmp_path / "enc.onnx"))
    recipe = Recipe.for_model(model).replace(calibration_data=_spec(token_samples(tmp_path / "tok", seq=12)))
    filled, note, shapes = fill_recipe_from_data(recipe, model)
    for name in ("input_ids", "attention_mask"):
        assert filled.profiles[0].shapes[name].opt == (1, 12)
        assert filled.profiles[0].shapes[name].max == (SINGLE_SAMPLE_MAX_BATCH, 24)
    assert "'input_ids'" in note and "'attention_mask'" in note


def test_a_recipe_without_data_or_without_dynamic_inputs_is_unchanged(det):
    model, _ = det
    recipe = Recipe.for_model(model)
    assert fill_recipe_from_data(recipe, model) == (recipe, "", {})


def test_every_adaptation_has_a_one_line_explanation():
    from trtwidgets.core.calibration.data import ADAPT_MODES

    assert set(ADAPT_CHOICES) == set(ADAPT_MODES)
    assert all("\n" not in text and text.startswith(mode + ":") for mode, text in ADAPT_CHOICES.items())


def _spec(folder):
    from trtwidgets.core.calibration.data import spec_for

    return spec_for(str(folder))
