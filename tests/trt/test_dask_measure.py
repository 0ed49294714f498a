"""Measuring on Dask GPU workers, its scheduling tested on the CPU: a real cluster of one worker per "GPU"
(``CUDA_VISIBLE_DEVICES``, the resource ``GPU=1``) running real CPU work in place of TensorRT's builds and timing.

What TensorRT itself does there (a real build, a broken CUDA context) is tests/gpu's (marker ``gpu``).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from tests.core.plan.test_measurement import _qdq_model
from tests.trt.test_measure_cpu import _save
from trtwidgets.core.plan.measured.measurement import FP16, QDQ
from trtwidgets.trt import measure as m
from trtwidgets.trt import measure_builds as builds

distributed = pytest.importorskip("distributed")
dask_measure = pytest.importorskip("trtwidgets.trt.dask_measure")


def cpu_build(spec) -> dict:
    """A stand-in build: real CPU work, an "engine" file, the result with where it ran; "crash" breaks its context."""
    from distributed import get_worker

    a = np.random.default_rng(0).standard_normal((200, 200))
    for _ in range(30):
        a = np.tanh(a @ a.T / 200.0)
    out = Path(spec["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "stand_in.engine").write_bytes(a.astype(np.float32).tobytes()[:64])
    broke = spec["name"] == "crash"
    return {"key": spec["key"], "engine_path": "" if broke else str(out / "stand_in.engine"), "build_seconds": 0.1,
            "cached": False, "error": "Cuda Runtime (an illegal memory access)" if broke else "",
            "context_broken": broke, "worker": get_worker().address, "host": socket.gethostname(),
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid()}


def slow_build(spec) -> dict:
    """A build that outlasts any limit."""
    time.sleep(60)
    return cpu_build(spec)


def cpu_timer(engines, shapes, rounds, runs, warmup, feeds, check):
    """A stand-in of the interleaved rounds: every engine, round by round, on this worker only."""
    times = {k: [] for k in engines}
    for _ in range(rounds):
        for key, path in engines.items():
            t = time.perf_counter()
            np.frombuffer(Path(path).read_bytes(), np.uint8).sum()
            times[key].append((time.perf_counter() - t) * 1e3)
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    return times, {}, False, f"GPU {gpu} (Dask worker {distributed.get_worker().address})"


def _specs(tmp_path, names=("a", "b", "c", "d")):
    jobs = [m.MeasureJob(n, FP16 if i % 2 else QDQ, _save(_qdq_model(0.1 + i / 10), tmp_path / f"{n}.onnx"))
            for i, n in enumerate(names)]
    return builds.build_specs(jobs, tmp_path / "engines", {}, None, {}, gpu="stand-in")


@pytest.fixture(scope="module")
def two_gpus():
    with dask_measure.gpu_cluster(2) as client:
        yield client


def test_one_worker_per_gpu_builds_spread_and_one_comparison_timed_on_one_gpu(tmp_path, two_gpus):
    info = two_gpus.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
    assert sorted(info.values()) == ["0", "1"]
    assert all(w["resources"] == {"GPU": 1} for w in two_gpus.scheduler_info()["workers"].values())
    _, specs = _specs(tmp_path)
    pool = dask_measure.GpuPool(two_gpus)
    assert len(pool.workers) == 2 and not pool.note()
    events = []
    results, interrupted = builds.build_all(specs, events.append, None, tmp_path, pool=pool, build=cpu_build)
    assert not interrupted and set(results) == set(specs) and not any(r["error"] for r in results.values())
    assert sorted(e.done for e in events) == [1, 2, 3, 4]
    assert {r["gpu"] for r in results.values()} == {"0", "1"}  # spread over both GPUs
    times, _, _, timed_on = dask_measure.time_on_worker(pool, results, {}, 3, 1, 0, None, None, None, timer=cpu_timer)
    assert set(times) == set(results) and all(len(v) == 3 for v in times.values())
    assert timed_on.startswith("GPU ") and "Dask worker tcp://127.0.0.1" in timed_on  # one GPU, named


def test_a_broken_cuda_context_restarts_its_worker_and_the_other_builds_go_on(tmp_path, two_gpus):
    _, specs = _specs(tmp_path, ("crash", "after", "last"))
    pids = set(two_gpus.run(os.getpid).values())
    results, _ = builds.build_all(specs, None, None, tmp_path, pool=dask_measure.GpuPool(two_gpus), build=cpu_build)
    by = {specs[k]["name"]: r for k, r in results.items()}
    assert by["crash"]["error"] and not by["after"]["error"] and not by["last"]["error"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(two_gpus.scheduler_info()["workers"]) < 2:
        time.sleep(0.2)
    new = set(two_gpus.run(os.getpid).values())
    assert by["crash"]["pid"] not in new and len(new - pids) == 1  # that worker's process was replaced, once


def test_the_build_limit_stops_the_builds_and_says_why(tmp_path):
    _, specs = _specs(tmp_path, ("x", "y"))
    t = time.monotonic()
    results, interrupted = builds.build_all(specs, None, 1, tmp_path, limit_s=1.5, build=slow_build)
    assert time.monotonic() - t < 40 and not interrupted
    assert all("not built within the build limit of 2 s" in r["error"] for r in results.values())


def test_measure_without_trt_on_gpu_workers_reports_each_failure(tmp_path, two_gpus, monkeypatch):
    """The real build function on the workers: without TensorRT each build fails, and the report says so."""
    monkeypatch.setenv("TRTWIDGETS_DISABLE_TRT", "1")
    two_gpus.run(os.environ.__setitem__, "TRTWIDGETS_DISABLE_TRT", "1")
    try:
        q = _save(_qdq_model(0.1), tmp_path / "q.onnx")
        rep = m.measure([m.MeasureJob("fp16", FP16, q), m.MeasureJob("q", QDQ, q)], tmp_path / "engines",
                        progress=False, client=two_gpus)
    finally:
        two_gpus.run(os.environ.pop, "TRTWIDGETS_DISABLE_TRT", None)
    assert rep.rounds == 0 and all("TensorRT" in x.error for x in rep.measurements)
