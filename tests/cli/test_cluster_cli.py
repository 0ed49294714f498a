"""``--workers`` and ``--scheduler`` on the command line, against real Dask processes on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time

import numpy as np
import onnx
import pytest

from tests.cli.dask_processes import scheduler_and_workers
from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.cli import main
from trtwidgets.core.calibration.calibration import Calibration
from trtwidgets.core.common.dask_cluster import DistributedError, cluster_client

distributed = pytest.importorskip("distributed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_is_exit_2_with_what_why_and_fix_within_10_s(tmp_path, capsys, cls_model_path):
    address = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    t = time.monotonic()
    rc = main(["calibrate", str(cls_model_path), "--data", "demo", "--out", str(tmp_path / "c.npz"),
               "--scheduler", address])
    took = time.monotonic() - t
    err = capsys.readouterr().err
    assert rc == 2 and took < 10, (rc, took)
    assert f"Cannot reach the Dask scheduler at {address}" in err and "Why:" in err and "dask scheduler" in err
    assert not (tmp_path / "c.npz").exists()


def test_the_environment_names_the_scheduler_and_workers_win(tmp_path, capsys, cls_model_path, monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", f"tcp://127.0.0.1:{_free_port()}")
    assert main(["calibrate", str(cls_model_path), "--data", "demo", "--max-samples", "4"]) == 2
    assert "Cannot reach the Dask scheduler" in capsys.readouterr().err
    with pytest.raises(DistributedError, match="Both workers and scheduler"):
        with cluster_client(workers=2, scheduler="tcp://127.0.0.1:1"):
            pass
    with pytest.raises(DistributedError, match="not a number of worker processes"):
        with cluster_client(workers=0):
            pass


def test_calibrate_on_2_workers_writes_the_same_calibration(tmp_path, cls_model_path):
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    args = ["calibrate", str(cls_model_path), "--data", "demo", "--max-samples", "48", "--batch-size", "4",
            "--no-progress"]
    assert main(args + ["--out", str(one)]) == 0
    assert main(args + ["--out", str(two), "--workers", "2"]) == 0
    a, b = Calibration.load(one), Calibration.load(two)
    assert a.stats.samples == b.stats.samples == 48
    for method in ("auto", "entropy", "percentile", "mse", "max"):
        ra, rb = a.refit(method=method).amax, b.refit(method=method).amax
        assert ra.keys() == rb.keys() and ra
        assert all(rb[k] == pytest.approx(ra[k], rel=1e-6) for k in ra), method


@pytest.mark.slow
def test_plan_against_a_scheduler_and_two_dask_workers_decides_as_one_process(tmp_path):
    onnx.save(conv_stack(channels=32, depth=6), tmp_path / "m.onnx")
    data = tmp_path / "data"
    data.mkdir()
    for i, f in enumerate(feeds(16, channels=32, size=56)):  # INT8 pays at this size; the search bisects
        np.save(data / f"s{i:02d}.npy", f["x"])
    args = ["plan", str(tmp_path / "m.onnx"), "--data", str(data), "--target-cosine", "0.9995", "--batch", "16",
            "--trt-version", "10.16", "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "one")]) == 0
    with scheduler_and_workers(tmp_path) as address:
        assert main(args + ["--out", str(tmp_path / "two"), "--scheduler", address]) == 0
        with distributed.Client(address, set_as_default=False) as client:
            prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert "answer" in prefixes and "collect_shard" in prefixes  # the scheduler saw the questions and the shards
    one, two = (json.loads((tmp_path / d / "plan.json").read_text()) for d in ("one", "two"))
    assert [(c["name"], c["quantized"]) for c in one["candidates"]] == \
        [(c["name"], c["quantized"]) for c in two["candidates"]]
    assert one["recommended"] == two["recommended"] and len(one["candidates"]) >= 5


def test_a_worker_of_another_trtwidgets_is_refused_at_connect(tmp_path, capsys, cls_model_path):
    other = tmp_path / "other"
    (other / "trtwidgets").mkdir(parents=True)
    (other / "trtwidgets" / "__init__.py").write_text('__version__ = "0.0.1-other"\n')
    with scheduler_and_workers(tmp_path, workers=1, pythonpath=other) as address:
        with pytest.raises(DistributedError, match="another trtwidgets") as err:
            with cluster_client(scheduler=address):
                pass
        assert "0.0.1-other" in err.value.what and err.value.fix
        assert main(["calibrate", str(cls_model_path), "--data", "demo", "--scheduler", address]) == 2
    assert "another trtwidgets" in capsys.readouterr().err
