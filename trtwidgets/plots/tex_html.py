"""Formulas of a notebook's Markdown as MathML, so that a shared page needs no MathJax.

Browsers draw MathML themselves (Chromium since 109, Firefox, Safari), offline. The
notebooks' formulas use a small part of TeX: letters, numbers, operators, scripts,
``\\frac``, ``\\sqrt``, ``\\text``/``\\mathrm``, accents, Greek letters and spacing; that
part is translated here. A command outside it is shown as its name, never dropped.

The MathML is written with every ASCII punctuation character as a character reference
(``|`` as ``&#124;``): Markdown then sees no table bar or emphasis inside a formula, which
is why ``$|x|$`` in a table cell broke the table.
"""

from __future__ import annotations

import re
from typing import List, Tuple

#: Letters and symbols: TeX command -> (MathML element, text).
SYMBOLS = {
    **{g: ("mi", c) for g, c in zip(
        ("alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi rho "
         "sigma tau upsilon phi varphi chi psi omega").split(), "αβγδϵεζηθϑικλμνξπρστυϕφχψω")},
    **{g: ("mi", c) for g, c in zip("Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega".split(), "ΓΔΘΛΞΠΣΦΨΩ")},
    "cdot": ("mo", "·"), "times": ("mo", "×"), "pm": ("mo", "±"), "mp": ("mo", "∓"), "div": ("mo", "÷"),
    "approx": ("mo", "≈"), "sim": ("mo", "∼"), "le": ("mo", "≤"), "leq": ("mo", "≤"), "ge": ("mo", "≥"),
    "geq": ("mo", "≥"), "ne": ("mo", "≠"), "neq": ("mo", "≠"), "ll": ("mo", "≪"), "gg": ("mo", "≫"),
    "dots": ("mo", "…"), "ldots": ("mo", "…"), "cdots": ("mo", "⋯"), "infty": ("mi", "∞"), "to": ("mo", "→"),
    "rightarrow": ("mo", "→"), "leftarrow": ("mo", "←"), "Rightarrow": ("mo", "⇒"), "in": ("mo", "∈"),
    "sum": ("mo", "∑"), "prod": ("mo", "∏"), "int": ("mo", "∫"), "partial": ("mi", "∂"), "nabla": ("mi", "∇"),
    "lfloor": ("mo", "⌊"), "rfloor": ("mo", "⌋"), "lceil": ("mo", "⌈"), "rceil": ("mo", "⌉"),
    "langle": ("mo", "⟨"), "rangle": ("mo", "⟩"), "vert": ("mo", "|"), "lvert": ("mo", "|"), "rvert": ("mo", "|"),
    "mid": ("mo", "|"), "Vert": ("mo", "‖"), "|": ("mo", "‖"), "{": ("mo", "{"), "}": ("mo", "}"),
    "%": ("mo", "%"), "$": ("mo", "$"), "_": ("mo", "_"), "&": ("mo", "&"), "#": ("mo", "#"),
}
#: Functions written upright.
FUNCTIONS = set("log ln exp min max sin cos tan arg argmin argmax sup inf lim det sign round clamp".split())
#: Spacing commands -> width in em.
SPACES = {",": 0.167, ":": 0.222, ";": 0.278, " ": 0.333, "quad": 1.0, "qquad": 2.0, "!": 0.0}
#: Size and delimiter commands that only change how large the next delimiter is drawn.
SIZES = set("big Big bigg Bigg bigl bigr Bigl Bigr left right middle displaystyle textstyle".split())
#: Accents -> the mark drawn over the argument.
ACCENTS = {"hat": "^", "bar": "¯", "tilde": "~", "vec": "→", "dot": "˙", "overline": "¯", "widehat": "^"}
#: Commands whose argument is text.
TEXT = {"text": "mtext", "textrm": "mtext", "mathrm": "mi", "operatorname": "mi", "mathit": "mi", "textit": "mtext",
        "mathbf": "mi", "textbf": "mtext"}

_TOKEN = re.compile(r"\\([A-Za-z]+)|\\(.)|(\d+(?:\.\d+)?)|([A-Za-z])|(\s+)|(.)", re.S)


def _ref(text: str) -> str:
    """``text`` for an HTML element's content, with ASCII punctuation as character references."""
    return "".join(f"&#{ord(c)};" if (c.isascii() and not c.isalnum() and c != " ") else c for c in text)


def _tokens(tex: str) -> List[Tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(tex):
        word, sym, num, letter, space, other = m.groups()
        if word is not None:
            out.append(("cmd", word))
        elif sym is not None:
            out.append(("cmd", sym))
        elif num is not None:
            out.append(("mn", num))
        elif letter is not None:
            out.append(("mi", letter))
        elif space is None:
            out.append(("ch", other))
    return out


class _Parser:
    """A recursive-descent reader of the TeX subset, one token list at a time."""

    def __init__(self, tex: str):
        self.toks = _tokens(tex)
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def row(self, stop: str = "") -> str:
        """Atoms (with their scripts) up to ``stop`` (``}``) or the end, as one ``<mrow>``."""
        parts = []
        while self.i < len(self.toks):
            kind, val = self.peek()
            if kind == "ch" and val == stop:
                self.i += 1
                break
            parts.append(self.scripted())
        return "<mrow>" + "".join(parts) + "</mrow>"

    def argument(self) -> str:
        kind, val = self.take()
        if kind == "ch" and val == "{":
            return self.row("}")
        return self.atom_of(kind, val)

    def text_argument(self) -> str:
        """The raw text of a ``{...}`` argument (for ``\\text``), spaces kept."""
        kind, val = self.take()
        if not (kind == "ch" and val == "{"):
            return val or ""
        depth, words = 1, []
        while self.i < len(self.toks):
            kind, val = self.take()
            if kind == "ch" and val in "{}":
                depth += 1 if val == "{" else -1
                if depth == 0:
                    break
            words.append(("\\" + val) if kind == "cmd" and val.isalpha() else val)
        return "".join(words)

    def scripted(self) -> str:
        base = self.atom()
        sub = sup = None
        while True:
            kind, val = self.peek()
            if kind == "ch" and val in "_^":
                self.i += 1
                if val == "_":
                    sub = self.argument()
                else:
                    sup = self.argument()
            elif kind == "ch" and val == "'":
                self.i += 1
                sup = (sup or "") + "<mo>&#8242;</mo>"
            else:
                break
        if sub and sup:
            return f"<msubsup>{base}{sub}{sup}</msubsup>"
        if sub:
            return f"<msub>{base}{sub}</msub>"
        if sup:
            return f"<msup>{base}{sup}</msup>"
        return base

    def atom(self) -> str:
        kind, val = self.take()
        return self.atom_of(kind, val)

    def atom_of(self, kind, val) -> str:
        if kind is None:
            return "<mrow></mrow>"
        if kind in ("mn", "mi"):
            return f"<{kind}>{_ref(val)}</{kind}>"
        if kind == "ch":
            if val == "{":
                return self.row("}")
            return f"<mo>{_ref(val)}</mo>"
        return self.command(val)

    def command(self, name: str) -> str:
        if name in SYMBOLS:
            tag, text = SYMBOLS[name]
            return f"<{tag}>{_ref(text)}</{tag}>"
        if name in FUNCTIONS:
            return f'<mi mathvariant="normal">{name}</mi><mspace width="0.167em"></mspace>'
        if name in SPACES:
            return f'<mspace width="{SPACES[name]}em"></mspace>'
        if name in SIZES:
            return ""
        if name == "frac":
            return f"<mfrac>{self.argument()}{self.argument()}</mfrac>"
        if name == "sqrt":
            return f"<msqrt>{self.argument()}</msqrt>"
        if name in ACCENTS:
            return f'<mover accent="true">{self.argument()}<mo>{_ref(ACCENTS[name])}</mo></mover>'
        if name in TEXT:
            tag = TEXT[name]
            variant = ' mathvariant="normal"' if tag == "mi" else ""
            return f"<{tag}{variant}>{_ref(self.text_argument())}</{tag}>"
        return f"<mtext>{_ref(name)}</mtext>"


def tex_to_mathml(tex: str, display: bool = False) -> str:
    """One formula (the text between ``$`` signs) as a ``<math>`` element.

    Parameters
    ----------
    tex : str
        TeX of the subset described in the module docstring.
    display : bool
        A displayed (``$$``) formula, drawn on its own line.
    """
    body = _Parser(tex).row()
    block = ' display="block"' if display else ""
    # The TeX stays as the formula's annotation: copy-paste and screen readers get it back.
    return (f"<math{block}><semantics>{body}"
            f'<annotation encoding="application/x-tex">{_ref(tex)}</annotation></semantics></math>')


# Code (fenced blocks, inline spans) is left alone; formulas are $$...$$ (may span lines) or $...$ on one
# line, as Jupyter pairs them (a space before the closing dollar is allowed: "$w'_q / $"), except that the
# opening dollar is followed by no space and the closing one by no digit ("$5 and $6" is money).
_CODE = re.compile(r"(^|\n)(```|~~~).*?(\n\2[^\n]*(?=\n|$)|$)|(`+).*?\4", re.S)
_MATH = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<![\\$])\$(?=\S)([^$\n]+?)(?<!\\)\$(?!\d)", re.S)


def markdown_math(text: str) -> str:
    """Markdown with every formula replaced by MathML (code spans and blocks untouched)."""
    out, last = [], 0
    for m in _CODE.finditer(text):
        out.append(_replace_math(text[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_replace_math(text[last:]))
    return "".join(out)


def _formula(m: "re.Match") -> str:
    if m.group(1) is not None:
        return tex_to_mathml(m.group(1).strip(), display=True)
    return tex_to_mathml(m.group(2).strip())


def _replace_math(text: str) -> str:
    return _MATH.sub(_formula, text)
