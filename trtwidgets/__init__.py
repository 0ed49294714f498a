"""trtwidgets: Jupyter widgets for exploratory TensorRT quantization.

The steps of a notebook, flat and in order::

    import trtwidgets as tw

    model = tw.load("model.onnx")                 # inputs, dynamic dims, ops, Q/DQ nodes
    tw.lint(model, flags="fp16,int8")              # what TensorRT would refuse or ignore
    cal = tw.calibrate(model, "samples/")          # statistics and ranges; profiles from the data's shapes
    cal.save("cal.npz")                            # tw.Calibration.load("cal.npz") on the GPU machine
    tw.export_qdq(model, cal, "model.qdq.onnx")    # the calibration's own method and overrides
    plan = tw.plan(model, "samples/", held_back="heldback/", calibration=cal)  # where INT8 pays, on unseen samples
    plan = tw.plan(model, "samples/", calibration=cal, measure=True)  # on a GPU: picked by measured time
    tw.export_plan(model, plan, "pick.qdq.onnx")   # the pick, exported as it was scored
    plan.save("plan/"); plan = tw.Plan.load("plan/")  # plan.json: measure it later on a GPU machine
    tw.register_metric("my-metric", factory)       # a metric a plan may name (a plan.json never imports code)
    result = tw.build(tw.Recipe.for_model(model))  # needs TensorRT and a GPU
    table = tw.layers(result)                      # layer precisions, why not INT8 (tw.inspect: the same)
    tw.compare({"fp16": "a/", "int8": "b/"})        # layers of two builds side by side
    tw.App(model_path="model.onnx", data="samples/")
    tw.share("analysis.ipynb", "analysis.html")    # an executed notebook as one page that opens offline

The package is layered (see docs/architecture.md): ``trtwidgets.core`` is pure computation,
``trtwidgets.trt`` is the only package that imports TensorRT, ``trtwidgets.plots``
builds Plotly figures and ``trtwidgets.widgets`` is a thin ipywidgets layer.
The names above are resolved on first use (PEP 562), so ``import trtwidgets``
imports nothing heavy, and ``import trtwidgets.core`` works with only numpy and
onnx installed (the GPU machine runs Python 3.9 with just those). Editors and type
checkers see the real signatures through the ``TYPE_CHECKING`` imports below.
``tw.Calibration`` is what calibrating hands on (statistics, range method, amax overrides,
the model's fingerprint; saved and loaded as one file), ``tw.QdqOptions`` holds the Q/DQ
export's choices (one set of defaults), ``tw.Target`` the accuracy target every check judges by
(``tw.PlanTarget`` is the same class) and ``tw.Plan`` the planner's result. The errors the steps raise are
here too: ``tw.UserError`` (``what``, ``why``, ``fix``) and its kinds (``tw.BuildError``, ``tw.PlanFileError``...).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

if TYPE_CHECKING:  # what _LAZY resolves to, for editors and type checkers (never imported at run time)
    from trtwidgets.core.engine.layers import compare as compare
    from trtwidgets.core.engine.layers import layers as inspect  # noqa: F401 - tw.inspect, resolved lazily
    from trtwidgets.core.engine.layers import layers as layers
    from trtwidgets.core.accuracy.task_metrics import register_metric as register_metric
    from trtwidgets.core.model.lint import lint as lint
    from trtwidgets.core.model.load import load_model as load  # noqa: F401 - tw.load, resolved lazily
    from trtwidgets.core.plan.plan_artifact import Plan as Plan
    from trtwidgets.core.plan.plan_export import export_plan as export_plan
    from trtwidgets.core.accuracy.target import Target as Target
    from trtwidgets.core.plan.plan_values import PlanTarget as PlanTarget
    from trtwidgets.plan_api import plan as plan
    from trtwidgets.core.qdq.export import export_qdq as export_qdq
    from trtwidgets.core.qdq.options import QdqOptions as QdqOptions
    from trtwidgets.core.calibrate.step import calibrate as calibrate
    from trtwidgets.core.calibration.calibration import Calibration as Calibration
    from trtwidgets.core.recipe.recipe import Recipe as Recipe
    from trtwidgets.plots.share import share as share
    from trtwidgets.trt.build import build as build
    from trtwidgets.widgets.app import App as App
    from trtwidgets.core.common.progress import ProgressEvent as ProgressEvent
    from trtwidgets.core.common.errors import UserError as UserError
    from trtwidgets.core.common.errors import ModelLoadError as ModelLoadError
    from trtwidgets.core.common.errors import CalibrationDataError as CalibrationDataError
    from trtwidgets.core.common.errors import StatsError as StatsError
    from trtwidgets.core.common.errors import RecipeError as RecipeError
    from trtwidgets.core.common.errors import InspectorError as InspectorError
    from trtwidgets.core.common.errors import TensorRTUnavailable as TensorRTUnavailable
    from trtwidgets.core.common.errors import LabExtraMissing as LabExtraMissing
    from trtwidgets.core.common.errors import BuildError as BuildError
    from trtwidgets.core.common.write_rule import WriteError as WriteError
    from trtwidgets.core.qdq.options import QdqExportError as QdqExportError
    from trtwidgets.core.qdq.export_check import ExportCheckError as ExportCheckError
    from trtwidgets.core.plan.plan_file import PlanFileError as PlanFileError
    from trtwidgets.core.accuracy.task_metrics import MetricNotRegistered as MetricNotRegistered

__version__ = "0.1.0"

#: Public name -> (module, attribute). One entry per step, in notebook order.
_LAZY: Dict[str, Tuple[str, str]] = {
    "load": ("trtwidgets.core.model.load", "load_model"),
    "lint": ("trtwidgets.core.model.lint", "lint"),
    "calibrate": ("trtwidgets.core.calibrate.step", "calibrate"),
    "Calibration": ("trtwidgets.core.calibration.calibration", "Calibration"),
    "export_qdq": ("trtwidgets.core.qdq.export", "export_qdq"),
    "plan": ("trtwidgets.plan_api", "plan"),
    "export_plan": ("trtwidgets.core.plan.plan_export", "export_plan"),
    "build": ("trtwidgets.trt.build", "build"),
    "layers": ("trtwidgets.core.engine.layers", "layers"),
    "inspect": ("trtwidgets.core.engine.layers", "layers"),  # the same function, its first name
    "compare": ("trtwidgets.core.engine.layers", "compare"),
    "App": ("trtwidgets.widgets.app", "App"),
    "Recipe": ("trtwidgets.core.recipe.recipe", "Recipe"),
    "QdqOptions": ("trtwidgets.core.qdq.options", "QdqOptions"),
    "Target": ("trtwidgets.core.accuracy.target", "Target"),
    "PlanTarget": ("trtwidgets.core.plan.plan_values", "PlanTarget"),
    "Plan": ("trtwidgets.core.plan.plan_artifact", "Plan"),
    "share": ("trtwidgets.plots.share", "share"),
    "register_metric": ("trtwidgets.core.accuracy.task_metrics", "register_metric"),
    # What a progress=callable of calibrate, plan and build receives.
    "ProgressEvent": ("trtwidgets.core.common.progress", "ProgressEvent"),
    # What the steps raise: a UserError (what, why, fix) and its kinds, for ``except tw.UserError``.
    "UserError": ("trtwidgets.core.common.errors", "UserError"),
    "ModelLoadError": ("trtwidgets.core.common.errors", "ModelLoadError"),
    "CalibrationDataError": ("trtwidgets.core.common.errors", "CalibrationDataError"),
    "StatsError": ("trtwidgets.core.common.errors", "StatsError"),
    "RecipeError": ("trtwidgets.core.common.errors", "RecipeError"),
    "InspectorError": ("trtwidgets.core.common.errors", "InspectorError"),
    "TensorRTUnavailable": ("trtwidgets.core.common.errors", "TensorRTUnavailable"),
    "LabExtraMissing": ("trtwidgets.core.common.errors", "LabExtraMissing"),
    "BuildError": ("trtwidgets.core.common.errors", "BuildError"),
    "WriteError": ("trtwidgets.core.common.write_rule", "WriteError"),
    "QdqExportError": ("trtwidgets.core.qdq.options", "QdqExportError"),
    "ExportCheckError": ("trtwidgets.core.qdq.export_check", "ExportCheckError"),
    "PlanFileError": ("trtwidgets.core.plan.plan_file", "PlanFileError"),
    "MetricNotRegistered": ("trtwidgets.core.accuracy.task_metrics", "MetricNotRegistered"),
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    # Subpackages (trtwidgets.core, .widgets...) are found by the import system before this runs.
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'trtwidgets' has no attribute {name!r}") from None
    try:
        value = getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as err:  # tw.App or tw.share on a headless install: say which extra brings it
        from .core.common.errors import lab_extra_missing

        missing = lab_extra_missing(err, f"tw.{name}")
        if missing is None:
            raise
        raise missing from None
    globals()[name] = value  # once resolved, later lookups skip this function
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
