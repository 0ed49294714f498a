"""The app's tabs: their titles, the widgets of each step laid out, and the HTML they render.

:class:`~trtwidgets.widgets.app.App` holds the actions and the wiring to the
session; this module only assembles what each tab shows, so a new step (the
*Plan* step) is one builder here and one entry in :data:`STEP_KEYS`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import ipywidgets as widgets

from .html import esc, html_table

#: Step keys in tab order; the tab titles are :data:`STEPS`.
STEP_KEYS = ("load", "flags", "calibrator", "calibrate", "plan", "build", "inspect", "explore")
#: Tab titles, short enough for ipywidgets' tab bar (longer ones are cut: "3 Calibrator & pro").
STEP_TITLES = {"load": "Load", "flags": "Flags", "calibrator": "Profiles", "calibrate": "Calibrate",
               "plan": "Plan", "build": "Build", "inspect": "Inspect", "explore": "Explore"}
STEPS = tuple(f"{i + 1} {STEP_TITLES[k]}" for i, k in enumerate(STEP_KEYS))
LOAD, FLAGS, CALIBRATOR, CALIBRATE, PLAN, BUILD, INSPECT, EXPLORE = range(len(STEP_KEYS))
#: What each tab holds, for the title's tooltip-free reader: the header line of the app.
HEADER = ("<b>trtwidgets</b>: model &rarr; flags &rarr; calibrator &amp; profiles &rarr; calibrate &rarr; plan "
          "&rarr; build &rarr; inspect &rarr; explore")
#: Tabs wide enough for their titles, in every theme (ipywidgets fixes tab width and cuts the rest).
TAB_CSS = ("<style>.trtw-app .lm-TabBar-tab, .trtw-app .p-TabBar-tab "
           "{flex: 0 0 auto !important; min-width: fit-content !important; max-width: none !important;}</style>")


def banner(kind: str, html: str) -> str:
    """A coloured note (``warning``, ``info`` or ``ok``); ``html`` must be escaped by the caller."""
    color = {"warning": "#e37400", "info": "#1a73e8", "ok": "#188038"}[kind]
    return (f'<div class="trtw-{kind}" style="border-left:4px solid {color};padding:2px 8px;margin:4px 0">'
            f"{html}</div>")


def stale_html(stale) -> str:
    """The banner naming stale results and why ('' when all are current)."""
    if not stale:
        return ""
    items = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in sorted(stale.items()))
    return banner("warning", "<b>Out of date</b> (kept; redo the step to refresh it):"
                             f"<ul style='margin:2px 0'>{items}</ul>")


def problems_html(problems) -> str:
    """The recipe's problems as they stand ('' when none)."""
    if not problems:
        return ""
    return banner("warning", "<b>The recipe as it stands:</b><ul style='margin:2px 0'>"
                  + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul>")


def load_tab(app) -> widgets.Widget:
    app.recipe_path = widgets.Text(placeholder="recipe.json", description="Recipe", layout=widgets.Layout(width="420px"))
    app.save_recipe_button = widgets.Button(description="Save recipe", icon="save")
    app.load_recipe_button = widgets.Button(description="Load recipe", icon="folder-open")
    app.recipe_status = widgets.HTML()
    app.save_recipe_button.on_click(lambda _: app.save_recipe())
    app.load_recipe_button.on_click(lambda _: app.load_recipe())
    return widgets.VBox([app.loader, widgets.HBox([app.recipe_path, app.save_recipe_button, app.load_recipe_button]),
                         app.recipe_status])


def calibrate_tab(app) -> widgets.Widget:
    from .calib_data import DataBox

    app.data_box = DataBox()
    app.data_path = app.data_box.path
    app.max_samples = widgets.BoundedIntText(value=0, min=0, max=10 ** 9, description="Samples (0: all)",
                                             style={"description_width": "initial"}, layout=widgets.Layout(width="220px"))
    app.calibrate_button = widgets.Button(description="Collect statistics", button_style="primary", icon="play")
    app.calibrate_output = widgets.Output()  # tqdm's progress bar renders here
    app.calibration_view = widgets.HTML()
    app.calibrate_button.on_click(lambda _: app.calibrate())
    return widgets.VBox([
        widgets.HTML("Runs the float model with ONNX Runtime on the CPU over the calibration data, at the "
                     "calibration profile's opt shapes, and keeps a histogram of every activation."),
        widgets.HBox([app.data_box.path, app.max_samples, app.calibrate_button]),
        app.data_box.note, app.data_box.adapt_box, app.calibrate_output, app.calibration_view])


def plan_tab(app) -> widgets.Widget:
    """The *Plan* step: ``trtwidgets.widgets.plan_step.PlanStep(session)`` once that module exists."""
    try:
        from .plan_step import PlanStep
    except ImportError:
        app.plan_step = None
        return widgets.VBox([widgets.HTML("<i>The planner (where INT8 pays, from the statistics) is not part of "
                                          "this version yet.</i>")])
    import os

    app.plan_step = PlanStep(app.session, out_dir=os.path.join(app.out_dir, "plan"))
    return widgets.VBox([app.plan_step])


def build_tab(app) -> widgets.Widget:
    from .build_panel import BuildPanel

    app.build_panel = BuildPanel(session=app.session, out_dir=None)
    app.saved_choice = widgets.Dropdown(description="Saved build", options=[], layout=widgets.Layout(width="420px"))
    app.saved_path = widgets.Text(placeholder="or a build folder / *.graph.json", layout=widgets.Layout(width="360px"))
    app.load_build_button = widgets.Button(description="Load saved build", icon="folder-open")
    app.load_build_button.on_click(lambda _: app.load_saved_build())
    app.use_recipe_button = widgets.Button(description="Use its recipe", icon="clone",
                                           tooltip="make the inspected build's recipe the session's")
    app.use_recipe_button.on_click(lambda _: app.use_build_recipe())
    app.builds_view = widgets.HTML()
    return widgets.VBox([app.build_panel,
                         widgets.HTML("<b>Saved builds</b> (inspect builds made elsewhere, e.g. on a GPU machine)"),
                         widgets.HBox([app.saved_choice, app.saved_path, app.load_build_button, app.use_recipe_button]),
                         app.builds_view])


def inspect_tab(app) -> widgets.Widget:
    from .accuracy import AccuracyView
    from .compare import CompareView
    from .inspector import Inspector

    app.inspect_choice = widgets.Dropdown(description="Build", options=[], layout=widgets.Layout(width="420px"))
    app.inspect_stale = widgets.HTML()
    app.inspector = Inspector()
    app.inspect_choice.observe(lambda c: app.inspect(c["new"]) if c["new"] else None, names="value")
    app.compare = CompareView()
    app.compare_box = widgets.Accordion(children=[app.compare])
    app.compare_box.set_title(0, "Compare builds (two or more)")
    app.compare_box.selected_index = None
    # Latency recorded with each build, and why accuracy needs TensorRT (see core.build_records).
    app.accuracy_note = widgets.HTML()
    app.accuracy = AccuracyView()
    return widgets.VBox([app.inspect_choice, app.inspect_stale, app.inspector,
                         widgets.HTML("<b>Latency and accuracy</b>"), app.accuracy_note, app.accuracy, app.compare_box])


def calibration_html(session) -> str:
    """The calibrate step's result: samples, tensors, and the ten tensors with the lowest SQNR."""
    from ..core.calibration.ranges import METHODS

    s = session
    cal = s.calibration
    ranges = s.ranges or {}
    method = getattr(cal, "method", "entropy")
    rows = []
    worst = sorted(ranges.items(), key=lambda kv: kv[1][method].sqnr_db if method in kv[1] else 0)[:10]
    for name, per in worst:
        row: Dict[str, Any] = {"tensor": name}
        row.update({m: f"{per[m].amax:.4g}" for m in METHODS if m in per})
        row["SQNR dB"] = f"{per[method].sqnr_db:.1f}" if method in per else ""
        rows.append(row)
    head = (f"{s.stats.samples} samples from {esc(getattr(cal, 'data', '') or 'the given data')}, "
            f"{len(s.stats.tensors)} tensors; exported method <b>{esc(method)}</b>. "
            f"Explore every tensor in step {EXPLORE + 1}.")
    columns = ["tensor"] + list(METHODS) + ["SQNR dB"]
    return banner("ok", head) + html_table(rows, columns, caption=f"The 10 tensors with the lowest {method} SQNR "
                                                                  "(amax per method)")


def performance_html(label: str, build, trt_available: bool) -> str:
    """The latency a build recorded, and what accuracy needs."""
    from ..core.engine.build_records import performance_record

    rec = performance_record(build, trt_available)
    meta = getattr(build, "meta", None) or {}
    where = " on ".join(x for x in (f"TensorRT {meta['trt_version']}" if meta.get("trt_version") else "",
                                    meta.get("gpu_name") or "") if x)
    if rec.latency is not None:
        head = (f"<b>{esc(label)}</b> recorded a median latency of {rec.latency.median_ms:.4f} ms "
                f"({rec.latency.runs} runs{', ' + esc(where) if where else ''}). ")
    else:
        head = f"<b>{esc(label)}</b> recorded no latency. "
    return banner("info", head + esc(rec.note))


def builds_html(graphs, stale) -> str:
    """The session's builds, one row each."""
    if not graphs:
        return ""
    return html_table([{"build": k, "layers": len(g.layers), "status": stale.get(f"build:{k}", "current")}
                       for k, g in graphs.items()], ["build", "layers", "status"], caption="Builds in this session")


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
    from ..core.common.errors import UserError
    from ..core.qdq.placement import plan_qdq

    try:
        return tuple(plan_qdq(model.proto).skipped)
    except (UserError, ValueError, KeyError):
        return None  # an explanation aid only: the table works without it
