"""Notes for the user from deep inside a computation (a file skipped, an image scaled), without warnings.

:func:`note` hands a sentence to the sink installed by :func:`notes_to` (the CLI prints ``note: ...``
on stderr, once per text); without one it goes to the ``trtwidgets`` logger, whose last-resort
handler prints it on stderr, so a notebook or script sees it too. Python warnings are not used:
the test suite turns the package's own warnings into errors, and a note is not a failure.
"""

from __future__ import annotations

import contextvars
import logging
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

__all__ = ["note", "notes_to"]

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
