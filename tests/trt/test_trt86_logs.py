"""The real TensorRT 8.6 build logs of the H200 run (tests/fixtures/trt86/tiny/), without a GPU.

In that run every build after the first logged the timing-cache complaint as [E],
and a failed build's message led with it ("TensorRT said: [E] ... Myelin ...")
instead of the real cause. The build now records those lines as warnings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtwidgets.trt.build import build_failure
from trtwidgets.trt.logger import LogCollector, LogLine

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "trt86" / "tiny"
REAL_CAUSE = ("4: [shapeContext.cpp::getInterval::3338] Error Code 4: Internal Error (?: Input dimensions with this name "
              "are inconsistent.)")


def _lines(name):
    path = TINY / name / "build.log.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not committed")
    # build.log.jsonl: one LogLine.to_dict() a line (LogCollector.to_jsonl).
    return tuple(LogLine(**json.loads(raw)) for raw in path.read_text(encoding="utf-8").splitlines() if raw.strip())


def test_the_h200_logs_hold_the_timing_cache_complaint():
    lines = _lines("fp16")
    errors = [line.message for line in lines if line.is_error]
    assert any("myelinCache.h::deserializeFromBuffer" in m for m in errors), errors
    assert any("The timing cache will not be used!" in m for m in errors), errors
    # The first build of the run had no cache to read.
    assert not [line for line in _lines("fp32") if line.is_error]


def test_demoted_complaint_no_longer_leads_a_failure():
    real = _lines("fp16")
    complaint = [line for line in real if line.is_error]
    collector = LogCollector()
    with collector.demoting_errors("timing cache: ") as demoted:
        for line in complaint:
            collector.add(line.severity, line.message)
    collector.add("ERROR", REAL_CAUSE)
    assert len(demoted) == len(complaint) == 2
    err = build_failure("TensorRT could not build cls.onnx.", collector.lines)
    assert err.log_lines[0] == f"[E] {REAL_CAUSE}", err.log_lines
    assert not any(d.startswith("[E]") and "Myelin" in d for d in err.log_lines)
