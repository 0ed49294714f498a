"""The App on a user's own model (issue 15): defaults from the data, adaptation as a control, short tabs."""

from __future__ import annotations

import json

import pytest

from tests.own_models import dynamic_hw_model, encoder_model, image_samples, save, token_samples
from trtwidgets.core.recipe.data_defaults import SINGLE_SAMPLE_MAX_BATCH
from trtwidgets import demo
from trtwidgets.widgets.app import EXPLORE, INSPECT, PLAN, STEPS, App


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    d = tmp_path_factory.mktemp("own")
    return {"model": save(dynamic_hw_model(), d / "detector.onnx"),
            "same": image_samples(d / "same", n=4, sizes=[(96, 128)]),
            "mixed": image_samples(d / "mixed", n=4, sizes=[(96, 128), (64, 80)]),
            "dir": d}


def _text(html_text):
    import html

    return html.unescape(html_text)


def _codes(app):
    return [f.code for f in app.session.findings]


def test_data_given_to_the_app_sets_the_profiles_and_says_so(own, tmp_path):
    app = App(model_path=own["model"], data=str(own["same"]), out_dir=str(tmp_path))
    s = app.session
    rng = s.recipe.profiles[0].shapes["x"]
    # Single samples of a dynamic batch: opt 1, and the engine may take up to SINGLE_SAMPLE_MAX_BATCH (said so).
    assert (rng.min, rng.opt, rng.max) == ((1, 3, 48, 64), (1, 3, 96, 128), (SINGLE_SAMPLE_MAX_BATCH, 3, 192, 256))
    assert "opt 1x3x96x128 is the calibration data's shape" in _text(app.calibrate_step.data_box.note.value)
    assert f"up to {SINGLE_SAMPLE_MAX_BATCH}" in _text(app.calibrate_step.data_box.note.value)
    assert app.profiles_step.profiles.fields[0]["x"]["opt"].value == "1x3x96x128"  # the editor shows it
    assert "PROFILE_OPT_TOO_SMALL" not in _codes(app) and s.problems == ()
    assert app.calibrate_step.data_box.adapt == {}  # every sample has the opt shape: nothing to choose
    assert app.calibrate(progress=False) and s.stats.samples == 4 and app.error.value == ""


def test_without_data_lint_says_the_placeholder_profile_cannot_be_right_then_the_data_box_fixes_it(own, tmp_path):
    app = App(model_path=own["model"], out_dir=str(tmp_path))
    assert app.session.recipe.calibration_shapes == {"x": (1, 3, 1, 1)}
    assert "PROFILE_OPT_TOO_SMALL" in _codes(app)
    app.calibrate_step.data_path.value = str(own["same"])  # typed, then Enter
    assert app.session.recipe.calibration_shapes == {"x": (1, 3, 96, 128)}
    assert "PROFILE_OPT_TOO_SMALL" not in _codes(app) and app.error.value == ""


def test_samples_of_several_shapes_get_a_pad_truncate_resize_control(own, tmp_path):
    app = App(model_path=own["model"], data=str(own["mixed"]), out_dir=str(tmp_path))
    s = app.session
    assert list(app.calibrate_step.data_box.adapt) == ["x"]
    control = app.calibrate_step.data_box.adapt["x"]
    assert control.options == ("pad", "truncate", "resize") and control.value == "resize"
    shown = app.calibrate_step.data_box.adapt_box.children[0]
    text = " ".join(getattr(w, "value", "") for w in shown.children if hasattr(w, "value") and isinstance(w.value, str))
    for mode in ("pad:", "truncate:", "resize:"):
        assert mode in text
    assert dict(s.recipe.calibration_data.adapt) == {"x": "resize"}  # the choice shown is the one used
    assert app.calibrate(progress=False) and s.stats.samples == 4
    control.value = "pad"  # 96x128 samples cannot be padded to... the opt shape is the larger one: pad works
    assert dict(s.recipe.calibration_data.adapt) == {"x": "pad"}
    assert app.calibrate(progress=False)


def test_a_mismatch_found_while_calibrating_points_at_the_control_not_a_python_argument(own, tmp_path):
    import shutil

    from trtwidgets.core.recipe.data_defaults import PEEK_SAMPLES

    # The data's shapes are read from the first samples; an odd one further on is found by the calibration.
    folder = image_samples(tmp_path / "late", n=PEEK_SAMPLES, sizes=[(96, 128)])
    odd = image_samples(tmp_path / "odd", n=1, sizes=[(64, 80)])
    shutil.copy(odd / "sample_000.npy", folder / f"sample_{PEEK_SAMPLES:03d}.npy")
    app = App(model_path=own["model"], data=str(folder), out_dir=str(tmp_path))
    assert app.calibrate_step.data_box.adapt == {}
    assert app.calibrate(progress=False) is False
    message = _text(app.error.value)
    assert "adapt={" not in message and "pad, truncate or resize under the data box" in message
    assert app.calibrate_step.data_box.adapt["x"].value == "resize"  # now offered, and chosen
    assert app.calibrate(progress=False), app.error.value
    assert app.session.stats.samples == PEEK_SAMPLES + 1


def test_a_recipe_that_names_data_but_no_profile_takes_the_datas_shapes(own, tmp_path):
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import Recipe

    model = load_model(own["model"])
    d = Recipe.for_model(model).to_dict()
    d["profiles"] = []
    d["calibration_data"] = {"kind": "npy_dir", "path": str(own["same"])}
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(d))
    app = App(out_dir=str(tmp_path))
    assert app.load_recipe(str(path)), app.error.value
    assert app.session.recipe.calibration_shapes == {"x": (1, 3, 96, 128)}
    assert "calibration data's shape" in _text(app.calibrate_step.data_box.note.value)


def test_an_encoder_with_integer_inputs_calibrates_with_no_profile_edit(tmp_path):
    model = save(encoder_model(), tmp_path / "encoder.onnx")
    app = App(model_path=model, data=str(token_samples(tmp_path / "tokens", seq=12)), out_dir=str(tmp_path))
    shapes = app.session.recipe.calibration_shapes
    assert shapes == {"input_ids": (1, 12), "attention_mask": (1, 12)}
    assert app.calibrate(progress=False), app.error.value
    assert app.session.stats.samples == 6


def test_unreadable_data_is_refused_and_keeps_the_recipe(own, tmp_path):
    app = App(model_path=own["model"], data=str(own["same"]), out_dir=str(tmp_path))
    before = app.session.recipe
    app.calibrate_step.data_path.value = str(tmp_path / "nope")
    assert app.session.recipe is before and "trtw-error" in app.error.value


def test_tab_titles_are_short_and_there_is_a_plan_step():
    assert all(len(t) <= 12 for t in STEPS), STEPS
    assert STEPS[PLAN] == "5 Plan" and STEPS[INSPECT] == "7 Inspect" and STEPS[EXPLORE] == "8 Explore"


def test_the_qdq_build_of_the_loaded_model_names_the_export_rule(tmp_path):
    app = App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path))
    assert app.load_saved_build("cls_static_qdq_int8")
    reasons = app.inspector.table["why_not_int8_reason"]
    assert reasons.str.startswith("kept float by the export, rule ").sum() >= 18
    assert "(rule 5)" in app.inspector.causes.value


def test_the_plan_tab_holds_the_planners_step(tmp_path):
    from trtwidgets.widgets.plan_step import PlanStep

    app = App(out_dir=str(tmp_path))
    assert isinstance(app.plan_step, PlanStep) and app.tabs.children[PLAN] is app.plan_step


def test_the_explore_tab_says_the_statistics_are_ready_before_it_is_drawn(own, tmp_path):
    app = App(model_path=own["model"], data=str(own["same"]), out_dir=str(tmp_path))
    assert "Collect statistics" in app.explore_step.children[0].value
    assert app.calibrate(progress=False)
    assert app.explorer is None and "4 samples are ready" in app.explore_step.children[0].value
    app.tabs.selected_index = EXPLORE
    assert app.explorer is not None and app.explore_step.children == (app.explorer,)


def test_another_model_forgets_the_previous_datas_shapes(own, tmp_path):
    app = App(model_path=own["model"], data=str(own["mixed"]), out_dir=str(tmp_path))
    assert app.session.data_shapes and "x" in app.calibrate_step.data_box.adapt
    assert app.load(demo.MODEL_PATH)  # the demo's input is also called 'x'
    assert app.session.data_shapes == {} and app.session.data_note == ""
    assert app.calibrate_step.data_box.adapt == {} and app.calibrate_step.data_box.note.value == ""
