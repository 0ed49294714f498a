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

**A notebook's outputs are not trusted** (Jupyter's own trust model: it does not run the
JavaScript of a notebook it did not run itself). A page made of a colleague's notebook is opened
by someone else, so everything the notebook carries is made inert before it goes into the page
(:func:`~.html_sanitize.sanitize_html`: ``<script>``, event handlers, ``javascript:`` links,
frames and objects go; ``application/javascript`` outputs are dropped; Markdown's HTML and HTML
widgets' values are cleaned the same way), and the page says what was removed. The page's own
scripts (plotly.js, each figure's drawing script) are the toolkit's and stay. ``trust=True``
(``--trust``) keeps the notebook's scripts, for a notebook one made oneself. A notebook that is
not valid by nbformat's schema is refused; a widget state is data (:mod:`.widget_static` draws
a box that holds itself once).
"""

from __future__ import annotations

import copy
import functools
import html
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ..core.common.errors import UserError
from ..core.common.json_limits import JsonLimits, check_file_size, check_json_text
from .html_sanitize import Removed, sanitize_html
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
        What could not be drawn as it was, and what was removed, in words.
    removed : int
        How many scripts, event handlers, links and other active parts of the notebook's outputs were
        removed (0 with ``trust=True``).
    """

    path: Path
    size: int
    figures: int
    widgets: int
    plotly_js: str
    notes: Tuple[str, ...] = ()
    removed: int = 0

    def __str__(self) -> str:
        return (f"{self.path}: {self.size / 1e6:.1f} MB, {self.figures} figures, {self.widgets} widgets drawn, "
                f"plotly.js {self.plotly_js}" + "".join(f"\nnote: {n}" for n in self.notes))


class _Page:
    """The outputs of one notebook rewritten for a page without a kernel or a network.

    ``trust``: the notebook's HTML goes in as it is; otherwise through :meth:`clean`.
    """

    def __init__(self, widget_state: Dict[str, Any], trust: bool = False):
        self.figures = 0
        self.widgets = 0
        self.notes: List[str] = []
        self.trust = trust
        self.removed = Removed()
        self.broken_figures = 0
        self.static = StaticWidgets(widget_state, self.figure_html, self.outputs_html, self.clean)

    def clean(self, text: str) -> str:
        """The notebook's HTML ``text`` as it goes into the page: inert unless trusted (what went, counted)."""
        return text if self.trust else sanitize_html(text, self.removed)

    def figure_html(self, fig: Any) -> str:
        """A Plotly figure (``{"data", "layout", "config"}``) as a div and its drawing script, no plotly.js."""
        import plotly.io as pio

        fig = fig if isinstance(fig, Mapping) else {}
        data, layout, config = fig.get("data"), fig.get("layout"), fig.get("config")
        self.figures += 1
        config = {"displaylogo": False, "responsive": True, **(config if isinstance(config, Mapping) else {})}
        try:
            # plotly writes the JSON into its script with <, > and / escaped: names cannot end the script.
            return pio.to_html({"data": data if isinstance(data, list) else [],
                                "layout": layout if isinstance(layout, Mapping) else {}}, config=config,
                               include_plotlyjs=False, full_html=False, validate=False,
                               div_id=f"trtw-figure-{self.figures}", default_width="100%")
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError):
            self.broken_figures += 1
            return "<div class='trtw-share-note'>(a figure whose saved JSON could not be drawn)</div>"

    def output(self, out: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """One output as it goes into the page (None: left out, it shows nothing without a kernel)."""
        data = out.get("data")
        if out.get("output_type") not in ("display_data", "execute_result") or not isinstance(data, Mapping):
            return out
        view = data.get(WIDGET_VIEW)
        if isinstance(view, Mapping):
            mid = model_id("IPY_MODEL_" + str(view.get("model_id", "")))
            body = self.static.render(mid or "")
            return _html_output(out, f"<div class='trtw-static-widget'>{body}</div>")
        if isinstance(data.get(PLOTLY_JSON), Mapping):
            return _html_output(out, self.figure_html(data[PLOTLY_JSON]))
        if PLOTLY_JS_MARK in _text(data.get("text/html")):
            return None  # plotly's notebook renderer announcing itself: plotly.js and no figure
        if not self.trust:
            return _inert_output(out, self)
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
                parts.append(_output_html(done, self.clean))
        return "".join(parts)

    def problem_notes(self) -> List[str]:
        """What the page could not draw as saved, and what it removed, in words."""
        notes = []
        if self.static.unknown:
            notes.append("widgets without a static view: " + ", ".join(
                f"{n} x{k}" for n, k in sorted(self.static.unknown.items())))
        if self.static.problems:
            notes.append("widgets not drawn as saved: " + ", ".join(
                f"{n} x{k}" for n, k in sorted(self.static.problems.items())))
        if self.broken_figures:
            notes.append(f"figures whose saved JSON could not be drawn: {self.broken_figures}")
        if self.removed:
            notes.append("removed from the notebook's outputs what would run in a reader's browser: "
                         f"{self.removed.describe()} (a notebook's outputs are not trusted, as Jupyter does not "
                         "trust them; share it with --trust, trust=True, to keep them: only a notebook you made)")
        return notes


#: What of an output's bundle goes into a page of a notebook that is not trusted (the rest is never drawn by
#: nbconvert, runs code, or loads a script from the network: application/javascript, text/vnd.mermaid).
_INERT_MIMES = ("text/html", "text/markdown", "image/svg+xml", "text/latex", "image/png", "image/jpeg", "text/plain")
#: Output metadata nbconvert writes into an <img> (unquoted): kept only as numbers, flags and known words.
_IMAGE_METADATA = {"width": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                   "height": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                   "unconfined": lambda v: isinstance(v, bool), "needs_background": lambda v: v in ("light", "dark")}


def _inert_metadata(meta: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if not isinstance(meta, Mapping):
        return out
    for key, ok in _IMAGE_METADATA.items():
        if key in meta and ok(meta[key]):
            out[key] = meta[key]
    for mime in ("image/png", "image/jpeg"):
        if isinstance(meta.get(mime), Mapping):
            out[mime] = _inert_metadata(meta[mime])
    return out


def _inert_output(out: Dict[str, Any], page: _Page) -> Dict[str, Any]:
    """A display output of a notebook that is not trusted: HTML and SVG cleaned, JavaScript dropped."""
    data = out["data"]
    if "application/javascript" in data:
        page.removed[("javascript-output", "application/javascript")] += 1
    kept = {}
    for mime in _INERT_MIMES:
        if mime not in data:
            continue
        text = _text(data[mime])
        if mime in ("text/html", "image/svg+xml"):
            text = page.clean(text)
        elif mime == "text/markdown":
            text = markdown_math(text)  # cleaned once rendered (the exporter's markdown2html, _output_html)
        elif mime in ("image/png", "image/jpeg"):
            text = re.sub(r"[^A-Za-z0-9+/=]", "", text)  # base64 only: it is written into an attribute
        kept[mime] = text
    if not kept:  # only code or what the page cannot draw: said in words (an empty bundle draws nothing at all)
        kept["text/plain"] = f"(an output this page does not show: {', '.join(sorted(map(str, data)))[:200]})"
    new = {k: v for k, v in out.items() if k not in ("data", "metadata")}
    new["data"], new["metadata"] = kept, _inert_metadata(out.get("metadata"))
    return new


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _html_output(out: Dict[str, Any], body: str) -> Dict[str, Any]:
    new = {k: v for k, v in out.items() if k not in ("data", "metadata")}
    new["data"] = {"text/html": body}
    new["metadata"] = {}
    return new


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _output_html(out: Dict[str, Any], clean=lambda text: text) -> str:
    """One output inside an Output widget (what nbconvert would write for it, in short).

    ``clean`` cleans the HTML Markdown renders to (the rest was cleaned as the output was read: :meth:`_Page.output`).
    """
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

        return clean(markdown2html(_text(data["text/markdown"])))
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
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:
        raise UserError(f"{path} is not a Jupyter notebook.", f"nbformat could not read it: {exc}"[:600],
                        "Give a .ipynb file saved by Jupyter.") from None
    try:
        # nbformat.reads only logs a schema error: an execution count of text, an output of a number, would be
        # written into the page as they are.
        nbformat.validate(nb)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path} is not a valid Jupyter notebook: {first[:200]}",
                        "A notebook's cells and outputs have the types nbformat's schema gives; this one's do not "
                        "(it was edited by hand, or written by another tool).",
                        "Open it in Jupyter and save it again, or give the notebook as Jupyter wrote it.") from None
    return nb


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


def _widget_state(widgets: Any) -> Dict[str, Any]:
    """The saved models of a notebook's ``metadata.widgets`` (an empty dict for anything else)."""
    saved = widgets.get(WIDGET_STATE) if isinstance(widgets, Mapping) else None
    state = saved.get("state") if isinstance(saved, Mapping) else None
    return dict(state) if isinstance(state, Mapping) else {}


@functools.lru_cache(maxsize=1)
def _exporter_class():
    """nbconvert's HTML exporter whose Markdown (cells and outputs) goes through the page's ``clean``."""
    from jinja2 import pass_context
    from nbconvert import HTMLExporter

    class SharedPageExporter(HTMLExporter):
        clean = None

        @pass_context
        def markdown2html(self, context, source):
            text = super().markdown2html(context, source)
            return self.clean(text) if self.clean is not None else text

    return SharedPageExporter


def page_html(nb, plotlyjs: str = "inline", title: Optional[str] = None,
              trust: bool = False) -> Tuple[str, _Page]:
    """The page of the notebook node ``nb`` (executed), and what went into it. ``nb`` is not changed.

    ``trust``: keep the notebook's scripts and HTML as they are (else they are made inert: module docstring).
    """
    from jinja2 import DictLoader

    nb = copy.deepcopy(nb)
    page = _Page(_widget_state(nb.metadata.pop("widgets", None)), trust=trust)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = markdown_math(cell.source)
        elif cell.cell_type == "code":
            # Widget areas of the page: widgets inside an Output widget are parts of one area, not areas.
            page.widgets += sum(WIDGET_VIEW in (out.get("data") or {}) for out in cell.get("outputs", []))
            cell.outputs = [o for o in (page.output(out) for out in cell.get("outputs", [])) if o is not None]
    head = _plotly_head(plotlyjs) if page.figures else ""
    exporter = _exporter_class()(template_name="lab", extra_loaders=[DictLoader({_TEMPLATE_NAME: _TEMPLATE})],
                                 template_file=_TEMPLATE_NAME)
    exporter.clean = page.clean
    name = title or nb.metadata.get("title") or "notebook"
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": str(name)},
                                                         "trtw_css": STATIC_CSS + _PAGE_CSS, "trtw_head": head})
    page.notes.extend(page.problem_notes())
    return body, page


def share(notebook: Union[str, os.PathLike], out: Union[str, os.PathLike], *, plotlyjs: str = "inline",
          title: Optional[str] = None, trust: bool = False) -> SharedPage:
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
    trust : bool
        Keep the notebook's scripts, event handlers and other active HTML in its outputs (default: they are
        removed, and the page's notes say what went: the notebook is someone's data, and the page is opened
        by someone else). Only for a notebook you made yourself.

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
    from ..core.common.write_rule import check_name_length, check_replaceable, refuse_inputs, write_error

    if plotlyjs not in PLOTLYJS_CHOICES:
        raise UserError(f"plotlyjs={plotlyjs!r} is not a way to load plotly.js.",
                        "The page either embeds plotly.js or loads it from plotly's CDN.",
                        f"Use one of {', '.join(PLOTLYJS_CHOICES)}.")
    src, dest = user_path(notebook), user_path(out)
    if dest.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"{dest} is not an .html file.", "The page is HTML; another suffix opens in the wrong program.",
                        "Give a path ending in .html.")
    check_name_length(dest, "the page")  # before the notebook is read and drawn: the write would fail after
    refuse_inputs(dest, {"notebook": src}, "the page")
    check_replaceable(dest, "the page")
    nb = _read_notebook(src)
    _check_executed(nb, src)
    body, page = page_html(nb, plotlyjs, title or src.stem, trust=bool(trust))
    try:
        written = write_text_atomic(dest, body)
    except OSError as exc:
        raise write_error(exc, dest) from None
    return SharedPage(path=Path(written), size=len(body.encode("utf-8")), figures=page.figures,
                      widgets=page.widgets, plotly_js=("none" if not page.figures else plotlyjs),
                      notes=tuple(page.notes), removed=sum(page.removed.values()))
