"""The report's parts for calibration, a plan, builds and the recipe, and the whole analysis page.

Built from plain values (statistics, ranges, a plan result, build sources, a recipe)
with the section writers of :mod:`trtwidgets.core.recipe.report` and the figures of
:mod:`trtwidgets.plots.report_html`: one report writer, used by ``trtwidgets run
--report`` and by :meth:`trtwidgets.widgets.app.App.save_html`. Every model-provided
name is escaped by those writers (tables) or by Plotly's JSON encoder (figures).
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..core.recipe import report as rep
from ..core.recipe.report import Section
from . import report_html as figs

#: Layer-table columns shown in the report.
LAYER_COLUMNS = ("name", "type", "onnx_nodes", "precision", "input_precision", "output_precision", "weights_type",
                 "tactic", "latency_ms", "why_not_int8", "why_not_int8_reason")


def calibration_sections(stats, ranges: Mapping[str, Mapping], method: str, percentile: float = 99.99,
                         overrides: Optional[Mapping[str, float]] = None, data: str = "", top: int = 6,
                         first: Sequence[str] = (), chosen: Optional[Mapping[str, str]] = None) -> List[Section]:
    """The ranges table and the calibration figures (tensors ranked, and |x| histograms).

    Parameters
    ----------
    stats : ActivationStats
    ranges : mapping
        Tensor -> method -> RangeResult.
    method : str
        The exported method (its SQNR and clipped share are shown; its amax is the active line).
    percentile : float
    overrides : mapping, optional
        Tensor -> amax set by hand (drawn on its histogram).
    data : str
        What the samples were, in words.
    top : int
        Histograms of this many tensors on which the range methods disagree most.
    first : sequence of str
        Tensors whose histograms come first (e.g. the one the explorer shows).
    chosen : mapping, optional
        Tensor -> the method ``auto`` exports for it (``Calibration.choices``): its SQNR, clipped share and
        active line are shown.
    """
    from ..core.calibration.explorer_data import rank_tensors

    described = f"{stats.samples} samples" + (f" from {data}" if data else "") + f", percentile {percentile:g}."
    names = [n for n in first if n in ranges]
    names += [n for n in list(rank_tensors(ranges, by="disagreement").names)[:max(top, 0)] if n not in names]
    figures = [figs.overview_figure(ranges)] + figs.histogram_figures(stats, ranges, names, percentile, method,
                                                                      dict(overrides or {}), chosen)
    captions = (["Tensors ranked by how much the range methods disagree (log2 of largest / smallest amax)."]
                + [f"|x| histogram of {n} with each method's amax" for n in names])
    return [rep.ranges_section(ranges, method, stats, description=described, chosen=chosen),
            figs.figures_section("Calibration figures", figures, captions)]


def plan_section(plan) -> Section:
    """A plan's reason, its candidates against FP16 (the Pareto chart), its table and its notes."""
    import html

    from .pareto import PlanParetoDisplay

    from .plan_latency import latency_section_html

    notes = "".join(f"<li>{rep.esc(n)}</li>" for n in plan.notes)
    return rep.section("Quantization plan", rep.note(str(plan.reason)),
                       figs.figure_html(PlanParetoDisplay.from_plan(plan).figure()),
                       f"<pre>{html.escape(plan.table())}</pre>",
                       latency_section_html(plan),  # estimate or measurement, as plan.html shows it
                       f"<ul>{notes}</ul>" if notes else "")


def build_tables(builds: Mapping[str, Any], extra: Optional[Mapping[str, Mapping[str, Any]]] = None
                 ) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """The layer table of each build, with what its folder says (recipe, calibration cache, timings).

    Parameters
    ----------
    builds : mapping
        Label -> build source (a build result, a saved build, or an inspector JSON path).
    extra : mapping, optional
        Label -> more arguments for :func:`~trtwidgets.core.engine.layer_table.layer_table`
        (e.g. ``kept_float``).

    Returns
    -------
    tables : dict
        Label -> layer table (pandas.DataFrame), for the builds that could be read.
    errors : dict
        Label -> why a build could not be read (its files named), for the others.
    """
    from ..core.common.errors import UserError
    from ..core.engine.inspector_json import CONTEXT_FAILURES, as_graph, build_context, context_failure
    from ..core.engine.layer_table import layer_table

    tables, errors = {}, {}
    for label, source in builds.items():
        context: Dict[str, Any] = {}
        try:
            context = build_context(source)
            context.update((extra or {}).get(label) or {})
            tables[label] = layer_table(as_graph(source), **context)
        except (UserError,) + CONTEXT_FAILURES as exc:
            errors[label] = getattr(context_failure(exc, context, "inspect the build on its own"), "message", str(exc))
    return tables, errors


def build_sections(tables: Mapping[str, Any], stale: Optional[Mapping[str, str]] = None,
                   errors: Optional[Mapping[str, str]] = None) -> List[Section]:
    """Layers per precision (table and chart) over the builds, then each build's layer table."""
    from ..core.engine.layer_table import summary_dict

    out = []
    if tables:
        out.append(rep.precision_summary_section({label: summary_dict(t) for label, t in tables.items()}))
        out.append(figs.figures_section("Precision chart", [figs.precision_figure(tables)]))
    for label, table in tables.items():
        out.append(rep.layer_table_section(f"Layer table: {label}", table.to_dict("records"), LAYER_COLUMNS,
                                           warnings=table.attrs.get("warnings", []),
                                           stale=(stale or {}).get(label, "")))
    for label, message in (errors or {}).items():
        out.append(rep.section(f"Layer table: {label}", rep.note(message, "error")))
    return out


def recipe_section(recipe) -> Section:
    """The recipe as JSON, with the command that re-runs it headless."""
    return rep.section("Recipe", rep.paragraph("Saved as recipe.json, it re-runs headless with "
                                               "`trtwidgets run recipe.json --report report.html`."),
                       f"<pre class='trtw-recipe'>{rep.esc(recipe.to_json())}</pre>")


def stale_section(stale: Mapping[str, str]) -> Optional[Section]:
    """The results that no longer match the recipe, and why (None when all are current)."""
    if not stale:
        return None
    return rep.section("Out of date", *(rep.note(f"{k}: {v}", "warning") for k, v in sorted(stale.items())))


def analysis_html(title: str, summary=None, findings: Sequence[Any] = (), recipe=None,
                  calibration: Optional[Mapping[str, Any]] = None, plan=None, tables: Optional[Mapping] = None,
                  build_errors: Optional[Mapping[str, str]] = None, stale: Optional[Mapping[str, str]] = None,
                  steps: Sequence[Mapping[str, Any]] = ()) -> str:
    """One self-contained HTML page of an analysis (plotly.js embedded: it opens offline).

    Parameters
    ----------
    title : str
    summary : ModelSummary, optional
        The model (None: the page says no model was loaded).
    findings : sequence of Finding
    recipe : Recipe, optional
    calibration : mapping, optional
        Keyword arguments of :func:`calibration_sections` (``stats``, ``ranges``, ``method``...).
    plan : Plan, optional
    tables : mapping, optional
        Build label -> layer table (see :func:`build_tables`).
    build_errors : mapping, optional
        Build label -> why it could not be read.
    stale : mapping, optional
        Result key (``"stats"``, ``"build:<label>"``...) -> why it is out of date.
    steps : sequence of mapping
        ``{"step", "status", "detail"}``: what the page holds and what it lacks.
    """
    stale = dict(stale or {})
    sections: List[Section] = [rep.steps_section(steps)] if steps else []
    if summary is not None:
        sections += [rep.summary_section(summary, recipe if hasattr(recipe, "calibrator") else None),
                     rep.findings_section(findings)]
    else:
        sections.append(rep.section("Summary", rep.note("No model was loaded.", "warning")))
    late = stale_section(stale)
    if late is not None:
        sections.append(late)
    if calibration:
        sections += calibration_sections(**calibration)
    if plan is not None:
        sections.append(plan_section(plan))
    builds_stale = {k[len("build:"):]: v for k, v in stale.items() if k.startswith("build:")}
    sections += build_sections(tables or {}, builds_stale, build_errors)
    if recipe is not None and hasattr(recipe, "to_json"):
        sections.append(recipe_section(recipe))
    return rep.render_document(title, sections, head=figs.plotly_js_head(),
                               subtitle=f"written {time.strftime('%Y-%m-%d %H:%M:%S')}")
