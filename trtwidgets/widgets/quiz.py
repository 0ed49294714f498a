"""A short scored check at the end of a notebook: questions whose right answers the notebook computed.

Each question is ``(prompt, options, right, why)``: ``right`` is one of ``options``, chosen in the
notebook from the values its cells computed (never typed), and ``why`` says which values made it
right. :func:`quiz` shows radio buttons and a button that scores them; :func:`score` does the same
without widgets (``score({1: "none", 2: "max"}, QUESTIONS)``), for a run with no front end.
"""

from __future__ import annotations

import html
from typing import Any, Mapping, Optional, Sequence, Tuple

Question = Tuple[str, Sequence[str], str, str]


def _check(questions: Sequence[Question]) -> None:
    for prompt, options, right, _ in questions:
        if list(options).count(right) != 1:
            raise ValueError(f"The answer to {prompt!r}, {right!r}, is not one of its options {list(options)!r}.")


def score(answers: Mapping[int, Optional[str]], questions: Sequence[Question]) -> int:
    """Print the score of ``answers`` ({question number from 1: option}) and why each answer is right."""
    _check(questions)
    right = sum(answers.get(k) == q[2] for k, q in enumerate(questions, 1))
    print(f"score: {right} of {len(questions)}")
    for k, (_, _, correct, why) in enumerate(questions, 1):
        given = answers.get(k)
        verdict = "not answered" if given is None else "right" if given == correct else f"not {given!r}"
        print(f"  {k}. {verdict}" + (f": {why}" if given is not None else ""))
    return right


def quiz(questions: Sequence[Question]) -> Any:
    """Radio buttons for each question and a *Check my answers* button that prints :func:`score`."""
    import ipywidgets as widgets

    _check(questions)
    pickers = [widgets.RadioButtons(options=list(options), value=None, layout=widgets.Layout(width="max-content"))
               for _, options, _, _ in questions]
    result = widgets.Output()

    def check(_=None) -> None:
        result.clear_output()
        with result:
            score(dict(enumerate((p.value for p in pickers), 1)), questions)

    button = widgets.Button(description="Check my answers", button_style="info")
    button.on_click(check)
    rows = [widgets.VBox([widgets.HTML(f"<b>{k}.</b> {html.escape(q[0])}"), p])
            for k, (q, p) in enumerate(zip(questions, pickers), 1)]
    return widgets.VBox([*rows, button, result])
