"""Why-not-INT8 text a person can act on (issue 15): one explanation per cause, short rows, true counts."""

from __future__ import annotations

import onnx
import pytest

from tests.conftest import FIXTURES
from trtwidgets import demo
from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.core.engine.layer_table import layer_table
from trtwidgets.core.engine.why_not_int8 import export_kept_float, group_causes, why_not_int8
from trtwidgets.core.qdq.placement import place_qdq

QDQ_BUILD = FIXTURES / "trt86" / "cls_static_qdq_int8" / "engine.graph.json"


@pytest.fixture(scope="module")
def graph():
    return parse_inspector_json(QDQ_BUILD)


@pytest.fixture(scope="module")
def skipped():
    # The export's own records of what it kept float in the demo model (the engine is its Q/DQ export).
    return place_qdq(onnx.load(str(demo.MODEL_PATH))).skipped


def test_rows_are_short_and_name_the_tensor_or_node(graph, skipped):
    table = layer_table(graph, kept_float=skipped)
    reasons = table.loc[table["why_not_int8"] != "", "why_not_int8_reason"]
    assert len(reasons) > 20 and reasons.str.len().max() <= 90  # was ~470 characters, repeated on every row
    no_qdq = table[table["why_not_int8"] == "NO_SCALE"]
    assert len(no_qdq) and all(r.startswith("no Q/DQ on '") for r in no_qdq["why_not_int8_reason"])


def test_each_cause_is_explained_once(graph, skipped):
    table = layer_table(graph, kept_float=skipped)
    causes = table.attrs["why_not_int8_causes"]
    texts = [c["explanation"] for c in causes]
    assert len(texts) == len(set(texts))
    assert sum(c["layers"] for c in causes) == (table["why_not_int8"] != "").sum()
    # Rule 6 keeps several depthwise convolutions float, each read by other nodes: still one cause.
    assert sum(1 for c in causes if "(rule 6)" in c["explanation"]) == 1


def test_the_explicit_engine_wording_counts_what_is_quantized(graph):
    int8_layers = sum(layer.precision == "INT8" for layer in graph.layers)
    assert int8_layers == 48
    reasons = [r for r in why_not_int8(graph) if r is not None and r.code == "NO_SCALE"]
    assert reasons
    for r in reasons:
        assert "none is quantized anywhere" not in r.sentence
        assert f"runs {int8_layers} layers in INT8" in r.sentence and f"runs {int8_layers} layers in INT8" in r.cause


def test_layers_the_export_kept_float_say_so_with_the_rule(graph, skipped):
    reasons = dict(zip((layer.name for layer in graph.layers), why_not_int8(graph, kept_float=skipped)))
    se_conv = reasons["Conv@3 + conv2_se_1_offset + Reshape@0 + Add@1 + Relu@2"]
    assert se_conv.code == "KEPT_FLOAT_BY_EXPORT" and se_conv.short == "kept float by the export, rule 5 (Conv@3)"
    assert "Insert QuantizeLinear" not in se_conv.sentence
    depthwise = reasons["Conv@2 + BatchNormalization@2 + Relu@1"]
    assert depthwise.short == "kept float by the export, rule 6 (Conv@2)"
    without = dict(zip((layer.name for layer in graph.layers), why_not_int8(graph)))
    assert without["Conv@2 + BatchNormalization@2 + Relu@1"].code == "NO_SCALE"  # not known without the records


def test_export_kept_float_reads_rule_numbers():
    from trtwidgets.core.qdq.placement_records import Skip

    out = export_kept_float([Skip("a", "Conv", "its input is 1x1 spatially"), Skip("b", "Conv", "whatever", rule=2),
                             Skip("c", "Conv", "unknown reason")])
    assert out == {"a": (5, "its input is 1x1 spatially"), "b": (2, "whatever"), "c": (None, "unknown reason")}


def test_group_causes_counts_and_orders():
    from trtwidgets.core.engine.why_not_int8 import Int8Reason

    a = Int8Reason("NO_SCALE", "s1", short="x", cause="one")
    b = Int8Reason("NO_SCALE", "s2", short="y", cause="one")
    c = Int8Reason("NOT_FLOAT", "s3", short="z", cause="two")
    groups = group_causes([c, a, None, b])
    assert [(g.code, g.explanation, g.layers) for g in groups] == [("NO_SCALE", "one", 2), ("NOT_FLOAT", "two", 1)]
