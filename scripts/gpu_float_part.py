"""The float part on TensorRT 8.6: the same Q/DQ model with its float part in FP32 and in FP16, end to end.

Issue 21's float-part target. The export check (``core/qdq/export_check.py``) compares an FP16 float part
with the FP32 one holding every quantizer at the FP32 side's integers, because end to end the INT8 steps
hide the float part. This script shows what end to end looks like on a real engine: each zoo family's
TensorRT 8.6 export (FP32 float part, the export's own scales) built twice, with the INT8 flag only (the
float part runs in FP32) and with INT8 + FP16 (TensorRT runs the float part in FP16 where it is faster),
builder level 1, one fixed shape, then run on the held-back samples and compared with each other and with
ONNX Runtime's FP32 run of the same model.

CPU (writes ``<dir>/<family>.qdq.onnx``, ``.feeds.npz``, ``.ref.npz``; the zoo's samples must exist)::

    python scripts/gpu_float_part.py prepare --families cls,det,minilm,resnet --dir zoo_gpu/fp

GPU machine (Python 3.9, numpy + onnx + tensorrt only)::

    source /tmp/trtb/env.sh && TRTWIDGETS_NO_CUBLAS_CUDNN=1 EXTRA_PYTHONPATH=$PWD \\
        $PY39 scripts/gpu_float_part.py run --dir zoo_gpu/fp --out $OUT/fp

Writes ``<out>/float_part_trt.json``: per family and build, the cosine per output against ONNX Runtime's
FP32 run and between the two engines, the layer precisions, build seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

BUILDS = {"fp32_float_part": ("int8",), "fp16_float_part": ("fp16", "int8")}


def prepare(families, folder: Path) -> None:
    import numpy as np

    import zoo_families
    from trtwidgets.core.calibration.calibration import Calibration
    from trtwidgets.core.common.ort import open_session
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.qdq.export import QdqSpec, build_qdq, save_qdq_model
    from trtwidgets.core.qdq.options import QdqOptions
    from float_part_zoo import _as_read

    folder.mkdir(parents=True, exist_ok=True)
    for fam in families:
        root = zoo_families.ZOO / "families" / fam
        loaded = load_model(zoo_families.prepare(fam, reuse=True)["model"])
        opts = QdqOptions(trt_version="8.6")
        cal = Calibration.load(root / "float_part" / "stats.npz", method="entropy").check_fits(loaded)
        model = build_qdq(loaded, QdqSpec.from_calibration(cal, opts)).model
        save_qdq_model(model, folder / f"{fam}.qdq.onnx")
        feeds = _as_read(loaded, str(root / "heldback"))
        sess = open_session(model, optimization="disable", purpose="reference")
        names = [o.name for o in sess.get_outputs()]
        inputs = [i.name for i in sess.get_inputs()]
        ref = {n: [] for n in names}
        for f in feeds:
            for n, v in zip(names, sess.run(names, {k: f[k] for k in inputs})):
                ref[n].append(v)
        np.savez(folder / f"{fam}.feeds.npz", **{k: np.stack([f[k] for f in feeds]) for k in inputs})
        np.savez(folder / f"{fam}.ref.npz", **{k: np.stack(v) for k, v in ref.items()})
        print(fam, "written", (folder / f"{fam}.qdq.onnx").stat().st_size // 1024, "KiB", flush=True)


def _cos(a, b) -> float:
    from trtwidgets.core.qdq.float_part.held_quantizers import Cosine

    c = Cosine()
    c.add(a, b)
    return c.value


def run(folder: Path, out: Path, families) -> int:
    import numpy as np

    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import Recipe
    from trtwidgets.trt.build import build
    from trtwidgets.trt.runner import EngineRunner

    out.mkdir(parents=True, exist_ok=True)
    report_path = out / "float_part_trt.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    for fam in families:
        feeds = dict(np.load(folder / f"{fam}.feeds.npz"))
        ref = dict(np.load(folder / f"{fam}.ref.npz"))
        n = len(next(iter(feeds.values())))
        loaded = load_model(folder / f"{fam}.qdq.onnx")
        shapes = {k: tuple(v.shape[1:]) for k, v in feeds.items()}  # one sample: a fixed profile where dynamic
        row = report.setdefault(fam, {})
        got = {}
        for name, flags in BUILDS.items():
            t0 = time.perf_counter()
            try:
                recipe = Recipe.for_model(loaded, flags=flags, data_shapes=shapes, builder_optimization_level=1,
                                          timing_cache=str(out / "timing.cache"))
                res = build(recipe, out_dir=out / f"{fam}-{name}", progress=False)
                seconds = time.perf_counter() - t0
                outs = {k: [] for k in ref}
                with EngineRunner(res.engine_path) as runner:
                    for i in range(n):
                        r = runner.infer({k: v[i] for k, v in feeds.items()})
                        for k in ref:
                            outs[k].append(np.asarray(r[k]).reshape(ref[k][i].shape))
                got[name] = {k: np.stack(v) for k, v in outs.items()}
                summary = parse_inspector_json(res.inspector_json_path).layer_summary()
                row[name] = {"flags": list(flags), "build_seconds": round(seconds, 1), "layers": summary,
                             "vs_onnxruntime_fp32": {k: _cos(ref[k], got[name][k]) for k in ref}}
            except Exception as exc:
                row[name] = {"flags": list(flags), "error": f"{type(exc).__name__}: {exc}"[:1500]}
            print(fam, name, json.dumps(row[name])[:600], flush=True)
            report_path.write_text(json.dumps(report, indent=1))
        if len(got) == 2:
            row["fp16_vs_fp32_float_part"] = {k: _cos(got["fp32_float_part"][k], got["fp16_float_part"][k])
                                              for k in ref}
            print(fam, "fp16 vs fp32 float part", row["fp16_vs_fp32_float_part"], flush=True)
        report_path.write_text(json.dumps(report, indent=1))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("prepare", "run"))
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out")
    ap.add_argument("--families", default="cls,det,minilm,resnet")
    a = ap.parse_args(argv)
    fams = [f for f in a.families.split(",") if f]
    if a.what == "prepare":
        prepare(fams, Path(a.dir))
        return 0
    return run(Path(a.dir), Path(a.out), fams)


if __name__ == "__main__":
    sys.exit(main())
