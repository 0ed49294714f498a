"""``--workers N`` and ``--scheduler tcp://HOST:PORT``: where a command's work runs (Dask; one process without them)."""

from __future__ import annotations


def add_cluster_arguments(parser, what: str = "the work") -> None:
    """The two options, in a group of their own."""
    group = parser.add_argument_group("scale out on Dask (pip install 'trtwidgets[dask]')")
    group.add_argument("--workers", type=int, default=None, metavar="N",
                       help=f"run {what} on N worker processes on this machine (an embedded Dask LocalCluster, "
                            "one thread each); default: in this process")
    group.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                       help=f"run {what} on the workers of a running Dask scheduler (default: $DASK_SCHEDULER_ADDRESS "
                            "when set and --workers is not given); the workers must run this trtwidgets version")


def cluster_of(args):
    """The context manager of the Dask client the arguments ask for (None inside it: this process)."""
    from ..core.common.dask_cluster import cluster_client, env_scheduler

    scheduler = args.scheduler if args.workers is not None else env_scheduler(args.scheduler)
    return cluster_client(workers=args.workers, scheduler=scheduler)
