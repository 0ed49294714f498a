"""The *Plan* step: search for the fastest Q/DQ quantization that keeps an accuracy target.

Thin: the search is :func:`trtwidgets.core.plan.planner.plan` (what ``tw.plan`` and ``trtwidgets plan``
call), the chart :class:`trtwidgets.plots.pareto.PlanParetoDisplay`. The step plans with the
session's calibration as it is (method, percentile, the explorer's overrides) and its held-back
folder, so the App, the CLI and the API give the same plan for the same model, data and held-back
data. The search runs in a thread (the kernel stays responsive), shows its progress per phase, and
*Cancel* stops it within seconds keeping what was found: the partial plan is shown, marked
interrupted. The result is the session's :attr:`~trtwidgets.widgets.session.Session.plan` (it goes
stale when the model, the data, the calibration or the held-back data change).

Clicking a point of the chart shows the layers that candidate keeps in high precision and why;
*Export the pick* writes its Q/DQ model. Model-provided names are escaped. *Measure on this GPU*
builds FP16, implicit INT8 and the top candidates and picks by measured time
(:mod:`trtwidgets.trt.plan_measure`); the status line shows builds done and left.
"""

from __future__ import annotations

import html
import os
import threading
from pathlib import Path
from typing import Any, Optional, Union

import ipywidgets as widgets

from ..core.common.errors import UserError
from .app_tabs import stale_html
from .html import error_html, esc
from .step import StepWidget


class PlanStep(StepWidget):
    """Plan explicit quantization for the session's model.

    Parameters
    ----------
    session : Session
        Supplies the model, the recipe's calibration data and TensorRT version, the calibration and
        the held-back folder; receives the plan.
    data : optional
        Samples to plan on (overrides the recipe's calibration data; the bundled demo model, without a
        held-back folder, uses its crops and held-back scikit-image crops).
    out_dir : path, optional
        Where *Export the pick* writes ``model.qdq.onnx`` and ``plan.json``.

    Attributes
    ----------
    target, metric, batch, gpu, measure
        The search's settings.
    run_button, cancel_button, export_button : ipywidgets.Button
    progress : ipywidgets.IntProgress
        Units of work of the phase running (range methods, layer costs ...).
    phase : ipywidgets.HTML
        The phase running, and its count.
    status, table, detail : ipywidgets.HTML
        The plan's reason (or the error), its table, the clicked candidate.
    stale_note : ipywidgets.HTML
        Why the plan shown no longer matches the session ('' when it does).
    """

    def __init__(self, session, data: Any = None, out_dir: Union[str, os.PathLike, None] = None, **kwargs):

        self.data = data
        self.out_dir = Path(out_dir) if out_dir is not None else Path("trtwidgets_plan")
        self.target = widgets.BoundedFloatText(value=0.99, min=0.0, max=1.0, step=0.001, description="min cosine",
                                               style={"description_width": "initial"})
        self.batch = widgets.BoundedIntText(value=1, min=1, max=4096, description="engine batch",
                                            style={"description_width": "initial"})
        # A task metric by name (detection, top1-agreement, mask-iou:0.3, package.module:function): it replaces the cosine.
        self.metric = widgets.Text(value="", placeholder="detection, top1-agreement, pkg.mod:fn",
                                   description="task metric", style={"description_width": "initial"})
        self.gpu = widgets.Dropdown(options=["h100", "h200", "a100", "l4"], value="h100", description="GPU",
                                    layout=widgets.Layout(width="160px"))
        self.measure = widgets.Checkbox(value=False, description="measure on this GPU", indent=False,
                                        layout=widgets.Layout(width="180px"))
        self.run_button = widgets.Button(description="Plan", button_style="primary", icon="search")
        self.cancel_button = widgets.Button(description="Cancel", icon="stop", disabled=True,
                                            tooltip="stop the search; the candidates found so far are kept")
        self.export_button = widgets.Button(description="Export the pick", disabled=True, icon="save")
        self.progress = widgets.IntProgress(value=0, min=0, max=1, layout=widgets.Layout(width="240px"))
        self.phase = widgets.HTML()
        self.inputs_note = widgets.HTML()
        self.stale_note = widgets.HTML()
        self.status = widgets.HTML()
        self.table = widgets.HTML()
        self.chart_box = widgets.Box()
        self.detail = widgets.HTML()
        self.chart: Any = None
        self._cancel = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._finished = False
        self.run_button.on_click(lambda _: self.start())
        self.cancel_button.on_click(lambda _: self.cancel())
        self.export_button.on_click(lambda _: self.export())
        intro = widgets.HTML("<div>Finds which layers to quantize so that the engine is faster than FP16 and "
                             "keeps the accuracy target, measured with ONNX Runtime on held-back samples, with the "
                             "session's calibration (the explorer's method and overrides included). Latency is a "
                             "cost-model estimate unless an implicit INT8 build is loaded.</div>")
        super().__init__(session, [intro, widgets.HBox([self.target, self.metric, self.batch, self.gpu, self.measure]),
                                   self.inputs_note,
                                   widgets.HBox([self.run_button, self.cancel_button, self.export_button,
                                                 self.progress, self.phase]),
                                   self.stale_note, self.status, self.table, self.chart_box, self.detail], **kwargs)
        session.observe(self._on_plan, names=["plan"])
        session.observe(self._on_stale, names=["stale"])
        session.observe(self._on_inputs, names=["calibration", "held_back", "model", "recipe"])
        self._on_inputs()
        if session.plan is not None:
            self._on_plan()

    @property
    def plan(self):
        """The session's plan (None before the first)."""
        return self.session.plan

    @property
    def running(self) -> bool:
        """True while a search runs."""
        return self._thread is not None and self._thread.is_alive()

    # ------------------------------------------------------------------ inputs

    def _sources(self):
        """``(data, held_back, calibration)`` for the planner: the session's, as the CLI would be given them."""
        from .. import demo
        from ..core.calibrate.step import calibration_source, is_demo_model

        s = self.session
        held = s.held_back or None
        cal = s.calibration
        if cal is not None and cal.fingerprint is not None and cal.fingerprint.sha256 not in ("", s.model.sha256):
            cal = None  # the previous model's: the planner collects statistics of this one
        if self.data is not None:
            return self.data, held, cal
        spec = s.calibration_data
        if held is None and is_demo_model(s.model, demo.MODEL_PATH) and (spec is None or spec.kind == "demo"):
            # The bundled crops calibrate; other scikit-image crops are held back (as the quickstart's data).
            return demo.sample_inputs(), list(demo.iter_skimage_inputs(32, seed=12345)), cal
        source, _ = calibration_source(s.recipe, s.model)
        return source, held, cal

    def _on_inputs(self, change=None) -> None:
        """Say what the next plan will use: the calibration and the held-back data."""
        s = self.session
        if s.model is None:
            self.inputs_note.value = ""
            return
        cal = s.calibration
        ranges = (f"the session's calibration ({esc(cal.describe())}, {int(cal.stats.samples)} samples)"
                  if cal is not None else "statistics the planner collects from the data (none collected yet)")
        held = (f"the held-back folder <code>{esc(s.held_back)}</code>" if s.held_back
                else "a seeded share of the data, held back (set a folder in the Calibrate step)")
        self.inputs_note.value = f"<div style='font-size:12px'>Plans with {ranges}; accuracy on {held}.</div>"

    def _oracle(self):
        # An implicit INT8+FP16 build in the session is TensorRT's own answer to "where does INT8 pay".
        for build in reversed(tuple(self.session.builds)):
            recipe = getattr(build, "recipe", None) or {}
            flags = recipe.get("flags", ()) if isinstance(recipe, dict) else getattr(recipe, "flags", ())
            if "int8" in flags and "fp16" in flags and getattr(build, "out_dir", None):
                return build.out_dir
        return None

    def options(self):
        """The Q/DQ export's choices: the session's (:meth:`~trtwidgets.widgets.session.Session.qdq_options`)."""
        return self.session.qdq_options()

    def _target(self):
        from ..core.plan.plan_values import PlanTarget

        metric = self.metric.value.strip() or None
        return PlanTarget.for_metric(metric) if metric else PlanTarget(cosine=self.target.value)

    def _measure_source(self):
        """The measurement source when *measure* is ticked (TensorRT and a GPU checked now), else False."""
        if not self.measure.value:
            return False
        from ..trt.plan_measure import gpu_source

        def progress(event):
            self.phase.value = f"<i>{esc(event.text())} ...</i>"

        return gpu_source("Measuring on this GPU", progress=progress)

    # ------------------------------------------------------------------ running

    def start(self) -> bool:
        """Start the search in a thread; False (and the status says why) when it cannot start."""
        if self.running:
            return False
        if self.session.model is None:
            self.status.value = "<b>There is no model.</b> Load one in the first step."
            return False
        try:
            data, held, cal = self._sources()
            kwargs = dict(held_back=held, calibration=cal, target=self._target(), options=self.options(),
                          batch_size=self.batch.value, gpu=self.gpu.value, oracle=self._oracle(),
                          measure=self._measure_source())
        except (UserError, OSError) as err:
            self.status.value = error_html(err if isinstance(err, UserError) else str(err))
            return False
        self._cancel.clear()
        self._finished = False
        self.status.value = self.table.value = self.detail.value = ""
        self.show_notes(())
        self.run_button.disabled, self.cancel_button.disabled = True, False
        self.progress.value, self.progress.bar_style = 0, ""
        made_with = self.session.plan_inputs()  # what this plan is made from, taken now
        self._thread = threading.Thread(target=self._work, args=(data, kwargs, made_with), daemon=True)
        self._thread.start()
        return True

    def run(self, wait: bool = True) -> bool:
        """Run the search (in a thread; ``wait`` joins it); True when a plan, maybe interrupted, is shown."""
        if not self.start():
            return False
        if wait:
            self.wait()
        return self._finished

    def wait(self, timeout: Optional[float] = None) -> None:
        """Wait for the search running (if any) to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def cancel(self) -> None:
        """Stop the search: within seconds it ends with the candidates found so far (the plan is marked interrupted)."""
        if self.running:
            self._cancel.set()
            self.cancel_button.disabled = True
            self.phase.value = "<i>cancelling: keeping the candidates found so far ...</i>"

    def _work(self, data, kwargs, made_with) -> None:
        from ..core.plan.planner import plan

        try:
            from ..plots import live_figure  # noqa: F401 - plotly loaded now, so a cancelled plan is drawn at once
        except ImportError:
            pass
        result = None
        try:
            # Notes (ONNX Runtime's errors and warnings among them) are shown here, not only in the log.
            with self.noting("While planning"):
                result = plan(self.session.model, data, progress=self._on_event, cancel=self._cancel,
                              client=self.session.client, **kwargs)
        except (UserError, OSError) as err:
            self.status.value = error_html(err if isinstance(err, UserError) else str(err))
        except Exception as err:
            self.status.value = error_html(f"Unexpected {type(err).__name__}: {err}")
        finally:
            self.run_button.disabled, self.cancel_button.disabled = False, True
            self.phase.value = ""
        if result is not None:
            self.progress.bar_style = "warning" if result.interrupted else "success"
            self.session.set_plan(result, made_with)  # shown by _on_plan
            self._finished = True

    def _on_event(self, event) -> None:
        """The planner's :class:`~trtwidgets.core.common.progress.ProgressEvent`: a phase begun, or a unit done."""
        if event.kind == "start":
            self.phase.value = f"<i>{esc(event.phase)} ...</i>"
            self.progress.value = 0
        elif event.kind == "step" and event.total:
            self.progress.max = max(int(event.total), 1)
            self.progress.value = min(int(event.step), self.progress.max)
            self.phase.value = f"<i>{esc(event.phase)} {int(event.step)}/{int(event.total)}</i>"

    # ------------------------------------------------------------------ showing

    def _on_plan(self, change=None) -> None:
        if self.session.plan is not None:
            self.show(self.session.plan)

    def _on_stale(self, change=None) -> None:
        stale = self.session.stale or {}
        self.stale_note.value = stale_html({k: v for k, v in stale.items() if k == "plan"})

    def show(self, result) -> None:
        """Show a plan: the reason, the held-back samples, the table, the Pareto chart (click a point for its layers)."""
        from ..plots.pareto import PlanParetoDisplay

        secs = result.seconds.get("total", 0.0)
        cut = ("<div class='trtw-warning'><b>Interrupted</b>: the plan holds the candidates found before the "
               "cancel; run it again for the rest.</div>" if result.interrupted else "")
        if result.pick is None:  # FP16 is judged like every candidate: it can fail too
            cut += ("<div class='trtw-warning'><b>Nothing is recommended</b>: no candidate meets the target, not "
                    "even FP16.</div>")
        self.status.value = (cut + f"<b>{esc(result.reason)}</b><br>searched in {secs:.1f} s; "
                             + "; ".join(esc(n) for n in result.notes) + _held_back_html(result.held_back))
        self.table.value = f"<pre>{html.escape(result.table())}</pre>"
        self.chart = PlanParetoDisplay.from_plan(result).figure()
        try:
            from ..plots.live_figure import live_figure

            self.chart = live_figure(self.chart)
            self.chart.data[0].on_click(self._on_click)
        except Exception:
            pass
        self.chart_box.children = [self.chart] if isinstance(self.chart, widgets.DOMWidget) else []
        self.select(result.recommended if result.pick is not None else 0)
        self.export_button.disabled = result.pick is None or not (result.pick.quantized or result.pick.rewritten)
        self._on_stale()

    def _on_click(self, trace, points, state) -> None:
        if points.point_inds:
            self.select(points.point_inds[0])

    def select(self, index: int) -> None:
        """Show the layers candidate ``index`` keeps in high precision, with the reasons."""
        from ..core.plan.plan_table import measured_rows_by_candidate

        c = self.plan.candidates[index]
        rows = "".join(f"<li>{esc(name)}: {esc(reason)}</li>" for name, reason in c.kept[:300])
        row = measured_rows_by_candidate(self.plan).get(index)
        measured = (f", measured {row.vs_fp16:.3f}x FP16 (spread {row.spread_ms:.4f} ms)"
                    if row is not None and row.vs_fp16 == row.vs_fp16 and row.spread_ms == row.spread_ms else "")
        self.detail.value = (f"<b>{index}. {esc(c.name)}</b>: {len(c.quantized)} INT8 layers, cosine "
                             f"{c.accuracy.cosine:.4f}, {_ratio_text(c.vs_fp16)} ({esc(c.latency_source)}){measured}"
                             + (f"<details><summary>{len(c.kept)} kept in high precision</summary><ul>{rows}</ul>"
                                "</details>" if c.kept else ""))

    def export(self) -> Optional[Path]:
        """Write the pick's model and ``plan.json`` into :attr:`out_dir`, as one set; the model's path.

        The pick's model is its Q/DQ model (``model.qdq.onnx``), or the rewritten float model
        (``model.rewritten.onnx``) when FP16 of the rewritten graph is the pick. An earlier plan's files there
        (``plan.json``, ``plan.html``, either model) are replaced together, so the folder never holds a new
        ``plan.json`` beside an old model or page.
        """
        from ..core.common.file_set import replace_file_set
        from ..core.common.write_rule import refuse_inputs
        from ..core.plan.plan_export import PLAN_FILES, export_plan, pick_file
        from ..core.qdq.export import save_qdq_model

        plan = self.plan
        if plan is None:
            return None
        path = self.out_dir / pick_file(plan)
        try:
            refuse_inputs(path, {"the model": self.session.model})
            exported = export_plan(self.session.model, plan)
            if exported is None:
                self.status.value = "<b>FP16 is the pick:</b> there is no Q/DQ model to write."
                return None

            def write(folder):
                save_qdq_model(exported, folder / path.name)
                plan.save_json(folder / "plan.json")

            replace_file_set(self.out_dir, PLAN_FILES, write)
        except (UserError, OSError) as err:
            self.status.value = error_html(err if isinstance(err, UserError) else str(err))
            return None
        self.status.value = f"wrote {esc(str(path))} and plan.json"
        return path


def _ratio_text(vs_fp16: float) -> str:
    """``"0.812x FP16"``, or what an unknown estimate is (never a division by it)."""
    return f"{vs_fp16:.3f}x FP16" if vs_fp16 == vs_fp16 else "latency cannot be estimated"


def _held_back_html(split) -> str:
    """Which samples were held back (the seeded split's files, or the given folder's), folded."""
    if split is None or not split.held_back:
        return ""
    how = (f"a random split, seed {split.seed}, {split.fraction:.0%} held back" if split.seed is not None
           else "the held-back data given")
    names = "".join(f"<li>{esc(n)}</li>" for n in split.held_back[:200])
    more = f"<li>... and {len(split.held_back) - 200} more</li>" if len(split.held_back) > 200 else ""
    return (f"<details><summary>accuracy on {len(split.held_back)} held-back samples ({esc(how)}); "
            f"{len(split.calibration)} calibrate</summary><ul style='font-size:12px'>{names}{more}</ul></details>")
