"""Comparisons in notebook prose: which ones were typed, and the claims that computed the others.

A sentence that compares (a comparison word such as *faster*, *fewer*, *against*, *keeps*, an
``->`` or a ratio like ``1.30x``) beside a number (issue 31: "0.961 against 0.953", "INT8 gains
little even at batch 32") must be computed from the values it compares: a
:class:`trtwidgets.widgets.claims.Claim` shown through ``Prose``, whose output keeps the
claim's values in its metadata. :func:`typed_comparisons` finds those that were not, in typed
Markdown cells and in Markdown a code cell built by hand (an f-string); :func:`claim_records`
gives every claim an executed notebook shows, to be rebuilt and turned by the tests.
"""

from __future__ import annotations

import re
from typing import Iterator, List, Tuple

from trtwidgets.widgets.claims import METADATA_KEY

#: Words (and marks) that state a comparison.
COMPARISON = re.compile(
    r"\b(?:more|less|fewer|faster|slower|better|worse|gains?|gained|keeps|higher|lower|larger|smaller|beats?|wins?"
    r"|loses?|lost|against|vs|versus|than|outperforms?|improves?|exceeds?|fastest|slowest|best|worst|highest"
    r"|lowest|largest|smallest|helps|hurts)\b|->|→|\b\d+(?:\.\d+)?x\b", re.I)
#: A number that is a quantity (not part of a name such as FP16, H200 or conv2d_54).
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?%?(?![\w])")
#: Numbers that name things (a TensorRT release, an opset, a notebook or section), not quantities.
NAMES = re.compile(r"\b(?:TensorRT|opset|Python|notebooks?|sections?|rules?|Dettmers et al\.,)\s+"
                   r"\d+(?:\.\d+)*(?:(?:,\s*|\s+and\s+|\s+or\s+|/)\d+(?:\.\d+)*)*", re.I)


def _plain(markdown: str) -> str:
    """The prose of a Markdown text: no code, formulas, link targets, headings' or lists' numbering."""
    s = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    s = re.sub(r"`[^`]*`", " ", s)
    s = re.sub(r"\$\$.*?\$\$", " ", s, flags=re.S)
    s = re.sub(r"\$[^$\n]*\$", " ", s)
    s = re.sub(r"\]\([^)]*\)", "]", s)
    s = re.sub(r"^\s*(?:#+\s*)?\d+\.\s", " ", s, flags=re.M)
    return NAMES.sub(" ", s)


def sentences(markdown: str) -> List[str]:
    """The sentences (and list items) of a Markdown text's prose."""
    out = []
    # Paragraphs, list items, headings and table rows are sentences of their own.
    for block in re.split(r"\n\s*\n|\n\s*[*-]\s|\n#+\s|\n(?=\s*\|)", "\n" + _plain(markdown)):
        out += [s.strip() for s in re.split(r"(?<=[.;!?])\s+(?=\S)", " ".join(block.split())) if s.strip()]
    return out


def comparisons(markdown: str) -> List[str]:
    """Sentences of ``markdown`` that state a comparison beside a number."""
    return [s for s in sentences(markdown) if COMPARISON.search(s) and NUMBER.search(s)]


def _markdown_outputs(cell) -> Iterator[Tuple[str, list]]:
    for out in cell.get("outputs", []):
        text = out.get("data", {}).get("text/markdown")
        if text is not None:
            meta = out.get("metadata", {}).get("text/markdown", {}) or {}
            yield "".join(text), list((meta.get(METADATA_KEY) or {}).get("claims", []))


def typed_comparisons(nb) -> List[str]:
    """Every comparison beside a number that no claim computed, as ``"cell N: sentence"``.

    Typed Markdown cells hold none; a code cell's Markdown output may hold them only inside the
    text of the claims its metadata records (and each recorded claim's text must be in the output:
    an output edited after the claim was made is reported too).
    """
    found = []
    for i, cell in enumerate(nb["cells"]):
        texts = []
        if cell["cell_type"] == "markdown":
            texts.append(("".join(cell["source"]), []))
        else:
            texts += list(_markdown_outputs(cell))
        for text, claims in texts:
            for claim in claims:
                if claim["text"] not in text:
                    found.append(f"cell {i}: the claim {claim['text']!r} is not in its output")
                text = text.replace(claim["text"], " CLAIM ", 1)  # one occurrence per record: a repeated claim is recorded twice
            found += [f"cell {i}: {s}" for s in comparisons(text)]
    return found


def claim_records(nb) -> List[Tuple[int, dict]]:
    """(cell index, record) of every claim the executed notebook's Markdown outputs show."""
    return [(i, claim) for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"
            for _, claims in _markdown_outputs(cell) for claim in claims]
