"""Claims: comparison sentences worded from their values, refused when a direction is typed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trtwidgets.widgets import claims
from trtwidgets.widgets.claims import Claim, Prose, flips, order
from trtwidgets.core.accuracy.intervals import Flips, paired_flips
from trtwidgets.core.common.errors import UserError

LATENCY_SENTENCE = "implicit INT8 takes {a} ms, {word} FP16's {b} ms"


@pytest.mark.parametrize("a, b, word", [(0.462, 0.485, "faster than"), (0.485, 0.462, "slower than"),
                                        (0.480, 0.485, "within the spread of")])
def test_an_order_chooses_its_word_from_the_values_and_the_spread(a, b, word):
    c = order(LATENCY_SENTENCE, a, b, words=claims.LATENCY, within=0.011)
    assert c.word == word
    assert str(c) == f"implicit INT8 takes {a:.3f} ms, {word} FP16's {b:.3f} ms"


def test_the_exact_edge_of_the_spread_is_no_difference():
    assert order("{a} {word} {b}", 1.0, 0.5, within=0.5).word == claims.HIGHER[2]
    assert order("{a} {word} {b}", 1.0, 0.5, within=0.49).word == claims.HIGHER[0]


def test_counts_print_as_counts_and_ratios_and_differences_are_fields():
    c = order("{a} against {b} reformats: {word} (by {diff}; {ratio}x)", np.int64(6), 4, words=claims.COUNT, fmt=",")
    assert str(c) == "6 against 4 reformats: more (by 2; 1.50x)"
    assert json.loads(json.dumps(c.record()))["values"] == [6, 4]


@pytest.mark.parametrize("found, word", [(Flips(3, 1, 1000, 20), "changes nothing beyond chance"),
                                         (Flips(13, 1, 1000, 20), "loses"), (Flips(1, 13, 1000, 20), "gains"),
                                         (Flips(0, 0, 1000, 24), "changes nothing beyond chance")])
def test_flips_choose_by_mcnemar(found, word):
    c = flips("the export {word}: {flips}", found)
    assert c.word == word and str(c) == f"the export {word}: {found}"


def test_flips_of_real_answers():
    labels = np.array([0, 1] * 50)
    ref = labels.copy()
    cand = labels.copy()
    cand[:12] = 1 - cand[:12]
    c = flips("{word} ({r2w} of {n} turned wrong)", paired_flips(labels, ref, cand))
    assert str(c) == "loses (12 of 100 turned wrong)"


@pytest.mark.parametrize("claim", [
    order(LATENCY_SENTENCE, 0.462, 0.485, words=claims.LATENCY, within=0.011),
    order(LATENCY_SENTENCE, 0.480, 0.485, words=claims.LATENCY, within=0.011),
    order("{a} reformats, {word} the {b} before", 4, 4, words=claims.COUNT, fmt=","),
    order("cosine {a} {word} the threshold {b}", 0.99, 0.99, words=("meets", "misses", "meets")),
    flips("{word}: {flips}", Flips(3, 1, 1000, 20)),
    flips("{word}: {flips}", Flips(0, 0, 100, 0)),
    flips("{word}: {flips}", Flips(13, 1, 1000, 20)),
])
def test_every_claim_rebuilds_from_its_record_and_turns_with_other_values(claim):
    record = json.loads(json.dumps(claim.record()))
    again = Claim.from_record(record)
    assert str(again) == record["text"] == str(claim) and again.word == record["word"]
    other = claim.counter_example()
    assert other is not None and other.word != claim.word and str(other) != str(claim)


@pytest.mark.parametrize("template, fields", [
    ("INT8 is faster: {a} against {b} ({word})", {}),
    ("{a} against {b}: {word}", {"why": "so more data helps"}),
    ("{a} against {b}", {}),
])
def test_a_typed_direction_or_a_template_without_its_word_is_refused(template, fields):
    with pytest.raises(UserError, match="direction|no \\{word\\}"):
        order(template, 1, 2, **fields)


def test_a_template_naming_a_missing_field_fails_when_made_not_when_shown():
    with pytest.raises(UserError, match="cannot be filled"):
        order("{a} {word} {c}", 1, 2)


def test_bad_words_values_and_rules_are_refused():
    with pytest.raises(UserError, match="three words"):
        order("{word}", 1, 2, words=("up", "down"))
    with pytest.raises(UserError, match="numbers"):
        order("{word}", "1", 2)
    with pytest.raises(UserError, match="not known"):
        Claim("guess", "{word}", (1, 2), claims.HIGHER)


def test_prose_keeps_its_claims_values_in_the_markdown_metadata():
    c = order("{a} {word} {b}", 2, 1, fmt=",")
    text, meta = Prose("At batch 32, ", c, ".")._repr_markdown_()
    assert text == "At batch 32, 2 higher than 1."
    assert meta[claims.METADATA_KEY]["claims"] == [c.record()]
    assert str(Prose("plain")) == "plain" and Prose("plain").claims == ()
    with pytest.raises(UserError, match="text and claims"):
        Prose("a", 3.0)
