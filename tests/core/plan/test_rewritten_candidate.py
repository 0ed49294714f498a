"""FP16 of the rewritten graph: the plan's float candidate of the graph the Q/DQ candidates are written on.

Planned for real on a two-C2f stack (two Split -> Concat rewrites), saved and read back, exported and run in ONNX
Runtime; the measured re-pick is fed made-up rounds (the GPU is the edge), everything else is the real code.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import trtwidgets as tw
from tests.core import region_models as rm
from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.core.plan.judge import Judge
from trtwidgets.core.plan.measured.measurement import FP16, QDQ, Measurement
from trtwidgets.core.plan.measured.repick import apply_measurements, candidate_job_name
from trtwidgets.core.plan.plan_artifact import Plan
from trtwidgets.core.plan.plan_file import PlanFileError
from trtwidgets.core.plan.plan_export import REWRITTEN_FILE, export_plan, pick_file
from trtwidgets.core.plan.plan_values import Candidate, PlanAccuracy, PlanRanges, PlanTarget
from trtwidgets.core.plan.float_candidates import REWRITTEN_NAME
from trtwidgets.core.qdq.options import QdqOptions


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    return rm.planned_c2f(tmp_path_factory.mktemp("rewritten"))


def _index(plan: Plan) -> int:
    return next(i for i, c in enumerate(plan.candidates) if c.rewritten)


def test_a_plan_whose_export_rewrites_has_the_rewritten_fp16_right_after_fp16(planned):
    plan, _ = planned
    i = _index(plan)
    c = plan.candidates[i]
    assert i == 1 and c.name == REWRITTEN_NAME and not c.quantized and not c.kept
    assert plan.candidates[2].quantized  # INT8 everywhere follows
    # Exact rewrites: FP16's verdict, FP16's estimate (the cost model does not price what they remove).
    assert c.accuracy == plan.candidates[0].accuracy and c.meets_target == plan.candidates[0].meets_target
    assert c.latency_us == plan.candidates[0].latency_us and c.vs_fp16 == 1.0
    assert sum(1 for cc in plan.candidates if cc.rewritten) == 1
    assert any(f"'{REWRITTEN_NAME}' is FP16 of that graph" in n and "its estimate is FP16's" in n for n in plan.notes)
    # Same estimate: FP16 as given keeps the tie, the pick is unchanged by the new candidate.
    assert plan.recommended != i and Judge(plan.target).pick(plan.candidates)[0] == plan.recommended


def test_the_rewritten_candidate_survives_plan_json_and_old_files_read_without_it(planned, tmp_path):
    plan, _ = planned
    plan.save(tmp_path)
    doc = json.loads((tmp_path / "plan.json").read_text())
    i = _index(plan)
    assert doc["candidates"][i]["rewritten"] is True and "rewritten" not in doc["candidates"][0]
    back = Plan.load(tmp_path)
    assert [c.to_dict() for c in back.candidates] == doc["candidates"] and back.candidates[i].rewritten
    assert [c.rewritten for c in back.candidates] == [c.rewritten for c in plan.candidates]
    del doc["candidates"][i]["rewritten"]  # a plan.json written before the flag: every candidate is as given
    if doc["recommended"] is not None and doc["recommended"] >= i:
        doc["recommended"] = 0
    assert not any(c.rewritten for c in Plan.from_dict(doc).candidates)
    doc["candidates"][2]["rewritten"] = True  # a Q/DQ candidate is never the rewritten graph's FP16
    with pytest.raises(PlanFileError, match=r"candidates\[2\].rewritten"):
        Plan.from_dict(doc)


def _run(model: onnx.ModelProto, feed) -> list:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def test_export_writes_the_float_model_with_the_rewrites_and_the_same_outputs(planned, tmp_path):
    plan, path = planned
    i = _index(plan)
    out = tmp_path / REWRITTEN_FILE
    ex = export_plan(str(path), plan, out, candidate=i)
    assert ex is not None and out.is_file() and not ex.report.quantized_layers
    written = onnx.load(str(out))
    assert not [n for n in written.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    # The rewrite is applied: no Concat reads a Split's outputs any more (the source's two C2f Concats did).
    source = onnx.load(str(path))

    def concat_reads_split(m):
        split_outs = {o for n in m.graph.node if n.op_type == "Split" for o in n.output}
        return sum(1 for n in m.graph.node if n.op_type == "Concat" and split_outs & set(n.input))

    assert concat_reads_split(source) == 2 and concat_reads_split(written) == 0
    assert {k for k, _ in ex.report.rewrites} == {"split_concat"} and len(ex.report.rewrites) == 2
    feed = rm.feeds(source, 1)[0]
    for a, b in zip(_run(source, feed), _run(written, feed)):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    # FP16 as given still writes nothing, and an INT8 candidate its Q/DQ model, as before.
    assert export_plan(str(path), plan, tmp_path / "fp16.onnx", candidate=0) is None
    assert not (tmp_path / "fp16.onnx").exists()


def test_a_model_without_rewrites_has_no_rewritten_candidate():
    p = tw.plan(conv_stack(channels=8, depth=2), feeds(12, channels=8), progress=False, regions=False,
                options=QdqOptions(trt_version="8.6"), target=PlanTarget(cosine=0.9))
    assert not any(c.rewritten for c in p.candidates)
    assert not any("exact graph rewrites" in n for n in p.notes)


def test_an_island_plan_gives_the_rewritten_candidate_the_islands_verdict():
    """The float part that needs an island: every INT8 candidate keeps it, so the rewritten FP16 is judged with it."""
    from trtwidgets.core.plan.accuracy_search import Candidates
    from trtwidgets.core.plan.float_candidates import add_rewritten

    fp16, island = PlanAccuracy(0.5, 3.0), PlanAccuracy(0.999, 40.0)
    # The float part's check as the planner holds it: FP16's verdict, the island and the island's verdict.
    part = SimpleNamespace(fixed=True, island=("log", "add_eps"), verdict=SimpleNamespace(accuracy=fp16),
                           island_verdict=SimpleNamespace(accuracy=island))
    flat = type("Flat", (), {"kind": "estimate", "estimate": lambda self, layers: 100.0})()  # every candidate alike
    cands = Candidates(flat, Judge(PlanTarget(cosine=0.99)))
    notes: list = []
    add_rewritten(cands, (("split_concat", "cat"),), part, notes)
    (c,) = cands.items
    assert c.rewritten and c.accuracy == island and c.meets_target
    assert "its 2 island nodes kept FP32" in notes[0] and "--candidate 0" in notes[0]


# -- the measured re-pick: the same graph's FP16 -------------------------------------------------------

GOOD = PlanAccuracy(0.999, 30.0)
TARGET = PlanTarget(cosine=0.99)


def _cand(name, layers, us, rewritten=False):
    return Candidate(name, tuple(layers), (), GOOD, us, 100.0, "estimate", True, rewritten=rewritten)


def _plan() -> Plan:
    cands = [_cand("FP16 (no INT8)", (), 100.0), _cand(REWRITTEN_NAME, (), 100.0, rewritten=True),
             _cand("INT8 everywhere", ("a", "b"), 80.0)]
    best, reason = Judge(TARGET).pick(cands)
    return Plan(model="m.onnx", target=TARGET, candidates=tuple(cands), recommended=best, reason=reason,
                ranges=PlanRanges(amax={"x": 1.0}))


def _ms(name, times, kind=QDQ):
    return Measurement(name, kind, tuple(times))


def test_a_qdq_candidate_must_beat_fp16_of_its_own_graph_and_the_rewrites_gain_is_reported():
    p = _plan()
    rw, int8 = candidate_job_name(1, p.candidates[1]), candidate_job_name(2, p.candidates[2])
    # The INT8 candidate beats FP16 as given in every round, but only by what the rewrites give FP16 too.
    rounds = [_ms(FP16, (1.00, 1.01, 0.99, 1.00, 1.02), FP16), _ms(rw, (0.80, 0.79, 0.81, 0.80, 0.80), FP16),
              _ms(int8, (0.80, 0.80, 0.80, 0.81, 0.79))]
    out = apply_measurements(p, rounds, rounds=5)
    assert out.recommended == 1 and out.candidates[1].rewritten  # it needs no INT8 and wins FP16's rounds
    assert "the rewrites alone: 0.800x FP16 as given" in out.reason
    assert "faster in 5 of 5 paired rounds" in out.reason
    # Measured against FP16 as given alone (the old comparison), the INT8 candidate would have been picked.
    without = apply_measurements(p, [rounds[0], rounds[2]], rounds=5)
    assert without.recommended == 2
    # A candidate that beats the rewritten graph's FP16 is picked, its ratio to that FP16, the gain beside it.
    fast = rounds[:2] + [_ms(int8, (0.60, 0.61, 0.59, 0.60, 0.60))]
    out = apply_measurements(p, fast, rounds=5)
    assert out.recommended == 2
    assert "measured 0.750x FP16 of the rewritten graph" in out.reason
    assert "the rewrites alone: 0.800x FP16 as given (1.0000 ms)" in out.reason
    assert out.measured.pick.fp16_ms == pytest.approx(0.80)
    # Rows stay relative to FP16 as given: the rewritten FP16's row is the rewrites' own gain.
    assert out.measured.row_of(1).vs_fp16 == pytest.approx(0.8)


def test_fp16_as_given_stays_the_pick_when_the_rewrites_gain_nothing():
    p = _plan()
    rw, int8 = candidate_job_name(1, p.candidates[1]), candidate_job_name(2, p.candidates[2])
    same = [_ms(FP16, (1.00, 1.01, 0.99, 1.00, 1.02), FP16), _ms(rw, (1.01, 1.00, 1.00, 0.99, 1.00), FP16),
            _ms(int8, (1.20, 1.21, 1.19, 1.20, 1.20))]
    out = apply_measurements(p, same, rounds=5)
    assert out.recommended == 0 and out.reason.startswith("FP16 is best here (measured)")
    assert "not faster than FP16 as given by the paired rounds" in out.reason
    # Its build failed: the candidates are compared with FP16 as given, and a note says their gain includes the rewrites'.
    failed = [same[0], Measurement(rw, FP16, (), error="build failed"), _ms(int8, (0.7, 0.71, 0.69, 0.7, 0.7))]
    out = apply_measurements(p, failed, rounds=5)
    assert out.recommended == 2 and "x FP16 (" in out.reason
    assert any("not measured (build failed)" in n and "includes the rewrites'" in n for n in out.notes)


def test_plan_folder_names_the_rewritten_pick_model_rewritten_onnx():
    p = dataclasses.replace(_plan(), recommended=1)
    assert pick_file(p) == REWRITTEN_FILE and pick_file(_plan()) == "model.qdq.onnx"


def test_implicit_int8_pick_names_the_rewritten_float_model_as_what_plan_export_writes():
    """Implicit INT8 wins every engine; the fastest exportable is FP16 of the rewritten graph, said as a float model."""
    from trtwidgets.core.plan.measured.measurement import INT8_IMPLICIT
    from trtwidgets.core.plan.plan_values import EngineVerdict

    meets = EngineVerdict.from_dict({"meets": True, "cosine": 0.998, "samples": 8})
    p = _plan()
    rw, int8 = candidate_job_name(1, p.candidates[1]), candidate_job_name(2, p.candidates[2])
    rounds = [_ms(FP16, (1.00, 1.01, 0.99, 1.00, 1.02), FP16), _ms(rw, (0.80, 0.79, 0.81, 0.80, 0.80), FP16),
              _ms(int8, (0.85, 0.86, 0.84, 0.85, 0.85)), Measurement("int8_implicit", INT8_IMPLICIT, (0.5, 0.51, 0.49, 0.5, 0.5), accuracy=meets)]
    out = apply_measurements(p, rounds, rounds=5)
    assert out.reason.startswith("Implicit INT8"), out.reason
    assert "the rewritten float model built with FP16" in out.reason and "fastest Q/DQ export" not in out.reason
