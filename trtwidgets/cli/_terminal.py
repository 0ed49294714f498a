"""What the command line prints reaches the terminal as text, never as terminal commands.

Node, layer, tensor and file names come from the user's files. A name holding
an ANSI escape (``\\x1b[2J`` clears the screen, ``\\x1b]8;;...`` makes a link,
``\\x1b]0;...`` retitles the window) or another control character would act on
the terminal when printed raw. Every CLI print goes through the streams of
:func:`safe_streams`, which write such characters visibly escaped (``\\x1b``,
``\\u202e``), and never fail on a character the terminal's encoding lacks
(``PYTHONIOENCODING=ascii``: ``×`` is written ``\\xd7``).

One exception keeps progress bars working: a write that *starts* with ``\\r``
(tqdm redrawing its line) keeps that one ``\\r``.
"""

from __future__ import annotations

import codecs
import contextlib
import re
import sys
from typing import Iterator

__all__ = ["terminal_text", "safe_streams", "SafeStream"]

# C0 controls but tab and newline, DEL, C1 controls, and the invisible Unicode controls that reorder or hide text
# (bidirectional overrides and isolates, zero-width characters, the BOM).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def _escape(match: "re.Match") -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: str) -> str:
    """``text`` with control characters written as visible escapes (``"\\x1b[31m"`` -> ``"\\\\x1b[31m"``).

    Tabs and newlines are kept. Used for everything the CLI prints.
    """
    return _UNSAFE.sub(_escape, text)


class SafeStream:
    """A text stream that escapes control characters (:func:`terminal_text`) and unencodable characters.

    Parameters
    ----------
    raw : text stream
        Where the text goes (``sys.stdout`` / ``sys.stderr`` as they were).
    """

    def __init__(self, raw):
        self.raw = raw
        encoding = getattr(raw, "encoding", None) or "utf-8"
        try:
            self._codec = codecs.lookup(encoding).name
        except LookupError:
            self._codec = "utf-8"

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            return self.raw.write(text)
        lead = "\r" if text.startswith("\r") else ""
        safe = lead + terminal_text(text[len(lead):])
        if self._codec not in ("utf-8", "utf-16", "utf-32"):
            safe = safe.encode(self._codec, errors="backslashreplace").decode(self._codec, errors="replace")
        self.raw.write(safe)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        # flush, fileno, isatty, encoding, buffer ...: those of the real stream.
        return getattr(self.raw, name)


@contextlib.contextmanager
def safe_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` replaced by :class:`SafeStream` wrappers while the block runs."""
    out, err = sys.stdout, sys.stderr
    # None where Python runs without a console (pythonw): nothing is printed there anyway.
    sys.stdout = SafeStream(out) if out is not None else out
    sys.stderr = SafeStream(err) if err is not None else err
    try:
        yield
    finally:
        if isinstance(sys.stdout, SafeStream):
            sys.stdout = out
        if isinstance(sys.stderr, SafeStream):
            sys.stderr = err
