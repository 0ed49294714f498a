"""The peer on the GPU (issue 33): FP16, the toolkit's all-INT8 export and ModelOpt's INT8 model, timed interleaved.

Builds (TensorRT 8.6, builder optimization level ``--opt-level``, cuBLAS/cuDNN tactic sources off, one build after
the other so that no build times its tactics beside another) and times in ``--rounds`` interleaved rounds in one
run (:func:`trtwidgets.trt.measure.measure`): FP16 of the float model, and each ``--qdq NAME=MODEL`` with FP16 +
INT8. Per engine it prints the median, the spread of the round medians, the ratio to FP16, its layers, INT8
layers, reformat layers (with their names in the JSON), standalone PointWise and Scale layers
(:meth:`~trtwidgets.core.engine.engine_graph.EngineGraph.layer_summary`), and writes ``--out`` (JSON: the
measurements, each engine's summary and its layers with their precisions, for ``benchmarks/yolo_borders.py``).

``--float NAME=MODEL`` adds further float models built as FP16 (a rewritten graph beside the model as given), and
``--profile RUNS`` profiles every engine's layers after the timing (TensorRT's IProfiler, two passes interleaved
across engines; each layer's median lands in the JSON): where one engine spends its time against another
(``benchmarks/results/peer/b32_variants``, ``benchmarks/results/rewrites``).

Issue 44 (each Q/DQ model against the FP16 **of its own graph**): ``--opt-levels 3,1`` builds every model at each
builder level (in that order; engines ``NAME@L3``; one level keeps the names of before), one build after the other
in this process, each build's seconds read from its build folder (a cached engine's too; ``--timing-cache``: one
TensorRT timing cache for all builds, one per level, or none shared), and times every engine of every level in the
same interleaved rounds. ``--pair QDQ=FLOAT`` names the float model a Q/DQ model is written on (default ``fp16``,
the model as given): the report (``same_graph`` in the JSON, printed last) gives per level each FP16 against FP16
as given (the rewrites' own gain), each Q/DQ engine against the FP16 of its graph and of the graph as given, and
``--pick`` (default ``toolkit``) against the issue's targets (<= 0.85x, metric >= 0.95) and against every other
Q/DQ engine of its graph and level: the paired sign test both ways
(:func:`~trtwidgets.core.plan.measured.paired.paired_rounds`) and the reformat counts; across levels each model's
time and build seconds. ``--check FILE`` (``benchmarks/yolo_same_graph.py``'s ``check_b32.npz``, an
:class:`~trtwidgets.core.plan.engine_check.EngineCheck` file) runs every engine on the held-back samples after the
timing, judged by ``--check-metric`` (the family's ``detection``: F1 at score 0.25 against FP32) and the worst-group
cosine, also on the first ``--check-subset`` samples (the family's own 8). ``--build-budget S`` starts no build
after S seconds; ``--build-only`` stops after the builds (a second call finds them in ``--cache-dir``). The JSON is
written after each build, after the timing, after the check and at the end; a run stopped by SIGTERM keeps the
rounds done (as Ctrl-C), one killed outright loses only the step in progress::

    $PY39 scripts/onnx_pack.py unpack .gpuwork/yolo44/pack /tmp/y44 && \\
    TRTWIDGETS_NO_CUBLAS_CUDNN=1 EXTRA_PYTHONPATH=$PWD $PY39 scripts/gpu_peer_yolo.py --fp16 /tmp/y44/yolo320_b32.onnx \\
        --float fp16_rw=/tmp/y44/float_rw_b32.onnx --qdq toolkit=/tmp/y44/toolkit_b32.onnx \\
        --qdq modelopt=/tmp/y44/modelopt_b32.onnx --qdq modelopt_rw=/tmp/y44/modelopt_rw_b32.onnx \\
        --pair toolkit=fp16_rw --pair modelopt_rw=fp16_rw --opt-levels 3,1 --check .gpuwork/yolo44/check_b32.npz \\
        --rounds 9 --runs 100 --cache-dir /tmp/peer_engines --out $OUT/same_graph_b32.json

``--parse MODEL ...`` only parses further files with TensorRT 8.6's ONNX parser (ModelOpt's files of other zoo
models: does TensorRT 8.6 read them at all), recording the parser's errors. Python 3.9 with numpy, onnx and
tensorrt only::

    source /tmp/trtb/env.sh && TRTWIDGETS_NO_CUBLAS_CUDNN=1 EXTRA_PYTHONPATH=$PWD $PY39 scripts/gpu_peer_yolo.py \\
        --fp16 w/yolo320_b32.onnx --qdq toolkit=w/toolkit_b32.onnx --qdq modelopt=w/modelopt_b32.onnx \\
        --rounds 5 --runs 50 --opt-level 1 --cache-dir /tmp/peer_engines --out $OUT/peer_b32.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trtwidgets.core.plan.plan_values import ratio  # noqa: E402 - after the path is set


def parse_only(path: Path) -> dict:
    """TensorRT 8.6's ONNX parser on ``path``: ``{file, parsed, errors, layers}``."""
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    net = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(net, logger)
    ok = parser.parse_from_file(str(path))
    return {"file": str(path), "parsed": bool(ok), "layers": net.num_layers,
            "errors": [str(parser.get_error(i)) for i in range(parser.num_errors)]}


def engine_layers(engine_path: str) -> dict:
    """The engine's layer summary and ``[name, type, precision]`` per layer, from the build folder's inspector JSON."""
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.trt.build_phases.result import GRAPH_FILE

    path = Path(engine_path).parent / GRAPH_FILE
    if not path.is_file():
        return {}
    graph = parse_inspector_json(str(path))
    return {"summary": graph.layer_summary(), "layers": [[la.name, la.type, la.precision] for la in graph.layers]}


def profile(engines: dict, cache_dir: str, runs: int) -> None:
    """Per-layer median ms of each built engine (``engines[name]["profile"]``), two passes interleaved across engines.

    The profiler adds its own per-layer overhead, so the sum of the layers is read beside the engine's timed median,
    not in place of it; what it tells is where one engine spends its time against another.
    """
    from trtwidgets.trt.bench import random_feeds
    from trtwidgets.trt.profiler import profile_layers
    from trtwidgets.trt.runner import EngineRunner

    per = {name: {} for name, r in engines.items() if r.get("key") and not r.get("error")}
    for _ in range(2):
        for name in per:
            path = Path(cache_dir) / engines[name]["key"] / "engine.plan"
            if not path.is_file():
                continue
            with EngineRunner(str(path)) as runner:
                lt = profile_layers(runner, random_feeds(runner, {}, seed=0), runs=runs, warmup=10)
            for layer in lt.layers:
                per[name].setdefault(layer.name, []).append(layer.median_ms)
    for name, layers in per.items():
        rows = [[k, sorted(v)[len(v) // 2]] for k, v in layers.items()]
        engines[name]["profile"] = rows
        total = sum(ms for _, ms in rows)
        top = sorted(rows, key=lambda r: -r[1])[:8]
        print(f"profile {name}: {len(rows)} layers, sum {total:.4f} ms; slowest: "
              + "; ".join(f"{n[:70]} {ms:.4f}" for n, ms in top), flush=True)


# -- issue 44: several builder levels, the held-back check, each Q/DQ model against the FP16 of its own graph -----


#: The issue's targets (issue 44): the pick's time against the FP16 of its graph, its F1 on its engine.
TARGET_RATIO = 0.85
TARGET_METRIC = 0.95


def parse_levels(text: str) -> list:
    """``"1,3"`` -> ``[1, 3]`` (the build order); each a TensorRT builder optimization level 0-5, none twice."""
    levels = [int(x) for x in str(text).replace(" ", "").split(",") if x]
    if not levels or len(set(levels)) != len(levels) or any(not 0 <= x <= 5 for x in levels):
        raise ValueError(f"--opt-levels {text!r}: give distinct builder levels 0-5, e.g. 3,1")
    return levels


def engine_name(base: str, level: int, multi: bool) -> str:
    """The engine's name: ``fp16@L3`` where several levels are built, ``fp16`` where one is (as before)."""
    return f"{base}@L{level}" if multi else base


def parse_named(items, what: str) -> list:
    """``["NAME=VALUE", ...]`` -> ``[(NAME, VALUE), ...]``; a name without ``=`` or given twice is refused."""
    out = []
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name or not value:
            raise ValueError(f"{what} {item!r}: give NAME=VALUE")
        out.append((name, value))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: a name is given twice ({', '.join(names)})")
    return out


def engine_plan(fp16: str, floats, qdqs, levels, pairs) -> list:
    """One record per engine to build, in build order (level by level, in the order given):
    ``{name, base, kind, model, level, graph}``; ``graph`` is the float model (FP16 engine) whose graph a Q/DQ
    model is written on (``--pair QDQ=FLOAT``, default ``fp16``: the model as given)."""
    bases = [("fp16", "fp16", fp16)] + [(n, "fp16", m) for n, m in floats] + [(n, "qdq", m) for n, m in qdqs]
    names = [b[0] for b in bases]
    if len(set(names)) != len(names):
        raise ValueError(f"engine names given twice: {', '.join(names)}")
    floats_known = {"fp16"} | {n for n, _ in floats}
    pairs = dict(pairs)
    for q, g in pairs.items():
        if q not in {n for n, _ in qdqs}:
            raise ValueError(f"--pair {q}={g}: {q} is no --qdq model")
        if g not in floats_known:
            raise ValueError(f"--pair {q}={g}: {g} is no float model (fp16 or a --float name)")
    multi = len(levels) > 1
    out = []
    for level in levels:
        for base, kind, model in bases:
            graph = base if kind == "fp16" else pairs.get(base, "fp16")
            out.append({"name": engine_name(base, level, multi), "base": base, "kind": kind, "model": model,
                        "level": level, "graph": graph})
    return out


def _median(rec) -> float:
    v = (rec or {}).get("median_ms")
    try:
        return float(v) if v is not None else float("nan")
    except (TypeError, ValueError):
        return float("nan")


def _metric(rec) -> float:
    acc = (rec or {}).get("accuracy") or {}
    v = acc.get("metric")
    return float(v) if v is not None else float("nan")


def _paired(a: dict, b: dict) -> dict:
    """``a`` against ``b`` round by round (:func:`~trtwidgets.core.plan.measured.paired.paired_rounds`)."""
    from trtwidgets.core.plan.measured.measurement import QDQ, Measurement
    from trtwidgets.core.plan.measured.paired import paired_rounds

    pr = paired_rounds(Measurement(a.get("name", "a"), QDQ, tuple(a.get("round_ms") or ())),
                       Measurement(b.get("name", "b"), QDQ, tuple(b.get("round_ms") or ())))
    return dict(pr.to_dict(), faster=pr.faster, text=pr.text())


def same_graph_report(engines: dict, plan: list, pick: str = "toolkit", target_ratio: float = TARGET_RATIO,
                      target_metric: float = TARGET_METRIC) -> dict:
    """Per level: each float graph's FP16 against FP16 as given (the rewrites' own gain), each Q/DQ engine against
    the FP16 of its own graph and of the graph as given, its accuracy and reformats; ``pick`` against every other
    Q/DQ engine of the same graph and level (the paired sign test, both ways; reformats); across levels, each
    model's time and build seconds against the first level given.

    ``engines``: name -> record (``median_ms``, ``round_ms``, ``summary.reformats``, ``build_seconds``,
    ``accuracy.metric``); ``plan``: :func:`engine_plan`'s records.
    """
    by = {(p["base"], p["level"]): p for p in plan}
    levels = list(dict.fromkeys(p["level"] for p in plan))
    out: dict = {"pick": pick, "target_ratio": target_ratio, "target_metric": target_metric, "levels": {}}
    for level in levels:
        rows = {}
        given = engines.get(by[("fp16", level)]["name"], {})
        for p in (q for q in plan if q["level"] == level):
            rec = engines.get(p["name"], {})
            graph = by.get((p["graph"], level))
            same = engines.get(graph["name"], {}) if graph else {}
            row = {"engine": p["name"], "kind": p["kind"], "graph": p["graph"], "median_ms": _median(rec),
                   "x_fp16_given": ratio(_median(rec), _median(given)),
                   "reformats": (rec.get("summary") or {}).get("reformats"),
                   "build_seconds": rec.get("build_seconds"), "metric": _metric(rec),
                   "cosine": ((rec.get("accuracy") or {}).get("cosine")), "error": rec.get("error", "")}
            if p["kind"] == "qdq":
                row["x_fp16_same_graph"] = ratio(_median(rec), _median(same))
                row["same_graph_fp16"] = graph["name"] if graph else None
            rows[p["base"]] = row
        lv: dict = {"rows": rows}
        if pick in rows:
            pk = rows[pick]
            lv["pick"] = {"engine": pk["engine"], "x_fp16_same_graph": pk.get("x_fp16_same_graph"),
                          "metric": pk["metric"],
                          "meets_ratio": bool(pk.get("x_fp16_same_graph", float("nan")) <= target_ratio),
                          "meets_metric": bool(pk["metric"] >= target_metric)}
            peers = {}
            for base, row in rows.items():
                if base == pick or row["kind"] != "qdq" or row["graph"] != pk["graph"]:
                    continue
                a, b = engines.get(pk["engine"], {}), engines.get(row["engine"], {})
                peer_faster = _paired(b, a)
                peers[base] = {"engine": row["engine"], "pick_vs_peer_ms": ratio(pk["median_ms"], row["median_ms"]),
                               "pick_faster": _paired(a, b), "peer_faster": peer_faster,
                               "not_slower": not peer_faster["faster"],
                               "reformats": [pk["reformats"], row["reformats"]],
                               "reformats_ok": (pk["reformats"] is not None and row["reformats"] is not None
                                                and pk["reformats"] <= row["reformats"])}
            lv["pick"]["peers_same_graph"] = peers
        out["levels"][str(level)] = lv
    if len(levels) > 1:
        first = levels[0]
        across = {}
        for base in dict.fromkeys(p["base"] for p in plan):
            a = engines.get(by[(base, first)]["name"], {})
            across[base] = {str(lv): {"x_time": ratio(_median(engines.get(by[(base, lv)]["name"], {})), _median(a)),
                                      "build_seconds": engines.get(by[(base, lv)]["name"], {}).get("build_seconds")}
                            for lv in levels}
        out["across_levels"] = {"against_level": first, "models": across}
    return out


def report_lines(rep: dict) -> list:
    """:func:`same_graph_report` in words, one line each."""
    lines = []
    for level, lv in rep["levels"].items():
        lines.append(f"== level {level}: each engine against FP16 as given and against the FP16 of its own graph")
        for base, r in lv["rows"].items():
            same = (f" x FP16 same graph ({r['same_graph_fp16']}) {r['x_fp16_same_graph']:.3f}"
                    if r["kind"] == "qdq" else (" (the rewrites' own gain)" if base != "fp16" else ""))
            lines.append(f"{r['engine']:<22} {r['median_ms']:.4f} ms  x FP16 given {r['x_fp16_given']:.3f}{same}  "
                         f"F1 {r['metric']:.4f}  reformats {r['reformats']}  build {r['build_seconds']} s"
                         + (f"  ERROR {r['error'][:200]}" if r["error"] else ""))
        pk = lv.get("pick")
        if pk:
            lines.append(f"pick {pk['engine']}: {pk['x_fp16_same_graph']:.3f}x FP16 of its graph "
                         f"({'meets' if pk['meets_ratio'] else 'misses'} <= {rep['target_ratio']}), F1 "
                         f"{pk['metric']:.4f} ({'meets' if pk['meets_metric'] else 'misses'} >= {rep['target_metric']})")
            for q in pk["peers_same_graph"].values():
                lines.append(f"  vs {q['engine']} (same graph): time ratio {q['pick_vs_peer_ms']:.3f}; pick "
                             f"{q['pick_faster']['text']}; peer {q['peer_faster']['text']}; "
                             f"{'not slower' if q['not_slower'] else 'SLOWER'} by the paired test; reformats "
                             f"{q['reformats'][0]} vs {q['reformats'][1]} ({'ok' if q['reformats_ok'] else 'MORE'})")
    if "across_levels" in rep:
        first = rep["across_levels"]["against_level"]
        lines.append(f"== across levels: time and build seconds against level {first}")
        for base, per in rep["across_levels"]["models"].items():
            lines.append(f"{base:<18} " + "  ".join(f"L{lv}: {v['x_time']:.3f}x, build {v['build_seconds']} s"
                                                   for lv, v in per.items()))
    return lines


def load_check(path: str, metric: str, subset: int, drop: float = 1 - TARGET_METRIC):
    """``(check, check of the first subset samples or None)``: the held-back check file (:class:`~trtwidgets.core.
    plan.engine_check.EngineCheck`, as ``benchmarks/yolo_same_graph.py`` writes it) judged by ``metric`` against FP32,
    ``meets`` where it is within ``drop`` of FP32's own value (the issue's F1 >= 0.95 against FP32's 1.0)."""
    import dataclasses

    import numpy as np

    from trtwidgets.core.accuracy.target import Target
    from trtwidgets.core.accuracy.task_metrics import make_task_metric
    from trtwidgets.core.plan.engine_check import EngineCheck

    check = EngineCheck.load(path, Target.for_metric(metric, max_metric_drop=drop))
    if not subset or subset >= len(check.feeds):
        return check, None
    ref = {k: np.asarray(v)[:subset] for k, v in check.outputs.items()}
    made = make_task_metric(metric, ref)
    sub = dataclasses.replace(check, feeds=check.feeds[:subset], target=dataclasses.replace(check.target, metric=made.fn),
                              metric_reference=float(made.fn(ref)), outputs=ref)
    return check, sub


def judge(engine_path: str, check, sub) -> dict:
    """The engine on the held-back check: its verdict (task metric, worst-group cosine), and on the first samples."""
    import numpy as np

    from trtwidgets.trt.engine_outputs import engine_outputs

    try:
        outs = engine_outputs(engine_path, check.feeds, check.axes)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {getattr(exc, 'what', None) or exc}"[:1000]}
    rec = check.verdict(outs).to_dict()
    if sub is not None:
        n = len(sub.feeds)
        rec["subset"] = dict(sub.verdict({k: np.asarray(v)[:n] for k, v in outs.items()}).to_dict(), first=n)
    return rec


def _build_seconds(build_dir: Path) -> float:
    """The build's own seconds from its folder's build.json (a cached engine's too), or NaN."""
    from trtwidgets.trt.build_phases.result import META_FILE

    try:
        return float(json.loads((build_dir / META_FILE).read_text())["build_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return float("nan")


def _write(out: Path, doc: dict) -> None:
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(out)


def build_engines(plan: list, a, doc: dict, out: Path, t0: float) -> dict:
    """Build (or find cached) every engine of ``plan`` one after the other; name -> engine path of those built.

    No build starts after ``--build-budget`` seconds from the start (a build cannot be stopped midway without
    losing it); the record is written after each build.
    """
    from trtwidgets.trt.measure_builds import build_all, build_specs, engine_in
    from trtwidgets.trt.measure import MeasureJob

    cache = Path(a.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    paths = {}
    for p in plan:
        rec = doc["engines"].setdefault(p["name"], {})
        rec.update(name=p["name"], kind=p["kind"], base=p["base"], level=p["level"], graph=p["graph"],
                   model=p["model"])
        key_of, specs = build_specs([MeasureJob(p["name"], p["kind"], p["model"])], cache, {}, p["level"], {})
        key = key_of[p["name"]]
        spec = specs[key]
        spec["timing_cache"] = str(cache / {"shared": "timing.cache", "level": f"timing_L{p['level']}.cache",
                                            "none": f"{key}.timing.cache"}[a.timing_cache])
        rec["key"] = key
        hit = engine_in(Path(spec["out_dir"]))
        if hit is None and a.build_budget and time.perf_counter() - t0 > a.build_budget:
            rec["error"] = f"not built: --build-budget {a.build_budget:.0f} s was spent"
            print(f"{p['name']}: not built (--build-budget)", flush=True)
            continue
        tc = Path(spec["timing_cache"])
        rec["timing_cache_bytes_before"] = tc.stat().st_size if tc.is_file() else 0
        res, _ = build_all({key: spec}, True, 1, cache)
        r = res.get(key, {})
        rec.update(cached=bool(r.get("cached")), error=r.get("error", "") or "",
                   build_seconds=round(_build_seconds(Path(spec["out_dir"])), 1))
        if not rec["error"] and r.get("engine_path"):
            paths[p["name"]] = r["engine_path"]
            rec.update(engine_layers(r["engine_path"]))
        print(f"{p['name']}: {'cached' if rec['cached'] else 'built'} {rec['build_seconds']} s "
              f"{rec['error'][:300]}", flush=True)
        _write(out, doc)
    return paths


def time_engines(paths: dict, a, doc: dict) -> bool:
    """Every engine built, timed in the same interleaved rounds; True when the rounds were cut short."""
    from trtwidgets.core.plan.measured.measurement import Measurement
    from trtwidgets.trt.timing_rounds import time_interleaved

    times, interrupted = time_interleaved(paths, {}, a.rounds, a.runs, 20, None, True)
    for name, rounds in times.items():
        rec = doc["engines"][name]
        m = Measurement(name, rec["kind"], tuple(rounds))
        rec.update(round_ms=list(rounds), median_ms=m.median_ms, spread_ms=m.spread_ms)
    doc["rounds"] = min((len(v) for v in times.values()), default=0)
    doc["interrupted"] = interrupted
    return interrupted


def _sigterm_as_interrupt() -> None:
    """A run stopped at its time limit (SIGTERM) ends like Ctrl-C: the rounds done are kept and written."""
    import signal

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def main(argv=None) -> int:
    os.environ.setdefault("TRTWIDGETS_NO_CUBLAS_CUDNN", "1")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fp16", help="the float model (FP16 engine)")
    ap.add_argument("--qdq", action="append", default=[], help="NAME=MODEL, a Q/DQ model (repeatable)")
    ap.add_argument("--float", action="append", default=[], dest="floats",
                    help="NAME=MODEL, another float model built as FP16 (repeatable: a rewritten graph beside --fp16)")
    ap.add_argument("--pair", action="append", default=[], help="QDQ=FLOAT: the Q/DQ model is written on that float "
                    "model's graph (a --float name; default fp16, the model as given): its ratio is against that FP16")
    ap.add_argument("--pick", default="toolkit", help="the Q/DQ model judged against the issue's targets and "
                    "paired against every other Q/DQ model of its graph")
    ap.add_argument("--parse", nargs="*", default=[], help="only parse these files with TensorRT 8.6")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--opt-level", type=int, default=1)
    ap.add_argument("--opt-levels", default="", help="e.g. 3,1: build every model at each level (in this order), "
                    "engines named NAME@L3; all timed in the same interleaved rounds")
    ap.add_argument("--build-budget", type=float, default=0, help="start no build after this many seconds (the "
                    "engines built are timed; a second call finds them in --cache-dir)")
    ap.add_argument("--build-only", action="store_true", help="build (or find cached) and stop: no timing")
    ap.add_argument("--timing-cache", choices=("shared", "level", "none"), default="shared",
                    help="TensorRT timing cache: one for every build (fastest), one per level, or none shared "
                         "(each build's seconds its own)")
    ap.add_argument("--check", default="", help="a held-back check file (benchmarks/yolo_same_graph.py's "
                    "check_b32.npz): every engine runs it after the timing, judged by --check-metric and cosine")
    ap.add_argument("--check-metric", default="detection")
    ap.add_argument("--check-drop", type=float, default=round(1 - TARGET_METRIC, 6), help="an engine meets the check "
                    "where its metric is within this of FP32's (0.05: F1 >= 0.95 against FP32's 1.0)")
    ap.add_argument("--check-subset", type=int, default=8, help="also judge on the first N samples (the family's "
                    "own held-back set); 0: not")
    ap.add_argument("--cache-dir", default="/tmp/peer_engines")
    ap.add_argument("--out", required=True)
    ap.add_argument("--profile", type=int, default=0, metavar="RUNS",
                    help="after timing, profile each engine's layers (TensorRT's IProfiler) over RUNS runs, two passes "
                         "interleaved across engines; the JSON gets each layer's median ms")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    import trtwidgets

    doc: dict = {"argv": sys.argv[1:] if argv is None else list(argv), "trtwidgets": trtwidgets.__file__,
                 "engines": {}}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if a.parse:
        doc["parse"] = [parse_only(Path(p)) for p in a.parse]
        for r in doc["parse"]:
            print(f"parse {Path(r['file']).name:<40} {'ok' if r['parsed'] else 'FAILED'} layers {r['layers']} "
                  + " | ".join(e[:300] for e in r["errors"][:3]), flush=True)
        _write(out, doc)
    if not a.fp16:
        return 0
    levels = parse_levels(a.opt_levels) if a.opt_levels else [a.opt_level]
    plan = engine_plan(a.fp16, parse_named(a.floats, "--float"), parse_named(a.qdq, "--qdq"), levels,
                       parse_named(a.pair, "--pair"))
    doc.update(levels=levels, plan=plan, timing_cache=a.timing_cache)
    check = sub = None
    if a.check and not a.build_only:  # read before any build: a bad file stops the run before the GPU time
        check, sub = load_check(a.check, a.check_metric, a.check_subset, a.check_drop)
        doc["check"] = {"file": a.check, "samples": len(check.feeds), "metric": a.check_metric,
                        "fp32_metric": check.metric_reference, "subset": len(sub.feeds) if sub else 0}
    _sigterm_as_interrupt()
    paths = build_engines(plan, a, doc, out, t0)
    doc["build_wall_seconds"] = round(time.perf_counter() - t0, 1)
    _write(out, doc)
    if a.build_only or not paths:
        print(f"{len(paths)} of {len(plan)} engines built or cached in {doc['build_wall_seconds']} s", flush=True)
        return 0
    interrupted = time_engines(paths, a, doc)
    _write(out, doc)
    if check is not None and not interrupted:
        for name, path in paths.items():
            doc["engines"][name]["accuracy"] = judge(path, check, sub)
        _write(out, doc)
    if a.profile and not interrupted:
        profile(doc["engines"], a.cache_dir, a.profile)
    doc["same_graph"] = same_graph_report(doc["engines"], plan, a.pick)
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    _write(out, doc)
    print_table(doc["engines"], engine_name("fp16", levels[0], len(levels) > 1))
    for line in report_lines(doc["same_graph"]):
        print(line, flush=True)
    return 0


def print_table(engines: dict, ref_name: str) -> None:
    """Per engine: median, ratio to ``ref_name``, spread, rounds, layers, INT8, reformats, PointWise, Scale, build s,
    and the check's metric and cosine."""
    ref = _median(engines.get(ref_name))
    print(f"{'engine':<22} {'median ms':>10} {'x ' + ref_name:>10} {'spread':>8} layers int8 reformats pointwise scale"
          "  build s  metric  cosine", flush=True)
    for name, r in engines.items():
        s = r.get("summary", {})
        acc = r.get("accuracy") or {}
        med = _median(r)
        print(f"{name:<22} {med:>10.4f} {ratio(med, ref):>10.3f} {float(r.get('spread_ms') or 'nan'):>8.4f} "
              f"{s.get('layers', '-')} {s.get('int8', '-')} {s.get('reformats', '-')} {s.get('pointwise', '-')} "
              f"{s.get('scale', '-')}  {r.get('build_seconds', '-')}  {acc.get('metric', '-')}  {acc.get('cosine', '-')} "
              f"{(r.get('error') or acc.get('error') or '')[:300]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
