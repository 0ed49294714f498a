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


def test_parallel_builds_run_one_worker_process_per_gpu(tmp_path, monkeypatch):
    # Without TensorRT each worker's build fails at once: what is tested is the machinery (workers, specs, results).
    monkeypatch.setenv("TRTWIDGETS_DISABLE_TRT", "1")
    jobs = [m.MeasureJob("a", FP16, _save(_qdq_model(0.1, quantize_second=False), tmp_path / "a.onnx")),
            m.MeasureJob("b", QDQ, _save(_qdq_model(0.1), tmp_path / "b.onnx")),
            m.MeasureJob("c", FP16, _save(_qdq_model(0.1), tmp_path / "c.onnx"))]
    _, specs = builds.build_specs(jobs, tmp_path, {}, None, {})
    events = []
    results, interrupted = builds.build_all(specs, events.append, gpus=2, cache=tmp_path)
    assert not interrupted and set(results) == set(specs)
    assert all("TensorRT" in r["error"] for r in results.values())
    assert sorted(e.done for e in events) == [1, 2, 3]
    assert sorted(p.name for p in tmp_path.glob(".measure-*/gpu*.specs.json")) == ["gpu0.specs.json",
                                                                                   "gpu1.specs.json"]


def test_the_build_limit_stops_the_builds_and_the_run_goes_on(tmp_path, monkeypatch):
    """Past the limit the build workers are stopped; each build left says why, and nothing is lost or hung.

    TensorRT cannot build here, so the worker is the edge replaced: a process that outlasts the limit.
    """
    import sys
    import time

    started = []

    def slow_worker(specs_path, results_path):
        started.append(specs_path)
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    monkeypatch.setattr(builds, "_worker_command", slow_worker)
    monkeypatch.setattr(m, "implicit_int8_reason", lambda: None)
    f = _save(_qdq_model(0.1, quantize_second=False), tmp_path / "f.onnx")
    q = _save(_qdq_model(0.1), tmp_path / "q.onnx")
    cache = tmp_path / "calib.cache"
    cache.write_text("TRT-8601-EntropyCalibration2\n")
    jobs = [m.MeasureJob("int8_implicit", INT8_IMPLICIT, f, calibration_cache=str(cache)),
            m.MeasureJob("fp16", FP16, f), m.MeasureJob("cand", QDQ, q)]
    t0 = time.monotonic()
    report = m.measure(jobs, tmp_path / "engines", rounds=3, runs=1, progress=False, build_limit_s=1.5)
    assert time.monotonic() - t0 < 30 and len(started) == 1  # one GPU here: one worker, stopped at the limit
    assert all("not built within the build limit of 2 s" in x.error for x in report.measurements), report
    assert report.rounds == 0 and not report.interrupted
    # Implicit INT8, the reference, is built last: the worker's specs put it at the end.
    import json

    specs = json.loads(Path(started[0]).read_text())
    assert [s["kind"] for s in specs][-1] == INT8_IMPLICIT


def test_a_worker_whose_cuda_context_broke_is_followed_by_a_new_one_for_the_builds_it_left(tmp_path, monkeypatch):
    """A build that breaks its process's CUDA context (TensorRT 8.6 on ModelOpt's FP32-float-part file of the demo
    classifier: an illegal memory access while timing a kernel) must not fail the builds after it.

    The worker is the edge replaced (no GPU here): the first one reports its first build failed and exits with
    CONTEXT_BROKEN; the parent starts a new worker for the rest, and the failed build is not tried again.
    ``tests/gpu/test_measure_restart.py`` is the same on TensorRT with the real crash.
    """
    import json
    import sys

    started = []
    script = ("import json, sys; specs = json.load(open(sys.argv[1])); first = {first!r}\n"
              "out = []\n"
              "for s in specs:\n"
              "    broke = first and not out\n"
              "    out.append({{'key': s['key'], 'engine_path': '' if broke else s['out_dir'] + '/x.engine',\n"
              "                'build_seconds': 1.0, 'cached': False, 'error': 'Cuda Runtime (an illegal memory access)'\n"
              "                if broke else ''}})\n"
              "    json.dump(out, open(sys.argv[2], 'w'))\n"
              "    if broke: sys.exit({code})\n")

    def worker(specs_path, results_path):
        started.append(json.loads(Path(specs_path).read_text()))
        code = script.format(first=len(started) == 1, code=builds.CONTEXT_BROKEN)
        return [sys.executable, "-c", code, str(specs_path), str(results_path)]

    monkeypatch.setattr(builds, "_worker_command", worker)
    q = _save(_qdq_model(0.1), tmp_path / "q.onnx")
    jobs = [m.MeasureJob("crash", QDQ, q), m.MeasureJob("after", QDQ, _save(_qdq_model(0.1, quantize_second=False),
                                                                            tmp_path / "p.onnx")),
            m.MeasureJob("last", FP16, q)]  # three placements or kinds: three builds
    _, specs = builds.build_specs(jobs, tmp_path, {}, None, {})
    results, interrupted = builds.build_all(specs, None, gpus=1, cache=tmp_path)
    names = {s["key"]: s["name"] for s in specs.values()}
    assert not interrupted and [[names[s["key"]] for s in share] for share in started] == [
        ["crash", "after", "last"], ["after", "last"]]
    assert {names[k]: bool(r["error"]) for k, r in results.items()} == {"crash": True, "after": False, "last": False}
    assert sorted(p.name for p in tmp_path.glob(".measure-*/gpu*.specs.json")) == ["gpu0.restart1.specs.json",
                                                                                   "gpu0.specs.json"]
