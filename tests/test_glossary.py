"""docs/glossary.md keeps up with the notebooks (issue 46: "internal jargon unexplained").

Every term of the glossary is used in a notebook or a doc; every piece of jargon the notebooks' Markdown
shows (a placement rule's number, an ALL_CAPS code such as ``KEPT_FLOAT_BY_EXPORT``) and every lint or
why-not-INT8 code a notebook names has an entry; every placement rule and why-not-INT8 code has one; and
every link to the glossary finds its entry. Reads files only: no notebook runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List

import pytest

from tests.conftest import ROOT
from trtwidgets.core.engine.why_not_int8.codes import CODES as WHY_NOT_CODES
from trtwidgets.core.model.lint.codes import CODES as LINT_CODES
from trtwidgets.core.qdq import placement

GLOSSARY = ROOT / "docs" / "glossary.md"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: The lessons the glossary covers: every numbered notebook.
LESSONS = [p for p in NOTEBOOKS if p.name[:2].isdigit()]
DOCS = [p for p in sorted((ROOT / "docs").glob("*.md")) if p != GLOSSARY] + [ROOT / "README.md",
                                                                             ROOT / "DEVELOPERS.md"]
#: An ALL_CAPS name with an underscore: a code (lint, why-not-INT8), a TensorRT enum member, or a notebook's constant.
CAPS = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
RULE = re.compile(r"\brules? (\d+)\b", re.I)


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings() -> Dict[str, int]:
    """Heading text -> level (2: a term, 3: a placement rule under *Placement rules*)."""
    text = re.sub(r"```.*?```", "", GLOSSARY.read_text(encoding="utf-8"), flags=re.S)
    return {m.group(2).strip(): len(m.group(1)) for m in re.finditer(r"^(#{2,3}) (.+)$", text, flags=re.M)}


def cells(path: Path, kind: str = "") -> List[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if not kind or c["cell_type"] == kind]


def plain(text: str) -> str:
    """Text as words: no emphasis or code marks, hyphens and runs of white space as one space."""
    return " ".join(re.sub(r"[*`_\-]", " ", text.lower()).split())


def test_terms_are_in_alphabetical_order():
    terms = [h for h, level in headings().items() if level == 2]
    keys = [re.sub(r"[^a-z0-9]", "", t.lower()) for t in terms]
    assert keys == sorted(keys), [t for t, k, s in zip(terms, keys, sorted(keys)) if k != s][:3]
    assert len(set(map(anchor, headings()))) == len(headings()), "two headings share an anchor"


def test_every_term_is_used_in_a_notebook_or_a_doc():
    corpus = plain("\n".join(s for p in NOTEBOOKS for s in cells(p)) + "\n".join(
        p.read_text(encoding="utf-8") for p in DOCS))
    unused = [t for t, level in headings().items()
              if level == 2 and t not in WHY_NOT_CODES  # shown in any engine's layer table (App, CLI)
              and not re.search(r"\b" + re.escape(plain(t)), corpus)]
    assert not unused, f"glossary terms no notebook or doc uses: {unused}"


def test_every_placement_rule_and_why_not_int8_code_has_an_entry():
    rules = {f"Rule {n}" for n in re.findall(r"^\s*(\d+)\. \*\*", placement.__doc__, flags=re.M)}
    assert rules and rules == {h for h, level in headings().items() if level == 3 and h.startswith("Rule ")}
    assert not set(WHY_NOT_CODES) - set(headings()), set(WHY_NOT_CODES) - set(headings())


def _assigned(name: str, code_cells: List[str]) -> bool:
    """Whether a notebook's code assigns ``name`` (its own setting, explained where it is set)."""
    return any(re.match(rf"\s*[\w\s,]*\b{name}\b[\w\s,]*=(?!=)", line)
               for code in code_cells for line in code.splitlines())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_notebooks_jargon_has_an_entry(path):
    terms = set(headings())
    code = cells(path, "code")
    missing = set()
    for text in cells(path, "markdown"):
        missing |= {f"Rule {n}" for n in RULE.findall(text)} - terms
        missing |= {c for c in CAPS.findall(text) if c not in terms and not _assigned(c, code)}
    known_codes = set(LINT_CODES) | set(WHY_NOT_CODES)
    missing |= {c for text in code for c in CAPS.findall(text) if c in known_codes} - terms
    assert not missing, f"{path.name}: explain these in docs/glossary.md: {sorted(missing)}"


def test_links_to_the_glossary_find_their_entry():
    anchors = {anchor(h) for h in headings()}
    sources = {p.name: "\n".join(cells(p, "markdown")) for p in NOTEBOOKS}
    sources.update({p.name: p.read_text(encoding="utf-8") for p in DOCS})
    sources["glossary.md (its own links)"] = re.sub(r"\]\(#", "](glossary.md#", GLOSSARY.read_text(encoding="utf-8"))
    broken = [f"{name}: #{a}" for name, text in sources.items()
              for a in re.findall(r"glossary\.md#([\w\-]+)", re.sub(r"`[^`]*`", "", text)) if a not in anchors]
    assert not broken, f"links to glossary entries that do not exist: {broken}"


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_every_lesson_points_to_the_glossary_in_its_introduction(path):
    assert "../docs/glossary.md" in cells(path, "markdown")[0], f"{path.name}: link the glossary in the first cell"


def test_the_readme_and_the_docs_link_the_glossary():
    for doc in (ROOT / "README.md", ROOT / "docs" / "architecture.md"):
        assert "glossary.md" in doc.read_text(encoding="utf-8"), f"{doc.name} does not link docs/glossary.md"
