"""Fuzz shared pages (issue 45): generated notebooks with hostile outputs and widget states.

HTML is generated from the pieces an attacker combines: tags a browser runs or loads from (``script``,
``iframe``, SVG animations, ``base``, ``meta``...), event handlers, URLs whose scheme hides behind case,
entities, tabs and spaces, CSS with ``url()`` and ``@import``, comments and CDATA, quotes, unclosed and
stray tags, nesting. It is put where a notebook carries HTML (outputs of each kind, Markdown cells, HTML
widgets, Output widgets), with widget states whose references loop, nest deep or have the wrong types.
Whatever comes, the page holds nothing active (read by ``hostile_notebooks.active_content``, not by the
sanitizer), and sharing ends without an exception.
"""

from __future__ import annotations

import nbformat
from hypothesis import example, given
from hypothesis import strategies as st

from tests.bad_input.hostile_notebooks import PAYLOADS, RUN, STATE, VIEW, active_content
from trtwidgets.plots.html_sanitize import Removed, sanitize_html
from trtwidgets.plots.share import page_html

from .fuzzing import fuzz_settings, only_user_errors

# nbconvert's highlighting imports IPython, and with it jedi, which raises the recursion limit to 3000 once:
# done here, before Hypothesis runs a case (it warns of a limit changed under it).
page_html(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", execution_count=1)]), "cdn")

_TAGS = ["script", "img", "svg", "a", "iframe", "object", "embed", "style", "div", "p", "math", "mtext", "table",
         "mglyph", "textarea", "title", "noscript", "form", "button", "input", "details", "animate", "set", "base",
         "meta", "link", "foreignObject", "use", "image", "template", "xmp", "select", "option", "b", "span"]
_ATTRS = ["onerror", "onload", "onclick", "ontoggle", "onbegin", "onfocus", "OnMouseOver", "href", "src",
          "xlink:href", "style", "srcdoc", "action", "formaction", "data", "http-equiv", "content", "id", "class",
          "autofocus", "open", "attributeName", "to", "values", "fill"]
_SCHEMES = ["javascript:", "JaVaScRiPt:", "java\tscript:", " javascript:", "&#106;avascript:", "jav&#x09;ascript:",
            "vbscript:", "data:text/html,", "data:image/svg+xml,", "https://example.invalid/", "#x", "", "livescript:"]
_CSS = ["color:red", "background:url(http://example.invalid/t.png)", "@import 'x.css'", "width:expression(alert(1))",
        "b{color:red}", "u\\72l(x)", "fill:url(#a)", "</style><script>" + RUN + "</script>"]
_TEXT = ["<", ">", "&", "\"", "'", "<!--", "-->", "<![CDATA[", "]]>", "</", "/>", RUN, "&lt;script&gt;", "\x00"]


@st.composite
def attribute(draw):
    name = draw(st.sampled_from(_ATTRS))
    value = draw(st.one_of(st.sampled_from(_SCHEMES).map(lambda s: s + RUN), st.sampled_from(_CSS),
                           st.just(RUN), st.text(max_size=8)))
    quote = draw(st.sampled_from(['"', "'", ""]))
    if not quote:
        value = value.replace(" ", "").replace(">", "")
    return f" {name}={quote}{value}{quote}" if draw(st.booleans()) else f" {name}"


@st.composite
def fragment(draw, depth=0):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("tag", "text", "payload", "close") if depth < 3 else ("text", "payload")))
        if kind == "tag":
            tag = draw(st.sampled_from(_TAGS))
            attrs = "".join(draw(st.lists(attribute(), max_size=3)))
            inner = draw(fragment(depth + 1))
            end = draw(st.sampled_from((f"</{tag}>", "", f"</{tag.upper()}>")))
            parts.append(f"<{tag}{attrs}>{inner}{end}" if draw(st.booleans()) else f"<{tag}{attrs}/>")
        elif kind == "text":
            parts.append(draw(st.sampled_from(_TEXT)) + draw(st.text(max_size=6)))
        elif kind == "payload":
            parts.append(draw(st.sampled_from(sorted(PAYLOADS.values()))))
        else:
            parts.append(f"</{draw(st.sampled_from(_TAGS))}>")
    return "".join(parts)


def _inert(text: str) -> None:
    found = active_content(f"<html><body>{text}</body></html>")
    assert found == [], (found, text[:300])


@fuzz_settings(1500)
@given(html=fragment())
@example(html="<svg><style><img src=x onerror=" + RUN + "></style></svg>")
@example(html="<math><mtext><table><mglyph><style><img src=x onerror=" + RUN + ">")
@example(html="<a href='&#x6A;avascript:" + RUN + "'>x</a>")
def test_sanitized_html_holds_nothing_that_runs(html):
    removed = Removed()
    clean = sanitize_html(html, removed)
    _inert(clean)
    assert sanitize_html(clean) == clean, "sanitizing twice changes the result"


def _model(name, **state):
    return {"model_name": name, "model_module": "@jupyter-widgets/controls", "model_module_version": "*",
            "state": state}


@st.composite
def widget_state(draw):
    """A few models whose children refer anywhere (themselves, each other, nothing), some with wrong types."""
    n = draw(st.integers(1, 6))
    ids = [f"m{i}" for i in range(n)]
    state = {}
    for mid in ids:
        kind = draw(st.sampled_from(("VBoxModel", "HBoxModel", "TabModel", "HTMLModel", "OutputModel",
                                     "IntProgressModel", "DropdownModel", "StackModel")))
        refs = [f"IPY_MODEL_{draw(st.sampled_from(ids + ['gone']))}" for _ in range(draw(st.integers(0, 3)))]
        state[mid] = _model(kind, children=draw(st.sampled_from((refs, refs, 5, "IPY_MODEL_m0", None))),
                            value=draw(fragment()), description=draw(fragment()),
                            description_allow_html=draw(st.booleans()), titles=draw(st.sampled_from(([], "x", [1]))),
                            selected_index=draw(st.sampled_from((0, "0", None, 99))),
                            outputs=[{"output_type": "display_data", "metadata": {},
                                      "data": {draw(st.sampled_from(("text/html", "image/svg+xml", "text/markdown",
                                                                     "application/javascript"))): draw(fragment())}}],
                            min=draw(st.sampled_from((0, "a", None))), _options_labels=draw(st.sampled_from((
                                ["a"], "ab", None))), index=draw(st.sampled_from((0, True, "x", 5))))
    return state


@st.composite
def notebook(draw):
    out = nbformat.v4.new_output
    outputs = []
    for _ in range(draw(st.integers(1, 4))):
        mime = draw(st.sampled_from(("text/html", "image/svg+xml", "text/markdown", "application/javascript",
                                     "text/vnd.mermaid", "text/latex", VIEW)))
        if mime == VIEW:
            data = {VIEW: {"model_id": draw(st.sampled_from(("m0", "m1", "gone"))), "version_major": 2,
                           "version_minor": 0}}
        else:
            data = {mime: draw(fragment())}
        outputs.append(out("display_data", data=data))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(draw(fragment())),
                nbformat.v4.new_code_cell("x", execution_count=1, outputs=outputs)]
    nb.metadata["widgets"] = {STATE: {"version_major": 2, "version_minor": 0, "state": draw(widget_state())}}
    nbformat.validate(nb)
    return nb


@fuzz_settings(120)
@given(nb=notebook())
def test_a_generated_hostile_notebook_shares_with_nothing_that_runs(nb):
    result = only_user_errors(page_html, nb, "cdn")
    assert not isinstance(result, Exception), result
    page, _ = result
    body = page.split("<body", 1)[1]
    found = active_content("<html><body" + body)
    assert found == [], found
