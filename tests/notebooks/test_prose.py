"""Every comparison the notebooks state is computed from the values it compares (issue 31).

Typed Markdown states no comparison beside a number (checked on the committed notebooks, without
running them); a code cell's Markdown states them only through claims
(:mod:`trtwidgets.core.accuracy.claims`), whose values travel in the output's metadata. Executed,
every claim is rebuilt from its values (the text must come out the same) and turned: other values
must choose another word. So a sentence edited to contradict its numbers fails here, whether it
was typed in a Markdown cell, formatted by hand in a code cell, or edited in the output.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.notebooks.prose_check import claim_records, comparisons, typed_comparisons
from trtwidgets.core.accuracy import claims
from trtwidgets.core.accuracy.claims import Claim, Prose

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
