"""core.common.name_patterns: a user's regular expression never hangs a command (issue 32)."""

from __future__ import annotations

import re
import threading
import time

import pytest

from trtwidgets.core.common.errors import UserError
from trtwidgets.core.common.name_patterns import (MAX_PATTERN_CHARS, check_pattern, compile_pattern,
                                                  match_time_limit)

RUNAWAY = ["(a+)+$", "(a*)*b", "(a|aa)*b", "(ab|a.)*c", "(.*a){20}", ".*a.*a.*a.*a.*a", "(a)\\1", "(\\w+\\s?)+$", "(a|a?)+",
           "((ab)*)+", "(x+x+)+y", "(?:a{1,5})*z"]
ORDINARY = ["conv5_.*", ".*attention.*", "(conv1|conv2)_.*", "/blocks\\.\\d+/.*", "backbone/.*/Conv", "[a-z]+_[0-9]+",
            "Conv_\\d{1,3}", "(ab)*c", "(a|b)*c", "node(_\\d+)?", "^head", "/model/(encoder|decoder)/layers\\.\\d+/.*",
            "not a regex (", "x{2}(yz){3}"]


@pytest.mark.parametrize("pattern", RUNAWAY)
def test_shapes_that_backtrack_without_bound_are_refused_before_matching(pattern):
    with pytest.raises(UserError) as info:
        check_pattern(pattern, "exclusion pattern")
    err = info.value
    assert repr(pattern) in err.what and err.why and "simpler" in err.fix


@pytest.mark.parametrize("pattern", ORDINARY)
def test_ordinary_patterns_pass(pattern):
    check_pattern(pattern)
    rx = compile_pattern(pattern)
    assert (rx is None) == (pattern == "not a regex (")


def test_every_refused_pattern_really_is_slow_and_every_passed_one_fast():
    # The checks are about time: a refused shape takes long on a name that almost matches, a passed one does not.
    name = "a" * 22 + "!"
    slow = 0
    for pattern in ("(a+)+$", "(a|a?)+$", "(\\w+\\s?)+$"):
        t0 = time.perf_counter()
        re.fullmatch(pattern, name)
        slow += time.perf_counter() - t0 > 0.05
    assert slow >= 2
    for pattern in ORDINARY[:-2]:
        t0 = time.perf_counter()
        re.fullmatch(pattern, "a" * 5000 + "!")
        assert time.perf_counter() - t0 < 0.5, pattern


def test_a_very_long_pattern_is_refused():
    with pytest.raises(UserError, match=f"{MAX_PATTERN_CHARS + 1:,} characters"):
        check_pattern("a" * (MAX_PATTERN_CHARS + 1))


def test_a_slow_match_the_checks_let_through_is_stopped_in_time():
    pattern = ".*a.*a.*a.*b"  # four unbounded repetitions: allowed, and O(n^4) on a name of a's
    check_pattern(pattern)
    rx = re.compile(pattern)
    t0 = time.perf_counter()
    with pytest.raises(UserError, match="took more than 0.3 s"):
        with match_time_limit(pattern, "exclusion pattern", seconds=0.3):
            rx.fullmatch("a" * 3000)
    assert time.perf_counter() - t0 < 5


def test_the_time_limit_leaves_no_timer_behind_and_is_skipped_outside_the_main_thread():
    import signal

    with match_time_limit("x", seconds=5):
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    seen = []

    def other():
        with match_time_limit("x", seconds=0.01):
            time.sleep(0.05)
        seen.append("done")

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert seen == ["done"]
