"""The cache calibrator against the real TensorRT Python API (no GPU needed to instantiate it).

Runs where ``tensorrt`` imports: locally with ``$PY39 -m pytest tests/trt/test_calibrator_bridge.py``
(TensorRT 8.6), and on the GPU machine.
"""

from __future__ import annotations

import pytest

from trtwidgets.core.calibration.cache import cache_text
from trtwidgets.core.common.errors import StatsError

trt = pytest.importorskip("tensorrt", reason="TensorRT is not installed in this Python")

if not hasattr(trt, "IInt8EntropyCalibrator2"):  # TensorRT 11
    pytest.skip("this TensorRT has no calibrators", allow_module_level=True)

from trtwidgets.trt.calibrator_bridge import make_cache_calibrator  # noqa: E402


@pytest.mark.parametrize("algorithm,cls,algo", [
    ("EntropyCalibration2", "IInt8EntropyCalibrator2", "ENTROPY_CALIBRATION_2"),
    ("MinMaxCalibration", "IInt8MinMaxCalibrator", "MINMAX_CALIBRATION"),
    ("EntropyCalibration", "IInt8EntropyCalibrator", "ENTROPY_CALIBRATION"),
])
def test_calibrator_class_matches_the_cache_algorithm(tmp_path, algorithm, cls, algo):
    path = tmp_path / "t.cache"
    path.write_text(cache_text({"x": 1.0, "y": 2.5}, "8600", algorithm))
    calib = make_cache_calibrator(path, trt)
    assert isinstance(calib, getattr(trt, cls)) and isinstance(calib, trt.IInt8Calibrator)
    assert calib.get_algorithm() == getattr(trt.CalibrationAlgoType, algo)
    assert calib.get_batch_size() == 1
    assert calib.get_batch(["x"]) is None
    data = calib.read_calibration_cache()
    lines = data.decode().splitlines()
    major, minor, patch = (int(p) for p in trt.__version__.split(".")[:3])
    assert lines[0] == f"TRT-{major * 1000 + minor * 100 + patch}-{algorithm}"
    assert lines[1:] == cache_text({"x": 1.0, "y": 2.5}).splitlines()[1:]


def test_bad_cache_is_a_user_error():
    with pytest.raises(StatsError, match="header"):
        make_cache_calibrator(b"hello", trt)
