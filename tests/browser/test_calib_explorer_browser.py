"""A real browser runs notebooks/02_how_calibration_works.ipynb in JupyterLab and uses the explorer.

Checks what a person would see: every Plotly figure renders, no widget fails, and
typing a tensor name into the explorer's search box redraws its histogram (the
same figure, updated in place through the FigureWidget comm). A screenshot is kept
under artifacts/.
"""

from __future__ import annotations

import pytest

from tests.browser.jupyter_page import notebook_after_run_all
from tests.browser.test_quickstart_browser import jupyterlab  # noqa: F401 - fixture
from tests.conftest import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOK = "notebooks/02_how_calibration_works.ipynb"
TARGET = "hardswish_4.tmp_0"


def test_calibration_notebook_and_explorer_in_jupyterlab(jupyterlab):  # noqa: F811 - the imported fixture
    base, token = jupyterlab
    shots = ROOT / "artifacts"
    shots.mkdir(exist_ok=True)
    with notebook_after_run_all(base, token, NOTEBOOK) as page:
        text = page.inner_text(".jp-Notebook")
        assert "Error displaying widget" not in text, "a widget failed to render"
        assert "Traceback" not in text, "a cell raised"
        assert page.locator(".js-plotly-plot").count() >= 10, "the notebook's figures did not render"

        search = page.get_by_placeholder("search tensors (words, any order)")
        search.scroll_into_view_if_needed()
        search.fill(TARGET)
        page.wait_for_function(
            """(name) => [...document.querySelectorAll('.js-plotly-plot .gtitle')]
                          .some(t => t.textContent.startsWith(name + ' — |x| over'))""",
            arg=TARGET, timeout=60_000)
        # the redrawn histogram keeps its own style (grey bars), not plotly's default colours
        fill = page.evaluate(
            """(name) => {
                const plot = [...document.querySelectorAll('.js-plotly-plot')].find(p =>
                    [...p.querySelectorAll('.gtitle')].some(t => t.textContent.startsWith(name + ' — |x| over')));
                const bar = plot.querySelector('.barlayer .point path');
                return bar ? getComputedStyle(bar).fill : null;
            }""", TARGET)
        assert fill == "rgb(127, 127, 127)", fill
        page.screenshot(path=str(shots / "calib_explorer_browser.png"), full_page=False)
        # a bad override from the keyboard: the error panel appears, and nothing is lost
        amax_box = page.locator(".jp-OutputArea-output input[type='number']").last
        amax_box.fill("-1")
        amax_box.press("Enter")
        page.get_by_role("button", name="Apply override").click()
        page.get_by_text("cannot override the amax of").wait_for(timeout=30_000)
        page.get_by_text("Apply override").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "calib_explorer_browser_histogram.png"), full_page=False)

        # the ranked overview (the explorer's is the notebook's last one): clicking the top bar opens
        # that tensor's histogram. Plotly takes clicks through its drag layer, after a hover.
        page.get_by_role("tab", name="ranked tensors").click()
        overview = page.locator(".js-plotly-plot", has=page.locator(".gtitle", has_text="tensors by disagreement")).last
        bar = overview.locator(".barlayer .trace").first.locator(".point").first
        bar.scroll_into_view_if_needed()
        # the top bar's name is the highest tick label (DOM order is bottom-up)
        top = overview.evaluate("""(plot) => [...plot.querySelectorAll('.ytick text')]
            .sort((a, b) => a.getBoundingClientRect().y - b.getBoundingClientRect().y)[0].textContent""")
        box = bar.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.wait_for_timeout(500)
        page.mouse.click(x, y)
        page.wait_for_function(
            """(name) => [...document.querySelectorAll('.js-plotly-plot .gtitle')]
                          .some(t => t.textContent.startsWith(name + ' — |x| over') && t.getClientRects().length)""",
            arg=top, timeout=60_000)
