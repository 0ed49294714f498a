"""Issue 21's whole-model check on TensorRT 8.6: a YOLOv8 detector's all-INT8 Q/DQ export vs implicit INT8.

The model is not in the repository (AGPL); point ``$TRTWIDGETS_YOLO`` at it (the lead's copy:
``/work/models/yolov8n-doclaynet.onnx``, static 1x3x1024x1024). ``$TRTWIDGETS_YOLO_CALIB`` may name
an ``.npy`` of calibration images ``[N, 3, H, W]`` (``benchmarks/yolo_placement.py --save-calib``);
without it, smooth synthetic images are used (the layer counts do not depend on the ranges). On the GPU
machine::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        TRTWIDGETS_YOLO=/path/yolov8n.onnx $PY39 -m pytest tests/gpu/test_yolo_placement.py -v -s

Builds at batch 1 and 32 (``$TRTWIDGETS_YOLO_BATCHES``; the batch-32 copy has its batch-pinning Reshape
targets rewritten to read the batch, as lint's BATCH_PINNED_SHAPE says), FP16+INT8 flags, builder
optimization level 3:

* ``implicit``: TensorRT's EntropyCalibrator2 on the images;
* ``explicit``: the toolkit's dense (all-INT8, the planner's) Q/DQ export with TensorRT's own ranges
  (the implicit build's calibration cache), so the two differ in placement only;
* ``fp16``: the float model, FP16 flag.

From each engine's inspector JSON: layers, reformat layers, standalone PointWise layers, Scale layers
(a Q/DQ TensorRT could not fold), INT8 layers; and the median latency. Written to
``$TRTWIDGETS_ARTIFACTS/yolo_placement/b<batch>/yolo_placement.json``. Issue 21's target: the explicit engine has
no more reformat, standalone PointWise or Scale layers than the implicit one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.gpu.build_helpers import artifacts_dir, build_or_explain, fresh_dir

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")


@pytest.fixture(scope="module")
def model_path() -> Path:
    path = os.environ.get("TRTWIDGETS_YOLO")
    if not path or not Path(path).is_file():
        pytest.skip("set TRTWIDGETS_YOLO to a YOLOv8 ONNX model (not in the repository: AGPL)")
    return Path(path)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return artifacts_dir(tmp_path_factory, "yolo_placement")


def _calibration(name: str, shape) -> list:
    path = os.environ.get("TRTWIDGETS_YOLO_CALIB")
    if path:
        x = np.load(path).astype(np.float32)
    else:
        n, (c, h, w) = 8, shape[1:]
        yy, xx = np.meshgrid(np.linspace(0, 1, h, dtype=np.float32), np.linspace(0, 1, w, dtype=np.float32),
                             indexing="ij")
        rng = np.random.default_rng(0)
        x = np.stack([np.stack([np.clip(0.5 + 0.5 * np.sin((k + 1) * 6 * xx + j) * np.cos((k + 2) * 5 * yy)
                                        + 0.05 * rng.standard_normal((h, w)), 0, 1) for j in range(c)])
                      for k in range(n)]).astype(np.float32)
    return [{name: x[i:i + 1]} for i in range(len(x))]


def _rebatch(proto, batch: int):
    """A copy at ``batch``: the input's first dim set, and the Reshape targets lint finds pinning the batch
    (BATCH_PINNED_SHAPE) given 0 (copy the input's dim) for it, as lint's fix says."""
    import onnx
    from onnx import numpy_helper

    from trtwidgets.core.model.lint import lint

    m = onnx.ModelProto()
    m.CopyFrom(proto)
    pinned = {n for f in lint(m) if f.code == "BATCH_PINNED_SHAPE" for n in f.nodes}
    inits = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Reshape" and (n.name or n.output[0]) in pinned and n.input[1] in inits:
            name = f"{n.input[1]}__batch_from_input"
            if name not in inits:
                target = numpy_helper.to_array(inits[n.input[1]]).copy()
                target[0] = 0
                inits[name] = numpy_helper.from_array(target, name)
                m.graph.initializer.append(inits[name])
            n.input[1] = name
    for vi in list(m.graph.input) + list(m.graph.output):
        dim = vi.type.tensor_type.shape.dim[0]
        dim.Clear()
        if vi in m.graph.input:
            dim.dim_value = batch
        else:
            dim.dim_param = "batch"
    del m.graph.value_info[:]
    return m


def _counts(result) -> dict:
    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    layers = parse_inspector_json(result.inspector_json_path).layers
    return {"layers": len(layers),
            "reformats": sum(1 for lay in layers if lay.type == "Reformat"),
            "pointwise": sum(1 for lay in layers if lay.type == "PointWise"),
            "scale": sum(1 for lay in layers if lay.type == "Scale"),
            "int8": sum(1 for lay in layers if lay.precision == "INT8"),
            "names": {t: [lay.name for lay in layers if lay.type == t] for t in ("Reformat", "PointWise", "Scale")}}


def _latency_ms(result, feed) -> float:
    from trtwidgets.trt.bench import benchmark_runner
    from trtwidgets.trt.runner import EngineRunner

    with EngineRunner(result.engine_path) as runner:
        return float(benchmark_runner(runner, feed, runs=200, warmup=30).to_dict()["median_ms"])


BATCHES = [int(b) for b in os.environ.get("TRTWIDGETS_YOLO_BATCHES", "1,32").split(",")]


@pytest.mark.parametrize("batch", BATCHES)
def test_all_int8_export_has_no_more_reformat_pointwise_or_scale_layers_than_implicit_int8(trt, work, model_path,
                                                                                            batch):
    import onnx

    from trtwidgets.core.calibration.cache import read_cache
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq, save_qdq_model
    from trtwidgets.core.recipe.fields import CalibratorSpec
    from trtwidgets.core.recipe.recipe import Recipe

    work = work / f"b{batch}"
    work.mkdir(exist_ok=True)
    proto = onnx.load(str(model_path))
    if batch != proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value:
        proto = _rebatch(proto, batch)
    model_path = work / "model.onnx"
    onnx.save(proto, str(model_path))
    loaded = load_model(model_path)
    vi = loaded.proto.graph.input[0]
    shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    feeds = _calibration(vi.name, shape)
    if batch > 1:  # whole batches of the images, repeated
        x = np.concatenate([f[vi.name] for f in feeds])
        x = np.concatenate([x] * (-(-batch // len(x))))[:batch]
        feeds = [{vi.name: x}]

    def recipe(path, flags, calibrator=None):
        kw = {"calibrator": calibrator} if calibrator else {}
        return Recipe.for_model(load_model(path), flags=flags, builder_optimization_level=3,
                                timing_cache=str(work / "timing.cache"), **kw)

    implicit = build_or_explain(recipe(model_path, ("fp16", "int8"), CalibratorSpec(kind="trt_entropy2")),
                                fresh_dir(work, "implicit"), verbose=False, calibration_data=feeds)
    ex = build_qdq(loaded, QdqSpec(read_cache(implicit.calibration_cache_path).amax,
                                   QdqOptions(trt_version="8.6", dense_int8=True)))
    qdq_path = save_qdq_model(ex, work / "yolo.qdq.onnx")
    explicit = build_or_explain(recipe(qdq_path, ("fp16", "int8")), fresh_dir(work, "explicit"), verbose=False)
    fp16 = build_or_explain(recipe(model_path, ("fp16",)), fresh_dir(work, "fp16"), verbose=False)
    rows = {}
    for key, res in (("implicit", implicit), ("explicit", explicit), ("fp16", fp16)):
        rows[key] = _counts(res)
        rows[key]["median_ms_b1"] = _latency_ms(res, feeds[0])
    rows["export"] = {"quantized_layers": len(ex.report.quantized_layers),
                      "qdq_pairs": sum(1 for n in ex.model.graph.node if n.op_type == "QuantizeLinear")}
    rows["batch"] = batch
    (work / "yolo_placement.json").write_text(json.dumps(rows, indent=1))
    for key in ("implicit", "explicit", "fp16"):
        r = rows[key]
        print(f"\nbatch {batch} {key:<9} layers {r['layers']:>4}  reformats {r['reformats']:>3}  pointwise {r['pointwise']:>3}  "
              f"scale {r['scale']:>3}  int8 {r['int8']:>4}  b1 {r['median_ms_b1']:.3f} ms")
    imp, exp = rows["implicit"], rows["explicit"]
    for kind in ("reformats", "pointwise", "scale"):
        assert exp[kind] <= imp[kind], f"{kind}: explicit {exp[kind]} > implicit {imp[kind]}\n" + "\n".join(
            exp["names"][{"reformats": "Reformat", "pointwise": "PointWise", "scale": "Scale"}[kind]])
