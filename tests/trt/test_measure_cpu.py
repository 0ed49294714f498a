"""The measuring machinery's CPU side: build keys, one build per distinct export, the cache, the refusals.

The GPU side (builds, interleaved timing, the cache hit on a second call) is tests/gpu/test_measure.py.
"""

from __future__ import annotations

import types
from pathlib import Path

import onnx
import pytest

from tests.core.plan.test_measurement import _qdq_model
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ
from trtwidgets.trt import measure as m
from trtwidgets.trt import measure_builds as builds
from trtwidgets.trt.build_phases.result import ENGINE_FILE


def _save(model, path: Path) -> str:
    onnx.save(model, str(path))
    return str(path)


def test_build_key_covers_ranges_placement_kind_shapes_and_settings(tmp_path):
    """Issue 44: two exports that differ only in their scales are two engines (each is judged on its own outputs)."""
    a = _save(_qdq_model(0.1), tmp_path / "a.onnx")
    again = _save(_qdq_model(0.1), tmp_path / "again.onnx")
    b = _save(_qdq_model(0.9), tmp_path / "b.onnx")
    c = _save(_qdq_model(0.1, quantize_second=False), tmp_path / "c.onnx")
    s = {"trt": "8.6.1", "gpu": "H100", "opt_level": None}
    shapes = {"X": (1, 4)}
    key = builds.build_key(a, QDQ, shapes, s)
    assert key == builds.build_key(again, QDQ, shapes, s)  # the same export written twice: one engine
    assert key != builds.build_key(b, QDQ, shapes, s)
    assert key != builds.build_key(c, QDQ, shapes, s)
    assert key != builds.build_key(a, FP16, shapes, s)
    assert key != builds.build_key(a, QDQ, {"X": (2, 4)}, s)
    assert key != builds.build_key(a, QDQ, shapes, dict(s, gpu="H200"))


def test_one_build_per_distinct_export(tmp_path):
    """The same placement with other ranges is another build; the same export under another name is not."""
    jobs = [m.MeasureJob("fp16", FP16, _save(_qdq_model(0.1, quantize_second=False), tmp_path / "f.onnx")),
            m.MeasureJob("entropy", QDQ, _save(_qdq_model(0.1), tmp_path / "e.onnx")),
            m.MeasureJob("entropy again", QDQ, _save(_qdq_model(0.1), tmp_path / "e2.onnx")),
            m.MeasureJob("percentile", QDQ, _save(_qdq_model(0.3), tmp_path / "p.onnx"))]
    names, specs = builds.build_specs(jobs, tmp_path / "cache", {"X": (1, 4)}, None, {})
    assert len(specs) == 3 and names["entropy"] == names["entropy again"] != names["percentile"]
    assert specs[names["entropy"]]["out_dir"] == str(tmp_path / "cache" / names["entropy"])


def test_cached_engines_are_not_rebuilt(tmp_path):
    jobs = [m.MeasureJob("fp16", FP16, _save(_qdq_model(0.1), tmp_path / "f.onnx"))]
    _, specs = builds.build_specs(jobs, tmp_path, {}, None, {})
    spec = next(iter(specs.values()))
    Path(spec["out_dir"]).mkdir()
    (Path(spec["out_dir"]) / ENGINE_FILE).write_bytes(b"engine")
    events = []
    results, interrupted = builds.build_all(specs, events.append, gpus=0, cache=tmp_path)
    assert not interrupted and results[spec["key"]]["cached"] and results[spec["key"]]["error"] == ""
    assert events[0].stage == "build" and events[0].cached and "1/1 done, 0 left" in events[0].text()
    assert builds.build_one(spec)["cached"]


def test_ctrl_c_keeps_the_builds_done(tmp_path):
    jobs = [m.MeasureJob("a", FP16, _save(_qdq_model(0.1, quantize_second=False), tmp_path / "a.onnx")),
            m.MeasureJob("b", QDQ, _save(_qdq_model(0.1), tmp_path / "b.onnx"))]
    _, specs = builds.build_specs(jobs, tmp_path, {}, None, {})
    for spec in specs.values():
        Path(spec["out_dir"]).mkdir()
        (Path(spec["out_dir"]) / ENGINE_FILE).write_bytes(b"engine")

    def ctrl_c_after_first(event):
        if event.done == 1:
            raise KeyboardInterrupt

    results, interrupted = builds.build_all(specs, ctrl_c_after_first, gpus=0, cache=tmp_path)
    assert interrupted and set(results) == set(specs)
    assert all(r["engine_path"].endswith(ENGINE_FILE) and not r["error"] for r in results.values())


def test_refusals_are_user_errors(tmp_path):
    model = _save(_qdq_model(0.1), tmp_path / "f.onnx")
    with pytest.raises(UserError, match="2 rounds are too few"):
        m.measure([m.MeasureJob("fp16", FP16, model)], tmp_path, rounds=2)
    with pytest.raises(UserError, match="same name"):
        m.measure([m.MeasureJob("a", FP16, model), m.MeasureJob("a", QDQ, model)], tmp_path)
    with pytest.raises(UserError, match="is missing"):
        builds.build_specs([m.MeasureJob("x", QDQ, str(tmp_path / "none.onnx"))], tmp_path, {}, None, {})
    with pytest.raises(UserError, match="needs a calibration cache"):
        builds.build_specs([m.MeasureJob("i", INT8_IMPLICIT, model)], tmp_path, {}, None, {})


def test_implicit_int8_reason_reads_the_module():
    trt11 = types.SimpleNamespace(__version__="11.0.0", BuilderFlag=types.SimpleNamespace(FP16=1),
                                  NetworkDefinitionCreationFlag=types.SimpleNamespace(STRONGLY_TYPED=1))
    assert m.implicit_int8_reason(trt11)
    trt86 = types.SimpleNamespace(__version__="8.6.1", BuilderFlag=types.SimpleNamespace(FP16=1, INT8=2),
                                  IInt8EntropyCalibrator2=object)
    assert m.implicit_int8_reason(trt86) is None


def test_report_to_dict():
    from trtwidgets.core.plan.measured.measurement import Measurement

    rep = m.MeasureReport((Measurement("fp16", FP16, (0.3, 0.31, 0.29)),), rounds=3, built=1, shapes={"X": (1, 4)})
    d = rep.to_dict()
    assert d["rounds"] == 3 and d["measurements"][0]["median_ms"] == pytest.approx(0.3) and d["shapes"] == {"X": [1, 4]}


def test_without_a_gpu_every_job_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("TRTWIDGETS_DISABLE_TRT", "1")
    monkeypatch.setattr("trtwidgets.trt._module", None)
    model = _save(_qdq_model(0.1), tmp_path / "f.onnx")
    cache = tmp_path / "model.cache"
    cache.write_text("TRT-8600-EntropyCalibration2\n")
    rep = m.measure([m.MeasureJob("fp16", FP16, model),
                     m.MeasureJob("int8_implicit", INT8_IMPLICIT, model, calibration_cache=str(cache)),
                     m.MeasureJob("q", QDQ, model)], tmp_path / "engines", progress=False, gpus=0)
    assert rep.rounds == 0 and rep.built == 0
    assert all(not x.ok and x.error for x in rep.measurements)
    assert "implicit INT8 is not available" in rep.measurements[1].error
    assert "TensorRT" in rep.measurements[0].error
