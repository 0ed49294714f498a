"""FP16 judged like every candidate, on real TensorRT 8.6: the NaN the CPU predicts, and the FP32 island that fixes it.

``core/qdq/float_island.py`` predicts on the CPU (every tensor rounded to FP16 where it is written) that the
log-spectrum block of ``tests/core/plan/plan_models.log_spectrum`` writes NaN for quiet samples in FP16
(``1e-10`` is 0 in FP16, ``Log(0) = -inf``, the normalization NaN), and that keeping its island FP32 fixes it.
This builds the same model on TensorRT 8.6 with the FP16 flag, then with the island's layers pinned FP32
(``OBEY_PRECISION_CONSTRAINTS``: how a TensorRT 8.x engine keeps an island), and judges both engines by the one
verdict against an FP32 engine (TF32 off). Python 3.9 with numpy, onnx and tensorrt only::

    source /tmp/trtb/env.sh && TRTWIDGETS_NO_CUBLAS_CUDNN=1 TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 -m pytest tests/gpu/test_float_island.py -q -s

It writes ``$TRTWIDGETS_ARTIFACTS/float_island/verdicts.json`` (commit it as a fixture).
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from tests.core.plan.plan_models import log_spectrum, spectra
from tests.gpu.build_helpers import artifacts_dir, build_or_explain, fresh_dir, model_recipe

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")

BATCH = 12
#: The island the CPU search finds on this model (tests/core/qdq/test_float_island.py checks it holds there).
ISLAND = ("square", "add_eps", "log", "to_db")


def _static(model: onnx.ModelProto) -> onnx.ModelProto:
    for vi in list(model.graph.input) + list(model.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_value = BATCH
    model.graph.name = "log_spectrum_b12"
    return model


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return artifacts_dir(tmp_path_factory, "float_island")


def _engine_outputs(work, name, **recipe):
    from trtwidgets.trt.runner import EngineRunner

    r = build_or_explain(model_recipe(work, _static(log_spectrum()), builder_optimization_level=3, **recipe),
                         fresh_dir(work, name))
    x = np.concatenate([f["x"] for f in spectra(BATCH)])
    with EngineRunner(r.engine_path) as runner:
        return {"y": runner.infer({"x": x})["y"]}, r


def test_fp16_writes_nan_where_the_cpu_said_and_the_island_keeps_it_finite(work, trt):
    from trtwidgets.core.accuracy.target import Target
    from trtwidgets.core.accuracy.verdict import evaluate
    from trtwidgets.core.recipe.fields import LayerPrecision

    fp32, _ = _engine_outputs(work, "fp32")  # TF32 is off in the toolkit's FP32 builds
    fp16, _ = _engine_outputs(work, "fp16", flags=("fp16",))
    island, built = _engine_outputs(work, "fp16_island", flags=("fp16",), precision_constraints="obey",
                                    layer_precisions=tuple(LayerPrecision(n, "fp32") for n in ISLAND))
    target = Target()
    v16, vis = evaluate(fp16, fp32, target), evaluate(island, fp32, target)
    quiet = [i for i in range(BATCH) if i % 3 == 2]
    record = {"fp16": v16.to_dict(), "fp16_island": vis.to_dict(), "island": list(ISLAND), "quiet_samples": quiet,
              "fp16_non_finite_by_sample": [int((~np.isfinite(fp16["y"][i])).sum()) for i in range(BATCH)]}
    (work / "verdicts.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(record, indent=1))
    assert np.isfinite(fp32["y"]).all()
    # What the CPU predicted: FP16 fails with NaN/Inf, on the quiet samples.
    assert v16.meets is False and v16.non_finite
    assert all(record["fp16_non_finite_by_sample"][i] for i in quiet)
    # The island pinned FP32 on TensorRT 8.6: finite, and the target met.
    assert vis.meets, vis.why
