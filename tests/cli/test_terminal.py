"""What the CLI prints reaches the terminal as text (issue 22): control characters escaped, any encoding."""

from __future__ import annotations

import io
import sys

from trtwidgets.cli._terminal import SafeStream, safe_streams, terminal_text


def test_control_characters_are_written_visibly():
    assert terminal_text("conv\x1b[31m\x1b]0;title\x07") == "conv\\x1b[31m\\x1b]0;title\\x07"
    assert terminal_text("a\u202eb\u200bc\x9b") == "a\\u202eb\\u200bc\\x9b"
    # Text, tabs, newlines and non-ASCII letters are left alone.
    assert terminal_text("N×3\tH\nW é") == "N×3\tH\nW é"


def test_a_progress_redraw_keeps_its_carriage_return_and_nothing_else_does():
    raw = io.StringIO()
    stream = SafeStream(raw)
    stream.write("\r 50%|#####     |")
    stream.write("name\rhidden")
    assert raw.getvalue() == "\r 50%|#####     |name\\x0dhidden"


def test_a_terminal_encoding_without_the_character_gets_an_escape():
    raw = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    stream = SafeStream(raw)
    assert stream.write("1×3 …") == 5
    raw.flush()
    assert raw.buffer.getvalue() == b"1\\xd73 \\u2026"


def test_the_streams_are_put_back(capsys):
    before = sys.stdout, sys.stderr
    with safe_streams():
        assert isinstance(sys.stdout, SafeStream) and isinstance(sys.stderr, SafeStream)
        print("x\x1b[2J")
        print("y\x07", file=sys.stderr)
    assert (sys.stdout, sys.stderr) == before
    out, err = capsys.readouterr()
    assert out == "x\\x1b[2J\n" and err == "y\\x07\n"
