"""Every comparison the notebooks state is computed from the values it compares (issue 31).

Typed Markdown states no comparison beside a number (checked on the committed notebooks, without
running them); a code cell's Markdown states them only through claims
(:mod:`trtwidgets.widgets.claims`), whose values travel in the output's metadata. Executed,
every claim is rebuilt from its values (the text must come out the same) and turned: other values
must choose another word. So a sentence edited to contradict its numbers fails here, whether it
was typed in a Markdown cell, formatted by hand in a code cell, or edited in the output.

Issue 46 found contradictions of other kinds, checked by :mod:`tests.notebooks.consistency_check`: a
stated number of parts against the list and sections, a quantifier ("(almost) absent", "every",
"few") against a count shown beside it, and another notebook's pick against that notebook's outputs.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.notebooks.prose_check import claim_records, comparisons, typed_comparisons
from trtwidgets.widgets import claims
from trtwidgets.widgets.claims import Claim, Prose

nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_typed_markdown_states_no_comparison_beside_a_number(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = typed_comparisons(nb)
    assert not found, f"{path.name}: compute these from their values (claims.order / claims.flips):\n" + "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_executed_notebook_states_comparisons_only_through_claims(path):
    pytest.importorskip("ipykernel")
    from tests.notebooks.executed import executed

    nb = executed(path)
    found = typed_comparisons(nb)
    assert not found, f"{path.name}:\n" + "\n".join(found)
    for cell, record in claim_records(nb):
        claim = Claim.from_record(record)
        assert str(claim) == record["text"], f"{path.name} cell {cell}: the claim's text is not its values'"
        other = claim.counter_example()
        assert other is not None and other.word != claim.word and str(other) != str(claim), \
            f"{path.name} cell {cell}: {record['text']!r} reads the same whatever its values"


# -- the checks can fail ------------------------------------------------------------------------


def _notebook(*cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def _markdown_output(shown):
    text, meta = shown._repr_markdown_() if isinstance(shown, Prose) else (shown, {})
    out = nbformat.v4.new_output("display_data", data={"text/markdown": text, "text/plain": text},
                                 metadata={"text/markdown": meta} if meta else {})
    return nbformat.v4.new_code_cell("...", outputs=[out])


def _claim():
    return claims.order("the Q/DQ build takes {a} ms, {word} FP16's {b} ms", 0.473, 0.365, words=claims.LATENCY,
                        within=0.056)


def test_a_typed_comparison_beside_numbers_is_found():
    cell = nbformat.v4.new_markdown_cell("The Q/DQ build takes 0.473 ms, faster than FP16's 0.365 ms.\n\n"
                                         "TensorRT 8.6 and 10 read the same calibration cache.")
    assert typed_comparisons(_notebook(cell)) == ["cell 0: The Q/DQ build takes 0.473 ms, faster than FP16's 0.365 ms."]


@pytest.mark.parametrize("sentence", ["INT8 gains little even at batch 32.", "at top-1 0.961 against 0.953",
                                      "entropy goes 0.9876 -> 0.9910", "it takes 1.30x FP16's time at 32 samples",
                                      "| dense | 6 reformats, more than the 4 of sparse |"])
def test_the_kinds_issue_31_found_are_comparisons(sentence):
    assert len(comparisons(sentence)) == 1


@pytest.mark.parametrize("sentence", ["TensorRT 8.6 is older than TensorRT 10.", "Rule 5 keeps them float.",
                                      "int8 clamps to [-128, 127] (`amax = 127 s`)", "FP16 runs faster on an H200."])
def test_names_code_and_numberless_sentences_are_not_comparisons_of_results(sentence):
    assert comparisons(sentence) == []


def test_markdown_built_by_hand_in_a_code_cell_is_found_and_a_claim_passes():
    by_hand = _markdown_output(f"The Q/DQ build takes {0.473:.3f} ms, faster than FP16's {0.365:.3f} ms.")
    assert len(typed_comparisons(_notebook(by_hand))) == 1
    assert typed_comparisons(_notebook(_markdown_output(Prose("At batch 1, ", _claim(), ".")))) == []


def test_an_output_edited_after_its_claim_was_made_is_found():
    cell = _markdown_output(Prose("At batch 1, ", _claim(), "."))
    out = cell.outputs[0]
    out.data["text/markdown"] = out.data["text/markdown"].replace("slower than", "faster than")
    found = typed_comparisons(_notebook(cell))
    assert any("is not in its output" in f for f in found) and any("faster than" in f for f in found)


def test_a_claim_turns_with_its_values_in_an_executed_style_record():
    (cell, record), = claim_records(_notebook(_markdown_output(Prose(_claim()))))
    assert record["word"] == "slower than"
    turned = Claim.from_record(record).counter_example()
    assert turned.word == "faster than" and "0.365 ms, faster than FP16's 0.473 ms" in str(turned)


def test_a_claim_shown_twice_is_recorded_twice_and_each_record_needs_its_own_occurrence():
    twice = _markdown_output(Prose(_claim(), "; ", _claim(), "."))
    assert typed_comparisons(_notebook(twice)) == []
    out = twice.outputs[0]
    out.data["text/markdown"] = out.data["text/markdown"].replace("slower than", "faster than", 1)
    found = typed_comparisons(_notebook(twice))
    assert any("is not in its output" in f for f in found) and any("faster than" in f for f in found)


# -- issue 46: parts, quantifiers over counts, other notebooks' results ---------------------------------------------

from tests.notebooks.consistency_check import (  # noqa: E402  (the checks of issue 46, beside their tests)
    _stem, counts, cross_reference_conflicts, part_counts, quantifier_conflicts, referenced_numbers)


def _printed(text):
    return nbformat.v4.new_code_cell("...", outputs=[nbformat.v4.new_output("stream", name="stdout", text=text)])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stated_parts_match_the_lists_and_sections(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = part_counts(nb)
    assert not found, f"{path.name}:\n" + "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_executed_quantifiers_and_references_match_the_outputs(path):
    pytest.importorskip("ipykernel")
    from tests.notebooks.executed import executed

    nb = executed(path)
    others = {n: executed(p) for n in referenced_numbers(nb) for p in NOTEBOOKS if p.name.startswith(n + "_")}
    found = quantifier_conflicts(nb) + cross_reference_conflicts(nb, others)
    assert not found, f"{path.name}:\n" + "\n".join(found)


def _intro(stated, items, sections):
    intro = nbformat.v4.new_markdown_cell(f"# A lesson\n\nThis notebook has {stated} parts:\n\n"
                                          + "".join(f"{k}. part {k};\n" for k in range(1, items + 1)))
    return _notebook(intro, *[nbformat.v4.new_markdown_cell(f"## {k}. Part {k}\n\nText.") for k in sections])


def test_a_stated_number_of_parts_is_counted():
    assert part_counts(_intro("four", 5, [1, 2, 3, 4, 5])) == ["cell 0: 'four parts' over a list of 5"]
    assert part_counts(_intro("five", 5, [1, 2, 3, 4, 5])) == []
    assert part_counts(_intro("5", 5, [1, 2, 3, 4, 5])) == []


def test_sections_out_of_order_and_an_ordered_list_that_is_not_the_sections_are_found():
    assert part_counts(_intro("three", 3, [1, 3, 2])) == ["the numbered sections run [1, 3, 2], not 1 to 3 in order"]
    cells = [nbformat.v4.new_markdown_cell("# A lesson\n\nWhat you will see, in order:\n\n1. what a scale is;\n"
                                           "2. rounding versus clipping;\n"),
             nbformat.v4.new_markdown_cell("## 1. Rounding versus clipping error"),
             nbformat.v4.new_markdown_cell("## 2. What a scale is")]
    found = part_counts(_notebook(*cells))
    assert found and all("is not section" in f for f in found)
    cells[1].source, cells[2].source = "## 1. What a scale is", "## 2. Rounding versus clipping error"
    assert part_counts(_notebook(*cells)) == []
    cells.append(nbformat.v4.new_markdown_cell("## 3. The explorer"))
    assert part_counts(_notebook(*cells)) == ["cell 0: 'in order:' lists 2 parts, the notebook has 3 numbered sections"]


def test_counts_are_read_from_outputs():
    (layers,) = counts("**cls_static_int8_entropy2**: 0 INT8 layers of 129; `NO_SCALE` 1.")
    assert (layers.part, layers.whole, layers.share) == (0, 129, 0) and {"int8", "layer"} <= layers.part_words
    tokens = counts("3 of 274 planted outlier values are beyond it, in 3 of 137 tokens")
    assert [(c.part, c.whole) for c in tokens] == [(3, 274), (3, 137)] and "token" in tokens[1].whole_words
    (clipped,) = counts("entropy  amax  2.1812  clipped 12.06% of the values")
    assert clipped.share == pytest.approx(0.1206) and "clip" in clipped.part_words
    assert clipped.whole_words == {_stem("values")} == {_stem("value")}


@pytest.mark.parametrize("typed, shown, contradicts", [
    ("### Calibrated, and yet INT8 is (almost) absent", "**b**: 0 INT8 layers of 129.", True),
    ("### Calibrated, and yet INT8 is (almost) absent", "**b**: 3 INT8 layers of 129.", False),
    ("### Calibrated, and yet INT8 is absent", "**b**: 3 INT8 layers of 129.", True),
    ("### Calibrated, and yet INT8 is absent", "**b**: 0 INT8 layers of 129.", False),
    ("Entropy cuts it, so every token's outlier features are clipped.", "3 of 274 outlier values are clipped, in 3 of "
     "137 tokens.", True),
    ("Entropy cuts it, so every token's outlier features are clipped.", "274 of 274 outlier values are clipped, in 137 "
     "of 137 tokens.", False),
    ("Clipping error appears in the tail, from the few values above amax.", "entropy amax 2.18: clipped 12.06% of the "
     "values", True),
    ("Clipping error appears in the tail, from the few values above amax.", "entropy amax 8.67: clipped 0.01% of the "
     "values", False),
    ("TensorRT reports each layer's time.", "the 8 slowest of 121 layers:", False),  # a selection, not a property
    ("Spread over all 256 codes, with a zero point.", "95 of 256 codes are used", False),  # the count is stated
])
def test_a_quantifier_is_judged_against_the_count_beside_it(typed, shown, contradicts):
    before = _notebook(nbformat.v4.new_markdown_cell(typed), _printed(shown))
    after = _notebook(_printed(shown), nbformat.v4.new_markdown_cell(typed))
    in_prose = _notebook(_markdown_output(Prose(typed + " " + shown)))
    for nb in (before, after, in_prose):
        assert bool(quantifier_conflicts(nb)) is contradicts, quantifier_conflicts(nb)
    far = _notebook(nbformat.v4.new_markdown_cell(typed), nbformat.v4.new_markdown_cell("More."), _printed(shown))
    assert quantifier_conflicts(far) == []  # only the outputs next to the text are what it speaks of


def test_a_reference_to_another_notebooks_pick_must_be_what_it_shows():
    thirteen = _notebook(_printed("cls-b32: H100, TensorRT 8.6.0, level 1\n"
                                  "recorded pick: #2 INT8 where it pays: 0.4994 ms against FP16's 0.5240 ms"))
    says = _markdown_output("Notebook 13 reads another recorded run of this plan (H100, TensorRT 8.6.0), whose "
                            "measured pick is `{}`, and this run's is `fp16`.")
    says.outputs[0].data["text/markdown"] = says.outputs[0].data["text/markdown"].format("fp16")
    wrong = _notebook(says)
    assert referenced_numbers(wrong) == {"13"}
    found = cross_reference_conflicts(wrong, {"13": thirteen})
    assert len(found) == 1 and "not 'fp16'" in found[0]
    says.outputs[0].data["text/markdown"] = says.outputs[0].data["text/markdown"].replace("`fp16`,", "`#2 INT8 where it pays`,")
    assert cross_reference_conflicts(_notebook(says), {"13": thirteen}) == []
    typed = nbformat.v4.new_markdown_cell("In notebook 13, the batch-32 plan picks `fp16`.")
    assert len(cross_reference_conflicts(_notebook(typed), {"13": thirteen})) == 1
    # A notebook's own sentence about a third notebook's pick is not its own pick; a pick goes with the notebook named last.
    assert len(cross_reference_conflicts(_notebook(nbformat.v4.new_markdown_cell(
        "Notebook 01 is one run; in notebook 13 the plan picks `#2 INT8 where it pays`.")), {"13": thirteen})) == 0
    thirteen.cells.append(_markdown_output("Notebook 01 reads another run, whose measured pick is `fp16`."))
    assert len(cross_reference_conflicts(_notebook(typed), {"13": thirteen})) == 1
