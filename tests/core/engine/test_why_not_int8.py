"""Why a layer is not INT8: each cause, from the recipe, the cache and the Q/DQ names."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

from trtwidgets.core.calibration.cache import write_cache
from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.core.engine.why_not_int8 import CODES, calibration_names, qdq_tensor_names, why_not_int8

from tests.core import inspector_samples as s

INT8_FP16_RECIPE = {"flags": ["fp16", "int8"], "precision_constraints": "none", "layer_precisions": [],
                    "calibrator": {"kind": "toolkit", "method": "entropy"}}


def _by_name(graph, reasons):
    return {layer.name: r for layer, r in zip(graph.layers, reasons)}


@pytest.fixture()
def int8_graph():
    return parse_inspector_json(s.trt_text(s.synthetic_int8_implicit()))


def test_one_entry_per_layer_and_known_codes(int8_graph):
    reasons = why_not_int8(int8_graph, INT8_FP16_RECIPE, s.SYNTHETIC_CACHE)
    assert len(reasons) == len(int8_graph.layers)
    assert {r.code for r in reasons if r} <= set(CODES)


def test_int8_not_enabled_from_the_recipe():
    graph = parse_inspector_json(s.trt_text(s.synthetic_fp16()))
    reasons = why_not_int8(graph, {"flags": ["fp16"]})
    assert {r.code for r in reasons} == {"INT8_NOT_ENABLED"}
    assert "fp16" in reasons[1].sentence and "Add 'int8'" in reasons[1].sentence


def test_int8_not_enabled_guessed_without_recipe():
    graph = parse_inspector_json(s.trt_text(s.synthetic_fp32()))
    reasons = why_not_int8(graph)
    assert {r.code for r in reasons} == {"INT8_NOT_ENABLED"}
    assert "no recipe was given" in reasons[0].sentence


def test_bias_float_is_expected(int8_graph):
    reasons = _by_name(int8_graph, why_not_int8(int8_graph, INT8_FP16_RECIPE, s.SYNTHETIC_CACHE))
    note = reasons["conv1 + relu1"]
    assert note.code == "BIAS_FLOAT" and note.expected
    assert "expected" in note.sentence and "16 values" in note.sentence
    assert reasons["PWN(PWN(hsig_add, hsig_clip), hswish_mul)"] is None  # INT8, no bias: nothing to say


def test_no_scale_names_the_missing_tensor(int8_graph, tmp_path):
    cache_path = tmp_path / "calibration.cache"
    write_cache({name: 2.0 for name in s.SYNTHETIC_CACHE}, cache_path)
    for calibration in (str(cache_path), cache_path, set(s.SYNTHETIC_CACHE), {n: 1.0 for n in s.SYNTHETIC_CACHE}):
        reasons = _by_name(int8_graph, why_not_int8(int8_graph, INT8_FP16_RECIPE, calibration))
        fc = reasons["fc_weight + fc"]
        assert fc.code == "NO_SCALE"
        assert fc.tensors == ("fc_out",)
        assert "'fc_out'" in fc.sentence and "calibration cache" in fc.sentence


def test_higher_precision_faster_when_scales_are_there(int8_graph):
    reasons = _by_name(int8_graph, why_not_int8(int8_graph, INT8_FP16_RECIPE, s.SYNTHETIC_CACHE))
    gap = reasons["gap"]
    assert gap.code == "HIGHER_PRECISION_FASTER"
    assert "have scales" in gap.sentence and "FP16" in gap.sentence
    # The reformat that feeds the pooling is traced back to the network tensor it copies.
    assert gap.tensors == ("hswish_out", "gap_out")


def test_higher_precision_faster_names_a_builder_level_below_tensorrts_default(int8_graph):
    """At level 1 TensorRT times fewer tactics than at its default 3: the reason says so, and not at level 3."""
    for level, said in ((1, True), (3, False), (None, False)):
        recipe = dict(INT8_FP16_RECIPE, **({} if level is None else {"builder_optimization_level": level}))
        gap = _by_name(int8_graph, why_not_int8(int8_graph, recipe, s.SYNTHETIC_CACHE))["gap"]
        assert gap.code == "HIGHER_PRECISION_FASTER"
        assert ("built at builder optimization level 1" in gap.sentence) is said, (level, gap.sentence)
        assert ("rebuild at level 3" in gap.cause) is said


def test_higher_precision_faster_without_cache_says_scales_unknown(int8_graph):
    gap = _by_name(int8_graph, why_not_int8(int8_graph, INT8_FP16_RECIPE))["gap"]
    assert gap.code == "HIGHER_PRECISION_FASTER"
    assert "not known" in gap.sentence


def test_no_int8_implementation_table(int8_graph):
    reasons = _by_name(int8_graph, why_not_int8(int8_graph, INT8_FP16_RECIPE, s.SYNTHETIC_CACHE))
    assert reasons["softmax"].code == "NO_INT8_IMPLEMENTATION"
    assert "Softmax" in reasons["softmax"].sentence
    assert reasons["(Unnamed Layer* 9) [Shuffle] + flatten"].code == "NO_INT8_IMPLEMENTATION"


def test_precision_constraint_from_recipe_override(int8_graph):
    recipe = dict(INT8_FP16_RECIPE, precision_constraints="obey",
                  layer_precisions=[{"pattern": "^g.p$", "precision": "fp16", "regex": True}])
    gap = _by_name(int8_graph, why_not_int8(int8_graph, recipe, s.SYNTHETIC_CACHE))["gap"]
    assert gap.code == "PRECISION_CONSTRAINT"
    assert "'gap'" in gap.sentence and "FP16" in gap.sentence and "OBEY" in gap.sentence


def test_override_matches_fused_onnx_node(int8_graph):
    recipe = dict(INT8_FP16_RECIPE, layer_precisions=[["fc", "fp32", False]])
    fc = _by_name(int8_graph, why_not_int8(int8_graph, recipe, s.SYNTHETIC_CACHE))["fc_weight + fc"]
    assert fc.code == "PRECISION_CONSTRAINT" and fc.tensors == ("fc",)


def test_recipe_object(int8_graph):
    from trtwidgets.core.recipe.recipe import CalibratorSpec, LayerPrecision, Recipe

    recipe = Recipe(model_path="m.onnx", model_sha256="0" * 64, flags=("fp16", "int8"),
                    layer_precisions=(LayerPrecision("gap", "fp32"),),
                    calibrator=CalibratorSpec(kind="toolkit", method="entropy"))
    gap = _by_name(int8_graph, why_not_int8(int8_graph, recipe, s.SYNTHETIC_CACHE))["gap"]
    assert gap.code == "PRECISION_CONSTRAINT"


def test_int8_flag_without_calibrator_or_qdq_means_no_scales():
    graph = parse_inspector_json(s.trt_text(s.synthetic_fp16()))
    reasons = why_not_int8(graph, {"flags": ["fp16", "int8"], "calibrator": {"kind": "none"}})
    conv = reasons[1]
    assert conv.code == "NO_SCALE" and "no calibrator" in conv.sentence


def test_dynamic_without_context_is_unknown():
    graph = parse_inspector_json(s.trt_text(s.synthetic_dynamic_na()))
    reasons = why_not_int8(graph, INT8_FP16_RECIPE)
    assert {r.code for r in reasons} == {"PRECISION_UNKNOWN"}
    assert "execution context" in reasons[0].sentence


def test_integer_layers_are_not_float():
    doc = s.synthetic_fp16()
    doc["Layers"].append(s.simple("shape_of_x", "Shape", [s.tensor("x", [1, 3, 48, 192], s.LINEAR_FP32)],
                                  [s.tensor("x_shape", [4], s.LINEAR_INT32)], "Shape"))
    doc["Layers"].append(s.simple("gather_dim", "Gather", [s.tensor("x_shape", [4], s.LINEAR_INT32)],
                                  [s.tensor("dim", [1], s.LINEAR_INT32)], "Gather"))
    graph = parse_inspector_json(json.dumps(doc))
    reasons = why_not_int8(graph, INT8_FP16_RECIPE, s.SYNTHETIC_CACHE)
    assert reasons[-1].code == "NOT_FLOAT" and "INT32" in reasons[-1].sentence


def _qdq_model():
    """x -> Q -> DQ -> Conv(w via DQ) -> y -> Relu -> z (the Relu has no Q/DQ)."""
    w = helper.make_tensor("w_q", TensorProto.INT8, [4, 3, 3, 3], [1] * 108)
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.02])
    zp = helper.make_tensor("zp", TensorProto.INT8, [], [0])
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["x_q"], name="q_x"),
        helper.make_node("DequantizeLinear", ["x_q", "s", "zp"], ["x_dq"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w_q", "s", "zp"], ["w_dq"], name="dq_w"),
        helper.make_node("Conv", ["x_dq", "w_dq"], ["y"], name="conv", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["y"], ["z"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 6, 6])],
                              initializer=[w, scale, zp])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_qdq_tensor_names_from_model(tmp_path):
    model = _qdq_model()
    names = qdq_tensor_names(model)
    assert names == {"x", "x_q", "x_dq", "w_q", "w_dq"}
    path = tmp_path / "qdq.onnx"
    onnx.save(model, str(path))
    assert qdq_tensor_names(path) == names


def test_explicit_no_scale_names_tensors_without_qdq():
    model = _qdq_model()
    doc = {"Layers": [
        s.simple("q_x", "Reformat", [s.tensor("x", [1, 3, 8, 8], s.LINEAR_FP32)],
                 [s.tensor("x_q", [1, 3, 8, 8], s.CHW4_INT8)], "Reformat", ["q_x"], Origin="QDQ"),
        s.conv("dq_w + conv", ["dq_w", "conv"], s.tensor("x_q", [1, 3, 8, 8], s.CHW4_INT8),
               s.tensor("y", [1, 4, 6, 6], s.LINEAR_FP32), weights="Int8"),
        s.simple("relu", "PointWiseV2", [s.tensor("y", [1, 4, 6, 6], s.LINEAR_FP16)],
                 [s.tensor("z", [1, 4, 6, 6], s.LINEAR_FP32)], "PointWise", ["relu"]),
    ], "Bindings": ["x", "z"]}
    graph = parse_inspector_json(json.dumps(doc))
    reasons = why_not_int8(graph, {"flags": ["fp16", "int8"]}, qdq_tensors=qdq_tensor_names(model))
    relu = reasons[2]
    assert relu.code == "NO_SCALE"
    assert relu.tensors == ("y", "z")
    assert "Q/DQ" in relu.sentence


def test_calibration_names_forms():
    assert calibration_names(None) is None
    assert calibration_names(["a", "b"]) == {"a", "b"}
    assert calibration_names({"a": 1.0}) == {"a"}


# --------------------------------------------------------------------------- real explicit (Q/DQ) build

from pathlib import Path  # noqa: E402

TRT86 = Path(__file__).resolve().parents[2] / "fixtures" / "trt86"
QDQ_BUILD = TRT86 / "cls_static_qdq_int8"
QDQ_MODEL = Path(__file__).resolve().parents[2] / "fixtures" / "qdq" / "cls_qdq_int8.onnx"


@pytest.fixture(scope="module")
def qdq_build():
    graph = parse_inspector_json(QDQ_BUILD / "engine.graph.json")
    recipe = json.loads((QDQ_BUILD / "recipe.json").read_text())
    return graph, recipe


def test_explicit_engine_without_model_never_blames_tactic_timing(qdq_build):
    graph, recipe = qdq_build
    for rec in (recipe, None):
        reasons = why_not_int8(graph, rec)
        codes = {r.code for r in reasons if r is not None}
        assert not codes & {"HIGHER_PRECISION_FASTER", "FIRST_TACTIC"}
        assert not any("faster" in r.sentence for r in reasons if r is not None)
    by_name = _by_name(graph, why_not_int8(graph, recipe))
    # A float conv between the Q/DQ-less tensors relu_0/relu_1: explicit mode has no scale for it.
    conv = by_name["Conv@2 + BatchNormalization@2 + Relu@1"]
    assert conv.code == "NO_SCALE"
    assert set(conv.tensors) == {"relu_0.tmp_0", "relu_1.tmp_0"}
    assert "Q/DQ" in conv.sentence and "explicit" in conv.sentence


def test_explicit_engine_without_model_agrees_with_the_model(qdq_build):
    """The build's model came from TensorRT's entropy ranges with the committed fixture's placement."""
    graph, recipe = qdq_build
    from_engine = why_not_int8(graph, recipe)
    from_model = why_not_int8(graph, recipe, qdq_tensors=qdq_tensor_names(QDQ_MODEL))
    assert [r and r.code for r in from_engine] == [r and r.code for r in from_model]
    assert sum(1 for r in from_engine if r is not None and r.code == "NO_SCALE") >= 40
    # Float layers whose tensors pass through output reformats are traced to their network tensors too.
    for reason in from_model:
        if reason is not None and reason.code == "NO_SCALE":
            assert reason.tensors and not any(t.startswith("Reformatted ") for t in reason.tensors)


def test_zero_copy_reformat_is_not_called_a_reshape(qdq_build):
    graph, recipe = qdq_build
    by_name = _by_name(graph, why_not_int8(graph, recipe))
    copies = [layer for layer in graph.layers if layer.layer_type == "NoOp" and layer.name.startswith("Reformatting")]
    assert len(copies) >= 5
    for layer in copies:
        sentence = by_name[layer.name].sentence
        assert "zero-copy reformat" in sentence and "reshape" not in sentence
    assert "reshape" in by_name["copied_squeeze_after_Add@43"].sentence  # a real NoOp keeps its wording


def test_explicit_layer_between_qdq_that_stayed_float_is_not_fused_not_timed():
    # relu reads y and writes z; both are quantized elsewhere in the engine (INT8), yet relu ran FP16.
    doc = {"Layers": [
        s.simple("q_x", "Reformat", [s.tensor("x", [1, 3, 8, 8], s.LINEAR_FP32)],
                 [s.tensor("x_q", [1, 3, 8, 8], s.CHW4_INT8)], "Reformat", ["q_x"], Origin="QDQ"),
        s.conv("dq_w + conv", ["dq_w", "conv"], s.tensor("x_q", [1, 3, 8, 8], s.CHW4_INT8),
               s.tensor("y", [1, 4, 6, 6], s.CHW4_INT8), weights="Int8"),
        s.simple("relu", "PointWiseV2", [s.tensor("y", [1, 4, 6, 6], s.LINEAR_FP16)],
                 [s.tensor("z", [1, 4, 6, 6], s.LINEAR_FP16)], "PointWise", ["relu"]),
        s.simple("q_z", "Reformat", [s.tensor("z", [1, 4, 6, 6], s.LINEAR_FP16)],
                 [s.tensor("z_q", [1, 4, 6, 6], s.CHW4_INT8)], "Reformat", ["q_z"], Origin="QDQ"),
    ], "Bindings": ["x", "z_q"]}
    graph = parse_inspector_json(json.dumps(doc))
    relu = why_not_int8(graph, {"flags": ["fp16", "int8"]})[2]
    assert relu.code == "QDQ_NOT_FUSED" and relu.code in CODES
    assert set(relu.tensors) == {"y", "z"} and "faster" not in relu.sentence
    # The same layout read as implicit (no Q/DQ layers, a cache with both scales): TensorRT's timing choice.
    implicit = {"Layers": [doc["Layers"][1], doc["Layers"][2]], "Bindings": ["x_q", "z"]}
    graph = parse_inspector_json(json.dumps(implicit))
    assert why_not_int8(graph, {"flags": ["fp16", "int8"]}, ["x_q", "y", "z"])[1].code == "HIGHER_PRECISION_FASTER"


def test_the_rule_table_covers_every_code_and_ends_with_a_catch_all():
    from trtwidgets.core.engine.engine_graph import EngineLayer
    from trtwidgets.core.engine.why_not_int8.facts import ExplainContext, layer_facts
    from trtwidgets.core.engine.why_not_int8.rules import RULES

    # BIAS_FLOAT is the note on INT8 layers, outside the table of why-not causes.
    assert {code for code, _rule in RULES} | {"BIAS_FLOAT"} == set(CODES)
    layer = EngineLayer(name="conv", layer_type="CaskConvolution", parameter_type="Convolution", inputs=(), outputs=())
    ctx = ExplainContext(view=None, cache=frozenset(), qdq=None, explicit=False, int8_on=True, reformat_source={},
                         qdq_from_engine=False, kept_float={}, int8_layers=1, quantized_tensors=0)
    code, last = RULES[-1]
    reason = last(layer, ctx, layer_facts(layer, ctx))
    assert reason is not None and reason.code == code
