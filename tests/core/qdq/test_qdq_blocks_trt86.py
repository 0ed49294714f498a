"""What TensorRT 8.6 built from the toolkit's Q/DQ export of each block (tests/gpu/test_qdq_blocks.py).

The run committed is an H200's (2026-11-24, the second session; the first, on an H100, showed the
same precisions and fusions).

The fixture ``tests/fixtures/trt86/qdq_blocks.json`` is that run's layer tables. These tests keep
the exporter in step with it (the placement it builds is the one TensorRT was given) and state
what the run showed, which the placement rules and :mod:`trtwidgets.core.qdq.float_part.layer_pins` rest on.
"""

from __future__ import annotations

import json

import pytest

from tests.core import qdq_blocks as qb
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq

BLOCKS_JSON = "trt86/qdq_blocks.json"


@pytest.fixture(scope="module")
def run(fixtures_dir):
    return json.loads((fixtures_dir / BLOCKS_JSON).read_text())


@pytest.mark.parametrize("name", sorted(qb.BLOCKS))
def test_the_export_places_today_what_tensorrt_was_given(run, name):
    # The run's plain blocks were exported with placement rules 1-7 (before dense INT8 became the default).
    if name not in run:
        pytest.skip(f"{name} is not in {BLOCKS_JSON} yet: run tests/gpu/test_qdq_blocks.py on TensorRT 8.6 and commit it")
    model = qb.BLOCKS[name][0]()
    ex = build_qdq(model, QdqSpec(qb.simple_amax(model), QdqOptions(high_precision="fp32", dense_int8=False)))
    assert list(ex.report.quantized_layers) == run[name]["quantized_by_export"]


@pytest.mark.parametrize("name", ["squeeze_excite", "depthwise_hardswish"])
def test_the_dense_export_places_today_what_tensorrt_was_given(run, name):
    model = qb.BLOCKS[name][0]()
    ex = build_qdq(model, QdqSpec(qb.simple_amax(model), QdqOptions(high_precision="fp32", dense_int8=True)))
    assert list(ex.report.quantized_layers) == run[f"{name}-dense"]["quantized_by_export"]


def test_a_grouped_conv_quantized_with_its_output_fuses_int8_in_and_out(run):
    # Rule 8's evidence: with a Q/DQ on what it writes, the depthwise conv is one INT8 kernel and the
    # HardSwish after it a point-wise INT8 layer: no FP32 layer, no reformat but the input's quantize.
    block = run["depthwise_hardswish-dense"]
    assert "dw" in block["quantized_by_export"] and {"dw", "hs_add3", "hs_mul", "hs_div"} <= _int8(
        run, "depthwise_hardswish-dense")
    assert block["fp32_compute"] == [] and _real_reformats(run, "depthwise_hardswish-dense") == 1
    # Rule 6's way (the conv float) costs an FP32 conv and a reformat on the same block.
    assert run["depthwise_hardswish"]["fp32_compute"] and _real_reformats(run, "depthwise_hardswish") == 2
    assert "dw" in _int8(run, "squeeze_excite-dense") and {"se_gate", "se_mul"} <= _int8(run, "squeeze_excite-dense")


def _real_reformats(run, key):
    return sum(1 for layer in run[key]["layers"] if layer["type"] == "Reformat")


def _int8(run, key):
    return {n for layer in run[key]["layers"] if layer["precision"] == "INT8" for n in layer["onnx_nodes"]}


def test_residual_add_and_pooling_fuse_into_int8_layers(run):
    for key in ("residual", "pool_classifier"):
        # At most the input's quantize; a NoOp "Reformatting CopyNode" (the H200 run's classifier output) moves nothing.
        assert run[key]["fp32_compute"] == [] and _real_reformats(run, key) <= 1
        assert set(run[key]["quantized_by_export"]) <= _int8(run, key)
    # The residual add ran inside the second conv's INT8 kernel (rule 2).
    assert any("add" in layer["onnx_nodes"] and layer["precision"] == "INT8" for layer in run["residual"]["layers"])


def test_a_grouped_conv_read_in_float_is_not_fused_when_quantized(run):
    # Rule 6's evidence: quantized anyway, the depthwise conv ran unfused (weights dequantized by a Scale layer).
    key = "squeeze_excite-no-rule6"
    assert "dw" in run[key]["quantized_by_export"] and "dw" not in _int8(run, key)
    assert any(layer["type"] == "Scale" and "w_dw_DequantizeLinear" in layer["onnx_nodes"]
               for layer in run[key]["layers"])
    assert "dw" not in run["squeeze_excite"]["quantized_by_export"]


def test_float_layers_between_int8_ran_fp32_unless_pinned_to_fp16(run):
    # With only the FP16 flag, TensorRT 8.6 ran the float part of these blocks in FP32; pinned (prefer), in FP16.
    for name in ("squeeze_excite", "transpose_head", "concat_resize", "depthwise_hardswish"):
        assert run[name]["fp32_compute"], name
        assert run[f"{name}-fp16pin"]["fp32_compute"] == [], name


def test_the_encoder_layer_goes_to_myelin_whole(run):
    # TensorRT 8.6 hands a transformer layer to Myelin as one foreign node: its INT8 use is not visible per layer.
    layers = run["encoder_layer"]["layers"]
    assert len(layers) == 1 and layers[0]["name"].startswith("{ForeignNode[")
