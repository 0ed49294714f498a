"""Session: results remember what they were made from; earlier changes mark later results stale, errors lose nothing."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from tests.core.inspector_samples import saved_build_dir, synthetic_fp16, synthetic_int8_implicit
from tests.core.models import qdq_conv_model, save
from trtwidgets import demo
from trtwidgets.core.calibration.data import CalibrationDataSpec
from trtwidgets.core.recipe.profiles import Profile, ShapeRange
from trtwidgets.core.recipe.recipe import CalibratorSpec
from trtwidgets.core.engine.saved_build import load_saved_build
from trtwidgets.widgets import Session

FEEDS = demo.sample_inputs(1)[:3]


@pytest.fixture
def session(cls_model_path):
    s = Session()
    assert s.load(cls_model_path)
    assert s.set_recipe(s.default_recipe(flags=("fp16", "int8"), calibrator=CalibratorSpec(kind="toolkit", method="entropy"),
                                         calibration_data=CalibrationDataSpec(kind="demo", max_samples=3)))
    assert s.problems == ()
    return s


def test_new_results_are_current(session):
    assert session.calibrate(progress=False)
    assert session.stats.samples == 3 and session.ranges and session.calibration.method == "entropy"
    assert session.stale == {}


def test_flag_change_marks_builds_stale_not_stats(session, tmp_path):
    assert session.calibrate(progress=False)
    assert session.add_build(saved_build_dir(tmp_path, "int8", synthetic_int8_implicit(), session.recipe))
    assert set(session.graphs) == {"int8"} and session.stale == {}
    stats = session.stats
    session.set_recipe(flags=("fp16",))
    assert set(session.stale) == {"build:int8"}
    assert "precision flags" in session.stale["build:int8"] and "fp16, int8 -> fp16" in session.stale["build:int8"]
    # Kept, not deleted.
    assert session.stats is stats and "int8" in session.graphs and len(session.builds) == 1
    # Changing the flag back makes the build current again.
    session.set_recipe(flags=("fp16", "int8"))
    assert session.stale == {}


def test_calibration_shape_change_marks_stats_ranges_and_builds(session, tmp_path):
    assert session.calibrate(progress=False)
    session.add_build(saved_build_dir(tmp_path, "int8", synthetic_int8_implicit(), session.recipe))
    wide = Profile({"x": ShapeRange((1, 3, 48, 192), (1, 3, 48, 320), (1, 3, 48, 320))})
    assert session.set_recipe(profiles=(wide,))
    assert set(session.stale) == {"stats", "ranges", "build:int8"}
    assert "calibration (opt) shapes" in session.stale["stats"] and "flags" not in session.stale["stats"]
    assert "320" in session.stale["stats"]


def test_percentile_and_overrides(session, tmp_path):
    assert session.calibrate(progress=False)
    session.add_build(saved_build_dir(tmp_path, "int8", synthetic_int8_implicit(), session.recipe))
    assert session.recompute_ranges(99.9)
    assert session.recipe.calibrator.percentile == 99.9
    # New ranges are current; the build was calibrated with the old percentile.
    assert "ranges" not in session.stale and "stats" not in session.stale
    assert "build:int8" in session.stale
    session.set_recipe(calibrator=dataclasses.replace(session.recipe.calibrator, percentile=99.99))
    assert session.stale.keys() == {"ranges"}
    # An amax override (the explorer writes it into the recipe) changes what the build used.
    name = next(iter(session.stats.tensors))
    session.set_recipe(calibrator=dataclasses.replace(session.recipe.calibrator, amax_overrides={name: 1.5}))
    assert "build:int8" in session.stale and "calibrator" in session.stale["build:int8"]


def test_recomputed_ranges_refit_the_calibration(session):
    # The calibration, the statistics and the ranges agree after a new percentile (issue 20).
    assert session.calibrate(progress=False)
    before = session.calibration
    assert session.recompute_ranges(99.0)
    cal = session.calibration
    assert cal is not before and cal.stats is session.stats and cal.ranges is session.ranges
    assert cal.percentile == 99.0 == session.recipe.calibrator.percentile and cal.method == before.method
    # The percentile ranges are recomputed (the demo's input, text lines on a flat background, has a few
    # distinct values, so its 99th and 99.99th percentiles coincide: some other tensor's move).
    moved = [t for t in cal.ranges if session.ranges[t]["percentile"].amax != before.ranges[t]["percentile"].amax]
    assert len(moved) > len(cal.ranges) // 2
    t = moved[0]
    assert cal.amax[t] == cal.ranges[t][cal.method].amax
    # The export's options carry no ranges: those are the calibration's.
    opts = session.qdq_options(dense_int8=False)
    assert opts.dense_int8 is False and "method" not in opts.to_dict()


def test_the_calibration_is_the_one_typed_value_stats_and_ranges_are_read_from(session, tmp_path):
    import traitlets

    from trtwidgets.core.calibration.calibration import Calibration

    assert session.stats is None and session.ranges is None
    assert session.calibrate(progress=False)
    cal = session.calibration
    assert session.stats is cal.stats and session.ranges is cal.ranges
    with pytest.raises(AttributeError):
        session.stats = cal.stats  # read from the calibration, never kept beside it
    with pytest.raises(traitlets.TraitError):
        session.calibration = {"stats": cal.stats}
    # A calibration saved and loaded (from a file, another session) is the session's as it is.
    loaded = Calibration.load(cal.refit(method="max").with_override(next(iter(cal.stats.tensors)), 2.0)
                              .save(tmp_path / "cal.npz"))
    session.calibration = loaded
    assert session.stats is loaded.stats and session.calibration.method == "max" and session.stale == {}
    # Choosing another method refits it, and the recipe's toolkit calibrator says the same.
    assert session.set_method("percentile")
    assert session.calibration.method == "percentile" and session.recipe.calibrator.method == "percentile"
    assert dict(session.calibration.overrides) == dict(loaded.overrides) and session.stats is loaded.stats
    assert not session.set_method("no-such-method") and "no-such-method" in session.error
    assert session.calibration.method == "percentile"


def test_a_plan_is_stale_when_what_it_was_made_from_changes(session, tmp_path):
    from trtwidgets.core.plan.plan_artifact import Plan

    assert session.calibrate(progress=False)
    plan = _tiny_plan(session)
    session.set_plan(plan)
    assert isinstance(session.plan, Plan) and session.stale == {}
    # The explorer's override (a refit of the session's calibration) changes what a plan would use.
    name = next(iter(session.stats.tensors))
    session.calibration = session.calibration.with_override(name, 1.25)
    assert "plan" in session.stale and "calibration changed" in session.stale["plan"]
    assert "overrides" in session.stale["plan"] and set(session.stale) == {"plan"}
    session.calibration = session.calibration.without_override(name)
    assert session.stale == {}
    # Held-back data, another TensorRT version (the Q/DQ options), and another model make it stale too.
    held = tmp_path / "held"
    held.mkdir()
    np.save(held / "a.npy", FEEDS[0]["x"])
    assert session.use_held_back(held) and "held-back data changed" in session.stale["plan"]
    assert session.use_held_back("") and session.stale == {}
    assert session.set_recipe(trt_version="10.16") and "target TensorRT version" in session.stale["plan"]
    assert session.plan is plan  # kept, said so


def _tiny_plan(session):
    """A real plan of the session's model: FP16 only (cancelled before the search), so it is quick."""
    import threading

    from trtwidgets.core.plan.planner import plan

    token = threading.Event()
    token.set()
    return plan(session.model, FEEDS * 4, calibration=session.calibration, progress=False, cancel=token)


def test_held_back_folder_is_checked_and_kept(session, tmp_path):
    assert session.use_held_back(tmp_path / "nowhere") is False and session.held_back == ""
    assert session.error
    assert session.use_held_back("demo") is False and "not a held-back folder" in session.error
    held = tmp_path / "held"
    held.mkdir()
    for i in range(3):
        np.save(held / f"s{i}.npy", FEEDS[i]["x"])
    assert session.use_held_back(str(held)) and session.held_back == str(held)
    feeds = session.held_back_feeds()
    assert len(feeds) == 3 and feeds[0]["x"].shape == FEEDS[0]["x"].shape


def test_saved_build_with_other_paths_is_current(session, tmp_path):
    # A build made elsewhere has another cache path and model path: the same build all the same.
    elsewhere = session.recipe.replace(model_path="/gpu/box/cls.onnx",
                                       calibrator=dataclasses.replace(session.recipe.calibrator, cache_path="/gpu/c.cache"))
    session.add_build(saved_build_dir(tmp_path, "int8", synthetic_int8_implicit(), elsewhere))
    assert session.stale == {}


def test_new_model_marks_everything_stale_and_keeps_it(session, tmp_path):
    assert session.calibrate(progress=False)
    session.add_build(saved_build_dir(tmp_path, "fp16", synthetic_fp16(), session.recipe))
    stats, builds = session.stats, session.builds
    assert session.load(save(qdq_conv_model(), tmp_path / "q.onnx"))
    assert set(session.stale) == {"stats", "ranges", "build:fp16"}
    assert all("model changed" in why for why in session.stale.values())
    assert session.stats is stats and session.builds == builds


def test_errors_lose_nothing(session, tmp_path):
    assert session.calibrate(progress=False)
    stats, ranges, recipe = session.stats, session.ranges, session.recipe
    # Data that does not fit the model.
    bad = [{"x": FEEDS[0]["x"][:, :2]}]
    assert session.calibrate(bad, progress=False) is False
    assert session.error and "Fix" in session.error
    assert session.stats is stats and session.ranges is ranges
    # A profile that does not fit the model's input.
    wrong = Profile({"x": ShapeRange((1, 3, 48), (1, 3, 48), (1, 3, 48))})
    assert session.set_recipe(profiles=(wrong,)) is False
    assert session.recipe is recipe and "x" in session.error
    # A missing build directory and an inspector JSON that is not one.
    assert session.add_build(tmp_path / "nope") is False and session.builds == ()
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "engine.graph.json").write_text("{not json", encoding="utf-8")
    assert session.add_build(junk) is False and session.builds == () and session.graphs == {}
    # A broken recipe file.
    (tmp_path / "bad.json").write_text('{"schema_version": 1, "model_path": 3}', encoding="utf-8")
    assert session.load_recipe(tmp_path / "bad.json") is False
    assert session.recipe is recipe and session.stats is stats


def test_recipe_round_trip(session, tmp_path):
    path = session.save_recipe(tmp_path / "r.json")
    assert path and json.loads(open(path).read())["flags"] == ["fp16", "int8"]
    other = Session()
    assert other.load_recipe(path)
    assert other.recipe == session.recipe and other.model.sha256 == session.model.sha256


def test_builds_appended_by_other_widgets_are_registered(session, tmp_path):
    # The build panel appends to session.builds directly.
    build = load_saved_build(saved_build_dir(tmp_path, "fp16", synthetic_fp16(), session.recipe.replace(flags=("fp16",))))
    session.builds = session.builds + (build,)
    assert "fp16" in session.graphs and len(session.graphs["fp16"].layers) > 3
    assert "build:fp16" in session.stale  # built with fp16 only; the recipe now says fp16+int8
    assert session.build_named("fp16") is build


def test_calibrate_without_data_for_a_foreign_model(tmp_path):
    s = Session()
    assert s.load(save(qdq_conv_model(), tmp_path / "q.onnx"))
    assert s.calibrate(progress=False) is False
    assert "calibration data" in s.error and s.stats is None


def test_use_a_saved_builds_recipe(session, tmp_path):
    elsewhere = session.recipe.replace(flags=("fp16",), model_path="/gpu/box/cls.onnx", timing_cache="/gpu/timing.cache",
                                       calibrator=dataclasses.replace(session.recipe.calibrator, cache_path="/gpu/c.cache"))
    assert session.add_build(saved_build_dir(tmp_path, "fp16", synthetic_fp16(), elsewhere))
    assert "build:fp16" in session.stale
    assert session.use_build_recipe("fp16")
    r = session.recipe
    assert r.flags == ("fp16",) and r.timing_cache is None and r.model_path == str(session.model.path)
    assert r.calibrator.cache_path is None  # the GPU machine's path does not exist here
    assert session.stale == {}


def test_a_build_of_another_model_is_refused(session, tmp_path):
    other = session.recipe.replace(model_sha256="0" * 64)
    recipe, builds = session.recipe, session.builds
    assert session.add_build(saved_build_dir(tmp_path, "other", synthetic_fp16(), other)) is False
    assert "is of another model" in session.error and "000000000000" in session.error
    assert "Fix:" in session.error and session.builds == builds and session.graphs == {}
    assert session.recipe is recipe
    assert session.use_build_recipe("nope") is False and session.recipe is recipe


def test_the_demos_saved_builds_are_offered_to_the_demo_only(tmp_path):
    from trtwidgets.core.engine.saved_build import find_saved_builds
    from tests.own_models import dynamic_hw_model

    found = find_saved_builds()
    if "cls_static_qdq_int8" not in found:
        pytest.skip("the real TensorRT 8.6 fixtures are not in this checkout")
    s = Session()
    assert s.load(demo.MODEL_PATH)
    offered = s.saved_builds()
    # Its own builds, and the build of its Q/DQ export (another file, recognised by its layers); no tiny model's.
    assert {"cls_static_fp16", "cls_static_int8_entropy2", "cls_static_qdq_int8"} <= set(offered)
    assert not any(name.startswith("tiny/") for name in offered)
    assert s.add_build(found["cls_static_qdq_int8"]) and s.stale == {}
    assert s.use_build_recipe("cls_static_qdq_int8") is False and "Q/DQ export" in s.error
    own = Session()
    assert own.load(save(dynamic_hw_model(), tmp_path / "own.onnx"))
    assert own.saved_builds() == {}
    assert own.add_build(found["cls_static_int8_entropy2"]) is False and "another model" in own.error
    assert own.builds == ()
