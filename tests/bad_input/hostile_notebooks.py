"""Executed notebooks as a hostile colleague would hand them over (issue 45), and a judge of shared pages.

Every payload tries to run ``window.__pwned = (window.__pwned || 0) + 1`` in the reader's browser, each in
another place a notebook can carry HTML: outputs (``text/html``, SVG, ``application/javascript``, Markdown,
Mermaid, an image's metadata), Markdown cells, HTML widgets' values and descriptions, Output widgets. The
widget state holds boxes that hold themselves, a cycle, a 2,000-deep chain and references that multiply.
:func:`active_content` lists what of a page could run, by its own reading of the HTML (not the sanitizer's).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Dict, List

import nbformat

VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
PLOTLY = "application/vnd.plotly.v1+json"
RUN = "window.__pwned=(window.__pwned||0)+1"

#: Name -> HTML that runs :data:`RUN` when shown (or, for links, when clicked).
PAYLOADS: Dict[str, str] = {
    "script": f"<script>{RUN}</script>",
    "img-onerror": f"<img src=x onerror=\"{RUN}\">",
    "svg-onload": f"<svg onload=\"{RUN}\"><circle r=3></circle></svg>",
    "javascript-link": f"<a class=hostile href=\"javascript:{RUN}\">a link</a>",
    "javascript-link-tab": f"<a class=hostile href=\"java\tscript:{RUN}\">another</a>",
    "javascript-link-entity": f"<a class=hostile href=\"&#106;avascript:{RUN}\">a third</a>",
    "details-ontoggle": f"<details open ontoggle=\"{RUN}\"><summary>s</summary></details>",
    "autofocus": f"<input autofocus onfocus=\"{RUN}\">",
    "iframe-srcdoc": "<iframe srcdoc=\"<script>parent.__pwned=(parent.__pwned||0)+1</script>\"></iframe>",
    "object-data": f"<object data=\"javascript:{RUN}\"></object>",
    "svg-animate": f"<svg><animate onbegin=\"{RUN}\" attributeName=x dur=1s></animate></svg>",
    "svg-set-handler": "<svg><rect width=9 height=9><set attributeName=onmouseover to=\"alert(1)\"/></rect></svg>",
    "svg-a-javascript": f"<svg><a href=\"javascript:{RUN}\"><text y=10 class=hostile>t</text></a></svg>",
    "mxss-math-style": f"<math><mtext><table><mglyph><style><img src=x onerror=\"{RUN}\"></style></mglyph>"
                       "</table></mtext></math>",
    "svg-style-breakout": f"<svg><style><img src=x onerror=\"{RUN}\"></style></svg>",
    "style-self-closed": f"<style/><img src=x onerror=\"{RUN}\"></style>",
    "comment-breakout": f"<!--><img src=x onerror=\"{RUN}\">-->",
    "meta-refresh": f"<meta http-equiv=refresh content=\"0;url=javascript:{RUN}\">",
    "base-href": "<base href=\"javascript:/\">",
    "form-action": f"<form action=\"javascript:{RUN}\"><button class=hostile>go</button></form>",
    "css-import": "<style>@import url(http://example.invalid/x.css);</style>",
    "css-url": "<div style=\"background:url(http://example.invalid/track.png)\">styled</div>",
    "unclosed-textarea": "<textarea>everything after me would be text",
}


def _model(name, module="@jupyter-widgets/controls", **state):
    return {"model_name": name, "model_module": module, "model_module_version": "*", "state": state}


def _view(model_id: str):
    return nbformat.v4.new_output("display_data", data={VIEW: {"model_id": model_id, "version_major": 2,
                                                              "version_minor": 0}, "text/plain": "a widget"})


def hostile_widget_state(chain: int = 2000) -> Dict[str, dict]:
    """Widgets whose HTML is payloads, a box that holds itself, a cycle of two, a chain and a doubling tree."""
    html = "".join(PAYLOADS.values())
    outputs = [{"output_type": "display_data", "metadata": {}, "data": {"text/html": html}},
               {"output_type": "display_data", "metadata": {},
                "data": {"image/svg+xml": PAYLOADS["svg-onload"] + PAYLOADS["svg-animate"]}},
               {"output_type": "display_data", "metadata": {}, "data": {"application/javascript": RUN}},
               {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": html}}]
    state = {
        "root": _model("VBoxModel", children=["IPY_MODEL_html", "IPY_MODEL_drop", "IPY_MODEL_out"]),
        "html": _model("HTMLModel", value=html, description=PAYLOADS["img-onerror"], description_allow_html=True),
        "drop": _model("DropdownModel", description=PAYLOADS["script"], _options_labels=[PAYLOADS["script"]],
                       index=0),
        "out": _model("OutputModel", "@jupyter-widgets/output", outputs=outputs),
        "self": _model("VBoxModel", children=["IPY_MODEL_self"]),
        "ping": _model("HBoxModel", children=["IPY_MODEL_pong"]),
        "pong": _model("VBoxModel", children=["IPY_MODEL_ping"]),
        "wrong_types": _model("TabModel", children=5, titles="not a list", selected_index="x"),
        "progress": _model("IntProgressModel", value="ten", min=None, max=[1]),
    }
    for i in range(chain):
        state[f"chain{i}"] = _model("VBoxModel", children=[f"IPY_MODEL_chain{i + 1}"])
    state[f"chain{chain}"] = _model("LabelModel", value="the end of the chain")
    for i in range(30):  # each level shows the next twice: 2**30 views if nothing stops it
        state[f"tree{i}"] = _model("HBoxModel", children=[f"IPY_MODEL_tree{i + 1}"] * 2)
    state["tree30"] = _model("LabelModel", value="a leaf")
    return state


def hostile_notebook(figure: bool = True) -> "nbformat.NotebookNode":
    """An executed notebook whose every output, Markdown cell and widget carries :data:`PAYLOADS`."""
    out = nbformat.v4.new_output
    html = "".join(PAYLOADS.values())
    outputs = [out("display_data", data={"text/html": html, "text/plain": "html"}),
               out("display_data", data={"application/javascript": RUN, "text/plain": "javascript"}),
               out("display_data", data={"image/svg+xml": PAYLOADS["svg-onload"] + PAYLOADS["svg-a-javascript"]}),
               out("display_data", data={"text/markdown": f"**bold** {html} [md](javascript:{RUN})"}),
               out("display_data", data={"text/vnd.mermaid": PAYLOADS["img-onerror"]}),
               out("display_data", data={"image/png": "AAAA"}, metadata={"image/png": {
                   "width": f"1 onerror={RUN}"}, "filenames": {"image/png": "http://example.invalid/x.png"}})]
    outputs += [_view(m) for m in ("root", "self", "ping", "chain0", "tree0", "wrong_types", "progress")]
    if figure:
        outputs.append(out("display_data", data={PLOTLY: {"data": [{"type": "bar", "y": [1, 2, 3],
                                                                     "name": "</script><script>" + RUN}],
                                                           "layout": {"title": {"text": "still drawn"}}}}))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# A notebook\n\n{html}\n\n[a link](javascript:{RUN})"),
                nbformat.v4.new_code_cell("show()", execution_count=1, outputs=outputs)]
    nb.metadata["widgets"] = {STATE: {"version_major": 2, "version_minor": 0, "state": hostile_widget_state()}}
    return nb


_FIGURE_SCRIPT = re.compile(r'^\s*window\.PLOTLYENV=window\.PLOTLYENV \|\| \{\};\s*if \(document\.getElementById\('
                            r'"trtw-figure-\d+"\)\) \{\s*Plotly\.newPlot\(\s*"trtw-figure-\d+",')
_URL_ATTRS = ("href", "src", "action", "formaction", "data", "xlink:href", "srcdoc", "content")


class _Judge(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: List[str] = []
        self.body = False
        self.script = None
        self.style = False

    def handle_starttag(self, tag, attrs):
        self.body = self.body or tag == "body"
        if tag == "script":
            self.script = []
        self.style = tag == "style" or self.style
        if tag in ("iframe", "object", "embed", "frame", "base", "form", "foreignobject", "animate", "set"):
            self.found.append(f"<{tag}>")
        if tag == "meta" and any(k == "http-equiv" for k, _ in attrs):
            self.found.append("<meta http-equiv>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"{tag} {name}")
            if name in _URL_ATTRS and value and re.sub(r"[\x00-\x20]", "", value).lower().startswith(
                    ("javascript:", "vbscript:", "data:text")):
                self.found.append(f"{tag} {name}={value[:30]}")
            if name == "style" and value and "url(" in value.lower():
                self.found.append(f"{tag} style url()")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag == "script":
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        self.style = self.style and tag != "style"
        if tag == "script" and self.script is not None:
            text, self.script = "".join(self.script), None
            # The page's own scripts: the template's (head), plotly.js (head), each figure's drawing script.
            if self.body and not _FIGURE_SCRIPT.match(text):
                self.found.append(f"<script> {text.strip()[:40]!r}")

    def handle_data(self, data):
        if self.script is not None:
            self.script.append(data)
        elif self.style and self.body and ("@import" in data or re.search(r"url\(\s*['\"]?[a-z]+:", data, re.I)):
            self.found.append(f"css {data.strip()[:40]!r}")


def active_content(page: str) -> List[str]:
    """What in the HTML ``page`` could run or load something: scripts in the body that are not a figure's,
    event handlers, javascript: URLs, frames, objects, forms, refreshes, CSS that loads from the network."""
    judge = _Judge()
    judge.feed(page)
    judge.close()
    return judge.found
