"""One progress protocol for every long step: ``progress=True``, ``False`` or a callable of :class:`ProgressEvent`.

``tw.calibrate``, ``tw.plan``, ``tw.build`` and ``plan measure`` take the same argument: True shows the toolkit's own
bars or lines, False is silent, and a callable (a widget, a log, a notebook's own bar) receives every event and no
bar is drawn. An event names its phase and, where the phase has units of work, how many are done of how many.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from types import FrameType
from typing import Callable, Optional, Tuple, Union

__all__ = ["ProgressArg", "ProgressEvent", "ProgressSink", "emit", "split_progress", "warn_deprecated"]


@dataclass(frozen=True)
class ProgressEvent:
    """One change of a step's progress.

    Attributes
    ----------
    kind : str
        ``"start"``, ``"step"`` or ``"finish"`` of a phase.
    phase : str
        Phase name, e.g. ``"Building engine"``, ``"calibration statistics"``, ``"layer cost"``.
    parent : str, optional
        Enclosing phase (TensorRT's IProgressMonitor nests phases).
    step : int
        Units of work done so far (for ``"step"``), else 0.
    total : int, optional
        Number of units, when known.
    detail : str
        What the unit was (a layer name, a batch, an engine), may be empty.
    source : str
        Who told: ``"monitor"`` (IProgressMonitor), ``"log"`` (parsed from TensorRT's log), ``"measure"`` or
        ``"trtwidgets"``.
    t : float
        Seconds since the step started (0 where the source does not keep time).
    """

    kind: str
    phase: str
    parent: Optional[str] = None
    step: int = 0
    total: Optional[int] = None
    detail: str = ""
    source: str = "trtwidgets"
    t: float = 0.0

    def text(self) -> str:
        """One line for a status bar: the phase, ``step/total`` where counted, and the detail."""
        count = f" {self.step}/{self.total}" if self.kind == "step" and self.total else \
            (f" {self.step}" if self.kind == "step" and self.step else "")
        return f"{self.phase}{count}" + (f" ({self.detail})" if self.detail else "")


ProgressSink = Callable[[ProgressEvent], None]
ProgressArg = Union[bool, ProgressSink, None]


def split_progress(progress: ProgressArg) -> Tuple[bool, Optional[ProgressSink]]:
    """``(bars, sink)`` of a ``progress=`` argument: True -> the toolkit's bars; a callable -> its events, no bars.

    Parameters
    ----------
    progress : bool, callable or None
        What the caller passed.

    Returns
    -------
    (bool, callable or None)

    Raises
    ------
    TypeError
        ``progress`` is neither a bool nor a callable.
    """
    if progress is None or isinstance(progress, bool):
        return bool(progress), None
    if callable(progress):
        return False, progress
    raise TypeError(f"progress= takes True, False or a callable that receives a ProgressEvent, "
                    f"not {type(progress).__name__}")


def emit(sink: Optional[ProgressSink], kind: str, phase: str, **fields) -> None:
    """Send ``ProgressEvent(kind, phase, **fields)`` to ``sink`` (nothing without one)."""
    if sink is not None:
        sink(ProgressEvent(kind, phase, **fields))


def warn_deprecated(message: str) -> None:
    """A DeprecationWarning attributed to the user's line: the first caller outside this package.

    The public functions call one another (``tw.plan`` -> the planner), so a fixed ``stacklevel`` would name a
    line of the toolkit, which the user can neither see nor change.
    """
    level = 2
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("trtwidgets."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, DeprecationWarning, stacklevel=level)
