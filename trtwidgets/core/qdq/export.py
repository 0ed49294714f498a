"""Write an explicitly quantized (Q/DQ) ONNX model from the toolkit's ranges.

Explicit quantization is the only way to quantize with TensorRT 11 and the
recommended one with 10.x; TensorRT 8.6 and 10 build such models with the INT8
flag set. The exporter takes a float ONNX model and ``amax`` per activation
tensor (from :mod:`.ranges`, a calibration cache, or anything else) and writes:

* **activations**: ``QuantizeLinear -> DequantizeLinear`` per tensor,
  symmetric: INT8 ``scale = amax / 127``, zero point ``int8 0``; FP8 E4M3
  ``scale = amax / 448``, zero point ``float8e4m3fn 0`` (opset >= 19);
* **weights**: per-channel symmetric, stored already quantized (an int8 / fp8
  initializer followed by ``DequantizeLinear`` with ``axis``): Conv axis 0,
  ConvTranspose axis 1, Gemm axis 0 if ``transB`` else 1, MatMul the last axis;
  ``scale_c = max|W_c| / 127``; FP8 weights default to one scale per tensor
  (``max|W| / 448``), which is what TensorRT's FP8 kernels take. Weights may be initializers or
  ``Constant`` nodes (Paddle exports, like the demo model, use Constants).

Placement (which tensors) is :mod:`.qdq_placement`. Details TensorRT needs:

* opset >= 13 for per-channel ``axis`` (>= 19 for FP8): older models are
  upgraded with ``onnx.version_converter`` (the demo is opset 11);
* a Conv whose weights come from a DequantizeLinear must carry
  ``kernel_shape`` or TensorRT 8.6's parser rejects it; the exporter adds it;
* BatchNormalization is left alone: TensorRT folds it into the convolution.

The result is checked with ``onnx.checker``. It is plain ``onnx.helper`` graph
editing (see :mod:`.qdq_placement` for why no library).
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..common.atomic import write_bytes_atomic
from ..common.errors import UserError
from ..common.paths import user_path
from .export_check import DEFAULT_MIN_COSINE, check_export, raise_if_failed
from .export_report import QdqExport, QdqReport, QuantizedTensor, QuantizedWeight
from .weights import PRECISIONS, quantize_weight, weight_tensor
from ..model.onnx_graph import GraphIndex, attribute
from .high_precision import (MIN_OPSET as HP_MIN_OPSET, HIGH_PRECISIONS, convert_float_part, preferred_opset,
                             default_high_precision)
from .myelin import myelin_matmuls
from .placement import QdqPlan, Skip, node_label, plan_qdq

__all__ = ["PRECISIONS", "QdqExportError", "QuantizedTensor", "QuantizedWeight", "QdqReport", "QdqExport",
           "build_qdq", "export_qdq", "save_qdq_model", "amax_from_stats", "export_qdq_from_stats",
           "quantize_weight"]



class QdqExportError(UserError):
    """The model or the ranges cannot be turned into a Q/DQ model."""


# ---------------------------------------------------------------------------- helpers


def _proto_of(model) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    proto = getattr(model, "proto", None)
    if isinstance(proto, onnx.ModelProto):
        return proto
    if isinstance(model, (str, os.PathLike)):
        from ..model.load import load_model

        return load_model(model).proto
    raise TypeError(f"expected an onnx.ModelProto, LoadedModel or path, got {type(model).__name__}")


def _opset(proto: onnx.ModelProto) -> int:
    for o in proto.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 0


def _upgrade(proto: onnx.ModelProto, target: int) -> onnx.ModelProto:
    from onnx import version_converter

    try:
        converted = version_converter.convert_version(proto, target)
    except Exception as exc:  # noqa: BLE001 - the converter raises bare RuntimeErrors
        raise QdqExportError(
            f"The model could not be converted from opset {_opset(proto)} to {target}.",
            f"Per-channel Q/DQ needs opset 13 or later (FP8 needs 19); onnx.version_converter said: {exc}",
            f"Re-export the model at opset {target} or later from its framework.") from None
    return converted


class _Names:
    def __init__(self, graph: onnx.GraphProto):
        used = {n.name for n in graph.node} | {t.name for t in graph.initializer}
        for n in graph.node:
            used.update(n.input)
            used.update(n.output)
        used.update(v.name for v in graph.input)
        used.update(v.name for v in graph.output)
        self.used = used

    def __call__(self, base: str) -> str:
        name, k = base, 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name


# ---------------------------------------------------------------------------- export


def build_qdq(model, amax: Mapping[str, float], *, exclude: Iterable[str] = (),
              exclude_op_types: Iterable[str] = (), precision: str = "int8",
              weights_per_channel: Optional[bool] = None, opset: Optional[int] = None,
              skip_matrix_vector: bool = True, keep_float_output_grouped_convs: bool = True,
              dense_int8: bool = False, high_precision: str = "auto", trt_version=None,
              keep_fp32: Iterable[str] = ()) -> QdqExport:
    """Insert Q/DQ nodes into a copy of ``model``; return it with a report.

    Parameters
    ----------
    model : onnx.ModelProto, LoadedModel or path
        The float model. It is not modified.
    amax : mapping of str to float
        Activation tensor name -> largest magnitude to represent. Tensors the
        placement wants but that have no (finite, positive) amax stay float and
        are listed in the report.
    exclude, exclude_op_types
        Keep nodes in high precision (see :func:`~.qdq_placement.plan_qdq`).
    precision : {"int8", "fp8"}
        FP8 (E4M3) needs opset 19 and TensorRT 10 or later on Hopper/Ada GPUs.
    weights_per_channel : bool, optional
        Per-output-channel weight scales; False uses one scale per weight. Default:
        per channel for INT8, per tensor for FP8 (TensorRT's FP8 kernels take
        per-tensor scales; per-channel FP8 weights are rejected by older releases).
    opset : int, optional
        Target opset; default: the model's, raised to the minimum the precision needs.
    skip_matrix_vector : bool
        Keep matrix-vector layers in high precision (see :func:`~.qdq_placement.plan_qdq`).
    keep_float_output_grouped_convs, dense_int8 : bool
        Placement rules 6 and 8 (see :func:`~.placement.plan_qdq`): keep grouped
        convs whose output is read in float in high precision, or (``dense_int8``)
        quantize them with their output, and give every point-wise reader of a
        quantized tensor the same Q/DQ, as an implicit INT8 engine runs.
    high_precision : {"auto", "fp32", "fp16", "bf16"}
        The type of the non-quantized part (see :mod:`.high_precision`): FP16/BF16
        writes float initializers, Q/DQ scales and DequantizeLinear outputs in that
        type (opset >= 19), with FP32 graph inputs/outputs. ``"auto"`` picks by
        ``trt_version`` (:func:`~.high_precision.default_high_precision`): FP32 for
        TensorRT 8.x, whose parser reads FP32 scales only (the FP16 builder flag
        lowers the float part there), FP16 for 10 and 11.
    trt_version : str, optional
        The target TensorRT; default: the installed one, else FP32 (works everywhere).
    keep_fp32 : iterable of str
        Node names, output names or op types whose float math stays FP32.

    Returns
    -------
    QdqExport

    Raises
    ------
    QdqExportError
        For an unknown precision, an opset too low, a model that already holds
        Q/DQ nodes, or a failed opset conversion.
    QdqExclusionError
        For exclusions that match nothing.
    """
    if precision not in PRECISIONS:
        raise QdqExportError(f"Unknown precision {precision!r}.", f"Choose one of {', '.join(PRECISIONS)}.",
                             "Use precision='int8' (TensorRT 8.6+) or 'fp8' (TensorRT 10+, Hopper/Ada).")
    qmax, min_opset = PRECISIONS[precision]
    if weights_per_channel is None:
        weights_per_channel = precision == "int8"
    source = _proto_of(model)
    existing = [n for n in source.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    if existing:
        raise QdqExportError(
            "The model already contains Q/DQ nodes "
            f"({len(existing)}, e.g. {node_label(existing[0])}).",
            "It is already explicitly quantized; adding a second set of Q/DQ would quantize twice.",
            "Export from the float model instead.")
    hp = _resolve_high_precision(high_precision, trt_version)
    if hp != "fp32":
        min_opset = max(min_opset, HP_MIN_OPSET, preferred_opset(hp, trt_version))
    opset_from = _opset(source)
    target = max(opset_from, min_opset) if opset is None else int(opset)
    if target < min_opset:
        raise QdqExportError(f"Opset {target} is too low for {precision.upper()} Q/DQ.",
                             "Per-channel DequantizeLinear needs opset 13; FP8 types need 19.",
                             f"Leave opset unset or use {min_opset} or later.")
    if target < opset_from:
        raise QdqExportError(f"Cannot export at opset {target}: the model is opset {opset_from}.",
                             "Downgrading an opset is not supported.", "Leave opset unset.")
    proto = copy.deepcopy(source)
    if target != opset_from:
        proto = _upgrade(proto, target)

    graph = proto.graph
    plan: QdqPlan = plan_qdq(proto, exclude=exclude, exclude_op_types=exclude_op_types,
                             skip_matrix_vector=skip_matrix_vector,
                             keep_float_output_grouped_convs=keep_float_output_grouped_convs,
                             dense_int8=dense_int8)
    index = GraphIndex(graph)
    produced_at = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    names = _Names(graph)
    skipped: List[Skip] = list(plan.skipped)
    new_inits: List[onnx.TensorProto] = []
    after: Dict[int, List[onnx.NodeProto]] = {}  # node index -> Q/DQ nodes to emit after it
    prefix: List[onnx.NodeProto] = []

    def zero_point(base: str, shape: Tuple[int, ...]) -> str:
        name = names(f"{base}_zero_point")
        if precision == "int8":
            new_inits.append(numpy_helper.from_array(np.zeros(shape, np.int8), name))
        else:
            new_inits.append(weight_tensor(name, np.zeros(shape, np.uint8), "fp8"))
        return name

    # Activations.
    activations: List[QuantizedTensor] = []
    done_nodes: Dict[int, int] = {}  # node -> count of its quantized activation edges
    for tensor in plan.activation_tensors:
        edges = plan.edges_of(tensor)
        value = plan.amax_for(tensor, amax)
        reason = None
        if value is None:
            reason = "no range for this tensor (not in the statistics)"
        elif not math.isfinite(float(value)) or float(value) <= 0:
            reason = f"its amax is {value} (needs a finite positive value)"
        if reason:
            for e in edges:
                skipped.append(Skip(e.node_label, e.op_type, reason, tensor))
            continue
        value = float(value)
        scale = np.float32(value / qmax)
        s_name = names(f"{tensor}_scale")
        new_inits.append(numpy_helper.from_array(np.array(scale, np.float32), s_name))
        zp = zero_point(tensor, ())
        q_out, dq_out = names(f"{tensor}_quantized"), names(f"{tensor}_dequantized")
        q = helper.make_node("QuantizeLinear", [tensor, s_name, zp], [q_out], name=names(f"{tensor}_QuantizeLinear"))
        dq = helper.make_node("DequantizeLinear", [q_out, s_name, zp], [dq_out],
                              name=names(f"{tensor}_DequantizeLinear"))
        where = produced_at.get(tensor)
        if where is None:
            prefix.extend([q, dq])
        else:
            after.setdefault(where, []).extend([q, dq])
        for e in edges:
            graph.node[e.node].input[e.input_index] = dq_out
            done_nodes[e.node] = done_nodes.get(e.node, 0) + 1
        activations.append(QuantizedTensor(tensor, value, float(scale), tuple(e.node_label for e in edges),
                                           tuple(dict.fromkeys(e.rule for e in edges))))

    # Weights: only for layers whose activation inputs are quantized, else the layer stays float.
    planned = {}
    for e in plan.edges:
        if e.rule == "weighted-op input":
            planned[e.node] = planned.get(e.node, 0) + 1
    weights: List[QuantizedWeight] = []
    cache: Dict[Tuple[str, Optional[int]], str] = {}
    float_weight_nodes = myelin_matmuls(proto, {w.node for w in plan.weights if w.op_type == "MatMul"}, trt_version)
    quantized_layers: List[str] = []
    for w in plan.weights:
        if done_nodes.get(w.node, 0) < planned.get(w.node, 0) or w.node not in planned:
            skipped.append(Skip(w.node_label, w.op_type, "weights left float: the layer's activation input "
                                "is not quantized", w.tensor, rule=1))
            continue
        init = index.initializers.get(w.tensor)
        if init is not None and init.data_type != onnx.TensorProto.FLOAT or (
                init is None and index.constant_dtype(w.tensor) != onnx.TensorProto.FLOAT):
            skipped.append(Skip(w.node_label, w.op_type, "only float32 weights are quantized", w.tensor, rule=1))
            continue
        axis = w.axis if weights_per_channel else None
        key = (w.tensor, axis)
        if key not in cache:
            arr = index.constant(w.tensor)
            q, scale, err = quantize_weight(arr, axis, precision)
            s_name = names(f"{w.tensor}_scale")
            new_inits.append(numpy_helper.from_array(scale, s_name))
            zp = zero_point(w.tensor, scale.shape)
            dq_out = names(f"{w.tensor}_dequantized")
            attrs = {"axis": axis} if axis is not None else {}
            if w.node in float_weight_nodes and precision == "int8":
                # TensorRT 8.6's Myelin (transformer MatMuls) asserts on INT8 weight constants
                # ("convertMyelinWeightsToFp32 ... weights.type() != kINT8", H100): give it FP32 weights
                # already on the INT8 grid, with their own Q/DQ pair, which it folds itself.
                f_name = names(f"{w.tensor}_on_int8_grid")
                bshape = tuple(scale.size if i == axis else 1 for i in range(q.ndim)) if axis is not None else ()
                new_inits.append(numpy_helper.from_array((q.astype(np.float32) * scale.reshape(bshape))
                                                         .astype(np.float32), f_name))
                q_name = names(f"{w.tensor}_quantized")
                prefix.append(helper.make_node("QuantizeLinear", [f_name, s_name, zp], [q_name],
                                               name=names(f"{w.tensor}_QuantizeLinear"), **attrs))
            else:
                q_name = names(f"{w.tensor}_{precision}")
                new_inits.append(weight_tensor(q_name, q, precision))
            prefix.append(helper.make_node("DequantizeLinear", [q_name, s_name, zp], [dq_out],
                                           name=names(f"{w.tensor}_DequantizeLinear"), **attrs))
            cache[key] = dq_out
            weights.append(QuantizedWeight(w.tensor, w.node_label, w.op_type, axis,
                                           int(scale.size) if axis is not None else 1, err))
        node = graph.node[w.node]
        node.input[w.input_index] = cache[key]
        if node.op_type in ("Conv", "ConvTranspose") and attribute(node, "kernel_shape") is None:
            # TensorRT 8.6 cannot infer the kernel from a DequantizeLinear output.
            dims = list(index.initializers[w.tensor].dims) if w.tensor in index.initializers \
                else list(index.constant(w.tensor).shape)
            node.attribute.append(helper.make_attribute("kernel_shape", dims[2:]))
        quantized_layers.append(w.node_label)
    # Activation-by-activation products (attention's Q·Kᵀ and P·V) have no weight: quantized when both inputs are.
    with_weights = {w.node for w in plan.weights}
    for i, count in planned.items():
        if i not in with_weights and done_nodes.get(i, 0) >= count:
            quantized_layers.append(node_label(graph.node[i]))

    _rebuild(graph, prefix, after, new_inits)
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as exc:  # pragma: no cover - would be an exporter bug
        raise QdqExportError("The exported Q/DQ model does not pass onnx.checker.", str(exc),
                             "Please report this with the model; exclude the failing node meanwhile.") from None
    hp_report = None
    float32_model = None
    if hp != "fp32":
        float32_model = copy.deepcopy(proto)
        proto, hp_report = convert_float_part(proto, hp, keep_fp32=keep_fp32, patterns=plan.patterns)
        try:
            onnx.checker.check_model(proto)
        except onnx.checker.ValidationError as exc:  # pragma: no cover - would be a converter bug
            raise QdqExportError(f"The {hp.upper()} Q/DQ model does not pass onnx.checker.", str(exc),
                                 "Export with high_precision='fp32' meanwhile, and please report the model.") from None
    report = QdqReport(precision=precision, opset_from=opset_from, opset_to=target, high_precision=hp_report,
                       activations=tuple(activations), weights=tuple(weights), skipped=tuple(skipped),
                       patterns=plan.patterns, excluded=plan.excluded,
                       quantized_layers=tuple(dict.fromkeys(quantized_layers)), warnings=plan.warnings)
    return QdqExport(model=proto, report=report, float32_model=float32_model)


def _resolve_high_precision(high_precision: str, trt_version) -> str:
    if high_precision == "auto":
        if trt_version is None:
            from ..model.trt_version import installed_trt_version

            trt_version = installed_trt_version()
        return default_high_precision(trt_version) if trt_version is not None else "fp32"
    if high_precision not in HIGH_PRECISIONS:
        raise QdqExportError(f"Unknown high-precision dtype {high_precision!r}.",
                             f"Choose auto or one of {', '.join(HIGH_PRECISIONS)}.",
                             "auto picks FP32 for TensorRT 8.x and FP16 for 10/11.")
    return high_precision


def _subgraph_reads(nodes: Iterable[onnx.NodeProto]) -> set:
    """Names read inside If/Loop/Scan bodies (outer-scope values they use must survive)."""
    read: set = set()
    for node in nodes:
        for attr in node.attribute:
            graphs = list(attr.graphs) + ([attr.g] if attr.HasField("g") else [])
            for g in graphs:
                read.update(i for n in g.node for i in n.input)
                read.update(_subgraph_reads(g.node))
    return read


def _rebuild(graph: onnx.GraphProto, prefix: List[onnx.NodeProto], after: Dict[int, List[onnx.NodeProto]],
             new_inits: List[onnx.TensorProto]) -> None:
    """Reorder nodes (Q/DQ right after their producers) and drop weights no longer read."""
    old = list(graph.node)
    ordered: List[onnx.NodeProto] = list(prefix)
    for i, n in enumerate(old):
        ordered.append(n)
        ordered.extend(after.get(i, []))
    graph.initializer.extend(new_inits)
    read = {i for n in ordered for i in n.input} | {o.name for o in graph.output} | _subgraph_reads(ordered)
    keep = [n for n in ordered if n.op_type != "Constant" or any(o in read for o in n.output)]
    del graph.node[:]
    graph.node.extend(keep)
    unused = [t for t in graph.initializer if t.name not in read]
    if unused:
        dead = {t.name for t in unused}
        kept_inits = [t for t in graph.initializer if t.name not in dead]
        del graph.initializer[:]
        graph.initializer.extend(kept_inits)
        kept_inputs = [v for v in graph.input if v.name not in dead]
        del graph.input[:]
        graph.input.extend(kept_inputs)


def export_qdq(model, amax: Mapping[str, float], *, exclude: Iterable[str] = (),
               exclude_op_types: Iterable[str] = (), precision: str = "int8",
               weights_per_channel: Optional[bool] = None, opset: Optional[int] = None,
               skip_matrix_vector: bool = True, keep_float_output_grouped_convs: bool = True,
               dense_int8: bool = False, high_precision: str = "auto",
               trt_version=None) -> onnx.ModelProto:
    """The Q/DQ model only (see :func:`build_qdq` for parameters and the report)."""
    return build_qdq(model, amax, exclude=exclude, exclude_op_types=exclude_op_types, precision=precision,
                     weights_per_channel=weights_per_channel, opset=opset,
                     skip_matrix_vector=skip_matrix_vector,
                     keep_float_output_grouped_convs=keep_float_output_grouped_convs,
                     dense_int8=dense_int8,
                     high_precision=high_precision, trt_version=trt_version).model


def save_qdq_model(model: onnx.ModelProto, path: Union[str, os.PathLike], *,
                   reference: Optional[onnx.ModelProto] = None, feeds=None,
                   min_cosine: float = DEFAULT_MIN_COSINE, check: bool = True) -> Path:
    """Check a model, then write it atomically (temporary file in the same folder, then rename).

    Returns the path written. An existing file is only replaced once the new one
    is complete. The check (:mod:`.export_check`: onnx.checker, an ONNX Runtime load,
    and with ``reference`` and ``feeds`` the outputs against the FP32 float part at
    ``min_cosine``) raises :class:`~.export_check.ExportCheckError` and writes
    nothing when it fails; ``check=False`` skips it.
    """
    path = user_path(path)
    if path.is_dir():
        raise QdqExportError(f"{path} is a directory.", "The output must be a file path.",
                             "Give a file name such as model.qdq.onnx.")
    if check:
        raise_if_failed(check_export(model, reference=reference, feeds=feeds, min_cosine=min_cosine), path)
    return write_bytes_atomic(path, model.SerializeToString())


def amax_from_stats(stats, method: str = "entropy", percentile: float = 99.99) -> Dict[str, float]:
    """``amax`` per tensor from :class:`~.stats.ActivationStats` with one range method."""
    from ..calibration.ranges import METHODS, compute_amax

    if method not in METHODS:
        raise QdqExportError(f"Unknown range method {method!r}.", f"Choose one of {', '.join(METHODS)}.",
                             "entropy is TensorRT's default (EntropyCalibrator2); max keeps every value.")
    out: Dict[str, float] = {}
    for name, t in stats.tensors.items():
        if t.count - t.nan_count - t.inf_count <= 0:
            continue
        value = float(compute_amax(t, method, percentile=percentile))
        if math.isfinite(value) and value > 0:
            out[name] = value
    return out


def export_qdq_from_stats(model, stats, out_path: Union[str, os.PathLike, None] = None, *, method: str = "entropy",
                          percentile: float = 99.99, exclude: Iterable[str] = (),
                          exclude_op_types: Iterable[str] = (), precision: str = "int8",
                          amax_overrides: Optional[Mapping[str, float]] = None, high_precision: str = "auto",
                          trt_version=None) -> QdqExport:
    """One call for the calibration explorer's "Export Q/DQ model" button.

    Parameters
    ----------
    model : LoadedModel, onnx.ModelProto or path
    stats : ActivationStats or path of a statistics ``.npz``
    out_path : path, optional
        Where to write the model (atomically); nothing is written when None.
    method, percentile
        Range method applied to every tensor (see :mod:`.ranges`).
    amax_overrides : mapping, optional
        Tensor -> amax chosen by hand in the explorer; wins over ``method``.

    Returns
    -------
    QdqExport
    """
    if isinstance(stats, (str, os.PathLike)):
        from ..calibration.stats import load_stats

        stats = load_stats(stats)
    amax = amax_from_stats(stats, method, percentile)
    amax.update({k: float(v) for k, v in (amax_overrides or {}).items()})
    result = build_qdq(model, amax, exclude=exclude, exclude_op_types=exclude_op_types, precision=precision,
                       high_precision=high_precision, trt_version=trt_version)
    if out_path is not None:
        save_qdq_model(result.model, out_path, reference=result.float32_model)
    return result
