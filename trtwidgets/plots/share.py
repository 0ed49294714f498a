"""``tw.share(notebook, out)``: an executed notebook as one page that opens anywhere, offline.

``jupyter nbconvert --to html`` writes a page that needs the network: the widget
manager and require.js come from a CDN (every widget area is blank offline), MathJax
too (formulas show as TeX), and every Plotly ``FigureWidget`` carried its own copy of
plotly.js in the saved widget state (the quickstart was 58 MB). This writes the same
notebook as nbconvert's JupyterLab template does, with:

- every widget drawn from its saved state as plain HTML (:mod:`.widget_static`): no
  widget manager, no widget state in the page;
- every Plotly figure (outputs, ``FigureWidget`` s, figures inside Output widgets) drawn
  from its JSON, with plotly.js once in the page's head (or from the CDN, when asked);
- every formula as MathML (:mod:`.tex_html`): no MathJax.

It executes nothing: run the notebook first and save it with its outputs.
"""

from __future__ import annotations

import copy
import html
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from ..core.common.errors import UserError
from ..core.common.json_limits import JsonLimits, check_file_size, check_json_text
from .tex_html import markdown_math
from .widget_static import STATIC_CSS, StaticWidgets, model_id

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PLOTLY_JSON = "application/vnd.plotly.v1+json"
#: A string that plotly.js (and plotly's FigureWidget bundle, which holds plotly.js) contains exactly once:
#: its count in a page is the number of plotly.js copies there.
PLOTLY_JS_MARK = "No DOM element with id"
#: How plotly.js reaches the page.
PLOTLYJS_CHOICES = ("inline", "cdn")

NOTEBOOK_LIMITS = JsonLimits("notebook", 1 << 30, 64,
                             "an executed notebook holds cells and their outputs: a few MB, nested about 10 deep")

# nbconvert's JupyterLab page without what comes from a CDN: require.js (nothing here needs it, and with it
# plotly.js would register as an AMD module instead of window.Plotly), the widget manager, MathJax.
_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{% block extra_css %}<style type="text/css">{{ resources.trtw_css }}</style>{{ resources.trtw_head }}{% endblock extra_css %}
"""
_TEMPLATE_NAME = "trtwidgets_share.html.j2"
_PAGE_CSS = """
.trtw-static-widget{border-left:3px solid #e0e0e0;padding-left:8px}
.trtw-share-note{color:#5f6368;font-size:12px;margin:4px 0 12px}
"""


@dataclass(frozen=True)
class SharedPage:
    """What :func:`share` wrote.

    Attributes
    ----------
    path : pathlib.Path
    size : int
        Bytes written.
    figures : int
        Plotly figures drawn (outputs, FigureWidgets, figures inside Output widgets).
    widgets : int
        Widget areas (widget outputs of the notebook's cells) drawn from their saved state.
    plotly_js : str
        ``"inline"`` (embedded once), ``"cdn"`` (loaded from plotly's CDN) or ``"none"`` (no figure).
    notes : tuple of str
        What could not be drawn as it was, in words.
    """

    path: Path
    size: int
    figures: int
    widgets: int
    plotly_js: str
    notes: Tuple[str, ...] = ()

    def __str__(self) -> str:
        return (f"{self.path}: {self.size / 1e6:.1f} MB, {self.figures} figures, {self.widgets} widgets drawn, "
                f"plotly.js {self.plotly_js}" + "".join(f"\nnote: {n}" for n in self.notes))


class _Page:
    """The outputs of one notebook rewritten for a page without a kernel or a network."""

    def __init__(self, widget_state: Dict[str, Any]):
        self.figures = 0
        self.widgets = 0
        self.notes: List[str] = []
        self.static = StaticWidgets(widget_state, self.figure_html, self.outputs_html)

    def figure_html(self, fig: Dict[str, Any]) -> str:
        """A Plotly figure (``{"data", "layout", "config"}``) as a div and its drawing script, no plotly.js."""
        import plotly.io as pio

        self.figures += 1
        config = {"displaylogo": False, "responsive": True, **(fig.get("config") or {})}
        return pio.to_html({"data": fig.get("data") or [], "layout": fig.get("layout") or {}}, config=config,
                           include_plotlyjs=False, full_html=False, validate=False,
                           div_id=f"trtw-figure-{self.figures}", default_width="100%")

    def output(self, out: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """One output as it goes into the page (None: left out, it shows nothing without a kernel)."""
        data = out.get("data")
        if out.get("output_type") not in ("display_data", "execute_result") or not isinstance(data, dict):
            return out
        if WIDGET_VIEW in data:
            mid = model_id("IPY_MODEL_" + str((data[WIDGET_VIEW] or {}).get("model_id", "")))
            body = self.static.render(mid or "")
            return _html_output(out, f"<div class='trtw-static-widget'>{body}</div>")
        if PLOTLY_JSON in data:
            return _html_output(out, self.figure_html(data[PLOTLY_JSON] or {}))
        if PLOTLY_JS_MARK in _text(data.get("text/html")):
            return None  # plotly's notebook renderer announcing itself: plotly.js and no figure
        if "text/markdown" in data:
            out = copy.copy(out)
            out["data"] = dict(data, **{"text/markdown": markdown_math(_text(data["text/markdown"]))})
        return out

    def outputs_html(self, outputs: List[Dict[str, Any]]) -> str:
        """An Output widget's outputs as HTML."""
        parts = []
        for out in outputs:
            done = self.output(out)
            if done is not None:
                parts.append(_output_html(done))
        return "".join(parts)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _html_output(out: Dict[str, Any], body: str) -> Dict[str, Any]:
    new = {k: v for k, v in out.items() if k not in ("data", "metadata")}
    new["data"] = {"text/html": body}
    new["metadata"] = {}
    return new


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _output_html(out: Dict[str, Any]) -> str:
    """One output inside an Output widget (what nbconvert would write for it, in short)."""
    kind = out.get("output_type")
    if kind == "stream":
        return f"<pre>{html.escape(_ANSI.sub('', _text(out.get('text'))))}</pre>"
    if kind == "error":
        return f"<pre>{html.escape(_ANSI.sub('', chr(10).join(out.get('traceback') or [])))}</pre>"
    data = out.get("data") or {}
    if "text/html" in data:
        return _text(data["text/html"])
    if "image/svg+xml" in data:
        return _text(data["image/svg+xml"])
    for mime in ("image/png", "image/jpeg"):
        if mime in data:
            return f"<img src='data:{mime};base64,{html.escape(_text(data[mime]).strip())}'>"
    if "text/markdown" in data:
        from nbconvert.filters import markdown2html

        return markdown2html(_text(data["text/markdown"]))
    return f"<pre>{html.escape(_text(data.get('text/plain')))}</pre>"


def _read_notebook(path: Path):
    import nbformat

    try:
        check_file_size(path, NOTEBOOK_LIMITS)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"There is no notebook at {path}.", None, "Give the path of a saved .ipynb file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"Could not read the notebook {path}.", f"{exc}.", "Give a readable .ipynb file.") from None
    check_json_text(text, str(path), NOTEBOOK_LIMITS)
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat's JSON and schema errors have no common base
        raise UserError(f"{path} is not a Jupyter notebook.", f"nbformat could not read it: {exc}",
                        "Give a .ipynb file saved by Jupyter.") from None


def _check_executed(nb, path: Path) -> None:
    code = [c for c in nb.cells if c.cell_type == "code"]
    if code and not any(c.get("outputs") or c.get("execution_count") for c in code):
        raise UserError(f"{path} has not been executed: none of its {len(code)} code cells has an output.",
                        "share() writes what a run left in the notebook; it runs nothing itself.",
                        "Run the notebook (Run All, or `jupyter nbconvert --to notebook --execute --inplace`), "
                        "save it, and share it again.")


def _plotly_head(how: str) -> str:
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    if how == "cdn":
        return f'<script src="https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js" charset="utf-8"></script>'
    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def page_html(nb, plotlyjs: str = "inline", title: Optional[str] = None) -> Tuple[str, _Page]:
    """The page of the notebook node ``nb`` (executed), and what went into it. ``nb`` is not changed."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    nb = copy.deepcopy(nb)
    widgets = nb.metadata.pop("widgets", None) or {}
    page = _Page(dict((widgets.get(WIDGET_STATE) or {}).get("state") or {}))
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = markdown_math(cell.source)
        elif cell.cell_type == "code":
            # Widget areas of the page: widgets inside an Output widget are parts of one area, not areas.
            page.widgets += sum(WIDGET_VIEW in (out.get("data") or {}) for out in cell.get("outputs", []))
            cell.outputs = [o for o in (page.output(out) for out in cell.get("outputs", [])) if o is not None]
    if page.static.unknown:
        page.notes.append("widgets without a static view: " + ", ".join(
            f"{n} x{k}" for n, k in sorted(page.static.unknown.items())))
    head = _plotly_head(plotlyjs) if page.figures else ""
    exporter = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({_TEMPLATE_NAME: _TEMPLATE})],
                            template_file=_TEMPLATE_NAME)
    name = title or nb.metadata.get("title") or "notebook"
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": name},
                                                         "trtw_css": STATIC_CSS + _PAGE_CSS, "trtw_head": head})
    return body, page


def share(notebook: Union[str, os.PathLike], out: Union[str, os.PathLike], *, plotlyjs: str = "inline",
          title: Optional[str] = None) -> SharedPage:
    """Write an executed notebook as one self-contained HTML page (nothing is executed).

    Widgets are drawn from their saved state, Plotly figures from their JSON with
    plotly.js once, formulas as MathML: the page shows every output offline, with no
    kernel, and is written atomically.

    Parameters
    ----------
    notebook : path
        A saved ``.ipynb`` with its outputs (and, for widgets, their saved state: nbclient,
        ``jupyter nbconvert --execute`` and JupyterLab's *Save Widget State Automatically*
        keep it).
    out : path
        The page to write (``.html``); never the notebook itself.
    plotlyjs : {"inline", "cdn"}
        ``"inline"`` embeds plotly.js once (about 4.8 MB; opens offline); ``"cdn"`` loads it
        from plotly's CDN (a small page that needs the network for its figures).
    title : str, optional
        The page's title (default: the notebook's file name).

    Returns
    -------
    SharedPage
        The path, the size, and how many figures and widgets were drawn.

    Raises
    ------
    UserError
        The notebook cannot be read or was never run, ``out`` is not an .html path or is
        the notebook, or the page cannot be written (the earlier file is then untouched).
    """
    from ..core.common.atomic import write_text_atomic
    from ..core.common.paths import user_path
    from ..core.common.write_rule import check_replaceable, refuse_inputs, write_error

    if plotlyjs not in PLOTLYJS_CHOICES:
        raise UserError(f"plotlyjs={plotlyjs!r} is not a way to load plotly.js.",
                        "The page either embeds plotly.js or loads it from plotly's CDN.",
                        f"Use one of {', '.join(PLOTLYJS_CHOICES)}.")
    src, dest = user_path(notebook), user_path(out)
    if dest.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"{dest} is not an .html file.", "The page is HTML; another suffix opens in the wrong program.",
                        "Give a path ending in .html.")
    refuse_inputs(dest, {"notebook": src}, "the page")
    check_replaceable(dest, "the page")
    nb = _read_notebook(src)
    _check_executed(nb, src)
    body, page = page_html(nb, plotlyjs, title or src.stem)
    try:
        written = write_text_atomic(dest, body)
    except OSError as exc:
        raise write_error(exc, dest) from None
    return SharedPage(path=Path(written), size=len(body.encode("utf-8")), figures=page.figures,
                      widgets=page.widgets, plotly_js=("none" if not page.figures else plotlyjs),
                      notes=tuple(page.notes))
