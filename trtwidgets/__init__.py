"""trtwidgets: Jupyter widgets for exploratory TensorRT quantization.

The steps of a notebook, flat and in order::

    import trtwidgets as tw

    model = tw.load("model.onnx")                 # inputs, dynamic dims, ops, Q/DQ nodes
    tw.lint(model, flags="fp16,int8")              # what TensorRT would refuse or ignore
    cal = tw.calibrate(model, "samples/")          # statistics and ranges; profiles from the data's shapes
    tw.export_qdq(model, cal.stats, "model.qdq.onnx")
    plan = tw.plan(...)                            # where INT8 pays (see trtwidgets.core.qdq.planner)
    result = tw.build(tw.Recipe.for_model(model))  # needs TensorRT and a GPU
    table = tw.inspect(result)                     # layer precisions, why not INT8
    tw.compare({"fp16": "a/", "int8": "b/"})        # layers of two builds side by side
    tw.App(model_path="model.onnx", data="samples/")

The package is layered (see DESIGN.md): ``trtwidgets.core`` is pure computation,
``trtwidgets.trt`` is the only package that imports TensorRT, ``trtwidgets.plots``
builds Plotly figures and ``trtwidgets.widgets`` is a thin ipywidgets layer.
The names above are resolved on first use (PEP 562), so ``import trtwidgets``
imports nothing heavy, and ``import trtwidgets.core`` works with only numpy and
onnx installed (the GPU machine runs Python 3.9 with just those).
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Tuple

__version__ = "0.1.0"

#: Public name -> (module, attribute). One entry per step, in notebook order.
_LAZY: Dict[str, Tuple[str, str]] = {
    "load": ("trtwidgets.core.model.load", "load_model"),
    "lint": ("trtwidgets.core.model.lint", "lint"),
    "calibrate": ("trtwidgets.core.recipe.calibrate", "calibrate"),
    "export_qdq": ("trtwidgets.core.qdq.export", "export_qdq"),
    "plan": ("trtwidgets.core.qdq.planner", "plan"),
    "build": ("trtwidgets.trt.build", "build"),
    "inspect": ("trtwidgets.core.engine.inspect_build", "inspect"),
    "compare": ("trtwidgets.core.engine.inspect_build", "compare"),
    "App": ("trtwidgets.widgets.app", "App"),
    "Recipe": ("trtwidgets.core.recipe.recipe", "Recipe"),
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    # Subpackages (trtwidgets.core, .widgets...) are found by the import system before this runs.
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'trtwidgets' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # once resolved, later lookups skip this function
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
