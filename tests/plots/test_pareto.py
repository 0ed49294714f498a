"""The planner's Pareto chart, tested through the figure's dict."""

from __future__ import annotations

import dataclasses

import pytest

from trtwidgets.core.plan.plan_artifact import Plan
from trtwidgets.plots.pareto import PlanParetoDisplay, plan_html


def _plan(doc=None):
    """A plan as plan.json would hold it (hand-written: no search behind it)."""
    doc = dict(_doc() if doc is None else doc)
    doc.setdefault("ranges", {"amax": {"x": 1.0}})
    return Plan.from_dict(doc)


def _doc():
    def cand(name, speedup, cos, kept, meets):
        return {"name": name, "quantized": ["a"] if speedup != 1.0 else [], "speedup_vs_fp16": speedup,
                "kept": [{"layer": k, "reason": "why <b>"} for k in kept], "latency_source": "estimate",
                "accuracy": {"cosine": cos, "snr_db": 20.0, "metric": None}, "meets_target": meets}

    return {"model": "m.onnx", "target": {"cosine": 0.99, "snr_db": None, "metric": None}, "recommended": 2,
            "reason": "r", "high_precision": "fp16", "notes": ["n <i>"],
            "candidates": [cand("FP16", 1.0, 0.9999, [], True), cand("all", 2.0, 0.95, [], False),
                           cand("pays", 1.8, 0.995, ["conv<1>"], True), cand("slow", 1.1, 0.96, ["x"], False)]}


def test_points_front_target_and_hover():
    d = PlanParetoDisplay.from_plan(_plan())
    assert d.x[1] == 0.5 and d.recommended == 2
    assert d.front() == [1, 2, 0]  # "slow" is dominated by "pays"
    fig = d.figure().to_dict()
    scatter = fig["data"][0]
    assert scatter["customdata"][2] == ["conv<1>"]
    assert "conv&lt;1&gt;" in scatter["hovertext"][2]  # model-provided names escaped
    assert scatter["marker"]["size"][2] > scatter["marker"]["size"][0]
    assert any(s.get("y0") == 0.99 for s in fig["layout"]["shapes"])


def test_plan_html_escapes_and_embeds_plotly():
    html = plan_html(_plan(), "title <t>")
    assert "title &lt;t&gt;" in html and "why &lt;b&gt;" in html and "n &lt;i&gt;" in html
    assert "<script" in html and "plotly" in html.lower()


def test_plan_html_states_the_target_in_words():
    html = plan_html(_plan(), "t")
    assert "output cosine &gt;= 0.99" in html and "'cosine'" not in html


def test_plan_html_shows_the_candidates_as_a_table_with_names_escaped():
    """Issue 32: the table was preformatted text; now a table, every name escaped, whole (not cut at 43)."""
    import re

    doc = _doc()
    doc["candidates"][2]["name"] = "<b>pays</b> " + "x" * 60
    html = plan_html(_plan(doc))
    assert "<pre>" not in html and "<table class='candidates'" in html
    table = re.search(r"<table class='candidates'.*?</table>", html).group(0)
    assert "<th>est. x FP16</th>" in table and table.count("<tr") == 5  # header and 4 candidates
    assert "&lt;b&gt;pays&lt;/b&gt; " + "x" * 60 in table and "<b>pays" not in table
    assert "<td>-&gt;</td>" in table  # the pick's mark


def _measured_plan():
    from trtwidgets.core.plan.measured.measurement import FP16, QDQ, Measurement
    from trtwidgets.core.plan.measured.repick import apply_measurements, candidate_job_name

    doc = _doc()
    for c in doc["candidates"]:
        c["latency_us"], c["fp16_latency_us"] = 100.0 / c["speedup_vs_fp16"], 100.0
    plan = _plan(doc)
    ms = [Measurement("fp16", FP16, (1.0, 1.02, 0.98), estimate_ms=0.1),
          Measurement(candidate_job_name(2, plan.candidates[2]), QDQ, (1.3, 1.32, 1.31), estimate_ms=100 / 1.8 / 1000)]
    return apply_measurements(plan, ms, rounds=3, built=2, settings={"gpu": "GPU <x>", "trt": "8.6"})


def test_a_measured_plan_shows_estimate_and_measurement_side_by_side():
    doc = _measured_plan()
    assert doc.recommended == 0  # measured 1.31x FP16: never the pick
    d = PlanParetoDisplay.from_plan(doc)
    assert d.x[2] == pytest.approx(1 / 1.8) and d.measured_x[2] == 1.31 / 1.0 and d.measured_x[1] != d.measured_x[1]
    fig = d.figure().to_dict()
    measured = [t for t in fig["data"] if t.get("name") == "measured"]
    assert len(measured) == 1 and measured[0]["x"] == [1.0, 1.31] and measured[0]["customdata"] == [[0], [2]]
    assert "measured 1.310x FP16" in measured[0]["hovertext"][1]
    assert "estimate and measurement" in fig["layout"]["title"]["text"]
    assert fig["data"][0]["name"] == "candidates"  # the widget's click handler reads the first trace
    html = plan_html(doc, "t")
    assert "Latency: measured" in html and "GPU &lt;x&gt;" in html and "estimate off by" in html
    assert "-58%" in html  # estimated 0.556x, measured 1.31x


def test_an_estimated_plan_says_so_in_plan_html():

    from trtwidgets.core.plan.measured.standing import EstimateStanding

    plan = dataclasses.replace(_plan(), estimate=EstimateStanding.of("estimate"))
    html = plan_html(plan, "t")
    assert "Latency: an estimate" in html and "plan measure PLAN_DIR" in html
    assert PlanParetoDisplay.from_plan(plan).measured_x == ()
    # The zoo's record once, as a table (model, estimated, measured), never the sentence twice.
    from html import escape

    assert "<th>estimated x FP16</th>" in html and html.count(escape(plan.estimate.text)) == 1
    rows = plan.estimate.rows()
    assert rows and all(f"<td>{r[1]}</td><td>{r[2]}</td>" in html for r in rows)
    with_note = dataclasses.replace(plan, notes=plan.notes + (plan.estimate.text,))  # as finish_latency leaves it
    assert plan_html(with_note, "t").count(escape(plan.estimate.text)) == 1


def test_implicit_int8_judged_on_its_engine_is_a_star_outlined_when_it_is_the_pick():
    """The committed YOLO b1 run (4 H100s, TensorRT 8.6): implicit INT8 met the detection F1 on its engine and
    was the measured pick; a run that never judged it (minilm b1, the first run) draws no star."""
    import json

    from tests.conftest import ROOT
    from trtwidgets.plots.pareto import PlanParetoDisplay

    zoo = ROOT / "benchmarks" / "results" / "trust" / "zoo_gpu"
    doc = json.loads((zoo / "yolo-b1.json").read_text())["plan"]
    yolo = Plan.from_dict(doc)
    disp = PlanParetoDisplay.from_plan(yolo)
    x, y, meets, pick = disp.implicit
    row = next(r for r in doc["measured"]["rows"] if r["kind"] == "int8_implicit")
    assert (x, y) == (row["vs_fp16"], row["engine_accuracy"]["metric"]) and meets and pick
    star = next(t for t in disp.figure().data if t.name == "implicit INT8")
    assert star.marker.symbol == "star" and star.marker.line.width == 3 and "the measured pick" in star.hovertext[0]
    minilm = Plan.from_dict(json.loads((zoo / "minilm-b1.json").read_text())["plan"])
    assert PlanParetoDisplay.from_plan(minilm).implicit is None
    assert all(t.name != "implicit INT8" for t in PlanParetoDisplay.from_plan(minilm).figure().data)
