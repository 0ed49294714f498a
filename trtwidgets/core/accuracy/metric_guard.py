"""A metric the toolkit did not write, called so that it cannot break the plan around it.

A task metric of the user's own (``package.module:function``, a Python function, a factory given
to :func:`~.task_metrics.register_metric`) is code the planner calls once per candidate. Each call
goes through :func:`call_metric`:

* **copies**: the metric gets its own copy of every output array, so a metric that works in place
  (a softmax written into its argument) cannot change FP32's reference that every later candidate
  is compared with;
* **a time limit** (:data:`METRIC_SECONDS_ENV`, default :data:`DEFAULT_METRIC_SECONDS`): a metric that
  hangs ends the plan with a clear message instead of never. On the main thread the limit interrupts
  the metric (``SIGALRM``); elsewhere (a widget's worker thread) the metric runs in a thread of its
  own that is left behind when it overruns;
* **its answer checked**: an exception, ``sys.exit()`` inside it, or a value that is not a number
  (a string, None, NaN) is a :class:`~..common.errors.UserError` naming the metric, with the cause.
  The command line exits 2 (bad input), never 1 (1 means "no candidate meets the target").

The toolkit's own metrics are marked :func:`trusted` and called directly.
"""

from __future__ import annotations

import math
import numbers
import os
import signal
import threading
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ..common.errors import UserError

__all__ = ["DEFAULT_METRIC_SECONDS", "METRIC_SECONDS_ENV", "call_metric", "guarded", "metric_seconds", "trusted"]

#: Environment variable: the most seconds one call of a user's metric may take (0: no limit).
METRIC_SECONDS_ENV = "TRTWIDGETS_METRIC_SECONDS"
#: The limit when the variable is not set: far beyond any metric over a held-back set, short of forever.
DEFAULT_METRIC_SECONDS = 300.0
_MARK = "__trtwidgets_metric__"


class _Overran(BaseException):
    """Raised into a metric when its time is up (a BaseException: a metric's ``except Exception`` lets it pass)."""


def metric_seconds() -> Optional[float]:
    """The time limit per call in force (:data:`METRIC_SECONDS_ENV`); None for no limit.

    Raises
    ------
    UserError
        The variable holds no number of seconds.
    """
    text = os.environ.get(METRIC_SECONDS_ENV, "").strip()
    if not text:
        return DEFAULT_METRIC_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UserError(f"{METRIC_SECONDS_ENV}={text!r} is not a number of seconds.",
                        "It bounds how long one call of your metric may take.",
                        f"Set it to a number of seconds (e.g. {METRIC_SECONDS_ENV}=600), or 0 for no limit.")
    return value or None


def trusted(fn: Callable) -> Callable:
    """Mark one of the toolkit's own metric functions: :func:`guarded` leaves it as it is."""
    try:
        setattr(fn, _MARK, "trusted")
    except (AttributeError, TypeError):  # a builtin or bound method: guarded then, which is only slower
        pass
    return fn


def guarded(fn: Callable, name: str) -> Callable:
    """``fn(outputs) -> float`` called through :func:`call_metric` (unless it is trusted or guarded already)."""
    if getattr(fn, _MARK, None):
        return fn

    def metric(outputs: Mapping[str, Any]) -> float:
        return call_metric(fn, name, outputs)

    setattr(metric, _MARK, "guarded")
    return metric


def _copies(outputs: Mapping[str, Any]) -> dict:
    return {k: np.array(v, copy=True) for k, v in dict(outputs).items()}


def call_metric(fn: Callable, name: str, *outputs: Mapping[str, Any], on: str = "a candidate's outputs") -> float:
    """``fn(*outputs)`` on copies, within the time limit, its value checked (module docstring).

    Parameters
    ----------
    fn : callable
        The metric.
    name : str
        How messages name it.
    *outputs : mapping
        Output name -> array (a user's function takes the reference and the candidate).
    on : str
        What it was called on, for messages.

    Returns
    -------
    float
        A number (infinite values are numbers; NaN is not).

    Raises
    ------
    UserError
        The metric raised, exited, overran the limit, or answered with something other than a number.
    """
    args = [_copies(m) for m in outputs]
    seconds = metric_seconds()
    try:
        value = _within(seconds, lambda: fn(*args))
    except (UserError, KeyboardInterrupt):
        raise
    except _Overran:
        raise UserError(f"The metric {name} did not return within {seconds:g} s on {on}.",
                        "It is called once per candidate; a metric that hangs would hold the plan forever.",
                        f"Fix the metric (a loop that never ends, a wait for input), or allow it longer: "
                        f"{METRIC_SECONDS_ENV}=SECONDS (0: no limit).") from None
    except SystemExit as exc:
        raise UserError(f"The metric {name} called sys.exit({exc.code!r}) on {on}.",
                        "A metric answers with a number; exiting would end the plan with nothing written.",
                        "Return a float (higher is better) instead of exiting.") from None
    except BaseException as exc:  # noqa: BLE001 - the user's code: any failure is reported with its cause
        raise UserError(f"The metric {name} failed on {on}.", f"{type(exc).__name__}: {exc}"[:500],
                        "Fix the metric; it is called as function(reference, candidate) -> float with two dicts "
                        "of output name -> array (batch first).") from exc
    return checked_value(value, name, on)


def checked_value(value: Any, name: str, on: str = "a candidate's outputs") -> float:
    """``value`` as a float, or a UserError when it is no number (a string, None, a bool, NaN, an array)."""
    number = None
    if isinstance(value, np.ndarray) and value.size == 1 and np.issubdtype(value.dtype, np.number):
        value = value.reshape(())[()]
    if isinstance(value, (numbers.Real, np.number)) and not isinstance(value, (bool, np.bool_)):
        number = float(value)
    if number is None:
        shown = repr(value)
        raise UserError(f"The metric {name} returned {shown[:80]} ({type(value).__name__}) on {on}, not a number.",
                        "A candidate is judged by how far its metric falls below FP32's: that needs a number.",
                        "Return a float (higher is better), e.g. return float(score).")
    if math.isnan(number):
        raise UserError(f"The metric {name} returned NaN on {on}.",
                        "NaN compares with nothing: the candidate could be neither kept nor refused by it.",
                        "Return a finite float (higher is better); handle empty or non-finite outputs in the metric.")
    return number


def _can_alarm() -> bool:
    return (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
            and signal.getitimer(signal.ITIMER_REAL)[0] == 0.0)


def _within(seconds: Optional[float], call: Callable[[], Any]) -> Any:
    """``call()``, raising :class:`_Overran` when it takes longer than ``seconds`` (None: no limit)."""
    if seconds is None:
        return call()
    if _can_alarm():
        def overran(signum, frame):
            raise _Overran

        previous = signal.signal(signal.SIGALRM, overran)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return call()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as it was
            box["error"] = exc

    worker = threading.Thread(target=run, name="trtwidgets-metric", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise _Overran
    if "error" in box:
        raise box["error"]
    return box.get("value")
