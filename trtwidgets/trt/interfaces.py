"""Python subclasses of TensorRT's callback interfaces (``ILogger``, ``IProfiler``...), made once per module.

The base classes exist only once :mod:`tensorrt` is imported, so the subclasses are
made at run time; they are cached per TensorRT module so that every instance of one
kind shares one class (isinstance checks and pybind11's override lookup stay cheap).
"""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Tuple

__all__ = ["interface_subclass"]

_SUBCLASSES: Dict[Tuple[int, str], type] = {}


def interface_subclass(trt_module, interface: str, name: str, methods: Mapping[str, Callable], doc: str) -> type:
    """The subclass ``name`` of ``trt_module.<interface>`` with ``methods``, made on first use.

    Parameters
    ----------
    trt_module : module or None
        The :mod:`tensorrt` module (default: :func:`trtwidgets.trt.tensorrt`).
    interface : str
        The base class's name in the module, e.g. ``"ILogger"``.
    name : str
        The subclass's name; one class per (module, name).
    methods : mapping
        Class attributes (``__init__`` and the interface's callbacks). The base class is
        available to them as ``self._trt_base`` (``__init__`` must call its ``__init__``).
    doc : str
        The class docstring.
    """
    if trt_module is None:
        from . import tensorrt

        trt_module = tensorrt()
    key = (id(trt_module), name)
    cls = _SUBCLASSES.get(key)
    if cls is None:
        base = getattr(trt_module, interface)
        cls = type(name, (base,), {"_trt_base": base, **methods, "__doc__": doc})
        _SUBCLASSES[key] = cls
    return cls
