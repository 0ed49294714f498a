"""``--workers N`` and ``--scheduler tcp://HOST:PORT``: where a command's work runs (Dask; one process without them)."""

from __future__ import annotations


def add_cluster_arguments(parser, what: str = "the work", gpu: bool = False) -> None:
    """The two options, in a group of their own (``gpu``: the workers are GPU workers, one GPU each)."""
    group = parser.add_argument_group("scale out on Dask (pip install 'trtwidgets[dask]')")
    here = ("N worker processes on this machine, one GPU each (CUDA_VISIBLE_DEVICES, the resource GPU=1)" if gpu else
            "N worker processes on this machine (an embedded Dask LocalCluster, one thread each)")
    group.add_argument("--workers", type=int, default=None, metavar="N",
                       help=f"run {what} on {here}; default: in this process")
    theirs = " whose workers declare GPU=1 (dask worker --resources GPU=1, one per GPU)" if gpu else ""
    group.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                       help=f"run {what} on the workers of a running Dask scheduler{theirs} (default: "
                            "$DASK_SCHEDULER_ADDRESS when set and --workers is not given); the workers must run this "
                            "trtwidgets version")


def cluster_of(args):
    """The context manager of the Dask client the arguments ask for (None inside it: this process)."""
    from ..core.common.dask_cluster import cluster_client, env_scheduler

    scheduler = args.scheduler if args.workers is not None else env_scheduler(args.scheduler)
    return cluster_client(workers=args.workers, scheduler=scheduler)


def gpu_cluster_of(args):
    """For GPU work (builds, timing): ``--workers N`` is N workers on this machine, one GPU each
    (:func:`~trtwidgets.trt.dask_measure.gpu_cluster`); ``--scheduler`` a cluster whose workers declare ``GPU=1``."""
    from contextlib import nullcontext

    from ..core.common.dask_cluster import cluster_client, env_scheduler

    if args.workers is not None:
        if args.scheduler:
            return cluster_client(workers=args.workers, scheduler=args.scheduler)  # refused: say both were given
        from ..core.common.dask_cluster import DistributedError

        if isinstance(args.workers, bool) or args.workers < 1:
            raise DistributedError(f"--workers {args.workers} is not a number of GPU workers.",
                                   "Each worker is a process with one GPU of this machine.", "Give 1 or more.")
        from ..trt.dask_measure import gpu_cluster

        return gpu_cluster(args.workers)
    scheduler = env_scheduler(args.scheduler)
    return cluster_client(scheduler=scheduler) if scheduler else nullcontext(None)
