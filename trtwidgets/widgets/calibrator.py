"""Step 3 widget: how INT8 ranges are obtained.

Offers TensorRT's calibrators where the installed TensorRT has them, the
toolkit's range methods handed to TensorRT through a calibration cache, or
none; explains what is absent (TensorRT 11 has no calibrators: export a Q/DQ
model from the toolkit's calibration instead).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

import ipywidgets as widgets

from ..core.common.errors import RecipeError
from ..core.recipe.recipe import TOOLKIT_METHODS, CalibratorSpec, Recipe
from .explorer_parts import export_methods
from .flags import note_html, offline_features, resolve_features, unavailable_note
from .html import disclosure, error_html

#: TensorRT calibrator short name -> (recipe kind, label).
TRT_CALIBRATORS = {
    "entropy2": ("trt_entropy2", "TensorRT Entropy2 (IInt8EntropyCalibrator2)"),
    "minmax": ("trt_minmax", "TensorRT MinMax (IInt8MinMaxCalibrator)"),
    "entropy": ("trt_entropy", "TensorRT Entropy (IInt8EntropyCalibrator)"),
    "legacy": ("trt_legacy", "TensorRT Legacy (IInt8LegacyCalibrator)"),
}
#: Toolkit method -> label (a method without one is offered as "Toolkit: <method>, via cache").
TOOLKIT_LABELS = {
    "auto": "Toolkit: auto (each tensor's method from its statistics and role), via cache",
    "entropy": "Toolkit: entropy (KL divergence), via cache",
    "max": "Toolkit: max |x|, via cache",
    "percentile": "Toolkit: percentile of |x|, via cache",
    "mse": "Toolkit: minimum MSE, via cache",
}
_CACHE_ONLY = "toolkit:cache"


class CalibratorPicker(widgets.VBox):
    """A choice of calibrator, with its percentile and cache path.

    Parameters
    ----------
    features : TrtFeatures, optional
        What TensorRT supports; by default the installed TensorRT's.
    recipe : Recipe, optional
        Pre-select its calibrator (amax overrides are kept as they are).

    Attributes
    ----------
    choice : ipywidgets.Dropdown
        Values: ``"none"``, ``"trt_entropy2"``..., ``"toolkit:<method>"``, ``"toolkit:cache"``.
    percentile : ipywidgets.FloatText
    cache_path : ipywidgets.Text
    note : ipywidgets.HTML
        Why missing calibrators are missing, and deprecations.
    """

    def __init__(self, features=None, recipe: Optional[Recipe] = None, **kwargs):
        self.features = offline_features(resolve_features(features))
        f = self.features
        deprecated = " (deprecated)" if "calibrators" in f.deprecated else ""
        options = [("None (FP only, or a Q/DQ model)", "none")]
        options += [(TRT_CALIBRATORS[c][1] + deprecated, TRT_CALIBRATORS[c][0]) for c in TRT_CALIBRATORS if c in f.calibrators]
        if f.calibrators:
            # The toolkit's ranges reach TensorRT as a calibration cache read by a calibrator, so they need one too.
            # The calibration module's methods (that a recipe can name), in its order.
            options += [(TOOLKIT_LABELS.get(m, f"Toolkit: {m}, via cache"), f"toolkit:{m}")
                        for m in export_methods() if m in TOOLKIT_METHODS]
            options.append(("Toolkit: an existing calibration cache file", _CACHE_ONLY))
        self.choice = widgets.Dropdown(options=options, value="none", description="Calibrator",
                                       layout=widgets.Layout(width="480px"))
        self.percentile = widgets.BoundedFloatText(value=99.99, min=0.0001, max=100.0, step=0.01, description="Percentile")
        self.cache_path = widgets.Text(value="", placeholder="calibration.cache", description="Cache file",
                                       layout=widgets.Layout(width="480px"))
        self.note = widgets.HTML(self._note_html())
        self.error = widgets.HTML()
        self._overrides: Dict[str, float] = {}
        self._callbacks: List[Callable] = []
        super().__init__([widgets.HTML("<b>Calibration</b>"), self.choice, self.percentile, self.cache_path,
                          self.error, self.note], **kwargs)
        if recipe is not None:
            self.set_from_recipe(recipe)
        for w in (self.choice, self.percentile, self.cache_path):
            w.observe(self._changed, names="value")
        self._update_visibility()

    @property
    def offered(self) -> tuple:
        """The values of the choices offered."""
        return tuple(v for _, v in self.choice.options)

    @property
    def value(self) -> dict:
        """The recipe fragment ``{"calibrator": CalibratorSpec(...)}`` (RecipeError if incomplete)."""
        choice = self.choice.value
        cache = self.cache_path.value.strip() or None
        if choice.startswith("toolkit:"):
            method = None if choice == _CACHE_ONLY else choice.split(":", 1)[1]
            spec = CalibratorSpec(kind="toolkit", method=method, percentile=float(self.percentile.value), cache_path=cache,
                                  amax_overrides=dict(self._overrides))
        else:
            spec = CalibratorSpec(kind=choice, cache_path=cache if choice != "none" else None,
                                  amax_overrides=dict(self._overrides) if choice != "none" else {})
        return {"calibrator": spec}

    def to_recipe(self, recipe: Recipe) -> Recipe:
        """``recipe`` with this calibrator."""
        return recipe.replace(**self.value)

    def set_from_recipe(self, recipe: Recipe) -> None:
        """Show ``recipe``'s calibrator; one this TensorRT lacks is named in a warning and not selected."""
        cal = recipe.calibrator
        value = cal.kind if cal.kind != "toolkit" else (f"toolkit:{cal.method}" if cal.method else _CACHE_ONLY)
        with self.hold_sync():
            self._overrides = dict(cal.amax_overrides)
            self.percentile.value = cal.percentile
            self.cache_path.value = cal.cache_path or ""
            if value in self.offered:
                self.choice.value = value
                self.error.value = ""
            else:
                self.choice.value = "none"
                self.error.value = note_html(f"The recipe's calibrator is not available in TensorRT {self.features.version}:",
                                         {value: self.features.explain("calibrators") or ""}, "trtw-warning", "#d93025")
        self._update_visibility()

    def on_change(self, callback: Callable) -> None:
        """Call ``callback(picker)`` whenever a choice changes."""
        self._callbacks.append(callback)

    def _update_visibility(self) -> None:
        choice = self.choice.value
        self.percentile.layout.display = "" if choice == "toolkit:percentile" else "none"
        self.cache_path.layout.display = "none" if choice == "none" else ""

    def _changed(self, change=None) -> None:
        self._update_visibility()
        try:
            _ = self.value  # validates; RecipeError says what is wrong
            self.error.value = ""
        except RecipeError as err:
            self.error.value = error_html(err)
        for cb in self._callbacks:
            cb(self)

    def _note_html(self) -> str:
        f = self.features
        absent = {}
        if not f.calibrators:
            absent["TensorRT calibrators"] = f.explanations.get("calibrators", "")
            absent["toolkit ranges via cache"] = (
                "A calibration cache is read through a TensorRT calibrator, which this TensorRT lacks: export the "
                "toolkit's ranges as a Q/DQ ONNX model instead.")
        else:
            missing = [TRT_CALIBRATORS[c][1] for c in TRT_CALIBRATORS if c not in f.calibrators]
            if missing:
                absent[", ".join(missing)] = f"Not present in TensorRT {f.version}."
        deprecated = {"TensorRT calibrators": f.deprecated["calibrators"]} if "calibrators" in f.deprecated else {}
        how = ("<div style='font-size:12px'>" + disclosure(
            "TensorRT's calibrators or the toolkit's?",
            "<span style='color:#5f6368'>TensorRT's calibrators run the calibration data through the network during "
            "the build, at the calibration profile's opt shapes. The toolkit's methods use the statistics collected "
            "on the CPU and hand TensorRT a calibration cache, so no batches are needed at build time.</span>")
               + "</div>") if f.calibrators else ""
        return (unavailable_note(f) + how
                + note_html("Not offered by this TensorRT:", absent, "trtw-absent", "#1a73e8")
                + note_html("Deprecated in this TensorRT:", deprecated, "trtw-deprecated", "#e37400"))
