"""``trtwidgets inspect GRAPH.json``: which layers run in which precision, and why not INT8.

Works offline on saved engine-inspector JSON (no GPU, no TensorRT).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional, Tuple

NAME = "inspect"
OUTPUTS = {"csv": "file"}  # files it writes: checked and reported by cli._outputs
HELP = "per-layer precision table of a built engine from its inspector JSON, with why-not-INT8"
DESCRIPTION = (HELP + ". Prints a precision summary and the non-INT8 layers; --csv writes one row per engine "
               "layer; --json prints the summary as JSON.")


def add_arguments(parser):
    parser.add_argument("graph", nargs="*",
                        help="engine-inspector JSON (<engine>.graph.json) or a build folder holding one; with two "
                             "or more, the first is tabulated and all are compared (as with --compare)")
    parser.add_argument("--network", metavar="LAYERS.json",
                        help="the pre-build view: the parsed network's layers with their requested precision and "
                             "output types, from network_layers.json (or a build folder holding it). Alone, --csv "
                             "writes this table and --json prints its summary")
    parser.add_argument("--csv", metavar="OUT.csv", help="write the per-layer table as CSV")
    parser.add_argument("--json", action="store_true", help="print the precision summary as JSON")
    parser.add_argument("--recipe", metavar="RECIPE.json", help="the build's recipe (precision flags, overrides)")
    parser.add_argument("--cache", metavar="FILE", help="the calibration cache the build used")
    parser.add_argument("--profile", metavar="PROFILE.json",
                        help="per-layer timings (trtexec --exportProfile) to add latency")
    parser.add_argument("--qdq-model", metavar="MODEL.onnx", help="the Q/DQ ONNX model (explicit quantization)")
    parser.add_argument("--compare", metavar="OTHER.json", nargs="+",
                        help="other builds' inspector JSON: print precision counts side by side and the layers "
                             "whose precision or tactic differ")
    parser.add_argument("--no-siblings", action="store_true",
                        help="do not pick up recipe.json / calibration.cache / profile.json beside GRAPH.json")


def _write_csv_atomic(table, path: str) -> None:
    from pandas.api.types import is_object_dtype, is_string_dtype

    from ..core.common.atomic import write_text_atomic
    from ..core.common.csv_cells import csv_cell

    # Layer names come from the model: '=HYPERLINK(...)' must open as text in a spreadsheet, not run.
    safe = table.copy()
    for column in safe.columns:
        if is_object_dtype(safe[column]) or is_string_dtype(safe[column]):  # pandas 3 has a "str" dtype
            safe[column] = safe[column].map(csv_cell)
    safe.columns = [csv_cell(str(c)) for c in safe.columns]
    write_text_atomic(path, safe.to_csv(index=False))


def format_report(table, summary: dict) -> str:
    """Plain-text summary: precision counts, then the non-INT8 layers grouped by cause."""
    lines = [f"{summary['layers']} engine layers"]
    for precision, d in summary["precisions"].items():
        time = f"  {d['time_ms']:.4f} ms ({d['time_share']:.0%} of time)" if d["time_ms"] is not None else ""
        lines.append(f"  {precision:<8} {d['layers']:>5}  {d['share']:6.1%}{time}")
    for w in summary["warnings"]:
        lines.append(f"warning: {w}")
    problems = table[(table["why_not_int8"] != "") & (table["why_not_int8"] != "BIAS_FLOAT")]
    if len(problems):
        lines.append("why not INT8:")
        causes = table.attrs.get("why_not_int8_causes") or []
        for code, group in problems.groupby("why_not_int8", sort=False):
            lines.append(f"  {code} ({len(group)} layers)")
            # Each cause explained once; the rows below give the short reason that names the tensor.
            lines.extend(f"    why: {c['explanation']}" for c in causes if c["code"] == code)
            for _, row in group.head(5).iterrows():
                lines.append(f"    {row['name'][:70]} [{row['precision']}]: {row['why_not_int8_reason']}")
            if len(group) > 5:
                lines.append(f"    ... {len(group) - 5} more")
    return "\n".join(lines)


def format_comparison(cmp, limit: int = 30) -> str:
    """Precision counts per build, total times, and the layers that differ."""
    counts = cmp.precision_counts()
    width = max(8, *(len(label) for label in cmp.labels))
    lines = ["precision " + " ".join(f"{label:>{width}}" for label in cmp.labels)]
    for precision, row in counts.iterrows():
        lines.append(f"{precision:<9} " + " ".join(f"{int(v):>{width}}" for v in row))
    totals = cmp.total_latency_ms()
    if any(v is not None for v in totals.values()):
        lines.append("time ms   " + " ".join(f"{v:>{width}.4f}" if v is not None else f"{'-':>{width}}"
                                            for v in totals.values()))
    diffs = [r for r in cmp.rows if r.precision_differs or r.tactic_differs]
    lines.append(f"{len(diffs)} of {len(cmp.rows)} matched layers differ in precision or tactic")
    for r in diffs[:limit]:
        what = " -> ".join(p or "absent" for p in r.precisions)
        lines.append(f"  {r.key[:60]:<60} {what}{'' if r.precision_differs else '  (tactic only)'}")
    if len(diffs) > limit:
        lines.append(f"  ... {len(diffs) - limit} more")
    return "\n".join(lines)


def format_prebuild(table, summary: dict) -> str:
    """Plain-text pre-build view: counts per type and requested precision, pinned layers, then every layer."""
    lines = [f"{summary['layers']} network layers before the build"]
    lines.append("  types: " + ", ".join(f"{k} {v}" for k, v in summary["types"].items()))
    if summary["requested_precisions"]:
        lines.append("  requested precision: " + ", ".join(f"{k} {v}" for k, v in summary["requested_precisions"].items()))
    else:
        lines.append("  requested precision: not recorded (TensorRT 11 has no per-layer precision)")
    for key, what in (("precision_set", "precision set"), ("output_type_set", "output type set")):
        names = summary[key]
        lines.append(f"  {what} on {len(names)} layers" + (": " + ", ".join(names[:10]) if names else "")
                     + (f" and {len(names) - 10} more" if len(names) > 10 else ""))
    lines.append(f"  {'#':>4} {'type':<14} {'precision':<10} {'output types':<14} name")
    for row in table.itertuples(index=False):
        pinned = "*" if row.precision_is_set else " "
        lines.append(f"  {row.index:>4} {row.type[:14]:<14} {(row.requested_precision + pinned)[:10]:<10} "
                     f"{row.output_types[:14]:<14} {row.name}")
    return "\n".join(lines)


def _graph_path(path: str) -> str:
    from ..core.engine.saved_build import find_graph_json

    return str(find_graph_json(path)) if os.path.isdir(path) else path


def _network(args, graph_path):
    """``(prebuild table, summary, source)`` from --network, else from network_layers.json beside the graph."""
    from ..core.engine.layer_table import prebuild_summary, prebuild_table
    from ..core.engine.saved_build import network_layers_of, read_network_layers

    rows: Optional[Tuple[dict, ...]]
    if args.network:
        rows, where = read_network_layers(args.network), args.network

    elif graph_path is not None and not args.no_siblings:
        rows, where = network_layers_of(graph_path), os.path.join(os.path.dirname(graph_path), "network_layers.json")
    else:
        rows, where = None, None
    if not rows:
        return None, None, None
    table = prebuild_table(rows)
    return table, prebuild_summary(table), where


def _context(path: str, args) -> dict:
    from ..core.engine.inspector_json import build_context

    return {} if args.no_siblings else build_context(path)


def _label(path: str) -> str:
    return os.path.basename(os.path.dirname(os.path.abspath(path))) or path


def run(args) -> int:
    from ..core.common.errors import UserError
    from ..core.engine.inspector_json import CONTEXT_FAILURES, context_failure, parse_inspector_json
    from ..core.engine.layer_table import layer_table, summary_dict

    graphs = [_graph_path(g) for g in args.graph]
    if not graphs:
        return _run_network_only(args)
    others = graphs[1:] + [_graph_path(g) for g in (args.compare or ())]
    graph = parse_inspector_json(graphs[0])
    found = _context(graphs[0], args)
    recipe = args.recipe or found.get("recipe")
    cache = args.cache or found.get("calibration")
    profile = args.profile or found.get("profile")
    used = [p for p, given in ((recipe, args.recipe), (cache, args.cache), (profile, args.profile)) if p and not given]
    if used:
        print(f"using {', '.join(used)} from the build folder", file=sys.stderr)
    siblings = {k: v for k, v in (("recipe", recipe), ("calibration", cache), ("profile", profile))
                if v is not None and v in used}
    qdq = None
    if args.qdq_model:
        from ..core.model.load import load_model
        from ..core.engine.why_not_int8.inputs import qdq_tensor_names

        qdq = qdq_tensor_names(load_model(args.qdq_model))
    try:
        table = layer_table(graph, profile=profile, recipe=recipe, calibration=cache, qdq_tensors=qdq)
    except (UserError,) + CONTEXT_FAILURES as exc:
        raise context_failure(exc, siblings, "--no-siblings") from None
    summary = summary_dict(table)
    cmp = _compare(args, graphs[0], graph, others, profile) if others else None
    pre, pre_summary, pre_source = _network(args, graphs[0])
    if args.csv:
        _write_csv_atomic(table, args.csv)
    if args.json:
        if pre_summary is not None:
            summary["network"] = dict(pre_summary, source=pre_source)
        if cmp is not None:
            summary["compare"] = _compare_summary(cmp)
        print(json.dumps(summary, indent=2))
        return 0
    print(format_report(table, summary))
    if cmp is not None:
        print(format_comparison(cmp))
    if pre is not None:
        if args.network:
            print(format_prebuild(pre, pre_summary))
        else:  # beside the engine: the gist, and where the whole list is
            print("\n".join(format_prebuild(pre, pre_summary).splitlines()[:5]))
            print(f"  (every layer: trtwidgets inspect --network {pre_source})")
    if args.csv:
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    return 0


def _run_network_only(args) -> int:
    """``inspect --network FILE`` without an engine: the pre-build view alone."""
    from ..core.common.errors import UserError

    if not args.network:
        raise UserError("Nothing to inspect.", None,
                        "Give an engine-inspector JSON (<engine>.graph.json) or a build folder, or --network "
                        "network_layers.json for the pre-build view.")
    pre, pre_summary, _ = _network(args, None)
    if args.csv:
        _write_csv_atomic(pre, args.csv)
    if args.json:
        print(json.dumps(pre_summary, indent=2))
    else:
        print(format_prebuild(pre, pre_summary))
        if args.csv:
            print(f"wrote {len(pre)} rows to {args.csv}", file=sys.stderr)
    return 0


def _compare(args, first: str, graph, others, profile):
    """The first build compared with ``others`` (inspector JSON paths), each with its own timings."""
    from ..core.common.errors import UserError
    from ..core.engine.build_compare import compare_builds
    from ..core.engine.inspector_json import CONTEXT_FAILURES, context_failure, parse_inspector_json

    paths = [first] + others
    sources = [graph] + [parse_inspector_json(p) for p in others]
    labels = [_label(p) for p in paths]
    if len(set(labels)) < len(labels):
        labels = [str(p) for p in paths]
    # Each build's own timings (beside its JSON); --profile is the first build's.
    contexts = [{"profile": profile} if profile is not None else {}] + [_context(p, args) for p in others]
    profiles = [c.get("profile") for c in contexts]
    try:
        return compare_builds(sources, labels=labels, profiles=profiles)
    except (UserError,) + CONTEXT_FAILURES as exc:
        files = {f"profile {i}": p for i, p in enumerate(profiles) if p is not None}
        raise context_failure(exc, files, "--no-siblings") from None


def _compare_summary(cmp) -> dict:
    """The comparison's part of ``--json``: builds, precision counts, total latency, differing layers."""
    counts = cmp.precision_counts()
    return {
        "builds": list(cmp.labels),
        "precision_counts": {label: {p: int(v) for p, v in counts[label].items()} for label in cmp.labels},
        "total_latency_ms": {label: (None if v is None else round(float(v), 6))
                             for label, v in cmp.total_latency_ms().items()},
        "differing_layers": sum(1 for r in cmp.rows if r.precision_differs or r.tactic_differs),
    }
