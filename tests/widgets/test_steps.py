"""The App's tabs as step widgets (issue 20 part 4): each owns its controls and handlers around the Session."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.core.inspector_samples import saved_build_dir, synthetic_fp16, synthetic_int8_implicit
from trtwidgets import demo
from trtwidgets.widgets import (BuildStep, CalibrateStep, ExploreStep, FlagsStep, InspectStep, ProfilesStep, Session, StepWidget)
from trtwidgets.widgets.app import STEP_KEYS, App

WIDGETS = Path(__file__).resolve().parents[2] / "trtwidgets" / "widgets"


@pytest.fixture
def session():
    from trtwidgets.core.recipe.recipe import CalibratorSpec

    s = Session()
    assert s.load(demo.MODEL_PATH)
    assert s.set_recipe(s.default_recipe(flags=("fp16", "int8"), calibrator=CalibratorSpec(kind="toolkit",
                                                                                           method="entropy")))
    assert s.use_data("demo")
    return s


def test_every_tab_is_its_step_widget_on_the_apps_session(tmp_path):
    app = App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path))
    assert list(app.steps) == list(STEP_KEYS)
    for i, (key, step) in enumerate(app.steps.items()):
        assert app.tabs.children[i] is step, key
        assert isinstance(step, StepWidget) and step.session is app.session, key
    assert list(app.steps.values()) == [app.load_step, app.flags_step, app.profiles_step, app.calibrate_step,
                                        app.plan_step, app.build_step, app.inspect_step, app.explore_step]
    # The App's few parts are the steps' own, not copies; the rest is reached through the steps.
    assert app.flags is app.flags_step.picker and app.build_panel is app.build_step.build_panel
    assert app.inspect_choice is app.inspect_step.choice and app.inspector is app.inspect_step.inspector
    assert app.explorer is app.explore_step.explorer
    assert not any(hasattr(app, old) for old in ("data_path", "saved_choice", "loader", "calibration_view"))


def test_no_module_sets_attributes_on_the_app_from_outside():
    offenders = []
    for path in sorted(WIDGETS.glob("*.py")):
        if path.name == "app.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            offenders += [f"{path.name}:{node.lineno}" for t in targets
                          if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "app"]
    assert offenders == []


def test_steps_work_without_the_app_and_report_errors_to_who_listens(session):
    flags, profiles, errors = FlagsStep(session), ProfilesStep(session), []
    profiles.on_error(errors.append)
    assert flags.picker.value["flags"] == ("fp16", "int8") and profiles.profiles is not None
    flags.picker.checkboxes["int8"].value = False
    assert session.recipe.flags == ("fp16",)
    assert "CALIBRATOR_WITHOUT_INT8" in flags.problems.value  # the recipe's problem, shown in the step
    # A recipe set elsewhere is shown, and showing it does not write back.
    before = session.recipe
    assert session.set_recipe(flags=("fp16", "int8"))
    assert flags.picker.value["flags"] == ("fp16", "int8") and session.recipe is not before
    recipe = session.recipe
    dynamic = profiles.profiles.fields[0]
    name = next(iter(dynamic))
    dynamic[name]["opt"].value = "1x3"  # the wrong rank: refused, said, the recipe kept
    assert session.recipe is recipe and errors and "profiles" in str(errors[-1]).lower()


def test_the_profile_editor_is_made_for_each_model(session, tmp_path):
    from tests.own_models import dynamic_hw_model, save

    step = ProfilesStep(session)
    first = step.profiles
    assert session.load(save(dynamic_hw_model(), tmp_path / "d.onnx"))
    assert step.profiles is None  # the demo's editor never receives the new model's profiles
    assert session.set_recipe(session.default_recipe())
    assert step.profiles is not None and step.profiles is not first
    assert step.profiles_box.children == (step.profiles,)


def test_calibrate_and_explore_steps(session, tmp_path):
    calibrate, explore = CalibrateStep(session), ExploreStep(session, out_dir=str(tmp_path))
    assert calibrate.data_path.value == "demo" and explore.explorer is None
    assert calibrate.calibrate(max_samples=2, progress=False)
    assert "2 samples" in calibrate.calibration_view.value
    assert explore.explorer is None and "2 samples are ready" in explore.children[0].value
    explore.active = True  # its tab opened
    first = explore.explorer
    assert first is not None and explore.children == (first,)
    assert calibrate.calibrate(max_samples=3, progress=False)
    assert explore.explorer is not first and explore.explorer.stats.samples == 3


def test_use_its_recipe_takes_the_inspected_builds(tmp_path):
    app = App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path / "out"))
    s = app.session
    assert app.load_saved_build(str(saved_build_dir(tmp_path, "int8", synthetic_int8_implicit(), s.recipe)))
    assert app.load_saved_build(str(saved_build_dir(tmp_path, "fp16", synthetic_fp16(),
                                                    s.recipe.replace(flags=("fp16",)))))
    assert isinstance(app.build_step, BuildStep) and isinstance(app.inspect_step, InspectStep)
    assert app.build_step.inspected == "fp16"  # the latest build is shown
    app.inspect_choice.value = "int8"
    assert app.build_step.inspected == "int8"
    assert s.set_recipe(flags=("fp16",))
    app.build_step.use_recipe_button.click()
    assert s.recipe.flags == ("fp16", "int8") and app.error.value == ""
