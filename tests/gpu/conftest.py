"""GPU tests: real TensorRT 8.6 on the GPU machine (DEVELOPERS.md, "The GPU machine").

Every test here carries the ``gpu`` marker; without an importable TensorRT they skip.
Run there with: ``$PY39 -m pytest tests/gpu -m gpu``.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(scope="session")
def trt():
    """The real tensorrt module, or skip."""
    try:
        import tensorrt
    except Exception as exc:
        pytest.skip(f"TensorRT is not importable here: {exc}")
    return tensorrt


@pytest.fixture
def no_cublas_cudnn(monkeypatch, trt):
    """Builds without cuBLAS/cuBLASLt/cuDNN tactics (load-time stubs on the GPU machine); skips without TensorRT.

    Use with ``pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")``.
    """
    monkeypatch.setenv("TRTWIDGETS_NO_CUBLAS_CUDNN", "1")
