"""A real Dask scheduler and workers as separate processes on 127.0.0.1 (``dask scheduler``, ``dask worker``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from tests.conftest import ROOT


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 30.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.is_file() and path.stat().st_size:
            try:
                return json.loads(path.read_text())
            except ValueError:
                pass
        if proc.poll() is not None:
            raise RuntimeError(f"the scheduler exited with {proc.returncode}")
        time.sleep(0.1)
    raise RuntimeError("the scheduler did not start")


@contextmanager
def scheduler_and_workers(tmp: Path, workers: int = 2, pythonpath: Optional[Path] = None) -> Iterator[str]:
    """``dask scheduler`` and ``workers`` single-threaded ``dask worker`` processes; yields the scheduler's address.

    The workers import trtwidgets from ``pythonpath`` (default: this repository).
    """
    env = dict(os.environ, PYTHONPATH=str(pythonpath or ROOT), TRTWIDGETS_ORT_THREADS="1")
    file = tmp / "scheduler.json"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", str(file)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        address = _wait_for(file, procs[0])["address"]
        for _ in range(workers):
            procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads",
                                           "1", "--no-dashboard", "--host", "127.0.0.1"], env=env, cwd=str(tmp),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
