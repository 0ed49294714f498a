"""Builds side by side from the committed TensorRT 8.6 builds, and a measured folder read or reported absent."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import ROOT
from trtwidgets.core.engine.build_table import BUILD_TABLE_COLUMNS, build_rows, fastest, read_measured_folder
from trtwidgets.core.engine.saved_build import load_saved_build

TRT86 = ROOT / "tests" / "fixtures" / "trt86"


def test_rows_carry_the_recorded_latency_and_the_engine_precisions():
    builds = {n: load_saved_build(TRT86 / n) for n in ("cls_static_fp16", "cls_static_qdq_int8")}
    timings = {n: json.loads((TRT86 / n / "timings.json").read_text())["latency"] for n in builds}
    rows = build_rows(builds, metrics={"cls_static_qdq_int8": 0.5}, sources={"cls_static_qdq_int8": "test"})
    assert [tuple(r) for r in rows] == [BUILD_TABLE_COLUMNS] * 2
    fp16, qdq = rows
    assert fp16["median_ms"] == pytest.approx(timings["cls_static_fp16"]["median_ms"])
    assert qdq["spread_ms"] == pytest.approx(timings["cls_static_qdq_int8"]["p90_ms"]
                                             - timings["cls_static_qdq_int8"]["min_ms"])
    assert (qdq["INT8"], qdq["FP16"], qdq["FP32"]) == (48, 3, 55)
    assert fp16["INT8"] == 0 and fp16["FP16"] == 119
    assert math.isnan(fp16["metric"]) and qdq["metric"] == 0.5
    assert fastest(rows)["build"] == "cls_static_fp16"


def test_a_missing_measured_folder_is_none_not_made_up(tmp_path):
    assert read_measured_folder(tmp_path / "absent") is None
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    assert read_measured_folder(tmp_path) is None


def test_a_measured_folder_gives_medians_spreads_and_counts(tmp_path):
    (tmp_path / "qdq").mkdir()
    (tmp_path / "qdq" / "engine.graph.json").write_text((TRT86 / "cls_static_qdq_int8" / "engine.graph.json").read_text())
    doc = {"measurements": [
        {"name": "fp16", "round_ms": [0.60, 0.58, 0.59], "precision_counts": {"FP16": 120, "FP32": 3}, "top1": 0.95},
        {"name": "qdq", "median_ms": 0.41, "spread_ms": 0.01}]}
    (tmp_path / "measurements.json").write_text(json.dumps(doc))
    fp16, qdq = read_measured_folder(tmp_path)
    assert fp16["median_ms"] == pytest.approx(0.59) and fp16["spread_ms"] == pytest.approx(0.02)
    assert (fp16["FP16"], fp16["FP32"], fp16["metric"]) == (120, 3, 0.95)
    assert (qdq["median_ms"], qdq["INT8"]) == (0.41, 48) and math.isnan(qdq["metric"])


def test_a_plan_json_with_nested_measurements_is_read(tmp_path):
    doc = {"pick": "fp16", "measurement": {"rounds": 3, "measurements": [
        {"name": "fp16", "kind": "fp16", "round_ms": [0.5, 0.52], "median_ms": 0.51, "spread_ms": 0.02},
        {"name": "cand", "kind": "qdq", "round_ms": [], "median_ms": "nan", "spread_ms": "nan", "error": "build failed"}]}}
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    fp16, cand = read_measured_folder(tmp_path)
    assert fp16["median_ms"] == 0.51 and fp16["INT8"] == -1  # counts nowhere: -1, not invented
    assert math.isnan(cand["median_ms"])


def test_the_committed_gpu_fixture_reads_with_its_layer_counts(fixtures_dir):
    rows = read_measured_folder(fixtures_dir / "trt86" / "cls_b32_measured")
    assert rows and {r["build"] for r in rows} >= {"fp16", "int8_implicit"}
    for r in rows:
        assert r["median_ms"] > 0 and r["spread_ms"] >= 0
        assert min(r["INT8"], r["FP16"], r["FP32"]) >= 0, r  # counts came from the measurements, not -1
    assert next(r for r in rows if r["build"] == "fp16")["INT8"] == 0
