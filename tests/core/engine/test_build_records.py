"""core.build_records on the real TensorRT 8.6 builds of the demo committed under tests/fixtures/trt86."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from trtwidgets.core.engine.build_records import (find_tensorrt_cache, performance_record, recorded_latencies,
                                           recorded_latency, tensorrt_cache_path)
from trtwidgets.core.engine.saved_build import load_saved_build

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trt86"


@pytest.fixture(scope="module")
def entropy2():
    return load_saved_build(FIXTURES / "cls_static_int8_entropy2")


@pytest.fixture(scope="module")
def qdq():
    return load_saved_build(FIXTURES / "cls_static_qdq_int8")


def test_tensorrt_calibrated_build_gives_its_cache(entropy2, qdq):
    sha = entropy2.recipe["model_sha256"]
    assert tensorrt_cache_path(entropy2) == entropy2.calibration_cache_path
    assert tensorrt_cache_path(entropy2, sha) == entropy2.calibration_cache_path
    assert tensorrt_cache_path(entropy2, "0" * 64) is None  # another model's names would not match
    assert tensorrt_cache_path(qdq) is None  # explicit Q/DQ: no calibrator
    assert find_tensorrt_cache([entropy2, qdq]) == entropy2.calibration_cache_path
    assert find_tensorrt_cache([qdq]) is None


def test_a_cache_handed_to_tensorrt_by_the_toolkit_is_not_tensorrts(entropy2):
    recipe = dict(entropy2.recipe, calibrator=dict(entropy2.recipe["calibrator"], kind="toolkit", method="entropy"))
    assert tensorrt_cache_path(dataclasses.replace(entropy2, recipe=recipe)) is None


def test_recipe_read_from_recipe_path_for_live_builds(entropy2, tmp_path):
    class Live:  # the attributes of a BuildResult that matter here
        recipe_path = str(FIXTURES / "cls_static_int8_entropy2" / "recipe.json")
        calibration_cache_path = entropy2.calibration_cache_path

    assert tensorrt_cache_path(Live()) == entropy2.calibration_cache_path


def test_recorded_latency_is_timings_json(entropy2, qdq):
    doc = json.loads((FIXTURES / "cls_static_int8_entropy2" / "timings.json").read_text())["latency"]
    lat = recorded_latency(entropy2)
    assert lat.median_ms == doc["median_ms"] and lat.runs == doc["runs"] == 200
    assert lat.shapes == {"x": (1, 3, 48, 192)}
    rows = recorded_latencies([("a", entropy2), ("b", qdq), ("c", dataclasses.replace(qdq, latency={}))])
    assert list(rows) == ["a", "b"] and rows["b"].median_ms != rows["a"].median_ms
    assert recorded_latency(dataclasses.replace(entropy2, latency={"median_ms": 1.0})) is None  # incomplete


def test_performance_record_says_why_there_is_no_accuracy(entropy2, tmp_path):
    rec = performance_record(entropy2, tensorrt_available=True)
    assert rec.engine_path is None and "no engine file" in rec.note and rec.latency is not None
    engine = tmp_path / "model.engine"
    engine.write_bytes(b"x")

    class Live:
        engine_path = str(engine)
        out_dir = str(tmp_path)

    no_trt = performance_record(Live(), tensorrt_available=False)
    assert no_trt.engine_path == str(engine) and "TensorRT is not installed" in no_trt.note
    assert no_trt.latency is None
    with_trt = performance_record(Live(), tensorrt_available=True)
    assert f"trtwidgets compare {tmp_path} --data demo" in with_trt.note
