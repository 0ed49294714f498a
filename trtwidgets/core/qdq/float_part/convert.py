"""The non-quantized part of a Q/DQ model in FP16 or BF16 (the "high-precision dtype").

In a strongly typed TensorRT network the model's types decide precision: an FP32 float part runs
in FP32, with reformats at every INT8/FP32 border. So the export writes:

* float initializers, ``Constant`` values and Q/DQ scales in FP16 (BF16) (opset >= 19);
* ``Cast(to=FLOAT)`` and ``ConstantOfShape`` inside the graph in the new type;
* graph inputs and outputs in FP32: one ``Cast`` after each float input and before each float output;
* BatchNormalization first as its equivalent scale and shift (a running variance may exceed 65504).

FP32 is kept, each case with its reason in :attr:`FloatPartReport.kept_fp32`, where an
operator schema refuses the lower type (:mod:`trtwidgets.core.model.type_constraints`) and for
whatever computes such an input; for a decomposed LayerNorm's variance (``Pow``/``ReduceMean``/
``Sqrt``); for ops without a schema and values read inside If/Loop bodies; and for the ops the user
names (``keep_fp32``). A QuantizeLinear that reads a Concat of DequantizeLinears is written in FP32
(:mod:`..ort_concat`).

A BF16 float part is written at opset 22 where the target parses it (:func:`preferred_opset`); for
TensorRT 8.6 the float part stays FP32 and the FP16 builder flag decides (:func:`default_high_precision`).
Why not an existing converter: docs/evidence.md, "high_precision".
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Set, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...common.errors import UserError
from ...model.graph_patterns import node_label
from ...model.onnx_graph import subgraph_reads
from ...model.type_constraints import float_tensors, low_precision_blockers
from .report import FloatPartReport, QdqValue
from .weight_scales import stored_weight_dqs, weight_scale_fp16
from ..ort_concat import fp32_concat_quantizers

__all__ = ["HIGH_PRECISIONS", "HighPrecisionError", "FloatPartReport", "QdqValue", "default_high_precision",
           "convert_float_part", "MIN_OPSET", "PREFERRED_OPSET", "preferred_opset"]

#: Supported high-precision dtypes -> ONNX element type.
HIGH_PRECISIONS = {"fp32": onnx.TensorProto.FLOAT, "fp16": onnx.TensorProto.FLOAT16,
                   "bf16": onnx.TensorProto.BFLOAT16}
#: Q/DQ with FP16/BF16 scales needs opset 19.
MIN_OPSET = 19
#: The opset a float part in this type wants: Conv, MaxPool, GlobalAveragePool and HardSwish take
#: bfloat16 from opset 22 on (before it, the schemas keep them FP32 in a BF16 float part).
PREFERRED_OPSET = {"fp32": 0, "fp16": MIN_OPSET, "bf16": 22}
_FP16_MAX = 65504.0
_FP16_MIN_NORMAL = 2.0 ** -14

_LAYERNORM_FP32 = ("Pow", "ReduceMean", "Sqrt", "Add")
_QDQ = ("QuantizeLinear", "DequantizeLinear")


class HighPrecisionError(UserError):
    """The model's float part cannot be written in the requested type."""


def default_high_precision(trt_version=None) -> str:
    """The float part's dtype for a target TensorRT: FP32 for 8.x/9.x (its parser), FP16 from 10.

    TensorRT 8.6 reads opset <= 17 with FP32 Q/DQ scales, so its float part stays
    FP32 in the model and the FP16 builder flag lowers it. TensorRT 10 reads FP16
    scales (opset 19), and 11 is strongly typed: there the model's type is the
    precision, so FP16 is the only way to a fast float part.
    """
    if trt_version is None:
        return "fp16"
    from ...model.trt_version import parse_trt_version

    v = parse_trt_version(trt_version)
    return "fp16" if v.major >= 10 else "fp32"


def preferred_opset(dtype: str, trt_version=None) -> int:
    """The opset to export a ``dtype`` float part at: :data:`PREFERRED_OPSET`, unless the target's parser
    reads less (TensorRT 10.0-10.7 read opset 20), then :data:`MIN_OPSET` (the schemas keep more FP32)."""
    want = PREFERRED_OPSET.get(dtype, MIN_OPSET)
    if trt_version is None or want <= MIN_OPSET:
        return want
    from ...model.trt_support import MAX_OPSET
    from ...model.trt_version import parse_trt_version

    v = parse_trt_version(trt_version)
    limit = max((o for since, o in MAX_OPSET if v >= since), default=want)
    return want if limit >= want else MIN_OPSET


def _to_dtype(arr: np.ndarray, dtype: str, name: str, clamped: List[str], scale: bool = False) -> onnx.TensorProto:
    a = np.asarray(arr, np.float32)
    if scale and dtype == "fp16" and np.any((a > 0) & (a < _FP16_MIN_NORMAL)):
        # A QuantizeLinear scale that rounds to 0 (or loses its bits) in FP16 would divide by zero in Q. Its
        # DequantizeLinear reads the same scale, so the pair stays consistent (a coarser step). Never for a
        # stored weight's scale: its integers were computed with the FP32 scale (:func:`~.weight_scales.weight_scale_fp16`).
        clamped.append(name)
        a = np.where(a > 0, np.maximum(a, _FP16_MIN_NORMAL), a)
    if dtype == "fp16":
        finite = np.isfinite(a)
        if np.any(np.abs(a[finite]) > _FP16_MAX):
            clamped.append(name)
            a = np.where(finite, np.clip(a, -_FP16_MAX, _FP16_MAX), a)
        return numpy_helper.from_array(a.astype(np.float16), name)
    # BF16: round to nearest even on the upper 16 bits of the FP32 pattern (numpy has no bfloat16).
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    t = onnx.TensorProto()
    t.name = name
    t.data_type = onnx.TensorProto.BFLOAT16
    t.dims.extend(a.shape)
    t.raw_data = rounded.tobytes()
    return t


def _fp32_nodes(graph: onnx.GraphProto, patterns, keep_fp32: Iterable[str]) -> Dict[int, str]:
    """Node index -> why it stays FP32, for the user's names and decomposed LayerNorms."""
    keep: Dict[int, str] = {}
    names = set(keep_fp32)
    for i, n in enumerate(graph.node):
        if n.name in names or n.op_type in names or any(o in names for o in n.output):
            keep[i] = "kept FP32 by the user"
    # Patterns are matched by node label: their indices refer to the graph before Q/DQ went in.
    ln_labels = {lab for p in patterns if p.kind == "layernorm" for lab in p.node_labels}
    for i, n in enumerate(graph.node):
        if node_label(n) in ln_labels and n.op_type in _LAYERNORM_FP32:
            keep.setdefault(i, "LayerNorm variance: x**2 overflows FP16 above 256, the mean loses precision")
    return keep


def _check_request(proto: onnx.ModelProto, dtype: str, require_opset: bool) -> None:
    if dtype not in HIGH_PRECISIONS:
        raise HighPrecisionError(f"Unknown high-precision dtype {dtype!r}.",
                                 f"Choose one of {', '.join(HIGH_PRECISIONS)}.",
                                 "fp16 suits TensorRT 10/11 on any GPU; bf16 needs Ampere or later; fp32 suits 8.6.")
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if dtype != "fp32" and require_opset and opset < MIN_OPSET:
        raise HighPrecisionError(f"The model is opset {opset}; FP16/BF16 Q/DQ scales need opset {MIN_OPSET}.",
                                 "QuantizeLinear/DequantizeLinear take FP16/BF16 scales from opset 19 on.",
                                 "Export with opset=19 or later (the exporter raises it for you).")


def convert_float_part(proto: onnx.ModelProto, dtype: str = "fp16", *, keep_fp32: Iterable[str] = (),
                       patterns=(), require_opset: bool = True,
                       memo: Optional[dict] = None) -> Tuple[onnx.ModelProto, FloatPartReport]:
    """Write the float part of ``proto`` (a Q/DQ or float model, opset >= 19) in ``dtype``.

    Parameters
    ----------
    proto : onnx.ModelProto
        Modified in place and returned.
    dtype : {"fp16", "bf16", "fp32"}
        ``"fp32"`` returns the model unchanged.
    keep_fp32 : iterable of str
        Node names, output names or op types to keep in FP32 (Casts around them).
    patterns : sequence of PatternMatch
        Protected patterns found by placement (decomposed LayerNorms keep their
        variance in FP32).
    require_opset : bool
        Refuse opsets below 19 (FP16 Q/DQ scales need it); False converts a model
        without Q/DQ at any opset (the planner's FP16 candidate).
    memo : dict, optional
        Kept across conversions of Q/DQ copies of one graph: its tensor types are inferred once
        (:func:`~...model.type_constraints.float_tensors`).

    Returns
    -------
    (onnx.ModelProto, FloatPartReport)

    Raises
    ------
    HighPrecisionError
        For an unknown dtype or an opset below 19.
    """
    _check_request(proto, dtype, require_opset)
    if dtype == "fp32":
        return proto, FloatPartReport("fp32")
    graph = proto.graph
    _normalize_batchnorms(graph)
    new_type = HIGH_PRECISIONS[dtype]
    subgraph = {t: "read inside an If/Loop/Scan body, which keeps its own types" for t in subgraph_reads(graph.node)}
    floats = float_tensors(proto, memo)
    blockers = low_precision_blockers(proto, new_type, subgraph, floats)
    keep = dict(blockers.kept_nodes)
    for i, why in _fp32_nodes(graph, patterns, keep_fp32).items():
        keep.setdefault(i, why)
    for i, n in enumerate(graph.node):
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            keep.setdefault(i, "holds a subgraph, whose types are its own")
    high_reads = {r for r in blockers.reads if r[0] not in keep}
    rewrite = _Rewrite(graph, dtype, keep, high_reads, floats, memo)
    rewrite.convert_initializers()
    rewrite.convert_nodes()
    qdq_values = rewrite.qdq_values()  # before graph outputs are renamed: labels as in the FP32 model
    rewrite.restore_outputs()
    del graph.node[:]
    graph.node.extend(_toposort(rewrite.nodes, {v.name for v in graph.input} | {t.name for t in graph.initializer}))
    del graph.value_info[:]  # stale FP32 types; TensorRT and ORT infer them again
    kept_rows = tuple((node_label(graph_node), keep[i]) for i, graph_node in rewrite.kept_math())
    n_nodes = len(graph.node)
    kept_rows += tuple(fp32_concat_quantizers(graph))  # so that ONNX Runtime's default session loads it
    report = FloatPartReport(dtype=dtype, converted_initializers=rewrite.converted, kept_fp32=kept_rows,
                                 casts=rewrite.casts + len(graph.node) - n_nodes,
                                 clamped=tuple(dict.fromkeys(rewrite.clamped)), qdq_values=qdq_values)
    return proto, report


class _Rewrite:
    """The conversion's bookkeeping: which tensors are low precision, which Casts exist."""

    def __init__(self, graph: onnx.GraphProto, dtype: str, keep: Dict[int, str], high_reads: Set[Tuple[int, int]],
                 floats: Set[str], memo: Optional[dict] = None) -> None:
        self.graph, self.dtype, self.keep, self.high_reads = graph, dtype, keep, high_reads
        self.memo = memo if memo is not None and "source_initializers" in memo else None
        self.new_type = HIGH_PRECISIONS[dtype]
        self.floats = floats
        self.original = list(graph.node)
        self.nodes: List[onnx.NodeProto] = []
        self.clamped: List[str] = []
        self.converted = 0
        self.casts = 0
        self.low: Set[str] = set()          # tensors written in the low type
        self.rewritten: Set[str] = set()    # initializers and Constant outputs whose values were written anew
        self.renamed: Dict[str, str] = {}   # FP32 initializer read by both sides -> its low copy
        self._down: Dict[str, str] = {}     # FP32 tensor -> its Cast to the low type
        self._up: Dict[str, str] = {}       # low tensor -> its Cast to FP32

    def _is_high_read(self, i: int, k: int) -> bool:
        return i in self.keep or (i, k) in self.high_reads

    def kept_math(self):
        """``(index, node)`` of the kept nodes that compute (Constants are values, not worth a row)."""
        return [(i, n) for i, n in enumerate(self.original) if i in self.keep and n.op_type != "Constant"]

    def convert_initializers(self) -> None:
        read_low: Set[str] = set()
        read_high: Set[str] = set()
        for i, n in enumerate(self.original):
            for k, x in enumerate(n.input):
                if x:
                    (read_high if self._is_high_read(i, k) else read_low).add(x)
        scales = {n.input[1] for n in self.original if n.op_type in _QDQ and len(n.input) > 1}
        weight_dqs = stored_weight_dqs(self.graph) if self.dtype == "fp16" else {}
        stored = {t.name: t for t in self.graph.initializer if t.name in {v[0] for v in weight_dqs.values()}}
        new_inits: List[onnx.TensorProto] = []
        for t in self.graph.initializer:
            if t.data_type != onnx.TensorProto.FLOAT or t.name not in read_low:
                continue
            arr = numpy_helper.to_array(t)
            if t.name in weight_dqs and t.name not in read_high:
                data, axis, requantize = weight_dqs[t.name]
                q0 = numpy_helper.to_array(stored[data]) if requantize else np.zeros(0, np.int8)
                q, s16 = weight_scale_fp16(q0, arr, axis, t.name,
                                            self.clamped, requantize)
                if requantize and q is not q0:
                    stored[data].CopyFrom(numpy_helper.from_array(q, data))
                    self.rewritten.add(data)
                t.CopyFrom(numpy_helper.from_array(s16, t.name))
                self.low.add(t.name)
                self.rewritten.add(t.name)
                self.converted += 1
                continue
            if t.name in read_high:
                self.renamed[t.name] = f"{t.name}__{self.dtype}"
                new_inits.append(_to_dtype(arr, self.dtype, self.renamed[t.name], self.clamped, t.name in scales))
                self.low.add(self.renamed[t.name])
                self.rewritten.add(self.renamed[t.name])
            else:
                t.CopyFrom(self._low_copy(t, arr, t.name in scales))
                self.low.add(t.name)
                self.rewritten.add(t.name)
            self.converted += 1
        self.graph.initializer.extend(new_inits)
        self._retype_initializer_inputs(new_inits)

    def _low_copy(self, t: onnx.TensorProto, arr: np.ndarray, scale: bool) -> onnx.TensorProto:
        """``t`` in the low type; a weight of the source graph is converted once per source (see ``memo``)."""
        if self.memo is None or scale or t.name not in self.memo["source_initializers"]:
            return _to_dtype(arr, self.dtype, t.name, self.clamped, scale)
        key = ("low_initializer", self.dtype, t.name)
        if key not in self.memo:
            clamped: List[str] = []
            self.memo[key] = (_to_dtype(arr, self.dtype, t.name, clamped, scale), bool(clamped))
        low, was_clamped = self.memo[key]
        if was_clamped:
            self.clamped.append(t.name)
        return low

    def _retype_initializer_inputs(self, new_inits: List[onnx.TensorProto]) -> None:
        """IR < 4 models list every initializer among the graph inputs too: their declared type follows."""
        declared = {v.name: v for v in self.graph.input}
        if not any(t.name in declared for t in self.graph.initializer):
            return
        for name in self.low:
            if name in declared:
                declared[name].type.tensor_type.elem_type = self.new_type
        for t in new_inits:
            self.graph.input.append(helper.make_tensor_value_info(t.name, self.new_type, list(t.dims)))

    def _cast(self, src: str, to: int, memo: Dict[str, str], suffix: str) -> str:
        if src not in memo:
            out = f"{src}__{suffix}"
            self.nodes.append(helper.make_node("Cast", [src], [out], name=f"{out}_Cast", to=to))
            self.casts += 1
            memo[src] = out
        return memo[src]

    def _read(self, n: onnx.NodeProto, i: int, k: int) -> None:
        x = n.input[k]
        if not x:
            return
        if self._is_high_read(i, k):
            if x in self.low:
                n.input[k] = self._cast(x, onnx.TensorProto.FLOAT, self._up, "fp32")
        elif x in self.renamed:
            n.input[k] = self.renamed[x]
        elif x in self.floats and x not in self.low:
            # An FP32 value (a graph input, or written by a kept node): cast down once.
            n.input[k] = self._cast(x, self.new_type, self._down, self.dtype)

    def convert_nodes(self) -> None:
        F32 = onnx.TensorProto.FLOAT
        for i, n in enumerate(self.original):
            if i in self.keep:
                for k in range(len(n.input)):
                    self._read(n, i, k)
                self.nodes.append(n)
                continue
            for k in range(len(n.input)):
                self._read(n, i, k)
            for a in n.attribute:
                if n.op_type == "Cast" and a.name == "to" and a.i == F32:
                    a.i = self.new_type
                if n.op_type in ("Constant", "ConstantOfShape") and a.name == "value" and a.t.data_type == F32:
                    a.t.CopyFrom(_to_dtype(numpy_helper.to_array(a.t), self.dtype, a.t.name, self.clamped))
                    self.converted += n.op_type == "Constant"
                    self.rewritten.update(n.output[:1] if n.op_type == "Constant" else ())
            self.nodes.append(n)
            self.low.update(o for o in n.output if o in self.floats)

    def qdq_values(self) -> Tuple[QdqValue, ...]:
        """The Q/DQ scales (slot 1) and stored weight values (slot 0 of a DequantizeLinear) written anew."""
        out = []
        for i, n in enumerate(self.original):
            if n.op_type not in _QDQ:
                continue
            for k in ((1, 0) if n.op_type == "DequantizeLinear" else (1,)):
                if k < len(n.input) and n.input[k] in self.rewritten:
                    out.append(QdqValue(i, node_label(n), k, n.input[k]))
        return tuple(out)

    def restore_outputs(self) -> None:
        """Graph outputs keep FP32: the producer writes a low tensor, a Cast restores FP32 under the old name."""
        for v in self.graph.output:
            out = v.name
            if v.type.tensor_type.elem_type != onnx.TensorProto.FLOAT or out not in self.low:
                continue
            inner = f"{out}__{self.dtype}"
            for n in self.nodes:
                for k, x in enumerate(n.input):
                    if x == out:
                        n.input[k] = inner
                for k, x in enumerate(n.output):
                    if x == out:
                        n.output[k] = inner
            self.nodes.append(helper.make_node("Cast", [inner], [out], name=f"{out}_Cast", to=onnx.TensorProto.FLOAT))
            self.casts += 1




def _normalize_batchnorms(graph: onnx.GraphProto) -> None:
    """Rewrite BatchNormalization parameters as an equivalent scale and shift (mean 0, variance 1 - eps).

    Running statistics often leave FP16's range (a variance above 65504 is common in
    exported detectors) while ``gamma / sqrt(var + eps)`` does not. The math is the
    same, done in FP32 before the cast; TensorRT folds the result into the convolution.
    Parameters may be initializers or ``Constant`` nodes (Paddle exports).
    """
    values: Dict[str, onnx.TensorProto] = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value":
                    values[n.output[0]] = a.t
    readers: Dict[str, int] = {}
    for n in graph.node:
        for x in n.input:
            readers[x] = readers.get(x, 0) + 1
    for n in graph.node:
        if n.op_type != "BatchNormalization" or len(n.input) != 5:
            continue
        names = list(n.input[1:])
        if not all(x in values and values[x].data_type == onnx.TensorProto.FLOAT for x in names):
            continue
        eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
        gamma, beta, mean, var = (numpy_helper.to_array(values[x]).astype(np.float64) for x in names)
        scale = gamma / np.sqrt(var + eps)
        new_values = (scale, beta - mean * scale, np.zeros_like(mean), np.full_like(var, max(1.0 - eps, 0.0)))
        for k, (x, v) in enumerate(zip(names, new_values)):
            arr = v.astype(np.float32)
            if readers.get(x, 0) == 1:
                values[x].CopyFrom(numpy_helper.from_array(arr, values[x].name))
            else:  # shared with another node: a copy of its own
                new = f"{x}__bn_{n.output[0]}"
                graph.initializer.append(numpy_helper.from_array(arr, new))
                n.input[k + 1] = new


def _toposort(nodes: List[onnx.NodeProto], available: Set[str]) -> List[onnx.NodeProto]:
    ready = set(available)
    pending = list(nodes)
    out: List[onnx.NodeProto] = []
    while pending:
        progressed = False
        rest = []
        for n in pending:
            if all((not x) or x in ready for x in n.input):
                out.append(n)
                ready.update(n.output)
                progressed = True
            else:
                rest.append(n)
        if not progressed:  # an outer-scope read (subgraphs) or a cycle: keep the order we have
            out.extend(rest)
            break
        pending = rest
    return out
