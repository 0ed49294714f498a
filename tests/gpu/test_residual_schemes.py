"""Placement rule 2's two schemes against real TensorRT 8.6: a residual Add read quantized on the shortcut only, or on both.

Python 3.9 with numpy, onnx and tensorrt only. On the GPU machine::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 -m pytest tests/gpu/test_residual_schemes.py -v -s

Three residual blocks of ``tests/core/region_models.py`` at batch 32: YOLOv8's C2f bottleneck (the conv branch ends
in a SiLU), ResNet's basic block (conv + BN, ReLU after the add) and MobileNet's inverted residual (a linear 1x1
projection). Each block's residual region is found by structure (:func:`~trtwidgets.core.qdq.repeated_patterns.find_regions`),
cut out of the whole block's export with each scheme (:func:`~trtwidgets.core.qdq.region_cut.cut_region`), built
with FP16 + INT8 at builder level 1 and timed in interleaved rounds (:func:`trtwidgets.trt.measure.measure`, one
timing cache). The engines' layers are read back:

* ``skip`` on the C2f bottleneck: TensorRT runs the SiLU and the add as one point-wise layer after the conv and
  dequantizes the shortcut in a layer of its own; ``both``: the conv keeps its SiLU and writes INT8, the add is a
  point-wise layer, no dequantize layer (one layer and one reformat fewer);
* on ResNet's and MobileNet's blocks ``skip`` fuses the add into the conv, ``both`` does not (a layer more).

The first run (H200, 2026-11-27) failed an earlier form of the C2f assertion (fewer point-wise layers with
``both``: both schemes have one, the SiLU + add or the add alone); the assertions above are what that run's layers
show, and ``tests/core/qdq/test_residual_default.py`` holds them on the committed record.

``$TRTWIDGETS_ARTIFACTS/residual_schemes/residual_schemes.json`` records every engine (times, layers, reformats);
committed as ``benchmarks/results/regions/residual_schemes.json`` for ``tests/core/qdq/test_residual_default.py``.
"""

from __future__ import annotations

import json

import onnx
import pytest

from tests.core import region_models as rm
from tests.core.residual_evidence import add_fused_in_conv, dequantize_layers, silu_in_conv
from tests.gpu.build_helpers import artifacts_dir
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.region_cut import cut_region
from trtwidgets.core.qdq.repeated_patterns import find_regions

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")

#: block -> (model, gated): the three residual families at batch 32.
BLOCKS = {"c2f": (lambda: rm.c2f_stack(c=64, hw=40, batch=32), True),
          "resnet": (lambda: rm.resnet_stack(c=64, hw=56, batch=32), False),
          "inverted_residual": (lambda: rm.inverted_residuals(c=32, hw=56, batch=32), False)}
SCHEMES = ("skip", "both")


def _shapes(model: onnx.ModelProto) -> dict:
    inferred = onnx.shape_inference.infer_shapes(model)
    return {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
            for vi in list(inferred.graph.value_info) + list(inferred.graph.input)}


def _sub_models(work):
    """``(job name, path, block, scheme, gated)`` for each block's residual region under each scheme."""
    out = []
    for block, (make, gated) in BLOCKS.items():
        model = make()
        amax = {t: 4.0 for n in model.graph.node for t in list(n.input) + list(n.output)}
        pattern = next(p for p in find_regions(model, ("residual",)))
        assert pattern.gated == gated
        inst = pattern.instances[0]
        for scheme in SCHEMES:
            spec = QdqSpec(amax, QdqOptions(trt_version="8.6"), choices={i.anchor: scheme for i in pattern.instances})
            sub = cut_region(build_qdq(model, spec).model, inst.nodes, inst.inputs, inst.outputs, _shapes(model),
                             name=f"{block}_{scheme}")
            path = work / f"{block}_{scheme}.onnx"
            onnx.save(sub, str(path))
            out.append((f"{block} {scheme}", str(path), block, scheme, gated))
    return out


def _layers(cache, key: str) -> dict:
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.trt.build_phases.result import GRAPH_FILE

    graph = parse_inspector_json(str(cache / key / GRAPH_FILE))
    return {"summary": graph.layer_summary(), "layers": [[la.name, la.type, la.precision] for la in graph.layers]}


@pytest.fixture(scope="module")
def record(trt, tmp_path_factory):
    from trtwidgets.core.plan.measured.measurement import QDQ
    from trtwidgets.trt.measure import MeasureJob, measure

    work = artifacts_dir(tmp_path_factory, "residual_schemes")
    subs = _sub_models(work)
    report = measure([MeasureJob(name, QDQ, path) for name, path, *_ in subs], work / "engines", rounds=5, runs=100,
                     warmup=20, opt_level=1, gpus=1, progress=True)
    doc = {"gpu": trt.__version__, "rounds": report.rounds, "engines": {}}
    by_name = {m.name: m for m in report.measurements}
    for name, _, block, scheme, gated in subs:
        m = by_name[name]
        rec = dict(m.to_dict(), block=block, scheme=scheme, gated=gated)
        if m.key and not m.error:
            rec.update(_layers(work / "engines", m.key))
        doc["engines"][name] = rec
    (work / "residual_schemes.json").write_text(json.dumps(doc, indent=1, default=str))
    for name, r in doc["engines"].items():
        s = r.get("summary", {})
        print(f"{name:<24} {r['median_ms']!s:>10} ms spread {r['spread_ms']!s:>8} layers {s.get('layers')} "
              f"int8 {s.get('int8')} reformats {s.get('reformats')} pointwise {s.get('pointwise')} {r['error'][:200]}")
    return doc


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_both_schemes_build(record, block):
    for scheme in SCHEMES:
        assert not record["engines"][f"{block} {scheme}"]["error"], record["engines"][f"{block} {scheme}"]["error"]


def test_c2f_bottleneck_keeps_its_silu_in_the_conv_with_both_inputs_quantized(record):
    skip, both = (record["engines"][f"c2f {s}"] for s in SCHEMES)
    assert silu_in_conv(both["layers"], "m.0/cv2") and not silu_in_conv(skip["layers"], "m.0/cv2")
    # The shortcut, read by the bottleneck's first conv and by the add, is dequantized by a layer of its own only
    # when the add reads it alone quantized.
    assert dequantize_layers(skip["layers"]) and not dequantize_layers(both["layers"])
    assert both["summary"]["layers"] < skip["summary"]["layers"]
    assert both["summary"]["reformats"] < skip["summary"]["reformats"]


@pytest.mark.parametrize("block", ["resnet", "inverted_residual"])
def test_an_add_after_a_linear_or_bn_branch_fuses_into_the_conv_with_the_shortcut_quantized(record, block):
    skip, both = (record["engines"][f"{block} {s}"] for s in SCHEMES)
    assert add_fused_in_conv(skip["layers"], "add") and not add_fused_in_conv(both["layers"], "add")
    assert skip["summary"]["layers"] < both["summary"]["layers"]
