"""tw.share and its parts, on notebooks made here (no kernel): widgets from saved state, plotly.js once, MathML."""

from __future__ import annotations

import json
import os
import re

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbconvert")
pytest.importorskip("plotly")

from trtwidgets.core.common.errors import UserError  # noqa: E402
from trtwidgets.plots.share import PLOTLY_JS_MARK, share  # noqa: E402
from trtwidgets.plots.tex_html import markdown_math, tex_to_mathml  # noqa: E402
from trtwidgets.plots.widget_static import StaticWidgets  # noqa: E402

VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
FIGURE = {"data": [{"type": "bar", "y": [1, 2, 3]}], "layout": {"title": {"text": "bars"}}}


def _model(name, module="@jupyter-widgets/controls", **state):
    return {"model_name": name, "model_module": module, "model_module_version": "*", "state": state}


def _state():
    """An app-like widget tree: a box with text, tabs (a dropdown, a checkbox), an Output holding a figure,
    a hidden panel, a FigureWidget whose _esm is plotly's bundle, and a model no writer knows."""
    return {
        "root": _model("VBoxModel", children=["IPY_MODEL_title", "IPY_MODEL_tabs", "IPY_MODEL_hidden",
                                              "IPY_MODEL_fig", "IPY_MODEL_odd"]),
        "title": _model("HTMLModel", value="<b>the app</b>", layout="IPY_MODEL_shown"),
        "shown": _model("LayoutModel", "@jupyter-widgets/base"),
        "tabs": _model("TabModel", children=["IPY_MODEL_drop", "IPY_MODEL_box"], titles=["1 <Load>", "2 Flags"],
                       selected_index=1),
        "drop": _model("DropdownModel", description="Method <script>", _options_labels=["max", "entropy"], index=1),
        "box": _model("HBoxModel", children=["IPY_MODEL_check", "IPY_MODEL_out"]),
        "check": _model("CheckboxModel", description="INT8", value=True),
        "out": _model("OutputModel", "@jupyter-widgets/output", outputs=[
            {"output_type": "display_data", "metadata": {},
             "data": {"application/vnd.plotly.v1+json": FIGURE, "text/html": f"<script>{PLOTLY_JS_MARK}</script>"}},
            {"output_type": "stream", "name": "stdout", "text": "done \x1b[31mred\x1b[0m"}]),
        "hidden": _model("HTMLModel", value="SECRET PANEL", layout="IPY_MODEL_none"),
        "none": _model("LayoutModel", "@jupyter-widgets/base", display="none"),
        "fig": _model("AnyModel", "anywidget", _esm=f"/* bundle */ '{PLOTLY_JS_MARK}'", _widget_data=FIGURE["data"],
                      _widget_layout={"title": {"text": "live"}}, _config={}),
        "odd": _model("MysteryModel", "somewhere"),
    }


def test_static_widgets_draw_the_saved_state():
    figures = []
    sw = StaticWidgets(_state(), lambda fig: figures.append(fig) or "<div class='fig'></div>",
                       lambda outs: f"<i>{len(outs)} outputs</i>")
    html = sw.render("root")
    assert "<b>the app</b>" in html and "SECRET PANEL" not in html
    assert "1 &lt;Load&gt;" in html and "<details" in html  # every tab open, under its escaped title
    assert "Method &lt;script&gt;" in html and ">entropy<" in html and "max" not in html
    assert "checked" in html and "<i>2 outputs</i>" in html
    assert figures == [{"data": FIGURE["data"], "layout": {"title": {"text": "live"}}, "config": {}}]
    assert "MysteryModel: no static view" in html and sw.unknown == {"MysteryModel": 1}
    assert "not saved" in sw.render("gone")


def test_formulas_become_mathml_and_a_bar_inside_one_keeps_the_table():
    from nbconvert.filters import markdown2html

    md = ("| method | amax |\n|---|---|\n| max | the largest $|x|$ seen |\n\ncode `$x$` costs $5 and $6\n\n"
          "writing $w'_q / $ factor back")
    html = markdown2html(markdown_math(md))
    assert html.count("<td>") == 2 and "<math>" in html and "$|x|$" not in html
    assert "<code>$x$</code>" in html and "$5 and $6" in html and "$" not in html.split("$6")[1]  # Jupyter's pairs
    m = tex_to_mathml(r"w'_c = \frac{a}{\sqrt{\sigma^2 + \epsilon}} \cdot \text{amax}", display=True)
    assert 'display="block"' in m and "<mfrac>" in m and "<msqrt>" in m and "σ" in m and "<mtext>amax</mtext>" in m
    assert "<msubsup><mi>w</mi><mi>c</mi><mo>&#8242;</mo></msubsup>" in m
    assert "<mtext>unknowncmd</mtext>" in tex_to_mathml(r"\unknowncmd x")  # shown, never dropped


def _notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title\n\nA scale $s = \\text{amax}/127$.\n\n| a | b |\n|---|---|\n| $|x|$ | 1 |"),
        nbformat.v4.new_code_cell("fig", execution_count=1, outputs=[
            nbformat.v4.new_output("display_data", data={"text/html": f"<script>{PLOTLY_JS_MARK} init</script>"}),
            nbformat.v4.new_output("execute_result", execution_count=1, data={
                "application/vnd.plotly.v1+json": FIGURE, "text/html": f"<script>{PLOTLY_JS_MARK} again</script>"})]),
        nbformat.v4.new_code_cell("app", execution_count=2, outputs=[nbformat.v4.new_output(
            "display_data", data={VIEW: {"model_id": "root", "version_major": 2, "version_minor": 0},
                                  "text/plain": "VBox(...)"})]),
    ]
    nb.metadata["widgets"] = {STATE: {"version_major": 2, "version_minor": 0, "state": _state()}}
    return nb


def test_share_writes_one_page_with_plotly_js_once_and_every_widget_drawn(tmp_path):
    src = tmp_path / "analysis.ipynb"
    nbformat.write(_notebook(), str(src))
    shared = share(src, tmp_path / "analysis.html")
    text = shared.path.read_text(encoding="utf-8")
    # once, in the head: not in the renderer's announcement, the figure's fallback nor the FigureWidget's _esm
    assert text.count(PLOTLY_JS_MARK) == 1 and "get_plotlyjs" not in text
    assert (shared.figures, shared.widgets, shared.plotly_js) == (3, 1, "inline")
    assert STATE not in text and not re.search(r"""<(?:script|link)[^>]+(?:src|href)=["']?(?:https?:)?//""", text)
    assert "<b>the app</b>" in text and "<math" in text and "$|x|$" not in text
    assert shared.notes == ("widgets without a static view: MysteryModel x1",)
    assert json.loads(src.read_text())["metadata"]["widgets"], "the notebook itself is not changed"


def test_share_can_load_plotly_js_from_the_cdn_when_asked(tmp_path):
    src = tmp_path / "a.ipynb"
    nbformat.write(_notebook(), str(src))
    text = share(src, tmp_path / "a.html", plotlyjs="cdn").path.read_text(encoding="utf-8")
    assert text.count(PLOTLY_JS_MARK) == 0 and 'src="https://cdn.plot.ly/plotly-' in text


def test_share_refuses_what_it_cannot_do_and_writes_nothing(tmp_path):
    src = tmp_path / "a.ipynb"
    blank = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nbformat.write(blank, str(src))
    with pytest.raises(UserError, match="has not been executed"):
        share(src, tmp_path / "a.html")
    nbformat.write(_notebook(), str(src))
    with pytest.raises(UserError, match="not an .html file"):
        share(src, tmp_path / "a.pdf")
    os.link(src, tmp_path / "same.html")  # the notebook itself under another name
    with pytest.raises(UserError, match="own input"):
        share(src, tmp_path / "same.html")
    with pytest.raises(UserError, match="not a way to load"):
        share(src, tmp_path / "a.html", plotlyjs="link")
    (tmp_path / "bad.ipynb").write_text("{not json")
    with pytest.raises(UserError):
        share(tmp_path / "bad.ipynb", tmp_path / "b.html")
    with pytest.raises(UserError, match="no notebook"):
        share(tmp_path / "missing.ipynb", tmp_path / "c.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.ipynb", "bad.ipynb", "same.html"]
    assert (tmp_path / "same.html").read_bytes() == src.read_bytes()


def test_a_live_figure_keeps_plotly_js_out_of_its_state_and_sends_it_on_request():
    import plotly.graph_objects as go

    from trtwidgets.plots.live_figure import BUNDLE_REPLY, BUNDLE_REQUEST, live_figure

    fig = live_figure(go.Figure(go.Bar(y=[1, 2])))
    state = json.dumps({k: v for k, v in fig.get_state().items() if isinstance(v, (str, list, dict))})
    assert PLOTLY_JS_MARK not in state and len(fig._esm) < 4000 and isinstance(fig, go.FigureWidget)
    sent = []
    fig.send = lambda content, buffers=None: sent.append((content, buffers))  # the comm: the only edge mocked
    fig._handle_custom_msg({"type": "something else"}, [])
    fig._handle_custom_msg({"type": BUNDLE_REQUEST}, [])
    (content, buffers), = sent
    assert content == {"type": BUNDLE_REPLY} and PLOTLY_JS_MARK.encode() in buffers[0]


def test_a_live_figure_keeps_its_saved_state_current():
    """Plotly sends changes as deltas and leaves _widget_data as it was made: a view drawn late, and tw.share,
    would show the first figure. The live figure's state follows every change."""
    import plotly.graph_objects as go

    from trtwidgets.plots.live_figure import live_figure

    fig = live_figure(go.Figure(go.Bar(y=[1, 2])))
    with fig.batch_update():
        fig.data[0].y = [5, 6, 7]
        fig.layout.title.text = "now"
    fig.add_scatter(y=[1])
    state = fig.get_state()
    assert list(state["_widget_data"][0]["y"]) == [5, 6, 7] and len(state["_widget_data"]) == 2
    assert state["_widget_layout"]["title"]["text"] == "now"
    plain = go.FigureWidget(go.Figure(go.Bar(y=[1, 2])))
    with plain.batch_update():
        plain.data[0].y = [5, 6, 7]
    assert list(plain.get_state()["_widget_data"][0]["y"]) == [1, 2]  # what plotly alone would have saved
