"""One build's state, handed from phase to phase, and the way phases report.

:class:`BuildState` holds what the phases of :func:`trtwidgets.trt.build.build`
make and read (the TensorRT builder, network, config, calibrator, the engine
bytes), the log collector and the progress reporter. Phases add notes to the
log with :meth:`BuildState.note` and raise :meth:`BuildState.fail` when
TensorRT refuses something.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

from ...core.common.errors import BuildError
from .. import tensorrt
from ..logger import LogCollector
from ..progress import BuildProgress, LogPhaseParser, TqdmSink
from .failure import build_failure

if TYPE_CHECKING:
    from ...core.model.load import LoadedModel


class BuildState:
    """What one build has made so far; :func:`~trtwidgets.trt.build.build` is the public entry point.

    Parameters
    ----------
    recipe : Recipe
        What to build.
    progress : bool or callable
        True: tqdm bars; a callable gets every progress event; False: silent.
    on_log : callable, optional
        Called with each log line as TensorRT logs it.
    calibration_data : optional
        Overrides ``recipe.calibration_data``.
    tactic_sources : iterable of str, optional
        Exactly these tactic sources (None: TensorRT's default).
    cancel : threading.Event, optional
        Set to stop the build.
    verbose_log : bool
        Keep VERBOSE lines in the log.
    max_calibration_batches : int, optional
        Feed TensorRT's calibrator at most this many batches.

    Raises
    ------
    TensorRTUnavailable
        TensorRT cannot be imported.
    """

    # Set by the phases, in order (TensorRT's objects are Any: its bindings carry no types).
    model: LoadedModel
    logger: Any
    builder: Any
    network: Any
    parser: Any
    config: Any
    monitor: Any
    profiles: List[Any]
    timing_cache: Any
    timing_cache_path: Optional[Path]
    empty_timing_cache: bytes
    layers: List[dict]
    gpu_name: Optional[str]
    cc: Optional[Tuple[int, int]]
    build_seconds: float
    plan: bytes
    cache_out: str

    def __init__(self, recipe, progress, on_log, calibration_data, tactic_sources, cancel, verbose_log,
                 max_calibration_batches):
        self.trt = tensorrt()
        self.recipe = recipe
        self.calibration_data = calibration_data
        self.tactic_sources = tactic_sources
        self.max_calibration_batches = max_calibration_batches
        if progress is True:
            sink = TqdmSink()
        elif callable(progress):
            sink = progress
        else:
            sink = None
        self.sink: Any = sink  # TqdmSink, the caller's callable, or None

        self.progress = BuildProgress(sink, cancel)
        self.collector = LogCollector(on_line=on_log, keep="VERBOSE" if verbose_log else "INFO")
        if not hasattr(self.trt, "IProgressMonitor"):
            # TensorRT 8.6 has no progress monitor: its log lines mark the phases instead.
            self.collector.add_listener(LogPhaseParser(self.progress))
        self.calibrator = None
        # (input, axis, new name) of each shared dim name made unique before parsing (network.py).
        self.dim_renames: tuple = ()
        self.cache_bytes_used: Optional[bytes] = None
        self.lint_findings: tuple = ()
        self.staging: Optional[Path] = None  # the build folder being written (build.py)

    def close(self) -> None:
        """Release TensorRT objects, each before the one it came from (config, parser, network, builder)."""
        if self.calibrator is not None and hasattr(self.calibrator, "free"):
            self.calibrator.free()
        for name in ("monitor", "config", "parser", "network", "builder"):
            if name in self.__dict__:
                delattr(self, name)

    def note(self, severity: str, message: str) -> None:
        """Add the toolkit's own line to the build log (``source="trtwidgets"``)."""
        self.collector.add(severity, message, source="trtwidgets")

    def fail(self, what: str, extra_messages: Sequence[str] = (), fix: Optional[str] = None,
             codes: Sequence[str] = ()) -> BuildError:
        """The :class:`BuildError` for a failure now, with the log so far (see :func:`build_failure`)."""
        return build_failure(what, self.collector.lines, self.lint_findings, extra_messages, fix, codes)
