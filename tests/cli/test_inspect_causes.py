"""``trtwidgets inspect`` explains each why-not-INT8 cause once, then the short per-layer reasons (issue 15)."""

from __future__ import annotations

from tests.conftest import FIXTURES
from trtwidgets.cli import main


def test_each_cause_once_and_short_rows(capsys):
    assert main(["inspect", str(FIXTURES / "trt86" / "cls_static_qdq_int8" / "engine.graph.json")]) == 0
    out = capsys.readouterr().out
    assert out.count("why: Explicit quantization: TensorRT runs a layer in INT8 only where") == 1
    rows = [line for line in out.splitlines() if ": no Q/DQ on '" in line]
    assert len(rows) == 5 and all(len(r.split("]: ", 1)[1]) < 90 for r in rows)
