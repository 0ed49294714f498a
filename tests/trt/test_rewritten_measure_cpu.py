"""A plan with FP16 of the rewritten graph, measured on the CPU: its FP16 job, the same-graph pick, the plan folder.

The measurement source is the edge (a stand-in returning round times by job name, as in
``test_plan_measure_cpu.py``); the plan, the exports, the jobs, the re-pick and the folder are the real code.
"""

from __future__ import annotations

import onnx
import pytest

from tests.core import region_models as rm
from tests.trt.test_plan_measure_cpu import StandIn
from trtwidgets import trt
from trtwidgets.cli import main
from trtwidgets.core.plan.measured.measurement import FP16, QDQ
from trtwidgets.core.plan.measured.repick import candidate_job_name
from trtwidgets.core.plan.plan_export import QDQ_FILE, REWRITTEN_FILE, export_plan
from trtwidgets.trt.plan_measure import measure_plan

pytestmark = pytest.mark.skipif(trt.available(), reason="TensorRT is installed: tests/gpu measure for real")


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    return rm.planned_c2f(tmp_path_factory.mktemp("rw"))


def _qdq_nodes(path) -> int:
    return sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in onnx.load(str(path)).graph.node)


def test_measuring_builds_fp16_of_the_rewritten_graph_and_picks_against_it(planned, tmp_path):
    plan, path = planned
    i = next(k for k, c in enumerate(plan.candidates) if c.rewritten)
    rw = candidate_job_name(i, plan.candidates[i])
    # INT8 everywhere is as fast as FP16 of the rewritten graph: its gain over FP16 as given is the rewrites'.
    source = StandIn({FP16: (1.0, 1.01, 0.99, 1.0, 1.02), rw: (0.8, 0.79, 0.81, 0.8, 0.8), QDQ: (0.8,) * 5})
    out = measure_plan(plan, path, work_dir=tmp_path / "w", measure_fn=source, implicit=False, regions=False)
    jobs = {j.name: j for j in source.jobs}
    assert [j.kind for j in source.jobs][:2] == [FP16, FP16] and jobs["fp16"].model_path == str(path)
    job = jobs[rw]
    assert job.kind == FP16 and job.model_path == str(tmp_path / "w" / "candidates" / f"candidate{i}.rewritten.onnx")
    assert _qdq_nodes(job.model_path) == 0 and any(_qdq_nodes(j.model_path) for j in source.jobs if j.kind == QDQ)
    written = onnx.load(job.model_path)
    assert len([n for n in written.graph.node if n.op_type == "Concat"]) == 2
    assert all(not {o for n in written.graph.node if n.op_type == "Split" for o in n.output} & set(n.input)
               for n in written.graph.node if n.op_type == "Concat")
    # The rewritten FP16 wins FP16 as given's rounds and no Q/DQ candidate beats it: it is the measured pick.
    assert out.recommended == i and out.measured.pick.candidate == i
    assert "the rewrites alone: 0.800x FP16 as given" in out.reason

    # The plan folder holds it as model.rewritten.onnx (a float model), and no model.qdq.onnx.
    from trtwidgets.cli._plan_folder import write_plan_folder
    from trtwidgets.cli.plan import _float_pick

    folder = tmp_path / "plan"
    (folder).mkdir()
    (folder / QDQ_FILE).write_bytes(b"an earlier plan's pick")
    write_plan_folder(out, export_plan(str(path), out), folder)
    assert (folder / REWRITTEN_FILE).is_file() and not (folder / QDQ_FILE).exists()
    assert _qdq_nodes(folder / REWRITTEN_FILE) == 0
    assert "build model.rewritten.onnx" in _float_pick(out) and "with FP16" in _float_pick(out)


def test_plan_export_cli_writes_the_rewritten_candidate(planned, tmp_path, capsys):
    plan, path = planned
    i = next(k for k, c in enumerate(plan.candidates) if c.rewritten)
    plan.save(tmp_path / "p")
    out = tmp_path / "c.rewritten.onnx"
    capsys.readouterr()
    assert main(["plan", "export", str(tmp_path / "p"), "--candidate", str(i), "--model", str(path),
                 "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"candidate {i} (FP16 (rewritten graph))" in said and "2 exact graph rewrites" in said
    assert "build it with FP16" in said and out.is_file() and _qdq_nodes(out) == 0
