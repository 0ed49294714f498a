"""The region search: schemes scored by the planner, plan.json's record, the choice by sub-model times, the confirm.

The GPU measurement is an edge (``measure_fn``, as ``measure_plan`` takes it): the fake here returns times by job
name; everything else (the exports, the cuts, the choice, the plan) is the real code.
"""

from __future__ import annotations

import dataclasses
import json
import math

import onnx
import pytest

import trtwidgets as tw
from tests.core import region_models as rm
from tests.core.qdq_border_blocks import float_siblings
from tests.core.qdq_blocks import simple_amax
from trtwidgets.core.plan.accuracy_search import WRITTEN_FLOAT, as_written
from trtwidgets.core.plan.measured.measurement import FP16, Measurement
from trtwidgets.core.plan.plan_eval import Evaluator
from trtwidgets.core.plan.plan_file import PlanFileError
from trtwidgets.core.plan.regions.pick import choose_scheme, combined_candidate, region_lines
from trtwidgets.core.plan.regions.records import PatternRecord, RegionSearch, SchemeResult
from trtwidgets.core.qdq.options import QdqOptions
from trtwidgets.trt.measure import MeasureReport
from trtwidgets.trt.plan_measure import measure_plan


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    return rm.planned_c2f(tmp_path_factory.mktemp("regions"), regions=True)


def test_the_planner_scores_each_patterns_schemes_on_the_held_back_samples(planned):
    plan, _ = planned
    search = plan.regions
    assert search is not None and plan.candidates[search.base].quantized and "regions" in plan.seconds
    names = {p.kind: p for p in search.patterns}
    assert set(names) == {"residual", "concat", "branch"}
    res = names["residual"]
    assert [s.scheme for s in res.schemes] == ["both", "skip"] and res.schemes[0].default
    assert dict(res.scheme("skip").choices) == {"c2f1/m.0/Add": "skip", "c2f2/m.0/Add": "skip"}
    assert res.representative in res.instances and dict(res.inputs)
    for p in search.patterns:
        for s in p.schemes:
            assert s.accuracy is not None and 0.9 < s.accuracy.cosine <= 1.0 and s.meets_target is not None
    branch = names["branch"]
    assert {s.scheme for s in branch.schemes} == {"int8", "float:0", "float:1"}
    assert set(branch.scheme("float:0").float_layers) == {"box0/conv", "box1"}


def test_plan_json_holds_the_region_search_and_a_wrong_field_is_named(planned, tmp_path):
    plan, _ = planned
    plan.save(tmp_path)
    back = tw.Plan.load(tmp_path)
    assert back.regions.to_dict() == plan.regions.to_dict()
    doc = json.loads((tmp_path / "plan.json").read_text())
    doc["regions"]["patterns"][0]["schemes"][1]["choices"] = {"c2f1/m.0/Add": "sideways"}
    with pytest.raises(PlanFileError, match=r"regions.patterns\[0\].schemes\[1\].choices"):
        tw.Plan.from_dict(doc)
    doc["regions"]["base"] = 99
    with pytest.raises(PlanFileError, match="regions.base"):
        tw.Plan.from_dict(doc)


def _ms(name, t, spread=0.01, error=""):
    return Measurement(name, "qdq", () if error else (t, t + spread, t - spread / 2), key=name, error=error)


def _record(default_ms, other_ms, other_meets=True, buildable=True):
    return PatternRecord("residual:x", "residual", "Add", ("a1", "a2"), "a1", (("t", (1, 2)),), (
        SchemeResult("both", default=True, timing=_ms("d", default_ms) if default_ms else None),
        SchemeResult("skip", (("a1", "skip"), ("a2", "skip")), meets_target=other_meets, buildable=buildable,
                     timing=_ms("o", other_ms) if other_ms else None)))


@pytest.mark.parametrize("default_ms,other_ms,meets,buildable,chosen", [
    (1.0, 0.8, True, True, "skip"),      # faster beyond the noise
    (1.0, 0.995, True, True, "both"),    # within the noise: the default stays
    (1.0, 0.5, False, True, "both"),     # misses the target: never chosen
    (1.0, 0.5, True, False, "both"),     # TensorRT 8.6 cannot build it: never chosen
    (None, 0.9, True, True, "skip"),     # the default has no time
])
def test_a_scheme_replaces_the_default_only_when_faster_beyond_the_noise_and_offered(default_ms, other_ms, meets,
                                                                                      buildable, chosen):
    rec = choose_scheme(_record(default_ms, other_ms, meets, buildable))
    assert rec.chosen == chosen and rec.reason


def test_the_combined_candidate_takes_every_chosen_scheme_and_says_its_accuracy_is_the_schemes(planned):
    plan, _ = planned
    rec = dataclasses.replace(_record(1.0, 0.8), chosen="skip")
    search = RegionSearch(plan.regions.base, (rec,))
    cand = combined_candidate(search, plan.candidates)
    assert dict(cand.choices) == {"a1": "skip", "a2": "skip"} and math.isnan(cand.latency_us)
    assert cand.quantized == plan.candidates[plan.regions.base].quantized
    assert combined_candidate(RegionSearch(plan.regions.base, (dataclasses.replace(rec, chosen="both"),)),
                              plan.candidates) is None


def _fake(faster: str, log: list):
    def measure_fn(jobs, cache, **kw):
        log.append([(j.name, j.model_path) for j in jobs])
        out = []
        for j in jobs:
            t = 2.0 if j.kind == FP16 else (0.8 if j.name.endswith(faster) else 1.0)
            out.append(Measurement(j.name, j.kind, (t, t + 0.01, t - 0.01), key=j.name))
        return MeasureReport(tuple(out), 3)

    return measure_fn


def test_measure_plan_times_each_schemes_sub_model_then_builds_the_combination_beside_fp16_and_the_base(planned,
                                                                                                      tmp_path):
    plan, path = planned
    log: list = []
    new = measure_plan(plan, str(path), work_dir=tmp_path / "w", cache_dir=tmp_path / "c", implicit=False, top=0,
                       progress=False, measure_fn=_fake(" skip", log))
    subs, whole = log
    assert {n.split(" ")[-1] for n, _ in subs} == {"both", "skip", "shared", "float", "int8", "float:0", "float:1"}
    for _, p in subs:  # each a cut of the representative, at its recorded shapes
        sub = onnx.load(p)
        assert 0 < len(sub.graph.node) < len(plan_model(path).graph.node)
    res = next(p for p in new.regions.patterns if p.kind == "residual")
    assert res.chosen == "skip" and res.scheme("skip").timing.median_ms == pytest.approx(0.8)
    lines = region_lines(new.regions)
    assert any(line.startswith(f"region {res.name}") and "chosen skip: faster beyond the noise" in line
               for line in lines) and lines[-1].endswith(f"candidate {new.regions.combined}")
    combo = new.regions.combined
    assert combo == len(plan.candidates) and dict(new.candidates[combo].choices) == dict(res.scheme("skip").choices)
    # FP16 of the rewritten graph (its two C2f Concats read their Split's input) is built beside FP16 as given.
    assert [n for n, _ in whole] == ["fp16", _rewritten_job(plan),
                                     f"#{new.regions.base} {plan.candidates[new.regions.base].name}",
                                     f"#{combo} {new.candidates[combo].name}"]
    # The combined candidate's export writes its choices: the skip-only adds read one input quantized.
    ex = tw.export_plan(str(path), new, candidate=combo)
    adds = [n for n in ex.model.graph.node if n.op_type == "Add" and n.name.endswith("m.0/Add")]
    dq = {n.output[0] for n in ex.model.graph.node if n.op_type == "DequantizeLinear"}
    assert all(sum(1 for t in a.input if t in dq) == 1 for a in adds)
    new.save(tmp_path / "out")
    assert tw.Plan.load(tmp_path / "out").regions.combined == combo


def plan_model(path):
    return onnx.load(str(path))


def _rewritten_job(plan) -> str:
    """The measurement name of the plan's FP16 of the rewritten graph (the c2f stack's export rewrites)."""
    i = next(i for i, c in enumerate(plan.candidates) if c.rewritten)
    return f"#{i} {plan.candidates[i].name}"


def test_without_a_faster_scheme_only_the_base_is_confirmed_and_regions_can_be_left_out(planned, tmp_path):
    plan, path = planned
    log: list = []
    new = measure_plan(plan, str(path), work_dir=tmp_path / "w", cache_dir=tmp_path / "c", implicit=False, top=0,
                       progress=False, measure_fn=_fake(" none", log))
    assert new.regions.combined is None and len(new.candidates) == len(plan.candidates)
    assert [n for n, _ in log[-1]] == ["fp16", _rewritten_job(plan),
                                       f"#{plan.regions.base} {plan.candidates[plan.regions.base].name}"]
    log.clear()
    measure_plan(plan, str(path), work_dir=tmp_path / "w2", cache_dir=tmp_path / "c", implicit=False, top=0,
                 progress=False, measure_fn=_fake(" none", log), regions=False)
    assert [n for n, _ in log[0]] == ["fp16", _rewritten_job(plan)]


def test_a_candidate_lists_the_layers_its_written_model_runs_in_int8():
    model = float_siblings()
    ev = Evaluator(model, [], {}, options=QdqOptions(high_precision="fp32", trt_version="8.6"))
    chosen = ["c0", "s0", "s1"]  # the siblings' readers kept float: rule 12 keeps s0 and s1 float too
    written = ev.export(simple_amax(model), chosen).report.quantized_layers
    quantized, kept = as_written(chosen, written, [("s0_next", "kept for accuracy")])
    assert quantized == ("c0",)
    assert kept == (("s0_next", "kept for accuracy"), ("s0", WRITTEN_FLOAT), ("s1", WRITTEN_FLOAT))


def test_a_scheme_the_export_refuses_is_not_timed_and_says_why(planned, tmp_path):
    plan, path = planned
    res = next(p for p in plan.regions.patterns if p.kind == "residual")
    bad = dataclasses.replace(res.scheme("skip"), choices=(("no/such/Add", "skip"),))
    edited = dataclasses.replace(res, schemes=(res.schemes[0], bad))
    regions = dataclasses.replace(plan.regions, patterns=(edited,))
    log: list = []
    new = measure_plan(dataclasses.replace(plan, regions=regions), str(path), work_dir=tmp_path / "w",
                       cache_dir=tmp_path / "c", implicit=False, top=0, progress=False, measure_fn=_fake(" skip", log))
    (pattern,) = new.regions.patterns
    assert [n for n, _ in log[0]] == [f"{res.name} both"]
    assert pattern.scheme("skip").timing is None and "no node for" in pattern.scheme("skip").note
    assert pattern.chosen == "both" and "not offered" in pattern.reason
