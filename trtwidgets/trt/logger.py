"""TensorRT's log, kept as values and reduced to the lines that explain a failure.

:class:`LogCollector` is pure Python: it stores :class:`LogLine` values, forwards
each one to a callback (the widget's log pane, a progress parser), and picks the
*decisive* lines of a failed build (:func:`decisive_lines`). :func:`trt_logger`
wraps a collector in a real ``tensorrt.ILogger`` subclass, created once per
TensorRT module, because the base class only exists once TensorRT is imported.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .interfaces import interface_subclass
from .probe import enum_name

#: Severities from most to least severe (``tensorrt.ILogger.Severity`` member names).
SEVERITIES = ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}

# Warnings that explain a failure better than the error that follows them.
_TELLING_WARNINGS = re.compile(
    r"missing scale and zero-point|calibration failure|no implementation|could not find any implementation|"
    r"int8 is not configured|unsupported|not supported|out of memory|insufficient|skipping tactic|"
    r"cublas|cudnn|plugin|fail|error|invalid|mismatch|dynamic",
    re.IGNORECASE,
)
# Harmless on the GPU machine (DEVELOPERS.md, "The GPU machine"); never decisive.
_NOISE = re.compile(r"Unable to determine GPU memory usage|onnx2trt_utils\.cpp.*INT64 weights|"
                    r"Your ONNX model has been generated with INT64 weights", re.IGNORECASE)


@dataclass(frozen=True)
class LogLine:
    """One message from TensorRT (or from trtwidgets about the build).

    Attributes
    ----------
    severity : str
        One of :data:`SEVERITIES`.
    message : str
    t : float
        Seconds since the collector started (0 for lines made elsewhere).
    source : str
        ``"tensorrt"``, ``"parser"`` (ONNX parser errors) or ``"trtwidgets"``.
    """

    severity: str
    message: str
    t: float = 0.0
    source: str = "tensorrt"

    @property
    def is_error(self) -> bool:
        """True for ERROR and INTERNAL_ERROR lines."""
        return self.severity in ("INTERNAL_ERROR", "ERROR")

    def format(self) -> str:
        """``[E] message`` as TensorRT's own logger prints it."""
        tag = {"INTERNAL_ERROR": "F", "ERROR": "E", "WARNING": "W", "INFO": "I", "VERBOSE": "V"}.get(self.severity, "?")
        return f"[{tag}] {self.message}"

    def to_dict(self) -> dict:
        """The line as a JSON-ready dict (one line of ``build.log.jsonl``)."""
        return {"t": round(self.t, 4), "severity": self.severity, "source": self.source, "message": self.message}


def severity_name(severity) -> str:
    """The name of a ``tensorrt.ILogger.Severity`` (or a name already), upper-case."""
    return enum_name(severity).upper()


class LogCollector:
    """Collects log lines; thread-safe, since TensorRT may log from its own threads.

    Parameters
    ----------
    on_line : callable, optional
        Called with every :class:`LogLine` that is kept.
    keep : str
        Least severe severity that is stored (``"INFO"`` by default; builds log
        tens of thousands of VERBOSE lines).
    listeners : sequence of callable, optional
        Called with *every* line, kept or not (the progress parser reads VERBOSE ones).
    """

    def __init__(self, on_line: Optional[Callable[[LogLine], None]] = None, keep: str = "INFO",
                 listeners: Sequence[Callable[[LogLine], None]] = ()):
        if keep not in _RANK:
            raise ValueError(f"keep must be one of {SEVERITIES}, got {keep!r}")
        self._keep = _RANK[keep]
        self._on_line = on_line
        self._listeners = list(listeners)
        self._lines: List[LogLine] = []
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self.counts: Dict[str, int] = {s: 0 for s in SEVERITIES}
        self.callback_errors: List[BaseException] = []
        self._demote: List[Tuple[str, List[LogLine]]] = []

    def add_listener(self, fn: Callable[[LogLine], None]) -> None:
        """Call ``fn`` with every line, kept or not (e.g. TensorRT 8.6's phase parser)."""
        self._listeners.append(fn)

    @contextlib.contextmanager
    def demoting_errors(self, prefix: str = ""):
        """While active, TensorRT's ERROR lines are recorded as WARNING (``prefix`` + message).

        For calls whose failure the toolkit handles itself: TensorRT 8.6 logs
        ``[E] The timing cache will not be used!`` for a cache it cannot read, and
        the build goes on without it. Yields the list of lines demoted so far.
        """
        entry: Tuple[str, List[LogLine]] = (prefix, [])
        self._demote.append(entry)
        try:
            yield entry[1]
        finally:
            self._demote.remove(entry)

    def add(self, severity, message: str, source: str = "tensorrt") -> LogLine:
        """Record one message; returns the line."""
        sev = severity_name(severity)
        message = str(message).rstrip("\n")
        demote = self._demote[-1] if self._demote and sev == "ERROR" and source == "tensorrt" else None
        if demote is not None:
            sev, message = "WARNING", f"{demote[0]}{message}"
        line = LogLine(sev, message, time.perf_counter() - self._t0, source)
        if demote is not None:
            demote[1].append(line)
        with self._lock:
            self.counts[sev] = self.counts.get(sev, 0) + 1
            kept = _RANK.get(sev, 0) <= self._keep
            if kept:
                self._lines.append(line)
        # A failing callback must not take TensorRT down with it (exceptions cannot cross its C++ frames).
        for fn in self._listeners + ([self._on_line] if kept and self._on_line else []):
            try:
                fn(line)
            except Exception as exc:
                self.callback_errors.append(exc)
        return line

    @property
    def lines(self) -> Tuple[LogLine, ...]:
        """The kept lines so far, oldest first."""
        with self._lock:
            return tuple(self._lines)

    def errors(self) -> Tuple[LogLine, ...]:
        """The kept ERROR and INTERNAL_ERROR lines."""
        return tuple(line for line in self.lines if line.is_error)

    def to_jsonl(self) -> str:
        """The kept lines as JSON lines (the build directory's ``build.log.jsonl``)."""
        return "".join(json.dumps(line.to_dict()) + "\n" for line in self.lines)


def decisive_lines(lines: Iterable[LogLine], limit: int = 12) -> Tuple[str, ...]:
    """The lines that explain a failure: errors first, then telling warnings.

    Duplicates are dropped (TensorRT repeats an error once per layer or tactic)
    and harmless noise is skipped. Each line is formatted as ``[E] message``.
    """
    lines = [line for line in lines if not _NOISE.search(line.message)]
    errors = [line for line in lines if line.is_error]
    warnings = [line for line in lines if line.severity == "WARNING" and _TELLING_WARNINGS.search(line.message)]
    out: List[str] = []
    seen = set()
    for line in sorted(errors, key=lambda x: _RANK[x.severity]) + warnings:
        key = _dedupe_key(line.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(line.format())
        if len(out) >= limit:
            break
    return tuple(out)


def _dedupe_key(message: str) -> str:
    # Lines that differ only in a layer name or number are one finding.
    return re.sub(r"\d+", "#", re.sub(r"'[^']*'|\"[^\"]*\"", "''", message))[:300]


# -- the tensorrt.ILogger adapter -----------------------------------------------------------------

def _logger_init(self, collector: LogCollector):
    self._trt_base.__init__(self)
    self.collector = collector


def _logger_log(self, severity, msg):
    self.collector.add(severity, msg)


def trt_logger(collector: LogCollector, trt_module=None):
    """A ``tensorrt.ILogger`` that sends every message to ``collector``.

    Parameters
    ----------
    collector : LogCollector
    trt_module : module, optional
        The :mod:`tensorrt` module (default: :func:`trtwidgets.trt.tensorrt`).
    """
    cls = interface_subclass(trt_module, "ILogger", "TrtWidgetsLogger", {"__init__": _logger_init, "log": _logger_log},
                             "tensorrt.ILogger forwarding to a trtwidgets LogCollector.")
    return cls(collector)
