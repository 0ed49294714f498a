"""What TensorRT 8.6 built from the family blocks of issue 21 (conv + SiLU, C2f, SPPF, necks, DFL head...).

``tests/gpu/test_qdq_blocks.py`` builds each block of ``tests/core/qdq_family_blocks.py`` (default placement
and ``-dense``, the planner's) and records the engine's layers in ``tests/fixtures/trt86/qdq_blocks.json``.
Until that run is committed these tests skip, saying so; once it is, they fail if a block did not fuse:
a standalone PointWise layer (SiLU, LeakyReLU, the residual add left out of the conv), a Scale layer (a Q/DQ
TensorRT could not fold) or a reformat beyond the input's quantize.
"""

from __future__ import annotations

import json

import pytest

from tests.core import qdq_blocks as qb
from tests.core import qdq_family_blocks as fb
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq

BLOCKS_JSON = "trt86/qdq_blocks.json"
KEYS = [n for n in fb.FAMILY_BLOCKS] + [f"{n}-dense" for n in fb.FAMILY_BLOCKS]
# Blocks whose every layer fused into a convolution (or is data movement in INT8) on TensorRT 8.6.
ALL_FUSED = ("conv_silu", "conv_silu-dense", "conv_gelu", "mlp_gelu_tanh", "mlp_gelu_tanh-dense")
# What TensorRT 8.6 (H100) left as standalone PointWise layers in the other blocks, as recorded in the fixture:
# each is an activation of a conv whose output the block reads in float (the block's last conv feeds the graph
# output), a PReLU (per-channel slope), or C2f's bottleneck, where implicit INT8 does the same on a whole
# YOLOv8 (benchmarks/results/yolo_placement_gpu_b1.json: 10 standalone PointWise layers in both engines).
# A placement change that leaves more unfused fails here; one that fuses more passes.
KNOWN_UNFUSED = {
    "leaky_prelu": {"PWN(prelu)"}, "leaky_prelu-dense": {"PWN(prelu)"},
    "c2f": {"PWN(m_cv1_act_sig, m_cv1_act_mul)", "PWN(PWN(m_cv2_act_sig, m_cv2_act_mul), m_add)",
            "PWN(cv2_act_sig, cv2_act_mul)"},
    "sppf": {"PWN(cv2_act_sig, cv2_act_mul)"}, "sppf-dense": {"PWN(cv2_act_sig, cv2_act_mul)"},
    "upsample_neck": {"PWN(fuse_act_sig, fuse_act_mul)"}, "upsample_neck-dense": {"PWN(fuse_act_sig, fuse_act_mul)"},
}
KNOWN_UNFUSED["c2f-dense"] = KNOWN_UNFUSED["c2f"]


@pytest.fixture(scope="module")
def run(fixtures_dir):
    return json.loads((fixtures_dir / BLOCKS_JSON).read_text())


def _block(run, key):
    if key not in run:
        pytest.skip(f"{key} is not in {BLOCKS_JSON} yet: the lead runs tests/gpu/test_qdq_blocks.py on TensorRT 8.6 "
                    "and commits the regenerated fixture")
    block = run[key]
    if any(layer["name"].startswith("{ForeignNode[") for layer in block["layers"]):
        pytest.skip(f"{key}: TensorRT 8.6 gave the block to Myelin whole; per-layer fusion is not visible")
    return block


def _int8_nodes(block):
    return {n for layer in block["layers"] if layer["precision"] == "INT8" for n in layer["onnx_nodes"]}


@pytest.mark.parametrize("key", KEYS)
def test_the_export_places_today_what_tensorrt_was_given(run, key):
    block = _block(run, key)
    name = key.replace("-dense", "")
    model = fb.FAMILY_BLOCKS[name][0]()
    ex = build_qdq(model, QdqSpec(qb.simple_amax(model),
                                  QdqOptions(high_precision="fp32", dense_int8=key.endswith("-dense"))))
    assert list(ex.report.quantized_layers) == block["quantized_by_export"]


@pytest.mark.parametrize("key", KEYS)
def test_every_quantized_layer_ran_int8_and_no_qdq_was_left_as_a_scale_layer(run, key):
    block = _block(run, key)
    missing = [n for n in block["quantized_by_export"] if n not in _int8_nodes(block)]
    assert not missing, f"quantized by the export but not INT8 in the engine: {missing}"
    scales = [layer["name"] for layer in block["layers"] if layer["type"] == "Scale"]
    assert not scales, f"Q/DQ left as Scale layers: {scales}"
    never = fb.FAMILY_BLOCKS[key.replace("-dense", "")][1]
    assert not set(never) & _int8_nodes(block), f"must not run INT8: {set(never) & _int8_nodes(block)}"


@pytest.mark.parametrize("key", ALL_FUSED)
def test_activations_residuals_and_data_movement_fused(run, key):
    block = _block(run, key)
    pointwise = [layer["name"] for layer in block["layers"] if layer["type"] == "PointWise"]
    assert not pointwise, f"standalone PointWise layers (an epilogue that did not fuse): {pointwise}"
    reformats = [layer["name"] for layer in block["layers"] if layer["type"] == "Reformat"]
    assert len(reformats) <= 1, f"reformats beyond the input's quantize: {reformats}"


@pytest.mark.parametrize("key", sorted(KNOWN_UNFUSED))
def test_no_block_leaves_more_unfused_than_recorded(run, key):
    block = _block(run, key)
    pointwise = {layer["name"] for layer in block["layers"] if layer["type"] == "PointWise"}
    assert pointwise <= KNOWN_UNFUSED[key], f"new standalone PointWise layers: {sorted(pointwise - KNOWN_UNFUSED[key])}"


@pytest.mark.parametrize("name", ["sppf", "upsample_neck"])
def test_rule_9_gives_no_more_layers_or_reformats_than_data_movement_read_in_float(run, name):
    # The same block exported with Split/Concat/MaxPool/Resize excluded (rule 9 off), built in the same run.
    with_rule, without = _block(run, name), _block(run, f"{name}-no-rule9")
    count = {k: sum(1 for layer in b["layers"] if layer["type"] == "Reformat") for k, b in
             (("with", with_rule), ("without", without))}
    assert count["with"] <= count["without"], count
    assert len(with_rule["layers"]) <= len(without["layers"]), (with_rule["layers"], without["layers"])


def test_rule_9_on_c2f_costs_no_reformat_in_the_dense_placement(run):
    # Recorded, not wished: with Split/Concat read quantized (rule 9) TensorRT 8.6 cloned the Split outputs' DQ per
    # consumer and copied them into the Concat (docs/placement.md); the dense placement (the planner's) is equal.
    count = {k: sum(1 for layer in _block(run, k)["layers"] if layer["type"] == "Reformat")
             for k in ("c2f", "c2f-no-rule9", "c2f-dense")}
    assert count["c2f-dense"] <= count["c2f-no-rule9"], count
