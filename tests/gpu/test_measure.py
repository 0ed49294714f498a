"""Measured latency on real TensorRT: one build per placement, interleaved rounds, the on-disk cache.

Python 3.9 with numpy, onnx and tensorrt only. Run on the GPU machine with::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 -m pytest tests/gpu/test_measure.py -v -s

Two tiny models (a 3-conv stack and a single conv, different input shapes), each as
FP16 and as a Q/DQ variant; the conv stack's Q/DQ variant twice, with other scales (two
builds: each engine is judged on its own outputs, issue 44); implicit INT8 of the stack where TensorRT has it. The
first call builds, the second finds every engine in the cache and builds nothing.
Artifacts: ``$TRTWIDGETS_ARTIFACTS/measure/report*.json``.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tests.gpu import models
from tests.gpu.build_helpers import artifacts_dir, fresh_dir
from trtwidgets.core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ
from trtwidgets.core.plan.measured.pick import pick_measured

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")


def with_qdq(float_model: onnx.ModelProto, act_scale: float) -> onnx.ModelProto:
    """Every Conv's input and weights quantized (symmetric INT8; per-channel weights): a Q/DQ candidate."""
    m = onnx.ModelProto()
    m.CopyFrom(float_model)
    inits = {t.name: t for t in m.graph.initializer}
    nodes = []
    for node in m.graph.node:
        if node.op_type == "Conv":
            x, w = node.input[0], node.input[1]
            warr = numpy_helper.to_array(inits[w])
            ws = (np.abs(warr).reshape(warr.shape[0], -1).max(axis=1) / 127.0).astype(np.float32)
            wq = np.clip(np.round(warr / ws[:, None, None, None]), -127, 127).astype(np.int8)
            m.graph.initializer.extend([
                numpy_helper.from_array(np.array(act_scale, np.float32), f"{x}_s"),
                numpy_helper.from_array(np.array(0, np.int8), f"{x}_z"),
                numpy_helper.from_array(wq, f"{w}_q"), numpy_helper.from_array(ws, f"{w}_s"),
                numpy_helper.from_array(np.zeros(len(ws), np.int8), f"{w}_z")])
            nodes += [helper.make_node("QuantizeLinear", [x, f"{x}_s", f"{x}_z"], [f"{x}_q"]),
                      helper.make_node("DequantizeLinear", [f"{x}_q", f"{x}_s", f"{x}_z"], [f"{x}_dq"]),
                      helper.make_node("DequantizeLinear", [f"{w}_q", f"{w}_s", f"{w}_z"], [f"{w}_dq"], axis=0)]
            node.input[0], node.input[1] = f"{x}_dq", f"{w}_dq"
        nodes.append(node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    used = {i for n in m.graph.node for i in n.input}
    kept = [t for t in m.graph.initializer if t.name in used]
    del m.graph.initializer[:]
    m.graph.initializer.extend(kept)
    return m


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, trt):
    from trtwidgets.core.calibration.cache import write_cache
    from trtwidgets.trt.measure import MeasureJob

    work = artifacts_dir(tmp_path_factory, "measure")
    stack = models.conv_stack((1, 64, 32, 32), depth=3)
    single = models.conv_relu((1, 3, 32, 32), channels=32)
    paths = {name: str(models.save(m, work / "models" / f"{name}.onnx")) for name, m in {
        "stack": stack, "stack_qdq_a": with_qdq(stack, 4.0 / 127), "stack_qdq_b": with_qdq(stack, 6.0 / 127),
        "single": single, "single_qdq": with_qdq(single, 4.0 / 127)}.items()}
    cache = work / "stack.cache"
    write_cache(models.amax_for(models.conv_stack_tensors(3), 4.0), cache)
    return work, [MeasureJob("fp16", FP16, paths["stack"]),
                  MeasureJob("int8_implicit", INT8_IMPLICIT, paths["stack"], calibration_cache=str(cache)),
                  MeasureJob("stack qdq a", QDQ, paths["stack_qdq_a"], int8_layers=frozenset({"conv1", "conv2"})),
                  MeasureJob("stack qdq b", QDQ, paths["stack_qdq_b"], int8_layers=frozenset({"conv1", "conv2"})),
                  MeasureJob("single fp16", FP16, paths["single"]),
                  MeasureJob("single qdq", QDQ, paths["single_qdq"])]


def test_measure_builds_once_times_interleaved_and_caches(jobs):
    from trtwidgets.trt.measure import implicit_int8_reason, measure

    work, job_list = jobs
    cache_dir = fresh_dir(work, "engines")  # empty: the first call must build
    events = []
    t0 = time.perf_counter()
    first = measure(job_list, cache_dir, rounds=3, runs=50, warmup=5, gpus=1, progress=events.append)
    t_first = time.perf_counter() - t0
    (work / "report1.json").write_text(json.dumps(first.to_dict(), indent=1))
    by = {m.name: m for m in first.measurements}
    implicit = implicit_int8_reason() is None
    for m in first.measurements:
        print(f"{m.name:14s} rounds {['%.4f' % t for t in m.round_ms]} median {m.median_ms:.4f} "
              f"spread {m.spread_ms:.4f} built {m.build_seconds:.1f}s cached {m.cached} {m.error}")
    assert first.rounds == 3 and not first.interrupted
    for m in first.measurements:
        if m.kind == INT8_IMPLICIT and not implicit:
            assert "not available" in m.error
            continue
        assert m.ok, m.error
        assert len(m.round_ms) == 3 and all(t > 0 for t in m.round_ms)
        assert min(m.round_ms) <= m.median_ms <= max(m.round_ms)
        assert m.spread_ms == pytest.approx(max(m.round_ms) - min(m.round_ms))
    # Other scales make another engine (issue 44: the build key covers every Q/DQ scale): two builds, two timings.
    assert by["stack qdq a"].key != by["stack qdq b"].key
    assert first.built == (6 if implicit else 5) and first.cached == 0
    assert [e.done for e in events if e.stage == "build"] == list(range(1, first.built + 1))
    assert [e.done for e in events if e.stage == "time"] == [1, 2, 3]

    t0 = time.perf_counter()
    second = measure(job_list, cache_dir, rounds=3, runs=50, warmup=5, gpus=1, progress=False)
    t_second = time.perf_counter() - t0
    (work / "report2.json").write_text(json.dumps(second.to_dict(), indent=1))
    print(f"first call {t_first:.1f} s, second (cached) {t_second:.1f} s")
    assert second.built == 0 and second.cached == first.built
    assert all(m.cached for m in second.measurements if m.ok)
    assert all(math.isfinite(m.median_ms) for m in second.measurements if m.ok)

    stack_only = [m for m in second.measurements if not m.name.startswith("single")]
    pick = pick_measured(stack_only, meets={"stack qdq a": True, "stack qdq b": True})
    print(pick.reason, *pick.notes, sep="\n  ")
    assert pick.name in ("fp16", "stack qdq a", "stack qdq b")
    if pick.name != "fp16":
        assert pick.median_ms < by["fp16"].median_ms


def test_builds_in_parallel_one_dask_worker_per_gpu(jobs):
    """On a machine with several GPUs (nvidia-h200-x2 or larger): one Dask worker per GPU builds its share, and the
    comparison is timed on one GPU, named in the report (Python 3.9 with dask/distributed 2024.8.0)."""
    pytest.importorskip("distributed")
    from trtwidgets.trt import cuda
    from trtwidgets.trt.dask_measure import gpu_cluster
    from trtwidgets.trt.measure import measure

    gpus = cuda.device_count()
    if gpus < 2:
        pytest.skip(f"{gpus} GPU visible: parallel builds need 2 or more")
    work, job_list = jobs
    cache_dir = fresh_dir(work, "engines-parallel")
    t0 = time.perf_counter()
    rep = measure(job_list, cache_dir, rounds=3, runs=20, warmup=5, gpus=gpus, progress=True)
    print(f"{gpus} GPUs: {rep.built} builds in {time.perf_counter() - t0:.1f} s (a cluster started for them)")
    assert rep.built >= 4 and rep.rounds == 3
    assert all(m.ok for m in rep.measurements if m.kind != INT8_IMPLICIT)
    with gpu_cluster(gpus) as client:
        again = measure(job_list, fresh_dir(work, "engines-client"), rounds=3, runs=20, warmup=5, progress=True,
                        client=client)
    print(f"timed on {again.timed_on}; {' '.join(again.notes)}")
    assert again.built == rep.built and again.rounds == 3 and "Dask worker" in again.timed_on
    assert all(m.ok for m in again.measurements if m.kind != INT8_IMPLICIT)


def test_measure_on_one_dask_gpu_worker(jobs):
    """Any GPU machine, one GPU: the builds and the interleaved rounds run in a Dask worker process that declares
    ``GPU=1`` (what ``--workers``/``--scheduler`` give), with TensorRT there, and the report names that worker
    (Python 3.9 with dask/distributed 2024.8.0)."""
    pytest.importorskip("distributed")
    from trtwidgets.trt.dask_measure import gpu_cluster
    from trtwidgets.trt.measure import implicit_int8_reason, measure

    work, job_list = jobs
    t0 = time.perf_counter()
    with gpu_cluster(1) as client:
        rep = measure(job_list, fresh_dir(work, "engines-dask1"), rounds=3, runs=20, warmup=5, progress=True,
                      client=client)
    (work / "report_dask1.json").write_text(json.dumps(rep.to_dict(), indent=1))
    print(f"one Dask GPU worker: {rep.built} builds, {rep.rounds} rounds in {time.perf_counter() - t0:.1f} s; "
          f"timed on {rep.timed_on}; {' '.join(rep.notes)}")
    assert "Dask worker" in rep.timed_on and rep.rounds == 3 and not rep.interrupted
    implicit = implicit_int8_reason() is None
    assert rep.built == (6 if implicit else 5)
    for m in rep.measurements:
        if m.kind == INT8_IMPLICIT and not implicit:
            assert "not available" in m.error
            continue
        assert m.ok, m.error
        assert len(m.round_ms) == 3 and all(t > 0 for t in m.round_ms)
