"""The app: every step in one widget, in order, around one :class:`Session`.

``App(model_path=...)`` shows tabs for the steps: load the model, choose the
precision flags, the calibrator and the optimization profiles, calibrate
(collect activation statistics), build (or load a saved build when TensorRT is
absent), inspect the engine's layer precisions, and explore the calibration
histograms. Sensible defaults are filled in at every step (FP16+INT8, the
toolkit's entropy calibration, profiles at the model's shapes, the bundled crops
for the bundled demo), so pressing through the steps goes from a model path to
a layer table and histograms.

The app only wires the step widgets to the session; when an earlier step
changes, the banner at the top names the later results that are now stale, and
why (see :attr:`Session.stale`).
"""

from __future__ import annotations

import os
from typing import Any, Optional

import ipywidgets as widgets

from ..core.common.errors import UserError
from .html import error_html, esc, html_table
from .model_loader import ModelLoader
from .session import Session

#: Tab titles, in order.
STEPS = ("1 Load", "2 Flags", "3 Calibrator & profiles", "4 Calibrate", "5 Build", "6 Inspect", "7 Calibration explorer")
LOAD, FLAGS, CALIBRATOR, CALIBRATE, BUILD, INSPECT, EXPLORE = range(len(STEPS))
_STALE_TABS = {"stats": CALIBRATE, "ranges": CALIBRATE}
#: The calibration explorer's Q/DQ model, in the app's output folder.
QDQ_NAME = "model.qdq.onnx"


def _banner(kind: str, html: str) -> str:
    color = {"warning": "#e37400", "info": "#1a73e8", "ok": "#188038"}[kind]
    return (f'<div class="trtw-{kind}" style="border-left:4px solid {color};padding:2px 8px;margin:4px 0">'
            f"{html}</div>")


def stale_html(stale) -> str:
    """The banner naming stale results and why ('' when all are current)."""
    if not stale:
        return ""
    items = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in sorted(stale.items()))
    return _banner("warning", "<b>Out of date</b> (kept; redo the step to refresh it):"
                              f"<ul style='margin:2px 0'>{items}</ul>")


class App(widgets.VBox):
    """All steps, from a model path to a layer table and histograms.

    Parameters
    ----------
    session : Session, optional
        Share an existing session (default: a new one).
    model_path : str, optional
        Loaded at once (``trtwidgets.demo.MODEL_PATH`` for the bundled demo).
    out_dir : str, optional
        Where builds and the calibration cache are written (default ``./trtwidgets-out``).
    features : TrtFeatures, optional
        What TensorRT supports (default: the installed TensorRT's).

    Attributes
    ----------
    session : Session
    tabs : ipywidgets.Tab
    loader, flags, calibrator, profiles, build_panel, inspector, explorer
        The step widgets (``profiles`` once a model is loaded, ``explorer`` once
        there are statistics). The explorer writes its calibration cache and its
        Q/DQ model (:data:`QDQ_NAME`) into ``out_dir``, and draws TensorRT's own
        amax when a session build was calibrated by TensorRT.
    accuracy, accuracy_note
        In the Inspect step: the latency each build recorded (side by side), and
        for the inspected build what accuracy needs (TensorRT running the engine).
    """

    def __init__(self, session: Optional[Session] = None, model_path: Any = None, out_dir: Optional[str] = None,
                 features=None, **kwargs):
        from .build_panel import BuildPanel
        from .calibrator import CalibratorPicker
        from .flags import FlagsPicker, offline_features, resolve_features
        from .inspector import Inspector

        self.session = session if session is not None else Session()
        self.out_dir = out_dir or os.path.join(os.getcwd(), "trtwidgets-out")
        self.features = offline_features(resolve_features(features))
        self._quiet = False
        s = self.session

        self.banner = widgets.HTML()
        self.error = widgets.HTML()

        # 1 load
        self.loader = ModelLoader(s, path=str(model_path or ""))
        self.recipe_path = widgets.Text(placeholder="recipe.json", description="Recipe",
                                        layout=widgets.Layout(width="420px"))
        self.save_recipe_button = widgets.Button(description="Save recipe", icon="save")
        self.load_recipe_button = widgets.Button(description="Load recipe", icon="folder-open")
        self.recipe_status = widgets.HTML()
        self.save_recipe_button.on_click(lambda _: self.save_recipe())
        self.load_recipe_button.on_click(lambda _: self.load_recipe())
        load_tab = widgets.VBox([self.loader, widgets.HBox([self.recipe_path, self.save_recipe_button,
                                                            self.load_recipe_button]), self.recipe_status])

        # 2 flags, 3 calibrator and profiles
        self.flags = FlagsPicker(self.features)
        self.calibrator = CalibratorPicker(self.features)
        self.problems = widgets.HTML()
        self.profiles = None
        self.profiles_box = widgets.VBox([widgets.HTML("<i>Load a model first: its dynamic inputs get profiles.</i>")])
        self.flags.on_change(lambda _: self._picker_changed(self.flags))
        self.calibrator.on_change(lambda _: self._picker_changed(self.calibrator))
        flags_tab = widgets.VBox([self.flags, self.problems])
        cal_tab = widgets.VBox([self.calibrator, self.profiles_box])

        # 4 calibrate
        self.data_path = widgets.Text(placeholder="folder of .npy/.npz samples or images, or 'demo'",
                                      description="Data", layout=widgets.Layout(width="520px"))
        self.max_samples = widgets.BoundedIntText(value=0, min=0, max=10 ** 9, description="Samples (0: all)",
                                                  style={"description_width": "initial"},
                                                  layout=widgets.Layout(width="220px"))
        self.calibrate_button = widgets.Button(description="Collect statistics", button_style="primary", icon="play")
        self.calibrate_output = widgets.Output()  # tqdm's progress bar renders here
        self.calibration_view = widgets.HTML()
        self.calibrate_button.on_click(lambda _: self.calibrate())
        calibrate_tab = widgets.VBox([
            widgets.HTML("Runs the float model with ONNX Runtime on the CPU over the calibration data, at the "
                         "calibration profile's opt shapes, and keeps a histogram of every activation."),
            widgets.HBox([self.data_path, self.max_samples, self.calibrate_button]),
            self.calibrate_output, self.calibration_view])

        # 5 build
        self.build_panel = BuildPanel(session=s, out_dir=None)
        self.saved_choice = widgets.Dropdown(description="Saved build", options=[], layout=widgets.Layout(width="420px"))
        self.saved_path = widgets.Text(placeholder="or a build folder / *.graph.json", layout=widgets.Layout(width="360px"))
        self.load_build_button = widgets.Button(description="Load saved build", icon="folder-open")
        self.load_build_button.on_click(lambda _: self.load_saved_build())
        self.use_recipe_button = widgets.Button(description="Use its recipe", icon="clone",
                                                tooltip="make the inspected build's recipe the session's")
        self.use_recipe_button.on_click(lambda _: self.use_build_recipe())
        self.builds_view = widgets.HTML()
        self._refresh_saved()
        build_tab = widgets.VBox([self.build_panel,
                                  widgets.HTML("<b>Saved builds</b> (inspect builds made elsewhere, e.g. on a GPU machine)"),
                                  widgets.HBox([self.saved_choice, self.saved_path, self.load_build_button,
                                                self.use_recipe_button]),
                                  self.builds_view])

        # 6 inspect
        self.inspect_choice = widgets.Dropdown(description="Build", options=[], layout=widgets.Layout(width="420px"))
        self.inspect_stale = widgets.HTML()
        self.inspector = Inspector()
        self.inspect_choice.observe(lambda c: self.inspect(c["new"]) if c["new"] else None, names="value")
        from .compare import CompareView

        self.compare = CompareView()
        self.compare_box = widgets.Accordion(children=[self.compare])
        self.compare_box.set_title(0, "Compare builds (two or more)")
        self.compare_box.selected_index = None
        from .accuracy import AccuracyView

        # Latency recorded with each build, and why accuracy needs TensorRT (see core.build_records).
        self.accuracy_note = widgets.HTML()
        self.accuracy = AccuracyView()
        inspect_tab = widgets.VBox([self.inspect_choice, self.inspect_stale, self.inspector,
                                    widgets.HTML("<b>Latency and accuracy</b>"), self.accuracy_note, self.accuracy,
                                    self.compare_box])

        # 7 explorer (made when there are statistics: it holds three figures)
        self.explorer = None
        self.explorer_box = widgets.VBox([widgets.HTML("<i>Collect statistics in step 4 first.</i>")])

        self.tabs = widgets.Tab(children=[load_tab, flags_tab, cal_tab, calibrate_tab, build_tab, inspect_tab,
                                          self.explorer_box])
        for i, title in enumerate(STEPS):
            self.tabs.set_title(i, title)
        super().__init__([widgets.HTML("<b>trtwidgets</b>: model &rarr; flags &rarr; calibrator &amp; profiles "
                                       "&rarr; calibrate &rarr; build &rarr; inspect &rarr; explore"),
                          self.banner, self.error, self.tabs], **kwargs)

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
        if s.graphs:
            self._on_graphs({"new": s.graphs})
        if s.stats is not None:
            self._on_stats({"new": s.stats})

    # ------------------------------------------------------------------ steps (also for scripts)

    def load(self, path: Any = None) -> bool:
        """Step 1: load a model (default: the path in the loader)."""
        return self.loader.load(None if path is None else str(path))

    def calibrate(self, data: Any = None, max_samples: Optional[int] = None, progress: bool = True) -> bool:
        """Step 4: collect statistics with the data in the data field (or ``data``)."""
        s = self.session
        before = s.recipe
        text = self.data_path.value.strip()
        if data is None and text and text != self._recipe_data_text():
            from ..core.calibration.data import spec_for

            try:
                spec = spec_for(text)
            except UserError as err:
                self._show_error(err)
                return False
            if not s.set_recipe(calibration_data=spec):
                self._show_error(s.error)
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
            error = s.error
            if before is not None and s.recipe is not before:
                # Data that cannot be read does not become part of the recipe.
                s.set_recipe(before)
            self._show_error(error)
            return False
        self._show_error("")
        self._render_calibration()
        return True

    def load_saved_build(self, source: Any = None) -> bool:
        """Step 5 without TensorRT: add a saved build (name from the list, folder, or *.graph.json)."""
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
        if not ok:
            self._show_error(self.session.error)
            return False
        self._show_error("")
        return True

    def use_build_recipe(self, label: Optional[str] = None) -> bool:
        """Continue from a build's own recipe (default: the build shown in the inspector)."""
        label = label or self.inspect_choice.value or self._latest_label()
        ok = bool(label) and self.session.use_build_recipe(label)
        self._show_error("" if ok else (self.session.error or "No build to take a recipe from."))
        return ok

    def inspect(self, label: Optional[str] = None) -> bool:
        """Step 6: show a build's layer table and precision chart (default: the latest build)."""
        s = self.session
        if label is None:
            label = self._latest_label()
        build = s.build_named(label) if label else None
        if build is None:
            return False
        ok = self.inspector.load(build)
        self._render_performance(label, build)
        self.inspect_stale.value = stale_html({k: v for k, v in s.stale.items() if k == f"build:{label}"})
        if self.inspect_choice.value != label:
            self.inspect_choice.value = label
        return ok

    def explore(self):
        """Step 7: the calibration explorer of the session's statistics (made on first use)."""
        if self.explorer is None and self.session.stats is not None:
            self._make_explorer()
        if self.explorer is not None:
            self.tabs.selected_index = EXPLORE
        return self.explorer

    def save_recipe(self, path: Optional[str] = None) -> Optional[str]:
        """Save the session's recipe as JSON (default: the path in the recipe field, else ``out_dir/recipe.json``)."""
        path = path or self.recipe_path.value.strip() or os.path.join(self.out_dir, "recipe.json")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
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
        from ..core.calibration.recipe_step import calibration_source
        from ..core.recipe.recipe import CalibratorSpec

        import dataclasses

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

    def _recipe_data_text(self) -> str:
        spec = getattr(self.session.recipe, "calibration_data", None)
        if spec is None:
            return ""
        return spec.path or spec.kind

    def _picker_changed(self, picker) -> None:
        if self._quiet or self.session.model is None:
            return
        s = self.session
        try:
            new = picker.to_recipe(s.recipe or s.default_recipe())
        except UserError as err:
            self._show_error(err)
            return
        if s.set_recipe(new):
            self._show_error("")
        else:
            self._show_error(s.error)

    def _on_problems(self, change) -> None:
        problems = change["new"] or ()
        self.problems.value = "" if not problems else _banner(
            "warning", "<b>The recipe as it stands:</b><ul style='margin:2px 0'>"
            + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul>")

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

    def _render_performance(self, label: str, build) -> None:
        from ..core.engine.build_records import performance_record, recorded_latencies

        s = self.session
        rec = performance_record(build, bool(getattr(self.features, "available", False)))
        meta = getattr(build, "meta", None) or {}
        where = " on ".join(x for x in (f"TensorRT {meta['trt_version']}" if meta.get("trt_version") else "",
                                        meta.get("gpu_name") or "") if x)
        if rec.latency is not None:
            head = (f"<b>{esc(label)}</b> recorded a median latency of {rec.latency.median_ms:.4f} ms "
                    f"({rec.latency.runs} runs{', ' + esc(where) if where else ''}). ")
        else:
            head = f"<b>{esc(label)}</b> recorded no latency. "
        self.accuracy_note.value = _banner("info", head + esc(rec.note))
        # Every build of the session side by side: FP32 vs FP16 vs INT8 is the question.
        self.accuracy.show(bench=recorded_latencies((k, s.build_named(k)) for k in s.graphs))

    def _on_graphs(self, change) -> None:
        labels = list(change["new"] or {})
        self.builds_view.value = html_table(
            [{"build": k, "layers": len(g.layers), "status": self.session.stale.get(f"build:{k}", "current")}
             for k, g in (change["new"] or {}).items()], ["build", "layers", "status"], caption="Builds in this session") if labels else ""
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
        self._render_calibration()
        if self.explorer is not None or self.tabs.selected_index == EXPLORE:
            self._make_explorer()

    def _on_tab(self, change) -> None:
        if change["new"] == EXPLORE and self.explorer is None and self.session.stats is not None:
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

    def _render_calibration(self) -> None:
        s = self.session
        cal = s.calibration
        if s.stats is None:
            return
        from ..core.calibration.ranges import METHODS

        rows = []
        ranges = s.ranges or {}
        method = getattr(cal, "method", "entropy")
        worst = sorted(ranges.items(), key=lambda kv: kv[1][method].sqnr_db if method in kv[1] else 0)[:10]
        for name, per in worst:
            row = {"tensor": name}
            row.update({m: f"{per[m].amax:.4g}" for m in METHODS if m in per})
            row["SQNR dB"] = f"{per[method].sqnr_db:.1f}" if method in per else ""
            rows.append(row)
        head = (f"{s.stats.samples} samples from {esc(getattr(cal, 'data', '') or 'the given data')}, "
                f"{len(s.stats.tensors)} tensors; exported method <b>{esc(method)}</b>. "
                "Explore every tensor in step 7.")
        columns = ["tensor"] + [m for m in METHODS] + ["SQNR dB"]
        self.calibration_view.value = _banner("ok", head) + html_table(
            rows, columns, caption=f"The 10 tensors with the lowest {method} SQNR (amax per method)")

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
               max_samples: Optional[int] = None) -> App:
    """An :class:`App` on a model (default: the bundled demo), walked through the default path.

    Loads the model, calibrates (the bundled crops for the demo), loads a saved
    build (``"auto"``: the first saved INT8 build of the demo, when the
    repository's are present) and opens the inspector.
    """
    from .. import demo

    app = App(model_path=model_path or demo.MODEL_PATH)
    if calibrate and app.session.model is not None:
        app.calibrate(max_samples=max_samples, progress=False)
    if saved_build:
        if saved_build == "auto":
            names = list(app.saved_choice.options)
            saved_build = next((n for n in names if "int8" in n), names[0] if names else None)
        if saved_build and app.load_saved_build(saved_build):
            app.tabs.selected_index = INSPECT
    return app
