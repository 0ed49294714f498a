"""Tensor roles: the Softmax, attention, LayerNorm and GELU tensors whose range the graph decides (auto ranges)."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from tests.core.qdq_family_blocks import vit_attention
from tests.core.qdq_models import residual_cnn, transformer_block
from trtwidgets.core.model.tensor_roles import ROLE_TEXT, ROLES, tensor_roles


def test_a_decomposed_layernorm_erf_gelu_and_softmax_are_found_by_their_tensors():
    roles = tensor_roles(transformer_block())
    # LayerNorm: what it reads, what it computes inside, what it writes (after gamma and beta).
    assert roles["h0"] == "layernorm_input"
    assert {roles[t] for t in ("ln_mean", "ln_d", "ln_sq", "ln_var", "ln_ve", "ln_std", "ln_n", "ln_g")} == {
        "layernorm_internal"}
    assert roles["ln_out"] == "layernorm_output"
    # Erf GELU: fc1's output is its input; erf's steps are inside; the joined product is its output.
    assert roles["h1"] == "gelu_input" and roles["ge_erf"] == "gelu_internal" and roles["ge_out"] == "gelu_output"
    assert roles["gt_tanh"] == "gelu_internal" and roles["gt_out"] == "gelu_output"
    # A decomposed softmax on a weight product (no attention: one operand is a constant).
    assert roles["out"] == "softmax_output" and roles["h3"] == "softmax_input"
    # The weighted layers' other tensors have no role.
    assert "x" not in roles and roles["h2"] == "gelu_input"
    assert set(roles.values()) <= set(ROLES) and all(ROLE_TEXT[r] for r in roles.values())


def test_attention_logits_are_a_product_of_two_activations_that_a_softmax_reads():
    roles = tensor_roles(vit_attention(batch=1, seq=8, d=16, heads=2))
    assert roles["p"] == "softmax_output"
    # Q @ K^T and its scale: the logits; the projections before them have no role.
    assert roles["qk"] == roles["qks"] == "attention_logits"
    assert not {"q", "k", "v", "q0", "ctx", "o"} & set(roles)


def test_single_ops_and_a_model_without_patterns():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8])
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["ln"], name="ln", axis=-1),
             helper.make_node("Softmax", ["ln"], ["y"], name="sm", axis=-1)]
    inits = [helper.make_tensor("g", TensorProto.FLOAT, [8], [1.0] * 8),
             helper.make_tensor("b", TensorProto.FLOAT, [8], [0.0] * 8)]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    roles = tensor_roles(model)
    # ln is both the LayerNorm's output and the Softmax's input: the more specific role (first in ROLES) wins.
    assert roles == {"x": "layernorm_input", "ln": "softmax_input", "y": "softmax_output"}
    assert tensor_roles(residual_cnn()) == {}
