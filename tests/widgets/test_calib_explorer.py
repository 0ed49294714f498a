from __future__ import annotations

import math

import numpy as np
import pytest

from trtwidgets.core.calibration.cache import read_cache
from trtwidgets.core.calibration.ranges import compute_amax, compute_ranges
from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe
from trtwidgets.widgets.calib_explorer import CalibrationExplorer
from tests.plots.synthetic_stats import activation_stats


class _Points:
    """What plotly passes to an on_click callback (the edge of the browser)."""

    def __init__(self, inds):
        self.point_inds = inds


@pytest.fixture(scope="module")
def stats():
    return activation_stats(15)


@pytest.fixture(scope="module")
def ranges(stats):
    return compute_ranges(stats)


def _recipe(**cal):
    return Recipe(model_path="m.onnx", model_sha256="", flags=("int8",),
                  calibrator=CalibratorSpec(kind="toolkit", method="entropy", **cal))


def _lines(fig):
    return {s.legendgroup: s.x0 for s in fig.layout.shapes if s.type == "line"}


def test_picking_a_tensor_updates_the_same_figure(stats, ranges):
    ex = CalibrationExplorer(stats, ranges=ranges)
    fig, bar = ex.hist_fig, ex.hist_fig.data[0]
    name = list(stats.tensors)[9]
    ex.tensor_list.value = name
    assert ex.tensor == name and ex.hist_fig is fig and fig.data[0] is bar
    assert np.array_equal(np.asarray(fig.data[0].y), stats.tensors[name].hist)
    assert _lines(fig)["max"] == pytest.approx(compute_amax(stats.tensors[name], "max"))
    # the overview highlights it
    assert tuple(ex.overview_fig.data[1].y) in ((name,), ())


def test_search_narrows_the_list_and_picks_a_unique_match(stats, ranges):
    ex = CalibrationExplorer(stats, ranges=ranges)
    ex.search.value = "layer01"
    assert set(ex.tensor_list.options) == {n for n in stats.tensors if "layer01" in n}
    ex.search.value = "layer013"
    assert ex.tensor == "layer013/out"


def test_overview_click_selects(stats, ranges):
    ex = CalibrationExplorer(stats, ranges=ranges)
    trace = ex.overview_fig.data[0]
    ex.figure_tabs.selected_index = 1
    ex._on_overview_click(trace, _Points([2]), None)
    assert ex.tensor == trace.customdata[2]
    assert ex.figure_tabs.selected_index == 0
    assert tuple(ex.overview_fig.data[1].y) == (ex.tensor,)


def test_the_method_buttons_choose_the_exported_method(stats, ranges, tmp_path):
    from trtwidgets.core.calibration.calibration import EXPORT_METHODS

    cache = tmp_path / "c.cache"
    ex = CalibrationExplorer(stats, ranges=ranges, recipe=_recipe(), cache_path=str(cache))
    # Every method the calibration module exports is a button; every method's line stays drawn.
    assert tuple(ex.method_buttons.options) == tuple(EXPORT_METHODS) and ex.method_buttons.value == "entropy"
    assert EXPORT_METHODS[0] == "auto"
    lines = _lines(ex.hist_fig)
    assert set(lines) == {"max", "entropy", "percentile", "mse"}
    t = stats.tensors[ex.tensor]
    ex.method_buttons.value = "max"
    assert ex.calibration.method == "max" and set(_lines(ex.hist_fig)) == set(lines)
    # The amax box starts at the chosen method's value: Apply override applies what the user chose.
    assert ex.override_text.value == pytest.approx(compute_amax(t, "max"))
    rect = [sh for sh in ex.hist_fig.layout.shapes if sh.type == "rect"][0]
    assert rect.x0 == pytest.approx(compute_amax(t, "max"))  # the clipped region is the chosen method's
    assert ex.apply_override()
    assert read_cache(cache).amax[ex.tensor] == pytest.approx(compute_amax(t, "max"), rel=1e-6)
    other = next(n for n in stats.tensors if n != ex.tensor)
    assert read_cache(cache).amax[other] == pytest.approx(compute_amax(stats.tensors[other], "max"), rel=1e-6)


def test_the_method_chosen_in_the_explorer_is_the_sessions(stats, ranges, tmp_path):
    from trtwidgets.core.calibration.calibration import Calibration
    from trtwidgets.widgets.session import Session

    s = Session(recipe=_recipe(), calibration=Calibration.fit(stats, ranges=ranges))
    ex = CalibrationExplorer(session=s, cache_path=str(tmp_path / "c.cache"))
    ex.method_buttons.value = "mse"
    assert s.calibration.method == "mse" and s.recipe.calibrator.method == "mse" and ex.calibration is s.calibration
    ex.percentile_slider.value = 99.5
    assert s.calibration.percentile == 99.5 and s.recipe.calibrator.percentile == 99.5
    assert ex.apply_override(1.5) and dict(s.calibration.overrides) == {ex.tensor: 1.5}
    # Chosen elsewhere (another step, a script): the explorer shows it.
    assert s.set_method("percentile")
    ex.adopt(s.calibration)
    assert ex.method_buttons.value == "percentile" and ex.calibration is s.calibration


def test_percentile_slider_moves_the_percentile_line(stats, ranges):
    ex = CalibrationExplorer(stats, ranges=ranges)
    t = stats.tensors[ex.tensor]
    before = _lines(ex.hist_fig)["percentile"]
    ex.percentile_slider.value = 99.0
    after = _lines(ex.hist_fig)["percentile"]
    assert after == pytest.approx(compute_amax(t, "percentile", percentile=99.0))
    assert after < before
    assert ex.ranges[ex.tensor]["percentile"].amax == pytest.approx(after)


def test_override_writes_cache_and_recipe(stats, ranges, tmp_path):
    cache = tmp_path / "calib.cache"
    ex = CalibrationExplorer(stats, ranges=ranges, recipe=_recipe(), cache_path=str(cache))
    name = ex.tensor
    ex.override_text.value = 1.75
    ex.apply_button.click()
    assert read_cache(cache).amax[name] == pytest.approx(1.75, rel=1e-6)
    assert ex.recipe.calibrator.amax_overrides == {name: 1.75}
    # other tensors carry the export method's amax
    other = next(n for n in stats.tensors if n != name)
    assert read_cache(cache).amax[other] == pytest.approx(compute_amax(stats.tensors[other], "entropy"), rel=1e-6)
    # the override line is drawn and its clipped region is the shaded one
    assert _lines(ex.hist_fig)["override"] == 1.75
    rect = [s for s in ex.hist_fig.layout.shapes if s.type == "rect"][0]
    assert rect.x0 == 1.75
    ex.clear_button.click()
    assert ex.recipe.calibrator.amax_overrides == {}
    assert name not in read_cache(cache).amax or read_cache(cache).amax[name] != pytest.approx(1.75)
    assert "override" not in _lines(ex.hist_fig)


@pytest.mark.parametrize("bad", [-2.0, 0.0, float("nan")])
def test_bad_override_shows_error_and_keeps_state(stats, ranges, tmp_path, bad):
    cache = tmp_path / "calib.cache"
    ex = CalibrationExplorer(stats, ranges=ranges, recipe=_recipe(amax_overrides={"layer000/out": 3.0}),
                             cache_path=str(cache))
    recipe_before = ex.recipe
    ex.apply_override(bad)
    assert "cannot override" in ex.error_message
    assert ex.error.layout.display == "block"
    assert ex.overrides == {"layer000/out": 3.0} and ex.recipe is recipe_before
    assert not cache.exists()
    # the next good action clears the panel
    assert ex.apply_override(2.0)
    assert ex.error_message == ""


def test_unwritable_cache_keeps_previous_overrides(stats, ranges, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    ex = CalibrationExplorer(stats, ranges=ranges, recipe=_recipe(), cache_path=str(blocker / "sub" / "c.cache"))
    assert not ex.apply_override(2.0)
    assert ex.overrides == {} and ex.recipe.calibrator.amax_overrides == {}
    # The write rule's message names the cache file and why it could not be written (issue 22).
    assert "c.cache" in ex.error_message and "A file stands where a folder" in ex.error_message


def test_session_recipe_is_updated(stats, ranges, tmp_path):
    from trtwidgets.widgets.session import Session

    from trtwidgets.core.calibration.calibration import Calibration

    s = Session(recipe=_recipe(), calibration=Calibration.fit(stats, ranges=ranges))
    ex = CalibrationExplorer(session=s, cache_path=str(tmp_path / "c.cache"))
    ex.apply_override(4.5)
    assert s.recipe.calibrator.amax_overrides == {ex.tensor: 4.5}


def test_int8_grid_tab_follows_the_export_amax(stats, ranges):
    ex = CalibrationExplorer(stats, ranges=ranges)
    ex.figure_tabs.selected_index = 2
    t = stats.tensors[ex.tensor]
    grid = [s.x0 for s in ex.grid_fig.layout.shapes if s.type == "line"]
    # No recipe: auto, the default (issue 34), exports each tensor's own method's amax.
    assert ex.calibration.method == "auto" and ex.method_buttons.value == "auto"
    chosen = ex.calibration.choices[ex.tensor].method
    assert grid[-1] == pytest.approx(compute_amax(t, chosen))
    assert grid[-1] == pytest.approx(ex.calibration.amax[ex.tensor])
    ex.method_buttons.value = "max"
    grid = [s.x0 for s in ex.grid_fig.layout.shapes if s.type == "line"]
    assert grid[-1] == pytest.approx(compute_amax(t, "max"))


def test_rank_by_error_reorders(stats, ranges):
    ex = CalibrationExplorer(stats, ranges=ranges, top=None)
    ex.rank_by.value = "error"
    x = list(ex.overview_fig.data[0].x)
    assert x == sorted(x)
    assert ex.tensor_list.options[0] == ex.overview.ranking.names[0]
    assert not any(math.isnan(v) for v in x if v is not None)


def test_tensorrt_cache_is_read_once_and_drawn(stats, ranges, tmp_path):
    from trtwidgets.core.calibration.cache import write_cache

    name = list(stats.tensors)[0]
    path = write_cache({name: 2.25}, tmp_path / "trt.cache")
    ex = CalibrationExplorer(stats, ranges=ranges, trt_cache=str(path))
    ex.select(name)
    assert _lines(ex.hist_fig)["tensorrt"] == pytest.approx(2.25, rel=1e-6)
    ex.select(list(stats.tensors)[1])
    assert "tensorrt" not in _lines(ex.hist_fig)


def test_write_cache_button_uses_export_method(stats, ranges, tmp_path):
    cache = tmp_path / "c.cache"
    ex = CalibrationExplorer(stats, ranges=ranges, cache_path=str(cache))
    ex.method_buttons.value = "max"
    ex.cache_button.click()
    got = read_cache(cache).amax
    assert got[ex.tensor] == pytest.approx(compute_amax(stats.tensors[ex.tensor], "max"), rel=1e-6)
    assert "cache written" in ex.status.value


@pytest.fixture(scope="module")
def demo_stats():
    from trtwidgets import demo
    from trtwidgets.core.calibration.collect import collect_stats

    return collect_stats(demo.MODEL_PATH, demo.sample_inputs(1)[:4], progress=False)


def test_override_re_exports_the_qdq_model(demo_stats, tmp_path):
    import onnx
    from onnx import numpy_helper

    from trtwidgets import demo

    qdq = tmp_path / "m.qdq.onnx"
    ex = CalibrationExplorer(demo_stats, model=demo.MODEL_PATH, qdq_path=str(qdq), cache_path=str(tmp_path / "c"))
    assert not ex.qdq_button.disabled
    assert ex.export_qdq() == str(qdq)

    def scales(path):
        m = onnx.load(str(path))
        inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
        return {n.input[0]: float(inits[n.input[1]]) for n in m.graph.node
                if n.op_type == "QuantizeLinear" and n.input[0] in demo_stats.tensors}

    target = sorted(scales(qdq))[0]
    ex.select(target)
    assert ex.apply_override(3.0)
    assert scales(qdq)[target] == pytest.approx(3.0 / 127, rel=1e-3)  # FP16 scales: written for TensorRT 10/11
    assert "Q/DQ model written" in ex.status.value


def test_recipe_percentile_outside_the_default_slider_range_is_kept(stats, ranges):
    ex = CalibrationExplorer(stats, recipe=_recipe(percentile=95.0))
    assert ex.percentile == 95.0 and ex.percentile_slider.value == 95.0
    t = stats.tensors[ex.tensor]
    assert _lines(ex.hist_fig)["percentile"] == pytest.approx(compute_amax(t, "percentile", percentile=95.0))


def test_rank_by_error_under_auto_reads_each_tensors_chosen_method(stats, ranges):
    # auto (the default without a recipe, issue 34): each tensor ranked by the SQNR of the method it exports.
    ex = CalibrationExplorer(stats, ranges=ranges, top=None)
    assert ex.method_buttons.value == "auto"
    ex.rank_by.value = "error"
    chosen = {n: c.method for n, c in ex.calibration.choices.items()}
    ranking = ex.overview.ranking
    assert ranking.method == "auto" and set(ranking.names) == set(ranges)
    expected = {n: ranges[n][chosen[n]].sqnr_db for n in ranking.names if n in chosen}
    assert expected and all(s == pytest.approx(expected[n]) for n, s in zip(ranking.names, ranking.scores)
                            if n in expected)
