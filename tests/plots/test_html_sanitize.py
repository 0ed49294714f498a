"""The shared page's sanitizer (issue 45): what can run goes, what the toolkit and Jupyter write stays.

Each hostile row is HTML that runs code (or loads from the network) in a browser, as a colleague's notebook
could carry it; the judge of what is left (``tests/bad_input/hostile_notebooks.active_content``) reads the
result on its own. The rows that must stay are HTML the toolkit itself writes (tables, banners, MathML,
styles) and what pandas and nbconvert write: a sanitizer that mangles them would blank the shared pages.
"""

from __future__ import annotations

import pytest

from tests.bad_input.hostile_notebooks import PAYLOADS, active_content
from trtwidgets.plots.html_sanitize import Removed, css_problem, sanitize_html, url_problem


#: Payloads whose active part html.parser reads as a comment (dropped whole: nothing of it to count).
_SILENT = {"unclosed-textarea", "comment-breakout"}


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_every_payload_is_made_inert_and_counted(name):
    removed = Removed()
    clean = sanitize_html(PAYLOADS[name], removed)
    assert active_content(f"<html><body>{clean}</body></html>") == [], clean
    assert _open_at_end(clean) == [], f"the fragment would swallow what follows it: {clean}"
    assert bool(removed) == (name not in _SILENT), f"{name}: {removed.describe()!r}"
    assert sanitize_html(clean) == clean


def _open_at_end(text: str):
    """The elements ``text`` leaves open (a browser would put what follows inside them)."""
    from html.parser import HTMLParser

    void = {"br", "col", "hr", "img", "input", "wbr"}
    stack = []

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag not in void:
                stack.append(tag)

        def handle_endtag(self, tag):
            if stack and stack[-1] == tag:
                stack.pop()

    Reader().feed(text)
    return stack


@pytest.mark.parametrize("dirty, clean, said", [
    ("<script>alert(1)</script><b>ok</b>", "<b>ok</b>", "<script> element x1"),
    ("<img src=x onerror=alert(1)>", '<img src="x">', "onerror handler x1"),
    ("<a href=' JaVaScRiPt:alert(1)'>x</a>", "<a>x</a>", "javascript: link or source x1"),
    ("<a href='https://example.org/?a=1&b=2'>x</a>", '<a href="https://example.org/?a=1&amp;b=2">x</a>', ""),
    ("<a href='#section'>x</a><a href='notes.html'>y</a>", '<a href="#section">x</a><a href="notes.html">y</a>', ""),
    ("<img src='data:image/png;base64,iVBO'>", '<img src="data:image/png;base64,iVBO">', ""),
    ("<img src='data:text/html;base64,PHNjcmlwdD4='>", "<img>", "data: (not an image) link or source x1"),
    ("<svg><use xlink:href='#m0'/><use href='https://example.org/x.svg#a'/></svg>",
     '<svg><use xlink:href="#m0"></use><use></use></svg>', "outside reference link or source x1"),
    ("<svg><path clip-path='url(#p1)' d='M0 0L1 1'/></svg>",
     '<svg><path clip-path="url(#p1)" d="M0 0L1 1"></path></svg>', ""),
    ("<p style='color:red;background:url(https://t.example/p.png)'>x</p>", "<p>x</p>", "CSS using url() x1"),
    ("<b>a &lt;b&gt; &amp; c</b>", "<b>a &lt;b&gt; &amp; c</b>", ""),
    ("<div><span>open", "<div><span>open</span></div>", ""),
    ("</div></span>stray ends", "stray ends", ""),
    ("<!-- a comment <script>alert(1)</script> -->text", "text", ""),
    ("<blink>old</blink><marquee>moving</marquee>", "oldmoving", ""),
    ("<div id='trtw-figure-1' class='x'>z</div>", '<div class="x">z</div>', ""),
    ("<a href=x href=javascript:alert(1)>q</a>", '<a href="x">q</a>', ""),
])
def test_rows_of_html_and_what_is_left(dirty, clean, said):
    removed = Removed()
    assert sanitize_html(dirty, removed) == clean
    assert removed.describe() == said


def test_what_the_toolkit_pandas_and_jupyter_write_stays_as_it_is():
    import pandas as pd

    from trtwidgets.core.engine.layer_table import _HTML_STYLE
    from trtwidgets.plots.tex_html import markdown_math, tex_to_mathml
    from trtwidgets.widgets.app_tabs import TAB_CSS, banner

    own = [_HTML_STYLE, TAB_CSS, banner("warning", "<b>careful</b>"),
           tex_to_mathml(r"\frac{a}{\sqrt{b}}", display=True),
           markdown_math("a scale $s = \\text{amax}/127$"),
           "<details class='trtw-sw-panel' open><summary class='trtw-sw-selected'>1 Load</summary>x</details>",
           "<svg viewBox='0 0 10 10' xmlns='http://www.w3.org/2000/svg'><g transform='translate(1,2) rotate(45)'>"
           "<rect x='1' y='1' width='3' height='3' fill='rgb(1,2,3)' stroke-dasharray='1 2'/></g></svg>"]
    frame = pd.DataFrame({"layer": ["conv<1>"], "precision": ["INT8"]})
    own += [frame.to_html(), frame.style.map(lambda v: "background-color: #e8f0fe").to_html()]
    for text in own:
        removed = Removed()
        clean = sanitize_html(text, removed)
        assert not removed, (text[:80], removed.describe())
        assert sanitize_html(clean) == clean, "sanitizing twice changes nothing"
        assert _tags(clean) == _tags(text), text[:80]


def _tags(text: str):
    import re

    return sorted(t.lower() for t in re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", text))


@pytest.mark.parametrize("value, kind, problem", [
    ("javascript:x", "link", "javascript:"), ("java\nscript:x", "link", "javascript:"),
    ("\x01javascript:x", "link", "javascript:"), ("vbscript:x", "link", "vbscript:"), ("https://a", "link", None),
    ("mailto:a@b", "link", None), ("mailto:a@b", "image", "mailto:"), ("data:image/svg+xml,<svg/>", "image", None),
    ("data:text/html,x", "image", "data: (not an image)"), ("#id", "local", None), ("x.svg#id", "local",
                                                                                       "outside reference"),
    ("relative/page.html", "link", None), ("file:///etc/passwd", "link", "file:"),
])
def test_urls(value, kind, problem):
    assert url_problem(value, kind) == problem


@pytest.mark.parametrize("css, problem", [
    (".a{color:red}", None), ("@media (max-width: 600px){.a{color:rgb(1,2,3)}}", None),
    (".a:not(.b):nth-child(2){transform:translate(1px,2px)}", None), ("fill:url(#grad)", None),
    ("@import 'x.css'", "@import"), ("background:url(x.png)", "url()"), ("background:URL( x.png )", "url()"),
    ("background:u\\72l(x.png)", "an escape or markup"), ("width:expression(alert(1))", "expression()"),
    ("background-image:image-set('x.png' 1x)", "image-set()"), ("@font-face{src:local(x)}", "@font-face"),
    ("a{}</style><script>", "an escape or markup"),
])
def test_css(css, problem):
    assert css_problem(css) == problem


def test_deep_nesting_and_long_input_end_in_time_with_every_element_closed():
    import time

    started = time.monotonic()
    clean = sanitize_html("<div>" * 100_000 + "x")
    assert time.monotonic() - started < 20
    assert clean.count("<div>") == clean.count("</div>") and "x" in clean
