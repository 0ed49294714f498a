"""Placement rules against real TensorRT 8.6: the blocks real models use, exported and built.

Python 3.9 with numpy, onnx and tensorrt only. On the GPU machine::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 -m pytest tests/gpu/test_qdq_blocks.py -v -s

For each block of ``tests/core/qdq_blocks.py`` (depthwise + BN + HardSwish,
squeeze-excite, residual add, Concat + Resize, ConvTranspose head, pooling + Gemm
tail, a transformer encoder layer; and issue 21's families: conv + SiLU, LeakyReLU/PReLU, C2f, SPPF, an
upsample + Concat neck, a DFL head, a tanh-GELU MLP) the toolkit's Q/DQ export is built with
FP16+INT8 at a static shape, and the engine's layers are read back:

* every layer the export quantized runs INT8 (the Q/DQ fused where TensorRT can);
* LayerNorm and Softmax never run INT8 (a transformer layer goes to Myelin whole, whose
  per-layer precisions TensorRT 8.6 does not show);
* with the float part pinned to FP16 no compute layer runs in FP32 (with the FP16 flag
  alone, TensorRT 8.6 ran the float layers between INT8 ones in FP32: recorded);
* what remains is recorded: reformat layers, the precision of every layer.

The squeeze-excite block is built three times: with placement rule 6 (its depthwise conv,
read in float by the SE pool and Mul, stays float), without, to see again what
TensorRT 8.6 does with a quantized grouped conv whose output is read in float, and
"dense" (rule 6's other way: the conv quantized with a Q/DQ on its output, so it
fuses INT8 in and out, as in an implicit INT8 engine; the depthwise + HardSwish
block too). The
blocks with float layers between INT8 ones are built again with those layers pinned
to FP16 (precision constraints ``prefer``; ``core.qdq.float_part.layer_pins``), the weakly
typed way to an FP16 float part.

The family blocks are built with the planner's dense placement too (``-dense``), and C2f, SPPF and
the neck once more with placement rule 9 off (``-no-rule9``: Split/Concat/MaxPool/Resize excluded),
the comparison that rule rests on.

``$TRTWIDGETS_ARTIFACTS/qdq_blocks/blocks.json`` holds every build's layer table; it is
committed as ``tests/fixtures/trt86/qdq_blocks.json`` for the CPU tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core import qdq_blocks as qb
from tests.core import qdq_family_blocks as fb
from tests.gpu.build_helpers import artifacts_dir, build_or_explain, fresh_dir
from trtwidgets.core.model.load import load_model
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq, save_qdq_model
from trtwidgets.core.recipe.recipe import Recipe

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")

#: The seven blocks of tests/core/qdq_blocks.py and issue 21's families (tests/core/qdq_family_blocks.py).
BLOCKS = {**qb.BLOCKS, **fb.FAMILY_BLOCKS}
VARIANTS = [(name, "") for name in BLOCKS] + [("squeeze_excite", "no-rule6")] + [
    (name, "fp16pin") for name in ("squeeze_excite", "transpose_head", "concat_resize", "depthwise_hardswish")] + [
    (name, "dense") for name in ("squeeze_excite", "depthwise_hardswish")] + [
    # The model families of issue 21 (tests/core/qdq_family_blocks.py), as the planner exports them too.
    (name, "dense") for name in fb.FAMILY_BLOCKS] + [
    (name, "no-rule9") for name in ("c2f", "sppf", "upsample_neck")]
NO_RULE9_OPS = ("Split", "Concat", "MaxPool", "Resize")
RESULTS: dict = {}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return artifacts_dir(tmp_path_factory, "qdq_blocks")


@pytest.fixture(scope="module", autouse=True)
def write_results(work):
    yield
    (work / "blocks.json").write_text(json.dumps(RESULTS, indent=1))


@pytest.mark.parametrize("name, variant", VARIANTS, ids=[f"{n}-{v}" if v else n for n, v in VARIANTS])
def test_block_runs_int8_where_the_export_says(trt, work, name, variant):
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.core.qdq.float_part.layer_pins import float_part_nodes, float_part_pattern
    from trtwidgets.core.recipe.fields import LayerPrecision

    maker, never_int8 = BLOCKS[name]
    model = maker()
    opts = QdqOptions(high_precision="fp32", keep_float_output_grouped_convs=variant != "no-rule6",
                      dense_int8=variant == "dense",
                      # Rule 9 off (data movement read in float, each reader quantizing its own copy): its evidence.
                      exclude_op_types=NO_RULE9_OPS if variant == "no-rule9" else ())
    ex = build_qdq(model, QdqSpec(qb.simple_amax(model), opts))
    key = f"{name}-{variant}" if variant else name
    path = save_qdq_model(ex, work / f"{key}.qdq.onnx")
    pins = {}
    if variant == "fp16pin":
        # The weakly typed twin of an FP16 float part: pin every float layer to FP16, prefer constraints.
        pattern, _ = float_part_pattern(float_part_nodes(ex.model, ex.report.quantized_layers))
        pins = {"precision_constraints": "prefer",
                "layer_precisions": (LayerPrecision(pattern, "fp16", regex=True),)}
    recipe = Recipe.for_model(load_model(path), flags=("fp16", "int8"), builder_optimization_level=1,
                              timing_cache=str(work / "timing.cache"), **pins)
    result = build_or_explain(recipe, fresh_dir(work, key), verbose=False)
    layers = parse_inspector_json(result.inspector_json_path).layers
    by_node: dict = {}
    for layer in layers:
        for node in layer.onnx_nodes:
            by_node.setdefault(node, set()).add(layer.precision)
    compute = [lay for lay in layers if lay.type not in ("Reformat", "NoOp", "Shuffle")
               and not lay.name.startswith("Reformatting")]
    RESULTS[key] = {
        "quantized_by_export": list(ex.report.quantized_layers),
        "kept_float_by_export": [s.node_label for s in ex.report.skipped],
        "layers": [{"name": lay.name, "type": lay.type, "precision": lay.precision,
                    "onnx_nodes": list(lay.onnx_nodes)} for lay in layers],
        "reformats": sum(1 for lay in layers if lay.name.startswith("Reformatting") or lay.type == "Reformat"),
        "fp32_compute": [lay.name for lay in compute if lay.precision == "FP32"],
    }
    table = "\n".join(f"  {lay.precision:<6} {lay.type:<14} {lay.name}" for lay in layers)
    print(f"\n{key}: {len(layers)} layers, {RESULTS[key]['reformats']} reformats\n{table}")
    if any(lay.name.startswith("{ForeignNode[") for lay in layers):
        # Myelin (TensorRT 8.6's transformer backend) takes the block whole: per-layer precision is not shown.
        return
    if variant == "no-rule9":
        return  # recorded for comparison (tests/core/qdq/test_qdq_family_blocks.py), nothing asserted here
    if variant == "no-rule6":
        # Rule 6's evidence: TensorRT 8.6 does not fuse a quantized grouped conv whose output is read in float.
        assert "INT8" not in by_node.get("dw", set()), table
        return
    not_int8 = [n for n in ex.report.quantized_layers if "INT8" not in by_node.get(n, set())]
    assert not not_int8, f"quantized by the export but not INT8 in the engine: {not_int8}\n{table}"
    wrongly = [n for n in never_int8 if "INT8" in by_node.get(n, set())]
    assert not wrongly, f"must not run INT8: {wrongly}\n{table}"
    if variant == "fp16pin" or name in ("residual", "pool_classifier"):
        # With the float part pinned to FP16 (or no float part at all) no layer may fall back to FP32;
        # unpinned, TensorRT 8.6 ran the float layers between INT8 ones in FP32 (recorded, not asserted).
        assert not RESULTS[key]["fp32_compute"], f"FP32 islands: {RESULTS[key]['fp32_compute']}\n{table}"
