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

A file name holding bytes that are not UTF-8 (``m\\xff.onnx``) reaches Python as a lone
surrogate (``\\udcff``); it is written as the byte it stands for, escaped (``\\xff``), so no
print of such a path fails. A stream that is closed (``>&-``) or gone is a stream that
discards what is written: the command's work is kept, and its exit code says how it went.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import re
import sys
from typing import Iterator

__all__ = ["terminal_text", "safe_streams", "SafeStream", "open_standard_descriptors"]

# C0 controls but tab and newline, DEL, C1 controls, and the invisible Unicode controls that reorder or hide text
# (bidirectional overrides and isolates, zero-width characters, the BOM), and lone surrogates (undecodable bytes
# of a file name, which no UTF-8 stream can write).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
                     "\ud800-\udfff]")


def _escape(match: "re.Match") -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the byte a file name held that was not UTF-8
        return f"\\x{code - 0xDC00:02x}"
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
        try:
            self.raw.write(safe)
        except ValueError:  # "I/O operation on closed file": a reader that closed the stream wants nothing more
            pass
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        # flush, fileno, isatty, encoding, buffer ...: those of the real stream.
        return getattr(self.raw, name)


def open_standard_descriptors() -> None:
    """Point a closed descriptor 0, 1 or 2 (``>&-``, ``2>&-``) at the null device.

    Otherwise the next file the command opens takes the free number, and whatever is written to
    "standard output" from C code (ONNX Runtime's or TensorRT's logs) lands in that file, a
    calibration cache or a model. Called once, by the command line's entry point.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


class _Discard(io.TextIOBase):
    """A text stream that keeps nothing (what ``print`` writes where there is no stream)."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        return len(text)

    def isatty(self) -> bool:
        return False


def _stream_or_null(stream):
    # None where Python started with the descriptor closed (>&-) or without a console (pythonw): what is printed
    # there is discarded, and flush() works.
    return stream if stream is not None else _Discard()


@contextlib.contextmanager
def safe_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` replaced by :class:`SafeStream` wrappers while the block runs."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = SafeStream(_stream_or_null(out))
    sys.stderr = SafeStream(_stream_or_null(err))
    try:
        yield
    finally:
        if isinstance(sys.stdout, SafeStream):
            sys.stdout = out
        if isinstance(sys.stderr, SafeStream):
            sys.stderr = err
