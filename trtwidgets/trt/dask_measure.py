"""Measuring on Dask workers: one worker per GPU (worker resource ``GPU=1``), builds spread, one comparison on one GPU.

- **Workers.** A worker that may build and time engines declares the resource ``GPU=1`` and sees one GPU
  (``CUDA_VISIBLE_DEVICES``): ``dask worker --resources GPU=1`` once per GPU on a cluster, or
  :func:`gpu_cluster` on this machine (what ``build_all`` starts where there are several builds: a build that
  breaks its process's CUDA context, or outlasts the build limit, takes only its worker down, and Dask's nanny
  starts a new one).
- **One kind of GPU.** The workers are asked which GPU they hold (:class:`GpuPool`); the builds and the timing of
  one measurement go to the workers of one kind only (the most common): an engine is built for the GPU it runs on,
  and interleaved rounds on two kinds of GPU would compare the GPUs, not the engines. The others are left out,
  and the report says so.
- **Builds** are tasks, one per distinct engine (:func:`~.measure_builds.build_one`), spread over those workers;
  a worker whose CUDA context a build broke is restarted (the failed build is a result, not tried again).
- **Timing** of the candidates of one comparison is one task on one GPU (:func:`time_task`): the interleaved rounds
  never straddle GPUs, and the result says which GPU and worker timed them (``MeasureReport.timed_on``). Engines
  built on another host travel to it through Dask.

``dask`` is imported here only when this path runs (the GPU machine's Python 3.9 imports ``trtwidgets.trt``
without it).
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from .build_job import MeasureProgress, notify

__all__ = ["GPU", "GpuPool", "build_on_workers", "build_task", "gpu_cluster", "gpu_name", "host_name", "read_engine",
           "time_on_worker", "time_task", "trt_here"]

#: The worker resource a GPU worker declares (``dask worker --resources GPU=1``).
GPU = "GPU"
#: How often (seconds) the builds in flight are looked at.
POLL_S = 0.2


def gpu_name() -> str:
    """The name of the GPU this process sees first, or ``"no GPU"``."""
    from . import cuda

    try:
        return cuda.device_name(0) if cuda.device_count() else "no GPU"
    except Exception:
        return "no GPU"


def host_name() -> str:
    """This machine's name (where an engine file is)."""
    import socket

    return socket.gethostname()


def _where() -> Tuple[str, str]:
    """``(worker address, host)`` of the worker running this task."""
    import socket

    from distributed import get_worker

    return get_worker().address, socket.gethostname()


@contextmanager
def gpu_cluster(gpus: int) -> Iterator[Any]:
    """A Dask cluster on this machine with one worker process per GPU (``CUDA_VISIBLE_DEVICES=g``, ``GPU=1``)."""
    from ..core.common.dask_cluster import require_dask

    distributed = require_dask()
    workers = {f"gpu{g}": {"cls": distributed.Nanny,
                           "options": {"nthreads": 1, "resources": {GPU: 1}, "host": "127.0.0.1",
                                       "env": {"CUDA_VISIBLE_DEVICES": str(g)}, "dashboard_address": ":0"}}
               for g in range(max(1, int(gpus)))}
    scheduler = {"cls": distributed.Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": ":0"}}
    cluster = distributed.SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40)
    try:
        with distributed.Client(cluster, set_as_default=False) as client:
            client.wait_for_workers(len(workers), timeout=60)
            yield client
    finally:
        cluster.close()


def trt_here() -> Tuple[str, Optional[str]]:
    """``(TensorRT version or "none", why implicit INT8 cannot be built here or None)``, on a worker."""
    from . import version
    from .build_job import implicit_int8_reason

    return version() or "none", implicit_int8_reason()  # without TensorRT, the reason says so


class GpuPool:
    """The GPU workers of ``client`` that one measurement uses: those of the most common kind of GPU.

    Attributes
    ----------
    kind : str
        Their GPU's name.
    trt : str
        Their TensorRT's version ("none" without one).
    implicit_reason : str or None
        Why their TensorRT cannot build implicit INT8, or None.
    workers : list of str
        Their addresses.
    left_out : dict
        Address -> GPU name of the GPU workers of other kinds (not used).
    """

    def __init__(self, client):
        from ..core.common.dask_cluster import DistributedError, check_versions

        check_versions(client)
        self.client = client
        info = client.scheduler_info().get("workers", {})
        gpu_workers = [a for a, w in info.items() if w.get("resources", {}).get(GPU)]
        if not gpu_workers:
            raise DistributedError("No Dask worker declares a GPU.",
                                   f"Builds and timing run only on workers with the resource {GPU}=1 (one per GPU).",
                                   f"Start one worker per GPU: CUDA_VISIBLE_DEVICES=0 dask worker SCHEDULER "
                                   f"--nthreads 1 --resources {GPU}=1, and so on.")
        names = client.run(gpu_name, workers=gpu_workers)
        self.kind = Counter(names.values()).most_common(1)[0][0]
        self.workers = sorted(a for a, n in names.items() if n == self.kind)
        self.left_out = {a: n for a, n in names.items() if n != self.kind}
        # The TensorRT that builds: the workers' (the client may have none).
        self.trt, self.implicit_reason = client.run(trt_here, workers=self.workers[:1])[self.workers[0]]

    def note(self) -> str:
        """What the pool left out, '' when nothing."""
        if not self.left_out:
            return ""
        kinds = ", ".join(sorted(set(self.left_out.values())))
        return (f"{len(self.left_out)} GPU worker(s) with another kind of GPU ({kinds}) were left out: the builds and "
                f"the interleaved rounds ran on {self.kind} only (engines are built for their GPU, and rounds on two "
                "kinds would compare the GPUs)")


def build_task(spec: Mapping) -> dict:
    """A worker's build (:func:`~.measure_builds.build_one`), with where it ran and whether it broke the CUDA context."""
    from .build_job import build_one

    result = build_one(spec)
    result["worker"], result["host"] = _where()
    if result["error"]:
        from .cuda import context_broken

        result["context_broken"] = bool(context_broken())
    return result


def build_on_workers(pool: GpuPool, todo: List[dict], progress, done0: int, total: int,
                     limit_s: Optional[float] = None, build: Optional[Callable[[Mapping], dict]] = None
                     ) -> Dict[str, dict]:
    """Key -> result of each spec of ``todo``, built by tasks on ``pool``'s workers (see the module docstring).

    Past ``limit_s`` seconds the builds not finished are cancelled and the workers still building restarted (a
    TensorRT build cannot be stopped inside); each says it was not built within the limit. ``build`` replaces
    :func:`build_task` (tests: a CPU stand-in, to test the scheduling).
    """
    client = pool.client
    futures = {spec["key"]: client.submit(build or build_task, spec, resources={GPU: 1}, workers=pool.workers,
                                          pure=False, key=f"build-{spec['key']}") for spec in todo}
    names = {spec["key"]: spec["name"] for spec in todo}
    results: Dict[str, dict] = {}
    deadline = None if limit_s is None else time.monotonic() + float(limit_s)
    try:
        while len(results) < len(futures):
            for key, fut in futures.items():
                if key not in results and fut.done():
                    results[key] = _finished(client, key, fut)
                    notify(progress, MeasureProgress.of("build", done0 + len(results), total, names[key],
                                                      failed=bool(results[key]["error"])))
            if limit_s is not None and deadline is not None and time.monotonic() > deadline \
                    and len(results) < len(futures):
                _stop_builds(client, futures, results, float(limit_s))
                break
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        client.cancel(list(futures.values()))
        raise
    return results


def _finished(client, key: str, fut) -> dict:
    """A build's result; a worker whose CUDA context the build broke is restarted (a new process, a new context)."""
    try:
        result = fut.result()
    except Exception as exc:  # the worker died in the build, again and again (Dask retried it elsewhere)
        return {"key": key, "engine_path": "", "build_seconds": 0.0, "cached": False,
                "error": f"the build's worker died ({type(exc).__name__}: {str(exc)[:300]})"}
    if result.get("context_broken"):
        client.restart_workers([result["worker"]], raise_for_error=False)
    return result


def _stop_builds(client, futures: Mapping[str, Any], results: Dict[str, dict], limit_s: float) -> None:
    """Past the build limit: cancel what is left, restart the workers still building, say why for each."""
    left = [k for k in futures if k not in results]
    busy = {w for w, keys in client.processing().items() if any(futures[k].key in keys for k in left)}
    client.cancel([futures[k] for k in left])
    if busy:
        client.restart_workers(sorted(busy), raise_for_error=False)
    for key in left:
        results[key] = {"key": key, "engine_path": "", "build_seconds": 0.0, "cached": False,
                        "error": f"not built within the build limit of {limit_s:.0f} s (--build-limit); measured "
                                 "without it"}


def read_engine(path: str) -> bytes:
    """An engine's bytes, on the worker that built it (to time it on another host)."""
    return Path(path).read_bytes()


def time_task(engines: Mapping[str, Any], shapes, rounds: int, runs: int, warmup: int, feeds, check):
    """One comparison timed on this worker's GPU: ``(times, verdicts, interrupted, timed_on)``.

    ``engines``: key -> a path on this host, or the engine's bytes (built on another host; written here first).
    """
    import tempfile

    from .timing_rounds import judge_engines, time_interleaved

    with tempfile.TemporaryDirectory(prefix="trtw-engines-") as tmp:
        paths = {}
        for key, value in engines.items():
            if isinstance(value, bytes):
                paths[key] = str(Path(tmp) / f"{key}.engine")
                Path(paths[key]).write_bytes(value)
            else:
                paths[key] = value
        times, interrupted = time_interleaved(paths, shapes, rounds, runs, warmup, feeds, None)
        verdicts: Dict[str, Any] = {}
        if check is not None and not interrupted:
            verdicts, interrupted = judge_engines(paths, check, None)
    worker, host = _where()
    return times, verdicts, interrupted, f"{gpu_name()} (Dask worker {worker} on {host})"


def time_on_worker(pool: GpuPool, built: Mapping[str, dict], shapes, rounds: int, runs: int, warmup: int, feeds,
                   check, progress, timer: Optional[Callable] = None):
    """The candidates of one comparison timed on one GPU worker: ``(times, verdicts, interrupted, timed_on)``.

    The worker is the one on the host that built most of the engines; the engines built on other hosts travel
    to it through Dask (read where they were built). ``timer`` replaces :func:`time_task` (tests).
    """
    from ..core.common.dask_cluster import results

    client = pool.client
    hosts = client.run(host_name, workers=pool.workers)
    counts = Counter(r.get("host") for r in built.values())
    worker = max(pool.workers, key=lambda a: (counts.get(hosts[a], 0), -pool.workers.index(a)))
    engines: Dict[str, Any] = {}
    for key, r in built.items():
        if r.get("host") and r["host"] != hosts[worker] and r.get("worker"):
            engines[key] = client.submit(read_engine, r["engine_path"], workers=[r["worker"]],
                                         allow_other_workers=False, pure=False)
        else:
            engines[key] = r["engine_path"]
    fut = client.submit(timer or time_task, engines, shapes, rounds, runs, warmup, feeds, check,
                        resources={GPU: 1}, workers=[worker], allow_other_workers=False, pure=False)
    try:
        times, verdicts, interrupted, timed_on = results([fut])[0]
    except KeyboardInterrupt:
        return {}, {}, True, ""
    done = min((len(v) for v in times.values()), default=0)
    for finished in range(1, done + 1):
        notify(progress, MeasureProgress.of("time", finished, rounds))
    return times, verdicts, interrupted, timed_on
