"""``trtwidgets inspect GRAPH.json``: which layers run in which precision, and why not INT8.

Works offline on saved engine-inspector JSON (no GPU, no TensorRT).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

NAME = "inspect"
HELP = "per-layer precision table of a built engine from its inspector JSON, with why-not-INT8"
DESCRIPTION = (HELP + ". Prints a precision summary and the non-INT8 layers; --csv writes one row per engine "
               "layer; --json prints the summary as JSON.")


def add_arguments(parser):
    parser.add_argument("graph", help="engine-inspector JSON (<engine>.graph.json)")
    parser.add_argument("--csv", metavar="OUT.csv", help="write the per-layer table as CSV")
    parser.add_argument("--json", action="store_true", help="print the precision summary as JSON")
    parser.add_argument("--recipe", metavar="RECIPE.json", help="the build's recipe (precision flags, overrides)")
    parser.add_argument("--cache", metavar="FILE", help="the calibration cache the build used")
    parser.add_argument("--profile", metavar="PROFILE.json",
                        help="per-layer timings (trtexec --exportProfile) to add latency")
    parser.add_argument("--qdq-model", metavar="MODEL.onnx", help="the Q/DQ ONNX model (explicit quantization)")
    parser.add_argument("--no-siblings", action="store_true",
                        help="do not pick up recipe.json / calibration.cache / profile.json beside GRAPH.json")


def _write_csv_atomic(table, path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".inspect-", suffix=".csv", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            table.to_csv(f, index=False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
        for code, group in problems.groupby("why_not_int8", sort=False):
            lines.append(f"  {code} ({len(group)} layers)")
            for _, row in group.head(5).iterrows():
                lines.append(f"    {row['name'][:70]} [{row['precision']}]: {row['why_not_int8_reason']}")
            if len(group) > 5:
                lines.append(f"    ... {len(group) - 5} more")
    return "\n".join(lines)


def run(args) -> int:
    from ..core.inspector import parse_inspector_json
    from ..core.layer_table import layer_table, summary_dict

    from ..core.inspector import find_build_artifacts

    graph = parse_inspector_json(args.graph)
    found = {} if args.no_siblings else find_build_artifacts(args.graph)
    recipe = args.recipe or found.get("recipe")
    cache = args.cache or found.get("calibration")
    profile = args.profile or found.get("profile")
    used = [p for p, given in ((recipe, args.recipe), (cache, args.cache), (profile, args.profile)) if p and not given]
    if used:
        print(f"using {', '.join(used)} from the build folder", file=sys.stderr)
    qdq = None
    if args.qdq_model:
        from ..core.model import load_model
        from ..core.why_not_int8 import qdq_tensor_names

        qdq = qdq_tensor_names(load_model(args.qdq_model))
    table = layer_table(graph, profile=profile, recipe=recipe, calibration=cache, qdq_tensors=qdq)
    summary = summary_dict(table)
    if args.csv:
        _write_csv_atomic(table, args.csv)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_report(table, summary))
        if args.csv:
            print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    return 0
