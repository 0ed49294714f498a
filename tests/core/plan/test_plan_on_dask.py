"""The planner on a real Dask cluster (127.0.0.1): the same candidates and pick, Cancel, a worker killed mid-plan."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.core.plan.plan_values import PlanTarget
from trtwidgets.core.plan.planner import plan

distributed = pytest.importorskip("distributed")

#: Planned at this shape INT8 pays in every layer; at this target the search ranks the layers, tunes ranges and
#: bisects (6 candidates), so every kind of question goes to the workers.
KW = dict(shapes={"x": (16, 32, 56, 56)}, progress=False, regions=False, target=PlanTarget(cosine=0.9997))


def _case():
    return conv_stack(channels=32, depth=6), feeds(24, channels=32)


def _decisions(p):
    return [(c.name, c.quantized, c.kept, c.accuracy) for c in p.candidates], p.recommended, p.reason


@pytest.fixture(scope="module")
def one_process():
    model, data = _case()
    return plan(model, data, **KW)


def test_plan_on_workers_asks_the_workers_and_decides_as_one_process(dask_client, one_process):
    model, data = _case()
    assert len(one_process.candidates) >= 5  # the search went as far as the bisection
    with distributed.get_task_stream(dask_client) as ts:
        many = plan(model, data, client=dask_client, **KW)
    assert _decisions(many) == _decisions(one_process)
    ran = [t["key"] for t in ts.data]
    assert sum(str(k).startswith("answer-") for k in ran) >= 10  # each question a task of its own
    assert any(str(k).startswith("collect_shard-") for k in ran)  # the statistics too
    workers = {t["worker"] for t in ts.data if str(t["key"]).startswith("answer-")}
    assert len(workers) == 2


def test_a_cancel_stops_the_plan_and_cancels_the_questions_in_flight(dask_client):
    model, data = _case()
    token = threading.Event()

    def on_event(e):
        if e.phase == "layer cost" and e.kind == "step" and e.step == 1:
            token.set()

    p = plan(model, data, client=dask_client, cancel=token, **dict(KW, progress=on_event))
    assert p.interrupted and p.candidates
    assert any("cancel" in n for n in p.notes)
    # Nothing of the plan is left running or held on the workers (the scheduler hears of it within moments).
    deadline = time.monotonic() + 5
    while True:
        left = [k for k in dask_client.run_on_scheduler(lambda dask_scheduler: [str(k) for k in dask_scheduler.tasks])
                if k.startswith(("answer-", "EvaluatorState-"))]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left


def test_a_worker_killed_mid_plan_is_replaced_and_the_plan_decides_the_same(one_process):
    from trtwidgets.core.common.dask_cluster import cluster_client

    model, data = _case()
    killed = []
    with cluster_client(workers=2) as client:
        pids = client.run(os.getpid)

        def on_event(e):
            if e.phase == "layer cost" and e.step == 1 and not killed:  # questions in flight on both workers
                pid = next(iter(pids.values()))
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        many = plan(model, data, client=client, **dict(KW, progress=on_event))
        assert killed and killed[0] not in client.run(os.getpid).values()  # the nanny started a new one
    assert _decisions(many) == _decisions(one_process)
