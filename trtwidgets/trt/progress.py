"""Build progress: phase names and steps, from TensorRT itself where it can tell.

TensorRT >= 10 reports phases through ``IProgressMonitor`` (``phase_start``,
``step_complete``, ``phase_finish``); :func:`trt_progress_monitor` wraps a
:class:`BuildProgress` in one. TensorRT 8.6 has no such interface, so
:class:`LogPhaseParser` reads the phases from its log lines ("Starting
Calibration", "Calibrated batch 3", "Computing costs for conv1", ...) and the
bar becomes a spinner with a phase label.

Every source produces :class:`ProgressEvent` values for one sink: a callable
(the build panel), a tqdm renderer (``tqdm.auto``, imported lazily) or, where
tqdm is absent (the Python 3.9 TensorRT environment), plain lines on stderr.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..core.common.progress import ProgressEvent


class BuildProgress:
    """Receives progress from all sources, keeps phase timings, forwards to a sink.

    Parameters
    ----------
    sink : callable, optional
        Called with every :class:`ProgressEvent`.
    cancel : threading.Event, optional
        When set, :meth:`keep_going` turns False; IProgressMonitor then asks
        TensorRT (>= 10) to stop the build.
    """

    def __init__(self, sink: Optional[Callable[[ProgressEvent], None]] = None,
                 cancel: Optional[threading.Event] = None):
        self.sink = sink
        self.cancel = cancel
        self._t0 = time.perf_counter()
        self._open: Dict[str, Tuple[float, Optional[str], Optional[int]]] = {}
        self._steps: Dict[str, int] = {}
        self.timings: List[Tuple[str, Optional[str], float]] = []
        self.sink_errors: List[BaseException] = []
        self._lock = threading.Lock()

    def _emit(self, event: ProgressEvent) -> None:
        if self.sink is None:
            return
        try:
            self.sink(event)
        except Exception as exc:
            self.sink_errors.append(exc)

    def now(self) -> float:
        """Seconds since this progress started."""
        return time.perf_counter() - self._t0

    def start(self, phase: str, parent: Optional[str] = None, total: Optional[int] = None,
              source: str = "trtwidgets") -> None:
        """Open ``phase`` (inside ``parent``, with ``total`` steps where known) and tell the sink."""
        with self._lock:
            self._open[phase] = (self.now(), parent, total)
            self._steps[phase] = 0
        self._emit(ProgressEvent("start", phase, parent, 0, total, "", source, self.now()))

    def step(self, phase: str, step: Optional[int] = None, detail: str = "", source: str = "trtwidgets") -> None:
        """Count one step of ``phase`` (or set it to ``step``), opening the phase if needed."""
        if phase not in self._open:
            # A step of a phase nobody announced (log parsing): announce it, so sinks open a bar.
            self.start(phase, source=source)
        with self._lock:
            self._steps[phase] = self._steps.get(phase, 0) + 1 if step is None else step
            _, parent, total = self._open[phase]
            done = self._steps[phase]
        self._emit(ProgressEvent("step", phase, parent, done, total, detail, source, self.now()))

    def finish(self, phase: str, source: str = "trtwidgets") -> None:
        """Close ``phase`` and record its duration; a phase not open is ignored."""
        with self._lock:
            started = self._open.pop(phase, None)
            if started is None:
                return
            t_start, parent, total = started
            self.timings.append((phase, parent, self.now() - t_start))
            done = self._steps.pop(phase, 0)
        self._emit(ProgressEvent("finish", phase, parent, done, total, "", source, self.now()))

    def finish_all(self) -> None:
        """Close every open phase (innermost last opened first)."""
        for phase in reversed(list(self._open)):
            self.finish(phase)

    @property
    def open_phases(self) -> Tuple[str, ...]:
        """Names of the phases open now, in the order they were opened."""
        return tuple(self._open)

    def keep_going(self) -> bool:
        """False once the cancel event is set."""
        return not (self.cancel is not None and self.cancel.is_set())

    def timings_dict(self) -> List[dict]:
        """``{phase, parent, seconds}`` for every finished phase, in finishing order."""
        return [{"phase": p, "parent": parent, "seconds": round(s, 4)} for p, parent, s in self.timings]


# -- TensorRT 8.6: phases from the log -------------------------------------------------------------

# (pattern, phase, action) in the order TensorRT 8.6 logs them. "step" lines carry a detail group.
_LOG_RULES = (
    (re.compile(r"Starting Calibration"), "Calibration", "start"),
    (re.compile(r"Calibrated batch (\d+)"), "Calibration", "batch"),
    (re.compile(r"Calibration completed in"), "Calibration", "finish"),
    (re.compile(r"Graph optimization time"), "Graph optimization", "finish"),
    (re.compile(r"Original: \d+ layers|Applying generic optimizations"), "Graph optimization", "start"),
    (re.compile(r"=+ Computing costs for:?\s*(.*)"), "Tactic selection", "step"),
    (re.compile(r"Formats and tactics selection completed"), "Tactic selection", "finish"),
    (re.compile(r"Total Activation Memory|\[BlockAssignment\]"), "Memory assignment", "step"),
    (re.compile(r"Engine generation completed in"), "Memory assignment", "finish"),
)


class LogPhaseParser:
    """A log listener that turns TensorRT 8.6's log lines into progress events."""

    def __init__(self, progress: BuildProgress):
        self.progress = progress

    def __call__(self, line) -> None:
        msg = line.message
        for pattern, phase, action in _LOG_RULES:
            m = pattern.search(msg)
            if not m:
                continue
            if action == "start":
                if phase not in self.progress.open_phases:
                    self.progress.start(phase, source="log")
            elif action == "batch":
                # An absolute count, so that it agrees with the calibrator's own per-batch steps.
                n = int(m.group(1)) + 1
                self.progress.step(phase, step=n, detail=f"batch {n}", source="log")
            elif action == "step":
                detail = m.group(1).strip() if m.groups() else ""
                self.progress.step(phase, detail=detail[:80], source="log")
            else:
                self.progress.finish(phase, source="log")
            return


# -- TensorRT >= 10: IProgressMonitor --------------------------------------------------------------

def _monitor_init(self, progress: BuildProgress):
    self._trt_base.__init__(self)
    self.progress = progress


def _phase_start(self, phase_name, parent_phase, num_steps):
    self.progress.start(str(phase_name), str(parent_phase) if parent_phase else None, int(num_steps), source="monitor")


def _step_complete(self, phase_name, step):
    self.progress.step(str(phase_name), int(step) + 1, source="monitor")
    return self.progress.keep_going()


def _phase_finish(self, phase_name):
    self.progress.finish(str(phase_name), source="monitor")


def has_progress_monitor(trt_module) -> bool:
    """Whether this TensorRT has ``IProgressMonitor`` (10.0 and later)."""
    return hasattr(trt_module, "IProgressMonitor")


def trt_progress_monitor(progress: BuildProgress, trt_module):
    """An ``IProgressMonitor`` feeding ``progress``, or None where TensorRT has none (8.6)."""
    if not has_progress_monitor(trt_module):
        return None
    from .interfaces import interface_subclass

    cls = interface_subclass(trt_module, "IProgressMonitor", "TrtWidgetsProgressMonitor",
                             {"__init__": _monitor_init, "phase_start": _phase_start,
                              "step_complete": _step_complete, "phase_finish": _phase_finish},
                             "tensorrt.IProgressMonitor feeding a trtwidgets BuildProgress.")
    return cls(progress)


# -- sinks ------------------------------------------------------------------------------------------


class TqdmSink:
    """Shows events as tqdm bars (``tqdm.auto``: a widget in Jupyter, text in a terminal).

    A phase with a known number of steps is a bar; one without is a counter
    (a spinner with the current step's detail as postfix). Without tqdm the
    events go to stderr as one line per phase start/finish.
    """

    def __init__(self, file=None):
        self.file = file if file is not None else sys.stderr
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        self._tqdm = tqdm
        self._bars: Dict[str, Any] = {}

        self._last_text = 0.0

    def __call__(self, event: ProgressEvent) -> None:
        if self._tqdm is None:
            self._text(event)
            return
        bar = self._bars.get(event.phase)
        if event.kind == "start" or bar is None:
            if bar is not None:
                bar.close()
            bar = self._tqdm(total=event.total, desc=event.phase, leave=False, file=self.file,
                             unit="step", dynamic_ncols=True)
            self._bars[event.phase] = bar
        if event.kind == "step":
            bar.n = event.step
            if event.detail:
                bar.set_postfix_str(event.detail, refresh=False)
            bar.refresh()
        elif event.kind == "finish":
            bar.close()
            self._bars.pop(event.phase, None)

    def _text(self, event: ProgressEvent) -> None:
        if event.kind == "step":
            # Steps can come thousands per second; one line per second at most.
            if event.t - self._last_text < 1.0:
                return
            self._last_text = event.t
            total = f"/{event.total}" if event.total else ""
            detail = f" {event.detail}" if event.detail else ""
            print(f"[build {event.t:7.1f}s] {event.phase}: {event.step}{total}{detail}", file=self.file)
        else:
            print(f"[build {event.t:7.1f}s] {event.phase} {'...' if event.kind == 'start' else 'done'}", file=self.file)

    def close(self) -> None:
        """Close every bar."""
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
