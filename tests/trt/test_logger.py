"""The log collector, decisive lines, and the ILogger adapter over real TensorRT where importable."""

from __future__ import annotations

import json
import threading

import pytest

from trtwidgets.trt.logger import LogCollector, LogLine, decisive_lines, severity_name

QDQ_ERROR = ("[network.cpp::validate::2925] Error Code 4: Internal Error (Int8 precision has been set for a layer or "
             "layer output, but int8 is not configured in the builder)")


def test_keeps_info_and_above_but_listeners_see_everything():
    seen, kept = [], []
    c = LogCollector(on_line=kept.append, listeners=[seen.append])
    c.add("VERBOSE", "=============== Computing costs for conv1")
    c.add("INFO", "Graph optimization time: 0.01 seconds.")
    c.add("ERROR", "boom\n")
    assert [x.severity for x in c.lines] == ["INFO", "ERROR"]
    assert c.lines[1].message == "boom"  # trailing newline dropped
    assert len(seen) == 3 and [x.severity for x in kept] == ["INFO", "ERROR"]
    assert c.counts["VERBOSE"] == 1 and c.errors() == (c.lines[1],)
    assert c.lines[0].t <= c.lines[1].t


def test_failing_callback_does_not_raise():
    def bad(line):
        raise RuntimeError("display broke")

    c = LogCollector(on_line=bad)
    c.add("WARNING", "w")
    assert len(c.lines) == 1 and isinstance(c.callback_errors[0], RuntimeError)


def test_threads_do_not_lose_lines():
    c = LogCollector()
    threads = [threading.Thread(target=lambda k=k: [c.add("INFO", f"{k}-{i}") for i in range(200)]) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(c.lines) == 800


def test_decisive_lines_errors_first_deduplicated_without_noise():
    lines = [
        LogLine("WARNING", "Unable to determine GPU memory usage"),
        LogLine("INFO", "Detected 1 inputs and 1 output network tensors."),
        LogLine("WARNING", "Missing scale and zero-point for tensor c1, expect fall back to non-int8 implementation"),
        LogLine("WARNING", "Missing scale and zero-point for tensor c2, expect fall back to non-int8 implementation"),
        LogLine("ERROR", QDQ_ERROR),
        LogLine("ERROR", QDQ_ERROR),
        LogLine("ERROR", "2: [builder.cpp::buildSerializedNetwork::751] Error Code 2: Internal Error (Assertion engine != nullptr failed. )"),
        LogLine("INTERNAL_ERROR", "Assertion failed: cuda"),
    ]
    out = decisive_lines(lines)
    assert out[0] == "[F] Assertion failed: cuda"
    assert out[1] == "[E] " + QDQ_ERROR
    assert out.count("[E] " + QDQ_ERROR) == 1
    assert any("Assertion engine != nullptr" in x for x in out)  # same "Error Code" prefix, different error: kept
    warn = [x for x in out if x.startswith("[W]")]
    assert len(warn) == 1 and "Missing scale" in warn[0]
    assert not any("GPU memory usage" in x or "Detected 1 inputs" in x for x in out)
    assert len(decisive_lines(lines, limit=2)) == 2


def test_jsonl_round_trip():
    c = LogCollector()
    c.add("WARNING", 'a "quoted" \x1f line')
    c.add("ERROR", "parse failed", source="parser")
    back = [LogLine(**json.loads(raw)) for raw in c.to_jsonl().splitlines()]
    assert [(x.severity, x.message, x.source) for x in back] == [(x.severity, x.message, x.source) for x in c.lines]


def test_unknown_keep_level_is_refused():
    with pytest.raises(ValueError):
        LogCollector(keep="LOUD")


def test_trt_logger_is_a_real_ilogger():
    trt = pytest.importorskip("tensorrt")
    from trtwidgets.trt.logger import trt_logger

    c = LogCollector()
    logger = trt_logger(c, trt)
    assert isinstance(logger, trt.ILogger)
    logger.log(trt.ILogger.Severity.ERROR, "from tensorrt")
    assert c.lines[-1] == LogLine("ERROR", "from tensorrt", c.lines[-1].t, "tensorrt")
    assert severity_name(trt.ILogger.Severity.INTERNAL_ERROR) == "INTERNAL_ERROR"
    assert type(trt_logger(LogCollector(), trt)) is type(logger)  # one class per tensorrt module


def test_errors_of_a_handled_call_are_demoted_to_warnings():
    c = LogCollector()
    c.add("ERROR", "before")
    with c.demoting_errors("timing cache: ") as demoted:
        c.add("ERROR", "1: [myelinCache.h::deserializeFromBuffer::52] Error Code 1: Myelin (Myelin error from unknown graph)")
        c.add("ERROR", "4: The timing cache will not be used!")
        c.add("INFO", "unchanged")
        c.add("ERROR", "ours stays an error", source="trtwidgets")
    c.add("ERROR", "after")
    sev = [(x.severity, x.message[:20]) for x in c.lines]
    assert sev == [("ERROR", "before"), ("WARNING", "timing cache: 1: [my"), ("WARNING", "timing cache: 4: The"),
                   ("INFO", "unchanged"), ("ERROR", "ours stays an error"), ("ERROR", "after")]
    assert [x.message for x in demoted] == [c.lines[1].message, c.lines[2].message]
    assert c.counts["WARNING"] == 2 and c.counts["ERROR"] == 3
    assert not any("Myelin" in d for d in decisive_lines(c.lines) if d.startswith("[E]"))
