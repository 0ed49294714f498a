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
  (a string, None, NaN, an integer or fraction too large for a float, a number whose ``__float__``
  raises) is a :class:`~..common.errors.UserError` naming the metric, with the cause. The command
  line exits 2 (bad input), never 1 (1 means "no candidate meets the target"). The conversion to a
  float runs inside the time limit too (a slow ``__float__`` is the metric's time);
* **the process as it was**: a metric that changes the working folder (``os.chdir``) has it set
  back after the call (relative output paths still mean what the user typed), and what it prints
  goes to standard error, so standard output stays the command's own (``plan --json``).

The toolkit's own metrics are marked :func:`trusted` and called directly.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import signal
import sys
import threading
from typing import Any, Callable, Iterator, Mapping, Optional

import numpy as np

from ..common.errors import UserError

__all__ = ["DEFAULT_METRIC_SECONDS", "METRIC_SECONDS_ENV", "call_metric", "guarded", "metric_seconds", "trusted",
           "user_code"]

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
        # The answer becomes a float inside the limit: a __float__ of the metric's is the metric's code.
        with user_code(name):
            return _within(seconds, lambda: checked_value(fn(*args), name, on))
    except (UserError, KeyboardInterrupt):
        raise
    except _Overran:
        raise UserError(f"The metric {name} did not return within {seconds:g} s on {on}.",
                        "It is called once per candidate; a metric that hangs would hold the plan forever.",
                        f"Fix the metric (a loop that never ends, a wait for input), or allow it longer: "
                        f"{METRIC_SECONDS_ENV}=SECONDS (0: no limit).") from None
    except SystemExit as exc:
        raise UserError(f"The metric {name} called sys.exit({_shown(exc.code)}) on {on}.",
                        "A metric answers with a number; exiting would end the plan with nothing written.",
                        "Return a float (higher is better) instead of exiting.") from None
    except BaseException as exc:
        raise UserError(f"The metric {name} failed on {on}.", _cause(exc),
                        "Fix the metric; it is called as function(reference, candidate) -> float with two dicts "
                        "of output name -> array (batch first).") from exc


@contextlib.contextmanager
def user_code(name: str) -> Iterator[None]:
    """Run a metric's code (its call, its module's import, its factory): prints to stderr, the working folder kept.

    What the code prints goes to standard error (standard output is the command's: ``plan --json``); a working
    folder it changed is set back afterwards, with a note (relative paths keep meaning what the user typed).
    """
    folder = _working_folder()
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _set_back(folder, name)


def _cause(exc: BaseException) -> str:
    """``"Type: message"`` of the user's exception, at most 500 characters (a __str__ that fails is not ours)."""
    try:
        text = str(exc)
    except Exception:
        text = "(its message could not be read)"
    return f"{type(exc).__name__}: {text}"[:500]


def _working_folder() -> Optional[str]:
    try:
        return os.getcwd()
    except OSError:  # deleted under the process: nothing to set back
        return None


def _set_back(folder: Optional[str], name: str) -> None:
    """The working folder as it was before the metric ran (a metric's ``os.chdir`` must not move the outputs)."""
    now = _working_folder()
    if folder is None or now == folder:
        return
    try:
        os.chdir(folder)
    except OSError:
        return
    from ..common.notes import note

    note(f"the metric {name} changed the working folder (to {now or 'a folder since deleted'}); it was set back "
         f"to {folder}")


def _shown(value: Any) -> str:
    """``repr(value)`` for a message, at most 80 characters; a repr that fails or is huge is not the message's."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def checked_value(value: Any, name: str, on: str = "a candidate's outputs") -> float:
    """``value`` as a float, or a UserError when it is no number (a string, None, a bool, NaN, an array)."""
    number = None
    if isinstance(value, np.ndarray) and value.size == 1 and np.issubdtype(value.dtype, np.number):
        value = value.reshape(())[()]
    if isinstance(value, (numbers.Real, np.number)) and not isinstance(value, (bool, np.bool_)):
        try:
            number = float(value)
        except OverflowError:
            raise UserError(f"The metric {name} returned {_shown(value)} ({type(value).__name__}) on {on}: too large "
                            "for a float.", "A candidate's metric is compared as a float, and this number has none.",
                            "Return a float (higher is better), e.g. a score scaled to 0..1.") from None
        except Exception as exc:
            raise UserError(f"The metric {name} returned a {type(value).__name__} on {on} that could not be made a "
                            "float.", f"float() of it raised {_cause(exc)}"[:300],
                            "Return a float (higher is better), e.g. return float(score).") from None
    if number is None:
        raise UserError(f"The metric {name} returned {_shown(value)} ({type(value).__name__}) on {on}, not a number.",
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
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=run, name="trtwidgets-metric", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise _Overran
    if "error" in box:
        raise box["error"]
    return box.get("value")
