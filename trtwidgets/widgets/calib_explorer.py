"""The calibration explorer: every tensor's distribution behind its int8 scale.

A thin ipywidgets layer over :mod:`trtwidgets.core.calibration.ranges` (the numbers),
:mod:`trtwidgets.core.calibration.explorer_data` (rankings, overrides) and
:mod:`trtwidgets.plots` (the figures). It holds three ``go.FigureWidget``
objects for its whole life and redraws them in place with ``batch_update``;
recreating a FigureWidget on every click would re-send the whole figure and
lose the user's zoom.

What the user can do:

- pick a tensor by typing part of its name, from the ranked list, or by
  clicking it in the overview;
- choose the exported range method (the method buttons; every method's amax stays drawn) and move
  the percentile slider: the calibration is refitted (the session's too, so the Plan step and every
  export use the choice);
- set a per-tensor amax override (the amax box starts at the chosen method's value). It is
  validated (a bad value shows an error and changes nothing), written to the recipe
  (``recipe.calibrator.amax_overrides``, and to the session's recipe and
  calibration when the explorer belongs to a Session), and re-exports the
  calibration cache (and the Q/DQ model when a model and an output path are given).

Its state is one :class:`~trtwidgets.core.calibration.calibration.Calibration` (export method,
percentile, overrides): every export writes its ``amax``, as :func:`trtwidgets.export_qdq` does.
*Export Q/DQ model* also checks the written model on the session's held-back samples (when it has
a held-back folder) and says whether it passed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
from typing import Dict, Mapping, Optional, Sequence

import ipywidgets as widgets

from ..core.calibration.calibration import Calibration
from ..core.calibration.explorer_data import rank_tensors, search_tensors
from .explorer_opening import opening_tensor
from ..core.common.errors import UserError
from ..plots.histogram import TensorHistogramDisplay
from ..plots.int8_grid import Int8GridDisplay
from ..plots.overview import TensorOverviewDisplay
from .explorer_exports import ExplorerExports
from .explorer_parts import METHOD_HELP, as_user_error, export_methods, load_cache, starting_calibration

#: Rows of the tensor list.
_LIST_ROWS = 10


class CalibrationExplorer(ExplorerExports, widgets.VBox):
    """Explore activation histograms and range methods, and override amax per tensor.

    Parameters
    ----------
    stats : ActivationStats or path, optional
        Collected statistics (a path is read with :func:`~trtwidgets.core.calibration.stats.load_stats`);
        default: the session's.
    calibration : Calibration or path, optional
        Start from this calibration (its method, percentile and overrides) instead of ``stats`` and
        the recipe's settings; default: the session's, when it is of the same statistics.
    recipe : Recipe, optional
        Its calibrator's ``method``, ``percentile``, ``cache_path`` and
        ``amax_overrides`` are the starting point; overrides are written back
        with ``recipe.replace``. The current recipe is :attr:`recipe`.
    session : Session, optional
        When given, its ``recipe``, ``calibration`` and ``model`` are used unless passed; its
        calibration (and recipe) take every override, method and percentile chosen here.
    methods : sequence of str, optional
        Range methods whose amax lines are drawn (default: all).
    percentile : float, optional
        Starting percentile (default: the recipe's, else 99.99).
    cache_path : str, optional
        Where the calibration cache is (re-)written on override changes
        (default: the recipe's ``calibrator.cache_path``; nothing is written without one).
    model : path or LoadedModel, optional
        The float ONNX model; with ``qdq_path`` the Q/DQ model is re-exported too.
    qdq_path : str, optional
        Where the Q/DQ model is written.
    trt_cache : CalibrationCache, mapping or path, optional
        A cache written by TensorRT's own calibrator: its amax is drawn as a line.
    ranges : mapping, optional
        ``compute_ranges`` output at ``percentile`` for all methods (computed when absent).
    overview_kind : {"bar", "scatter"}
    top : int
        Bars shown in the bar overview.
    export_method : str, optional
        The exported method at the start (default: the calibration's, else the recipe's).
    """

    def __init__(self, stats=None, recipe=None, session=None, methods: Optional[Sequence[str]] = None,
                 percentile: Optional[float] = None, cache_path: Optional[str] = None, model=None,
                 qdq_path: Optional[str] = None, trt_cache=None, ranges: Optional[Mapping] = None,
                 overview_kind: str = "bar", top: int = 30, export_method: Optional[str] = None, calibration=None):
        from ..core.calibration.ranges import METHODS

        super().__init__()
        self.session = session
        model = model if model is not None or session is None else session.model
        self.recipe = recipe = recipe if recipe is not None or session is None else session.recipe
        #: The range methods whose lines are drawn.
        self._all_methods = tuple(METHODS)
        #: The explorer's state: statistics, export method, percentile and overrides; what every export writes.
        self.calibration: Calibration = starting_calibration(calibration, stats, recipe, session, percentile,
                                                             export_method, ranges)
        self.cache_path = cache_path if cache_path is not None or recipe is None else recipe.calibrator.cache_path
        self.model = model
        self.qdq_path = qdq_path
        # read a cache path once: the histogram is redrawn on every switch
        self.trt_cache = load_cache(trt_cache)
        self.last_export: Dict[str, str] = {}
        self.tensor: Optional[str] = None
        self._syncing = False

        self._lines = tuple(m for m in self._all_methods if methods is None or m in methods)
        self._build_controls(self.calibration.method)
        first = self._build_figures(overview_kind, top)
        self._wire()
        self._refresh_list()
        self.children = self._layout()
        # Not the top of the ranking as such: that is often a tiny tensor (a 160-value Reshape).
        self.select(opening_tensor(self.stats, self.overview.ranking.names) or first)

    def _build_controls(self, default_export: str) -> None:
        """The search box, tensor list, method buttons, percentile slider and override/export buttons."""
        self.search = widgets.Text(placeholder="search tensors (words, any order)", description="Find",
                                   continuous_update=True, layout=widgets.Layout(width="100%"))
        self.rank_by = widgets.ToggleButtons(options=[("by disagreement", "disagreement"), ("by error", "error")],
                                             value="disagreement", style={"button_width": "130px"})
        self.tensor_list = widgets.Select(options=[], rows=_LIST_ROWS, layout=widgets.Layout(width="100%"))
        # The method buttons choose what is exported (and what the amax box starts at), not which lines show.
        offered = export_methods()
        self.method_buttons = widgets.ToggleButtons(
            options=list(offered), value=default_export, description="export",
            tooltips=[METHOD_HELP.get(m, m) for m in offered], style={"button_width": "80px"})
        # the range must hold the recipe's percentile, or the slider would silently clamp it
        self.percentile_slider = widgets.FloatSlider(value=self.percentile, min=min(99.0, self.percentile),
                                                     max=max(99.999, self.percentile), step=0.001,
                                                     readout_format=".3f", description="percentile",
                                                     continuous_update=False)
        self.override_text = widgets.FloatText(description="amax", layout=widgets.Layout(width="200px"))
        self.apply_button = widgets.Button(description="Apply override", button_style="warning")
        self.clear_button = widgets.Button(description="Clear override")
        self.cache_button = widgets.Button(description="Write cache", disabled=not self.cache_path,
                                           tooltip="write the calibration cache for the export method plus overrides")
        self.qdq_button = widgets.Button(description="Export Q/DQ model", disabled=not self._qdq_possible())
        self.status = widgets.HTML()
        self.error = widgets.HTML(layout=widgets.Layout(display="none"))

    def _build_figures(self, overview_kind: str, top: int) -> str:
        """The histogram, ranked-tensors and INT8-grid figures (created once, updated in place); the first tensor."""
        first = next(iter(self.stats.tensors), None)
        if first is None:
            raise UserError("the statistics hold no tensors", "collection saw no float activations",
                            "collect statistics on a model with float outputs first")
        self.overview = TensorOverviewDisplay.from_ranges(self.ranges, by="disagreement", kind=overview_kind,
                                                          top=top, methods=self.methods)
        self.overview_fig = self.overview.figure(widget=True)
        first = opening_tensor(self.stats, self.overview.ranking.names) or first
        self.hist_fig = self._hist_display(first).figure(widget=True)
        self.grid_fig = Int8GridDisplay.from_stats(self.stats, self._active_amax(first) or 1.0,
                                                   tensor=first).figure(widget=True)
        # Figures get the full width: a plotly figure inside a narrow flex column is drawn at its
        # default 700 px and overflows. The histogram tab comes first so that it is laid out visible.
        self.figure_tabs = widgets.Tab(children=[self.hist_fig, self.overview_fig, self.grid_fig])
        for i, title in enumerate(("histogram", "ranked tensors", "int8 grid")):
            self.figure_tabs.set_title(i, title)
        return first

    def _wire(self) -> None:
        """Connect the controls and figures to their handlers."""
        self.search.observe(self._on_search, "value")
        self.rank_by.observe(self._on_rank_by, "value")
        self.tensor_list.observe(self._on_list, "value")
        self.percentile_slider.observe(self._on_percentile, "value")
        self.method_buttons.observe(self._on_method, "value")
        self.apply_button.on_click(lambda _b: self.apply_override())
        self.clear_button.on_click(lambda _b: self.clear_override())
        self.cache_button.on_click(lambda _b: self._write_cache_clicked())
        self.qdq_button.on_click(lambda _b: self.export_qdq())
        self.overview_fig.data[0].on_click(self._on_overview_click)
        self.figure_tabs.observe(lambda _c: self._refresh_grid(), "selected_index")

    def _layout(self) -> list:
        """The explorer's children: title, list and controls side by side, messages, figures."""
        return [
            widgets.HTML(f"<b>Calibration explorer</b> — {len(self.stats.tensors)} tensors, "
                         f"{int(self.stats.samples)} samples"),
            widgets.HBox([
                widgets.VBox([self.search, self.rank_by, self.tensor_list], layout=widgets.Layout(width="45%")),
                widgets.VBox([self.method_buttons, self.percentile_slider, self.override_text,
                              widgets.HBox([self.apply_button, self.clear_button]),
                              widgets.HBox([self.cache_button, self.qdq_button])],
                             layout=widgets.Layout(width="55%", padding="0 0 0 12px"))]),
            self.error, self.status,
            self.figure_tabs,
        ]

    # ------------------------------------------------------------------ state

    # The calibration's parts, by their explorer names.
    stats = property(lambda self: self.calibration.stats, doc="The statistics explored.")
    ranges = property(lambda self: self.calibration.ranges, doc="Tensor -> method -> RangeResult at the percentile.")
    percentile = property(lambda self: self.calibration.percentile)
    overrides = property(lambda self: dict(self.calibration.overrides), doc="Tensor -> amax set by hand.")

    @property
    def methods(self) -> tuple:
        """The range methods whose amax lines are drawn, in canonical order."""
        return self._lines

    @property
    def method(self) -> str:
        """The exported method (the calibration's)."""
        return self.calibration.method

    def _active_amax(self, name: str) -> Optional[float]:
        return self.calibration.amax.get(name)

    def _hist_display(self, name: str) -> TensorHistogramDisplay:
        methods = self.methods
        active = "override" if name in self.overrides else (self.method if self.method in methods else None)
        return TensorHistogramDisplay.from_stats(self.stats, name, methods=methods, percentile=self.percentile,
                                                 trt_cache=self.trt_cache, override=self.overrides.get(name),
                                                 active=active, results=self.ranges.get(name))

    # ------------------------------------------------------------------ actions (public, used by handlers)

    def select(self, name: str) -> None:
        """Show tensor ``name`` in every figure and control."""
        if name not in self.stats.tensors:
            self._show_error(UserError(f"no statistics for tensor {name!r}", None, "pick one from the list"))
            return
        self.tensor = name
        self._hide_error()
        self._refresh_tensor()
        with self._sync():
            if name in self.tensor_list.options:
                self.tensor_list.value = name
        self.overview = self.overview.with_selected(name)
        self.overview.update(self.overview_fig)

    def set_percentile(self, percentile: float) -> None:
        """Recompute the percentile method for every tensor and redraw (the session's calibration too)."""
        s = self.session
        if self._shares_session() and s.recompute_ranges(float(percentile)):
            self.adopt(s.calibration)
            return
        self.calibration = self.calibration.refit(percentile=float(percentile))
        self._refresh_overview()
        self._refresh_tensor()

    def set_method(self, method: str) -> bool:
        """Export ``method``'s ranges: the calibration is refitted (the session's too) and redrawn."""
        s = self.session
        if self._shares_session():
            if not s.set_method(method):
                self._show_error(UserError(f"cannot export {method!r} ranges", s.error, "choose another method"))
                return False
            self.adopt(s.calibration)
            return True
        try:
            new = self.calibration.refit(method=method)
        except UserError as e:
            self._show_error(e)
            return False
        self.adopt(new)
        return True

    def adopt(self, calibration: Calibration) -> None:
        """Show ``calibration`` (of the same statistics: another method, percentile or overrides) in every control."""
        if calibration is self.calibration:
            return
        self.calibration = calibration
        if self.session is not None and self.recipe is not None and self.session.recipe is not None:
            self.recipe = self.session.recipe
        with self._sync():
            self.method_buttons.value = calibration.method
            self.percentile_slider.min = min(self.percentile_slider.min, calibration.percentile)
            self.percentile_slider.max = max(self.percentile_slider.max, calibration.percentile)
            self.percentile_slider.value = calibration.percentile
        self._refresh_overview()
        self._refresh_tensor()

    def _shares_session(self) -> bool:
        """True when this explorer's statistics are the session's: its choices are then the session's."""
        s = self.session
        return s is not None and s.calibration is not None and s.calibration.stats is self.calibration.stats

    def apply_override(self, value=None) -> bool:
        """Override the current tensor's amax (default: the amax box); False (and an error panel) when refused."""
        value = self.override_text.value if value is None else value
        tensor = self.tensor
        if tensor is None:
            self.status.value = "Choose a tensor first."
            return False
        try:
            new = self.calibration.with_override(tensor, value)
        except UserError as e:
            self._show_error(e)
            return False
        return self._commit(new, f"amax of {tensor} set to {new.overrides[tensor]:.6g}")

    def clear_override(self) -> bool:
        """Drop the current tensor's override."""
        if self.tensor is None or self.tensor not in self.overrides:

            self.status.value = f"{html.escape(str(self.tensor))} has no override."
            return True
        return self._commit(self.calibration.without_override(self.tensor), f"override of {self.tensor} cleared")

    def set_trt_cache(self, trt_cache) -> bool:
        """Draw another TensorRT cache's amax (a CalibrationCache, mapping, path, or None to hide the line).

        A cache that cannot be read shows an error and keeps the line drawn before.
        """
        try:
            cache = load_cache(trt_cache)
        except (UserError, OSError) as e:
            self._show_error(as_user_error(e, f"could not read the TensorRT cache {trt_cache}",
                                            "pass a calibration cache written by TensorRT"))
            return False
        self.trt_cache = cache
        self._refresh_tensor()
        return True

    # ------------------------------------------------------------------ internals

    def _commit(self, new: Calibration, message: str) -> bool:
        """Make ``new`` (other overrides) the explorer's calibration, and write what follows from it."""
        old = self.calibration
        try:
            recipe = self._recipe_with(new.overrides)
            self.calibration = new
            written = self.export_cache()
        except (UserError, OSError) as e:
            # nothing half-done: the previous overrides and recipe stay in force
            self.calibration = old
            self._show_error(as_user_error(e, f"could not write the calibration cache {self.cache_path}",
                                           "choose a writable cache path"))
            self._refresh_tensor()
            return False
        self.recipe = recipe
        if self.session is not None:
            self._share_with_session(recipe)
        self._hide_error()
        parts = [html.escape(message)]
        parts.append(f"cache written to <code>{html.escape(written)}</code>" if written
                     else "no cache path set, no cache written")
        if self._qdq_possible():
            try:
                parts.append(f"Q/DQ model written to <code>{html.escape(self._write_qdq())}</code>")
            except (UserError, OSError) as e:
                # the override itself is valid and kept; only this export failed, and the panel says so
                self._show_error(as_user_error(e, f"could not write the Q/DQ model {self.qdq_path}",
                                               "choose a writable path for the Q/DQ model"))
        self.status.value = "; ".join(parts) + "."
        self._refresh_tensor()
        return True

    def _recipe_with(self, overrides: Mapping[str, float]):
        if self.recipe is None:
            return None
        cal = dataclasses.replace(self.recipe.calibrator, amax_overrides=dict(overrides))
        return self.recipe.replace(calibrator=cal)

    def _share_with_session(self, recipe) -> None:
        """The session's recipe and calibration take the explorer's overrides (what its Plan and exports read)."""
        s = self.session
        if s.stats is self.calibration.stats:
            s.calibration = self.calibration
        if recipe is not None:
            s.recipe = recipe

    def _refresh_tensor(self) -> None:
        name = self.tensor
        if name is None:
            return
        self._hist_display(name).update(self.hist_fig)
        amax = self._active_amax(name)
        with self._sync():
            self.override_text.value = float(amax) if amax is not None else 0.0
        self._refresh_grid()

    def _refresh_grid(self) -> None:
        # the grid has 128 shapes: only redraw it when its tab is showing
        if self.tensor is None or self.figure_tabs.selected_index != 2:
            return
        amax = self._active_amax(self.tensor)
        if amax is None:
            return
        label = "override" if self.tensor in self.overrides else self.method
        Int8GridDisplay.from_stats(self.stats, amax, tensor=self.tensor, label=label).update(self.grid_fig)

    def _refresh_overview(self) -> None:
        by = self.rank_by.value
        exported = self.method if by == "error" else None
        # auto ranks each tensor by the method it exports (its choice); a method not drawn, by the worst drawn
        chosen = {n: c.method for n, c in self.calibration.choices.items()} if exported == "auto" else None
        method = exported if exported in self.methods else None
        try:
            ranking = rank_tensors(self.ranges, by=by, method=method, methods=self.methods or None, chosen=chosen)
        except UserError as e:
            self._show_error(e)
            return
        self.overview = TensorOverviewDisplay(ranking, self.overview.kind, self.overview.top, self.tensor)
        self.overview.update(self.overview_fig)
        self._refresh_list()

    def _refresh_list(self) -> None:
        names = search_tensors(self.overview.ranking.names, self.search.value)
        with self._sync():
            self.tensor_list.options = names
            self.tensor_list.value = self.tensor if self.tensor in names else None

    def _show_error(self, e: UserError) -> None:
        parts = [f"<b>{html.escape(e.what)}</b>"]
        if e.why:
            parts.append(f"Why: {html.escape(e.why)}")
        if e.fix:
            parts.append(f"Fix: {html.escape(e.fix)}")
        self.error.value = ("<div style='border-left:4px solid #d62728;padding:4px 8px;background:#fdecea'>"
                            + "<br>".join(parts) + "</div>")
        self.error.layout.display = "block"

    def _hide_error(self) -> None:
        self.error.value = ""
        self.error.layout.display = "none"

    @property
    def error_message(self) -> str:
        """The error panel's text ('' when no error is shown)."""
        return self.error.value

    @contextlib.contextmanager
    def _sync(self):
        """Changes made inside are the explorer's own: the handlers they trigger do nothing."""
        prev, self._syncing = self._syncing, True
        try:
            yield
        finally:
            self._syncing = prev

    # ------------------------------------------------------------------ handlers

    def _on_search(self, change) -> None:
        self._refresh_list()
        if len(self.tensor_list.options) == 1:
            self.select(self.tensor_list.options[0])

    def _on_rank_by(self, change) -> None:
        self._refresh_overview()

    def _on_list(self, change) -> None:
        if not self._syncing and change["new"]:
            self.select(change["new"])

    def _on_percentile(self, change) -> None:
        if not self._syncing:
            self.set_percentile(change["new"])

    def _on_method(self, change) -> None:
        if not self._syncing and change["new"] != self.method and not self.set_method(change["new"]):
            with self._sync():
                self.method_buttons.value = self.method

    def _on_overview_click(self, trace, points, selector) -> None:
        if points.point_inds:
            self.select(trace.customdata[points.point_inds[0]])
            # choosing a tensor in the ranking opens its histogram
            self.figure_tabs.selected_index = 0


__all__ = ["CalibrationExplorer"]
