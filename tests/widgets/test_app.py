"""The App, state-based (no browser): the default path through the steps on the bundled demo."""

from __future__ import annotations

import pytest

from tests.core.inspector_samples import saved_build_dir, synthetic_fp16, synthetic_int8_implicit
from tests.widgets.test_model_loader import _assert_inert
from trtwidgets import demo, trt
from trtwidgets.widgets.app import CALIBRATE, EXPLORE, INSPECT, STEPS, App


@pytest.fixture
def app(tmp_path):
    return App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path / "out"))


def test_defaults_need_no_choices(app):
    s = app.session
    assert s.model is not None and s.error == ""
    r = s.recipe
    assert r.flags == ("fp16", "int8") and r.calibrator.kind == "toolkit" and r.calibrator.method == "auto"
    assert r.calibration_data.kind == "demo" and r.calibration_shapes == {"x": (1, 3, 48, 192)}
    assert s.problems == ()
    # The pickers show the recipe.
    assert app.flags.value["flags"] == ("fp16", "int8")
    assert app.profiles_step.calibrator.choice.value == "toolkit:auto"
    assert app.calibrate_step.data_path.value == "demo"
    assert app.profiles_step.profiles is not None and app.profiles_step.profiles.value["profiles"] == r.profiles


def test_load_calibrate_inspect_explore(app, tmp_path):
    s = app.session
    assert app.calibrate(max_samples=4, progress=False)
    assert s.stats.samples == 4 and s.ranges
    view = app.calibrate_step.calibration_view.value
    assert "4 samples" in view and view.count("<tr>") == 11
    # The view ranks by the exported range's SQNR: auto's, each tensor's own method.
    assert s.calibration.method == "auto"
    chosen = {n: c.method for n, c in s.calibration.choices.items()}
    worst = min(chosen, key=lambda n: s.ranges[n][chosen[n]].sqnr_db)
    assert worst in view
    assert app.load_saved_build(str(saved_build_dir(tmp_path, "int8_implicit", synthetic_int8_implicit(), s.recipe)))
    assert app.inspect_choice.value == "int8_implicit"
    table = app.inspector.table
    assert len(table) > 3 and "INT8" in set(table["precision"])
    assert "<tbody>" in app.inspector.table_view.value or "<tr>" in app.inspector.table_view.value
    assert app.inspector.chart is not None and len(app.inspector.chart.data) > 0
    assert app.inspect_step.compare.comparison is None  # one build: nothing to compare
    app.load_saved_build(str(saved_build_dir(tmp_path, "fp16", synthetic_fp16(), s.recipe.replace(flags=("fp16",)))))
    counts = app.inspect_step.compare.comparison.precision_counts()
    assert list(counts.columns) == ["int8_implicit", "fp16"] and counts.loc["INT8", "fp16"] == 0
    assert app.inspect_choice.value == "fp16"
    assert app.explorer is None  # made when its tab opens
    app.tabs.selected_index = EXPLORE
    explorer = app.explorer
    assert explorer is not None and app.explore() is explorer
    assert len(explorer.hist_fig.data) > 0 and explorer.tensor in s.stats.tensors
    # New statistics replace the explorer's, not a stale copy.
    assert app.calibrate(max_samples=2, progress=False)
    assert app.explorer is not explorer and app.explorer.stats.samples == 2


def test_stale_banner_follows_changes(app, tmp_path):
    s = app.session
    assert app.calibrate(max_samples=2, progress=False)
    app.load_saved_build(str(saved_build_dir(tmp_path, "int8", synthetic_int8_implicit(), s.recipe)))
    assert app.banner.value == "" and all("(stale)" not in app.tabs.get_title(i) for i in range(len(STEPS)))
    app.flags.checkboxes["int8"].value = False
    assert s.recipe.flags == ("fp16",)
    assert "build:int8" in app.banner.value and "precision flags" in app.banner.value
    assert app.tabs.get_title(INSPECT).endswith("(stale)") and not app.tabs.get_title(CALIBRATE).endswith("(stale)")
    assert "precision flags" in app.inspect_step.stale_note.value
    # The recipe problem (a calibrator without INT8) is shown, not refused.
    assert "CALIBRATOR_WITHOUT_INT8" in app.flags_step.problems.value
    app.flags.checkboxes["int8"].value = True
    assert app.banner.value == "" and app.flags_step.problems.value == ""
    # A new calibration (opt) shape makes the statistics stale too.
    app.profiles_step.profiles.fields[0]["x"]["opt"].value = "1x3x48x256"
    app.profiles_step.profiles.fields[0]["x"]["max"].value = "1x3x48x256"
    assert s.recipe.calibration_shapes == {"x": (1, 3, 48, 256)}
    assert {"stats", "ranges", "build:int8"} <= set(s.stale)
    assert app.tabs.get_title(CALIBRATE).endswith("(stale)") and app.tabs.get_title(EXPLORE).endswith("(stale)")


def test_bad_inputs_keep_everything(app, tmp_path):
    s = app.session
    assert app.calibrate(max_samples=2, progress=False)
    stats, recipe = s.stats, s.recipe
    app.calibrate_step.data_path.value = str(tmp_path / "no-such-folder")
    assert app.calibrate(progress=False) is False
    assert "trtw-error" in app.error.value and s.stats is stats and s.recipe is recipe
    app.calibrate_step.data_path.value = "demo"
    assert app.load_saved_build(str(tmp_path / "missing")) is False
    assert "trtw-error" in app.error.value and s.builds == ()
    # A profile the model cannot take is refused; the recipe stays.
    app.profiles_step.profiles.fields[0]["x"]["opt"].value = "1x3x48"
    assert s.recipe is recipe and app.error.value


def test_names_from_builds_are_escaped(app, tmp_path):
    s = app.session
    evil = "<img src=x onerror=alert(1)>"
    app.load_saved_build(str(saved_build_dir(tmp_path, evil, synthetic_fp16(), s.recipe.replace(flags=("fp16",)))))
    assert f"build:{evil}" in s.stale
    _assert_inert(app.banner.value, f"build:{evil}")
    _assert_inert(app.build_step.builds_view.value, evil)


def test_recipe_save_and_load(app, tmp_path):
    path = app.save_recipe(str(tmp_path / "r.json"))
    assert path and "trtwidgets run" in app.load_step.recipe_status.value
    other = App(out_dir=str(tmp_path))
    assert other.session.model is None
    assert other.load_recipe(path)
    assert other.session.recipe == app.session.recipe and other.flags.value["flags"] == ("fp16", "int8")


def test_build_step_without_tensorrt_says_what_to_install(app):
    if trt.available():
        pytest.skip("TensorRT is installed here")
    assert app.build_panel.button.disabled
    assert "TensorRT is not installed" in app.build_panel.result.value


def test_continue_from_a_saved_builds_recipe(app, tmp_path):
    s = app.session
    app.load_saved_build(str(saved_build_dir(tmp_path, "fp16", synthetic_fp16(), s.recipe.replace(flags=("fp16",)))))
    assert "build:fp16" in s.stale
    assert app.use_build_recipe()
    assert s.recipe.flags == ("fp16",) and app.flags.value["flags"] == ("fp16",) and app.banner.value == ""


def test_saved_real_tensorrt_build_by_name(app):
    from trtwidgets.core.engine.saved_build import find_saved_builds

    found = find_saved_builds()
    tiny = [n for n in found if n.endswith("conv_relu_int8_implicit")]
    if not tiny or "cls_static_qdq_int8" not in found:
        pytest.skip("the real TensorRT 8.6 fixtures are not in this checkout")
    offered = app.build_step.saved_choice.options
    assert "cls_static_qdq_int8" in offered and tiny[0] not in offered  # only the demo's own builds
    assert app.load_saved_build("cls_static_qdq_int8")  # the build of the demo's Q/DQ export
    table = app.inspector.table
    assert len(table) >= 2 and "INT8" in set(table["precision"])
    # A build of another model (a tiny test model), asked for by name, is refused and says whose it is.
    assert app.load_saved_build(tiny[0]) is False
    assert "is of another model" in app.error.value and "trtwidgets run" in app.error.value
    assert list(app.session.graphs) == ["cls_static_qdq_int8"]


def test_quickstart_opens_without_a_stale_banner():
    from trtwidgets.core.engine.saved_build import find_saved_builds
    from trtwidgets.widgets.app import quickstart

    if "cls_static_qdq_int8" not in find_saved_builds():
        pytest.skip("the real TensorRT 8.6 fixtures are not in this checkout")
    app = quickstart(max_samples=2)
    s = app.session
    assert s.graphs and s.stats is not None
    # As the quickstart notebook goes on: the Q/DQ export's build beside TensorRT's implicit one.
    assert app.load_saved_build("cls_static_qdq_int8")
    assert s.stale == {} and app.banner.value == ""
    assert all("(stale)" not in app.tabs.get_title(i) for i in range(len(STEPS)))


def test_another_model_keeps_the_choices_and_marks_results_stale(app, tmp_path):
    from tests.core.models import qdq_conv_model, save

    s = app.session
    app.flags.checkboxes["int8"].value = False
    assert app.calibrate(max_samples=2, progress=False)
    assert app.load(save(qdq_conv_model(), tmp_path / "q.onnx"))
    assert s.recipe.flags == ("fp16",) and s.recipe.model_sha256 == s.model.sha256
    assert s.recipe.calibration_data is None  # the demo's crops do not fit another model
    assert {"stats", "ranges"} <= set(s.stale) and "model changed" in app.banner.value
    assert "QDQ_REQUIRES_INT8" in {f.code for f in s.findings}  # linted against the kept flags


def test_inspect_without_a_build_says_what_it_needs_and_offers_what_can_be_done(tmp_path):
    from tests.core.models import qdq_conv_model, save

    app = App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path / "out"))
    step = app.inspect_step
    assert step.start_box.layout.display != "none" and step.choice.layout.display == "none"
    assert "needs TensorRT and an NVIDIA GPU" in step.needs.value
    # 1. The recipe, for the GPU machine, with the command to run there.
    step.recipe_button.click()
    written = tmp_path / "out" / "recipe.json"
    assert written.is_file() and "trtwidgets run recipe.json --report report.html --build-dir build/" in \
        step.recipe_note.value
    # 2. A build of another model is refused, saying whose it is; nothing is added.
    other = App(model_path=save(qdq_conv_model(), tmp_path / "q.onnx"), out_dir=str(tmp_path / "o"))
    foreign = saved_build_dir(tmp_path, "theirs", synthetic_fp16(), other.session.recipe)
    step.build_path.value = str(foreign)
    step.load_button.click()
    assert "is of another model" in app.error.value and app.session.builds == ()
    # 3. A build of this model, made on the GPU machine: shown, and the explanation steps aside.
    step.build_path.value = str(saved_build_dir(tmp_path, "mine", synthetic_int8_implicit(), app.session.recipe))
    step.load_button.click()
    assert app.error.value == "" and app.inspect_choice.value == "mine"
    assert step.start_box.layout.display == "none" and step.choice.layout.display == ""
