"""Bounded memory on hostile calibration data (issue 22): time and peak RSS of three cases.

Each case runs ``trtwidgets calibrate`` in its own subprocess (peak RSS from ``ru_maxrss`` of the
children, wall time around it):

* ``sparse-npy``: a sparse 4 GB ``.npy`` (38,836 samples of 3x48x192 float32, nothing written to
  disk but the header) with ``--max-samples 2``: only two rows should be read;
* ``npz-bomb``: a ~1.4 MB ``.npz`` whose one member expands to 1.4 GB of zeros: its declared size
  (npy header) is checked before anything is decompressed;
* ``resize-huge``: ``--shape x:1x1x16384x16384 --adapt x:resize`` for a model whose input is a
  fixed 1x1x8x8: refused from the shapes, before a sample is read or resized.

    python benchmarks/bounded_memory.py [--json OUT] [--only CASE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _sparse_npy(path: Path, rows: int = 38836) -> None:
    """A 4 GB .npy of zeros that takes no disk space: header, then a hole."""
    header = {"descr": "<f4", "fortran_order": False, "shape": (rows, 3, 48, 192)}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.truncate(f.tell() + rows * 3 * 48 * 192 * 4)


def _npz_bomb(path: Path, rows: int = 12658) -> None:
    """A compressed .npz whose array is 1.4 GB of zeros, written in pieces (never held in memory here)."""
    header = {"descr": "<f4", "fortran_order": False, "shape": (rows, 3, 48, 192)}
    chunk = np.zeros((64, 3, 48, 192), np.float32).tobytes()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z, \
            z.open("x.npy", "w", force_zip64=True) as f:
        np.lib.format.write_array_header_1_0(f, header)
        left = rows
        while left:
            n = min(64, left)
            f.write(chunk[: n * 3 * 48 * 192 * 4])
            left -= n


def _fixed_model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    graph = helper.make_graph(nodes, "fixed8", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 8, 8])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))


def cases(work: Path) -> dict:
    """Case name -> argv of ``trtwidgets``."""
    from trtwidgets import demo

    (work / "sparse").mkdir()
    _sparse_npy(work / "sparse" / "big.npy")
    (work / "bomb").mkdir()
    _npz_bomb(work / "bomb" / "s.npz")
    (work / "small").mkdir()
    np.save(work / "small" / "s.npy", np.ones((1, 1, 8, 8), np.float32))
    _fixed_model(work / "fixed8.onnx")
    model = str(demo.MODEL_PATH)
    return {
        "sparse-npy": ["calibrate", model, "--data", str(work / "sparse"), "--max-samples", "2", "--no-progress"],
        "npz-bomb": ["calibrate", model, "--data", str(work / "bomb"), "--max-samples", "2", "--no-progress"],
        "resize-huge": ["calibrate", str(work / "fixed8.onnx"), "--data", str(work / "small"), "--no-progress",
                        "--shape", "x:1x1x16384x16384", "--adapt", "x:resize"],
    }


def measure(argv) -> dict:
    """Exit code, seconds, peak RSS (MiB) and the message's first line of one CLI run in a fresh process."""
    code = ("import resource, sys, time\n"
            "from trtwidgets.cli import main\n"
            "t = time.perf_counter(); rc = main(sys.argv[1:]); s = time.perf_counter() - t\n"
            "print('RESULT', rc, s, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    line = next((ln for ln in p.stderr.splitlines() if ln.startswith("RESULT")), None)
    first = next((ln for ln in p.stderr.splitlines() if ln.startswith("trtwidgets ")), "")
    if line is None:
        return {"exit": p.returncode, "seconds": round(wall, 2), "peak_rss_mib": None, "message": p.stderr[-300:]}
    _, rc, secs, rss = line.split()
    return {"exit": int(rc), "seconds": round(float(secs), 2), "peak_rss_mib": round(int(rss) / 1024, 1),
            "message": first[:160]}


#: The reference run: the same cases at the branch point before bounded reads (8c30ce6), same machine
#: (benchmarks/results/bounded_memory.txt): seconds and peak RSS in MiB.
REFERENCE = {"sparse-npy": (6.89, 5223.0), "npz-bomb": (17.28, 1774.0), "resize-huge": (12.12, 4180.0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--only", help="run one case")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in cases(Path(tmp)).items():
            if args.only and name != args.only:
                continue
            out[name] = r = measure(argv)
            ref_s, ref_mib = REFERENCE.get(name, (float("nan"), float("nan")))
            rss = r["peak_rss_mib"] if r["peak_rss_mib"] is not None else float("nan")
            print(f"{name:12} exit {r['exit']}  {r['seconds']:7.2f} s (reference {ref_s:.2f} s)  peak RSS {rss} MiB "
                  f"(reference {ref_mib:.0f} MiB, ratio {rss / ref_mib:.3f})  {r['message']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
