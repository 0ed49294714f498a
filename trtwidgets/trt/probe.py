"""Asking TensorRT for a name that one version has and another lacks.

TensorRT's Python API differs across 8.6, 10 and 11 (flags, enums, classes and properties come and go).
:func:`probe` is the one place trtwidgets.trt asks for such a name, so every probe can be found; this module
imports nothing of the package (trtwidgets.trt and its features both use it).
"""

from __future__ import annotations

import sys
from typing import Optional

__all__ = ["enum_name", "module_version", "probe"]


def probe(obj, name: str, default=None):
    """``obj.<name>``, or ``default`` where this TensorRT (or one of its objects) has no such name.

    TensorRT's Python API differs across 8.6, 10 and 11 (flags, enums, classes and properties come and
    go): this is the one place the package asks TensorRT for a name that may be missing, so every probe
    can be found by its callers (``tests/test_getattr_defaults.py`` keeps the rest of the package off
    ``getattr`` with a default).
    """
    return getattr(obj, name, default)


def enum_name(value) -> str:
    """The member name of a TensorRT enum value (``DataType.HALF`` -> ``"HALF"``), or a name already."""
    return probe(value, "name") or str(value).rsplit(".", 1)[-1]


def module_version(trt) -> Optional[str]:
    """The version of a tensorrt module, or None when it records none."""
    version = probe(trt, "__version__")
    if version is None:
        # The bare extension module (tensorrt_bindings.tensorrt) keeps its version in the package.
        parent = sys.modules.get(str(probe(trt, "__name__", "")).rpartition(".")[0])
        version = probe(parent, "__version__")
    return None if version is None else str(version)
