"""What finding TensorRT 8.x's Myelin MatMuls costs (placement rule 13), beside one ONNX shape-inference pass.

``core/qdq/myelin.py`` reads each MatMul's activation rank; where shape inference leaves a rank open
it completes the ranks (``_completed_ranks``: computed Reshape targets followed, inference run again,
up to four rounds). Each export and each plan asks once. This prints, per model, the time of
``myelin_matmuls`` over every MatMul (median of ``--repeat`` calls), the time of one
``onnx.shape_inference.infer_shapes`` pass (the reference: what any shape-aware step pays), their
ratio, how many MatMuls there are and how many Myelin takes::

    python benchmarks/myelin_ranks.py                      # the zoo's models found on this machine + the U-Net
    PYTHONPATH=/work/peer_pkgs TRTWIDGETS_ZOO=/work/zoo python benchmarks/myelin_ranks.py --out R.json

A model is skipped, and said so, where its file is not on this machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _models(names):
    """``name -> ModelProto`` for the names whose model is here."""
    from zoo_families import FAMILIES

    out = {}
    for name in names:
        try:
            if name == "unet":
                import unet_model

                out[name] = unet_model.unet()
            else:
                out[name] = onnx.load(str(FAMILIES[name]["model"]()))
        except Exception as exc:
            print(f"{name}: skipped ({type(exc).__name__}: {str(exc)[:100]})", file=sys.stderr)
    return out


def _median_seconds(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(name, proto, repeat):
    from trtwidgets.core.qdq.myelin import myelin_matmuls

    matmuls = [i for i, n in enumerate(proto.graph.node) if n.op_type == "MatMul"]
    found = myelin_matmuls(proto, matmuls, "8.6")
    mine = _median_seconds(lambda: myelin_matmuls(proto, matmuls, "8.6"), repeat)
    ref = _median_seconds(lambda: onnx.shape_inference.infer_shapes(proto), repeat)
    tensors = list(proto.graph.initializer) + [a.t for n in proto.graph.node if n.op_type == "Constant"
                                               for a in n.attribute if a.name == "value"]  # paddle2onnx's weights
    return {"model": name, "nodes": len(proto.graph.node),
            "params_m": round(sum(int(np.prod(t.dims)) for t in tensors) / 1e6, 2),
        "matmuls": len(matmuls), "myelin": len(found), "myelin_s": round(mine, 4),
        "one_inference_pass_s": round(ref, 4), "ratio": round(mine / ref, 2) if ref > 0 else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cls,det,rec,minilm,resnet,vit,captcha,yolo,unet")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    rows = [measure(n, p, args.repeat) for n, p in _models(args.models.split(",")).items()]
    print(f"{'model':<9}{'nodes':>7}{'params M':>10}{'MatMuls':>9}{'Myelin':>8}{'rule 13 s':>11}{'1 pass s':>10}"
          f"{'ratio':>7}")
    for r in rows:
        print(f"{r['model']:<9}{r['nodes']:>7}{r['params_m']:>10}{r['matmuls']:>9}{r['myelin']:>8}"
              f"{r['myelin_s']:>11.4f}{r['one_inference_pass_s']:>10.4f}{r['ratio']!s:>7}")
    if args.out:
        from trtwidgets.core.common.atomic import write_text_atomic

        write_text_atomic(Path(args.out), json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
