"""Every notebook in notebooks/ runs top to bottom, headless, without an error output, and shares.

Notebooks run on a copy in a temporary directory (the committed ones never get
outputs), with the kernel of the Python running the tests, so the package under
test is the one the kernel imports. The notebooks check their own prose: every number
their text quotes is computed in a cell (Markdown built from values) or asserted, so a
claim the outputs contradict is an error output here. Executed, each is exported with
nbconvert's HTML exporter, and every Plotly figure must be drawn in that HTML.
"""

from __future__ import annotations

import json
import re
import shutil
import sys

import pytest

from tests.conftest import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT = 600


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
def test_notebook_runs(path, tmp_path, kernel_name):
    pytest.importorskip("ipykernel")
    work = tmp_path / path.name
    shutil.copy(path, work)
    nb = nbformat.read(str(work), as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) <= 1, "at most one cell tagged 'parameters' (papermill)"
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(tmp_path)}}, allow_errors=True,
                                     shutdown_kernel="immediate")  # a graceful shutdown once hung for minutes
    client.execute()
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


def plotly_outputs(nb) -> list:
    """Every output of an executed notebook that holds a Plotly figure (the JSON mime type)."""
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if "application/vnd.plotly.v1+json" in out.get("data", {})]


def assert_figures_in_html(nb) -> None:
    """Every Plotly figure of the executed notebook is drawn by its nbconvert HTML, with plotly.js inlined once."""
    import nbconvert  # a test dependency: the bar must not be skipped silently

    figures = plotly_outputs(nb)
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    drawn = len(re.findall(r'class="plotly-graph-div"', html))
    assert drawn == len(figures), f"{len(figures)} Plotly figures, {drawn} drawn in the exported HTML"
    if figures:
        # Inlined (no network in CI, on nbviewer's side or a colleague's laptop), and only once per notebook.
        assert len(re.findall(r"\* plotly\.js v\d", html)) == 1, "plotly.js is embedded once"
        # plotly.js itself names cdn.plot.ly (its topojson default); what must not be there is loading it from there.
        assert not re.search(r"""(src=|import )["']https://cdn\.plot\.ly""", html), "plotly.js loaded from a CDN"


def test_figures_without_an_html_fallback_are_not_drawn_in_html():
    """The check above can fail: plotly's default mime bundle (JSON only) gives 0 of 1 figures in the HTML."""
    nbformat_ = pytest.importorskip("nbformat")
    go = pytest.importorskip("plotly.graph_objects")
    fig = go.Figure(go.Bar(y=[1, 2]))
    bare = nbformat_.v4.new_output("display_data", data={"application/vnd.plotly.v1+json": fig.to_plotly_json()})
    cell = nbformat_.v4.new_code_cell("fig", outputs=[bare])
    with pytest.raises(AssertionError, match="1 Plotly figures, 0 drawn"):
        assert_figures_in_html(nbformat_.v4.new_notebook(cells=[cell]))


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
ALLOWED_DECIMALS = {"8.5", "8.6", "10.1", "10.12", "1.0", "0.99", "0.999", "0.001", "0.01", "0.1"}
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
