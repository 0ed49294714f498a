"""The app: every step in one widget, in order, around one :class:`Session`.

``App(model_path=..., data=...)`` shows tabs for the steps: load the model,
choose the precision flags, the calibrator and the optimization profiles,
calibrate (collect activation statistics), plan where INT8 pays, build (or load
a saved build when TensorRT is absent), inspect the engine's layer precisions,
and explore the calibration histograms. Sensible defaults are filled in at every
step (FP16+INT8, the toolkit's entropy calibration, profiles at the shapes of
the calibration data, the bundled crops for the bundled demo), so pressing
through the steps goes from a model path to a layer table and histograms.

The tabs are assembled in :mod:`trtwidgets.widgets.app_tabs`; this module holds
the actions (the public methods, also for scripts) and the session's wiring.

The app only wires the step widgets to the session; when an earlier step
changes, the banner at the top names the later results that are now stale, and
why (see :attr:`Session.stale`).
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

import ipywidgets as widgets

from ..core.common.errors import UserError
from . import app_tabs
from .app_tabs import (BUILD, CALIBRATE, CALIBRATOR, EXPLORE, FLAGS, INSPECT, LOAD, PLAN, STEP_KEYS, STEPS, banner,
                       stale_html)
from .html import error_html, esc
from .model_loader import ModelLoader
from .session import Session

__all__ = ["App", "quickstart", "STEPS", "STEP_KEYS", "LOAD", "FLAGS", "CALIBRATOR", "CALIBRATE", "PLAN", "BUILD",
           "INSPECT", "EXPLORE", "QDQ_NAME", "stale_html"]

_STALE_TABS = {"stats": CALIBRATE, "ranges": CALIBRATE}
#: The calibration explorer's Q/DQ model, in the app's output folder.
QDQ_NAME = "model.qdq.onnx"
#: The core's mismatch error names a Python argument; in the app the choice is a control.
_MISMATCH = re.compile(r"Input '(?P<name>[^']+)'[^:]*: shape (?P<shape>[\dx]+) differs")
_PYTHON_FIX = re.compile(r"Choose adapt=\{.*?\}")


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
    out_dir : str, optional
        Where builds and the calibration cache are written (default ``./trtwidgets-out``).
    features : TrtFeatures, optional
        What TensorRT supports (default: the installed TensorRT's).

    Attributes
    ----------
    session : Session
    tabs : ipywidgets.Tab
        One tab per step, in the order of :data:`STEP_KEYS` (index constants ``LOAD`` ... ``EXPLORE``).
    loader, flags, calibrator, profiles, data_box, plan_step, build_panel, inspector, explorer
        The step widgets (``profiles`` once a model is loaded, ``plan_step`` when the planner's
        widget exists, ``explorer`` once there are statistics). The explorer writes its
        calibration cache and its Q/DQ model (:data:`QDQ_NAME`) into ``out_dir``, and draws
        TensorRT's own amax when a session build was calibrated by TensorRT.
    accuracy, accuracy_note
        In the Inspect step: the latency each build recorded (side by side), and
        for the inspected build what accuracy needs (TensorRT running the engine).
    """

    def __init__(self, session: Optional[Session] = None, model_path: Any = None, out_dir: Optional[str] = None,
                 features=None, data: Any = None, **kwargs):
        from .calibrator import CalibratorPicker
        from .flags import FlagsPicker, offline_features, resolve_features

        self.session = session if session is not None else Session()
        self.out_dir = out_dir or os.path.join(os.getcwd(), "trtwidgets-out")
        self.features = offline_features(resolve_features(features))
        self._quiet = False
        self._late_mismatch: dict = {}  # inputs whose odd samples only the calibration found (past the peek)
        s = self.session
        self.banner = widgets.HTML()
        self.error = widgets.HTML()
        self.loader = ModelLoader(s, path=str(model_path or ""))
        self.flags = FlagsPicker(self.features)
        self.calibrator = CalibratorPicker(self.features)
        self.problems = widgets.HTML()
        self.profiles = None
        self.profiles_box = widgets.VBox([widgets.HTML("<i>Load a model first: its dynamic inputs get profiles.</i>")])
        self.flags.on_change(lambda _: self._picker_changed(self.flags))
        self.calibrator.on_change(lambda _: self._picker_changed(self.calibrator))
        # 7 explorer (made when there are statistics: it holds three figures)
        self.explorer = None
        self.explorer_box = widgets.VBox([widgets.HTML(f"<i>Collect statistics in step {CALIBRATE + 1} first.</i>")])
        tabs = {"load": app_tabs.load_tab(self), "flags": widgets.VBox([self.flags, self.problems]),
                "calibrator": widgets.VBox([self.calibrator, self.profiles_box]),
                "calibrate": app_tabs.calibrate_tab(self), "plan": app_tabs.plan_tab(self),
                "build": app_tabs.build_tab(self), "inspect": app_tabs.inspect_tab(self), "explore": self.explorer_box}
        self.tabs = widgets.Tab(children=[tabs[k] for k in STEP_KEYS])
        for i, title in enumerate(STEPS):
            self.tabs.set_title(i, title)
        self._refresh_saved()
        super().__init__([widgets.HTML(app_tabs.TAB_CSS + app_tabs.HEADER), self.banner, self.error, self.tabs],
                         **kwargs)
        self.add_class("trtw-app")

        self.data_path.observe(lambda c: self._data_typed(c["new"]), names="value")
        self.data_box.on_adapt(self._adapt_chosen)
        # The explorer holds three figures: made when its tab is first opened, not on every calibration.
        self.tabs.observe(self._on_tab, names=["selected_index"])
        s.observe(self._on_model, names=["model"])
        s.observe(self._on_recipe, names=["recipe"])
        s.observe(self._on_stale, names=["stale"])
        s.observe(self._on_problems, names=["problems"])
        s.observe(self._on_graphs, names=["graphs"])
        s.observe(self._on_stats, names=["stats"])
        if s.model is not None:
            self._on_model({"new": s.model})
        elif model_path:
            self.loader.load()
        if data is not None and s.model is not None:
            self.use_data(data)
        if s.graphs:
            self._on_graphs({"new": s.graphs})
        if s.stats is not None:
            self._on_stats({"new": s.stats})

    # ------------------------------------------------------------------ steps (also for scripts)

    def load(self, path: Any = None) -> bool:
        """Step 1: load a model (default: the path in the loader)."""
        return self.loader.load(None if path is None else str(path))

    def use_data(self, data: Any) -> bool:
        """Calibrate on ``data`` (a folder, ``"demo"`` or a spec): open profile dims take its shapes, said in a note.

        Where samples differ from the opt shape, the data box offers pad / truncate / resize.
        Unreadable data is refused with a clear error; the recipe stays.
        """
        ok = self.session.use_data(data)
        if ok:
            self._late_mismatch = {}
        self._show_error("" if ok else self.session.error)
        self._render_data()
        return ok

    def calibrate(self, data: Any = None, max_samples: Optional[int] = None, progress: bool = True) -> bool:
        """Step 4: collect statistics with the data in the data field (or ``data``)."""
        s = self.session
        text = self.data_path.value.strip()
        if data is None and text and text != self._recipe_data_text() and not self.use_data(text):
            return False
        n = max_samples if max_samples is not None else (self.max_samples.value or None)
        self.calibrate_button.disabled = True
        self.calibrate_output.clear_output()
        try:
            with self.calibrate_output:
                ok = s.calibrate(data=data, progress=progress, max_samples=n)
        finally:
            self.calibrate_button.disabled = False
        if not ok:
            self._show_error(self._mismatch_in_app(s.error))
            return False
        self._show_error("")
        self.calibration_view.value = app_tabs.calibration_html(s)
        return True

    def load_saved_build(self, source: Any = None) -> bool:
        """Step 6 without TensorRT: add a saved build (name from the list, folder, or *.graph.json)."""
        from ..core.engine.saved_build import find_saved_builds

        if source is None:
            source = self.saved_path.value.strip() or self.saved_choice.value
        if not source:
            self._show_error(UserError("No saved build chosen.", None, "Pick one from the list or type a folder."))
            return False
        known = find_saved_builds()
        if isinstance(source, str) and source in known:
            source = known[source]
        ok = self.session.add_build(source)
        self._show_error("" if ok else self.session.error)
        return ok

    def use_build_recipe(self, label: Optional[str] = None) -> bool:
        """Continue from a build's own recipe (default: the build shown in the inspector)."""
        label = label or self.inspect_choice.value or self._latest_label()
        ok = bool(label) and self.session.use_build_recipe(label)
        self._show_error("" if ok else (self.session.error or "No build to take a recipe from."))
        return ok

    def inspect(self, label: Optional[str] = None) -> bool:
        """Step 7: show a build's layer table and precision chart (default: the latest build)."""
        s = self.session
        if label is None:
            label = self._latest_label()
        build = s.build_named(label) if label else None
        if build is None:
            return False
        # Layers the Q/DQ export kept float on purpose say so, with the rule (when the session holds its source).
        self.inspector.options["kept_float"] = app_tabs.kept_float_for(s, build)
        ok = self.inspector.load(build)
        self.accuracy_note.value = app_tabs.performance_html(label, build, bool(getattr(self.features, "available",
                                                                                        False)))
        # Every build of the session side by side: FP32 vs FP16 vs INT8 is the question.
        from ..core.engine.build_records import recorded_latencies

        self.accuracy.show(bench=recorded_latencies((k, s.build_named(k)) for k in s.graphs))
        self.inspect_stale.value = stale_html({k: v for k, v in s.stale.items() if k == f"build:{label}"})
        if self.inspect_choice.value != label:
            self.inspect_choice.value = label
        return ok

    def explore(self):
        """Step 8: the calibration explorer of the session's statistics (made on first use)."""
        if self.explorer is None and self.session.stats is not None:
            self._make_explorer()
        if self.explorer is not None:
            self.tabs.selected_index = EXPLORE
        return self.explorer

    def save_recipe(self, path: Optional[str] = None) -> Optional[str]:
        """Save the session's recipe as JSON (default: the path in the recipe field, else ``out_dir/recipe.json``)."""
        path = path or self.recipe_path.value.strip() or os.path.join(self.out_dir, "recipe.json")
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        except OSError as err:
            self._show_error(UserError(f"Could not make the folder for {path}.", f"{err.strerror or err}.",
                                       "Choose a folder you can write to (a file may stand where a folder is needed)."))
            return None
        written = self.session.save_recipe(path)
        if written is None:
            self._show_error(self.session.error)
        else:
            self.recipe_status.value = f"saved to <code>{esc(written)}</code>; re-run it with " \
                                       f"<code>trtwidgets run {esc(written)} --report report.html</code>"
        return written

    def load_recipe(self, path: Optional[str] = None) -> bool:
        """Load a recipe JSON (and its model); nothing is lost when it is bad."""
        path = path or self.recipe_path.value.strip()
        if not path:
            self._show_error(UserError("No recipe file given.", None, "Type the path of a recipe.json."))
            return False
        ok = self.session.load_recipe(path)
        if not ok:
            self._show_error(self.session.error)
        else:
            self.recipe_status.value = f"loaded <code>{esc(path)}</code>"
            self._render_data()
        return ok

    # ------------------------------------------------------------------ session -> widgets

    def _on_model(self, change) -> None:
        from .profiles import ProfileEditor

        model = change["new"]
        if model is None:
            return
        s = self.session
        self.profiles = None  # the previous model's editor must not receive this model's profiles
        recipe = s.recipe if getattr(s.recipe, "model_sha256", None) == model.sha256 else None
        if recipe is None:
            recipe = self._default_recipe()
            if recipe is not None:
                s.set_recipe(recipe)
        self.profiles = ProfileEditor(model.summary, profiles=getattr(s.recipe, "profiles", None),
                                      calibration_profile=getattr(s.recipe, "calibration_profile", 0))
        self.profiles.on_change(lambda _: self._picker_changed(self.profiles))
        self.profiles_box.children = [self.profiles]
        self._on_recipe({"new": s.recipe})

    def _default_recipe(self):
        """FP16+INT8 with the toolkit's entropy ranges, and the bundled crops for the bundled demo."""
        import dataclasses

        from ..core.calibration.recipe_step import calibration_source
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
            if "int8" in flags and "toolkit:entropy" in self.calibrator.offered:
                kw["calibrator"] = CalibratorSpec(kind="toolkit", method="entropy")
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

    def _on_recipe(self, change) -> None:
        recipe = change["new"]
        if not hasattr(recipe, "flags"):
            return
        self._quiet = True
        try:
            self.flags.set_from_recipe(recipe)
            self.calibrator.set_from_recipe(recipe)
            if self.profiles is not None and hasattr(self.profiles, "fields") and self.profiles.fields:
                current = self.profiles.value if not self.profiles.problems else None
                if current is None or tuple(current.get("profiles", ())) != tuple(recipe.profiles):
                    self.profiles.set_profiles(recipe.profiles, recipe.calibration_profile)
            self.data_path.value = self._recipe_data_text()
        finally:
            self._quiet = False
        self._on_problems({"new": self.session.problems})
        self._render_data()

    def _recipe_data_text(self) -> str:
        spec = getattr(self.session.recipe, "calibration_data", None)
        if spec is None:
            return ""
        return spec.path or spec.kind

    def _data_typed(self, text: str) -> None:
        # Enter or leaving the box: read the data's shapes now, so the profiles show them before calibrating.
        text = (text or "").strip()
        if not self._quiet and text and text != self._recipe_data_text() and self.session.model is not None:
            self.use_data(text)

    def _adapt_chosen(self, adapt) -> None:
        if not self._quiet and not self.session.set_adapt(adapt):
            self._show_error(self.session.error)

    def _render_data(self) -> None:
        """The data box: the note on profiles from the data, and an adaptation choice per mismatched input."""
        from ..core.recipe.data_defaults import mismatched_inputs

        s = self.session
        recipe = s.recipe
        spec = getattr(recipe, "calibration_data", None)
        opt = dict(getattr(recipe, "calibration_shapes", None) or {})
        odd = mismatched_inputs(opt, s.data_shapes) if spec is not None else {}
        odd.update({k: v for k, v in self._late_mismatch.items() if k in opt and k not in odd})
        self._quiet = True
        try:
            self.data_box.show(s.data_note if spec is not None else "", odd, opt, dict(getattr(spec, "adapt", {}) or {}))
        finally:
            self._quiet = False
        missing = {k: v for k, v in self.data_box.adapt_value.items() if dict(getattr(spec, "adapt", {}) or {}).get(k) != v}
        if missing and spec is not None:
            # The choice shown is the one used: a mismatch never waits for a click the user cannot see.
            s.set_adapt(dict(spec.adapt, **missing))

    def _mismatch_in_app(self, message: str) -> str:
        """The core's shape-mismatch error, pointing at the data box's control instead of a Python argument."""
        found = _MISMATCH.search(message or "")
        if not found:
            return message
        shape = tuple(int(d) for d in found.group("shape").split("x"))
        self._late_mismatch[found.group("name")] = (shape,)
        self._render_data()
        return _PYTHON_FIX.sub("Choose pad, truncate or resize under the data box (resize is selected now), then collect again", message)

    def _picker_changed(self, picker) -> None:
        if self._quiet or self.session.model is None:
            return
        s = self.session
        try:
            new = picker.to_recipe(s.recipe or s.default_recipe())
        except UserError as err:
            self._show_error(err)
            return
        self._show_error("" if s.set_recipe(new) else s.error)

    def _on_problems(self, change) -> None:
        self.problems.value = app_tabs.problems_html(change["new"] or ())

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
        label = self.inspect_choice.value
        if label:
            self.inspect_stale.value = stale_html({k: v for k, v in stale.items() if k == f"build:{label}"})

    def _on_graphs(self, change) -> None:
        graphs = change["new"] or {}
        labels = list(graphs)
        self.builds_view.value = app_tabs.builds_html(graphs, self.session.stale)
        self.inspect_choice.options = labels
        if labels:
            self.inspect(labels[-1])
        if len(labels) >= 2:
            builds = {k: self.session.build_named(k) for k in labels}
            self.compare.load(builds, profiles={k: getattr(b, "timings", None) for k, b in builds.items()})
        if self.explorer is not None:
            self.explorer.set_trt_cache(self._trt_cache())

    def _on_stats(self, change) -> None:
        if change["new"] is None:
            return
        self.calibration_view.value = app_tabs.calibration_html(self.session)
        if self.explorer is not None or self.tabs.selected_index == EXPLORE:
            self._make_explorer()
        else:
            self.explorer_box.children = [widgets.HTML(
                f"<i>Statistics of {int(change['new'].samples)} samples are ready: the explorer is drawn when this "
                "tab opens.</i>")]

    def _on_tab(self, change) -> None:
        if change["new"] == EXPLORE and self.explorer is None and self.session.stats is not None:
            # Three figures take a few seconds: say so first (the message reaches the page before the work).
            self.explorer_box.children = [widgets.HTML("<i>Drawing the explorer...</i>")]
            self._make_explorer()

    def _make_explorer(self) -> None:
        from .calib_explorer import CalibrationExplorer

        s = self.session
        cal = getattr(s.recipe, "calibrator", None)
        cache = getattr(cal, "cache_path", None) or os.path.join(self.out_dir, "calibration.cache")
        try:
            self.explorer = CalibrationExplorer(session=s, ranges=s.ranges, cache_path=cache,
                                                qdq_path=os.path.join(self.out_dir, QDQ_NAME),
                                                trt_cache=self._trt_cache(),
                                                percentile=getattr(cal, "percentile", None))
        except UserError as err:
            self._show_error(err)
            return
        self.explorer_box.children = [self.explorer]

    def _trt_cache(self) -> Optional[str]:
        """The newest session build's cache written by TensorRT's own calibrator (its amax is drawn as a line)."""
        from ..core.engine.build_records import find_tensorrt_cache

        model = self.session.model
        return find_tensorrt_cache(self.session.builds, model.sha256 if model is not None else None)

    def _refresh_saved(self) -> None:
        from ..core.engine.saved_build import find_saved_builds

        names = list(find_saved_builds())
        self.saved_choice.options = names
        if names:
            self.saved_choice.value = next((n for n in names if "int8" in n), names[0])

    def _latest_label(self) -> Optional[str]:
        labels = list(self.session.graphs)
        return labels[-1] if labels else None

    def _show_error(self, err) -> None:
        self.error.value = error_html(err) if err else ""


def quickstart(model_path: Any = None, saved_build: Optional[str] = "auto", calibrate: bool = True,
               max_samples: Optional[int] = None, data: Any = None) -> App:
    """An :class:`App` on a model (default: the bundled demo), walked through the default path.

    Loads the model (with ``data``, its shapes fill the profiles), calibrates (the bundled
    crops for the demo), loads a saved build (``"auto"``: the first saved INT8 build of the
    demo, when the repository's are present) and opens the inspector.
    """
    from .. import demo

    app = App(model_path=model_path or demo.MODEL_PATH, data=data)
    if calibrate and app.session.model is not None:
        app.calibrate(max_samples=max_samples, progress=False)
    if saved_build:
        if saved_build == "auto":
            names = list(app.saved_choice.options)
            saved_build = next((n for n in names if "int8" in n), names[0] if names else None)
        if saved_build and app.load_saved_build(saved_build):
            app.tabs.selected_index = INSPECT
    return app
