"""Step 4 of the notebook: build the engine, watch it progress, read the result.

The panel only wires :func:`trtwidgets.trt.build.build` to widgets: a Build
button, a progress bar with the current phase (TensorRT >= 10 reports phases and
steps; 8.6 phases come from its log, so the bar counts steps without a total),
the log as it arrives, and the result or the error (what, why, fix and
TensorRT's decisive lines). The build runs in a thread so the notebook stays
responsive. Without TensorRT the button is disabled and the panel says what to
install; every other step of the notebook keeps working.

:class:`BuildStep` is the App's *Build* tab: this panel, and saved builds (made elsewhere,
e.g. on a GPU machine) loaded into the session.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional

import ipywidgets as widgets
import traitlets

from ..core.common.errors import BuildError, UserError
from .app_tabs import builds_html
from .html import disclosure, error_html, esc, html_table
from .step import StepWidget

_MAX_LOG_LINES = 400
_SEVERITY_COLORS = {"INTERNAL_ERROR": "#d93025", "ERROR": "#d93025", "WARNING": "#e37400", "INFO": "#444",
                    "VERBOSE": "#888"}


def log_html(lines, limit: int = _MAX_LOG_LINES) -> str:
    """Log lines as escaped, severity-coloured HTML (the last ``limit`` lines)."""
    lines = list(lines)[-limit:]
    rows = "".join(f'<div style="color:{_SEVERITY_COLORS.get(line.severity, "#444")}">{esc(line.format())}</div>'
                   for line in lines)
    return f'<div style="font-family:monospace;font-size:11px;white-space:pre-wrap">{rows}</div>'


def result_html(result) -> str:
    """A finished build as a small escaped table."""
    rows = [("engine", f"{result.engine_path} ({result.engine_bytes / 1e6:.2f} MB)"),
            ("build time", f"{result.build_seconds:.1f} s"),
            ("TensorRT", result.trt_version),
            ("GPU", result.gpu_name or "unknown"),
            ("inspector JSON", result.inspector_json_path),
            ("calibration cache", result.calibration_cache_path or "-"),
            ("log", f"{result.log_path} ({len(result.log)} lines, "
                    f"{sum(1 for x in result.log if x.severity == 'WARNING')} warnings)")]
    return html_table(rows, caption=f"Build in {result.out_dir}")


def build_error_html(err) -> str:
    """An error panel; a BuildError adds its lint codes and TensorRT's decisive lines."""
    out = error_html(err)
    codes = err.codes if isinstance(err, BuildError) else ()
    if codes:
        out += f"<div><b>Cause:</b> {esc(', '.join(codes))}</div>"
    lines = err.log_lines if isinstance(err, BuildError) else ()
    if lines:
        out += ('<div><b>TensorRT said:</b></div><pre style="font-size:11px;white-space:pre-wrap">'
                + esc("\n".join(lines)) + "</pre>")
    return out


class BuildPanel(widgets.VBox):
    """Build button, progress, log and result.

    Parameters
    ----------
    session : Session, optional
        The build uses ``session.recipe`` and appends its result to ``session.builds``.
    recipe : Recipe, optional
        Used when there is no session.
    out_dir : str, optional
        Passed to ``build``; by default each build gets ``builds/<time>-<hash>/``.
    build_fn : callable, optional
        ``build(recipe, out_dir=..., progress=..., on_log=..., cancel=...)``; default
        :func:`trtwidgets.trt.build.build`.

    Attributes
    ----------
    button, cancel_button : ipywidgets.Button
    bar : ipywidgets.IntProgress
    phase : ipywidgets.Label
    log_view : ipywidgets.HTML
    result : ipywidgets.HTML
    last_result, last_error
        The last build's result or error.
    """

    def __init__(self, session=None, recipe=None, out_dir: Optional[str] = None,
                 build_fn: Optional[Callable] = None, **kwargs):
        from .. import trt

        self.session = session
        self._recipe = recipe
        self.out_dir = out_dir
        self._build_fn = build_fn
        self.button = widgets.Button(description="Build", button_style="primary", icon="cogs")
        self.cancel_button = widgets.Button(description="Cancel", disabled=True, icon="stop")
        self.bar = widgets.IntProgress(value=0, min=0, max=1, layout=widgets.Layout(width="50%"))
        self.phase = widgets.Label("")
        self.log_view = widgets.HTML("")
        self.log_box = widgets.Accordion(children=[self.log_view])
        self.log_box.set_title(0, "Build log")
        self.result = widgets.HTML("")
        self.last_result: Any = None
        self.last_error: Any = None
        self._lines: List = []
        self._cancel = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.available = trt.available() or build_fn is not None
        if not self.available:
            self.button.disabled = True
            # One line to act on; the install details behind a disclosure.
            self.result.value = error_html(UserError(
                "TensorRT is not installed here, so this step cannot build engines.", None,
                "load a saved build below, or build on a GPU machine (every other step works here).")) + disclosure(
                "How to install TensorRT", esc(trt.INSTALL_ADVICE))
        self.button.on_click(lambda _: self.start())
        self.cancel_button.on_click(lambda _: self._cancel.set())
        super().__init__([widgets.HBox([self.button, self.cancel_button, self.bar, self.phase]),
                          self.result, self.log_box], **kwargs)

    @property
    def recipe(self):
        return self.session.recipe if self.session is not None else self._recipe

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- callbacks from the build (any thread) ------------------------------------------------------

    def on_progress(self, event) -> None:
        """Show a :class:`~trtwidgets.core.common.progress.ProgressEvent`."""
        if event.parent is not None and event.kind != "step":
            return
        if event.kind == "start":
            self.bar.max = max(int(event.total or 0), 1)
            self.bar.value = 0
            self.bar.bar_style = "info" if event.total else ""
        elif event.kind == "step":
            if event.total:
                self.bar.max = max(int(event.total), 1)
                self.bar.value = min(int(event.step), self.bar.max)
            else:
                # No total (TensorRT 8.6): the bar cycles so that it visibly moves.
                self.bar.value = int(event.step) % (self.bar.max + 1) if self.bar.max > 1 else 0
        detail = f" - {event.detail}" if event.detail else ""
        steps = f" {event.step}/{event.total}" if event.total else (f" {event.step}" if event.step else "")
        self.phase.value = f"{event.phase}{steps}{detail}" if event.kind != "finish" else f"{event.phase} done"

    def on_log(self, line) -> None:
        """Append one :class:`~trtwidgets.trt.logger.LogLine` to the log pane."""
        self._lines.append(line)
        if line.severity in ("INTERNAL_ERROR", "ERROR", "WARNING") or len(self._lines) % 20 == 0:
            self.log_view.value = log_html(self._lines)

    # -- running ---------------------------------------------------------------------------------

    def start(self, wait: bool = False) -> None:
        """Start a build of the current recipe (in a thread; ``wait=True`` joins it)."""
        if self.running:
            return
        recipe = self.recipe
        if recipe is None:
            self.result.value = error_html(UserError("There is no recipe to build.",
                                                     "The build step builds the session's recipe.",
                                                     "Load a model and choose flags first."))
            return
        self._lines = []
        self._cancel.clear()
        self.log_view.value = ""
        self.result.value = ""
        self.button.disabled = True
        self.cancel_button.disabled = False
        self._thread = threading.Thread(target=self._run, args=(recipe,), daemon=True)
        self._thread.start()
        if wait:
            self._thread.join()

    def _run(self, recipe) -> None:
        fn = self._build_fn
        if fn is None:
            from ..trt.build import build
            fn = build

        try:
            result = fn(recipe, out_dir=self.out_dir, progress=self.on_progress, on_log=self.on_log,
                        cancel=self._cancel)
        except UserError as err:
            self.last_error, self.last_result = err, None
            self.result.value = build_error_html(err)
            self.phase.value = "failed"
            self.bar.bar_style = "danger"
        except Exception as err:
            self.last_error, self.last_result = err, None
            self.result.value = error_html(f"Unexpected {type(err).__name__}: {err}")
            self.phase.value = "failed"
            self.bar.bar_style = "danger"
        else:
            self.last_error, self.last_result = None, result
            self.result.value = result_html(result)
            self.phase.value = "done"
            self.bar.bar_style = "success"
            self.bar.value = self.bar.max
            if self.session is not None:
                if hasattr(self.session, "add_build"):
                    self.session.add_build(result)
                else:
                    self.session.builds = tuple(self.session.builds) + (result,)
        finally:
            self.log_view.value = log_html(self._lines)
            self.button.disabled = not self.available
            self.cancel_button.disabled = True


class BuildStep(StepWidget):
    """The App's *Build* tab: build with TensorRT, or load a saved build; the session's builds.

    Parameters
    ----------
    session : Session
        Builds are added to it; its recipe is what the panel builds.

    Attributes
    ----------
    build_panel : BuildPanel
    saved_choice : ipywidgets.Dropdown
        The saved builds found of the loaded model (or of its Q/DQ export), see
        :meth:`~trtwidgets.widgets.session.Session.saved_builds`: another model's are never offered.
    saved_path : ipywidgets.Text
        Or a build folder / ``*.graph.json``.
    load_build_button, use_recipe_button : ipywidgets.Button
    builds_view : ipywidgets.HTML
        The session's builds, one row each, with whether each still matches the recipe.
    inspected : str or None
        The build the inspector shows (set by the App): *Use its recipe* takes that build's.
    """

    inspected = traitlets.Unicode(None, allow_none=True)

    def __init__(self, session, **kwargs):
        self.build_panel = BuildPanel(session=session, out_dir=None)
        self.saved_choice = widgets.Dropdown(description="Saved build", options=[], layout=widgets.Layout(width="420px"))
        self.saved_path = widgets.Text(placeholder="or a build folder / *.graph.json",
                                       layout=widgets.Layout(width="360px"))
        self.load_build_button = widgets.Button(description="Load saved build", icon="folder-open")
        self.use_recipe_button = widgets.Button(description="Use its recipe", icon="clone",
                                                tooltip="make the inspected build's recipe the session's")
        self.builds_view = widgets.HTML()
        super().__init__(session, [
            self.build_panel, widgets.HTML("<b>Saved builds</b> (inspect builds made elsewhere, e.g. on a GPU machine)"),
            widgets.HBox([self.saved_choice, self.saved_path, self.load_build_button, self.use_recipe_button]),
            self.builds_view], **kwargs)
        self.load_build_button.on_click(lambda _: self.load_saved_build())
        self.use_recipe_button.on_click(lambda _: self.use_build_recipe())
        session.observe(self._on_builds, names=["graphs", "stale"])
        session.observe(lambda _c: self.refresh_saved(), names=["model"])
        self.refresh_saved()
        self._on_builds()

    def load_saved_build(self, source: Any = None) -> bool:
        """Add a saved build to the session (a name from the list, a folder, or ``*.graph.json``).

        A build of another model than the loaded one is refused, and the error panel says whose it is.
        """
        from ..core.engine.saved_build import find_saved_builds

        if source is None:
            source = self.saved_path.value.strip() or self.saved_choice.value
        if not source:
            self.show_error(UserError("No saved build chosen.", None, "Pick one from the list or type a folder."))
            return False
        known = find_saved_builds()
        if isinstance(source, str) and source in known:
            source = known[source]
        with self.noting("While reading the build"):
            ok = self.session.add_build(source)
        self.show_error("" if ok else self.session.error)
        return ok

    def use_build_recipe(self, label: Optional[str] = None) -> bool:
        """Continue from a build's own recipe (default: the inspected build, else the latest)."""
        labels = list(self.session.graphs)
        label = label or self.inspected or (labels[-1] if labels else None)
        ok = bool(label) and self.session.use_build_recipe(label)
        self.show_error("" if ok else (self.session.error or "No build to take a recipe from."))
        return ok

    def refresh_saved(self) -> None:
        """List the saved builds of the loaded model again (an INT8 one selected first)."""
        names = list(self.session.saved_builds())
        self.saved_choice.options = names
        if names:
            self.saved_choice.value = next((n for n in names if "int8" in n), names[0])

    def _on_builds(self, change=None) -> None:
        self.builds_view.value = builds_html(self.session.graphs or {}, self.session.stale)
