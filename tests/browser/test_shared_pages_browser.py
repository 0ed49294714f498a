"""Each executed notebook, shared with ``tw.share``, opened in Chromium with the network cut (issue 31).

What a colleague sees on a plane: every request that is not a local file is aborted,
and the page must still show every widget's content (no blank widget area), draw every
figure (an SVG in every Plotly div), render its formulas (MathML, no raw ``$...$``) and
its Markdown tables, and ask for nothing from the network at all. The notebooks are
executed once per test session (tests/notebooks/executed.py), shared with the notebook
tests. A page of the same notebook exported by plain nbconvert fails these checks
(blank widgets, raw TeX, a broken table): ``test_the_checks_see_a_page_that_needs_the_network``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.jupyter_page import CHROMIUM, CHROMIUM_ARGS
from tests.conftest import ROOT, require_or_skip
from tests.notebooks.executed import written

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: What a reader would see as broken, counted in the page.
_COUNT = """() => {
  // the widget areas of the page (a widget inside an Output widget is part of its area)
  const widgets = [...document.querySelectorAll('.trtw-static-widget')].filter(w => !w.parentElement.closest('.trtw-static-widget'));
  const figures = [...document.querySelectorAll('.plotly-graph-div')];
  const markdown = [...document.querySelectorAll('.jp-MarkdownOutput')];
  return {
    widgets: widgets.length,
    blank_widgets: widgets.filter(w => !w.innerText.trim() && !w.querySelector('svg, img, canvas')).length,
    figures: figures.length,
    undrawn_figures: figures.filter(f => !f.querySelector('svg.main-svg')).length,
    widget_manager_views: document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length,
    raw_tex: markdown.filter(m => /\\$[^$\\s][^$]*\\$/.test(m.innerText)).length,
    raw_tables: markdown.filter(m => [...m.querySelectorAll('p')].some(p => /^\\s*\\|.*\\|\\s*$/m.test(p.innerText))).length,
    math: document.querySelectorAll('math').length,
  };
}"""


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        require_or_skip("TRTWIDGETS_REQUIRE_BROWSER", f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_or_skip("TRTWIDGETS_REQUIRE_BROWSER", "playwright is not installed (pip install playwright)")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def open_offline(browser, page_path: Path):
    """The counts of :data:`_COUNT` for the page opened with every non-file request aborted, and those requests."""
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    asked, errors = [], []

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            asked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda e: errors.append(str(e)[:300]))
    try:
        page.goto(page_path.as_uri(), wait_until="load", timeout=180_000)
        page.wait_for_timeout(1500)  # figures are drawn by scripts after load
        return page.evaluate(_COUNT), asked, errors
    finally:
        page.close()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_shared_page_shows_everything_offline(path, tmp_path, browser):
    pytest.importorskip("ipykernel")
    import trtwidgets as tw

    shared = tw.share(written(path, tmp_path), tmp_path / f"{path.stem}.html")
    seen, asked, errors = open_offline(browser, shared.path)
    assert asked == [], f"the page asked the network for {asked[:3]}"
    assert errors == [], errors
    assert seen["blank_widgets"] == 0 and seen["undrawn_figures"] == 0, seen
    assert seen["widgets"] == shared.widgets and seen["figures"] == shared.figures, (seen, str(shared))
    assert seen["raw_tex"] == 0 and seen["raw_tables"] == 0 and seen["widget_manager_views"] == 0, seen


def test_the_checks_see_a_page_that_needs_the_network(tmp_path, browser):
    """nbconvert's own page of the calibration notebook: widgets need a CDN's manager, formulas MathJax."""
    import nbconvert

    notebook = written(ROOT / "notebooks" / "02_how_calibration_works.ipynb", tmp_path)
    # The table issue 31 found broken (`$|x|$` inside a cell): 02 no longer writes one, so the page gets it here.
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "markdown", "id": "broken-table", "metadata": {},
                        "source": "| method | amax |\n|---|---|\n| max | $|x|$ over the samples |\n"})
    notebook.write_text(json.dumps(nb), encoding="utf-8")
    plain = tmp_path / "plain.html"
    plain.write_text(nbconvert.HTMLExporter().from_filename(str(notebook))[0], encoding="utf-8")
    seen, asked, _ = open_offline(browser, plain)
    assert asked, "nbconvert's page asks for require.js, the widget manager and MathJax"
    assert seen["widget_manager_views"] >= 1 and seen["raw_tex"] >= 1 and seen["raw_tables"] >= 1, seen


#: Run in the page after load: click every link and button a hostile notebook left (a javascript: URL runs on a
#: click), then say whether any of its code ran and whether the page's own figure was drawn.
_PROBE = """async () => {
  for (const el of document.querySelectorAll('a, button')) {
    if (!(el.getAttribute('href') || '').startsWith('#')) { try { el.click(); } catch (e) {} }
  }
  await new Promise(r => setTimeout(r, 1500));
  return {ran: window.__pwned || 0, parent_ran: window.parent.__pwned || 0,
          drawn: [...document.querySelectorAll('.plotly-graph-div')]
                   .filter(f => f.querySelector('svg.main-svg')).length};
}"""


@pytest.mark.parametrize("trust", [False, True], ids=["shared", "trusted"])
def test_a_hostile_notebooks_page_runs_none_of_its_code(tmp_path, browser, trust):
    """Issue 45: the page carried the notebook's scripts; opened by a colleague, they ran. With trust=True they
    run (the probe sees them: the check can fail), and the page's own figure is drawn either way."""
    import nbformat

    import trtwidgets as tw
    from tests.bad_input.hostile_notebooks import hostile_notebook

    nbformat.write(hostile_notebook(), str(tmp_path / "someone_else.ipynb"))
    shared = tw.share(tmp_path / "someone_else.ipynb", tmp_path / "page.html", trust=trust)
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
    try:
        page.goto(shared.path.as_uri(), wait_until="load", timeout=180_000)
        page.wait_for_timeout(1500)
        seen = page.evaluate(_PROBE)
    finally:
        page.close()
    assert seen["drawn"] == 1, seen
    if trust:
        assert seen["ran"] > 0, "the probe must see the notebook's code run when it is kept"
    else:
        assert seen["ran"] == 0 and seen["parent_ran"] == 0 and not dialogs, (seen, dialogs)
