"""TensorRT 8.6's own calibration caches for the demo model, and the cache bridge (GPU machine).

Python 3.9 with numpy, onnx, tensorrt and pytest only (no ONNX Runtime there). Run with::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \
        $PY39 -m pytest tests/gpu/test_calibration_fidelity.py -q -s

* ``test_tensorrt_calibration_caches`` calibrates the bundled cls model with
  IInt8EntropyCalibrator2 and IInt8MinMaxCalibrator on the 32 bundled crops at the static
  shape 1x3x48x192, batch 1 (the data of tests/fixtures/calib/cls_demo_stats.npz), and writes
  ``$TRTWIDGETS_ARTIFACTS/trt86/cls_entropy2.cache`` and ``cls_minmax.cache``: commit them as
  ``tests/fixtures/trt86/`` for tests/core/test_calib_fidelity.py.
* ``test_cache_bridge_builds_without_calibrating`` builds INT8 with the toolkit's entropy
  ranges (from the committed statistics) through ``make_cache_calibrator``: TensorRT must
  accept the cache and never ask for a batch.

The three builds share a timing cache; builder optimization level 0, INT8 only, and no
cuBLAS/cuBLASLt/cuDNN tactics (they are stubbed on that machine).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.gpu.build_helpers import tactic_sources_mask

ROOT = Path(__file__).resolve().parents[2]
STATS = ROOT / "tests" / "fixtures" / "calib" / "cls_demo_stats.npz"
SHAPE = (1, 3, 48, 192)


def _artifacts() -> Path:
    out = Path(os.environ.get("TRTWIDGETS_ARTIFACTS") or (ROOT / "build" / "gpu-artifacts")) / "trt86"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _static_model_bytes() -> bytes:
    """The demo model with its input fixed to 1x3x48x192: no optimization profile, a faster build."""
    from trtwidgets import demo

    model = onnx.load(str(demo.MODEL_PATH))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for d, v in zip(dims, SHAPE):
        d.Clear()
        d.dim_value = v
    return model.SerializeToString()


@pytest.fixture(scope="module")
def builder_kit(trt):
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    probe = builder.create_builder_config()
    timing = probe.create_timing_cache(b"")
    return trt, logger, builder, timing


def _build(kit, calibrator):
    trt, logger, builder, timing = kit
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(_static_model_bytes()), [str(parser.get_error(i)) for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    # Calibration runs the network in FP32; without TF32 its activations match ONNX Runtime's FP32 ones.
    config.clear_flag(trt.BuilderFlag.TF32)
    config.builder_optimization_level = 0
    config.set_tactic_sources(tactic_sources_mask(trt))
    config.set_timing_cache(timing, ignore_mismatch=False)
    config.int8_calibrator = calibrator
    t0 = time.perf_counter()
    engine = builder.build_serialized_network(network, config)
    seconds = time.perf_counter() - t0
    assert engine is not None, "TensorRT failed to build the INT8 engine (see the log above)"
    return engine, seconds


@pytest.mark.parametrize("kind,algorithm", [("entropy2", "EntropyCalibration2"), ("minmax", "MinMaxCalibration")])
def test_tensorrt_calibration_caches(builder_kit, kind, algorithm, tmp_path):
    from trtwidgets import demo
    from trtwidgets.core.calibration.cache import read_cache
    from trtwidgets.trt.calibrators import make_calibrator

    trt = builder_kit[0]
    cache_path = tmp_path / f"cls_{kind}.cache"
    feeds = demo.sample_inputs(1)
    calib = make_calibrator(kind, iter(feeds), {"x": (SHAPE, np.float32)}, trt, cache_out=str(cache_path))
    try:
        _, seconds = _build(builder_kit, calib)
    finally:
        calib.free()
    assert calib.error is None, f"get_batch failed: {calib.error!r}"
    assert calib.batches_fed == len(feeds) == 32
    assert cache_path.is_file(), "TensorRT did not hand back a calibration cache"
    cache = read_cache(cache_path)
    assert cache.algorithm == algorithm and cache.version.startswith("8")
    assert "x" in cache.amax and len(cache.amax) > 100
    assert all(np.isfinite(v) and v >= 0 for v in cache.amax.values())
    if kind == "minmax":
        # The input is in [-1, 1] by the demo preprocessing; MinMax sees its exact extreme.
        x = np.concatenate([f["x"] for f in feeds])
        assert cache.amax["x"] == pytest.approx(float(np.abs(x).max()), rel=1e-5)
    dest = _artifacts() / cache_path.name
    shutil.copyfile(cache_path, dest)
    print(f"\n{kind}: {len(cache.amax)} tensors, header {cache.header}, build {seconds:.0f} s -> {dest}")


def test_cache_bridge_builds_without_calibrating(builder_kit, tmp_path):
    from trtwidgets.core.calibration.cache import cache_text
    from trtwidgets.core.calibration.ranges import compute_amax
    from trtwidgets.core.calibration.stats import load_stats
    from trtwidgets.trt.calibrator_bridge import make_cache_calibrator

    trt = builder_kit[0]
    stats = load_stats(STATS)
    amax = {n: compute_amax(t, "entropy") for n, t in stats.tensors.items() if t.count}
    data = cache_text(amax, "8600", "EntropyCalibration2").encode()
    (_artifacts() / "cls_toolkit_entropy2.cache").write_bytes(data)
    calib = make_cache_calibrator(data, trt)
    assert isinstance(calib, trt.IInt8EntropyCalibrator2)
    engine, seconds = _build(builder_kit, calib)
    assert calib.batches_requested == 0, "TensorRT asked for calibration batches although the cache was given"
    assert engine.nbytes > 0
    (_artifacts() / "cls_toolkit_entropy2.engine").write_bytes(bytes(engine))
    print(f"\nbridge: built with the toolkit's {len(amax)} ranges in {seconds:.0f} s, no batch requested")
