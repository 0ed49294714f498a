"""Thin ipywidgets layer: one module per notebook step, sharing a :class:`Session`.

Widgets render what :mod:`trtwidgets.core` computes and never compute
themselves; model-provided names are escaped by :mod:`trtwidgets.widgets.html`.
"""

from __future__ import annotations

from .accuracy import AccuracyView
from .app import App, quickstart
from .build_panel import BuildPanel, BuildStep
from .calib_explorer import CalibrationExplorer
from .calib_data import CalibrateStep, DataBox
from .calibrator import CalibratorPicker
from .compare import CompareView
from .explore_step import ExploreStep
from .flags import FlagsPicker, FlagsStep
from .html import findings_html
from .inspector import Inspector, InspectStep
from .model_loader import LoadStep, ModelLoader
from .plan_step import PlanStep
from .profiles import ProfileEditor, ProfilesStep
from .session import Session
from .step import StepWidget

__all__ = ["App", "quickstart", "AccuracyView", "BuildPanel", "CalibrationExplorer", "CalibratorPicker",
           "CompareView", "DataBox", "FlagsPicker", "findings_html", "Inspector", "ModelLoader", "PlanStep",
           "ProfileEditor", "Session",
           # the App's tabs, one widget per step
           "StepWidget", "LoadStep", "FlagsStep", "ProfilesStep", "CalibrateStep", "BuildStep", "InspectStep",
           "ExploreStep"]
