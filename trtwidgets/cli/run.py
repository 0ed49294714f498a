"""``trtwidgets run RECIPE.json --report OUT.html``: re-run a saved analysis headless.

Steps, in the notebook's order: load the recipe and its model, lint, calibrate
(the toolkit's statistics, every range method, a TensorRT calibration cache),
build when TensorRT is installed (otherwise the report says it was skipped and
why), inspect the build and any saved builds (``--graph``, or the build folder
the recipe sits in), and write one self-contained HTML report (plotly.js
embedded, so it opens offline).

Exit codes: 0 done, 1 a build failed (the report says why), 2 bad input (a bad
recipe, a missing model or data), 130 interrupted.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

# The report's layer-table columns, shared with the App's HTML page (no plotly at import).
from ..core.common.errors import BuildError
from ..core.engine.saved_build import SavedBuild
from ..plots.report_sections import LAYER_COLUMNS

NAME = "run"
OUTPUTS = {"report": "file", "build_dir": "dir"}  # files it writes: checked and reported by cli._outputs
OUTPUT_FILES = {"build_dir": ("calibration.cache",)}  # written inside --build-dir: checked against the inputs
HELP = "re-run a saved recipe headless (calibrate, build if TensorRT is present, inspect) and write an HTML report"
DESCRIPTION = (HELP + ". The report holds the model summary, lint findings, ranges per tensor, histograms of the "
               "most disputed tensors, the layer table and precision chart of each build; it works offline.")


def add_arguments(parser):
    parser.add_argument("recipe", help="recipe JSON (saved from the app, or `trtwidgets build`'s recipe.json)")
    parser.add_argument("--report", required=True, metavar="OUT.html", help="where to write the HTML report")
    from ._judged import add_flags

    add_flags(parser, ("--data",), data=dict(help="calibration samples: a folder of .npy/.npz files or images, or "
                                             "'demo' (default: the recipe's)"))
    parser.add_argument("--build-dir", metavar="DIR", help="where the build and the calibration cache go "
                                                           "(default: OUT-build/ beside the report)")
    parser.add_argument("--graph", action="append", default=[], metavar="JSON_OR_DIR",
                        help="a saved build (folder or *.graph.json) to inspect; repeatable")
    parser.add_argument("--no-build", action="store_true", help="do not build even if TensorRT is installed")
    parser.add_argument("--no-calibrate", action="store_true", help="skip calibration")
    add_flags(parser, ("--max-samples",), max_samples=dict(help="calibrate on at most this many samples"))
    parser.add_argument("--top", type=int, default=6, help="histograms of this many most disputed tensors (default 6)")
    parser.add_argument("--title", default=None, help="report title")


def _log(msg: str) -> None:
    print(f"trtwidgets run: {msg}", file=sys.stderr)


def _saved_sources(args, recipe_path: Path):
    """The saved builds to inspect (``--graph``, else the build folder the recipe sits in), each read, parsed and
    tabled now: a bad one fails with exit 2 before calibration, not after minutes of work with no report.

    Returns ``(builds, tables)``: the SavedBuild objects, and their layer tables by ``id()`` of the build.
    """
    from ..core.engine.saved_build import load_saved_build

    builds = [load_saved_build(g) for g in args.graph]
    if not args.graph and any(recipe_path.parent.glob("*.graph.json")):
        builds.append(load_saved_build(recipe_path.parent))
    return builds, {id(s): _layer_table_of(s) for s in builds}


def _label(source) -> str:
    # A saved build has its own name; a fresh one (a BuildResult) is named by its folder.
    return (source.name if isinstance(source, SavedBuild) else "") or Path(source.out_dir).name


def _layer_table_of(source):
    """The layer table of a build (fresh or saved), with the files saved beside it; a bad file is a UserError."""
    from ..core.engine.inspector_json import CONTEXT_FAILURES, as_graph, build_context, context_failure
    from ..core.engine.layer_table import layer_table

    path = source.inspector_json_path
    graph = as_graph(Path(path)) if path else as_graph(source)  # from the file: its errors name it
    context = {}
    try:
        context = build_context(source)
        return layer_table(graph, **context)
    except CONTEXT_FAILURES as exc:
        # A malformed recipe, cache or timings file saved beside a build: say which, no traceback.
        raise context_failure(exc, context, "inspect the build on its own with `trtwidgets inspect --no-siblings`") from None


def _profiles_from_data(args, recipe, model, steps):
    """The recipe with its open profile dims taken from the calibration data's shapes, as in the app (said in a step)."""
    from ..core.calibration.data import spec_for
    from ..core.common.errors import UserError
    from ..core.recipe.data_defaults import fill_recipe_from_data

    try:
        source = recipe.replace(calibration_data=spec_for(args.data)) if args.data else recipe
        filled, note, _ = fill_recipe_from_data(source, model)
    except UserError:
        return recipe  # unreadable data: the calibrate step says what is wrong with it
    if not note:
        return recipe
    steps.append({"step": "profiles", "status": "done", "detail": note})
    return recipe.replace(profiles=filled.profiles)


def _calibrate(args, recipe, model, steps, build_dir: Path):
    from ..core.calibrate.step import calibrate_recipe
    from ..core.calibration.cache import METHOD_ALGORITHM, check_complete, write_cache
    from ..core.common.errors import CalibrationDataError
    from ..core.common.write_rule import partial_path

    cal = recipe.calibrator
    wanted = args.data or recipe.calibration_data is not None or cal.kind != "none"
    if args.no_calibrate or not wanted:
        why = "--no-calibrate" if args.no_calibrate else "the recipe has no calibrator and no calibration data"
        steps.append({"step": "calibrate", "status": "skipped", "detail": why})
        return None, None
    t0 = time.perf_counter()
    try:
        result = calibrate_recipe(recipe, model, data=args.data, progress=sys.stderr.isatty(),
                                  max_samples=args.max_samples)
    except CalibrationDataError as err:
        if "no calibration data" in err.what.lower() and cal.kind == "none":
            steps.append({"step": "calibrate", "status": "skipped", "detail": err.what})
            return None, None
        raise
    cache = build_dir / "calibration.cache"
    if result.stats.interrupted:
        # Ctrl-C during calibration: the samples done so far go to a cache of their own name; no build, no report.
        cache = partial_path(cache)
    check_complete(result.stats.tensors, result.amax, str(cache))  # a cache of some tensors is no cache
    build_dir.mkdir(parents=True, exist_ok=True)
    write_cache(result.amax, cache, algorithm=METHOD_ALGORITHM.get(result.method, "EntropyCalibration2"))
    if result.stats.interrupted:
        _log(f"interrupted after {result.stats.samples} samples; their cache -> {cache} (marked partial)")
        raise KeyboardInterrupt
    steps.append({"step": "calibrate", "status": "done",
                  "detail": f"{result.stats.samples} samples from {result.data}, {len(result.ranges)} tensors, "
                            f"{result.method} ranges ({len(result.overrides)} overrides) in "
                            f"{time.perf_counter() - t0:.1f} s; cache {cache}"})
    _log(f"calibrated on {result.stats.samples} samples; cache -> {cache}")
    return result, str(cache)


def _build(args, recipe, cache_path, steps, build_dir: Path):
    import dataclasses

    from .. import trt
    from ..core.common.errors import UserError

    if args.no_build:
        steps.append({"step": "build", "status": "skipped", "detail": "--no-build"})
        return None, None
    if not trt.available():
        steps.append({"step": "build", "status": "skipped",
                      "detail": "TensorRT is not installed here. " + trt.INSTALL_ADVICE})
        _log("build skipped: TensorRT is not installed")
        return None, None
    from ..trt.build import build

    r = recipe
    if r.calibrator.kind == "toolkit" and cache_path:
        r = r.replace(calibrator=dataclasses.replace(r.calibrator, cache_path=cache_path))
    try:
        extra = {"calibration_data": args.data} if args.data and r.calibrator.uses_trt_calibrator else {}
        result = build(r, out_dir=str(build_dir / "engine"), progress=False, **extra)
    except UserError as err:
        steps.append({"step": "build", "status": "failed", "detail": err.message})
        _log(f"build failed: {err.what}")
        return None, err
    steps.append({"step": "build", "status": "done",
                  "detail": f"TensorRT {result.trt_version} on {result.gpu_name or 'GPU'} in {result.build_seconds:.1f} s "
                            f"-> {result.engine_path}"})
    return result, None


def run(args) -> int:
    from ..core.common.atomic import write_text_atomic
    from ..core.recipe.recipe import locate_model
    from ..core.common.errors import RecipeError
    from ..core.model.lint import lint
    from ..core.model.load import load_model
    from ..core.recipe import report as rep
    from ..core.recipe.recipe import load_recipe
    from ..plots import report_html as figs

    recipe_path = Path(args.recipe)
    report_path = Path(args.report)
    if report_path.suffix.lower() not in (".html", ".htm"):
        raise RecipeError(f"--report {args.report} is not an .html file.", None, "Write e.g. --report report.html.")
    if args.top < 0:
        raise RecipeError(f"--top {args.top} is negative.", "It is how many of the most disputed tensors get a "
                          "histogram in the report.", "Give 0 (no histograms) or more; the default is 6.")
    recipe = locate_model(load_recipe(recipe_path), recipe_path.parent)
    model = load_model(recipe.model_path)
    build_dir = Path(args.build_dir) if args.build_dir else report_path.with_name(report_path.stem + "-build")
    _check_build_dir(args, recipe, build_dir)  # before any work: a file in its place, or the recipe's own inputs
    saved, saved_tables = _saved_sources(args, recipe_path)  # read first: a bad --graph fails before any long work
    steps = [{"step": "load", "status": "done", "detail": f"{recipe_path} -> {model.path}"}]
    _model_changed(recipe, model, steps)
    recipe = _profiles_from_data(args, recipe, model, steps)

    findings = lint(model, flags=recipe.flags, trt_version=recipe.trt_version, calibrator=recipe.calibrator.kind,
                    profiles=recipe.profiles or None)
    n_err = sum(1 for f in findings if f.severity == "error")
    steps.append({"step": "lint", "status": "done", "detail": f"{len(findings)} findings ({n_err} errors)"})

    calibration, cache_path = _calibrate(args, recipe, model, steps, build_dir)
    built, build_error = _build(args, recipe, cache_path, steps, build_dir)
    sections, tables, summaries = _inspect_sections(built, saved, saved_tables, model, recipe, steps)
    head_sections = _head_sections(steps, model, recipe, recipe_path, findings, build_error, saved)
    body = _body_sections(args, calibration, tables, summaries)
    doc = rep.render_document(args.title or f"trtwidgets report: {Path(recipe.model_path).name}",
                              head_sections + body + sections, head=figs.plotly_js_head(),
                              subtitle=f"recipe {recipe_path}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    write_text_atomic(report_path, doc)
    print(f"report -> {report_path} ({os.path.getsize(report_path) / 1e6:.1f} MB)")
    for s in steps:
        print("\n".join(_step_lines(s)))
    return 1 if build_error is not None else 0


def _step_lines(step: dict, width: int = 110) -> list:
    """A step's line for the terminal: its detail whole, wrapped at spaces under itself (never cut mid-word)."""
    import textwrap

    head = f"  {step['step']:<24} {step['status']:<8} "
    lines = textwrap.wrap(str(step['detail']), max(width, 40), break_long_words=False, break_on_hyphens=False)
    return [head + (lines[0] if lines else "")] + [" " * len(head) + line for line in lines[1:]]


def _check_build_dir(args, recipe, build_dir: Path) -> None:
    """Refuse, before any work, a build folder that is a file, or whose files would replace an input the recipe names.

    ``--build-dir`` is checked against the command line's own arguments by :mod:`._outputs`; the default folder
    (``REPORT-build`` beside the report) and the recipe's inputs (its model, its calibration cache) are checked here:
    ``run --report s.html`` must never replace the recipe's own ``s-build/calibration.cache``.
    """
    from ..core.common.errors import UserError
    from ..core.common.write_rule import check_replaceable, inside_output, partial_path, refuse_inputs

    label = "--build-dir" if args.build_dir else f"the build folder {build_dir} (named after --report)"
    fix = "Give --build-dir another folder" if args.build_dir else "Give --build-dir a folder of its own"
    if os.path.lexists(build_dir) and not build_dir.is_dir():
        raise UserError(f"{label} is {'a file' if build_dir.is_file() else 'not a folder'}: {build_dir}.",
                        "run writes the calibration cache (and the build) into a folder there.",
                        f"{fix}, or move {build_dir.name} away.")
    if not args.no_build:
        inside_output(build_dir, "engine", label=label)  # the build is published there: never through a link
    inputs = {"the recipe": args.recipe, "the recipe's model": recipe.model_path,
              "the recipe's calibration cache (calibrator.cache_path)": recipe.calibrator.cache_path}
    inputs.update({f"--graph {g}": g for g in args.graph})
    for name in () if args.no_calibrate else OUTPUT_FILES["build_dir"]:  # the cache is written only by calibrating
        for target in (build_dir / name, partial_path(build_dir / name)):
            try:
                refuse_inputs(target, {k: v for k, v in inputs.items() if v}, label=f"{label}: {target.name}")
            except UserError as err:
                raise UserError(err.what, f"{err.why} run writes {target.name} into the build folder.",
                                f"{fix} (or point the recipe's calibrator.cache_path elsewhere).") from None
            check_replaceable(target, f"{label}: {target.name}")


def _model_changed(recipe, model, steps) -> None:
    """Say it (a note, and a step of the report) when the model's content is not the one the recipe was made for."""
    from ..core.common.notes import note

    if not (recipe.model_sha256 and model.sha256) or recipe.model_sha256 == model.sha256:
        return
    detail = (f"{model.path} has changed since the recipe was saved (sha256 {recipe.model_sha256[:12]}... in the "
              f"recipe, {model.sha256[:12]}... now): its profiles, layer names and ranges may no longer fit; "
              "save the recipe again from the app for this model")
    note(detail)
    steps.append({"step": "model", "status": "changed", "detail": detail})


def _inspect_sections(built, saved, saved_tables, model, recipe, steps):
    """A layer-table section per build (the fresh one, then the saved ones, tabled up front); (sections, tables,
    summaries)."""
    from ..core.recipe import report as rep
    from ..core.recipe import staleness
    from ..core.engine.layer_table import summary_dict

    sections = []
    tables, summaries = {}, {}
    now = staleness.fingerprint("build", model.sha256, recipe)
    for source in ([built] if built is not None else []) + saved:
        label = _label(source)
        table = _layer_table_of(source) if source is built else saved_tables[id(source)]
        tables[label], summaries[label] = table, summary_dict(table)
        own = staleness.recipe_dict(source.recipe if isinstance(source, SavedBuild) else None)
        stale = ""
        if source is not built and own is not None:
            made = staleness.fingerprint("build", own.get("model_sha256") or model.sha256, own)
            stale = staleness.stale_reason(made, now)
        rows = table.to_dict("records")
        sections.append(rep.layer_table_section(f"Layer table: {label}", rows, LAYER_COLUMNS,
                                                warnings=table.attrs.get("warnings", []), stale=stale))
        steps.append({"step": f"inspect {label}", "status": "done",
                      "detail": f"{len(table)} layers; " + ", ".join(
                          f"{p} {d['layers']}" for p, d in summaries[label]["precisions"].items())})
    if not tables:
        steps.append({"step": "inspect", "status": "skipped",
                      "detail": "no build to inspect: build with TensorRT, or pass a saved build with --graph DIR"})
    return sections, tables, summaries


def _head_sections(steps, model, recipe, recipe_path, findings, build_error, saved):
    """The report's opening: steps, model and recipe, lint findings, build errors (fresh and saved)."""
    from ..core.recipe import report as rep

    head_sections = [rep.steps_section(steps),
                     rep.summary_section(model.summary, recipe, {"recipe": str(recipe_path)}),
                     rep.findings_section(findings)]
    if build_error is not None:
        lines = list(build_error.log_lines) if isinstance(build_error, BuildError) else []
        head_sections.append(rep.section("Build failed", rep.note(build_error.message, "error"),
                                         f"<pre>{rep.esc(chr(10).join(lines))}</pre>" if lines else ""))
    for s in saved:
        errors = s.error_lines()
        if errors:
            head_sections.append(rep.section(f"TensorRT errors in {s.name}",
                                             f"<pre>{rep.esc(chr(10).join(errors))}</pre>"))
    return head_sections


def _body_sections(args, calibration, tables, summaries):
    """Calibration ranges and figures, the precision summary and chart."""
    from ..core.recipe import report as rep
    from ..plots import report_html as figs

    body = []
    if calibration is not None:
        from ..plots.report_sections import calibration_sections

        body += calibration_sections(calibration.stats, calibration.ranges, calibration.method,
                                     calibration.percentile, calibration.overrides, calibration.data, args.top,
                                     chosen={n: c.method for n, c in calibration.choices.items()})
    if tables:
        body.append(rep.precision_summary_section(summaries))
        body.append(figs.figures_section("Precision chart", [figs.precision_figure(tables)]))
    return body

