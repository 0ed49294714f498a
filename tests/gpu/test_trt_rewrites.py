"""The export's exact graph rewrites against real TensorRT 8.6: same outputs, fewer layers TensorRT has to run.

Python 3.9 with numpy, onnx and tensorrt only. On the GPU machine::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 -m pytest tests/gpu/test_trt_rewrites.py -v -s

Two blocks, each built as written and rewritten (:mod:`trtwidgets.core.model.trt_rewrites`), FP16 (+ INT8 for the
Q/DQ export), builder level 1, timed in interleaved rounds:

* a distribution-focal-loss head as YOLOv8 exports it (Reshape, Transpose, Softmax over 16 bins, Transpose, 1x1
  Conv with the bin values) at batch 32 and 2100 anchors: rewritten, the Softmax runs on the Conv's layout and the
  two Transposes fold into one (the whole detector: ``benchmarks/results/rewrites``);
* the C2f stack of ``tests/core/region_models.py`` at batch 32, its Q/DQ export with and without the rewrites: the
  Concat of each C2f reads the first conv's output instead of the Split's two halves, so TensorRT no longer copies
  the halves into the Concat.

Each pair's engines give the same outputs on the same input (FP16 tolerance), and the rewritten engine has fewer
layers and reformats. ``$TRTWIDGETS_ARTIFACTS/trt_rewrites/trt_rewrites.json`` records the engines.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from tests.core import region_models as rm
from tests.gpu.build_helpers import artifacts_dir
from trtwidgets.core.model.trt_rewrites import apply_rewrites
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")

BATCH, ANCHORS = 32, 2100


def _models(work):
    """``name -> (kind, path)``: each block as written and rewritten."""
    from trtwidgets.core.plan.measured.measurement import FP16, QDQ

    out = {}
    head = rm.exported_dfl_head(BATCH, ANCHORS)
    for name, m in (("dfl", head), ("dfl rewritten", apply_rewrites(head, ("expectation_head",)).model)):
        path = work / f"{name.replace(' ', '_')}.onnx"
        onnx.save(m, str(path))
        out[name] = (FP16, str(path))
    c2f = rm.c2f_stack(c=64, hw=40, batch=BATCH)
    amax = {t: 4.0 for n in c2f.graph.node for t in list(n.input) + list(n.output)}
    for name, rewrites in (("c2f", ()), ("c2f rewritten", ("split_concat",))):
        ex = build_qdq(c2f, QdqSpec(amax, QdqOptions(trt_version="8.6", rewrites=rewrites)))
        assert bool(ex.report.rewrites) == bool(rewrites)
        path = work / f"{name.replace(' ', '_')}.onnx"
        onnx.save(ex.model, str(path))
        out[name] = (QDQ, str(path))
    return out


@pytest.fixture(scope="module")
def record(trt, tmp_path_factory):
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.trt.bench import random_feeds
    from trtwidgets.trt.build_phases.result import ENGINE_FILE, GRAPH_FILE
    from trtwidgets.trt.measure import MeasureJob, measure
    from trtwidgets.trt.runner import EngineRunner

    work = artifacts_dir(tmp_path_factory, "trt_rewrites")
    models = _models(work)
    report = measure([MeasureJob(n, k, p) for n, (k, p) in models.items()], work / "engines", rounds=5, runs=100,
                     warmup=20, opt_level=1, gpus=1, progress=True)
    doc = {"gpu": trt.__version__, "engines": {}}
    outputs = {}
    for m in report.measurements:
        rec = m.to_dict()
        if m.key and not m.error:
            folder = work / "engines" / m.key
            graph = parse_inspector_json(str(folder / GRAPH_FILE))
            rec.update(summary=graph.layer_summary(), layers=[[la.name, la.type, la.precision] for la in graph.layers])
            with EngineRunner(str(folder / ENGINE_FILE)) as runner:
                outputs[m.name] = runner.infer(random_feeds(runner, {}, seed=0))
        doc["engines"][m.name] = rec
    (work / "trt_rewrites.json").write_text(json.dumps(doc, indent=1, default=str))
    for name, r in doc["engines"].items():
        s = r.get("summary", {})
        print(f"{name:<16} {r['median_ms']!s:>10} ms spread {r['spread_ms']!s:>8} layers {s.get('layers')} "
              f"reformats {s.get('reformats')} {r['error'][:200]}")
    doc["outputs"] = outputs
    return doc


@pytest.mark.parametrize("block", ["dfl", "c2f"])
def test_the_rewritten_block_builds_and_gives_the_same_outputs(record, block):
    plain, rewritten = record["engines"][block], record["engines"][f"{block} rewritten"]
    assert not plain["error"] and not rewritten["error"], (plain["error"], rewritten["error"])
    a, b = record["outputs"][block], record["outputs"][f"{block} rewritten"]
    assert a.keys() == b.keys()
    for name in a:
        scale = float(np.abs(a[name]).max()) or 1.0
        assert np.abs(a[name].astype(np.float64) - b[name]).max() <= 2e-2 * scale, name


@pytest.mark.parametrize("block", ["dfl", "c2f"])
def test_the_rewritten_block_has_fewer_layers_and_reformats(record, block):
    plain, rewritten = (record["engines"][k]["summary"] for k in (block, f"{block} rewritten"))
    assert rewritten["layers"] < plain["layers"]
    assert rewritten["reformats"] < plain["reformats"]
