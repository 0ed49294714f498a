"""Issue 44: the export's FP32 quantizer after a Concat (so that ONNX Runtime's default session loads it) changes
nothing TensorRT builds.

Python 3.9 with numpy, onnx and tensorrt only. On a GPU machine with TensorRT 10 or later::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 -m pytest tests/gpu/test_ort_concat_forms.py -v -s

A neck block (two conv branches, one upsampled by a nearest Resize, joined by a Concat that a conv reads: placement
rule 9 quantizes the Concat's inputs and output with one scale) is exported with an FP16 float part for the installed
TensorRT, in the form the export writes now (:mod:`trtwidgets.core.qdq.ort_concat`: a Cast to FP32 and the same
scale in FP32 before the Concat's QuantizeLinear) and in the form it wrote before
(``tests.core.qdq_models.previous_concat_form``). Both are built as the toolkit builds them (FP16 and INT8 flags
where this TensorRT has them, weakly typed; strongly typed on TensorRT 11) at builder levels 1 and 3, and each ONNX
node must run in the same precisions in both engines, with as many layers of each precision and type (reformats are
recorded, not compared: tactic timing moves them between any two builds). TensorRT 8.6 skips: its
parser reads FP32 scales only, so it never sees an FP16 float part, and its exports are written as before
(``tests/core/qdq/test_ort_default_session.py::test_an_fp32_export_is_written_as_before``).
``$TRTWIDGETS_ARTIFACTS/ort_concat_forms/forms.json`` records every engine's layers.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.core.qdq_models import previous_concat_form
from tests.gpu import models
from tests.gpu.build_helpers import artifacts_dir, build_or_explain, fresh_dir, model_recipe
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.ort_concat import ORT_CONCAT_REASON

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")

BATCH, CH, HW = 8, 64, 40


def neck_block():
    """x -> conv a (HW), x -> conv b (stride 2) -> nearest Resize x2; Concat(a, b) -> 1x1 conv -> y."""
    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "wa"], ["a0"], name="conv_a", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a0"], ["a"], name="relu_a"),
        helper.make_node("Conv", ["x", "wb"], ["b0"], name="conv_b", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("Relu", ["b0"], ["b1"], name="relu_b"),
        helper.make_node("Resize", ["b1", "", "up"], ["b"], name="up_b", mode="nearest"),
        helper.make_node("Concat", ["a", "b"], ["cat"], name="cat", axis=1),
        helper.make_node("Conv", ["cat", "wc"], ["c0"], name="conv_c", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c0"], ["y"], name="relu_c")]
    inits = [w("wa", CH, CH, 3, 3), w("wb", CH, CH, 3, 3), w("wc", CH, 2 * CH, 1, 1),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up")]
    return models._model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, CH, HW, HW])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [BATCH, CH, HW, HW])], inits,
                         name="neck_block")


def _by_node(result):
    """ONNX node -> the precisions of the engine layers it went into, and the engine's layer summary."""
    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    graph = parse_inspector_json(result.inspector_json_path)
    by_node = {}
    for layer in graph.layers:
        for node in layer.onnx_nodes:
            by_node.setdefault(node, set()).add(layer.precision)
    return by_node, graph


@pytest.fixture(scope="module")
def forms(trt):
    from trtwidgets.core.model.trt_version import parse_trt_version

    if parse_trt_version(trt.__version__).major < 10:
        pytest.skip(f"TensorRT {trt.__version__} reads FP32 Q/DQ scales only: no FP16 float part to build here")
    model = neck_block()
    amax = {t: 4.0 for n in model.graph.node for t in list(n.input) + list(n.output) if t}
    ex = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp16", trt_version=trt.__version__)))
    assert [r for r in ex.report.high_precision.kept_fp32 if r[1] == ORT_CONCAT_REASON], "no Concat rewritten"
    return {"now": ex.model, "before": previous_concat_form(ex.model)}


@pytest.mark.parametrize("level", [1, 3])
def test_both_forms_build_the_same_precisions(trt, forms, tmp_path_factory, level):
    from trtwidgets.trt.features import features

    work = artifacts_dir(tmp_path_factory, "ort_concat_forms")
    f = features(trt)
    flags = ("fp16", "int8") if f.has_flag("int8") else ()  # TensorRT 11: strongly typed, no flags
    built = {}
    for name, model in forms.items():
        model.graph.name = f"neck_{name}_l{level}"
        recipe = model_recipe(work, model, flags=flags, builder_optimization_level=level)
        built[name] = _by_node(build_or_explain(recipe, fresh_dir(work, model.graph.name)))
    record = {name: {"summary": g.layer_summary(), "layers": [[la.name, la.type, la.precision] for la in g.layers]}
              for name, (_, g) in built.items()}
    path = work / "forms.json"
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc[f"level{level}"] = dict(record, trt=trt.__version__, flags=list(flags))
    path.write_text(json.dumps(doc, indent=1))
    (now, g_now), (before, g_before) = built["now"], built["before"]
    for name, (_, g) in built.items():
        print(f"--- {name} (level {level}): {g.layer_summary()}")
        print("\n".join(f"  {la.precision:<6} {la.type:<18} {la.name}" for la in g.layers))
    shared = set(before) | {n for n in now if not n.endswith("__fp32_Cast")}
    assert {n: now.get(n) for n in shared} == {n: before.get(n) for n in shared}
    assert "INT8" in before.get("cat", set()) | before.get("conv_c", set()), before  # the block is quantized at all
    # As many layers of each precision, reformats aside (tactic timing moves those between any two builds).
    assert _computing(g_now) == _computing(g_before)


def _computing(graph):
    """``(precision, layer type)`` -> count, over the layers that compute (not reformats)."""
    out = {}
    for la in graph.layers:
        if la.type != "Reformat":
            out[(la.precision, la.type)] = out.get((la.precision, la.type), 0) + 1
    return out
