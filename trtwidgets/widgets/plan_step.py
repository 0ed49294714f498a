"""The *Plan* step: search for the fastest Q/DQ quantization that keeps an accuracy target.

Thin: the search is :func:`trtwidgets.core.plan.planner.plan`, the chart
:class:`trtwidgets.plots.pareto.PlanParetoDisplay`. Clicking a point of the chart
shows the layers that candidate keeps in high precision and why; *Export the pick*
writes its Q/DQ model. Model-provided names are escaped. *Measure on this GPU* builds
FP16, implicit INT8 and the top candidates and picks by measured time
(:mod:`trtwidgets.trt.plan_measure`); the status line shows builds done and left.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Optional

import ipywidgets as widgets

from ..core.common.errors import UserError
from .html import esc


class PlanStep(widgets.VBox):
    """Plan explicit quantization for the session's model.

    Parameters
    ----------
    session : Session
        Supplies the model, the recipe's calibration data and its TensorRT version.
    data : optional
        Samples to plan on (overrides the recipe's calibration data; the bundled demo
        model uses its crops and held-back scikit-image crops).
    out_dir : path, optional
        Where *Export the pick* writes ``model.qdq.onnx`` and ``plan.json``.
    """

    def __init__(self, session, data: Any = None, out_dir: Optional[os.PathLike] = None, **kwargs):
        self.session = session
        self.data = data
        self.out_dir = Path(out_dir) if out_dir is not None else Path("trtwidgets_plan")
        self.plan = None
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
        self.export_button = widgets.Button(description="Export the pick", disabled=True, icon="save")
        self.status = widgets.HTML()
        self.table = widgets.HTML()
        self.chart_box = widgets.Box()
        self.detail = widgets.HTML()
        self.chart = None
        self.run_button.on_click(lambda _: self.run())
        self.export_button.on_click(lambda _: self.export())
        intro = widgets.HTML("<div>Finds which layers to quantize so that the engine is faster than FP16 and "
                             "keeps the accuracy target, measured with ONNX Runtime on held-back samples. "
                             "Latency is a cost-model estimate unless an implicit INT8 build is loaded.</div>")
        super().__init__([intro, widgets.HBox([self.target, self.metric, self.batch, self.gpu, self.measure]),
                          widgets.HBox([self.run_button, self.export_button]), self.status, self.table,
                          self.chart_box, self.detail], **kwargs)

    # ------------------------------------------------------------------ actions

    def _sources(self):
        from .. import demo
        from ..core.calibrate.step import calibration_source, is_demo_model

        model = self.session.model
        if self.data is None and is_demo_model(model, demo.MODEL_PATH):
            return demo.sample_inputs(), list(demo.iter_skimage_inputs(32, seed=12345))
        source, _ = calibration_source(self.session.recipe, model, self.data)
        return source, None

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

    def _measure_source(self):
        """The measurement source when *measure* is ticked (TensorRT and a GPU checked now), else False."""
        if not self.measure.value:
            return False
        from ..trt.plan_measure import gpu_source

        def progress(event):
            self.status.value = f"<i>{esc(event.text())} ...</i>"

        return gpu_source("Measuring on this GPU", progress=progress)

    def run(self) -> bool:
        """Run the search; True when it finished (its table and chart are shown)."""
        from ..core.plan.plan_values import PlanTarget
        from ..core.plan.planner import plan

        if self.session.model is None:
            self.status.value = "<b>There is no model.</b> Load one in the first step."
            return False
        self.run_button.disabled = True
        try:
            data, held = self._sources()
            oracle = self._oracle()
            metric = self.metric.value.strip() or None
            self.plan = plan(self.session.model, data, held_back=held,
                             target=PlanTarget.for_metric(metric) if metric else PlanTarget(cosine=self.target.value),
                             options=self.options(), batch_size=self.batch.value, gpu=self.gpu.value,
                             oracle=oracle, progress=True, measure=self._measure_source(),
                             on_step=lambda text: setattr(self.status, "value", f"<i>{esc(text)} ...</i>"))
        except (UserError, OSError) as err:
            self.status.value = f"<div class='trtw-error'>{esc(getattr(err, 'message', str(err)))}</div>"
            return False
        finally:
            self.run_button.disabled = False
        self.show(self.plan)
        return True

    def show(self, result) -> None:
        """Show a plan: the reason, the table, the Pareto chart (click a point for its layers)."""
        from ..plots.pareto import PlanParetoDisplay

        self.plan = result
        secs = result.seconds.get("total", 0.0)
        self.status.value = (f"<b>{esc(result.reason)}</b><br>searched in {secs:.1f} s; "
                             + "; ".join(esc(n) for n in result.notes))
        self.table.value = f"<pre>{html.escape(result.table())}</pre>"
        self.chart = PlanParetoDisplay.from_plan(result).figure()
        try:
            from ..plots.live_figure import live_figure

            self.chart = live_figure(self.chart)
            self.chart.data[0].on_click(self._on_click)
        except Exception:  # noqa: BLE001 - no widget backend (plain figure still renders)
            pass
        self.chart_box.children = [self.chart] if isinstance(self.chart, widgets.DOMWidget) else []
        self.select(result.recommended)
        self.export_button.disabled = not result.pick.quantized

    def _on_click(self, trace, points, state) -> None:
        if points.point_inds:
            self.select(points.point_inds[0])

    def select(self, index: int) -> None:
        """Show the layers candidate ``index`` keeps in high precision, with the reasons."""
        c = self.plan.candidates[index]
        rows = "".join(f"<li>{esc(name)}: {esc(reason)}</li>" for name, reason in c.kept[:300])
        from ..core.plan.plan_table import measured_rows_by_candidate

        row = measured_rows_by_candidate(self.plan).get(index)
        measured = (f", measured {row.vs_fp16:.3f}x FP16 (spread {row.spread_ms:.4f} ms)"
                    if row is not None and row.vs_fp16 == row.vs_fp16 and row.spread_ms == row.spread_ms else "")
        self.detail.value = (f"<b>{index}. {esc(c.name)}</b>: {len(c.quantized)} INT8 layers, cosine "
                             f"{c.accuracy.cosine:.4f}, {_ratio_text(c.vs_fp16)} ({esc(c.latency_source)}){measured}"
                             + (f"<details><summary>{len(c.kept)} kept in high precision</summary><ul>{rows}</ul>"
                                "</details>" if c.kept else ""))

    def export(self) -> Optional[Path]:
        """Write the pick's Q/DQ model and ``plan.json`` into :attr:`out_dir`, as one set; the model's path.

        An earlier plan's files there (``plan.json``, ``plan.html``, ``model.qdq.onnx``) are replaced
        together, so the folder never holds a new ``plan.json`` beside an old model or page.
        """
        from ..core.common.file_set import replace_file_set
        from ..core.common.write_rule import refuse_inputs
        from ..core.plan.plan_export import PLAN_FILES
        from ..core.plan.planner import export_plan

        if self.plan is None:
            return None
        path = self.out_dir / "model.qdq.onnx"
        try:
            refuse_inputs(path, {"the model": self.session.model})
            exported = export_plan(self.session.model, self.plan)
            if exported is None:
                self.status.value = "<b>FP16 is the pick:</b> there is no Q/DQ model to write."
                return None
            from ..core.qdq.export import save_qdq_model

            def write(folder):
                save_qdq_model(exported, folder / path.name)
                self.plan.save_json(folder / "plan.json")

            replace_file_set(self.out_dir, PLAN_FILES, write)
        except (UserError, OSError) as err:
            self.status.value = f"<div class='trtw-error'>{esc(getattr(err, 'message', str(err)))}</div>"
            return None
        self.status.value = f"wrote {esc(str(path))} and plan.json"
        return path


def _ratio_text(vs_fp16: float) -> str:
    """``"0.812x FP16"``, or what an unknown estimate is (never a division by it)."""
    return f"{vs_fp16:.3f}x FP16" if vs_fp16 == vs_fp16 else "latency cannot be estimated"
