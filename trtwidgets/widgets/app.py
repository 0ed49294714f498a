"""The app: every step in one widget, in order, around one :class:`Session`.

``App(model_path=..., data=..., held_back=...)`` shows tabs for the steps: load the model,
choose the precision flags, the calibrator and the optimization profiles,
calibrate (collect activation statistics), plan where INT8 pays, build (or load
a saved build when TensorRT is absent), inspect the engine's layer precisions,
and explore the calibration histograms. Sensible defaults are filled in at every
step (FP16+INT8, the toolkit's calibration with the calibration module's default method, profiles
at the shapes of the calibration data, the labelled text lines for the bundled demo), so pressing
through the steps goes from a model path to a layer table and histograms.

Each tab is a step widget that owns its controls and handlers and talks to the
session (:class:`~trtwidgets.widgets.model_loader.LoadStep`,
:class:`~trtwidgets.widgets.flags.FlagsStep`, :class:`~trtwidgets.widgets.profiles.ProfilesStep`,
:class:`~trtwidgets.widgets.calib_data.CalibrateStep`, :class:`~trtwidgets.widgets.plan_step.PlanStep`,
:class:`~trtwidgets.widgets.build_panel.BuildStep`, :class:`~trtwidgets.widgets.inspector.InspectStep`,
:class:`~trtwidgets.widgets.explore_step.ExploreStep`). The app composes them and wires
the few events that cross tabs: one error panel, a new model's default recipe, the
inspected build, the open tab. When an earlier step changes, the banner at the top
names the later results that are now stale, and why (see :attr:`Session.stale`).
:meth:`App.save_html` writes the whole state as one page to share.

The App's own surface is small: the session, the steps (``app.steps`` and ``app.<key>_step``), the
verbs (:meth:`App.load`, :meth:`App.calibrate`, :meth:`App.plan` ...) and five parts the notebooks
use (:attr:`App.flags`, :attr:`App.build_panel`, :attr:`App.inspector`, :attr:`App.inspect_choice`,
:attr:`App.explorer`). Everything else is a step's own attribute (``app.calibrate_step.data_path``).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import ipywidgets as widgets
import traitlets

from ..core.common.errors import UserError
from . import app_tabs
from .app_tabs import (BUILD, CALIBRATE, CALIBRATOR, EXPLORE, FLAGS, INSPECT, LOAD, PLAN, STEP_KEYS, STEPS,
                       stale_html)
from .build_panel import BuildStep
from .calib_data import CalibrateStep
from .explore_step import QDQ_NAME, ExploreStep
from .explorer_parts import default_method
from .flags import FlagsStep
from .html import error_html, esc
from .inspector import InspectStep, kept_float_for
from .model_loader import LoadStep
from .plan_step import PlanStep
from .profiles import ProfilesStep
from .session import Session
from .step import StepWidget

__all__ = ["App", "quickstart", "STEPS", "STEP_KEYS", "LOAD", "FLAGS", "CALIBRATOR", "CALIBRATE", "PLAN", "BUILD",
           "INSPECT", "EXPLORE", "QDQ_NAME", "stale_html"]

_STALE_TABS = {"stats": CALIBRATE, "ranges": CALIBRATE, "plan": PLAN}
#: Histograms in the HTML page: this many tensors on which the range methods disagree most.
HTML_TOP = 6


def _chosen_methods(calibration) -> Dict[str, str]:
    """Tensor -> the method ``auto`` exports for it (empty for one method everywhere)."""
    return {name: c.method for name, c in calibration.choices.items()}


class App(widgets.VBox):
    """All steps, from a model path to a layer table and histograms.

    Parameters
    ----------
    session : Session, optional
        Share an existing session (default: a new one).
    model_path : str, optional
        Loaded at once (``trtwidgets.demo.MODEL_PATH`` for the bundled demo).
    data : str, optional
        Calibration data (a folder of samples, or ``"demo"``): the profiles' open dimensions
        take its shapes (see :meth:`use_data`).
    held_back : str, optional
        A folder of held-back samples (see :meth:`use_held_back`).
    out_dir : str, optional
        Where builds, the calibration cache and the HTML page are written (default ``./trtwidgets-out``).
    features : TrtFeatures, optional
        What TensorRT supports (default: the installed TensorRT's).
    client : distributed.Client, optional
        The Calibrate and Plan steps run on its Dask workers (``session.client``); None: in the kernel.

    Attributes
    ----------
    session : Session
    tabs : ipywidgets.Tab
        One tab per step, in the order of :data:`STEP_KEYS` (index constants ``LOAD`` ... ``EXPLORE``).
    steps : dict
        Step key -> its widget (the tab's content), also attributes: ``load_step``, ``flags_step``,
        ``profiles_step``, ``calibrate_step``, ``plan_step``, ``build_step``, ``inspect_step``, ``explore_step``.
    banner, error : ipywidgets.HTML
        What is out of date (and why); the last error of any step.
    html_path, save_html_button, html_status
        Where :meth:`save_html` writes the page, and what it wrote.
    """

    @property
    def flags(self):
        """The Flags step's picker (``app.flags.checkboxes["int8"].value = False`` turns INT8 off)."""
        return self.flags_step.picker

    @property
    def build_panel(self):
        """The Build step's panel (``out_dir``, ``start(wait=True)``, ``phase``)."""
        return self.build_step.build_panel

    @property
    def inspector(self):
        """The Inspect step's inspector (``table``: the layer table of the build shown)."""
        return self.inspect_step.inspector

    @property
    def inspect_choice(self):
        """The Inspect step's build dropdown (``value``: the label of the build shown)."""
        return self.inspect_step.choice

    @property
    def explorer(self):
        """The calibration explorer, once its tab was opened with statistics (else None; see :meth:`explore`)."""
        return self.explore_step.explorer

    def __init__(self, session: Optional[Session] = None, model_path: Any = None, out_dir: Optional[str] = None,
                 features=None, data: Any = None, held_back: Any = None, client=None, **kwargs):
        from .flags import offline_features, resolve_features

        self.session = session if session is not None else Session()
        if client is not None:
            self.session.client = client
        self.out_dir = out_dir or os.path.join(os.getcwd(), "trtwidgets-out")
        self.features = offline_features(resolve_features(features))
        s = self.session
        self.banner = widgets.HTML()
        self.error = widgets.HTML()
        self.load_step = LoadStep(s, path=str(model_path or ""), out_dir=self.out_dir)
        self.flags_step = FlagsStep(s, self.features)
        self.profiles_step = ProfilesStep(s, self.features)
        self.calibrate_step = CalibrateStep(s)
        self.plan_step = PlanStep(s, out_dir=os.path.join(self.out_dir, "plan"))
        self.build_step = BuildStep(s)
        self.inspect_step = InspectStep(s, trt_available=self.features.available,
                                        out_dir=self.out_dir)
        self.explore_step = ExploreStep(s, out_dir=self.out_dir)
        self.steps = dict(zip(STEP_KEYS, (self.load_step, self.flags_step, self.profiles_step, self.calibrate_step,
                                          self.plan_step, self.build_step, self.inspect_step, self.explore_step)))
        self.tabs = widgets.Tab(children=list(self.steps.values()))
        for i, title in enumerate(STEPS):
            self.tabs.set_title(i, title)
        self.html_path = widgets.Text(placeholder="analysis.html", description="Share",
                                      layout=widgets.Layout(width="420px"))
        self.save_html_button = widgets.Button(description="Save HTML page", icon="share",
                                               tooltip="write figures, tables and the recipe as one page that "
                                                       "opens offline")
        self.html_status = widgets.HTML()
        super().__init__([widgets.HTML(app_tabs.TAB_CSS + app_tabs.HEADER), self.banner, self.error, self.tabs,
                          widgets.HBox([self.html_path, self.save_html_button]), self.html_status], **kwargs)
        self.add_class("trtw-app")
        self._wire()
        if s.model is not None:
            self._on_model({"new": s.model})
        elif model_path:
            self.load_step.load()
        if data is not None and s.model is not None:
            self.use_data(data)
        if held_back is not None and s.model is not None:
            self.use_held_back(held_back)
        self._on_stale({"new": s.stale})

    def _wire(self) -> None:
        """The events that cross tabs; each step handles its own."""
        for step in self.steps.values():
            if isinstance(step, StepWidget):
                step.on_error(self._show_error)
        # A recipe file names its data: the data box shows what the data set (after the recipe is in).
        self.load_step.on_recipe_loaded(self.calibrate_step.render_data)
        # "Use its recipe" in the Build tab takes the recipe of the build the Inspect tab shows.
        traitlets.dlink((self.inspect_step.choice, "value"), (self.build_step, "inspected"))
        # A saved build loaded in the Inspect tab (no GPU here) is shown like one loaded in the Build tab.
        self.inspect_step.on_load_build(self.build_step.load_saved_build)
        # The explorer holds three figures: made when its tab is first opened, not on every calibration.
        self.tabs.observe(self._on_tab, names=["selected_index"])
        self.save_html_button.on_click(lambda _: self.save_html())
        self.session.observe(self._on_model, names=["model"])
        self.session.observe(self._on_stale, names=["stale"])

    # ------------------------------------------------------------------ steps (also for scripts)

    def load(self, path: Any = None) -> bool:
        """Step 1: load a model (default: the path in the loader)."""
        return self.load_step.load(None if path is None else str(path))

    def use_data(self, data: Any) -> bool:
        """Calibrate on ``data`` (a folder, ``"demo"`` or a spec): open profile dims take its shapes, said in a note.

        Where samples differ from the opt shape, the data box offers pad / truncate / resize.
        Unreadable data is refused with a clear error; the recipe stays.
        """
        return self.calibrate_step.use_data(data)

    def use_held_back(self, folder: Any) -> bool:
        """Hold back the samples of ``folder`` ('' for none): the Plan step's accuracy and the explorer's export
        check run on them (as ``trtwidgets plan --held-back``). An unreadable folder is refused with a clear error."""
        return self.calibrate_step.use_held_back(folder)

    def calibrate(self, data: Any = None, max_samples: Optional[int] = None, progress: bool = True) -> bool:
        """Step 4: collect statistics with the data in the data field (or ``data``)."""
        return self.calibrate_step.calibrate(data=data, max_samples=max_samples, progress=progress)

    def plan(self, wait: bool = True) -> bool:
        """Step 5: plan with the session's calibration and held-back data (``wait=False``: in the background, as
        the *Plan* button does); True when a plan (maybe interrupted) is shown."""
        return self.plan_step.run(wait=wait)

    def load_saved_build(self, source: Any = None) -> bool:
        """Step 6 without TensorRT: add a saved build (name from the list, folder, or *.graph.json)."""
        return self.build_step.load_saved_build(source)

    def use_build_recipe(self, label: Optional[str] = None) -> bool:
        """Continue from a build's own recipe (default: the build shown in the inspector)."""
        return self.build_step.use_build_recipe(label)

    def inspect(self, label: Optional[str] = None) -> bool:
        """Step 7: show a build's layer table and precision chart (default: the latest build)."""
        return self.inspect_step.inspect(label)

    def explore(self):
        """Step 8: the calibration explorer of the session's statistics (made on first use)."""
        explorer = self.explore_step.explore()
        if explorer is not None:
            self.tabs.selected_index = EXPLORE
        return explorer

    def save_recipe(self, path: Optional[str] = None) -> Optional[str]:
        """Save the session's recipe as JSON (default: the path in the recipe field, else ``out_dir/recipe.json``)."""
        return self.load_step.save_recipe(path)

    def load_recipe(self, path: Optional[str] = None) -> bool:
        """Load a recipe JSON (and its model); nothing is lost when it is bad."""
        return self.load_step.load_recipe(path)

    def save_html(self, path: Optional[str] = None) -> Optional[str]:
        """Write the app's state as one self-contained HTML page, to share or keep.

        The page holds the model summary and lint findings, what is out of date, the ranges
        table and calibration histograms, the plan (if one was made), the precision summary,
        chart and layer table of every build in the session, and the recipe as JSON. plotly.js
        is embedded, so it opens offline; every name from the model is escaped. Nothing needs
        a build or TensorRT: the page holds what the session has.

        Parameters
        ----------
        path : str, optional
            Default: the path in the *Share* field, else ``out_dir/analysis.html``.

        Returns
        -------
        str or None
            The path written, or None (the error panel says why; nothing is lost).
        """
        from ..core.common.atomic import write_text_atomic
        from ..plots.report_sections import analysis_html

        path = path or self.html_path.value.strip() or os.path.join(self.out_dir, "analysis.html")
        if os.path.splitext(path)[1].lower() not in (".html", ".htm"):
            self._show_error(UserError(f"{path} is not an .html file.", "The page is HTML; another suffix would "
                                       "open in the wrong program.", "Give a path ending in .html."))
            return None
        try:
            doc = analysis_html(**self._page_content())
            written = str(write_text_atomic(path, doc))
        except UserError as err:
            self._show_error(err)
            return None
        except OSError as err:
            self._show_error(UserError(f"Could not write the page to {path}.", f"{err.strerror or err}.",
                                       "Choose a folder you can write to; nothing was changed."))
            return None
        self._show_error("")
        self.html_status.value = (f"page written to <code>{esc(written)}</code> "
                                  f"({os.path.getsize(written) / 1e6:.1f} MB, opens offline)")
        return written

    def _page_content(self) -> dict:
        """What the session holds, as the arguments of :func:`~trtwidgets.plots.report_sections.analysis_html`."""
        from ..plots.report_sections import build_tables

        s = self.session
        model, recipe = s.model, s.recipe
        steps = [{"step": "model", "status": "loaded" if model is not None else "missing",
                  "detail": str(model.path) if model is not None else "load a model in step 1"}]
        calibration = None
        c = s.calibration
        if c is not None and c.ranges:
            explorer = self.explore_step.explorer
            calibration = dict(stats=c.stats, ranges=c.ranges, method=c.method, percentile=c.percentile,
                               overrides=dict(c.overrides), data=c.data, top=HTML_TOP,
                               first=[explorer.tensor] if explorer is not None and explorer.tensor else [],
                               chosen=_chosen_methods(c))
        steps.append({"step": "calibrate", "status": "done" if calibration else "not yet",
                      "detail": f"{s.stats.samples} samples" if calibration else "collect statistics in step 4"})
        plan = s.plan
        steps.append({"step": "plan", "status": "done" if plan is not None else "not yet",
                      "detail": str(plan.reason) if plan is not None else "run the planner in step 5"})
        builds = {label: s.build_named(label) for label in s.graphs}
        tables, errors = build_tables(builds, {label: {"kept_float": kept_float_for(s, b)}
                                               for label, b in builds.items()})
        steps.append({"step": "builds", "status": f"{len(tables)} shown" if builds else "none",
                      "detail": ", ".join(builds) or "build in step 6, or load a saved build"})
        name = os.path.basename(str(model.path)) if model is not None else "no model"
        return dict(title=f"trtwidgets analysis: {name}", summary=model.summary if model is not None else None,
                    findings=s.findings, recipe=recipe, calibration=calibration, plan=plan, tables=tables,
                    build_errors=errors, stale=s.stale, steps=steps)

    # ------------------------------------------------------------------ session -> app

    def _on_model(self, change) -> None:
        model = change["new"]
        if model is None:
            return
        s = self.session
        if s.recipe is None or s.recipe.model_sha256 != model.sha256:
            recipe = self._default_recipe()
            if recipe is not None:
                s.set_recipe(recipe)  # every step shows it (they observe the recipe)
        self.calibrate_step.render_data()  # the previous model's data shapes are gone

    def _default_recipe(self):
        """FP16+INT8 with the toolkit's ranges (the calibration's default method), and the labelled text lines for
        the bundled demo."""
        import dataclasses

        from ..core.calibrate.step import calibration_source
        from ..core.recipe.recipe import CalibratorSpec

        s = self.session
        previous = s.recipe if hasattr(s.recipe, "flags") else None
        if previous is not None:
            # Another model: keep the user's choices, not what belonged to the old model
            # (profiles, amax overrides of its tensors, its calibration cache).
            kw = {"flags": previous.flags, "precision_constraints": previous.precision_constraints,
                  "calibrator": dataclasses.replace(previous.calibrator, amax_overrides={}, cache_path=None)}
        else:
            flags = tuple(f for f in ("fp16", "int8") if f in self.flags.offered_flags)
            kw = {"flags": flags}
            method = default_method()
            if "int8" in flags and f"toolkit:{method}" in self.profiles_step.calibrator.offered:
                kw["calibrator"] = CalibratorSpec(kind="toolkit", method=method)
        try:
            spec, _ = calibration_source(None, s.model)
            kw["calibration_data"] = spec
        except UserError:
            pass  # the calibrate step asks for data
        try:
            return s.default_recipe(**kw)
        except UserError as err:
            self._show_error(err)
            return None

    def _on_stale(self, change) -> None:
        stale = change["new"] or {}
        self.banner.value = stale_html(stale)
        marks = set()
        for key in stale:
            marks.add(_STALE_TABS.get(key, INSPECT))
            if key in ("stats", "ranges"):
                marks.add(EXPLORE)
        for i, title in enumerate(STEPS):
            self.tabs.set_title(i, title + (" (stale)" if i in marks else ""))

    def _on_tab(self, change) -> None:
        self.explore_step.active = change["new"] == EXPLORE

    def _show_error(self, err) -> None:
        self.error.value = error_html(err) if err else ""

def quickstart(model_path: Any = None, saved_build: Optional[str] = "auto", calibrate: bool = True,
               max_samples: Optional[int] = None, data: Any = None) -> App:
    """An :class:`App` on a model (default: the bundled demo), walked through the default path.

    Loads the model (with ``data``, its shapes fill the profiles), calibrates (the bundled
    crops for the demo), loads a saved build (``"auto"``: the first saved INT8 build of this
    model, when the repository's are present; the session continues from its recipe when it
    was made with other settings) and opens the inspector.
    """
    from .. import demo

    app = App(model_path=model_path or demo.MODEL_PATH, data=data)
    if calibrate and app.session.model is not None:
        app.calibrate(max_samples=max_samples, progress=False)
    if saved_build:
        if saved_build == "auto":
            names = list(app.build_step.saved_choice.options)  # only this model's builds are offered
            saved_build = next((n for n in names if "int8" in n), names[0] if names else None)
        if saved_build and app.load_saved_build(saved_build):
            label = app.inspect_choice.value
            # A build made elsewhere with other settings: continue from its recipe, as the quickstart notebook
            # does, rather than open on a build the session already calls out of date.
            if app.session.is_stale(f"build:{label}"):
                app.use_build_recipe(label)
            app.tabs.selected_index = INSPECT
    return app
