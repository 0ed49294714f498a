"""Which INT8/float border makes TensorRT 8.6 assert in ``chooseHigherPrecision`` (issue 33): blocks and the YOLO.

TensorRT 8.6 refused the planner's "INT8 where it pays" YOLOv8 model with ``[graphOptimizer.cpp::
chooseHigherPrecision::7079] Error Code 2: Internal Error (Assertion dt1 == DataType::kFLOAT || dt1 ==
DataType::kHALF failed.)``. This script builds, each in its own process (an assertion may abort one), with FP16 +
INT8 at a static shape, cuBLAS/cuDNN tactic sources off:

* every block of ``tests/core/qdq_border_blocks.py`` (one border each, Q/DQ placed by hand);
* the YOLO (``--yolo``: the 320x320 float model, ``--amax``: its ranges) exported by the toolkit with the planner's
  options (``QdqOptions(trt_version="8.6")`` + ``PLANNER_PLACEMENT``) and a set of convs kept float: the issue's
  set (``partial``), its stem part only, its head part only, single head borders; and sub-models cut out of the
  ``partial`` export (``onnx.utils.extract_model``: the stem, the head).

It prints, per build, whether it built and TensorRT's exact error lines, and writes ``<out>/borders.json`` (per
job: status, seconds, errors, the engine's layer summary and per-layer precisions when it built). Python 3.9 with
numpy, onnx and tensorrt only::

    source /tmp/trtb/env.sh && EXTRA_PYTHONPATH=$PWD $PY39 scripts/gpu_border_blocks.py \\
        --yolo /tmp/w/yolo320.onnx --amax /tmp/w/yolo320_amax.json --out $OUT/borders --workers 4 --deadline 500
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STUBBED = ("CUBLAS", "CUBLAS_LT", "CUDNN")

#: The issue's "INT8 where it pays" candidate keeps these convs float (51 INT8 convs remain).
STEM = ("/model.0/conv/Conv", "/model.1/conv/Conv", "/model.2/cv1/conv/Conv", "/model.2/cv2/conv/Conv",
        "/model.2/m.0/cv1/conv/Conv", "/model.2/m.0/cv2/conv/Conv")
HEAD = ("/model.22/cv2.0/cv2.0.2/Conv", "/model.22/cv2.1/cv2.1.2/Conv", "/model.22/cv2.2/cv2.2.1/conv/Conv",
        "/model.22/cv3.2/cv3.2.1/conv/Conv", "/model.22/cv2.2/cv2.2.2/Conv", "/model.22/cv3.2/cv3.2.2/Conv")
P5_SIBLINGS = ("/model.22/cv2.2/cv2.2.0/conv/Conv", "/model.22/cv3.2/cv3.2.0/conv/Conv")
#: YOLO variants: name -> (convs kept float, builder optimization level, repair applied to the export or "").
YOLO_VARIANTS = {
    "yolo_partial": (STEM + HEAD, 1, ""),
    "yolo_partial_L0": (STEM + HEAD, 0, ""),
    "yolo_stem_float": (STEM, 0, ""),
    "yolo_head_float": (HEAD, 0, ""),
    "yolo_cv2.0.2_float": (HEAD[:1], 0, ""),
    "yolo_p5_branch_float": (HEAD[2:], 0, ""),
    # run 2: which of the P5 head's borders, and three repairs of the candidate
    "yolo_cv3.2.1_float": (HEAD[3:4], 0, ""),
    "yolo_p5_mid_float": (HEAD[2:4], 0, ""),
    "yolo_partial_closed": (STEM + HEAD + P5_SIBLINGS, 0, ""),
    "yolo_partial_q_siblings": (STEM + HEAD, 0, "quantize_sibling_outputs"),
    "yolo_partial_split_dq": (STEM + HEAD, 0, "split_shared_dq"),
    "yolo_partial_split_qdq": (STEM + HEAD, 0, "split_shared_qdq"),
}
P5_IN = ["/model.21/cv2/act/Mul_output_0"]
P5_OUT = ["/model.22/cv2.2/cv2.2.2/Conv_output_0", "/model.22/cv3.2/cv3.2.2/Conv_output_0"]
#: Sub-models: name -> (the variant cut, inputs, outputs).
YOLO_CUTS = {
    "yolo_partial_cut_stem": ("yolo_partial", ["images"], ["/model.3/act/Mul_output_0"]),
    "yolo_partial_cut_head": ("yolo_partial", ["/model.15/cv2/act/Mul_output_0", "/model.18/cv2/act/Mul_output_0",
                                               "/model.21/cv2/act/Mul_output_0"], ["output0"]),
    "yolo_partial_cut_p5": ("yolo_partial", P5_IN, P5_OUT),
    "yolo_cv3.2.1_float_cut_p5": ("yolo_cv3.2.1_float", P5_IN, P5_OUT),
    "yolo_p5_mid_float_cut_p5": ("yolo_p5_mid_float", P5_IN, P5_OUT),
    "yolo_partial_q_siblings_cut_p5": ("yolo_partial_q_siblings", P5_IN, P5_OUT),
    "yolo_partial_split_dq_cut_p5": ("yolo_partial_split_dq", P5_IN, P5_OUT),
    "yolo_partial_split_qdq_cut_p5": ("yolo_partial_split_qdq", P5_IN, P5_OUT),
}
RUN2 = ("yolo_cv3.2.1_float", "yolo_p5_mid_float", "yolo_partial_closed", "yolo_partial_q_siblings",
        "yolo_partial_split_dq", "yolo_partial_split_qdq") + tuple(k for k in YOLO_CUTS if k.endswith("_cut_p5"))


# -- repairs tried on the export (experiments; a rule that holds goes to core/qdq) ------------------------------


def _index(graph):
    prod = {o: n for n in graph.node for o in n.output}
    cons = {}
    for n in graph.node:
        for t in n.input:
            cons.setdefault(t, []).append(n)
    return prod, cons


def _int8_layers(graph, prod):
    """Weighted nodes whose data input and weights both come from a DequantizeLinear."""
    return [n for n in graph.node if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul") and len(n.input) > 1
            and all(prod.get(t) is not None and prod[t].op_type == "DequantizeLinear" for t in n.input[:2])]


def shared_activation_dqs(graph):
    """Activation DequantizeLinear outputs read by two or more INT8 layers: ``{dq output: [layers]}``."""
    prod, _ = _index(graph)
    readers = {}
    for n in _int8_layers(graph, prod):
        dq = prod[n.input[0]]
        if prod.get(dq.input[0]) is not None and prod[dq.input[0]].op_type == "QuantizeLinear":
            readers.setdefault(n.input[0], []).append(n)
    return {t: ns for t, ns in readers.items() if len(ns) > 1}


def _silu_end(cons, tensor):
    """The tensor a SiLU (Sigmoid x Mul) after ``tensor`` writes, or ``tensor``."""
    users = cons.get(tensor, [])
    kinds = sorted(u.op_type for u in users)
    if kinds == ["Mul", "Sigmoid"]:
        mul = next(u for u in users if u.op_type == "Mul")
        sig = next(u for u in users if u.op_type == "Sigmoid")
        if sig.output[0] in mul.input:
            return mul.output[0]
    return tensor


def quantize_sibling_outputs(model, amax):
    """Q/DQ on the output (after a SiLU) of every INT8 layer that shares its input DQ and writes it in float."""
    import numpy as np
    from onnx import helper, numpy_helper

    g = model.graph
    prod, cons = _index(g)
    added = 0
    for _, layers in shared_activation_dqs(g).items():
        for layer in layers:
            end = _silu_end(cons, layer.output[0])
            users = cons.get(end, [])
            if not users or any(u.op_type == "QuantizeLinear" for u in users) or end not in amax:
                continue
            scale, zp = f"{end}_rq_scale", f"{end}_rq_zp"
            g.initializer.extend([numpy_helper.from_array(np.array(amax[end] / 127.0, np.float32), scale),
                                  numpy_helper.from_array(np.array(0, np.int8), zp)])
            q = helper.make_node("QuantizeLinear", [end, scale, zp], [f"{end}_rq"], name=f"{end}_rq_Q")
            dq = helper.make_node("DequantizeLinear", [f"{end}_rq", scale, zp], [f"{end}_rdq"], name=f"{end}_rq_DQ")
            for u in users:
                for k, t in enumerate(u.input):
                    if t == end:
                        u.input[k] = f"{end}_rdq"
            g.node.extend([q, dq])
            added += 1
    return _sorted(model), added


def split_shared_dq(model, amax=None, with_q: bool = False):
    """Each INT8 layer reading a shared activation DQ gets a DQ (``with_q``: a Q and a DQ) of its own."""
    from onnx import helper

    g = model.graph
    prod, _ = _index(g)
    added = 0
    for tensor, layers in shared_activation_dqs(g).items():
        dq = prod[tensor]
        q = prod[dq.input[0]]
        for i, layer in enumerate(layers[1:], 1):
            src = dq.input[0]
            if with_q:
                src = f"{q.output[0]}_split{i}"
                g.node.append(helper.make_node("QuantizeLinear", list(q.input), [src], name=f"{q.name}_split{i}"))
            out = f"{tensor}_split{i}"
            g.node.append(helper.make_node("DequantizeLinear", [src] + list(dq.input[1:]), [out],
                                           name=f"{dq.name}_split{i}"))
            layer.input[0] = out
            added += 1
    return _sorted(model), added


def _sorted(model):
    """Nodes in topological order (new nodes were appended)."""
    g = model.graph
    prod, _ = _index(g)
    known = {t.name for t in g.initializer} | {i.name for i in g.input} | {""}
    done, order, pending = set(), [], list(g.node)
    while pending:
        rest = []
        for n in pending:
            if all(t in known or t in done for t in n.input):
                order.append(n)
                done.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            raise ValueError("the graph has a cycle after the repair")
        pending = rest
    del g.node[:]
    g.node.extend(order)
    return model


REPAIRS = {"quantize_sibling_outputs": quantize_sibling_outputs, "split_shared_dq": split_shared_dq,
           "split_shared_qdq": lambda m, amax: split_shared_dq(m, amax, with_q=True)}


def _tactic_mask(trt) -> int:
    mask = 0
    for name, member in trt.TacticSource.__members__.items():
        if name not in STUBBED:
            mask |= 1 << int(member)
    return mask


def build_one(model: Path, opt_level: int, out: Path) -> dict:
    """Parse and build ``model`` (FP16 + INT8); the record (status, errors, layers). Runs in its own process."""
    import tensorrt as trt

    class Log(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)
            self.lines = []

        def log(self, severity, msg):
            self.lines.append((str(severity).split(".")[-1], msg))

    logger = Log()
    rec = {"model": model.name, "opt_level": opt_level, "trt": trt.__version__}
    t0 = time.perf_counter()
    builder = trt.Builder(logger)
    net = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(net, logger)
    if not parser.parse_from_file(str(model)):
        rec.update(status="parse failed", errors=[str(parser.get_error(i)) for i in range(parser.num_errors)])
    else:
        config = builder.create_builder_config()
        config.set_flag(trt.BuilderFlag.FP16)
        config.set_flag(trt.BuilderFlag.INT8)
        config.builder_optimization_level = opt_level
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
        config.set_tactic_sources(_tactic_mask(trt))
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 4 << 30)
        blob = builder.build_serialized_network(net, config)
        if blob is None:
            rec["status"] = "build failed"
        else:
            rec["status"] = "built"
            engine = trt.Runtime(logger).deserialize_cuda_engine(blob)
            text = engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
            (out / f"{model.stem}.graph.json").write_text(text)
            rec.update(_layers(json.loads(text, strict=False)))
    rec["errors"] = rec.get("errors", []) + [m for s, m in logger.lines if s in ("ERROR", "INTERNAL_ERROR")]
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    return rec


def _layers(doc) -> dict:
    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    graph = parse_inspector_json(doc)
    summary = graph.layer_summary()
    return {"summary": summary, "layers": [[layer.name, layer.type, layer.precision] for layer in graph.layers]}


@contextlib.contextmanager
def without_rule_12():
    """The export as it was before placement rule 12 (the models these runs built): its check finds nothing."""
    from trtwidgets.core.qdq import export

    kept = export.float_output_siblings
    export.float_output_siblings = lambda model: []
    try:
        yield
    finally:
        export.float_output_siblings = kept


def yolo_models(yolo: Path, amax_path: Path, work: Path, wanted) -> dict:
    """The YOLO variants and cuts as files: name -> (path, optimization level).

    Each variant is the planner's candidate (its placement options, a node set of the weighted layers to run
    INT8: all but the ``floats``), written as the export wrote it before placement rule 12.
    """
    import onnx

    from trtwidgets.core.plan.plan_export import PLANNER_PLACEMENT
    from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
    from trtwidgets.core.qdq.graph_patterns import node_label

    proto = onnx.load(str(yolo))
    amax = json.loads(amax_path.read_text())
    opts = QdqOptions(trt_version="8.6").replace(**PLANNER_PLACEMENT)
    weighted = [node_label(n) for n in proto.graph.node if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul")]
    needed = set(wanted) | {YOLO_CUTS[c][0] for c in wanted if c in YOLO_CUTS}
    out = {}
    for name, (floats, level, repair) in YOLO_VARIANTS.items():
        if name not in needed:
            continue
        path = work / f"{name}.onnx"
        if not path.is_file():
            with without_rule_12():
                ex = build_qdq(proto, QdqSpec(amax, opts, nodes=set(weighted) - set(floats)))
            model, note = ex.model, ""
            if repair:
                model, added = REPAIRS[repair](model, amax)
                note = f", {repair}: {added} added"
                onnx.checker.check_model(model)
            onnx.save(model, str(path))
            print(f"{name}: {len(ex.report.quantized_layers)} INT8 layers, {len(floats)} convs kept float{note}", flush=True)
        out[name] = (path, level)
    for name, (source, inputs, outputs) in YOLO_CUTS.items():
        if name not in needed:
            continue
        path = work / f"{name}.onnx"
        if not path.is_file():
            onnx.utils.extract_model(str(out[source][0]), str(path), inputs, outputs)
        out[name] = (path, 0)
    return {k: v for k, v in out.items() if k in wanted}


def block_models(work: Path) -> dict:
    import onnx

    from tests.core.qdq_border_blocks import BORDER_BLOCKS

    out = {}
    for name, (make, _) in BORDER_BLOCKS.items():
        path = work / f"{name}.onnx"
        onnx.save(make(), str(path))
        out[name] = (path, 1)
        if name == "siblings_float_out":  # the repairs, on the block
            for repair in ("split_shared_dq", "split_shared_qdq"):
                model, _ = REPAIRS[repair](make(), {})
                onnx.save(model, str(work / f"{name}_{repair}.onnx"))
                out[f"{name}_{repair}"] = (work / f"{name}_{repair}.onnx", 1)
    return out


def run_job(name: str, path: Path, level: int, out: Path, deadline: float) -> dict:
    left = deadline - time.time()
    if left < 20:
        return {"job": name, "status": "not run", "errors": ["the run's deadline came first"]}
    cmd = [sys.executable, __file__, "--one", str(path), "--opt-level", str(level), "--out", str(out)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=left)
    except subprocess.TimeoutExpired:
        return {"job": name, "status": "timeout", "errors": [f"still building at the run's deadline ({left:.0f} s)"]}
    res = out / f"{path.stem}.result.json"
    if res.is_file():
        rec = json.loads(res.read_text())
    else:  # the process died (an abort): its last lines are the evidence
        rec = {"status": f"process died (exit {p.returncode})", "errors": (p.stdout + p.stderr).splitlines()[-15:]}
    rec["job"] = name
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--opt-level", type=int, default=1)
    ap.add_argument("--yolo")
    ap.add_argument("--amax")
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--deadline", type=float, default=500.0, help="seconds for the whole run")
    ap.add_argument("--only", default="", help="comma-separated job names, or run2 (default: all)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.one:
        rec = build_one(Path(a.one), a.opt_level, out)
        (out / f"{Path(a.one).stem}.result.json").write_text(json.dumps(rec, indent=1))
        return 0
    deadline = time.time() + a.deadline
    work = out / "models"
    work.mkdir(exist_ok=True)
    jobs = block_models(work)
    names = set(YOLO_VARIANTS) | set(YOLO_CUTS) | set(jobs)
    wanted = names if not a.only else (set(RUN2) | {k for k in jobs if k.startswith("siblings")} if a.only == "run2"
                                       else set(a.only.split(",")))
    if a.yolo:
        jobs.update(yolo_models(Path(a.yolo), Path(a.amax), work, wanted & (set(YOLO_VARIANTS) | set(YOLO_CUTS))))
    jobs = {k: v for k, v in jobs.items() if k in wanted}
    # The level-0 copy of a variant builds its own file name, so that two results never share one.
    for name in list(jobs):
        path, level = jobs[name]
        if name.endswith("_L0"):
            dup = work / f"{name}.onnx"
            if not dup.is_file():
                dup.write_bytes(path.read_bytes())
            jobs[name] = (dup, level)
    results = []
    with ThreadPoolExecutor(max_workers=a.workers) as pool:
        futures = {name: pool.submit(run_job, name, path, level, out, deadline) for name, (path, level) in jobs.items()}
        for name, fut in futures.items():
            rec = fut.result()
            results.append(rec)
            s = rec.get("summary") or {}
            extra = f" layers {s.get('layers')} int8 {s.get('int8')} reformats {s.get('reformats')}" if s else ""
            print(f"{name:<36} {rec['status']:<14} {rec.get('seconds', '')!s:>6} s{extra}", flush=True)
            for e in rec.get("errors", [])[:4]:
                print(f"    {e[:400]}", flush=True)
            (out / "borders.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
