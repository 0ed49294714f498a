"""Thin ipywidgets layer: one module per notebook step, sharing a :class:`Session`.

Widgets render what :mod:`trtwidgets.core` computes and never compute
themselves; model-provided names are escaped by :mod:`trtwidgets.widgets.html`.
"""

from __future__ import annotations

from .accuracy import AccuracyView
from .app import App, quickstart
from .build_panel import BuildPanel
from .calib_explorer import CalibrationExplorer
from .calib_data import DataBox
from .calibrator import CalibratorPicker
from .compare import CompareView
from .flags import FlagsPicker
from .html import findings_html
from .inspector import Inspector
from .model_loader import ModelLoader
from .plan_step import PlanStep
from .profiles import ProfileEditor
from .session import Session

__all__ = ["App", "quickstart", "AccuracyView", "BuildPanel", "CalibrationExplorer", "CalibratorPicker",
           "CompareView", "DataBox", "FlagsPicker", "findings_html", "Inspector", "ModelLoader", "PlanStep", "ProfileEditor", "Session"]
