"""Every notebook in notebooks/ runs top to bottom, headless, without an error output, and shares.

Notebooks run on a copy in a temporary directory (the committed ones never get
outputs), with the kernel of the Python running the tests, so the package under
test is the one the kernel imports; each runs once per test session
(tests/notebooks/executed.py), and the browser test of the shared pages reads the
same run. The notebooks check their own prose: every number their text quotes is
computed in a cell (Markdown built from values) or asserted, so a claim the outputs
contradict is an error output here. Executed, each is exported with nbconvert's HTML
exporter (every Plotly figure drawn) and with ``tw.share``: both pages at most
:data:`MAX_PAGE_BYTES`, with plotly.js at most once, and no widget state holds plotly.js.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from tests.conftest import ROOT
from tests.notebooks.executed import CELL_TIMEOUT, executed, written

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: A page that can be mailed and hosted without warnings (issue 31: the quickstart's export was 57.8 MB).
MAX_PAGE_BYTES = 8_000_000


@pytest.fixture
def kernel_name(tmp_path, monkeypatch):
    """A kernelspec that runs this interpreter, so the notebook imports the package under test.

    Found through JUPYTER_PATH, so no kernel is installed into the user's Jupyter.
    """
    kdir = tmp_path / "jupyter" / "kernels" / "trtwidgets-test"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "trtwidgets tests", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return "trtwidgets-test"


def test_there_are_notebooks():
    assert any(p.name == "01_quickstart.ipynb" for p in NOTEBOOKS)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    pytest.importorskip("ipykernel")
    nb = executed(path)
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) <= 1, "at most one cell tagged 'parameters' (papermill)"
    errors = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errors.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr" and "Traceback" in out.get("text", ""):
                errors.append(f"cell {i}: traceback on stderr: {out['text'][-500:]}")
    assert not errors, "\n".join(errors)
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code"), "a code cell did not run"
    assert_figures_in_html(nb)
    assert_shares(written(path, tmp_path), tmp_path / f"{path.stem}.html")


def plotly_outputs(nb) -> list:
    """Every output of an executed notebook that holds a Plotly figure (the JSON mime type)."""
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if "application/vnd.plotly.v1+json" in out.get("data", {})]


def plotly_js_copies(text: str) -> int:
    """How many copies of plotly.js ``text`` holds (plotly.min.js and the FigureWidget bundle each hold the mark once)."""
    from trtwidgets.plots.share import PLOTLY_JS_MARK

    return text.count(PLOTLY_JS_MARK)


def assert_figures_in_html(nb) -> None:
    """Every Plotly figure of the executed notebook is drawn by its nbconvert HTML, with plotly.js inlined once.

    The export is small enough to mail, and no widget's saved state carries plotly.js (a FigureWidget's
    front-end module is fetched from the kernel, not stored).
    """
    import nbconvert  # a test dependency: the bar must not be skipped silently

    state = json.dumps(nb.metadata.get("widgets", {}))
    assert plotly_js_copies(state) == 0, f"the saved widget state holds {plotly_js_copies(state)} copies of plotly.js"
    figures = plotly_outputs(nb)
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    assert len(html.encode()) <= MAX_PAGE_BYTES, f"nbconvert's page is {len(html.encode()) / 1e6:.1f} MB"
    assert plotly_js_copies(html) <= 1, f"nbconvert's page holds {plotly_js_copies(html)} copies of plotly.js"
    drawn = len(re.findall(r'class="plotly-graph-div"', html))
    assert drawn == len(figures), f"{len(figures)} Plotly figures, {drawn} drawn in the exported HTML"
    if figures:
        # Inlined (no network in CI, on nbviewer's side or a colleague's laptop), and only once per notebook.
        assert len(re.findall(r"\* plotly\.js v\d", html)) == 1, "plotly.js is embedded once"
        # plotly.js itself names cdn.plot.ly (its topojson default); what must not be there is loading it from there.
        assert not re.search(r"""(src=|import )["']https://cdn\.plot\.ly""", html), "plotly.js loaded from a CDN"


def widget_views(nb) -> int:
    return sum(1 for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
               if "application/vnd.jupyter.widget-view+json" in out.get("data", {}))


def assert_shares(notebook, page) -> None:
    """``tw.share`` writes the executed notebook as one page: small, plotly.js once, nothing from the network."""
    import nbformat as nbf

    import trtwidgets as tw

    nb = nbf.read(str(notebook), as_version=4)
    shared = tw.share(notebook, page)
    text = page.read_text(encoding="utf-8")
    assert shared.size == len(text.encode()) <= MAX_PAGE_BYTES, f"{notebook.name}: shared page {shared}"
    assert plotly_js_copies(text) == (1 if shared.figures else 0), f"{notebook.name}: plotly.js is not there once"
    assert shared.figures >= len(plotly_outputs(nb)) and shared.widgets == widget_views(nb), str(shared)
    # Nothing is fetched: no script or style from a URL, no widget manager, no MathJax.
    assert not re.search(r"""<(?:script|link)[^>]+(?:src|href)=["']?(?:https?:)?//""", text), "the page loads a URL"
    assert "application/vnd.jupyter.widget-state+json" not in text and shared.notes == (), shared.notes


def test_figures_without_an_html_fallback_are_not_drawn_in_html():
    """The check above can fail: plotly's default mime bundle (JSON only) gives 0 of 1 figures in the HTML."""
    nbformat_ = pytest.importorskip("nbformat")
    go = pytest.importorskip("plotly.graph_objects")
    fig = go.Figure(go.Bar(y=[1, 2]))
    bare = nbformat_.v4.new_output("display_data", data={"application/vnd.plotly.v1+json": fig.to_plotly_json()})
    cell = nbformat_.v4.new_code_cell("fig", outputs=[bare])
    with pytest.raises(AssertionError, match="1 Plotly figures, 0 drawn"):
        assert_figures_in_html(nbformat_.v4.new_notebook(cells=[cell]))


def test_a_widget_state_holding_plotly_js_fails_the_check():
    """What go.FigureWidget did: its whole front-end bundle (plotly.js inside) saved as the model's _esm."""
    from trtwidgets.plots.share import PLOTLY_JS_MARK

    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0,
        "state": {"a": {"model_name": "AnyModel", "model_module": "anywidget", "model_module_version": "*",
                        "state": {"_esm": f"/* plotly.js */ throw new Error('{PLOTLY_JS_MARK} x')"}}}}}
    with pytest.raises(AssertionError, match="widget state holds 1 copies"):
        assert_figures_in_html(nb)


def test_the_shareable_renderer_gives_every_figure_an_html_fallback_with_plotly_js_once():
    pio = pytest.importorskip("plotly.io")
    go = pytest.importorskip("plotly.graph_objects")
    from trtwidgets.plots import shareable_figures

    before = pio.renderers.default
    try:
        shareable_figures()
        bundle = pio.renderers._build_mime_bundle(go.Figure(go.Bar(y=[1])).to_dict())
    finally:
        pio.renderers.default = before
    assert {"application/vnd.plotly.v1+json", "text/html"} <= set(bundle)
    assert 'class="plotly-graph-div"' in bundle["text/html"] and "cdn.plot.ly" not in bundle["text/html"]


def test_notebooks_show_plain_figures_and_set_the_shareable_renderer():
    """FigureWidget views are blank once exported; each notebook with figures sets the renderer before them."""
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
        text = "\n".join(code)
        assert "widget=True" not in text and "FigureWidget" not in text, path.name
        if ".figure()" in text or "go.Figure(" in text:
            assert "shareable_figures()" in text, f"{path.name} shows figures without shareable_figures()"


#: Numbers that may stand in notebook prose as typed: TensorRT versions and fixed thresholds, not results.
ALLOWED_DECIMALS = {"7.1", "8.6", "10.1", "10.12", "10.16", "11.4", "1.0", "0.99", "0.999", "0.001", "0.01", "0.1"}
#: Notebooks whose introduction lists their numbered sections, one item each.
LISTS_ITS_SECTIONS = ("02_how_calibration_works", "03_dynamic_shapes_calibration", "05_layer_precision",
                      "06_export_check")


def _prose(nb) -> list:
    """Markdown cells without code spans and formulas (where numbers are names and symbols, not claims)."""
    out = []
    for c in nb["cells"]:
        if c["cell_type"] == "markdown":
            s = re.sub(r"`[^`]*`", "", "".join(c["source"]))
            out.append(re.sub(r"\$[^$]*\$", "", s))
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_prose_quotes_no_result_typed_by_hand(path):
    """Measured results (times, cosines, layer counts) reach the prose only through computed Markdown cells."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for text in _prose(nb):
        decimals = set(re.findall(r"(?<![\w.])(\d+\.\d+)(?![\w.])", text)) - ALLOWED_DECIMALS
        assert not decimals, f"{path.name}: typed results {sorted(decimals)} in: {text[:200]!r}"
        counted = re.findall(r"\b\d+ (?:of (?:its|the|\d+) )?(?:INT8 |FP16 |FP32 )?layers\b", text)
        assert not counted, f"{path.name}: typed layer counts {counted}"


@pytest.mark.parametrize("name", LISTS_ITS_SECTIONS)
def test_the_introduction_lists_as_many_parts_as_there_are_sections(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    prose = _prose(nb)
    listed = re.findall(r"^\d+\. ", prose[0], flags=re.M)
    sections = re.findall(r"^## \d+\. ", "\n".join(prose), flags=re.M)
    assert len(listed) == len(sections), f"{name}: the introduction lists {len(listed)} parts, {len(sections)} sections"


#: A lesson's code cell fits on a screen: longer plumbing goes into a helper the notebook imports (issue 46).
MAX_CELL_LINES = 20


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_cells_fit_on_a_screen(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    long = [(i, len("".join(c["source"]).splitlines())) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    over = [(i, n) for i, n in long if n > MAX_CELL_LINES]
    assert not over, (f"{path.name}: code cells over {MAX_CELL_LINES} lines (cell index, lines): {over}; split them at "
                      "a step, or move the plumbing into a helper the notebook imports")
