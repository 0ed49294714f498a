"""Fuzz what a user's metric answers with (issue 45): every value is a float or a UserError, nothing else.

A metric is the user's code; its return value is whatever Python allows: huge integers and fractions (no
float holds them), float subclasses whose ``__float__`` raises or sleeps, objects whose ``__repr__`` or
``__str__`` raise, numpy scalars and arrays of every kind, containers. :func:`call_metric` must answer with a
float (never NaN) or a :class:`UserError` with what, why and fix, within the time limit, with the working
folder and standard output as they were: the value is turned into a float inside the guard.
"""

from __future__ import annotations

import fractions
import os
import time
from decimal import Decimal

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from trtwidgets.core.accuracy.metric_guard import METRIC_SECONDS_ENV, call_metric
from trtwidgets.core.common.errors import UserError

from .fuzzing import fuzz_settings, only_user_errors


class _FloatRaises(float):
    def __float__(self):
        raise RuntimeError("no float")


class _FloatSlow(float):
    def __float__(self):
        time.sleep(5)
        return 1.0


class _ReprRaises(float):
    def __float__(self):
        raise ValueError("no float")

    def __repr__(self):
        raise RuntimeError("no repr")


class _Hostile:
    """Not a number at all, with a __repr__ and __str__ that raise."""

    def __repr__(self):
        raise RuntimeError("no repr")

    __str__ = __repr__


class _Chdir(float):
    """A float whose conversion moves the working folder (a metric's side effect hiding in __float__)."""

    def __float__(self):
        os.chdir("/")
        return 0.5


def _numpy_values():
    kinds = [np.int8, np.int64, np.uint64, np.float16, np.float32, np.float64, np.longdouble, np.complex64,
             np.bool_]
    def make(kind, x, shape):
        with np.errstate(over="ignore", invalid="ignore"):  # a cast of inf or nan to an integer is a value too
            return np.full(shape, x).astype(kind)

    return st.builds(make, st.sampled_from(kinds), st.floats(allow_nan=True, allow_infinity=True, width=32),
                     st.sampled_from([(), (1,), (1, 1), (2,), (0,)]))


_FIXED = [_FloatRaises(1.0), _FloatSlow(1.0), _ReprRaises(2.0), _Hostile(), _Chdir(0.5), 10 ** 400, -(10 ** 5000),
          fractions.Fraction(10 ** 400, 3), fractions.Fraction(1, 3), Decimal("1e400"), Decimal("0.5"), 1 + 2j,
          True, None, "0.5", b"1", [0.5], {"score": 0.5}, float("nan"), float("inf"), -0.0, 2 ** 1023 * 2 - 1]

values = st.one_of(st.sampled_from(_FIXED), st.integers(-10 ** 320, 10 ** 320),
                   st.fractions(), st.floats(allow_nan=True, allow_infinity=True), _numpy_values(),
                   st.text(max_size=8), st.lists(st.floats(), max_size=3))


@fuzz_settings(400)
@given(value=values)
@example(value=10 ** 400)  # issue 45: OverflowError in checked_value, outside the guard (a traceback)
@example(value=fractions.Fraction(10 ** 400, 3))  # the same through Fraction.__float__
@example(value=_FloatRaises(1.0))  # an object whose __float__ raises
@example(value=_FloatSlow(1.0))  # a slow __float__ escaped TRTWIDGETS_METRIC_SECONDS and hung the plan
@example(value=_Chdir(0.5))  # moved the working folder: a relative --out landed in /
def test_whatever_a_metric_returns_is_a_float_or_a_clear_error(value, capsys, monkeypatch):
    monkeypatch.setenv(METRIC_SECONDS_ENV, "1")
    folder = os.getcwd()
    started = time.monotonic()
    try:
        result = only_user_errors(call_metric, lambda reference, candidate: value, "fuzz:metric", {}, {})
    finally:
        moved, _ = os.getcwd() != folder, os.chdir(folder)
    assert time.monotonic() - started < 4.5, "the time limit did not hold"
    assert not moved, "the metric's working folder was kept"
    assert capsys.readouterr().out == ""
    if isinstance(result, UserError):
        assert result.why and result.fix, result.message
        assert "fuzz:metric" in result.what
    else:
        assert type(result) is float and result == result, result


@fuzz_settings(100)
@given(text=st.text(max_size=40))
def test_what_a_metric_prints_never_reaches_standard_output(text, capsys):
    def metric(reference, candidate):
        print(text)
        return 0.5

    assert call_metric(metric, "fuzz:prints", {}, {}) == 0.5
    out, err = capsys.readouterr()
    assert out == "" and text in err
