"""The side-by-side table of benchmarks/engines.py, from result rows (no TensorRT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import load_file_module

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engines():
    mod = load_file_module(ROOT / "benchmarks" / "engines.py", "bench_engines")
    return mod


def _row(precision, ms, ops=2.0e12, batch=32):
    return {"model": "resnet", "precision": precision, "batch": batch, "ops": ops, "tops": ops / (ms / 1e3) / 1e12,
            "latency": {"median_ms": ms, "p90_ms": ms, "p99_ms": ms, "throughput": batch / ms * 1e3},
            "accuracy": {"y": {"cosine": 0.99, "snr_db": 20.0, "topk_agreement": {"1": 0.9}}}, "reference": "fp32"}


def test_ratios_and_peak_fractions(engines):
    rows = engines.summary_rows({"rows": [_row("int8", 2.0), _row("fp16", 4.0), _row("qdq", 1.0)]})
    assert [r["precision"] for r in rows] == ["fp16", "int8", "qdq"]
    by = {r["precision"]: r for r in rows}
    assert by["int8"]["vs_fp16"] == pytest.approx(0.5) and by["qdq"]["vs_fp16"] == pytest.approx(0.25)
    # 2 TOP in 2 ms = 1000 TOP/s, against the INT8 peak; FP16's against the FP16 peak.
    assert by["int8"]["peak_fraction"] == pytest.approx(1000.0 / engines.PEAK_TOPS["int8"])
    assert by["fp16"]["peak_fraction"] == pytest.approx(500.0 / engines.PEAK_TOPS["fp16"])
    assert by["int8"]["top1"] == 0.9 and by["int8"]["label"] == "INT8 implicit"


def test_merge_keeps_the_latest_row_per_key(engines, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"rows": [_row("fp16", 4.0), _row("int8", 3.0)], "notes": {}}))
    b.write_text(json.dumps({"rows": [_row("int8", 2.0)], "notes": {"error_resnet_qdq": "parse failed"}}))
    assert engines.main(["--summary-only", "--merge", str(a), str(b), "--out", str(tmp_path / "m")]) == 0
    doc = json.loads((tmp_path / "m" / "engines.json").read_text())
    assert len(doc["rows"]) == 2
    assert {r["precision"]: r["median_ms"] for r in doc["summary"]} == {"fp16": 4.0, "int8": 2.0}
    out = capsys.readouterr().out
    assert "INT8 implicit 0.50x the FP16 time" in out and "error_resnet_qdq: parse failed" in out
