"""Regular expressions typed by a user, matched against node and layer names in bounded time.

Python's ``re`` backtracks: ``--exclude '(a+)+$'`` against a node name of forty ``a`` took minutes,
and a model may hold names thousands of characters long. A user's pattern is therefore:

- at most :data:`MAX_PATTERN_CHARS` long;
- refused before any matching when its shape is one that backtracks without bound (what/why/fix):
  a repetition inside another repetition whose length varies (``(a+)+``, ``(a*b?)*``, ``(.*x){20}``),
  alternatives inside a repetition that can start with the same character (``(a|ab)*``), more than
  :data:`MAX_OPEN_REPEATS` unbounded repetitions in a row (``.*a.*a.*a.*a.*a``), and back-references;
- matched under a time limit (:func:`match_time_limit`, :data:`MATCH_SECONDS`) where the system can
  interrupt a match (the main thread, on POSIX), so a shape the checks above miss still ends, with
  a clear error.

A pattern that names a node exactly is matched as a name first, without any regular expression.
"""

from __future__ import annotations

import re
import signal
import threading
from contextlib import contextmanager
from typing import Iterator, Optional, Type

from .errors import UserError

try:  # Python >= 3.11
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # Python 3.9, 3.10
    import sre_parse as _sre_parse

__all__ = ["MAX_PATTERN_CHARS", "MAX_OPEN_REPEATS", "MATCH_SECONDS", "check_pattern", "compile_pattern",
           "match_time_limit"]

#: The longest pattern accepted.
MAX_PATTERN_CHARS = 1000
#: The most unbounded repetitions (``*``, ``+``, ``{n,}``) one pattern may hold: each one multiplies the work of
#: a failing match by the name's length.
MAX_OPEN_REPEATS = 4
#: The time one pattern may take to be matched against all names of a model.
MATCH_SECONDS = 10.0

_P = _sre_parse
_REPEATS = tuple(op for op in (getattr(_P, "MAX_REPEAT", None), getattr(_P, "MIN_REPEAT", None),
                               getattr(_P, "POSSESSIVE_REPEAT", None)) if op is not None)
_WIDE = object()  # a first-character set that may hold any character


def _refusal(error: Type[UserError], pattern: str, what: str, why: str) -> UserError:
    return error(f"The {what} {pattern[:80]!r} could take practically forever to match.",
                 f"{why} Python's regular expressions try every way such a pattern could match, and that number "
                 "grows exponentially (or as a high power) with the length of a name.",
                 "Write the name itself, or a simpler expression: a prefix or suffix with one '.*' "
                 "(e.g. 'backbone/block3/.*'), or alternatives of whole names ('conv1|conv2').")


def _first(items) -> object:
    """The characters a parsed sequence can start with: a set of code points, or _WIDE."""
    for op, av in items:
        if op is _P.LITERAL:
            return {av}
        if op is _P.IN:
            chars = set()
            for sub_op, sub_av in av:
                if sub_op is _P.LITERAL:
                    chars.add(sub_av)
                elif sub_op is _P.RANGE and sub_av[1] - sub_av[0] < 512:
                    chars.update(range(sub_av[0], sub_av[1] + 1))
                else:
                    return _WIDE
            return chars
        if op is _P.SUBPATTERN:
            return _first(av[-1])
        if op is _P.AT:
            continue  # ^, $, \b take no character
        return _WIDE
    return set()


def _can_be_empty(items) -> bool:
    try:
        return items.getwidth()[0] == 0
    except (AttributeError, TypeError, OverflowError):
        return True  # cannot tell: the careful answer


def _overlap(a, b) -> bool:
    return a is _WIDE or b is _WIDE or bool(a & b)


class _Shape:
    """Walks a parsed pattern and says why it backtracks without bound (or '' when it does not)."""

    def __init__(self) -> None:
        self.open_repeats = 0

    def check(self, items, in_repeat: bool, times: int = 1) -> str:
        for op, av in items:
            why = self._one(op, av, in_repeat, times)
            if why:
                return why
        return ""

    def _one(self, op, av, in_repeat: bool, times: int) -> str:
        if op in _REPEATS:
            low, high, body = av
            varies = high != low
            if varies and in_repeat:
                return "It repeats a part whose own length varies (a repetition inside a repetition, e.g. (a+)+)."
            if high == _P.MAXREPEAT:
                self.open_repeats += times
                if self.open_repeats > MAX_OPEN_REPEATS:
                    return (f"It holds more than {MAX_OPEN_REPEATS} unbounded repetitions ('*', '+'); a name that "
                            "almost matches is tried in every way of splitting it among them.")
            return self.check(body, in_repeat or high > 1, times * (high if high != _P.MAXREPEAT else 1))
        if op is _P.BRANCH:
            alternatives = av[1]
            if in_repeat:
                if any(_can_be_empty(alt) for alt in alternatives):
                    return ("It repeats alternatives one of which can match nothing (e.g. (a|aa)*, which Python "
                            "reads as a(|a)*), so a name can be split among them in many ways.")
                firsts = [_first(alt) for alt in alternatives]
                for i, a in enumerate(firsts):
                    if any(_overlap(a, b) for b in firsts[i + 1:]):
                        return ("It repeats alternatives that can start with the same character (e.g. (a|ab)*), "
                                "so a name can be split among them in many ways.")
            for alt in alternatives:
                why = self.check(alt, in_repeat, times)
                if why:
                    return why
            return ""
        if op is _P.SUBPATTERN:
            return self.check(av[-1], in_repeat, times)
        if op in (_P.ASSERT, _P.ASSERT_NOT):
            return self.check(av[1], in_repeat, times)
        if op in (_P.GROUPREF, getattr(_P, "GROUPREF_EXISTS", None)):
            return "It refers back to a group (\\1, (?(1)...)), which regular expressions can only match by trying."
        return ""


def check_pattern(pattern: str, what: str = "pattern", error: Type[UserError] = UserError) -> None:
    """Refuse a ``pattern`` that is too long or backtracks without bound (see the module docstring).

    A pattern that is no valid regular expression passes (it can still name a node exactly).

    Raises
    ------
    UserError
        (or ``error``) naming the pattern, why it is refused, and what to write instead.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise error(f"The {what} is {len(pattern):,} characters long (it starts {pattern[:60]!r}).",
                    f"A name pattern is at most {MAX_PATTERN_CHARS} characters; a longer one is damaged or is no "
                    "pattern.", "Give the node's name, or a short regular expression.")
    try:
        parsed = _P.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return
    why = _Shape().check(list(parsed), False)
    if why:
        raise _refusal(error, pattern, what, why)


def compile_pattern(pattern: str, what: str = "pattern", error: Type[UserError] = UserError) -> Optional[re.Pattern]:
    """``pattern`` compiled after :func:`check_pattern`, or None when it is no valid regular expression."""
    check_pattern(pattern, what, error)
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None


@contextmanager
def match_time_limit(pattern: str, what: str = "pattern", error: Type[UserError] = UserError,
                     seconds: float = MATCH_SECONDS) -> Iterator[None]:
    """Stop the matching done inside the block after ``seconds``, as a clear error.

    Only where a match can be interrupted: in the main thread, on a system with ``setitimer``, and when
    no other interval timer is running (the block then runs without a limit; :func:`check_pattern` has
    already refused the shapes known to run away).
    """
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0))
    if not usable:
        yield
        return

    class _Expired(Exception):
        pass

    def expire(signum, frame):
        raise _Expired

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Expired:
        raise error(f"Matching the {what} {pattern[:80]!r} took more than {seconds:g} s, so it was stopped.",
                    "Python's regular expressions try every way a pattern could match; for this pattern and these "
                    "names that takes practically forever.",
                    "Write the name itself, or a simpler expression: a prefix or suffix with one '.*'.") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
