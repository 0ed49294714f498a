"""The scored checks at the end of the notebooks: an answer outside the options fails, a score counts."""

from __future__ import annotations

import pytest

from trtwidgets.widgets.quiz import quiz, score

QUESTIONS = [("How many layers run INT8?", ["none", "a few", "most"], "none", "0 of 129."),
             ("Which method moved?", ["max", "entropy"], "entropy", "entropy 161 of 253.")]


def test_score_counts_the_right_answers_and_says_why(capsys):
    assert score({1: "none", 2: "max"}, QUESTIONS) == 1
    out = capsys.readouterr().out
    assert "score: 1 of 2" in out and "1. right: 0 of 129." in out and "2. not 'max': entropy 161 of 253." in out
    assert score({}, QUESTIONS) == 0 and "1. not answered" in capsys.readouterr().out


def test_a_right_answer_that_is_not_an_option_is_refused():
    with pytest.raises(ValueError, match="not one of its options"):
        score({}, [("Which?", ["a", "b"], "c", "")])
    with pytest.raises(ValueError, match="not one of its options"):
        quiz([("Which?", ["a", "a"], "a", "")])


def test_the_widget_scores_the_picked_answers(capsys):
    pytest.importorskip("ipywidgets")
    shown = quiz(QUESTIONS)
    *rows, button, result = shown.children
    assert len(rows) == 2
    rows[0].children[1].value, rows[1].children[1].value = "none", "entropy"
    button.click()  # outside a kernel the Output widget captures nothing: the score reaches stdout
    assert "score: 2 of 2" in capsys.readouterr().out + "".join(o.get("text", "") for o in result.outputs)
