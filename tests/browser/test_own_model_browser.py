"""A real browser drives the App on a user's own model (issue 15), as a newcomer would.

The model's input is ``[N, 3, H, W]`` with every dim dynamic (Paddle2ONNX names), the data a folder of
real photographs cut to 96x128. The notebook only makes the App; then the browser presses *Collect
statistics*, loads the build folder, opens *Inspect* and *Explore*: the layer table and the histograms
appear, no profile was typed, and no widget shows an error. Screenshots of every tab go to artifacts/.
"""

from __future__ import annotations

import json

import pytest

from tests.browser.jupyter_page import CHROMIUM, CHROMIUM_ARGS, run_all_cells
from tests.browser.test_quickstart_browser import LAB_ROOTS, jupyterlab  # noqa: F401 - fixture
from tests.conftest import ROOT
from tests.own_models import dynamic_hw_model, image_samples, own_saved_build, save

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _notebook(path, model, data, out) -> None:
    source = (f"import trtwidgets as tw\n"
              f"app = tw.App(model_path={str(model)!r}, data={str(data)!r}, out_dir={str(out)!r})\n"
              f"app")
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "own-app", "metadata": {}, "outputs": [],
                     "source": source}],
          "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))


def _app_errors(page) -> list:
    # Error panels with text (the app keeps empty ones in the DOM); the Build step's "no TensorRT here" is expected.
    return [t for t in page.locator(".jp-OutputArea-output .trtw-error").all_inner_texts()
            if t.strip() and not t.startswith("TensorRT is not installed here")]


def test_own_model_reaches_histograms_and_a_layer_table_with_no_profile_typed(jupyterlab):  # noqa: F811
    from playwright.sync_api import sync_playwright

    from trtwidgets.core.calibration.data import spec_for
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.data_defaults import fill_recipe_from_data
    from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe
    from trtwidgets.widgets.explorer_parts import default_method

    base, token = jupyterlab
    root = LAB_ROOTS[base]
    model_path = save(dynamic_hw_model(), root / "own" / "detector.onnx")
    data = image_samples(root / "own" / "samples", n=6, sizes=[(96, 128)])
    model = load_model(model_path)
    # The app's own recipe (FP16+INT8, the toolkit's ranges by its default method), saved and built on a GPU machine.
    recipe, _, _ = fill_recipe_from_data(Recipe.for_model(
        model, flags=("fp16", "int8"), calibrator=CalibratorSpec(kind="toolkit", method=default_method()),
        calibration_data=spec_for(str(data))), model)
    build = own_saved_build(root / "own" / "builds", recipe)  # as made on a GPU machine (no GPU here)
    _notebook(root / "own" / "own_app.ipynb", model_path, data, root / "own" / "out")
    shots = ROOT / "artifacts"
    shots.mkdir(exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{base}/lab/tree/own/own_app.ipynb?token={token}", timeout=120_000)
        page.wait_for_selector(".jp-Notebook", timeout=120_000)
        run_all_cells(page)
        tab = page.locator(".jp-OutputArea-output .widget-tab").first
        tab.wait_for(timeout=120_000)

        def open_tab(title: str, shot: str):
            page.get_by_role("tab", name=title).first.click()
            page.wait_for_timeout(800)
            page.screenshot(path=str(shots / f"own_model_{shot}.png"))

        # Tab titles fit: none is cut (the tab's text is as wide as its box).
        cut = page.evaluate("""() => [...document.querySelectorAll('.widget-tab .lm-TabBar-tab .lm-TabBar-tabLabel')]
                                   .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)""")
        assert cut == [], f"tab titles cut off: {cut}"
        open_tab("1 Load", "load")
        assert "N×3×H×W" in page.inner_text(".jp-OutputArea-output")
        open_tab("3 Profiles", "profiles")
        open_tab("4 Calibrate", "calibrate")
        assert "opt 1x3x96x128 is the calibration data's shape" in page.inner_text(".jp-OutputArea-output")
        page.get_by_role("button", name="Collect statistics").click()
        page.get_by_text("samples from").first.wait_for(timeout=180_000)
        page.screenshot(path=str(shots / "own_model_calibrated.png"))
        assert _app_errors(page) == []

        open_tab("6 Build", "build")
        page.get_by_placeholder("or a build folder / *.graph.json").fill(str(build))
        page.get_by_role("button", name="Load saved build").click()
        layer_table = ".jp-OutputArea-output table.trtw-layers"
        page.wait_for_selector(f"{layer_table} tbody tr", state="attached", timeout=60_000)
        open_tab("7 Inspect", "inspect")
        # The build was made from the app's own recipe: it is current, not marked stale.
        assert page.get_by_role("tab", name="7 Inspect", exact=True).count() == 1
        assert page.locator(f"{layer_table} tbody td.trtw-p-INT8", has_text="INT8").count() > 0
        assert page.locator(".jp-OutputArea-output .trtw-causes").first.is_visible()

        open_tab("8 Explore", "explore")
        page.wait_for_function("""() => [...document.querySelectorAll('.js-plotly-plot .gtitle')]
                                        .some(t => t.textContent.includes('|x| over') && t.getClientRects().length)""",
                               timeout=120_000)
        page.screenshot(path=str(shots / "own_model_explore.png"))
        # Plotly's toolbar does not cover any drawn title (it sits in a band above them).
        overlaps = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => {
                const bar = plot.querySelector('.modebar');
                const title = plot.querySelector('.gtitle');
                if (!bar || !title || !title.getClientRects().length || !bar.getClientRects().length) return [];
                const a = bar.getBoundingClientRect(), b = title.getBoundingClientRect();
                const apart = a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top;
                return apart ? [] : [title.textContent];
            })""")
        assert overlaps == [], f"the toolbar covers these titles: {overlaps}"
        text = page.inner_text(".jp-Notebook")
        assert "Error displaying widget" not in text and "Traceback" not in text
        assert _app_errors(page) == []
        browser.close()
