"""Session: results remember what they were made from; earlier changes mark later results stale, errors lose nothing."""

from __future__ import annotations

import dataclasses
import json

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
    # Statistics set from outside get a calibration fitted to them.
    session.calibration = None
    assert session.recompute_ranges(99.9)
    assert session.calibration.stats is session.stats and session.calibration.ranges is session.ranges


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


def test_a_recipe_of_another_model_is_refused(session, tmp_path):
    other = session.recipe.replace(model_sha256="0" * 64)
    assert session.add_build(saved_build_dir(tmp_path, "other", synthetic_fp16(), other))
    recipe = session.recipe
    assert session.use_build_recipe("other") is False
    assert "another model" in session.error and session.recipe is recipe
    assert session.use_build_recipe("nope") is False and session.recipe is recipe
