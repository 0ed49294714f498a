"""Where work that outgrows one process runs: a Dask distributed cluster, one machine by default.

Three ways in, as Dask-aware libraries take them:

- ``client=`` (API): a :class:`distributed.Client` the caller made and keeps (it is never closed here);
- ``scheduler="tcp://HOST:PORT"`` (``--scheduler``; the CLI reads ``DASK_SCHEDULER_ADDRESS`` when it is not
  given): an existing cluster, reached within :data:`CONNECT_TIMEOUT_S` seconds or refused with what to do;
- ``workers=N`` (``--workers N``): an embedded :class:`distributed.LocalCluster` on 127.0.0.1, N worker
  processes of one thread each (ONNX Runtime on one thread in each, so N workers use N CPUs), Dask's own
  share of this machine's memory each, closed when the work ends.

Without any of them nothing here is used: the single-process path runs as it always did, and ``dask`` is
never imported (it is an optional extra, ``pip install trtwidgets[dask]``; ``core`` and ``trt`` import
without it on the GPU machine's Python 3.9). Every worker must run the trtwidgets of this process: the
versions are compared when connecting (:func:`check_versions`), and a worker with another is refused.

Scheduling, transport and retries are Dask's: a task of a worker that died is run again on another
(``distributed.scheduler.allowed-failures``); :func:`results` waits for futures in order and cancels
them when the work's cancel token is set (:mod:`.cancel`).
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional, Sequence

from .errors import UserError

__all__ = ["CONNECT_TIMEOUT_S", "SCHEDULER_ENV", "DistributedError", "check_versions", "cluster_client",
           "env_scheduler", "require_dask", "results", "worker_count"]

#: The environment variable Dask's own tools read for the scheduler's address.
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
#: Seconds to reach a scheduler before saying it cannot be reached (the CLI's exit 2 comes within 10 s).
CONNECT_TIMEOUT_S = 5.0
#: Seconds to wait for a scheduler's first worker.
WORKER_WAIT_S = 20.0
#: How often (seconds) a wait for futures looks at the cancel token.
POLL_S = 0.05


class DistributedError(UserError):
    """The cluster cannot be used: unreachable, without workers, a worker of another version, no dask."""


def require_dask():
    """``distributed``, or a DistributedError that says how to install it."""
    try:
        import distributed
    except ImportError as exc:
        raise DistributedError("Dask distributed is not installed, so --workers / --scheduler / client= cannot run.",
                               f"{type(exc).__name__}: {exc}",
                               "Install the extra: pip install 'trtwidgets[dask]' (or drop the option to run in "
                               "this process).") from None
    return distributed


@contextmanager
def cluster_client(client=None, workers: Optional[int] = None, scheduler: Optional[str] = None) -> Iterator[Any]:
    """The :class:`distributed.Client` to run on, or None for this process alone (nothing given).

    Parameters
    ----------
    client : distributed.Client, optional
        Used as it is (its versions checked) and left open.
    workers : int, optional
        Start a LocalCluster of this many worker processes for the block.
    scheduler : str, optional
        ``tcp://HOST:PORT`` (or ``tls://``) of a running scheduler.

    Raises
    ------
    DistributedError
        More than one way given, a bad worker count, an unreachable scheduler or one without workers,
        a worker of another trtwidgets version, dask not installed.
    """
    given = [n for n, v in (("client", client), ("workers", workers), ("scheduler", scheduler)) if v is not None]
    if len(given) > 1:
        raise DistributedError(f"Both {given[0]} and {given[1]} were given.",
                               "The work runs on one cluster: an embedded one (workers), an existing one (scheduler "
                               "or client).", "Give one of them.")
    if not given:
        yield None
        return
    if client is not None:
        check_versions(client)
        yield client
        return
    if workers is not None:
        with _local_cluster(workers) as local:
            yield local
        return
    with _connected(str(scheduler)) as remote:
        yield remote


@contextmanager
def _local_cluster(workers) -> Iterator[Any]:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise DistributedError(f"--workers {workers!r} is not a number of worker processes.",
                               "Each worker is a process of one thread on this machine.",
                               "Give 1 or more, e.g. --workers 2 (or drop it to run in this process).")
    distributed = require_dask()
    from .ort import THREADS_ENV

    # One ORT thread per worker: N single-threaded workers fill N CPUs; more would compete for them.
    # Dask's "auto" memory limit gives each worker its share of this machine's memory.
    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=":0", memory_limit="auto", silence_logs=40,
                                       env={THREADS_ENV: "1"})
    try:
        with distributed.Client(cluster, set_as_default=False) as client:
            yield client
    finally:
        cluster.close()


@contextmanager
def _connected(address: str) -> Iterator[Any]:
    distributed = require_dask()
    if "://" not in address:
        raise DistributedError(f"--scheduler {address!r} is not a scheduler address.",
                               "Dask schedulers listen at PROTOCOL://HOST:PORT.",
                               "Give e.g. --scheduler tcp://10.0.0.5:8786 (tls:// with Dask's TLS settings).")
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise DistributedError(f"Cannot reach the Dask scheduler at {address}.",
                               f"{type(exc).__name__}: {str(exc)[:300]} (waited {CONNECT_TIMEOUT_S:.0f} s)",
                               f"Start one there (`dask scheduler`), check the host, port and firewall (and TLS "
                               f"settings for tls://), unset {SCHEDULER_ENV} if it names an old one, or use "
                               "--workers N to run on this machine.") from None
    try:
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except (TimeoutError, OSError):
            raise DistributedError(f"The Dask scheduler at {address} has no workers.",
                                   f"None connected within {WORKER_WAIT_S:.0f} s; tasks would wait for ever.",
                                   f"Start workers: `dask worker {address}` on each machine.") from None
        check_versions(client)
        yield client
    finally:
        client.close()


def check_versions(client) -> None:
    """Refuse a cluster whose workers run another trtwidgets than this process (or none).

    A worker with other code would answer other questions: a plan's decisions could differ, silently.
    """
    found = client.get_versions(packages=["trtwidgets"])
    __version__ = found["client"]["packages"]["trtwidgets"]  # this process's, read the way the workers' are
    other = {addr: info.get("packages", {}).get("trtwidgets") for addr, info in found.get("workers", {}).items()}
    other = {addr: v for addr, v in other.items() if v != __version__}
    if other:
        listed = ", ".join(f"{addr} has {v or 'none'}" for addr, v in sorted(other.items())[:4])
        raise DistributedError(f"{len(other)} Dask worker(s) run another trtwidgets than this process "
                               f"({__version__}): {listed}.",
                               "Every worker must run the same code, or the same question could get another answer.",
                               f"Install trtwidgets {__version__} where those workers run and restart them "
                               "(`dask worker ...`), or stop them.")


def worker_count(client) -> int:
    """Workers the scheduler knows now."""
    return len(client.scheduler_info().get("workers", {}))


def results(futures: Sequence[Any], on_each=None) -> List[Any]:
    """Each future's result, in order; a cancel of this thread's work (:func:`.cancel.check`) cancels them all.

    ``on_each(i, result)`` is called as each arrives (progress). An error a task raised is raised here.
    """
    from .cancel import check

    out = []
    try:
        for i, fut in enumerate(futures):
            # Woken when the future is done, looking at the token meanwhile. (A result(timeout=) would abandon a
            # large result in the middle of its transfer and fetch it again.)
            done = threading.Event()
            fut.add_done_callback(lambda _, done=done: done.set())
            while not done.wait(POLL_S):
                check()
            out.append(fut.result())
            if on_each is not None:
                on_each(i, out[-1])
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    return out


def env_scheduler(given: Optional[str]) -> Optional[str]:
    """``--scheduler`` as given, else ``$DASK_SCHEDULER_ADDRESS`` (Dask's own convention), else None."""
    if given:
        return given
    return os.environ.get(SCHEDULER_ENV, "").strip() or None
