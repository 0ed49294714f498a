"""Sensitivity sweep with real builds on a tiny CNN (explicit Q/DQ and implicit layer precisions).

Run on the GPU machine: ``$PY39 -m pytest tests/gpu/test_sweep.py -q``; writes
``$TRTWIDGETS_ARTIFACTS/sweep/{qdq,implicit}.json`` when that variable is set.
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest

from trtwidgets.core.accuracy.sweep import plan_sweep
from trtwidgets.core.accuracy.reference import ReferenceData

from .accuracy_models import INTERMEDIATES, SHAPE, reference, tiny_cnn

LAYERS = ("conv2", "conv1", "conv3")  # "most sensitive first" for the test


@pytest.fixture(scope="module", autouse=True)
def _gpu(trt):
    from trtwidgets.trt import cuda

    try:
        n = cuda.device_count()
    except Exception as exc:
        pytest.skip(f"no CUDA runtime: {exc}")
    if n == 0:
        pytest.skip("no CUDA device visible")


@pytest.fixture(scope="module")
def setup(trt, tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    path = d / "tiny_cnn.onnx"
    onnx.save(tiny_cnn(), str(path))
    x = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    ref = reference(x)
    amax = {"x": float(np.abs(x).max())}
    amax.update({n: float(np.abs(ref[n]).max()) for n in INTERMEDIATES})
    sources = [n for n in trt.TacticSource.__members__ if n not in ("CUBLAS", "CUBLAS_LT", "CUDNN")]
    return {"dir": d, "path": path, "data": ReferenceData(inputs={"x": x}, outputs={"y": ref["y"]}), "amax": amax,
            "build_kwargs": {"tactic_sources": sources}, "cache": str(d / "timing.cache")}


def _save(name, result):
    root = os.environ.get("TRTWIDGETS_ARTIFACTS")
    if root:
        os.makedirs(os.path.join(root, "sweep"), exist_ok=True)
        with open(os.path.join(root, "sweep", f"{name}.json"), "w") as f:
            json.dump(result.to_dict(), f, indent=1, default=str)


def test_explicit_qdq_sweep(setup):
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import Recipe
    from trtwidgets.trt.sweep import sweep

    base = Recipe.for_model(load_model(setup["path"]), flags=("fp16", "int8"), builder_optimization_level=0,
                            timing_cache=setup["cache"])
    plan = plan_sweep(LAYERS, steps=(0, 1, 3), mode="qdq_exclude")
    result = sweep(plan, base, setup["data"], amax=setup["amax"], out_root=setup["dir"] / "qdq", runs=200,
                   build_kwargs=setup["build_kwargs"])
    _save("qdq", result)
    assert [r.step.n for r in result.steps] == [0, 1, 3]
    assert all(r.error is None for r in result.steps), [r.error for r in result.steps]
    assert all(r.median_ms and r.median_ms > 0 for r in result.steps)
    snr = [r.worst_snr_db for r in result.steps]
    # Everything quantized loses more than nothing quantized (step 3 is FP16 only).
    assert snr[2] > snr[0], snr
    assert result.steps[0].worst_cosine > 0.99


def test_implicit_layer_precision_sweep(setup, tmp_path):
    from trtwidgets.core.calibration.cache import write_cache
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import CalibratorSpec, LayerPrecision, Recipe
    from trtwidgets.trt.sweep import sweep

    cache = tmp_path / "toolkit.cache"
    write_cache(setup["amax"], cache)
    # PREFER INT8 for every conv: left to itself TensorRT runs a model this small in FP32 (and at level 0 it
    # takes the first tactic that runs), so step 0 would not be quantized at all. The sweep's FP16 pins
    # come after this one and win for the layers they name.
    base = Recipe.for_model(load_model(setup["path"]), flags=("fp16", "int8"), builder_optimization_level=0,
                            timing_cache=setup["cache"], calibrator=CalibratorSpec(kind="toolkit", cache_path=str(cache)),
                            precision_constraints="prefer",
                            layer_precisions=(LayerPrecision("^conv[0-9]+$", "int8", regex=True),))
    plan = plan_sweep(LAYERS, steps=(0, 3), recipe=base, trt_major=8)
    assert plan[1].recipe.layer_precisions
    result = sweep(plan, base, setup["data"], out_root=setup["dir"] / "implicit", runs=200,
                   build_kwargs=setup["build_kwargs"])
    _save("implicit", result)
    assert all(r.error is None for r in result.steps), [r.error for r in result.steps]
    snr = [r.worst_snr_db for r in result.steps]
    assert snr[1] > snr[0], snr
