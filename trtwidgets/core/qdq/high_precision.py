"""The non-quantized part of a Q/DQ model in FP16 or BF16 (the "high-precision dtype").

In a strongly typed TensorRT network (TensorRT 11, and 10 with the
``STRONGLY_TYPED`` flag) the model's types decide precision: a Q/DQ model whose
float part is FP32 runs that part in FP32, with reformats at every INT8/FP32
border. TensorRT Model Optimizer writes the float part in FP16 for this reason;
this module does the same for the toolkit's exports:

* float initializers and ``Constant`` values become FP16 (BF16), Q/DQ scales too,
  so a DequantizeLinear outputs FP16 (opset >= 19 allows FP16/BF16 scales);
* ``Cast(to=FLOAT)`` inside the graph casts to the new type; ``ConstantOfShape``
  makes it;
* graph inputs and outputs keep their FP32 type: one ``Cast`` after each float
  input and before each float output, so callers feed and read what they did;
* BatchNormalization statistics are first rewritten as the equivalent scale and
  shift (a running variance above 65504 is common and would not survive FP16).

Casts are kept only where an op needs FP32, each listed with its reason in
:attr:`HighPrecisionReport.kept_fp32`:

* inputs the ONNX spec types as ``float`` only: ``Resize``/``Upsample`` scales and
  roi, and the shape arithmetic that computes them;
* the variance part of a decomposed LayerNorm (``Pow``/``ReduceMean``/``Sqrt``):
  ``x**2`` overflows FP16 above 256 and the mean loses precision;
* ops the user names (``keep_fp32``).

TensorRT 8.6's parser reads opset <= 17 and FP32 Q/DQ scales only: for it the
float part stays FP32 and the FP16 builder flag decides its precision
(:func:`default_high_precision`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Set, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..common.errors import UserError
from ..model.onnx_graph import GraphIndex

__all__ = ["HIGH_PRECISIONS", "HighPrecisionError", "HighPrecisionReport", "default_high_precision",
           "convert_float_part", "MIN_OPSET"]

#: Supported high-precision dtypes -> ONNX element type.
HIGH_PRECISIONS = {"fp32": onnx.TensorProto.FLOAT, "fp16": onnx.TensorProto.FLOAT16,
                   "bf16": onnx.TensorProto.BFLOAT16}
#: Q/DQ with FP16/BF16 scales needs opset 19.
MIN_OPSET = 19
_FP16_MAX = 65504.0
_FP16_MIN_NORMAL = 2.0 ** -14

# Inputs the ONNX spec types as float32 only (op -> input indices).
_FLOAT32_INPUTS = {"Resize": (1, 2), "Upsample": (1,)}
# Ops that only compute shapes/indices: kept in FP32 when they feed a float32-only input.
_SHAPE_OPS = {"Shape", "Gather", "Cast", "Div", "Mul", "Add", "Sub", "Concat", "Slice", "Unsqueeze", "Squeeze",
              "Constant", "Floor", "Ceil", "Reshape", "ConstantOfShape", "Identity", "Size"}
_LAYERNORM_FP32 = ("Pow", "ReduceMean", "Sqrt", "Add")
_QDQ = ("QuantizeLinear", "DequantizeLinear")


class HighPrecisionError(UserError):
    """The model's float part cannot be written in the requested type."""


@dataclass(frozen=True)
class HighPrecisionReport:
    """What :func:`convert_float_part` changed.

    Attributes
    ----------
    dtype : str
        ``"fp32"``, ``"fp16"`` or ``"bf16"``.
    converted_initializers : int
        Float initializers and Constant values written in ``dtype``.
    kept_fp32 : tuple of (str, str)
        Node label and why it stays FP32 (with Casts around it).
    casts : int
        Cast nodes added (graph inputs/outputs included).
    clamped : tuple of str
        Values outside the type's range that were clamped (e.g. an FP16 constant above 65504).
    """

    dtype: str
    converted_initializers: int = 0
    kept_fp32: Tuple[Tuple[str, str], ...] = ()
    casts: int = 0
    clamped: Tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"dtype": self.dtype, "converted_initializers": self.converted_initializers,
                "kept_fp32": [{"node": n, "reason": r} for n, r in self.kept_fp32], "casts": self.casts,
                "clamped": list(self.clamped)}


def default_high_precision(trt_version=None) -> str:
    """The float part's dtype for a target TensorRT: FP32 for 8.x/9.x (its parser), FP16 from 10.

    TensorRT 8.6 reads opset <= 17 with FP32 Q/DQ scales, so its float part stays
    FP32 in the model and the FP16 builder flag lowers it. TensorRT 10 reads FP16
    scales (opset 19), and 11 is strongly typed: there the model's type is the
    precision, so FP16 is the only way to a fast float part.
    """
    if trt_version is None:
        return "fp16"
    from ..model.trt_version import parse_trt_version

    v = parse_trt_version(trt_version)
    return "fp16" if v.major >= 10 else "fp32"


def _label(node: onnx.NodeProto) -> str:
    return node.name or f"{node.op_type}({node.output[0] if node.output else ''})"


def _to_dtype(arr: np.ndarray, dtype: str, name: str, clamped: List[str], scale: bool = False) -> onnx.TensorProto:
    a = np.asarray(arr, np.float32)
    if scale and dtype == "fp16" and np.any((a > 0) & (a < _FP16_MIN_NORMAL)):
        # A scale that rounds to 0 (or loses its bits) in FP16 would divide by zero in Q.
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


def _fp32_nodes(graph: onnx.GraphProto, index: GraphIndex, patterns, keep_fp32: Iterable[str]
                ) -> Dict[int, str]:
    """Node index -> why it stays FP32."""
    keep: Dict[int, str] = {}
    names = set(keep_fp32)
    for i, n in enumerate(graph.node):
        if n.name in names or n.op_type in names or any(o in names for o in n.output):
            keep[i] = "kept FP32 by the user"
    # Patterns are matched by node label: their indices refer to the graph before Q/DQ went in.
    ln_labels = {lab for p in patterns if p.kind == "layernorm" for lab in p.node_labels}
    for i, n in enumerate(graph.node):
        if _label(n) in ln_labels and n.op_type in _LAYERNORM_FP32:
            keep.setdefault(i, "LayerNorm variance: x**2 overflows FP16 above 256, the mean loses precision")
    # Shape arithmetic feeding float32-only inputs, walked backwards.
    produced_at = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    todo: List[str] = []
    for n in graph.node:
        for k in _FLOAT32_INPUTS.get(n.op_type, ()):
            if k < len(n.input) and n.input[k]:
                todo.append(n.input[k])
    seen: Set[str] = set()
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        i = produced_at.get(t)
        prod = graph.node[i] if i is not None else None
        if prod is None or prod.op_type not in _SHAPE_OPS:
            continue
        keep.setdefault(i, f"computes {t}, an input {prod.op_type} chains into a Resize/Upsample "
                           "scales or roi, which ONNX types as float32")
        todo.extend(x for x in prod.input if x)
    return keep


def convert_float_part(proto: onnx.ModelProto, dtype: str = "fp16", *, keep_fp32: Iterable[str] = (),
                       patterns=(), require_opset: bool = True) -> Tuple[onnx.ModelProto, HighPrecisionReport]:
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

    Returns
    -------
    (onnx.ModelProto, HighPrecisionReport)

    Raises
    ------
    HighPrecisionError
        For an unknown dtype or an opset below 19.
    """
    if dtype not in HIGH_PRECISIONS:
        raise HighPrecisionError(f"Unknown high-precision dtype {dtype!r}.",
                                 f"Choose one of {', '.join(HIGH_PRECISIONS)}.",
                                 "fp16 suits TensorRT 10/11 on any GPU; bf16 needs Ampere or later; fp32 suits 8.6.")
    if dtype == "fp32":
        return proto, HighPrecisionReport("fp32")
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if require_opset and opset < MIN_OPSET:
        raise HighPrecisionError(f"The model is opset {opset}; FP16/BF16 Q/DQ scales need opset {MIN_OPSET}.",
                                 "QuantizeLinear/DequantizeLinear take FP16/BF16 scales from opset 19 on.",
                                 "Export with opset=19 or later (the exporter raises it for you).")
    new_type = HIGH_PRECISIONS[dtype]
    F32 = onnx.TensorProto.FLOAT
    graph = proto.graph
    _normalize_batchnorms(graph)
    index = GraphIndex(graph)
    keep = _fp32_nodes(graph, index, patterns, keep_fp32)
    clamped: List[str] = []

    # Which float tensors each side reads: a tensor read by both gets a converted copy.
    inits = {t.name: t for t in graph.initializer if t.data_type == F32}
    read_low: Set[str] = set()
    read_high: Set[str] = set()
    for i, n in enumerate(graph.node):
        fixed = _FLOAT32_INPUTS.get(n.op_type, ())
        for k, x in enumerate(n.input):
            if x:
                (read_high if i in keep or k in fixed else read_low).add(x)
    converted = 0
    new_inits: List[onnx.TensorProto] = []
    renamed: Dict[str, str] = {}  # fp32 initializer read by both sides -> its low-precision copy
    scales = {n.input[1] for n in graph.node if n.op_type in _QDQ and len(n.input) > 1}
    for name, t in inits.items():
        if name not in read_low:
            continue
        arr = numpy_helper.to_array(t)
        if name in read_high:
            renamed[name] = f"{name}__{dtype}"
            new_inits.append(_to_dtype(arr, dtype, renamed[name], clamped, name in scales))
        else:
            t.CopyFrom(_to_dtype(arr, dtype, name, clamped, name in scales))
        converted += 1
    graph.initializer.extend(new_inits)

    # Tensor types after conversion: float tensors made by converted nodes are low precision.
    float_tensors: Set[str] = set(inits)
    for vi in list(graph.value_info) + list(graph.input) + list(graph.output):
        if vi.type.tensor_type.elem_type == F32:
            float_tensors.add(vi.name)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
        for vi in inferred.graph.value_info:
            if vi.type.tensor_type.elem_type == F32:
                float_tensors.add(vi.name)
    except Exception:  # noqa: BLE001 - inference is a hint; Constant outputs are found below anyway
        pass
    casts = 0
    new_nodes: List[onnx.NodeProto] = []
    low_name: Dict[str, str] = {}   # fp32 tensor -> its low-precision cast
    high_name: Dict[str, str] = {}  # low-precision tensor -> its fp32 cast
    graph_in = {v.name for v in graph.input if v.type.tensor_type.elem_type == F32}
    graph_out = {v.name for v in graph.output if v.type.tensor_type.elem_type == F32}
    low_tensors: Set[str] = {n for n in inits if n in read_low and n not in renamed} | set(renamed.values())

    def cast(src: str, to: int, suffix: str) -> str:
        nonlocal casts
        out = f"{src}__{suffix}"
        new_nodes.append(helper.make_node("Cast", [src], [out], name=f"{out}_Cast", to=to))
        casts += 1
        return out

    kept_rows: List[Tuple[str, str]] = []
    for i, n in enumerate(graph.node):
        if n.op_type == "Constant" and i not in keep:
            for a in n.attribute:
                if a.name == "value" and a.t.data_type == F32:
                    a.t.CopyFrom(_to_dtype(numpy_helper.to_array(a.t), dtype, a.t.name, clamped))
                    converted += 1
                    low_tensors.update(n.output)
            new_nodes.append(n)
            continue
        if i in keep:
            if n.op_type != "Constant":  # a value, not math: not worth a row
                kept_rows.append((_label(n), keep[i]))
            for k, x in enumerate(n.input):
                if x in low_tensors:
                    if x not in high_name:
                        high_name[x] = cast(x, F32, "fp32")
                    n.input[k] = high_name[x]
            new_nodes.append(n)
            continue
        fixed = _FLOAT32_INPUTS.get(n.op_type, ())
        for k, x in enumerate(n.input):
            if k in fixed:
                if x in low_tensors:  # a float32-only input (Resize scales): never lowered
                    if x not in high_name:
                        high_name[x] = cast(x, F32, "fp32")
                    n.input[k] = high_name[x]
                continue
            if x in renamed:
                n.input[k] = renamed[x]
            elif x in graph_in or (x in float_tensors and x not in low_tensors and x not in inits):
                # An FP32 value (a graph input, or made by a kept node): cast down once.
                if x not in low_name:
                    low_name[x] = cast(x, new_type, dtype)
                n.input[k] = low_name[x]
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == F32:
                a.i = new_type
            if n.op_type == "ConstantOfShape" and a.name == "value" and a.t.data_type == F32:
                a.t.CopyFrom(_to_dtype(numpy_helper.to_array(a.t), dtype, a.t.name, clamped))
        new_nodes.append(n)
        low_tensors.update(o for o in n.output if o in float_tensors or n.op_type in _QDQ)
    # Graph outputs: the producer writes a low-precision tensor; a Cast restores FP32 under the old name.
    for out in graph_out:
        if out not in low_tensors:
            continue
        inner = f"{out}__{dtype}"
        for n in new_nodes:
            for k, x in enumerate(n.input):
                if x == out:
                    n.input[k] = inner
            for k, x in enumerate(n.output):
                if x == out:
                    n.output[k] = inner
        new_nodes.append(helper.make_node("Cast", [inner], [out], name=f"{out}_Cast", to=F32))
        casts += 1
    # Casts must come after their producers: order by dependencies (Kahn), keeping the original order otherwise.
    del graph.node[:]
    graph.node.extend(_toposort(new_nodes, {v.name for v in graph.input} | {t.name for t in graph.initializer}))
    del graph.value_info[:]  # stale FP32 types; TensorRT and ORT infer them again
    report = HighPrecisionReport(dtype=dtype, converted_initializers=converted, kept_fp32=tuple(kept_rows),
                                 casts=casts, clamped=tuple(dict.fromkeys(clamped)))
    return proto, report


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
