"""Notes for the user from deep inside a computation (a file skipped, an image scaled), without warnings.

:func:`note` hands a sentence to the sink installed by :func:`notes_to` (the CLI prints ``note: ...``
on stderr, once per text); without one it goes to the ``trtwidgets`` logger, whose last-resort
handler prints it on stderr, so a notebook or script sees it too. Python warnings are not used:
the test suite turns the package's own warnings into errors, and a note is not a failure.

A caller that puts the notes of a step into its result (a plan's notes, the App's panel) collects
them with :func:`collect_notes`; they still reach the sink outside it (the CLI still prints them).
"""

from __future__ import annotations

import contextvars
import logging
from contextlib import contextmanager
from typing import Callable, Iterator, List, Optional

__all__ = ["note", "notes_to", "collect_notes"]

_SINK: contextvars.ContextVar[Optional[Callable[[str], None]]] = contextvars.ContextVar("trtwidgets_notes",
                                                                                        default=None)


def note(text: str) -> None:
    """Tell the user ``text`` (one sentence, no trailing period needed)."""
    sink = _SINK.get()
    if sink is not None:
        sink(text)
    else:
        logging.getLogger("trtwidgets").warning("note: %s", text)


@contextmanager
def notes_to(sink: Callable[[str], None]) -> Iterator[None]:
    """Send every :func:`note` made inside the block (in this thread or task) to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


@contextmanager
def collect_notes(forward: bool = True) -> Iterator[List[str]]:
    """The notes made inside the block, in order and each text once, as a list filled while it runs.

    Parameters
    ----------
    forward : bool
        Also hand each note to the sink outside the block (the CLI's printer, an outer
        :func:`collect_notes`, or the logger), so that collecting never hides a note.

    Examples
    --------
    >>> with collect_notes() as notes:          # doctest: +SKIP
    ...     cal = tw.calibrate(model, "data/")
    >>> notes                                   # doctest: +SKIP
    ["ONNX Runtime error in Resize node '/up' ..."]
    """
    outer = _SINK.get()
    found: List[str] = []

    def sink(text: str) -> None:
        if text not in found:
            found.append(text)
        if forward:
            if outer is not None:
                outer(text)
            else:
                logging.getLogger("trtwidgets").warning("note: %s", text)

    with notes_to(sink):
        yield found
