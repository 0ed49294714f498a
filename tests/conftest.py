"""Shared fixtures. Imports only stdlib, numpy and onnx: the GPU tests (tests/gpu)
run on Python 3.9 with numpy, onnx and tensorrt alone and use this file too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_file_module(path: Path, name: str = ""):
    """The Python file at ``path`` (a script or a benchmark, not a package module) imported as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
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


@pytest.fixture(scope="session")
def dask_client():
    """A real Dask cluster on 127.0.0.1: two worker processes of one thread each (trtwidgets' ``--workers 2``).

    Shared by the tests of the distributed paths; a test that kills a worker starts a cluster of its own.
    """
    pytest.importorskip("distributed")
    from trtwidgets.core.common.dask_cluster import cluster_client

    with cluster_client(workers=2) as client:
        yield client
