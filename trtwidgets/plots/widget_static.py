"""A widget's saved state drawn as plain HTML: what a reader sees without a kernel or a network.

An executed notebook keeps each widget's last state (the ``widget-state+json`` metadata
nbclient and JupyterLab write). A page that loads a widget manager from a CDN draws
nothing offline; this module draws the state itself: boxes and tabs as nested blocks
(every tab open, each under its title), text and HTML as they were, controls as
disabled controls showing their value, Output widgets' outputs, and Plotly
``FigureWidget`` s as figures from their saved data and layout. The rule table
(:data:`RENDERERS`, model name -> writer) is apart from the walk (:class:`StaticWidgets`).

HTML widgets' values are written as they are, as nbconvert writes a ``text/html``
output: the toolkit escapes every model-provided name before it reaches a widget.
Every other value (labels, descriptions, option names, text) is escaped here.
"""

from __future__ import annotations

import html
from typing import Any, Callable, Dict, List, Mapping, Optional

#: A reference to another model inside a widget state.
MODEL_REF = "IPY_MODEL_"

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


def _described(state: Mapping[str, Any], body: str) -> str:
    desc = state.get("description") or ""
    if not desc:
        return body
    label = desc if state.get("description_allow_html") else esc(desc)
    return f"<span class='trtw-sw-desc'>{label}</span>{body}"


def _selected_labels(state: Mapping[str, Any]) -> List[str]:
    labels = list(state.get("_options_labels") or [])
    index = state.get("index")
    chosen = index if isinstance(index, list) else ([] if index is None else [index])
    return [labels[i] for i in chosen if isinstance(i, int) and 0 <= i < len(labels)]


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
    """

    def __init__(self, state: Mapping[str, Mapping[str, Any]], figure_html: Callable[[dict], str],
                 outputs_html: Callable[[list], str]):
        self.state = state
        self.figure_html = figure_html
        self.outputs_html = outputs_html
        self.figures = 0
        self.unknown: Dict[str, int] = {}

    def render(self, mid: str) -> str:
        """The HTML of the model ``mid`` and everything it holds ('' for a hidden widget)."""
        model = self.state.get(mid)
        if model is None:
            return "<div class='trtw-sw-note'>(a widget whose state was not saved with the notebook)</div>"
        state = model.get("state") or {}
        if self._hidden(state):
            return ""
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
        return [self.render(mid) for mid in (model_id(r) for r in state.get("children") or []) if mid]

    def _hidden(self, state: Mapping[str, Any]) -> bool:
        layout = self.state.get(model_id(state.get("layout")) or "", {}).get("state") or {}
        return layout.get("display") == "none" or layout.get("visibility") == "hidden"


def _vbox(sw: StaticWidgets, state, model) -> str:
    return "<div class='trtw-sw-vbox'>" + "".join(sw.children(state)) + "</div>"


def _hbox(sw: StaticWidgets, state, model) -> str:
    return "<div class='trtw-sw-hbox'>" + "".join(sw.children(state)) + "</div>"


def _panels(sw: StaticWidgets, state, model) -> str:
    """Tabs and accordions: every panel open, under its title (a page has no clicks to spare)."""
    titles = list(state.get("titles") or [])
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
    return _described(state, str(state.get("value") or ""))


def _label(sw: StaticWidgets, state, model) -> str:
    return _described(state, esc(state.get("value")))


def _text(sw: StaticWidgets, state, model) -> str:
    value = _value_text(state) or state.get("placeholder") or ""
    return _described(state, f"<input type='text' disabled value='{esc(value)}' size='{max(8, min(60, len(value)))}'>")


def _password(sw: StaticWidgets, state, model) -> str:
    return _described(state, "<input type='password' disabled value='********'>")  # never the value itself


def _textarea(sw: StaticWidgets, state, model) -> str:
    return _described(state, f"<textarea disabled rows='3' cols='60'>{esc(_value_text(state))}</textarea>")


def _choice(sw: StaticWidgets, state, model) -> str:
    """Dropdowns and selection sliders: the chosen option."""
    return _described(state, f"<span class='trtw-sw-value'>{esc(', '.join(_selected_labels(state)))}</span>")


def _options(sw: StaticWidgets, state, model) -> str:
    """Option lists (toggle buttons, radio buttons, select boxes): every option, the chosen ones marked."""
    chosen = set(_selected_labels(state))
    spans = "".join(f"<span class='{'trtw-sw-selected' if lab in chosen else ''}'>{esc(lab)}</span>"
                    for lab in state.get("_options_labels") or [])
    return _described(state, f"<span class='trtw-sw-options'>{spans}</span>")


def _number(sw: StaticWidgets, state, model) -> str:
    """Sliders and number boxes: the value as read out."""
    return _described(state, f"<span class='trtw-sw-value'>{esc(_value_text(state))}</span>")


def _progress(sw: StaticWidgets, state, model) -> str:
    lo, hi, value = state.get("min", 0) or 0, state.get("max", 100) or 100, state.get("value", 0) or 0
    return _described(state, f"<progress value='{esc(value - lo)}' max='{esc(hi - lo)}'></progress>")


def _checkbox(sw: StaticWidgets, state, model) -> str:
    checked = " checked" if state.get("value") else ""
    return f"<label><input type='checkbox' disabled{checked}> {esc(state.get('description'))}</label>"


def _button(sw: StaticWidgets, state, model) -> str:
    pressed = " class='trtw-sw-selected'" if state.get("value") is True else ""
    return f"<button disabled{pressed}>{esc(state.get('description') or state.get('tooltip') or 'button')}</button>"


def _output(sw: StaticWidgets, state, model) -> str:
    return sw.outputs_html(list(state.get("outputs") or []))


def _image(sw: StaticWidgets, state, model) -> str:
    fmt = str(state.get("format") or "png")
    for buf in model.get("buffers") or []:
        if buf.get("path") == ["value"] and buf.get("encoding", "base64") == "base64":
            data = str(buf.get("data", ""))
            return f"<img alt='{esc(state.get('description'))}' src='data:image/{esc(fmt)};base64,{esc(data)}'>"
    return "<div class='trtw-sw-note'>(an image whose bytes were not saved)</div>"


def _figure(sw: StaticWidgets, state, model) -> str:
    sw.figures += 1
    return sw.figure_html({"data": state.get("_widget_data") or [], "layout": state.get("_widget_layout") or {},
                           "config": state.get("_config") or {}})


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
