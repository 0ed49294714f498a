"""Prose that contradicts the outputs beside it, without comparing two numbers (issue 46).

:mod:`.prose_check` makes every comparison beside a number a computed claim. Issue 46 found
contradictions of other kinds, each a typed word against a count that an output shows:

- **parts and order**: "This notebook has four parts:" over a list of five, or an introduction
  whose numbered list is not the notebook's numbered sections, in order (:func:`part_counts`);
- **quantifiers over counts**: "INT8 is (almost) absent" beside "0 INT8 layers of 129", "every
  token's outlier features are clipped" beside "3 of 274 outlier values", "the few values above
  amax" beside "clipped 12.06%" (:func:`quantifier_conflicts`);
- **another notebook's result**: "notebook 13's run picks `fp16`" where notebook 13's outputs
  show another pick (:func:`cross_reference_conflicts`).

The rules read sentences and outputs only (no notebook's text is written here): a quantifier is
tied to a count when a word near it and a word of the count's noun share a stem, and a count is
looked for in the outputs of the code cells right before and after the Markdown (the one the text
comments on, the one it introduces) and in the same cell's outputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from tests.notebooks.prose_check import sentences

NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
#: "has five parts", "in 4 steps", "these three sections".
PARTS = re.compile(r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")\s+(parts|sections|steps)\b", re.I)
LIST_ITEM = re.compile(r"^\s*(\d+)\.\s", re.M)
SECTION = re.compile(r"^##\s+(\d+)\.\s", re.M)

STOP = set("""a an the of is are was were be been its it this that these those them their there here and or but in on
to for with by as at from into than then so not no yet each every all any some few most none which what who whose
one two three four five six seven eight nine ten s""".split())


def _stem(word: str) -> str:
    w = word.lower()
    for suffix in ("ing", "ed", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiou":
        w = w[:-1]  # clipp(ing) -> clip
    return w[:-1] if len(w) > 3 and w.endswith("e") else w  # value(s) -> valu


def _stems(text: str) -> Set[str]:
    return {_stem(w) for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", text) if w.lower() not in STOP}


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBER_WORDS[word.lower()]


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


# -- (a) parts and order ----------------------------------------------------------------------------------------


def part_counts(nb) -> List[str]:
    """A stated number of parts that is not the count of the list under it or of the numbered sections.

    Also: numbered sections (``## 1.``, ``## 2.``) out of order, and an introduction (the first
    Markdown cell) whose numbered list does not have one item per numbered section.
    """
    found = []
    markdown = [(i, _source(c)) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]
    sections = [int(n) for _, text in markdown for n in SECTION.findall(text)]
    if sections and sections != list(range(1, len(sections) + 1)):
        found.append(f"the numbered sections run {sections}, not 1 to {len(sections)} in order")
    for i, text in markdown:
        for m in PARTS.finditer(text):
            stated = _number(m.group(1))
            listed = _list_length(text[m.end():])
            if listed and listed != stated:
                found.append(f"cell {i}: {m.group(0)!r} over a list of {listed}")
            elif not listed and sections and m.group(2).lower() == "sections" and stated != len(sections):
                found.append(f"cell {i}: {m.group(0)!r} in a notebook of {len(sections)} numbered sections")
    for i, text in markdown:
        lead = re.search(r"in order:\s*\n", text)
        if lead and sections:
            items = _list_items(text[lead.end():])
            if len(items) != len(sections):
                found.append(f"cell {i}: 'in order:' lists {len(items)} parts, the notebook has {len(sections)} numbered "
                             "sections")
            headings = [h for _, t in markdown for h in re.findall(r"^##\s+\d+\.\s+(.*)$", t, flags=re.M)]
            for k, (item, heading) in enumerate(zip(items, headings), 1):
                if not _stems(item) & _stems(heading):
                    found.append(f"cell {i}: part {k} of the list, {item[:60]!r}, is not section {k}, {heading!r}")
    return found


def _list_length(text: str) -> int:
    """Items of the first numbered list in ``text`` (1., 2., ... consecutive), 0 when there is none."""
    return len(_list_items(text))


def _list_items(text: str) -> List[str]:
    """The items of the first numbered list in ``text`` (numbered 1, 2, ... in order; an item ends at the next)."""
    items: List[str] = []
    for m in re.finditer(r"^\s*(\d+)\.\s+(.*(?:\n(?!\s*\d+\.\s)(?!\s*\n).*)*)", text, flags=re.M):
        if int(m.group(1)) != len(items) + 1:
            break
        items.append(" ".join(m.group(2).split()))
    return items


# -- (b) quantifiers over counts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Count:
    """A count an output shows: ``part`` of ``whole`` (``whole`` None for a percentage), and what is counted.

    ``part_words`` name the counted part ("0 INT8 layers of 129"), ``whole_words`` the whole
    ("3 of 274 outlier values"); a percentage's words are those just before it ("clipped 12.06%").
    """

    part: float
    whole: Optional[float]
    part_words: frozenset
    whole_words: frozenset
    text: str

    @property
    def share(self) -> float:
        return self.part / 100 if self.whole is None else (self.part / self.whole if self.whole else 0.0)


_NUM = r"(\d[\d,]*(?:\.\d+)?)"
K_OF_N = re.compile(_NUM + r"((?:\s+[A-Za-z][\w\-/]*){0,3}?)\s+of\s+(?:the\s+|its\s+)?" + _NUM
                    + r"((?:\s+[A-Za-z][\w\-]*){0,3})")
PERCENT = re.compile(r"((?:[A-Za-z][\w\-]*\s+){1,3})" + _NUM + r"\s*%(?:\s+of\s+(?:the\s+|its\s+)?([A-Za-z]\w*))?")


def counts(text: str) -> List[Count]:
    """Every "K of N ..." and "word P%" in ``text``."""
    out = []
    for m in K_OF_N.finditer(text):
        part, whole = float(m.group(1).replace(",", "")), float(m.group(3).replace(",", ""))
        if part <= whole:
            out.append(Count(part, whole, frozenset(_stems(m.group(2))), frozenset(_stems(m.group(4))), m.group(0)))
    for m in PERCENT.finditer(text):
        out.append(Count(float(m.group(2).replace(",", "")), None, frozenset(_stems(m.group(1))),
                         frozenset(_stems(m.group(3) or "")), m.group(0).strip()))
    return out


#: Quantifier rules: the pattern, which side of it names what is quantified, and the shares it allows.
QUANTIFIERS: Sequence[Tuple[str, "re.Pattern[str]", str, str]] = (
    ("hedged none", re.compile(r"\b(?:almost|nearly|virtually|practically)\)?\s+(?:absent|none|nothing|no)\b|"
                               r"\(almost\)\s+absent", re.I), "before", "above 0"),
    ("none", re.compile(r"(?<!almost )(?<!\(almost\) )(?<!nearly )\b(?:absent|none)\b", re.I), "before", "0"),
    # "all 256 codes" states its own count; "every layer" against "K of N layers" is judged.
    ("all", re.compile(r"\b(?:every|all|each)\b(?!\s+(?:but\b|\d))", re.I), "after", "1"),
    ("few", re.compile(r"\b(?:few|rare|handful)\b", re.I), "after", "at most 0.1"),
)


def _window(sentence: str, m: "re.Match[str]", side: str, width: int = 5) -> Set[str]:
    words = re.findall(r"[A-Za-z][A-Za-z0-9_]*", sentence[m.end():] if side == "after" else sentence[:m.start()])
    words = [w for w in words if w.lower() not in STOP]
    return {_stem(w) for w in (words[:width] if side == "after" else words[-width:])}


def _allows(rule: str, c: Count, near: Set[str]) -> bool:
    """Whether the quantifier ``rule`` holds of count ``c`` (only counts of what ``near`` names are judged)."""
    if rule == "hedged none":
        return not (near & c.part_words) or c.part > 0
    if rule == "none":
        return not (near & c.part_words) or c.part == 0
    if rule == "all":  # "every token ..." against "K of N tokens" (not "the 8 slowest of 121 layers", a selection)
        return not (c.whole is not None and not c.part_words and near & c.whole_words) or c.part == c.whole
    return not (near & (c.part_words | c.whole_words)) or c.share <= 0.1


def quantifier_conflicts(nb) -> List[str]:
    """Quantifier words that a count shown beside them contradicts, as ``"cell N: sentence (count)"``.

    A Markdown cell is read against the outputs of the code cells right before and right after it; a
    code cell's Markdown output against that cell's outputs.
    """
    found = []
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            texts = [_source(cell)]
            near = [t for j in _neighbours(cells, i) for t in _output_texts(cells[j])]
        else:
            texts = [t for t in _output_texts(cell, markdown_only=True)]
            near = list(_output_texts(cell))
        shown = [c for t in near for c in counts(t)]
        for text in texts:
            for s in sentences(text):
                for rule, pattern, side, allowed in QUANTIFIERS:
                    for m in pattern.finditer(s):
                        words = _window(s, m, side)
                        bad = [c for c in shown if not _allows(rule, c, words)]
                        if bad:
                            found.append(f"cell {i}: {s!r}: {m.group(0)!r} ({rule}: share {allowed}) against "
                                         f"{bad[0].text!r}")
    return found


def _neighbours(cells, i: int) -> Iterator[int]:
    """The code cells right before and after cell ``i`` (the output the text comments on, the one it introduces)."""
    for j in (i - 1, i + 1):
        if 0 <= j < len(cells) and cells[j]["cell_type"] == "code":
            yield j


def _output_texts(cell, markdown_only: bool = False) -> Iterator[str]:
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if "text/markdown" in data:
            yield "".join(data["text/markdown"])
        elif not markdown_only:
            if "text" in out:
                yield "".join(out["text"])
            elif "text/plain" in data:
                yield "".join(data["text/plain"])


# -- (c) another notebook's result ---------------------------------------------------------------------------------

#: "notebook 13", "notebooks 01", "`13_how_to_benchmark`".
NOTEBOOK_REF = re.compile(r"\bnotebook\s+(\d{2})\b|`(\d{2})_[a-z_]+`", re.I)
#: A pick and what was picked: "picks 'fp16'", "pick is `#2 INT8 where it pays`", "recorded pick: fp16".
PICK = re.compile(r"\b(?:picks|picked|chooses|chose|pick\s+is|pick\s+was|pick:)\s*"
                  r"(?:`([^`]+)`|'([^']+)'|\"([^\"]+)\"|([#\w][^:,;()\n]*))", re.I)


def _picked(m: "re.Match[str]") -> str:
    return next(g for g in m.groups() if g).strip().rstrip(".").lower()


def picks(nb) -> List[str]:
    """What a notebook's outputs say was picked (sentences that name another notebook left out)."""
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        for text in _output_texts(cell):
            for s in _raw_sentences(text):
                if not NOTEBOOK_REF.search(s):
                    out += [_picked(m) for m in PICK.finditer(s)]
    return out


def _raw_sentences(text: str) -> List[str]:
    """Sentences with their code spans and names kept (what was picked is often in backticks)."""
    out = []
    for block in re.split(r"\n\s*\n|\n\s*[*-]\s|\n#+\s", "\n" + text):
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`*(])", " ".join(block.split())) if s.strip()]
    return out


def references(nb) -> Iterator[Tuple[int, str, str, str]]:
    """(cell, notebook number, what it is said to have picked, sentence) for each sentence naming another's pick."""
    for i, cell in enumerate(nb["cells"]):
        texts = [_source(cell)] if cell["cell_type"] == "markdown" else list(_output_texts(cell, markdown_only=True))
        for text in texts:
            for s in _raw_sentences(text):
                for pick in PICK.finditer(s):  # each pick is said of the notebook named last before it
                    refs = list(NOTEBOOK_REF.finditer(s, 0, pick.start()))
                    if refs:
                        yield i, refs[-1].group(1) or refs[-1].group(2), _picked(pick), s


def cross_reference_conflicts(nb, others: Dict[str, object]) -> List[str]:
    """Sentences that say another notebook picked something its own outputs do not show as picked.

    ``others`` maps a notebook's number ("13") to the executed notebook; references to a
    notebook not given are not judged.
    """
    found = []
    for i, number, said, s in references(nb):
        if number not in others:
            continue
        shown = picks(others[number])
        if not any(p.startswith(said) or said.startswith(p) for p in shown):
            found.append(f"cell {i}: {s!r}: notebook {number} shows the picks {sorted(set(shown))}, not {said!r}")
    return found


def referenced_numbers(nb) -> Set[str]:
    return {number for _, number, _, _ in references(nb)}


def all_conflicts(nb, others: Optional[Dict[str, object]] = None) -> List[str]:
    return part_counts(nb) + quantifier_conflicts(nb) + cross_reference_conflicts(nb, others or {})
