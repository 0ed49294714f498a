"""features() without TensorRT (the CPU case); real modules are covered by tests/trtapi."""

from __future__ import annotations

import pytest

import trtwidgets.trt as trt_pkg
from trtwidgets.trt.features import TrtFeatures, features, features_unavailable


@pytest.fixture
def no_tensorrt(monkeypatch):
    # The package's own switch: behave as if `import tensorrt` failed.
    monkeypatch.setenv("TRTWIDGETS_DISABLE_TRT", "1")
    monkeypatch.setattr(trt_pkg, "_module", None)


def test_features_without_tensorrt_says_what_to_install(no_tensorrt):
    f = features()
    assert not f.available and f.version is None and f.major is None
    assert f.precision_flags == () and f.calibrators == () and not f.inspector
    assert "TRTWIDGETS_DISABLE_TRT" in f.explanations["build"]
    assert "pip install" in f.explanations["fp16"]
    assert f == features_unavailable("TRTWIDGETS_DISABLE_TRT is set")


def test_features_unavailable_explains_every_feature():
    f = features_unavailable()
    for key in ("fp16", "int8", "calibrators", "layer_precision", "progress_monitor", "inspector", "build"):
        assert "TensorRT is not installed here" in f.explain(key)


def test_features_round_trip_through_json():
    import json

    f = features_unavailable("x")
    assert TrtFeatures.from_dict(json.loads(json.dumps(f.to_dict()))) == f


def test_installed_tensorrt_if_any():
    if not trt_pkg.available():
        pytest.skip("no TensorRT in this Python (tests/trtapi checks real 10.x/11.x modules)")
    f = features()
    assert f.available and f.major is not None and f.version == trt_pkg.version()
