"""Step 2 widget: precision flags and precision constraints.

Offers only the flags and constraint modes that the installed TensorRT has
(:func:`trtwidgets.trt.features.features`) and explains the others in a note:
on TensorRT 11 there are no FP16/INT8/FP8/BF16 flags because networks are
always strongly typed, so precision comes from the model. :class:`FlagsStep` is the
App's *Flags* tab: the picker, writing into the session's recipe, and the recipe's problems.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

import ipywidgets as widgets

from ..core.recipe.recipe import FLAGS, Recipe
from .app_tabs import problems_html
from .html import disclosure, esc
from .step import StepWidget

#: Label shown beside each flag checkbox.
FLAG_LABELS = {"fp16": "FP16", "bf16": "BF16", "int8": "INT8", "fp8": "FP8", "tf32": "TF32"}
CONSTRAINT_LABELS = {"none": "none", "obey": "obey (fail if impossible)", "prefer": "prefer (fall back with a warning)"}


def resolve_features(features=None):
    """``features`` or those of the installed TensorRT (never raises without TensorRT)."""
    if features is not None:
        return features
    from ..trt.features import features as read_features

    return read_features()


def offline_features(features):
    """What to offer when TensorRT is absent: the TensorRT <= 10 choices, so a recipe can be made here and built elsewhere."""
    if features.available:
        return features
    import dataclasses

    return dataclasses.replace(features, precision_flags=FLAGS, precision_constraints=True,
                               constraint_modes=("obey", "prefer"), layer_precision=True,
                               calibrators=("entropy2", "minmax", "entropy", "legacy"))


def note_html(title: str, items: Dict[str, str], css: str, color: str) -> str:
    """An HTML note box: ``title`` over a list of ``name: reason`` items (escaped); empty for no items."""
    if not items:
        return ""
    rows = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in items.items())
    return (f'<div class="{css}" style="border-left:4px solid {color};padding:2px 8px;margin:4px 0;font-size:12px">'
            f"<div><b>{esc(title)}</b></div><ul style='margin:2px 0'>{rows}</ul></div>")


def unavailable_note(features) -> str:
    """The 'TensorRT is not installed' banner, or '' when it is."""
    if features.available:
        return ""
    # One line; the install details (wheels, index, Python versions) only for who opens them.
    return ('<div class="trtw-no-trt" style="border-left:4px solid #e37400;padding:2px 8px;margin:4px 0;font-size:12px">'
            "<b>No TensorRT here</b>: these are TensorRT 8.6/10's choices; the recipe is checked when it is built "
            "on a GPU machine." + disclosure("How to install TensorRT", esc(features.explanations.get("build", "")))
            + "</div>")


class FlagsPicker(widgets.VBox):
    """Checkboxes for the precision flags TensorRT has, and a precision-constraints choice.

    Parameters
    ----------
    features : TrtFeatures, optional
        What TensorRT supports; by default the installed TensorRT's.
    recipe : Recipe, optional
        Pre-select its flags and constraints.

    Attributes
    ----------
    checkboxes : dict
        Flag name -> Checkbox, only for flags that exist.
    constraints : ipywidgets.ToggleButtons
        ``"none"`` plus the constraint modes that exist.
    note : ipywidgets.HTML
        Why the missing flags are missing, and what to do.
    """

    def __init__(self, features=None, recipe: Optional[Recipe] = None, **kwargs):
        self.features = offline_features(resolve_features(features))
        f = self.features
        self.checkboxes: Dict[str, widgets.Checkbox] = {
            name: widgets.Checkbox(value=False, description=FLAG_LABELS[name], indent=False,
                                   layout=widgets.Layout(width="auto"))
            for name in FLAGS if name in f.precision_flags}
        modes = ("none",) + tuple(m for m in ("obey", "prefer") if m in f.constraint_modes)
        self._modes = modes
        self.constraints = widgets.ToggleButtons(options=[(CONSTRAINT_LABELS[m], m) for m in modes], value="none",
                                                 description="Constraints", disabled=len(modes) == 1)
        self.header = widgets.HTML(self._header_html())
        self.note = widgets.HTML(self._note_html())
        self.warning = widgets.HTML()
        self._callbacks: List[Callable] = []
        rows = [self.header, widgets.HBox(list(self.checkboxes.values()))]
        if len(modes) > 1:
            rows.append(self.constraints)
        super().__init__(rows + [self.warning, self.note], **kwargs)
        if recipe is not None:
            self.set_from_recipe(recipe)
        for w in list(self.checkboxes.values()) + [self.constraints]:
            w.observe(self._changed, names="value")

    # -- state -------------------------------------------------------------------------------

    @property
    def offered_flags(self) -> tuple:
        """The flags this picker offers (those TensorRT has)."""
        return tuple(self.checkboxes)

    @property
    def value(self) -> dict:
        """The recipe fragment: ``{"flags": (...), "precision_constraints": "..."}``."""
        return {"flags": tuple(n for n, cb in self.checkboxes.items() if cb.value),
                "precision_constraints": self.constraints.value}

    def to_recipe(self, recipe: Recipe) -> Recipe:
        """``recipe`` with this picker's flags and constraints."""
        return recipe.replace(**self.value)

    def set_from_recipe(self, recipe: Recipe) -> None:
        """Show ``recipe``'s choices; ones this TensorRT lacks are named in a warning, not dropped silently."""
        missing = {f: self.features.explain(f) or "" for f in recipe.flags if f not in self.checkboxes}
        with self.hold_sync():
            for name, cb in self.checkboxes.items():
                cb.value = name in recipe.flags
            if recipe.precision_constraints in self._modes:
                self.constraints.value = recipe.precision_constraints
            else:
                missing[f"constraints={recipe.precision_constraints}"] = self.features.explain("precision_constraints") or ""
            self.warning.value = note_html(
                f"The recipe asks for what TensorRT {self.features.version} lacks; it is left out here:",
                missing, "trtw-warning", "#d93025")

    def on_change(self, callback: Callable) -> None:
        """Call ``callback(picker)`` whenever a choice changes."""
        self._callbacks.append(callback)

    def _changed(self, change=None):
        for cb in self._callbacks:
            cb(self)

    # -- rendering ---------------------------------------------------------------------------

    def _header_html(self) -> str:
        f = self.features
        if not f.available:
            return "<b>Precision flags</b>"
        typing = (" · networks are always strongly typed: precision comes from the model" if f.strongly_typed_only
                  else " · strong typing available (optional)" if f.strong_typing else "")
        return f"<b>Precision flags</b> <span style='color:#5f6368'>TensorRT {esc(f.version)}{esc(typing)}</span>"

    def _note_html(self) -> str:
        f = self.features
        absent = {FLAG_LABELS[n]: f.explanations.get(n, "") for n in FLAGS if n not in f.precision_flags}
        if not f.precision_constraints:
            absent["precision constraints"] = f.explanations.get("precision_constraints", "")
        deprecated = {FLAG_LABELS.get(k, k.replace("_", " ")): v for k, v in f.deprecated.items()
                      if k in FLAGS or k == "precision_constraints"}
        return (unavailable_note(f)
                + note_html("Not offered by this TensorRT:", absent, "trtw-absent", "#1a73e8")
                + note_html("Deprecated in this TensorRT:", deprecated, "trtw-deprecated", "#e37400"))


class FlagsStep(StepWidget):
    """The App's *Flags* tab: a :class:`FlagsPicker` on the session's recipe, and the recipe's problems.

    A change of the picker replaces the session's recipe (see :meth:`StepWidget.apply`); a new
    recipe in the session (loaded, or another model) is shown in the picker.

    Parameters
    ----------
    session : Session
    features : TrtFeatures, optional
        What TensorRT supports (default: the installed TensorRT's).

    Attributes
    ----------
    picker : FlagsPicker
    problems : ipywidgets.HTML
        What is wrong with the recipe as it stands (:attr:`Session.problems`), '' when nothing.
    """

    def __init__(self, session, features=None, **kwargs):
        self.picker = FlagsPicker(features)
        self.problems = widgets.HTML()
        super().__init__(session, [self.picker, self.problems], **kwargs)
        self.picker.on_change(lambda _: self.apply(self.picker))
        session.observe(self._on_recipe, names=["recipe"])
        session.observe(self._on_problems, names=["problems"])
        self._on_recipe()
        self._on_problems()

    def _on_recipe(self, change=None) -> None:
        recipe = self.session.recipe
        if hasattr(recipe, "flags"):
            with self.quietly():
                self.picker.set_from_recipe(recipe)

    def _on_problems(self, change=None) -> None:
        self.problems.value = problems_html(self.session.problems or ())
