"""Build progress from TensorRT 8.6's log lines, phase timings, and the sinks."""

from __future__ import annotations

import io
import threading

import pytest

from trtwidgets.trt.logger import LogLine
from trtwidgets.trt.progress import BuildProgress, LogPhaseParser, ProgressEvent, TqdmSink

# Lines as TensorRT 8.6 logs them during an INT8 build (shape of the real text, trimmed).
LOG_86 = [
    ("INFO", "[MemUsageChange] Init CUDA: CPU +2, GPU +0, now: CPU 18, GPU 1009 (MiB)"),
    ("INFO", "Starting Calibration."),
    ("INFO", "  Calibrated batch 0 in 0.00123 seconds."),
    ("INFO", "  Calibrated batch 1 in 0.00121 seconds."),
    ("INFO", "Calibration completed in 1.2 seconds."),
    ("VERBOSE", "Original: 4 layers"),
    ("INFO", "Graph optimization time: 0.0123 seconds."),
    ("VERBOSE", "=============== Computing costs for conv1 + relu1"),
    ("VERBOSE", "=============== Computing costs for conv2 + relu2"),
    ("VERBOSE", "Formats and tactics selection completed in 0.5 seconds."),
    ("INFO", "Total Activation Memory: 1024"),
    ("VERBOSE", "Engine generation completed in 0.8 seconds."),
]


def test_log_lines_become_phases_with_steps():
    events = []
    progress = BuildProgress(events.append)
    parser = LogPhaseParser(progress)
    for sev, msg in LOG_86:
        parser(LogLine(sev, msg))
    starts = [e.phase for e in events if e.kind == "start"]
    assert starts[:3] == ["Calibration", "Graph optimization", "Tactic selection"]
    calib_steps = [e.step for e in events if e.phase == "Calibration" and e.kind == "step"]
    assert calib_steps == [1, 2]
    tactic = [e.detail for e in events if e.phase == "Tactic selection" and e.kind == "step"]
    assert tactic == ["conv1 + relu1", "conv2 + relu2"]
    assert {p for p, _, _ in progress.timings} >= {"Calibration", "Graph optimization", "Tactic selection"}
    assert progress.open_phases == ()
    assert all(e.source == "log" for e in events)


def test_finish_all_closes_and_times_everything():
    progress = BuildProgress()
    progress.start("Building engine")
    progress.start("Calibration", parent="Building engine", total=3)
    progress.step("Calibration")
    progress.finish_all()
    assert [p for p, _, _ in progress.timings] == ["Calibration", "Building engine"]
    assert progress.timings_dict()[0]["parent"] == "Building engine"
    assert all(s >= 0 for _, _, s in progress.timings)


def test_cancel_turns_keep_going_false():
    cancel = threading.Event()
    progress = BuildProgress(cancel=cancel)
    assert progress.keep_going()
    cancel.set()
    assert not progress.keep_going()


def test_broken_sink_does_not_stop_progress():
    def bad(event):
        raise ValueError("widget closed")

    progress = BuildProgress(bad)
    progress.start("x")
    progress.finish("x")
    assert len(progress.sink_errors) == 2 and progress.timings[0][0] == "x"


def test_tqdm_sink_writes_phases():
    buf = io.StringIO()
    sink = TqdmSink(file=buf)
    sink(ProgressEvent("start", "Tactic selection", total=None))
    sink(ProgressEvent("step", "Tactic selection", step=1, detail="conv1", t=2.0))
    sink(ProgressEvent("finish", "Tactic selection", step=1))
    sink.close()
    assert "Tactic selection" in buf.getvalue()


def test_text_fallback_without_tqdm_is_throttled():
    buf = io.StringIO()
    sink = TqdmSink(file=buf)
    sink._tqdm = None  # the Python 3.9 TensorRT environment has no tqdm
    sink(ProgressEvent("start", "Calibration"))
    for k in range(50):
        sink(ProgressEvent("step", "Calibration", step=k + 1, total=50, t=0.01 * k + 1.0))
    sink(ProgressEvent("finish", "Calibration", t=2.0))
    lines = buf.getvalue().splitlines()
    assert lines[0].endswith("Calibration ...") and lines[-1].endswith("Calibration done")
    assert len(lines) <= 4  # one step line per second at most


def test_progress_monitor_on_tensorrt_86_is_absent():
    trt = pytest.importorskip("tensorrt")
    from trtwidgets.trt.progress import has_progress_monitor, trt_progress_monitor

    if has_progress_monitor(trt):
        monitor = trt_progress_monitor(BuildProgress(), trt)
        assert isinstance(monitor, trt.IProgressMonitor)
        monitor.phase_start("Building", None, 2)
        assert monitor.step_complete("Building", 0) is True
    else:
        assert trt_progress_monitor(BuildProgress(), trt) is None
