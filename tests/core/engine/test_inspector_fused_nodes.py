"""ONNX nodes fused into an engine layer, from its name and its Metadata."""

from __future__ import annotations

import pytest

from trtwidgets.core.engine.fused_nodes import nodes_from_metadata, onnx_nodes, parse_layer_name, strip_profile_suffix


@pytest.mark.parametrize("name, nodes, kind", [
    ("Conv_0", ("Conv_0",), "single"),
    ("Conv_0 + Relu_1", ("Conv_0", "Relu_1"), "fused"),
    ("/conv1/Conv + /relu/Relu", ("/conv1/Conv", "/relu/Relu"), "fused"),
    ("features.0.0.weight + QuantizeLinear_8 + Conv_12 + PWN(Clip_16)",
     ("features.0.0.weight", "QuantizeLinear_8", "Conv_12", "Clip_16"), "fused"),
    ("PWN(PWN(Sigmoid_3, Mul_4), Add_5)", ("Sigmoid_3", "Mul_4", "Add_5"), "fused"),
    ("PWN(Clip_16)", ("Clip_16",), "fused"),
    ("Conv_1 || Conv_2", ("Conv_1", "Conv_2"), "fused"),
    ("(Unnamed Layer* 12) [Shuffle]", (), "internal"),
    ("copied_squeeze_after_(Unnamed Layer* 850) [ElementWise]", (), "internal"),
    ("classifier.1.weight + QuantizeLinear_860 + Gemm_864 + classifier.1.bias + (Unnamed Layer* 849) [Shuffle] "
     "+ unsqueeze_node_after_classifier.1.bias + (Unnamed Layer* 849) [Shuffle]_(Unnamed Layer* 849) [Shuffle]_output "
     "+ (Unnamed Layer* 850) [ElementWise]",
     ("classifier.1.weight", "QuantizeLinear_860", "Gemm_864", "classifier.1.bias"), "fused"),
    ("{ForeignNode[/attn/MatMul.../attn/Softmax]}", ("/attn/MatMul", "/attn/Softmax"), "myelin"),
    ("PWN(PWN((Unnamed Layer* 3) [Constant] + (Unnamed Layer* 4) [Shuffle], Add_5), Relu_6)",
     ("Add_5", "Relu_6"), "fused"),
])
def test_names(name, nodes, kind):
    info = parse_layer_name(name)
    assert info.nodes == nodes
    assert info.kind == kind


def test_internal_parts_are_kept_apart():
    info = parse_layer_name("(Unnamed Layer* 9) [Shuffle] + flatten")
    assert info.nodes == ("flatten",)
    assert info.internal == ("(Unnamed Layer* 9) [Shuffle]",)


@pytest.mark.parametrize("direction", ["Input", "Output"])
def test_reformat(direction):
    info = parse_layer_name(f"Reformatting CopyNode for {direction} Tensor 1 to Conv_0 + Relu_1")
    assert info.kind == "reformat"
    assert info.nodes == ()
    assert info.target == "Conv_0 + Relu_1"
    assert info.direction == direction.lower()


def test_profile_suffix():
    assert strip_profile_suffix("Conv_0 + Relu_1 [profile 2]") == ("Conv_0 + Relu_1", 2)
    assert strip_profile_suffix("Conv_0") == ("Conv_0", 0)
    info = parse_layer_name("Conv_0 + Relu_1 [profile 2]")
    assert info.nodes == ("Conv_0", "Relu_1") and info.profile == 2


def test_unbalanced_parenthesis_falls_back_to_plain_split():
    assert parse_layer_name("weird(name + Relu_1").nodes == ("weird(name", "Relu_1")


def test_metadata_raw_and_trex_sanitised():
    raw = "[ONNX Layer: Conv_0]\x1e[ONNX Layer: Relu_1]\x1f[ONNX Layer: Relu_1]"
    assert nodes_from_metadata(raw) == ("Conv_0", "Relu_1")
    assert nodes_from_metadata("[ONNX Layer: /a/Conv]+[ONNX Layer: /a/Relu]") == ("/a/Conv", "/a/Relu")
    assert nodes_from_metadata("[ONNX Layer: qk_to_float][ONNX Layer: softmax]") == ("qk_to_float", "softmax")
    assert nodes_from_metadata("[ONNX Layer: odd]name]\x1e[ONNX Layer: b]") == ("odd]name", "b")
    assert nodes_from_metadata("") == ()
    assert nodes_from_metadata(None) == ()


def test_metadata_wins_over_the_name():
    assert onnx_nodes("fused_layer_7", "[ONNX Layer: Conv_0]\x1e[ONNX Layer: Relu_1]") == ("Conv_0", "Relu_1")
    assert onnx_nodes("Conv_0 + Relu_1 + Conv_0") == ("Conv_0", "Relu_1")
