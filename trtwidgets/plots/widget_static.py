"""A widget's saved state drawn as plain HTML: what a reader sees without a kernel or a network.

An executed notebook keeps each widget's last state (the ``widget-state+json`` metadata
nbclient and JupyterLab write). A page that loads a widget manager from a CDN draws
nothing offline; this module draws the state itself: boxes and tabs as nested blocks
(every tab open, each under its title), text and HTML as they were, controls as
disabled controls showing their value, Output widgets' outputs, and Plotly
``FigureWidget`` s as figures from their saved data and layout. The rule table
(:data:`RENDERERS`, model name -> writer) is apart from the walk (:class:`StaticWidgets`).

HTML widgets' values (and descriptions that allow HTML) go through the page's ``clean``
(:func:`~.html_sanitize.sanitize_html` for a notebook that is not trusted; the toolkit
escapes every model-provided name before it reaches a widget). Every other value (labels,
descriptions, option names, text) is escaped here.

A saved state is data, and may be anyone's: a box that holds itself (or a 2,000-deep
chain of boxes) is drawn once, down to :data:`MAX_DEPTH` levels, and at most
:data:`MAX_VIEWS` widget views per page; a model whose state has the wrong types is a
note in the page, never an exception (:attr:`StaticWidgets.problems` counts each).
"""

from __future__ import annotations

import html
from typing import Any, Callable, Dict, List, Mapping, Optional

from .html_sanitize import sanitize_html

#: A reference to another model inside a widget state.
MODEL_REF = "IPY_MODEL_"
#: Widgets nested deeper than this are not drawn (an app nests about 10 deep).
MAX_DEPTH = 40
#: At most this many widget views are drawn in one page (shared children are drawn each time they are shown).
MAX_VIEWS = 5_000

#: Styles of the static widgets (the page's <head> holds them once).
STATIC_CSS = """
.trtw-sw{font-size:13px;margin:2px 0}
.trtw-sw-hbox{display:flex;flex-flow:row wrap;gap:6px;align-items:flex-start}
.trtw-sw-vbox{display:flex;flex-direction:column;gap:4px}
.trtw-sw-panel{border:1px solid #ddd;border-radius:3px;margin:4px 0;padding:2px 8px}
.trtw-sw-panel>summary{font-weight:bold;cursor:pointer;padding:2px 0}
.trtw-sw-selected{background:#e8f0fe;font-weight:bold}
.trtw-sw-desc{color:#3c4043;margin-right:4px}
.trtw-sw-value{font-family:monospace;background:#f5f5f5;padding:0 4px}
.trtw-sw-options{display:inline-flex;flex-wrap:wrap;gap:2px}
.trtw-sw-options span{border:1px solid #ccc;padding:0 4px}
.trtw-sw-note{color:#5f6368;font-style:italic}
"""


def esc(value: Any) -> str:
    """``str(value)`` escaped for HTML."""
    return html.escape("" if value is None else str(value), quote=True)


def model_id(ref: Any) -> Optional[str]:
    """The model id in ``"IPY_MODEL_<id>"`` (None for anything else)."""
    return ref[len(MODEL_REF):] if isinstance(ref, str) and ref.startswith(MODEL_REF) else None


def _described(sw: "StaticWidgets", state: Mapping[str, Any], body: str) -> str:
    desc = state.get("description") or ""
    if not desc:
        return body
    label = sw.clean(str(desc)) if state.get("description_allow_html") else esc(desc)
    return f"<span class='trtw-sw-desc'>{label}</span>{body}"


def _items(value: Any) -> List[Any]:
    """``value`` as a list when it is one (or a tuple); else nothing (a saved state is anyone's data)."""
    return list(value) if isinstance(value, (list, tuple)) else []


def _selected_labels(state: Mapping[str, Any]) -> List[str]:
    labels = _items(state.get("_options_labels"))
    index = state.get("index")
    chosen = index if isinstance(index, list) else ([] if index is None else [index])
    return [str(labels[i]) for i in chosen if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(labels)]


def _value_text(state: Mapping[str, Any]) -> str:
    value = state.get("value")
    if isinstance(value, list):
        return " – ".join(str(v) for v in value)
    return "" if value is None else str(value)


class StaticWidgets:
    """Writes the HTML of widgets from a notebook's saved widget state.

    Parameters
    ----------
    state : mapping
        Model id -> ``{"model_name", "model_module", "state", "buffers"?}`` (the ``state``
        member of the ``application/vnd.jupyter.widget-state+json`` metadata).
    figure_html : callable
        ``figure_html({"data", "layout", "config"}) -> str``: a Plotly figure's HTML
        (without plotly.js, which the page holds once).
    outputs_html : callable
        ``outputs_html(outputs) -> str``: an Output widget's outputs (nbformat output dicts).
    clean : callable, optional
        ``clean(html) -> str`` for the HTML a widget holds (an HTML widget's value, a description that
        allows HTML); default :func:`~.html_sanitize.sanitize_html` (the page passes its own, which counts
        what it removed, or keeps everything for a notebook it was told to trust).
    """

    def __init__(self, state: Mapping[str, Mapping[str, Any]], figure_html: Callable[[dict], str],
                 outputs_html: Callable[[list], str], clean: Optional[Callable[[str], str]] = None):
        self.state = state if isinstance(state, Mapping) else {}
        self.figure_html = figure_html
        self.outputs_html = outputs_html
        self.clean = clean or sanitize_html
        self.figures = 0
        self.unknown: Dict[str, int] = {}
        #: What could not be drawn as saved: "contains itself", "nested too deep", "too many views", "unreadable".
        self.problems: Dict[str, int] = {}
        self._drawing: List[str] = []  # the models being drawn, outermost first
        self._views = 0

    def render(self, mid: str) -> str:
        """The HTML of the model ``mid`` and everything it holds ('' for a hidden widget)."""
        model = self.state.get(mid)
        if model is None:
            return "<div class='trtw-sw-note'>(a widget whose state was not saved with the notebook)</div>"
        refused = self._refused(mid, model)
        if refused:
            self.problems[refused] = self.problems.get(refused, 0) + 1
            return f"<div class='trtw-sw-note'>({esc(_PROBLEMS[refused])})</div>"
        state = model.get("state") or {}
        if not isinstance(state, Mapping):
            state = {}
        if self._hidden(state):
            return ""
        self._views += 1
        self._drawing.append(mid)
        try:
            return self._draw(model, state)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError):
            self.problems["unreadable"] = self.problems.get("unreadable", 0) + 1
            return f"<div class='trtw-sw-note'>({esc(_PROBLEMS['unreadable'])})</div>"
        finally:
            self._drawing.pop()

    def _refused(self, mid: str, model: Any) -> str:
        """Why the model ``mid`` is not drawn here ('' when it is)."""
        if not isinstance(model, Mapping):
            return "unreadable"
        if mid in self._drawing:
            return "contains itself"
        if len(self._drawing) >= MAX_DEPTH:
            return "nested too deep"
        return "too many views" if self._views >= MAX_VIEWS else ""

    def _draw(self, model: Mapping[str, Any], state: Mapping[str, Any]) -> str:
        writer = RENDERERS.get(str(model.get("model_name", "")))
        if writer is None:
            if "_widget_data" in state:  # plotly's FigureWidget (an anywidget): its data and layout
                writer = _figure
            else:
                name = str(model.get("model_name", "?"))
                self.unknown[name] = self.unknown.get(name, 0) + 1
                return f"<div class='trtw-sw-note'>({esc(name)}: no static view)</div>"
        return f"<div class='trtw-sw'>{writer(self, state, model)}</div>"

    def children(self, state: Mapping[str, Any]) -> List[str]:
        """The HTML of each child of a box, tab or accordion."""
        return [self.render(mid) for mid in (model_id(r) for r in _items(state.get("children"))) if mid]

    def _hidden(self, state: Mapping[str, Any]) -> bool:
        layout_model = self.state.get(model_id(state.get("layout")) or "")
        layout = layout_model.get("state") if isinstance(layout_model, Mapping) else None
        if not isinstance(layout, Mapping):
            return False
        return layout.get("display") == "none" or layout.get("visibility") == "hidden"


#: What a widget that is not drawn shows instead, by :attr:`StaticWidgets.problems`' key.
_PROBLEMS = {"contains itself": "a widget that contains itself: drawn once, above",
             "nested too deep": f"widgets nested more than {MAX_DEPTH} deep: not drawn below this",
             "too many views": f"more than {MAX_VIEWS:,} widget views: not drawn",
             "unreadable": "a widget whose saved state could not be read"}


def _vbox(sw: StaticWidgets, state, model) -> str:
    return "<div class='trtw-sw-vbox'>" + "".join(sw.children(state)) + "</div>"


def _hbox(sw: StaticWidgets, state, model) -> str:
    return "<div class='trtw-sw-hbox'>" + "".join(sw.children(state)) + "</div>"


def _panels(sw: StaticWidgets, state, model) -> str:
    """Tabs and accordions: every panel open, under its title (a page has no clicks to spare)."""
    titles = _items(state.get("titles"))
    selected = state.get("selected_index")
    out = []
    for i, child in enumerate(sw.children(state)):
        title = titles[i] if i < len(titles) and titles[i] else f"part {i + 1}"
        mark = " trtw-sw-selected" if i == selected else ""
        out.append(f"<details class='trtw-sw-panel' open><summary class='{mark.strip()}'>{esc(title)}</summary>"
                   f"{child}</details>")
    return "".join(out)


def _stack(sw: StaticWidgets, state, model) -> str:
    children = sw.children(state)
    index = state.get("selected_index")
    return children[index] if isinstance(index, int) and 0 <= index < len(children) else ""


def _html(sw: StaticWidgets, state, model) -> str:
    return _described(sw, state, sw.clean(str(state.get("value") or "")))


def _label(sw: StaticWidgets, state, model) -> str:
    return _described(sw, state, esc(state.get("value")))


def _text(sw: StaticWidgets, state, model) -> str:
    value = _value_text(state) or state.get("placeholder") or ""
    size = max(8, min(60, len(value)))
    return _described(sw, state, f"<input type='text' disabled value='{esc(value)}' size='{size}'>")


def _password(sw: StaticWidgets, state, model) -> str:
    return _described(sw, state, "<input type='password' disabled value='********'>")  # never the value itself


def _textarea(sw: StaticWidgets, state, model) -> str:
    return _described(sw, state, f"<textarea disabled rows='3' cols='60'>{esc(_value_text(state))}</textarea>")


def _choice(sw: StaticWidgets, state, model) -> str:
    """Dropdowns and selection sliders: the chosen option."""
    return _described(sw, state, f"<span class='trtw-sw-value'>{esc(', '.join(_selected_labels(state)))}</span>")


def _options(sw: StaticWidgets, state, model) -> str:
    """Option lists (toggle buttons, radio buttons, select boxes): every option, the chosen ones marked."""
    chosen = set(_selected_labels(state))
    spans = "".join(f"<span class='{'trtw-sw-selected' if lab in chosen else ''}'>{esc(lab)}</span>"
                    for lab in state.get("_options_labels") or [])
    return _described(sw, state, f"<span class='trtw-sw-options'>{spans}</span>")


def _number(sw: StaticWidgets, state, model) -> str:
    """Sliders and number boxes: the value as read out."""
    return _described(sw, state, f"<span class='trtw-sw-value'>{esc(_value_text(state))}</span>")


def _number_or(value: Any, default: float) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    return float(value) if ok and abs(value) < 1e300 else default


def _progress(sw: StaticWidgets, state, model) -> str:
    lo, hi = _number_or(state.get("min"), 0.0), _number_or(state.get("max"), 100.0)
    value = _number_or(state.get("value"), 0.0)
    return _described(sw, state, f"<progress value='{esc(value - lo)}' max='{esc(hi - lo)}'></progress>")


def _checkbox(sw: StaticWidgets, state, model) -> str:
    checked = " checked" if state.get("value") else ""
    return f"<label><input type='checkbox' disabled{checked}> {esc(state.get('description'))}</label>"


def _button(sw: StaticWidgets, state, model) -> str:
    pressed = " class='trtw-sw-selected'" if state.get("value") is True else ""
    return f"<button disabled{pressed}>{esc(state.get('description') or state.get('tooltip') or 'button')}</button>"


def _output(sw: StaticWidgets, state, model) -> str:
    return sw.outputs_html([o for o in _items(state.get("outputs")) if isinstance(o, Mapping)])


def _image(sw: StaticWidgets, state, model) -> str:
    fmt = str(state.get("format") or "png")
    for buf in _items(model.get("buffers")):
        if isinstance(buf, Mapping) and buf.get("path") == ["value"] and buf.get("encoding", "base64") == "base64":
            data = str(buf.get("data", ""))
            return f"<img alt='{esc(state.get('description'))}' src='data:image/{esc(fmt)};base64,{esc(data)}'>"
    return "<div class='trtw-sw-note'>(an image whose bytes were not saved)</div>"


def _figure(sw: StaticWidgets, state, model) -> str:
    sw.figures += 1
    return sw.figure_html({"data": _items(state.get("_widget_data")), "layout": _mapping(state.get("_widget_layout")),
                           "config": _mapping(state.get("_config"))})


def _mapping(value: Any) -> Dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


#: ipywidgets model name -> writer. Style and layout models are read through the widgets that use them.
RENDERERS: Dict[str, Callable] = {
    "BoxModel": _vbox, "VBoxModel": _vbox, "GridBoxModel": _hbox, "HBoxModel": _hbox,
    "TabModel": _panels, "AccordionModel": _panels, "StackModel": _stack,
    "HTMLModel": _html, "HTMLMathModel": _html, "LabelModel": _label,
    "TextModel": _text, "PasswordModel": _password, "ComboboxModel": _text, "TextareaModel": _textarea,
    "IntTextModel": _text, "FloatTextModel": _text, "BoundedIntTextModel": _text, "BoundedFloatTextModel": _text,
    "DropdownModel": _choice, "SelectionSliderModel": _choice, "SelectionRangeSliderModel": _choice,
    "SelectModel": _options, "SelectMultipleModel": _options, "RadioButtonsModel": _options,
    "ToggleButtonsModel": _options,
    "IntSliderModel": _number, "FloatSliderModel": _number, "FloatLogSliderModel": _number,
    "IntRangeSliderModel": _number, "FloatRangeSliderModel": _number, "ColorPickerModel": _number,
    "DatePickerModel": _number, "PlayModel": _number,
    "IntProgressModel": _progress, "FloatProgressModel": _progress,
    "CheckboxModel": _checkbox, "ToggleButtonModel": _button, "ButtonModel": _button, "ValidModel": _checkbox,
    "OutputModel": _output, "ImageModel": _image,
}
