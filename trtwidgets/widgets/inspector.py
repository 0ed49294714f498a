"""Step 5 widget: which layers run in INT8, and why not the others.

Thin: parsing, the table, why-not-INT8 and filtering are in :mod:`trtwidgets.core`
(:func:`~trtwidgets.core.engine.layer_table.layer_table`,
:func:`~trtwidgets.core.engine.layer_table.filter_table`), the chart in
:mod:`trtwidgets.plots.precision`. Filtering is vectorised and only the first
``max_rows`` matching rows are rendered, with a "showing N of M" note, so that
typing in the search box stays fast on engines with thousands of layers.

:class:`InspectStep` is the App's *Inspect* tab: one of the session's builds in the
inspector, the latency every build recorded side by side, and the builds compared. Before
there is a build (always, on a machine without a GPU) it says what inspecting needs and what
the user can do: save the recipe to build on a GPU machine (``trtwidgets run recipe.json``), or
load a build of this model saved there.
"""

from __future__ import annotations

import html
import os
from typing import Any, Callable, List, Optional

import ipywidgets as widgets

from ..core.common.errors import UserError
from ..core.engine.layer_table import COLUMNS, filter_table, layer_table, table_html
from .accuracy import AccuracyView
from .app_tabs import performance_html, stale_html
from .compare import CompareView
from .html import error_html, esc
from .step import StepWidget

ALL = "(all)"
#: Columns shown in the table (the full table stays in :attr:`Inspector.table`).
SHOWN = ("name", "type", "onnx_nodes", "precision", "input_precision", "output_precision", "input_format",
         "output_format", "weights_type", "bias_type", "tactic", "latency_ms", "why_not_int8", "why_not_int8_reason")


def _warning_html(messages) -> str:
    return "".join(
        '<div class="trtw-warning" style="background:#fff4e5;border-left:4px solid #e37400;padding:4px 8px;'
        f'margin:4px 0">{html.escape(m)}</div>' for m in messages)


class Inspector(widgets.VBox):
    """Per-layer precision table, precision bar chart and filters for one engine.

    Parameters
    ----------
    source : EngineGraph, build result, inspector JSON path or text, optional
        What to show; see :meth:`load`.
    recipe, calibration, qdq_tensors, profile, kept_float : optional
        Passed to :func:`~trtwidgets.core.engine.layer_table.layer_table` (why-not-INT8 and latency);
        ``kept_float``: the Q/DQ export's skip records, so layers it kept float say by which rule.
    max_rows : int, default 200
        Rows rendered at most.
    session : Session, optional
        When given (and no source), the inspector shows the session's latest build.
    use_siblings : bool, default True
        Use what the source says about its build unless given explicitly: a build
        result's recipe, calibration cache and timings, or the ``recipe.json``,
        ``calibration.cache`` and ``profile.json`` beside a saved inspector JSON
        (see :func:`trtwidgets.core.engine.inspector_json.build_context`).
    """

    def __init__(self, source: Any = None, recipe: Any = None, calibration: Any = None, qdq_tensors: Any = None,
                 profile: Any = None, max_rows: int = 200, session: Any = None, use_siblings: bool = True,
                 kept_float: Any = None, **kwargs):
        self.max_rows = int(max_rows)
        self.use_siblings = bool(use_siblings)
        self.options = dict(recipe=recipe, calibration=calibration, qdq_tensors=qdq_tensors, profile=profile,
                            kept_float=kept_float)
        self.graph: Any = None
        self.table: Any = None
        self.session = session
        self.message = widgets.HTML()
        self.warnings = widgets.HTML()
        self.search = widgets.Text(placeholder="layer or ONNX node name", description="Search",
                                   continuous_update=True, layout=widgets.Layout(width="320px"))
        self.precision = widgets.Dropdown(options=[ALL], value=ALL, description="Precision",
                                          layout=widgets.Layout(width="200px"))
        self.layer_type = widgets.Dropdown(options=[ALL], value=ALL, description="Type",
                                           layout=widgets.Layout(width="240px"))
        self.why = widgets.Dropdown(options=[ALL], value=ALL, description="Why not INT8",
                                    style={"description_width": "initial"}, layout=widgets.Layout(width="280px"))
        self.sort = widgets.Dropdown(options=["(engine order)"] + list(COLUMNS), value="(engine order)",
                                     description="Sort", layout=widgets.Layout(width="240px"))
        self.descending = widgets.ToggleButton(value=False, description="desc", icon="sort-amount-desc",
                                               layout=widgets.Layout(width="80px"))
        self.count = widgets.HTML()
        self.causes = widgets.HTML()
        self.table_view = widgets.HTML(layout=widgets.Layout(max_height="480px", overflow="auto"))
        self.chart: Any = None
        self.chart_box = widgets.Box()
        #: The parsed network before the build (``prebuild_table``), when the build folder has it; else None.
        self.network_table: Any = None
        self.network_view = widgets.HTML(layout=widgets.Layout(max_height="360px", overflow="auto"))
        self.network_section = widgets.Accordion(children=[self.network_view], selected_index=None,
                                                 layout=widgets.Layout(display="none"))
        self.network_section.set_title(0, "Network (pre-build)")
        super().__init__([self.message, self.warnings, self.chart_box, self.causes,
                          widgets.HBox([self.search, self.precision, self.layer_type, self.why, self.sort, self.descending],
                                       layout=widgets.Layout(flex_flow="row wrap")),
                          self.count, self.table_view, self.network_section], **kwargs)
        for w in (self.search, self.precision, self.layer_type, self.why, self.sort, self.descending):
            w.observe(lambda _: self.refresh(), names="value")
        if session is not None and source is None:
            session.observe(self._on_builds, names=["builds"])
            if getattr(session, "builds", ()):
                self.load(session.builds[-1])
        if source is not None:
            self.load(source)

    # ------------------------------------------------------------------ loading

    def load(self, source: Any) -> bool:
        """Show a new engine: an EngineGraph, a build result, or inspector JSON (path or text).

        On bad input the message panel explains it and the previous table stays.

        Returns
        -------
        bool
            True when the engine was loaded.
        """
        from ..core.engine.inspector_json import CONTEXT_FAILURES, as_graph, build_context, context_failure

        options = dict(self.options)
        found = {}
        try:
            graph = as_graph(source)
            if self.use_siblings:
                # A build (or a saved build folder) carries its recipe, calibration cache and timings.
                for key, value in build_context(source).items():
                    if options.get(key) is None:
                        options[key] = found[key] = value
            table = layer_table(graph, **options)
        except (UserError,) + CONTEXT_FAILURES as exc:
            # A broken file beside the engine is named, with the way to leave it out; the old table stays.
            self.message.value = error_html(context_failure(exc, found, "Inspector(..., use_siblings=False)"))
            return False
        self.graph, self.table = graph, table
        self.message.value = ""
        self._update_chart()
        with self.hold_sync():
            self.warnings.value = _warning_html(w.message for w in graph.warnings)
            precisions = [p for p in table["precision"].value_counts().index]
            types = sorted(table["type"].unique())
            self.precision.options = [ALL] + precisions
            self.precision.value = ALL
            self.layer_type.options = [ALL] + types
            self.layer_type.value = ALL
            self.why.options = [ALL] + [c for c in table["why_not_int8"].value_counts().index if c]
            self.why.value = ALL
            self.causes.value = self._causes_html()
            self._show_network(source)
        self.refresh()
        return True

    def _show_network(self, source: Any) -> None:
        """The pre-build view of the build's network (network_layers.json), collapsed; hidden when absent."""
        from ..core.engine.layer_table import prebuild_summary, prebuild_table
        from ..core.engine.saved_build import network_layers_of

        table, body = None, ""
        try:
            rows = network_layers_of(source) if (self.use_siblings or hasattr(source, "network_layers")) else None
            if rows:
                table = prebuild_table(rows)
        except UserError as err:  # the engine view stands; the broken list is explained in its own section
            body = error_html(err)
        if table is not None:
            d = prebuild_summary(table)
            pinned = d["precision_set"] + [n for n in d["output_type_set"] if n not in d["precision_set"]]
            requested = ", ".join(f"{k} {v}" for k, v in d["requested_precisions"].items()) or "not recorded"
            body = (f'<div class="trtw-prebuild-summary">{d["layers"]} network layers before the build; '
                    f'requested precisions: {html.escape(requested)}; set explicitly on {len(pinned)} layers</div>'
                    + table_html(table, self.max_rows, precision_columns=("requested_precision",)))
        self.network_table = table
        self.network_view.value = body
        self.network_section.layout.display = "" if body else "none"

    def _on_builds(self, change):
        if change["new"]:
            self.load(change["new"][-1])

    def _update_chart(self):
        from ..plots.precision import PrecisionBarDisplay

        # A new engine is a new figure (rare: on load), made whole rather than patched trace by trace.
        self.chart = PrecisionBarDisplay.from_table(self.table).figure(widget=True)
        self.chart_box.children = [self.chart]

    def _causes_html(self) -> str:
        # One explanation per cause; the rows carry only a short reason naming the tensor.
        causes = self.table.attrs.get("why_not_int8_causes") or []
        if not causes:
            return ""
        items = "".join(
            f"<li><code>{html.escape(c['code'])}</code> <b>{html.escape(c['title'])}</b> "
            f"({c['layers']} layer{'s' if c['layers'] != 1 else ''}): {html.escape(c['explanation'])}</li>"
            for c in causes)
        return (f'<div class="trtw-causes" style="font-size:12px"><b>Why not INT8</b>, one explanation per cause'
                f'<ul style="margin:2px 0">{items}</ul></div>')

    # ------------------------------------------------------------------ filtering

    @property
    def filtered(self):
        """The table rows matching the current filters, in the current order (pandas.DataFrame)."""
        if self.table is None:
            return None
        return filter_table(self.table, text=self.search.value.strip(),
                            precision=None if self.precision.value == ALL else self.precision.value,
                            layer_type=None if self.layer_type.value == ALL else self.layer_type.value,
                            sort_by=None if self.sort.value == "(engine order)" else self.sort.value,
                            ascending=not self.descending.value,
                            why=None if self.why.value == ALL else self.why.value)

    def refresh(self) -> None:
        """Re-render the table for the current filters."""
        rows = self.filtered
        if rows is None:
            return
        shown = min(len(rows), self.max_rows)
        with self.hold_sync():
            self.count.value = (f'<div class="trtw-count">showing {shown} of {len(rows)} matching layers '
                                f'({len(self.table)} in the engine)</div>')
            self.table_view.value = table_html(rows, self.max_rows, SHOWN)


def kept_float_for(session, build) -> Optional[tuple]:
    """The Q/DQ export's skip records when ``build`` is explicit and the session's model is its float source.

    A user who loaded a float model and built the toolkit's Q/DQ export of it inspects an explicit
    engine: the export's placement says which layers it kept float on purpose, by rule.
    """
    model = session.model
    if model is None or model.summary.qdq.count:
        return None
    own = getattr(build, "recipe", None) or {}
    sha = own.get("model_sha256") if isinstance(own, dict) else getattr(own, "model_sha256", None)
    if sha == model.sha256:
        return None  # built from the float model itself: implicit quantization
    from ..core.qdq.placement import place_qdq

    try:
        return tuple(place_qdq(model.proto).skipped)
    except (UserError, ValueError, KeyError):
        return None  # an explanation aid only: the table works without it


class InspectStep(StepWidget):
    """The App's *Inspect* tab: a build's layer table and precision chart, latency, and the builds compared.

    Each new build in the session is shown at once; the dropdown picks another.

    Parameters
    ----------
    session : Session
    trt_available : bool
        Whether TensorRT runs here (the accuracy note says what needs it).
    out_dir : str
        Where *Save the recipe* writes ``recipe.json``.

    Attributes
    ----------
    start_box : ipywidgets.VBox
        Shown while the session has no build: :attr:`needs` and what the user can do.
    needs : ipywidgets.HTML
        What inspecting needs, and whether this machine has it.
    recipe_button : ipywidgets.Button
        Saves the recipe for a GPU machine; :attr:`recipe_note` says the command to run there.
    build_path : ipywidgets.Text
        A build folder (or ``*.graph.json``) of this model, made elsewhere; :attr:`load_button` loads it.
    choice : ipywidgets.Dropdown
        The build shown (a label of :attr:`Session.graphs`).
    stale_note : ipywidgets.HTML
        Why the build shown no longer matches the recipe ('' when it does).
    inspector : Inspector
    accuracy_note : ipywidgets.HTML
        The latency the shown build recorded, and what accuracy needs.
    accuracy : AccuracyView
        The latency every build of the session recorded, side by side.
    compare : CompareView
        The session's builds compared (two or more), in :attr:`compare_box`.
    compare_box : ipywidgets.Accordion
    """

    def __init__(self, session, trt_available: bool = False, out_dir: str = ".", **kwargs):
        self.trt_available = bool(trt_available)
        self.out_dir = out_dir
        self._load_callbacks: List[Callable[[str], bool]] = []
        self.needs = widgets.HTML(needs_html(self.trt_available))
        self.recipe_button = widgets.Button(description="Save the recipe", icon="save",
                                            tooltip="write recipe.json to build this model on a GPU machine")
        self.recipe_note = widgets.HTML()
        self.build_path = widgets.Text(placeholder="a build folder or *.graph.json of this model",
                                       layout=widgets.Layout(width="420px"))
        self.load_button = widgets.Button(description="Load my build", icon="folder-open",
                                          tooltip="a build of this model, made on a GPU machine")
        self.start_box = widgets.VBox([self.needs, widgets.HBox([self.recipe_button]), self.recipe_note,
                                       widgets.HBox([self.build_path, self.load_button])])
        self.recipe_button.on_click(lambda _: self.save_recipe())
        self.load_button.on_click(lambda _: self.load_build())
        self.choice = widgets.Dropdown(description="Build", options=[], layout=widgets.Layout(width="420px"))
        self.stale_note = widgets.HTML()
        self.inspector = Inspector()
        self.compare = CompareView()
        self.compare_box = widgets.Accordion(children=[self.compare])
        self.compare_box.set_title(0, "Compare builds (two or more)")
        self.compare_box.selected_index = None
        # Latency recorded with each build, and why accuracy needs TensorRT (see core.build_records).
        self.accuracy_note = widgets.HTML()
        self.accuracy = AccuracyView()
        super().__init__(session, [self.start_box, self.choice, self.stale_note, self.inspector,
                                   widgets.HTML("<b>Latency and accuracy</b>"), self.accuracy_note, self.accuracy,
                                   self.compare_box], **kwargs)
        self.choice.observe(lambda c: self.inspect(c["new"]) if c["new"] else None, names="value")
        session.observe(self._on_graphs, names=["graphs"])
        session.observe(self._on_stale, names=["stale"])
        self._on_graphs()

    def on_load_build(self, callback: Callable[[str], bool]) -> None:
        """Load builds typed here with ``callback(path) -> bool`` (the App: the Build step's loader)."""
        self._load_callbacks.append(callback)

    def save_recipe(self, path: Optional[str] = None) -> Optional[str]:
        """Write the session's recipe (default ``out_dir/recipe.json``) and say how to build it on a GPU machine."""
        path = path or os.path.join(self.out_dir, "recipe.json")
        written = self.session.save_recipe(path)
        if written is None:
            self.show_error(self.session.error)
            return None
        self.show_error("")
        model = self.session.model
        name = os.path.basename(str(model.path)) if model is not None else "the model"
        self.recipe_note.value = (
            f"<div style='font-size:12px'>Wrote <code>{esc(written)}</code>. On the GPU machine, with "
            f"<code>{esc(name)}</code> beside it, run<br><code>trtwidgets run recipe.json --report report.html "
            "--build-dir build/</code><br>then copy <code>build/</code> back and load it below.</div>")
        return written

    def load_build(self, path: Optional[str] = None) -> bool:
        """Load a saved build of this model (a folder or ``*.graph.json``); another model's is refused, said why."""
        path = (path or self.build_path.value).strip()
        if not path:
            self.show_error(UserError("No saved build given.", "Inspecting reads a build TensorRT made.",
                                      "Type the build folder copied from the GPU machine."))
            return False
        if self._load_callbacks:
            return all(callback(path) for callback in self._load_callbacks)
        ok = self.session.add_build(path)
        self.show_error("" if ok else self.session.error)
        return ok

    @property
    def label(self) -> Optional[str]:
        """The label of the build shown, or None."""
        return self.choice.value

    def inspect(self, label: Optional[str] = None) -> bool:
        """Show a build's layer table and precision chart (default: the latest build)."""
        from ..core.engine.build_records import recorded_latencies

        s = self.session
        if label is None:
            labels = list(s.graphs)
            label = labels[-1] if labels else None
        build = s.build_named(label) if label else None
        if build is None or label is None:
            return False

        # Layers the Q/DQ export kept float on purpose say so, with the rule (when the session holds its source).
        self.inspector.options["kept_float"] = kept_float_for(s, build)
        ok = self.inspector.load(build)
        self.accuracy_note.value = performance_html(label, build, self.trt_available)
        # Every build of the session side by side: FP32 vs FP16 vs INT8 is the question.
        self.accuracy.show(bench=recorded_latencies((k, s.build_named(k)) for k in s.graphs))
        self._show_stale(label)
        if self.choice.value != label:
            self.choice.value = label
        return ok

    def _on_graphs(self, change=None) -> None:
        labels = list(self.session.graphs or {})
        self.start_box.layout.display = "none" if labels else ""
        self.choice.layout.display = "" if labels else "none"
        self.choice.options = labels
        if labels:
            self.inspect(labels[-1])
        if len(labels) >= 2:
            builds = {k: self.session.build_named(k) for k in labels}
            self.compare.load(builds, profiles={k: getattr(b, "timings", None) for k, b in builds.items()})

    def _on_stale(self, change=None) -> None:
        if self.choice.value:
            self._show_stale(self.choice.value)

    def _show_stale(self, label: str) -> None:
        stale = self.session.stale or {}
        self.stale_note.value = stale_html({k: v for k, v in stale.items() if k == f"build:{label}"})


def needs_html(trt_available: bool) -> str:
    """What the Inspect step needs, and what the user can do without it (escaped HTML)."""
    here = ("TensorRT is installed here: build in the Build step." if trt_available else
            "This machine has no TensorRT (or no GPU), so nothing can be built here.")
    return ('<div class="trtw-needs" style="border-left:4px solid #1a73e8;padding:2px 8px;margin:4px 0">'
            "<b>Nothing to inspect yet.</b> This step shows which layers TensorRT runs in INT8 and why not the "
            "others: it reads an engine that TensorRT built, and building needs TensorRT and an NVIDIA GPU. "
            f"{esc(here)} What you can do:<ol style='margin:2px 0'>"
            "<li>Save the recipe and build it on a GPU machine (the command is shown when it is saved).</li>"
            "<li>Load a build of this model saved there (a build of another model is refused).</li></ol>"
            "Meanwhile the Plan step estimates where INT8 pays, and the Explore step shows the ranges.</div>")
