"""Sentences that compare measured values, worded from the values they compare.

A notebook's "0.961 against 0.953: INT8 keeps accuracy" can be typed once and stay while the
numbers beside it change (issue 31 found a dozen such sentences). A :class:`Claim` is the
sentence made from its values: a template holds the fixed words, and the one word that says
which way the comparison goes (*faster*, *fewer*, *within the noise*) is chosen from the values
by the rule the claim carries:

- :func:`order`: ``a`` against ``b``, a word for each side and one for a difference within
  ``within`` (a run's spread, a tolerance);
- :func:`flips`: two models on the same labelled samples (:func:`~trtwidgets.core.accuracy.intervals.paired_flips`), a
  word for a gain, a loss, and a split McNemar's test cannot tell from chance.

Nothing that states a direction may be typed around the chosen word: a template or a field
holding one of :data:`DIRECTION_WORDS` is refused. :class:`Prose` shows typed text and claims
as one Markdown output and records every claim's values in the output's metadata, so a test
can rebuild each claim of an executed notebook from its values (:meth:`Claim.from_record`),
check its text, and change the values to see the words change (:meth:`Claim.counter_example`).
"""

from __future__ import annotations

import numbers
import re
import string
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

from ..core.common.errors import UserError
from ..core.common.frozen import readonly_mapping
from ..core.accuracy.intervals import Flips

#: Words that state which way a comparison went; a claim chooses them, nothing types them.
DIRECTION_WORDS = frozenset("""
more less fewer faster slower better worse gain gains gained lose loses lost higher lower larger smaller
beat beats win wins improve improves improved exceed exceeds outperform outperforms fastest slowest best worst
highest lowest largest smallest helps hurts
""".split())
#: Where the metadata of a :class:`Prose` output keeps its claims.
METADATA_KEY = "trtwidgets"

#: Word sets for common comparisons: (``a`` above ``b``, ``a`` below ``b``, within the tolerance).
LATENCY = ("slower than", "faster than", "within the spread of")
COUNT = ("more", "fewer", "as many")
HIGHER_IS_BETTER = ("better than", "worse than", "as good as")
HIGHER = ("higher than", "lower than", "the same as")
#: Flip words: (the candidate gains, loses, neither beyond chance).
FLIP_WORDS = ("gains", "loses", "changes nothing beyond chance")
RULES = ("order", "flips")


def _direction_words(text: str) -> List[str]:
    return sorted({w for w in re.findall(r"[A-Za-z]+", text) if w.lower() in DIRECTION_WORDS})


def _check_typed(what: str, text: str) -> None:
    found = _direction_words(text)
    if found:
        raise UserError(f"The claim's {what} {text!r} states a direction itself ({', '.join(found)}).",
                        "Only the word the claim chooses from its values may say which way a comparison went; "
                        "a typed one stays when the values turn.",
                        "Put the word in the claim's words and write {word} in the template.")


@dataclass(frozen=True)
class Claim:
    """One comparison, as a sentence: a template, its values, and the word the values chose.

    Build with :func:`order` or :func:`flips`. ``str(claim)`` is the sentence; show it with
    :class:`Prose` so that its values travel with the output.

    Attributes
    ----------
    rule : {"order", "flips"}
    template : str
        Fixed words with ``{word}`` and value fields (see :func:`order`, :func:`flips`).
    values : tuple of int or float
        ``(a, b)`` for an order; ``(right_to_wrong, wrong_to_right, both_right, both_wrong)`` for flips.
    words : tuple of str
        The three words the rule chooses from.
    within : float
        An order's tolerance; a flips claim's significance level.
    fmt : str
        Format spec of ``a``, ``b`` and their difference (``".3f"``, ``","``).
    fields : mapping
        Other fields of the template, as text (no direction words).
    """

    rule: str
    template: str
    values: Tuple[float, ...]
    words: Tuple[str, str, str]
    within: float = 0.0
    fmt: str = ".3f"
    fields: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self):
        if self.rule not in RULES:
            raise UserError(f"Claim rule {self.rule!r} is not known.", None, f"Use one of {', '.join(RULES)}.")
        if len(self.words) != 3 or not all(isinstance(w, str) and w for w in self.words):
            raise UserError(f"A claim needs three words (above, below, within), got {self.words!r}.")
        if "{word}" not in self.template:
            raise UserError(f"The claim's template {self.template!r} has no {{word}}.",
                            "The comparison's direction is the word the claim chooses.",
                            "Write {word} where the direction goes.")
        _check_typed("template", string.Formatter().vformat(self.template, (), _Blank()))
        for key, text in self.fields.items():
            _check_typed(f"field {key!r}", str(text))
        object.__setattr__(self, "fields", readonly_mapping({k: str(v) for k, v in self.fields.items()}))
        object.__setattr__(self, "values", tuple(_plain(v) for v in self.values))
        object.__setattr__(self, "words", tuple(self.words))
        str(self)  # a template naming a field it does not have fails here, not when shown

    @property
    def word(self) -> str:
        """The word the values chose."""
        if self.rule == "order":
            a, b = self.values
            return self.words[0] if a - b > self.within else self.words[1] if b - a > self.within else self.words[2]
        f = self._flips()
        if f.p_value >= self.within or f.net == 0:
            return self.words[2]
        return self.words[0] if f.net > 0 else self.words[1]

    def _flips(self) -> Flips:
        return Flips(*(int(round(v)) for v in self.values))

    def _values_text(self) -> Dict[str, str]:
        if self.rule == "order":
            a, b = self.values
            return {"a": format(a, self.fmt), "b": format(b, self.fmt), "diff": format(abs(a - b), self.fmt),
                    "within": format(self.within, self.fmt), "ratio": f"{a / b:.2f}" if b else "n/a"}
        f = self._flips()
        return {"flips": str(f), "r2w": str(f.right_to_wrong), "w2r": str(f.wrong_to_right), "n": f"{f.n:,}",
                "net": f"{f.net:+d}", "p": f"{f.p_value:.2g}"}

    def __str__(self) -> str:
        try:
            return self.template.format(word=self.word, **self._values_text(), **self.fields)
        except (KeyError, IndexError, ValueError) as exc:
            raise UserError(f"The claim's template {self.template!r} cannot be filled: {exc!r}.",
                            f"Its fields are word, {', '.join(self._values_text())} and {', '.join(self.fields) or 'no others'}.",
                            "Name only those fields in the template.") from None

    def record(self) -> Dict[str, Any]:
        """A JSON-ready record of the claim: enough to build it again, and the text it gave."""
        return {"rule": self.rule, "template": self.template, "values": list(self.values), "words": list(self.words),
                "within": self.within, "fmt": self.fmt, "fields": dict(self.fields), "word": self.word,
                "text": str(self)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Claim":
        """The claim a :meth:`record` describes (its ``word`` and ``text`` are computed again, not read)."""
        return cls(rule=record["rule"], template=record["template"], values=tuple(record["values"]),
                   words=tuple(record["words"]), within=float(record["within"]), fmt=record["fmt"],
                   fields=dict(record["fields"]))

    def with_values(self, values: Sequence[float]) -> "Claim":
        """The same sentence for other values."""
        return replace(self, values=tuple(values))

    def counter_example(self) -> Optional["Claim"]:
        """The same claim with values that choose another word, or None when no values can."""
        for values in self._other_values():
            other = self.with_values(values)
            if other.word != self.word:
                return other
        return None

    def _other_values(self):
        if self.rule == "order":
            a, b = self.values
            step = 2 * self.within + 1
            step = int(step) if all(isinstance(v, int) for v in (a, b)) else step + 1e-6 * abs(b)
            return [(b, a), (b + step, b), (b - step, b)]
        r2w, w2r, right, wrong = self.values
        m = max(r2w + w2r, 1) * 10
        return [(w2r, r2w, right, wrong), (0, m, right, wrong), (m, 0, right, wrong), (0, 0, right + r2w, wrong + w2r)]


def _plain(value) -> Union[int, float]:
    """A number as Python's int (counts stay counts in text and JSON) or float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UserError(f"A claim compares numbers, not {value!r}.", None, "Pass the measured values.")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


class _Blank(dict):
    """Every template field read as an empty string: what is left is the typed text."""

    def __missing__(self, key) -> str:
        return ""


def _three(words: Sequence[str]) -> Tuple[str, str, str]:
    return cast(Tuple[str, str, str], tuple(words))  # Claim checks that there are three


def order(template: str, a: float, b: float, *, words: Sequence[str] = HIGHER, within: float = 0.0,
          fmt: str = ".3f", **fields: Any) -> Claim:
    """A claim that compares ``a`` with ``b``.

    Parameters
    ----------
    template : str
        The sentence, with ``{word}`` (the chosen word) and any of ``{a}``, ``{b}``, ``{diff}``
        (``|a - b|``), ``{within}``, ``{ratio}`` (``a / b``) and the ``fields``; e.g.
        ``"implicit INT8 takes {a} ms, {word} FP16's {b} ms"``.
    a, b : float
    words : (str, str, str)
        The word when ``a - b > within``, when ``b - a > within``, and otherwise
        (:data:`LATENCY`, :data:`COUNT`, :data:`HIGHER_IS_BETTER`, :data:`HIGHER`).
    within : float
        Differences up to this are no difference (a run's spread, a tolerance; 0: exact).
    fmt : str
        Format spec of ``a``, ``b``, ``diff`` and ``within``.
    **fields
        Other template fields, shown as given (no direction words in them).
    """
    return Claim("order", template, (a, b), _three(words), float(within), fmt, fields)


def flips(template: str, found: Flips, *, words: Sequence[str] = FLIP_WORDS, alpha: float = 0.05,
          **fields: Any) -> Claim:
    """A claim about a candidate against a reference on the same labelled samples.

    Parameters
    ----------
    template : str
        The sentence, with ``{word}`` and any of ``{flips}`` (the counts and McNemar's p),
        ``{r2w}``, ``{w2r}``, ``{n}``, ``{net}``, ``{p}`` and the ``fields``.
    found : Flips
        :func:`~trtwidgets.core.accuracy.intervals.paired_flips` of the reference and the candidate.
    words : (str, str, str)
        The word when the candidate gains beyond chance, loses beyond chance, and otherwise
        (McNemar's exact p-value at least ``alpha``, or no net change).
    alpha : float
        Significance level of the exact McNemar test.
    """
    values = (found.right_to_wrong, found.wrong_to_right, found.both_right, found.both_wrong)
    return Claim("flips", template, values, _three(words), float(alpha), ",d", fields)


class Prose:
    """Typed text and claims shown as one Markdown output, the claims' values kept in its metadata.

    ``Prose("At batch 32 ", claim, ".")`` in a notebook cell shows the sentence; the output's
    metadata (``metadata["text/markdown"]["trtwidgets"]["claims"]``) holds each claim's
    :meth:`Claim.record`. Typed parts should state no comparison: the notebook tests look
    for comparison words beside numbers outside the recorded claims.
    """

    def __init__(self, *parts: Union[str, Claim]) -> None:
        for p in parts:
            if not isinstance(p, (str, Claim)):
                raise UserError(f"Prose takes text and claims, not {type(p).__name__}.", None,
                                "Format numbers into the text, or make the comparison a claim.")
        self.parts = parts

    @property
    def claims(self) -> Tuple[Claim, ...]:
        return tuple(p for p in self.parts if isinstance(p, Claim))

    def __str__(self) -> str:
        return "".join(str(p) for p in self.parts)

    def __repr__(self) -> str:
        return str(self)

    def _repr_markdown_(self):
        return str(self), {METADATA_KEY: {"claims": [c.record() for c in self.claims]}}
