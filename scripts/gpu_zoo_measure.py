"""Measure the zoo's CPU plans on the GPU machine: FP16, implicit INT8 and the top candidates, per family and batch.

Issue 24's zoo run. Each job is one CPU plan (``benchmarks/zoo_families.py plan --batch B`` writes
``$TRTWIDGETS_ZOO/families/<family>/plan_b<B>/plan.json``), measured as ``trtwidgets plan measure``
measures it (:func:`trtwidgets.trt.plan_measure.measure_plan`: one build per placement, cached
by key; interleaved rounds; the pick made again by measured time). The float model is pinned to the
plan's engine shapes first (``zoo_shapes.at_shapes``: a batch-1 static file becomes the batch-32 one;
Silero VAD's state keeps its batch on axis 1), so a plan estimated at batch 32 builds at batch 32.

Jobs run on a Dask cluster of ``--workers`` worker processes, one GPU each (:func:`trtwidgets.trt.dask_measure.
gpu_cluster`: ``CUDA_VISIBLE_DEVICES``, the resource ``GPU=1``), or on the GPU workers of ``--scheduler
tcp://HOST:PORT``: ``--workers`` jobs at a time, taken in the order given (give the longest first), each job's builds
spread over every GPU worker and its interleaved rounds on one GPU (its record says which: ``timed_on``), with one
shared engine cache; each job's result is written as soon as it ends, so a call stopped at its time limit keeps what
it finished and a second call finds the engines already built. ``--last-start S`` starts no job after S seconds and
lets the started ones finish (``--deadline`` is the hard stop, which loses the job in progress: det b1 on 2026-11-27
after 12 minutes of builds). Python 3.9 with numpy, onnx, tensorrt and dask/distributed 2024.8.0 (the last release
for 3.9)::

    source /tmp/trtb/env.sh && EXTRA_PYTHONPATH=$PWD $PY39 scripts/gpu_zoo_measure.py \\
        --plans zoo_gpu/plans --models zoo_gpu/models --out $OUT/zoo --workers 4 --deadline 540 \\
        --jobs yolo-b1,yolo-b32,resnet-b32,...

``--models`` holds ``<family>.onnx``; ``resnet`` is generated here when its file is absent
(``benchmarks/resnet50.py`` is seeded: the same names and weights as the CPU's file). Each result,
``<out>/<job>.json``, holds the measured plan (``plan``) and a record per engine: per-round medians,
median, spread, build seconds, and its layers from the engine inspector (INT8 layers, reformats,
standalone PointWise and Scale layers), and, where the plan folder has its held-back check
(``held_back.npz``), each engine's accuracy on the held-back samples judged by the family's task
metric. ``benchmarks/zoo_families.py gpu-table`` reads them.

Issue 33's run adds, in the same interleaved rounds and judged by the same held-back check (kept out of the
plan's own pick, recorded beside it): ``--peers DIR`` a peer's Q/DQ models (``DIR/<family>/<name>.onnx``:
ModelOpt's default and FP32-float-part files, pinned to the plan's shapes), ``--all-int8`` the plan's all-INT8
exports that miss the target (what ``export-qdq`` writes; the measured plan would not build them), so every
written Q/DQ model of the zoo is built at both batches; ``benchmarks/zoo_families.py peer-table`` reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def layer_counts(build_dir: Path) -> dict:
    """The engine inspector's layer summary of one cached build (:meth:`EngineGraph.layer_summary`), or {}."""
    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    found = sorted(build_dir.glob("*.graph.json")) if build_dir.is_dir() else []
    return parse_inspector_json(found[0]).layer_summary() if found else {}


def _model_for(family: str, models: Path, work: Path) -> Path:
    path = models / f"{family}.onnx"
    if path.is_file() or family != "resnet":
        return path
    import onnx

    from resnet50 import resnet50

    path = work / "resnet.onnx"
    if not path.is_file():
        onnx.save(resnet50(batch=1), str(path))
    return path


def _register_family_metric(family: str) -> None:
    """The family's own metric (``zoo_families:NAME``), imported because this script names it: plan.json's
    metric_spec is only looked up (a plan folder never chooses code to import)."""
    from trtwidgets.core.accuracy.task_metrics import import_metric, is_function_text
    from zoo_families import FAMILIES

    metric = FAMILIES.get(family, {}).get("metric") or ""
    if isinstance(metric, str) and is_function_text(metric):
        import_metric(metric)


def _peer_jobs(family: str, shapes: dict, peers: Path, work: Path) -> list:
    """A peer's Q/DQ models of this family (``<peers>/<family>/<name>.onnx``, e.g. ModelOpt's), pinned to the plan's
    shapes like the float model, as measure jobs named ``peer_<name>``."""
    import onnx

    from trtwidgets.core.plan.measured.measurement import QDQ
    from trtwidgets.trt.measure import MeasureJob
    from zoo_shapes import at_shapes

    jobs = []
    for path in sorted((peers / family).glob("*.onnx")):
        pinned = work / f"peer_{path.stem}.onnx"
        if not pinned.is_file():
            onnx.save(at_shapes(onnx.load(str(path)), shapes), str(pinned))
        jobs.append(MeasureJob(f"peer_{path.stem}", QDQ, str(pinned)))
    return jobs


def _all_int8_jobs(plan, float_model: Path, work: Path, top: int) -> list:
    """The plan's all-INT8 exports ("INT8 everywhere the rules allow": what ``export-qdq`` writes with the plan's
    range method) that the measured plan would not build (they miss the target), so that every zoo model's
    export is built at this batch too; measure jobs named ``all-INT8 export <i>``."""
    from trtwidgets.core.plan.measured.measurement import QDQ
    from trtwidgets.core.plan.measured.repick import measure_targets
    from trtwidgets.core.plan.plan_export import export_plan
    from trtwidgets.trt.measure import MeasureJob

    targets = set(measure_targets(plan, top))
    jobs = []
    for i, c in enumerate(plan.candidates):
        if i in targets or not c.quantized or not c.name.startswith("INT8 everywhere"):
            continue
        path = work / f"all_int8_{i}.qdq.onnx"
        export_plan(str(float_model), plan, path, candidate=i)
        jobs.append(MeasureJob(f"all-INT8 export {i} ({c.name})", QDQ, str(path), int8_layers=frozenset(c.quantized)))
    return jobs


def _with_extra(extra: list, extra_out: list):
    """A measurement source that builds and times ``extra`` jobs (a peer's models, exports the plan would not
    build) in the same interleaved rounds as the plan's engines and judges them by the same held-back check; their
    measurements go to ``extra_out``, the plan gets its own jobs' back (they are no candidates of it)."""
    from trtwidgets.trt.measure import MeasureReport, measure

    def source(jobs, cache, **kw):
        if not any(j.name == "fp16" for j in jobs):  # a region search's sub-models: no whole model beside them
            return measure(jobs, cache, **kw)
        report = measure(list(jobs) + list(extra), cache, **kw)
        names = {j.name for j in extra}
        extra_out.extend(m for m in report.measurements if m.name in names)
        return MeasureReport(tuple(m for m in report.measurements if m.name not in names), report.rounds,
                             report.interrupted, report.built, report.cached, report.shapes, report.timed_on,
                             report.notes)

    return source


def run_job(spec: str, args, client=None) -> dict:
    """Measure one plan (``<family>-b<batch>[@TOP]``); the result record (also on failure, with the error)."""
    import onnx

    from trtwidgets.core.plan.engine_check import folder_check
    from trtwidgets.core.plan.plan_artifact import Plan
    from trtwidgets.trt.plan_measure import measure_plan
    from zoo_shapes import at_shapes

    job, _, top = spec.partition("@")
    family = job.rsplit("-b", 1)[0]
    work = Path(args.work) / job
    work.mkdir(parents=True, exist_ok=True)
    rec: dict = {"job": job, "family": family}
    t0 = time.perf_counter()
    try:
        plan = Plan.load(Path(args.plans) / job)
        shapes = {k: list(v) for k, v in plan.input_shapes.items()}
        float_model = work / "float.onnx"
        if not float_model.is_file():
            onnx.save(at_shapes(onnx.load(str(_model_for(family, Path(args.models), Path(args.work)))), shapes),
                      str(float_model))
        cache = Path(args.cache_dir)
        _register_family_metric(family)
        check = folder_check(Path(args.plans) / job, plan)[0]  # held_back.npz: zoo_families.py check writes it
        n_top = int(top or args.top)
        peers = _peer_jobs(family, shapes, Path(args.peers), work) if args.peers else []
        full = _all_int8_jobs(plan, float_model, work, n_top) if args.all_int8 else []
        extra_out: list = []
        new = measure_plan(plan, str(float_model), work_dir=work, cache_dir=cache, top=n_top,
                           rounds=args.rounds, runs=args.runs, opt_level=args.opt_level, progress=True, gpus=1,
                           build_limit_s=args.build_limit or None, check=check, implicit=not args.no_implicit,
                           regions=not args.no_regions, measure_fn=_with_extra(peers + full, extra_out), client=client)
        rec["timed_on"] = new.measured.settings.get("timed_on", "") if new.measured is not None else ""
        doc = new.to_dict()  # the record is a JSON file: the plan's own serialization, each build's layers added
        builds = []
        for m in doc["measured"]["measurements"]:
            builds.append(dict(m, layers=layer_counts(cache / m["key"]) if m.get("key") else {}))
        extra = [dict(m.to_dict(), layers=layer_counts(cache / m.key) if m.key else {}) for m in extra_out]
        rec["peers"] = [m for m in extra if m["name"].startswith("peer_")]
        rec["all_int8"] = [m for m in extra if not m["name"].startswith("peer_")]
        ok = new.measured.fp16() is not None
        rec.update(status="measured" if ok else "failed", input_shapes=shapes, plan=doc, builds=builds)
        if not ok:
            rec["error"] = "; ".join(f"{m['name']}: {m['error']}" for m in builds if m.get("error"))[:2000]
    except Exception as exc:
        rec.update(status="failed", error=f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"[:2000],
                   where=traceback.format_exc()[-1500:])
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    return rec


def run_jobs(client, jobs: list, args, last_start: float) -> None:
    """``--workers`` jobs at a time, in the order given; each record written as its job ends."""
    from concurrent.futures import ThreadPoolExecutor

    from trtwidgets.core.common.atomic import write_text_atomic

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def one(spec: str) -> None:
        job = spec.partition("@")[0]
        if last_start and time.time() > last_start:
            print(f"no new job after --last-start: {job} left", flush=True)
            return
        print(f"{job} starts", flush=True)
        rec = run_job(spec, args, client)
        write_text_atomic(out / f"{job}.json", json.dumps(rec, indent=1, default=str))
        print(f"{job} {rec['status']} in {rec['seconds']} s on {rec.get('timed_on') or '?'} "
              f"{rec.get('error', '')[:300]}", flush=True)

    pool = ThreadPoolExecutor(max_workers=max(1, args.workers))
    futures = [pool.submit(one, spec) for spec in jobs]
    t0 = time.time()
    try:
        for f in futures:
            left = args.deadline - (time.time() - t0) if args.deadline else None
            f.result(timeout=max(left, 0) if left is not None else None)
    except TimeoutError:
        # The hard stop: the caller closes the cluster, which ends the builds in progress (their jobs are lost;
        # engines already built stay cached), and no job left starts.
        print(f"deadline {args.deadline:.0f} s: the jobs in progress are lost", flush=True)
        pool.shutdown(wait=False, cancel_futures=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", required=True, help="folder of <job>/plan.json")
    ap.add_argument("--models", required=True, help="folder of <family>.onnx")
    ap.add_argument("--jobs", required=True,
                    help="comma-separated <family>-b<batch>, each with @N to measure N candidates instead of --top")
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/zoo_work")
    ap.add_argument("--cache-dir", default="/tmp/zoo_engines")
    ap.add_argument("--workers", type=int, default=1, help="GPU worker processes on this machine (one GPU each), and "
                    "jobs at a time")
    ap.add_argument("--deadline", type=float, default=0, help="stop the workers after this many seconds (a job "
                    "in progress is lost: see --last-start)")
    ap.add_argument("--last-start", type=float, default=0, help="no job starts after this many seconds; the jobs "
                    "started finish (a deadline after it is the hard stop)")
    ap.add_argument("--scheduler", default="", help="a running Dask scheduler whose workers declare GPU=1 (one "
                    "per GPU), instead of --workers on this machine")
    ap.add_argument("--top", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--opt-level", type=int, default=1)
    ap.add_argument("--build-limit", type=float, default=0, help="seconds for each job's builds (0: no limit)")
    ap.add_argument("--peers", default="", help="folder of <family>/<name>.onnx: a peer's Q/DQ models (ModelOpt's), "
                    "built and timed in the same rounds and judged by the same held-back check")
    ap.add_argument("--all-int8", action="store_true", help="also build the plan's all-INT8 exports that miss the "
                    "target (the measured plan would not build them): every export is built")
    ap.add_argument("--no-implicit", action="store_true", help="leave implicit INT8 out (its builds are the slowest)")
    ap.add_argument("--no-regions", action="store_true", help="no region search before the whole-model builds")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRTWIDGETS_NO_CUBLAS_CUDNN", "1")  # the machine's cuBLAS/cuDNN are stubs
    done = {p.stem for p in Path(args.out).glob("*.json")
            if json.loads(p.read_text()).get("status") == "measured"} if Path(args.out).is_dir() else set()
    jobs = [j for j in args.jobs.split(",") if j and j.partition("@")[0] not in done]  # longest first
    last_start = time.time() + args.last_start if args.last_start else 0
    from trtwidgets.core.common.dask_cluster import cluster_client
    from trtwidgets.trt.dask_measure import gpu_cluster

    with (cluster_client(scheduler=args.scheduler) if args.scheduler else gpu_cluster(args.workers)) as client:
        run_jobs(client, jobs, args, last_start)
    got = sorted(p.stem for p in Path(args.out).glob("*.json"))
    print(f"{len(got)} results: {', '.join(got)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
