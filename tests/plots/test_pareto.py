"""The planner's Pareto chart, tested through the figure's dict."""

from __future__ import annotations

from trtwidgets.plots.pareto import PlanParetoDisplay, plan_html


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
    d = PlanParetoDisplay.from_plan(_doc())
    assert d.x[1] == 0.5 and d.recommended == 2
    assert d.front() == [1, 2, 0]  # "slow" is dominated by "pays"
    fig = d.figure().to_dict()
    scatter = fig["data"][0]
    assert scatter["customdata"][2] == ["conv<1>"]
    assert "conv&lt;1&gt;" in scatter["hovertext"][2]  # model-provided names escaped
    assert scatter["marker"]["size"][2] > scatter["marker"]["size"][0]
    assert any(s.get("y0") == 0.99 for s in fig["layout"]["shapes"])


def test_plan_html_escapes_and_embeds_plotly():
    html = plan_html(_doc(), "table <t>")
    assert "table &lt;t&gt;" in html and "why &lt;b&gt;" in html and "n &lt;i&gt;" in html
    assert "<script" in html and "plotly" in html.lower()


def test_plan_html_states_the_target_in_words():
    html = plan_html(_doc(), "t")
    assert "output cosine &gt;= 0.99" in html and "'cosine'" not in html
