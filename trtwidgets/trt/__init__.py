"""The only package of trtwidgets that imports :mod:`tensorrt`, always lazily.

Importing ``trtwidgets.trt`` (or any of its modules) costs nothing and works
without TensorRT; the first function that needs TensorRT calls :func:`tensorrt`,
which imports it or raises :class:`~trtwidgets.core.common.errors.TensorRTUnavailable`
saying what to install. :func:`available` answers the question without raising,
so the widgets can grey out the build step and keep everything else working.
"""

from __future__ import annotations

import os
from typing import Optional

from ..core.common.errors import TensorRTUnavailable

#: How to get a TensorRT that builds engines, shown whenever it is missing.
INSTALL_ADVICE = (
    'Install it with `pip install "trtwidgets[trt]"` (TensorRT wheels come from NVIDIA\'s index: add '
    "`--extra-index-url https://pypi.nvidia.com` if pip cannot find them), on a machine with an NVIDIA "
    "GPU and driver. TensorRT 8.6 needs an older Python (its 8.6.0 wheels cover 3.6-3.10); "
    "TensorRT 10 and 11 have wheels for newer Pythons. "
    "TensorRT 11 has no calibrators and no precision flags: quantize by exporting a Q/DQ ONNX model from the "
    "toolkit's calibration instead. Everything except building and running engines works without TensorRT."
)

_module = None
_import_error: Optional[BaseException] = None


def _import():
    global _module, _import_error
    if _module is not None:
        return _module
    if os.environ.get("TRTWIDGETS_DISABLE_TRT"):
        _import_error = ImportError("TRTWIDGETS_DISABLE_TRT is set")
        return None
    try:
        import tensorrt as trt_mod
    except Exception as exc:
        _import_error = exc
        return None
    _module = trt_mod
    return _module


def available() -> bool:
    """Whether :mod:`tensorrt` can be imported here (it may still lack a GPU to build on)."""
    return _import() is not None


def tensorrt():
    """The :mod:`tensorrt` module.

    Raises
    ------
    TensorRTUnavailable
        TensorRT is not installed or cannot load its libraries; the message says what to install.
    """
    mod = _import()
    if mod is None:
        raise TensorRTUnavailable(
            "TensorRT is not available, so engines cannot be built here.",
            f"`import tensorrt` failed: {_import_error}",
            INSTALL_ADVICE,
        )
    return mod


def version_of(trt_module) -> str:
    """The version of a tensorrt module (the bare ``tensorrt_bindings.tensorrt`` extension keeps it in its package)."""
    from .probe import module_version

    v = module_version(trt_module)
    return "unknown" if v is None else v


def major_version(trt_module) -> int:
    """The major version of a tensorrt module (``10`` for 10.16.1), 0 when it cannot be read."""
    try:
        return int(version_of(trt_module).split(".")[0])
    except ValueError:
        return 0


def version() -> Optional[str]:
    """The installed TensorRT's version string, or None without TensorRT."""
    mod = _import()
    return None if mod is None else str(mod.__version__)
