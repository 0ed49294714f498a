"""The toolkit's placement against ModelOpt's, tensor by tensor and border by border (issue 33, CPU).

    python benchmarks/yolo_borders.py [--json benchmarks/results/peer/placement_diff.json]

For each pair of Q/DQ models of one float model (the toolkit's all-INT8 export for TensorRT 8.6 and ModelOpt 0.47's
INT8 PTQ, both from ``benchmarks/modelopt_zoo.py``; default: the 320x320 YOLOv8n DocLayNet detector and the PaddleOCR
MobileNetV3 classifier ``cls``) it lists:

* **quantized reads**: every (tensor, reader) where the reader takes the tensor through a Q/DQ pair, by the reader's op
  type: read quantized by both, by the toolkit only, by ModelOpt only;
* **quantized weighted layers** of each;
* **CPU borders** of each: tensors read both through a Q/DQ and in float (TensorRT writes them in float and quantizes
  by a layer of its own), Concats whose inputs are partly quantized, and DequantizeLinear outputs read by a layer that
  is not weighted (point-wise or data movement: the DQ fuses only where TensorRT can run that layer in INT8);
* with ``--accuracy``: the toolkit's export again with placement rule 9 off (Split, Concat, MaxPool and Resize
  read in float, as ModelOpt leaves most Concat inputs) and with dense INT8 off, each scored in ONNX Runtime on the
  held-back samples by the model's task metric (what rule 9's shared scales cost in accuracy);
* **engine borders** where a GPU run recorded the engines (``--engines``, ``scripts/gpu_peer_yolo.py``'s JSON): each
  engine's reformat layers by kind (a DequantizeLinear or QuantizeLinear of its own, a copy of a Concat input, a
  format change at a layer's input or output, a Reshape copy) and by the YOLO block (``/model.N``) they sit in.

The models are not in the repository (the YOLO is AGPL-3.0): they are read from ``$TRTWIDGETS_ZOO/modelopt/<model>/``
(``toolkit.qdq.onnx``, ``modelopt_fp32.onnx``: ModelOpt's placement with an FP32 float part, the file TensorRT 8.6 can
read; its default FP16 file has the same Q/DQ placement) and ``$TRTWIDGETS_ZOO/families/<model>/float.onnx``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, Mapping, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
ZOO = Path(os.environ.get("TRTWIDGETS_ZOO", "/work/zoo"))
RESULTS = ROOT / "benchmarks" / "results" / "peer"
WEIGHTED = ("Conv", "ConvTranspose", "Gemm", "MatMul")


class QdqView:
    """A Q/DQ model seen through its float model's names: which reads are quantized, which layers run INT8."""

    def __init__(self, path: Path):
        import onnx

        self.model = onnx.load(str(path), load_external_data=False)
        g = self.model.graph
        self.inits = {t.name for t in g.initializer} | {n.output[0] for n in g.node if n.op_type == "Constant"}
        self.prod = {o: n for n in g.node for o in n.output}
        self.cons: Dict[str, list] = defaultdict(list)
        for n in g.node:
            for t in n.input:
                self.cons[t].append(n)
        self.nodes = [n for n in g.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear", "Constant")]
        self.outputs = {o.name for o in g.output}

    def source(self, tensor: str) -> Tuple[str, bool]:
        """``(the float model's tensor, read through Q/DQ)`` behind an input ``tensor``."""
        p = self.prod.get(tensor)
        if p is not None and p.op_type == "DequantizeLinear":
            q = self.prod.get(p.input[0])
            return (q.input[0] if q is not None and q.op_type == "QuantizeLinear" else p.input[0]), True
        return tensor, False

    def reader_id(self, node) -> str:
        """A reader's identity across the two files: the float model's name of its first output."""
        return node.output[0]

    def quantized_reads(self) -> Dict[Tuple[str, str], str]:
        """``(tensor, reader) -> reader op type`` for every activation read through a Q/DQ pair."""
        out = {}
        for n in self.nodes:
            for k, t in enumerate(n.input):
                src, q = self.source(t)
                if q and src not in self.inits and not (n.op_type in WEIGHTED and k == 1):
                    out[(src, self.reader_id(n))] = n.op_type
        return out

    def int8_layers(self) -> Set[str]:
        return {self.reader_id(n) for n in self.nodes if n.op_type in WEIGHTED and len(n.input) > 1
                and self.source(n.input[0])[1] and self.source(n.input[1])[1]}

    def borders(self) -> dict:
        """Where INT8 and float meet in the file (see the module docstring)."""
        mixed, concat_mixed, dq_pointwise = [], [], Counter()
        reads: Dict[str, Set[bool]] = defaultdict(set)
        for n in self.nodes:
            for t in n.input:
                if not t or t in self.inits:
                    continue
                src, q = self.source(t)
                if src in self.inits:
                    continue
                reads[src].add(q)
            if n.op_type == "Concat":
                kinds = {self.source(t)[1] for t in n.input}
                if kinds == {True, False}:
                    concat_mixed.append(self.reader_id(n))
            if n.op_type not in WEIGHTED:
                for t in n.input:
                    src, q = self.source(t)
                    if q and src not in self.inits:
                        dq_pointwise[n.op_type] += 1
        mixed = sorted(t for t, kinds in reads.items() if kinds == {True, False})
        return {"read_quantized_and_float": mixed, "concat_mixed_inputs": sorted(concat_mixed),
                "dq_read_by_non_weighted": dict(sorted(dq_pointwise.items()))}


def compare(float_path: Path, toolkit: Path, modelopt: Path) -> dict:
    """The two placements of one model side by side (counts and the tensors behind them)."""
    a, b = QdqView(toolkit), QdqView(modelopt)
    ra, rb = a.quantized_reads(), b.quantized_reads()
    both, only_a, only_b = set(ra) & set(rb), set(ra) - set(rb), set(rb) - set(ra)

    def by_op(keys, reads) -> dict:
        return dict(sorted(Counter(reads[k] for k in keys).items()))

    la, lb = a.int8_layers(), b.int8_layers()
    ba, bb = a.borders(), b.borders()
    return {
        "float_model": float_path.name, "toolkit_file": str(toolkit), "modelopt_file": str(modelopt),
        "quantized_reads": {"toolkit": len(ra), "modelopt": len(rb), "both": len(both),
                            "toolkit_only": len(only_a), "modelopt_only": len(only_b),
                            "both_by_reader_op": by_op(both, ra), "toolkit_only_by_reader_op": by_op(only_a, ra),
                            "modelopt_only_by_reader_op": by_op(only_b, rb),
                            "toolkit_only_list": sorted(f"{ra[k]} {k[1]} <- {k[0]}" for k in only_a),
                            "modelopt_only_list": sorted(f"{rb[k]} {k[1]} <- {k[0]}" for k in only_b)},
        "int8_layers": {"toolkit": len(la), "modelopt": len(lb), "toolkit_only": sorted(la - lb),
                        "modelopt_only": sorted(lb - la)},
        "cpu_borders": {"toolkit": {k: (len(v) if isinstance(v, list) else v) for k, v in ba.items()},
                        "modelopt": {k: (len(v) if isinstance(v, list) else v) for k, v in bb.items()},
                        "toolkit_lists": {k: v for k, v in ba.items() if isinstance(v, list)},
                        "modelopt_lists": {k: v for k, v in bb.items() if isinstance(v, list)}},
    }


_BLOCK = re.compile(r"/model\.(\d+)/")


def reformat_kind(name: str) -> str:
    """What a reformat layer of TensorRT 8.6's engine is, from its name."""
    if name.endswith("_QuantizeLinear") or "QuantizeLinear_clone" in name and "Dequantize" not in name:
        return "quantize layer"
    if re.search(r"DequantizeLinear(_clone_\d+)+$", name):
        return "dequantize layer"
    if "Concat_" in name and name.endswith(" copy"):
        return "Concat input copy"
    if name.startswith("Reformatting CopyNode"):
        return "format change at a layer"
    if "Reshape" in name and name.endswith("_copy_output"):
        return "Reshape copy"
    if name.endswith(" copy"):
        return "tensor copy"
    return "other"


def engine_borders(doc: Mapping) -> dict:
    """Per engine of a ``gpu_peer_yolo.py`` record: reformats by kind and by YOLO block, and their names."""
    out = {}
    for name, eng in doc.get("engines", {}).items():
        s = eng.get("summary") or {}
        names = s.get("reformat_names", [])
        blocks = Counter()
        for r in names:
            m = _BLOCK.findall(r)
            blocks[f"model.{m[0]}" if m else "input"] += 1
        out[name] = {"median_ms": eng.get("median_ms"), "spread_ms": eng.get("spread_ms"), "layers": s.get("layers"),
                     "int8": s.get("int8"), "reformats": s.get("reformats"), "pointwise": s.get("pointwise"),
                     "scale": s.get("scale"),
                     "by_kind": dict(sorted(Counter(reformat_kind(r) for r in names).items())),
                     "by_block": dict(sorted(blocks.items(), key=lambda kv: (len(kv[0]), kv[0]))),
                     "names": names}
    return out


def placement_accuracy(name: str) -> dict:
    """The toolkit's export of ``name`` with its default placement, rule 9 off and dense INT8 off, scored on the
    held-back samples (``benchmarks/modelopt_zoo.py``'s samples, metric and scoring)."""
    import tempfile

    import onnx

    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT))
    import modelopt_zoo as mz
    import trtwidgets as tw
    from trtwidgets.core.accuracy.task_metrics import parse_task_metric
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.plan.plan_data import read_plan_data
    from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq

    files = mz.model_files(name)
    loaded = load_model(files["model"])
    data = read_plan_data(loaded, files["calib"], held_back=files["heldback"])
    ref = mz.ort_outputs(Path(files["model"]), data.held, data.axes)
    metric = parse_task_metric(files["metric"], ref)
    amax = dict(tw.calibrate(loaded, files["calib"], progress=False).amax)
    out = {}
    variants = {"default": {}, "rule9_off": {"exclude_op_types": ("Split", "Concat", "MaxPool", "Resize")},
                "dense_off": {"dense_int8": False}}
    with tempfile.TemporaryDirectory() as tmp:
        for label, kw in variants.items():
            ex = build_qdq(loaded.proto, QdqSpec(amax, QdqOptions(trt_version="8.6", **kw)))
            path = Path(tmp) / f"{label}.onnx"
            onnx.save(ex.model, str(path))
            out[label] = dict(mz.score(metric, ref, mz.ort_outputs(path, data.held, data.axes), files["metric"]),
                              quantize_nodes=sum(n.op_type == "QuantizeLinear" for n in ex.model.graph.node),
                              int8_layers=len(ex.report.quantized_layers))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="yolo320,cls")
    ap.add_argument("--engines", nargs="*", default=[str(RESULTS / "peer_b32.json"), str(RESULTS / "peer_b1.json")],
                    help="gpu_peer_yolo.py records whose engines' reformats are compared")
    ap.add_argument("--json", default=str(RESULTS / "placement_diff.json"))
    ap.add_argument("--accuracy", action="store_true", help="also score the toolkit's placement variants (minutes)")
    a = ap.parse_args(argv)
    doc: dict = {"models": {}, "engines": {}}
    if a.accuracy:
        doc["accuracy"] = {m: placement_accuracy(m) for m in a.models.split(",")}
        for m, rows in doc["accuracy"].items():
            for label, r in rows.items():
                print(f"== {m} toolkit {label}: {r}")
    for m in a.models.split(","):
        d = ZOO / "modelopt" / m
        doc["models"][m] = compare(ZOO / "families" / m / "float.onnx", d / "toolkit.qdq.onnx", d / "modelopt_fp32.onnx")
    for path in a.engines:
        if Path(path).is_file():
            doc["engines"][Path(path).stem] = engine_borders(json.loads(Path(path).read_text()))
    for m, c in doc["models"].items():
        q, l, b = c["quantized_reads"], c["int8_layers"], c["cpu_borders"]
        print(f"== {m}: quantized reads toolkit {q['toolkit']}, ModelOpt {q['modelopt']}, both {q['both']}; "
              f"toolkit only {q['toolkit_only']} {q['toolkit_only_by_reader_op']}; "
              f"ModelOpt only {q['modelopt_only']} {q['modelopt_only_by_reader_op']}")
        print(f"   INT8 weighted layers toolkit {l['toolkit']}, ModelOpt {l['modelopt']}; toolkit only {l['toolkit_only']}; "
              f"ModelOpt only {l['modelopt_only']}")
        print(f"   CPU borders toolkit {b['toolkit']}")
        print(f"   CPU borders ModelOpt {b['modelopt']}")
    for run, engines in doc["engines"].items():
        for name, e in engines.items():
            print(f"== {run} {name}: {e['median_ms']} ms, {e['layers']} layers, {e['int8']} INT8, {e['reformats']} "
                  f"reformats {e['by_kind']}")
            print(f"   by block {e['by_block']}")
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
