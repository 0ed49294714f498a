"""Shared fixtures. Imports only stdlib, numpy and onnx: the GPU tests (tests/gpu)
run on Python 3.9 with numpy, onnx and tensorrt alone and use this file too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def cls_model_path() -> Path:
    """The real PaddleOCR direction classifier bundled as the demo (dynamic batch/H/W)."""
    from trtwidgets import demo

    return demo.MODEL_PATH


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """Committed real artifacts (inspector JSON, calibration caches, timings) from GPU runs."""
    return FIXTURES


def require_or_skip(env_var: str, reason: str):
    """Skip with ``reason``, unless ``env_var`` is set (CI sets it), in which case fail.

    CI must run the browser and TensorRT-bindings tests; a developer machine without
    Chromium or network may skip them, and says why.
    """
    if os.environ.get(env_var):
        pytest.fail(f"{reason} ({env_var} is set, so this test must run)")
    pytest.skip(reason)
