"""A notebook's HTML made inert for a shared page: an allow-list of tags, attributes and URL schemes.

Jupyter does not run the JavaScript of a notebook it does not trust: its outputs are sanitized before they
are shown. A page made of someone else's notebook and opened by a colleague is the same situation, so
:func:`sanitize_html` rewrites each piece of the notebook's HTML (outputs, SVG images, rendered Markdown,
HTML widgets' values) before it goes into the page. It works on structure, not on patterns in the text:

- the text is parsed with :class:`html.parser.HTMLParser` into tags, attributes and text, and written out
  again from those parts: every text escaped, every attribute value quoted and escaped, every element the
  fragment opens closed at its end (an unclosed ``<textarea>`` or ``<a>`` cannot swallow what follows);
- only tags of an allow-list (:data:`HTML_TAGS`, :data:`SVG_TAGS`, :data:`MATH_TAGS`) are kept; scripts,
  frames, objects, forms, ``<base>``, ``<meta>``, ``<link>``, SVG animations and ``<foreignObject>`` are removed
  with what they hold (:data:`ACTIVE_TAGS`); other unknown tags are dropped and their text kept;
- only attributes of an allow-list are kept: every ``on*`` event handler goes, and a URL (``href``, ``src``)
  must use a scheme of :data:`URL_SCHEMES` (``javascript:``, ``vbscript:``, ``data:text/html`` ... go; an
  image may be ``data:image/...``); SVG references must be local (``#id``);
- CSS (``<style>`` and ``style=``) is kept only when it calls no function outside :data:`CSS_FUNCTIONS`, uses
  no at-rule outside :data:`CSS_AT_RULES`, no ``url()`` but ``url(#id)``, and no escape: it cannot load a
  file, reach the network or run an expression;
- comments, processing instructions and declarations go.

What was removed is counted (:class:`Removed`), so the page can say so. The page's own scripts (plotly.js,
each figure's drawing script) are written by the toolkit around the sanitized pieces, never through here.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from html.parser import HTMLParser
from typing import Dict, FrozenSet, List, Optional, Tuple

__all__ = ["ACTIVE_TAGS", "CSS_AT_RULES", "CSS_FUNCTIONS", "HTML_TAGS", "MATH_TAGS", "Removed", "SVG_TAGS",
           "URL_SCHEMES", "css_problem", "sanitize_html", "url_problem"]

HTML_TAGS: FrozenSet[str] = frozenset("""
a abbr acronym address article aside b bdi bdo big blockquote br button caption center cite code col colgroup
data dd del details dfn div dl dt em fieldset figcaption figure font footer h1 h2 h3 h4 h5 h6 header hr i img
input ins kbd label legend li main mark meter nav ol optgroup option output p pre progress q rp rt ruby s samp
section select small span strike strong style sub summary sup table tbody td textarea tfoot th thead time tr tt
u ul var wbr
""".split())
#: SVG as html.parser writes it (lower case; a browser's HTML parser gives the SVG names their case back).
SVG_TAGS: FrozenSet[str] = frozenset("""
svg g defs desc title symbol use path rect circle ellipse line polyline polygon text tspan textpath
lineargradient radialgradient stop clippath mask pattern marker filter switch metadata
feblend fecolormatrix fecomponenttransfer fecomposite feconvolvematrix fediffuselighting fedisplacementmap
fedistantlight fedropshadow feflood fefunca fefuncb fefuncg fefuncr fegaussianblur femerge femergenode
femorphology feoffset fepointlight fespecularlighting fespotlight fetile feturbulence
""".split())
MATH_TAGS: FrozenSet[str] = frozenset("""
math mi mn mo ms mtext mspace mrow mfrac msqrt mroot msub msup msubsup munder mover munderover mtable mtr mtd
mlabeledtr mstyle mpadded mphantom menclose merror mmultiscripts mprescripts none semantics annotation
maligngroup malignmark
""".split())
#: Elements that run code, load a document or change the page: removed with all they hold, and counted.
ACTIVE_TAGS: FrozenSet[str] = frozenset("""
script iframe frame frameset object embed applet form base meta link foreignobject animate set animatemotion
animatetransform animatecolor handler listener portal isindex image
""".split())
#: Elements whose content is no text of the page (removed with it, not counted: nothing in them runs).
_HIDDEN_TAGS = frozenset("noscript noembed noframes template head".split())
_VOID = frozenset("br col hr img input wbr area source track".split())
#: Removed elements without an end tag of their own: nothing after them is skipped.
_NO_END = frozenset("base meta link embed frame isindex image".split()) | _VOID
#: Start tag -> the open elements it ends (HTML's implied end tags, for the usual unclosed markup).
_IMPLIED_END = {"p": ("p",), "li": ("li",), "dt": ("dt", "dd"), "dd": ("dt", "dd"), "tr": ("tr", "td", "th"),
                "td": ("td", "th"), "th": ("td", "th"), "option": ("option",)}

_GLOBAL_ATTRS = frozenset("""
id class title lang dir role hidden tabindex align valign width height border bgcolor color face size
""".split())
_HTML_ATTRS: Dict[str, FrozenSet[str]] = {k: frozenset(v.split()) for k, v in {
    "a": "href", "img": "src alt", "q": "cite", "blockquote": "cite", "del": "cite datetime", "ins": "cite datetime",
    "ol": "start reversed type", "li": "value type", "ul": "type",
    "table": "cellpadding cellspacing summary frame rules",
    "td": "colspan rowspan headers scope abbr nowrap", "th": "colspan rowspan headers scope abbr nowrap",
    "col": "span", "colgroup": "span", "details": "open", "time": "datetime", "data": "value",
    "input": "type value checked disabled readonly placeholder min max step", "button": "type disabled value",
    "select": "disabled multiple", "option": "value selected disabled label", "optgroup": "label disabled",
    "textarea": "rows cols disabled readonly placeholder wrap", "label": "for", "progress": "value max",
    "meter": "value min max low high optimum", "output": "for", "fieldset": "disabled",
}.items()}
_SVG_ATTRS = frozenset("""
href xlink:href xmlns xmlns:xlink version baseprofile viewbox preserveaspectratio x y x1 y1 x2 y2 cx cy r rx ry
fx fy d points transform fill fill-opacity fill-rule stroke stroke-width stroke-linecap stroke-linejoin
stroke-dasharray stroke-dashoffset stroke-opacity stroke-miterlimit opacity font-family font-size font-weight
font-style font-variant text-anchor dominant-baseline alignment-baseline baseline-shift dx dy rotate textlength
lengthadjust offset stop-color stop-opacity gradientunits gradienttransform spreadmethod clip-path clip-rule
clippathunits mask maskunits maskcontentunits patternunits patterncontentunits patterntransform markerwidth
markerheight refx refy orient markerunits marker-start marker-mid marker-end visibility display overflow
vector-effect paint-order shape-rendering text-rendering image-rendering color-interpolation
color-interpolation-filters filter filterunits primitiveunits flood-color flood-opacity lighting-color
stddeviation in in2 result operator k1 k2 k3 k4 mode values type tablevalues slope intercept amplitude exponent
kernelmatrix order divisor bias targetx targety edgemode radius basefrequency numoctaves seed stitchtiles
scale xchannelselector ychannelselector azimuth elevation surfacescale diffuseconstant specularconstant
specularexponent pointsatx pointsaty pointsatz limitingconeangle z xml:space letter-spacing word-spacing
text-decoration writing-mode pathlength startoffset method spacing side requiredfeatures systemlanguage
""".split())
_MATH_ATTRS = frozenset("""
display mathvariant mathsize mathcolor mathbackground stretchy fence separator lspace rspace minsize maxsize
largeop movablelimits accent accentunder linethickness columnalign rowalign columnspacing rowspacing
columnlines rowlines frame displaystyle scriptlevel notation encoding depth voffset xmlns open close
separators form symmetric bevelled numalign denomalign columnspan rowspan
""".split())
#: Attribute -> what its URL may be (:func:`url_problem`); SVG references (``href`` of a ``<use>``...) are "local".
_URL_ATTRS = {"href": "link", "src": "image", "cite": "link", "xlink:href": "link"}

#: URL schemes kept, by what the URL does.
URL_SCHEMES = {"link": ("http", "https", "mailto"), "image": ("http", "https", "data"), "local": ()}
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|jpg|gif|webp|bmp|svg\+xml)[;,]", re.IGNORECASE)
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
# Browsers drop ASCII tab and newline anywhere in a URL and control characters and spaces at its ends.
_URL_NOISE = re.compile(r"[\x00-\x20\x7f]")

#: CSS functions kept: colours, lengths, transforms, gradients, selectors. (``url()`` only as ``url(#id)``.)
CSS_FUNCTIONS = frozenset("""
rgb rgba hsl hsla hwb lab lch oklab oklch color color-mix var calc min max clamp translate translatex translatey
translatez translate3d rotate rotatex rotatey rotatez rotate3d scale scalex scaley scale3d skew skewx skewy
matrix matrix3d perspective nth-child nth-of-type nth-last-child nth-last-of-type not is where has lang dir
linear-gradient repeating-linear-gradient radial-gradient repeating-radial-gradient conic-gradient
cubic-bezier steps minmax repeat fit-content counter counters attr env blur brightness contrast drop-shadow
grayscale hue-rotate invert opacity saturate sepia inset circle ellipse polygon rect
""".split())
CSS_AT_RULES = frozenset("media supports keyframes -webkit-keyframes page container layer".split())
_CSS_FUNCTION = re.compile(r"([a-zA-Z_-][a-zA-Z0-9_-]*)\(")
_CSS_AT = re.compile(r"@([a-zA-Z_-][a-zA-Z0-9_-]*)")
_LOCAL_URL = re.compile(r"""url\(\s*(["']?)#[^"')\\]*\1\s*\)""", re.IGNORECASE)

_MAX_NESTING = 512  # deeper elements are not opened (their text is kept): a browser has its own limits too


class Removed(Counter):
    """What :func:`sanitize_html` took out: ``(kind, detail) -> count``.

    Kinds: ``"element"`` (detail: the tag), ``"handler"`` (the attribute), ``"url"`` (the scheme),
    ``"style"`` (why), ``"javascript-output"`` (added by the page for ``application/javascript`` outputs).
    """

    def describe(self) -> str:
        """``"<script> element x2, onerror handler x1, ..."``, the most frequent first ('' when nothing)."""
        words = {"element": "<{}> element", "handler": "{} handler", "url": "{} link or source",
                 "style": "CSS using {}", "javascript-output": "{} output"}
        return ", ".join(f"{words.get(kind, kind + ' {}').format(detail)} x{n}"
                         for (kind, detail), n in sorted(self.items(), key=lambda kv: (-kv[1], kv[0])))


def url_problem(value: str, kind: str) -> Optional[str]:
    """Why ``value`` may not be a URL of ``kind`` (``"link"``, ``"image"``, ``"local"``), e.g. ``"javascript:"``."""
    cleaned = _URL_NOISE.sub("", value)
    if cleaned.startswith("#"):
        return None
    if kind == "local":
        return "outside reference"
    scheme = _SCHEME.match(cleaned)
    if scheme is None:
        return None if ":" not in cleaned.split("/", 1)[0] else "an unreadable scheme"
    name = scheme.group(1).lower()
    if name not in URL_SCHEMES[kind]:
        return f"{name}:"
    if name == "data" and not _DATA_IMAGE.match(cleaned):
        return "data: (not an image)"
    return None


def css_problem(text: str) -> Optional[str]:
    """Why the CSS ``text`` may not stay (a function, at-rule or URL outside the allow-lists), or None."""
    if "\\" in text or "<" in text:
        return "an escape or markup"
    for at in _CSS_AT.findall(text):
        if at.lower() not in CSS_AT_RULES:
            return f"@{at.lower()}"
    for fn in _CSS_FUNCTION.findall(_LOCAL_URL.sub("", text)):
        if fn.lower() not in CSS_FUNCTIONS:
            return f"{fn.lower()}()"
    return None


class _Sanitizer(HTMLParser):
    def __init__(self, removed: Removed):
        super().__init__(convert_charrefs=True)
        self.removed = removed
        self.out: List[str] = []
        self.open: List[str] = []  # the elements written and not yet closed, innermost last
        self.skip: List[str] = []  # the elements being removed with their content (the outermost first)
        self.svg = 0  # inside how many <svg>
        self.style_text: Optional[List[str]] = None

    # -- tags ---------------------------------------------------------------------------------------------------
    def handle_starttag(self, tag, attrs):
        self._start(tag, attrs, closed=False)

    def handle_startendtag(self, tag, attrs):
        self._start(tag, attrs, closed=True)

    def _start(self, tag: str, attrs, closed: bool) -> None:
        if self.skip:
            if tag == self.skip[-1] and not closed and tag not in _VOID:
                self.skip.append(tag)
            return
        if tag in ACTIVE_TAGS or tag in _HIDDEN_TAGS or (tag == "title" and not self.svg):
            if tag in ACTIVE_TAGS:
                self.removed[("element", tag)] += 1
            if not closed and tag not in _NO_END:
                self.skip.append(tag)
            return
        if not self._allowed(tag) or len(self.open) >= _MAX_NESTING:
            return  # unwrapped: its text stays
        while self.open and self.open[-1] in _IMPLIED_END.get(tag, ()):
            self._close(self.open.pop())  # <p>a<p>b: the first paragraph ends where the second starts
        kept = self._attributes(tag, attrs)
        self.out.append(f"<{tag}" + "".join(f' {k}="{html.escape(v, quote=True)}"' if v is not None else f" {k}"
                                             for k, v in kept) + ">")
        if tag == "style":
            self.style_text = []
        if closed and tag not in _VOID:
            self.out.append(f"</{tag}>")
        elif tag not in _VOID:
            self.open.append(tag)
            self.svg += tag == "svg"

    def _allowed(self, tag: str) -> bool:
        if tag in HTML_TAGS or tag in MATH_TAGS:
            return True
        return tag in SVG_TAGS and (self.svg > 0 or tag == "svg")

    def handle_endtag(self, tag):
        if self.skip:
            if tag == self.skip[-1]:
                self.skip.pop()
            return
        if tag not in self.open:
            return  # an end without a start of ours (or of an element that was removed): nothing to close
        while self.open:
            inner = self.open.pop()
            self._close(inner)
            if inner == tag:
                break

    def _close(self, tag: str) -> None:
        if tag == "style" and self.style_text is not None:
            text, self.style_text = "".join(self.style_text), None
            problem = css_problem(text)
            if problem:
                self.removed[("style", problem)] += 1
                self.out.pop()  # the <style ...> start written last: nothing else comes between
                return
            self.out.append(text)
        self.svg -= tag == "svg"
        self.out.append(f"</{tag}>")

    # -- attributes ---------------------------------------------------------------------------------------------
    def _attributes(self, tag: str, attrs) -> List[Tuple[str, Optional[str]]]:
        kept, seen = [], set()
        for name, value in attrs:
            if name in seen:
                continue  # a browser reads the first of two: so is what was checked
            seen.add(name)
            if name.startswith("on"):
                self.removed[("handler", name)] += 1
                continue
            if not self._known(tag, name) or (value is not None and not self._value_ok(tag, name, value)):
                continue
            kept.append((name, value))
        return kept

    def _known(self, tag: str, name: str) -> bool:
        if tag in MATH_TAGS:
            return name in _MATH_ATTRS or name in ("id", "class", "style", "dir")
        if tag in SVG_TAGS and self.svg:
            return name in _SVG_ATTRS or name in ("id", "class", "style", "lang")
        return name in _GLOBAL_ATTRS or name == "style" or name in _HTML_ATTRS.get(tag, ()) or \
            name.startswith("aria-")

    def _value_ok(self, tag: str, name: str, value: str) -> bool:
        if name in ("id",) and value.lower().startswith("trtw"):
            return False  # the page's own elements (its figures) are found by such ids
        if name in _URL_ATTRS:
            kind = "link" if tag == "a" else "image" if name == "src" else "local" if self.svg else "link"
            problem = url_problem(value, kind)
            if problem:
                self.removed[("url", problem)] += 1
                return False
            return True
        if name == "style" or "url(" in value.lower() or (tag in SVG_TAGS and "(" in value):
            problem = css_problem(value)
            if problem:
                self.removed[("style", problem)] += 1
                return False
        return True

    # -- text ---------------------------------------------------------------------------------------------------
    def handle_data(self, data):
        if self.skip:
            return
        if self.style_text is not None and self.open and self.open[-1] == "style":
            self.style_text.append(data)
            return
        self.out.append(html.escape(data, quote=False))

    def handle_comment(self, data):
        pass

    def handle_decl(self, decl):
        pass

    def handle_pi(self, data):
        pass

    def unknown_decl(self, data):
        pass

    def finish(self) -> str:
        self.close()
        while self.open:
            self._close(self.open.pop())
        return "".join(self.out)


def sanitize_html(text: str, removed: Optional[Removed] = None) -> str:
    """``text`` (an HTML fragment: an output, an SVG image, rendered Markdown) with only what cannot run.

    Parameters
    ----------
    text : str
    removed : Removed, optional
        Counts what was taken out (added to).

    Returns
    -------
    str
        The fragment written again from its parsed parts (module docstring): every element it opens is
        closed, every text escaped.
    """
    sanitizer = _Sanitizer(removed if removed is not None else Removed())
    sanitizer.feed(str(text))
    return sanitizer.finish()
