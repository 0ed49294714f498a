"""Step 3 widget: optimization profiles (min/opt/max per dynamic input).

Pre-filled by :func:`trtwidgets.core.recipe.profiles.default_profiles` from the model
and the calibration data's shapes; every edit is checked against the model
(:func:`~trtwidgets.core.recipe.profiles.profile_problems`) and problems are shown
naming the input and the dimension. A standing warning says that calibration
runs at the calibration profile's ``opt`` shapes.

:class:`ProfilesStep` is the App's *Profiles* tab: the calibrator picker and this editor,
made for each model the session loads, both writing into the session's recipe.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import ipywidgets as widgets

from ..core.common.errors import RecipeError
from ..core.model.dim_text import dim_text, shape_text
from ..core.recipe.profiles import Profile, ShapeRange, default_profiles, format_shape, parse_shape, profile_problems
from ..core.recipe.recipe import Recipe
from .calibrator import CalibratorPicker
from .html import SEVERITY_COLORS, esc
from .step import StepWidget

_KEYS = ("min", "opt", "max")


def _panel(kind: str, title: str, lines: Sequence[str] = ()) -> str:
    bg, border = SEVERITY_COLORS[kind]
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return (f'<div class="trtw-{kind}" style="background:{bg};border-left:4px solid {border};padding:2px 8px;'
            f'margin:4px 0;font-size:12px"><div>{esc(title)}</div>' + (f"<ul style='margin:2px 0'>{items}</ul>" if items else "")
            + "</div>")


class ProfileEditor(widgets.VBox):
    """Min/opt/max text fields per dynamic input, for one or more profiles.

    Parameters
    ----------
    summary : ModelSummary
        The model's summary (its dynamic inputs get rows).
    profiles : sequence of Profile, optional
        Start from these; by default :func:`default_profiles` of the model and ``data_shapes``.
    data_shapes : mapping, optional
        Input name -> shape (or shapes) of the calibration data, for the defaults.
    calibration_profile : int
        Which profile calibration runs at.

    Attributes
    ----------
    fields : list of dict
        Per profile: input name -> ``{"min": Text, "opt": Text, "max": Text}``.
    message : ipywidgets.HTML
        Validation result (problems name the input and the dimension).
    calibration_warning : ipywidgets.HTML
        Says which shapes calibration runs at.
    """

    def __init__(self, summary, profiles: Optional[Sequence[Profile]] = None,
                 data_shapes: Optional[Mapping[str, object]] = None, calibration_profile: int = 0, **kwargs):
        self.summary = summary
        self.data_shapes = data_shapes
        self.dynamic = [t for t in summary.inputs if t.is_dynamic]
        self.fields: List[Dict[str, Dict[str, widgets.Text]]] = []
        self.message = widgets.HTML()
        self.calibration_warning = widgets.HTML()
        self.calibration_select = widgets.Dropdown(description="Calibrate at", options=[("profile 0", 0)], value=0)
        self.add_button = widgets.Button(description="Add profile", icon="plus")
        self.remove_button = widgets.Button(description="Remove last", icon="minus")
        self.reset_button = widgets.Button(description="Reset to defaults", icon="undo")
        self.profiles_box = widgets.VBox()
        self._callbacks: List[Callable] = []
        self._quiet = False
        controls = widgets.HBox([self.add_button, self.remove_button, self.reset_button, self.calibration_select])
        header = widgets.HTML("<b>Optimization profiles</b>")
        if not self.dynamic:
            header.value += " <span style='color:#5f6368'>all inputs are static: TensorRT needs no profile</span>"
            super().__init__([header], **kwargs)
            return
        super().__init__([header, self.profiles_box, controls, self.calibration_warning, self.message], **kwargs)
        self.add_button.on_click(lambda _: self.add_profile())
        self.remove_button.on_click(lambda _: self.remove_profile())
        self.reset_button.on_click(lambda _: self.set_profiles(default_profiles(self.summary, self.data_shapes)))
        self.calibration_select.observe(self._changed, names="value")
        start = tuple(profiles) if profiles else default_profiles(summary, data_shapes)
        self.set_profiles(start, calibration_profile)

    # -- editing -----------------------------------------------------------------------------

    def set_profiles(self, profiles: Sequence[Profile], calibration_profile: int = 0) -> None:
        """Show ``profiles`` (inputs a profile lacks get empty fields, which the message flags)."""
        self._quiet = True
        try:
            self.fields = []
            for p in profiles:
                self.fields.append(self._make_fields(p))
            self._layout()
            n = len(self.fields)
            self.calibration_select.options = [(f"profile {i}", i) for i in range(n)]
            self.calibration_select.value = min(max(calibration_profile, 0), n - 1) if n else 0
        finally:
            self._quiet = False
        self._changed()

    def add_profile(self) -> None:
        """Append a profile, copying the last one's text."""
        copy = {name: {k: widgets.Text(value=t.value) for k, t in row.items()} for name, row in self.fields[-1].items()} \
            if self.fields else self._make_fields(Profile({}))
        for row in copy.values():
            for t in row.values():
                self._style(t)
                t.observe(self._changed, names="value")
        self.fields.append(copy)
        self._refresh_after_resize()

    def remove_profile(self) -> None:
        """Drop the last profile (one always stays)."""
        if len(self.fields) > 1:
            self.fields.pop()
            self._refresh_after_resize()

    def on_change(self, callback: Callable) -> None:
        """Call ``callback(editor)`` after every edit."""
        self._callbacks.append(callback)

    # -- reading -----------------------------------------------------------------------------

    def _parse(self) -> Tuple[Tuple[Profile, ...], List[str]]:
        profiles, problems = [], []
        for k, row in enumerate(self.fields):
            shapes = {}
            for name, texts in row.items():
                dims = {}
                for key, text in texts.items():
                    try:
                        dims[key] = parse_shape(text.value, f"profile {k}: input {name!r} {key} shape")
                    except RecipeError as err:
                        problems.append(err.what)
                if len(dims) == 3:
                    shapes[name] = ShapeRange(dims["min"], dims["opt"], dims["max"])
            profiles.append(Profile(shapes))
        if not problems:
            problems = profile_problems(profiles, self.summary)
        return tuple(profiles), problems

    @property
    def problems(self) -> List[str]:
        """Every problem of the current text, naming the profile, input and dimension."""
        return self._parse()[1] if self.dynamic else []

    @property
    def value(self) -> dict:
        """The recipe fragment ``{"profiles": (...), "calibration_profile": k}``.

        Raises
        ------
        RecipeError
            If the text does not make valid profiles for the model.
        """
        if not self.dynamic:
            return {"profiles": (), "calibration_profile": 0}
        profiles, problems = self._parse()
        if problems:
            raise RecipeError(f"The optimization profiles are not valid: {problems[0]}", "\n".join(problems),
                              "Fix the shapes named above, or press 'Reset to defaults'.")
        return {"profiles": profiles, "calibration_profile": int(self.calibration_select.value)}

    def to_recipe(self, recipe: Recipe) -> Recipe:
        """``recipe`` with these profiles (raises RecipeError if they are not valid)."""
        return recipe.replace(**self.value)

    # -- internals ---------------------------------------------------------------------------

    @staticmethod
    def _style(text: widgets.Text) -> None:
        text.layout = widgets.Layout(width="150px")
        text.continuous_update = False

    def _make_fields(self, profile: Profile) -> Dict[str, Dict[str, widgets.Text]]:
        row = {}
        for t in self.dynamic:
            rng = profile.shapes.get(t.name)
            texts = {}
            for key in _KEYS:
                text = widgets.Text(value=format_shape(getattr(rng, key)) if rng else "", placeholder="1x3x48x192")
                self._style(text)
                text.observe(self._changed, names="value")
                texts[key] = text
            row[t.name] = texts
        return row

    def _layout(self) -> None:
        boxes = []
        for k, row in enumerate(self.fields):
            lines = [widgets.HTML(f"<b>Profile {k}</b>")]
            for t in self.dynamic:
                dims = ", ".join(f"dim {i} ({dim_text(n, i, len(t.shape), None)})" for i, n in t.dynamic_dims.items())
                label = widgets.HTML(f"<code>{esc(t.name)}</code> <span style='color:#5f6368;font-size:11px'>"
                                     f"{esc(shape_text(t.shape, limit=None))}; dynamic: {esc(dims)}</span>",
                                     layout=widgets.Layout(width="260px"))
                lines.append(widgets.HBox([label] + [widgets.VBox([widgets.HTML(key), row[t.name][key]]) for key in _KEYS]))
            boxes.append(widgets.VBox(lines))
        self.profiles_box.children = boxes

    def _refresh_after_resize(self) -> None:
        self._quiet = True
        try:
            self._layout()
            keep = self.calibration_select.value
            self.calibration_select.options = [(f"profile {i}", i) for i in range(len(self.fields))]
            self.calibration_select.value = keep if keep < len(self.fields) else 0
        finally:
            self._quiet = False
        self._changed()

    def _changed(self, change=None) -> None:
        if self._quiet:
            return
        profiles, problems = self._parse()
        k = int(self.calibration_select.value or 0)
        with self.hold_sync():
            if problems:
                self.message.value = _panel("error", f"{len(problems)} problem(s):", problems)
            else:
                self.message.value = _panel("info", "The profiles fit the model.")
            opt = profiles[k].opt_shapes() if k < len(profiles) else {}
            shapes = ", ".join(f"{name} {format_shape(s)}" for name, s in opt.items()) or "(not set)"
            self.calibration_warning.value = _panel(
                "warning", f"INT8 calibration runs at the opt shapes of profile {k}: {shapes}. Choose opt like your real "
                "data: ranges measured at other shapes may not fit, and calibration samples are padded, cut or "
                "resized to opt.")
        for cb in self._callbacks:
            cb(self)


class ProfilesStep(StepWidget):
    """The App's *Profiles* tab: how INT8 ranges are obtained, and the optimization profiles.

    The :class:`ProfileEditor` is made for each model once the session's recipe is that
    model's (the previous model's editor never receives another model's profiles).

    Parameters
    ----------
    session : Session
    features : TrtFeatures, optional
        What TensorRT supports (default: the installed TensorRT's).

    Attributes
    ----------
    calibrator : CalibratorPicker
    profiles : ProfileEditor or None
        None until a model is loaded.
    profiles_box : ipywidgets.VBox
        Holds :attr:`profiles` (or a note asking for a model).
    """

    def __init__(self, session, features=None, **kwargs):
        self.calibrator = CalibratorPicker(features)
        self.profiles: Optional[ProfileEditor] = None
        self._profiles_sha: Optional[str] = None
        self.profiles_box = widgets.VBox([widgets.HTML("<i>Load a model first: its dynamic inputs get profiles.</i>")])
        super().__init__(session, [self.calibrator, self.profiles_box], **kwargs)
        self.calibrator.on_change(lambda _: self.apply(self.calibrator))
        session.observe(self._on_model, names=["model"])
        session.observe(self._on_recipe, names=["recipe"])
        self._on_recipe()

    def _on_model(self, change) -> None:
        model = change["new"]
        if model is not None and model.sha256 != self._profiles_sha:
            self.profiles = None  # a new editor comes with this model's recipe (see _on_recipe)
        self._on_recipe()

    def _on_recipe(self, change=None) -> None:
        s = self.session
        recipe = s.recipe
        if not hasattr(recipe, "flags"):
            return
        with self.quietly():
            self.calibrator.set_from_recipe(recipe)
            if self.profiles is None:
                self._make_editor(recipe)
            elif self.profiles.fields:
                current = self.profiles.value if not self.profiles.problems else None
                if current is None or tuple(current.get("profiles", ())) != tuple(recipe.profiles):
                    self.profiles.set_profiles(recipe.profiles, recipe.calibration_profile)

    def _make_editor(self, recipe) -> None:
        model = self.session.model
        if model is None or recipe is None or recipe.model_sha256 != model.sha256:
            return
        self.profiles = ProfileEditor(model.summary, profiles=recipe.profiles,
                                      calibration_profile=recipe.calibration_profile)
        self._profiles_sha = model.sha256
        self.profiles.on_change(lambda _: self.apply(self.profiles))
        self.profiles_box.children = [self.profiles]
