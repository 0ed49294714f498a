"""Thin ipywidgets layer: one module per notebook step, sharing a :class:`Session`.

Widgets render what :mod:`trtwidgets.core` computes and never compute
themselves; model-provided names are escaped by :mod:`trtwidgets.widgets.html`.
"""

from __future__ import annotations

from .app import App, quickstart
from .compare import CompareView
from .inspector import Inspector
from .model_loader import ModelLoader
from .session import Session

__all__ = ["App", "quickstart", "CompareView", "Inspector", "ModelLoader", "Session"]
