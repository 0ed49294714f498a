"""App.save_html: the app's state as one self-contained page (issue 23: shareable analyses)."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.core.inspector_samples import saved_build_dir, synthetic_int8_implicit
from trtwidgets import demo
from trtwidgets.widgets.app import App

SCRIPT = "<script>alert(1)</script>"
FIGURE_DIV = 'class="plotly-graph-div"'


class _Scripts(HTMLParser):
    """The ``<script>`` elements of a page as a browser parses them: (attributes, text)."""

    def __init__(self, text):
        super().__init__()
        self.scripts, self._open = [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._open = (dict(attrs), [])

    def handle_data(self, data):
        if self._open is not None:
            self._open[1].append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._open is not None:
            self.scripts.append((self._open[0], "".join(self._open[1])))
            self._open = None


def _assert_offline_with_one_script_per_figure(page: str) -> int:
    """plotly.js is inline (no src, no CDN), then each figure is one div and one drawing script."""
    scripts = _Scripts(page).scripts
    assert scripts and all("src" not in attrs for attrs, _ in scripts)  # nothing fetched from a CDN
    assert len(scripts[0][1]) > 1_000_000  # the whole plotly.js, in the head
    figures = page.count(FIGURE_DIV)
    assert len(scripts) == 1 + figures
    assert all("Plotly.newPlot" in text for _, text in scripts[1:])
    return figures


@pytest.fixture(scope="module")
def demo_app(tmp_path_factory):
    app = App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path_factory.mktemp("out")))
    assert app.calibrate(max_samples=4, progress=False)
    return app


def test_the_page_without_a_build_holds_summary_findings_ranges_histograms_and_recipe(demo_app, tmp_path):
    app = demo_app
    path = app.save_html(str(tmp_path / "share" / "analysis.html"))
    assert path == str(tmp_path / "share" / "analysis.html") and app.error.value == ""
    page = Path(path).read_text(encoding="utf-8")
    assert "analysis.html" in app.html_status.value and "opens offline" in app.html_status.value
    # The recipe, exactly as saved (escaped as HTML text).
    assert html.escape(app.session.recipe.to_json(), quote=True) in page
    for title in ("Summary", "Lint findings", "Ranges per tensor", "Calibration figures", "Recipe"):
        assert f">{title}</h2>" in page
    assert "Layer table" not in page and "Precision chart" not in page and "Quantization plan" not in page
    # The ranked overview and one histogram per disputed tensor (the top 6).
    assert _assert_offline_with_one_script_per_figure(page) == 1 + 6
    worst = min(app.session.ranges, key=lambda n: app.session.ranges[n]["entropy"].sqnr_db)
    assert html.escape(worst) in page
    assert "no build" in page or "build in step 6" in page  # the steps table says what is missing


def test_builds_add_the_precision_chart_and_their_layer_tables(tmp_path):
    app = App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path / "out"))
    assert app.calibrate(max_samples=2, progress=False)
    assert app.load_saved_build(str(saved_build_dir(tmp_path, "int8_implicit", synthetic_int8_implicit(),
                                                    app.session.recipe)))
    app.explore()  # the explorer's tensor is drawn first
    app.save_html_button.click()  # no path typed: out_dir/analysis.html
    page = (tmp_path / "out" / "analysis.html").read_text(encoding="utf-8")
    assert ">Precision chart</h2>" in page and ">Layer table: int8_implicit</h2>" in page
    assert ">Precision summary</h2>" in page
    from trtwidgets.core.calibration.explorer_data import rank_tensors

    top = list(rank_tensors(app.session.ranges, by="disagreement").names)[:6]
    histograms = len(set(top) | {app.explorer.tensor})
    assert _assert_offline_with_one_script_per_figure(page) == 1 + histograms + 1  # overview, histograms, precision
    first_caption = page.index("|x| histogram of ")
    assert page[first_caption:].startswith(f"|x| histogram of {html.escape(app.explorer.tensor)} ")
    for name in app.inspector.table["name"][:5]:
        assert html.escape(name) in page


def _script_named_model(path: Path) -> Path:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    nodes = [helper.make_node("Conv", ["x", "W"], [SCRIPT], name=SCRIPT, kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", [SCRIPT], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_names_from_the_model_are_escaped_everywhere(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        np.save(data / f"s{i}.npy", np.random.default_rng(i).standard_normal((1, 3, 8, 8)).astype(np.float32))
    app = App(model_path=str(_script_named_model(tmp_path / "m.onnx")), data=str(data), out_dir=str(tmp_path / "o"))
    assert app.session.model is not None and app.calibrate(progress=False)
    assert SCRIPT in app.session.stats.tensors  # the name reaches the ranges table and a histogram
    page = Path(app.save_html(str(tmp_path / "evil.html"))).read_text(encoding="utf-8")
    assert SCRIPT not in page and "alert(1)" in page
    assert html.escape(SCRIPT) in page  # shown as text in the ranges table
    # No script beyond plotly.js and one per figure: the name did not open one.
    _assert_offline_with_one_script_per_figure(page)


def test_an_empty_app_writes_a_page_and_a_bad_path_is_refused(tmp_path):
    app = App(out_dir=str(tmp_path))
    page = Path(app.save_html(str(tmp_path / "empty.html"))).read_text(encoding="utf-8")
    assert "No model was loaded." in page and _assert_offline_with_one_script_per_figure(page) == 0
    assert app.save_html(str(tmp_path / "page.txt")) is None and "not an .html file" in app.error.value
    (tmp_path / "file").write_text("a file where a folder is needed")
    assert app.save_html(str(tmp_path / "file" / "page.html")) is None
    assert "Could not write" in app.error.value and "Fix:" in app.error.value
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.html", "file"]  # no half-written file left


def test_a_plan_adds_its_reason_chart_and_table(tmp_path):
    from tests.core.plan.plan_models import conv_stack, feeds

    path = tmp_path / "stack.onnx"
    onnx.save(conv_stack(), path)
    app = App(model_path=str(path), out_dir=str(tmp_path / "out"))
    app.plan_step.data = feeds()
    app.plan_step.batch.value = 256
    assert app.plan_step.run(), app.plan_step.status.value
    page = Path(app.save_html(str(tmp_path / "plan.html"))).read_text(encoding="utf-8")
    assert ">Quantization plan</h2>" in page and html.escape(app.plan_step.plan.reason) in page
    assert html.escape(app.plan_step.plan.table()) in page
    assert "Latency: an estimate" in page  # not measured here: the page says the latency is an estimate
    assert _assert_offline_with_one_script_per_figure(page) == 1  # the Pareto chart; no statistics, no build
