"""Write Q/DQ nodes into a graph: the activation pairs and the quantized weights a placement asks for.

:class:`QdqWriter` is the graph editing behind :func:`~.export.build_qdq`: it adds a
``QuantizeLinear -> DequantizeLinear`` pair per quantized activation (rewiring only the
reads the placement chose), stores weights already quantized behind a ``DequantizeLinear``,
and rebuilds the node list in topological order. Kept apart from the export's flow
(options, float part, check, write) so that each reads on its own.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Dict, List, Mapping, Optional, Set, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..calibration.amax_values import amax_problem
from ..calibration.fake_quant import activation_scale
from ..model.onnx_graph import GraphIndex, attribute, subgraph_reads
from .export_report import QuantizedTensor, QuantizedWeight
from .myelin import myelin_matmuls
from .placement import Placement, Skip, node_label
from .weights import quantize_weight, weight_tensor

__all__ = ["Names", "QdqWriter", "ZERO_RANGE"]

#: Why a tensor that was zero on every calibration sample stays float: it has no range, and that is the data's doing.
ZERO_RANGE = ("zero on every calibration sample: no range can be computed (keep it float, or calibrate on data that "
              "exercises it)")


class Names:
    def __init__(self, graph: onnx.GraphProto) -> None:
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


def _range_problem(value) -> Optional[str]:
    """Why an activation's amax makes no scale (None when it does): missing, or not a finite positive value."""
    if value is None:
        return "no range for this tensor (not in the statistics)"
    if amax_problem(value) or float(value) <= 0:
        return f"its amax is {value} (needs a finite positive value)"
    return None


class QdqWriter:
    """The graph edits of one export: new Q/DQ nodes and initializers, collected, then written in order."""

    def __init__(self, proto: onnx.ModelProto, precision: str, memo: Optional[dict] = None) -> None:
        self.proto = proto
        # Across exports of one source (:func:`~.export.unchecked_exports`): what depends on the source's
        # graph and weights only (a weight's integers and scales, Myelin's MatMuls), computed once.
        self.memo = memo
        self.graph = proto.graph
        self.precision = precision
        self.index = GraphIndex(self.graph)
        self.produced_at = {o: i for i, n in enumerate(self.graph.node) for o in n.output if o}
        self.names = Names(self.graph)
        self.skipped: List[Skip] = []
        self.new_inits: List[onnx.TensorProto] = []
        self.after: Dict[int, List[onnx.NodeProto]] = {}  # node index -> Q/DQ nodes to emit after it
        self.prefix: List[onnx.NodeProto] = []

    def zero_point(self, base: str, shape: Tuple[int, ...]) -> str:
        name = self.names(f"{base}_zero_point")
        if self.precision == "int8":
            self.new_inits.append(numpy_helper.from_array(np.zeros(shape, np.int8), name))
        else:
            self.new_inits.append(weight_tensor(name, np.zeros(shape, np.uint8), "fp8"))
        return name

    def quantize_activations(self, placement: Placement, amax: Mapping[str, float], zero: AbstractSet[str] = frozenset()
                             ) -> Tuple[List[QuantizedTensor], Dict[int, int]]:
        """A Q/DQ pair on each planned activation with a usable amax; ``(tensors, node -> edges quantized)``.

        ``zero``: the tensors that were zero on every calibration sample; one without a range is said to be that.
        """
        self.skipped.extend(placement.skipped)
        activations: List[QuantizedTensor] = []
        done_nodes: Dict[int, int] = {}
        names = self.names
        for tensor in placement.activation_tensors:
            edges = placement.edges_of(tensor)
            value = placement.amax_for(tensor, amax)
            reason = _range_problem(value)
            if reason and tensor in zero:
                reason = ZERO_RANGE
            if reason:
                self.skipped.extend(Skip(e.node_label, e.op_type, reason, tensor) for e in edges)
                continue
            assert value is not None, "_range_problem names a missing range"
            value = float(value)
            scale = activation_scale(value, self.precision)
            s_name = names(f"{tensor}_scale")
            self.new_inits.append(numpy_helper.from_array(np.array(scale, np.float32), s_name))
            zp = self.zero_point(tensor, ())
            q_out, dq_out = names(f"{tensor}_quantized"), names(f"{tensor}_dequantized")
            q = helper.make_node("QuantizeLinear", [tensor, s_name, zp], [q_out],
                                 name=names(f"{tensor}_QuantizeLinear"))
            dq = helper.make_node("DequantizeLinear", [q_out, s_name, zp], [dq_out],
                                  name=names(f"{tensor}_DequantizeLinear"))
            where = self.produced_at.get(tensor)
            if where is None:
                self.prefix.extend([q, dq])
            else:
                self.after.setdefault(where, []).extend([q, dq])
            for e in edges:
                self.graph.node[e.node].input[e.input_index] = dq_out
                done_nodes[e.node] = done_nodes.get(e.node, 0) + 1
            activations.append(QuantizedTensor(
                tensor, value, float(scale), tuple(e.node_label for e in edges),
                tuple(dict.fromkeys(e.rule for e in edges)), scale_fp32=float(scale),
                zero_point_type="int8" if self.precision == "int8" else "float8e4m3fn",
                quantize_node=q.name, dequantize_node=dq.name))
        return activations, done_nodes

    def quantize_weights(self, placement: Placement, done_nodes: Mapping[int, int], per_channel: bool,
                         float_weight_nodes: Set[int]) -> Tuple[List[QuantizedWeight], List[str]]:
        """Weights of layers whose activation inputs are all quantized (else the layer stays float).

        ``float_weight_nodes``: the MatMuls whose weights get the FP32-on-the-INT8-grid form
        (:meth:`myelin_weight_layers`, found before :meth:`quantize_activations` rewired the graph).

        Returns ``(weights, quantized layer labels)``; activation-by-activation products
        (attention's Q·Kᵀ and P·V) have no weight and count when both inputs are quantized.
        """
        planned: Dict[int, int] = {}
        for e in placement.edges:
            if e.rule == "weighted-op input":
                planned[e.node] = planned.get(e.node, 0) + 1
        weights: List[QuantizedWeight] = []
        cache: Dict[Tuple[str, Optional[int]], str] = {}
        quantized_layers: List[str] = []
        for w in placement.weights:
            if done_nodes.get(w.node, 0) < planned.get(w.node, 0) or w.node not in planned:
                self.skipped.append(Skip(w.node_label, w.op_type, "weights left float: the layer's activation "
                                         "input is not quantized", w.tensor, rule=1))
                continue
            init = self.index.initializers.get(w.tensor)
            if init is not None and init.data_type != onnx.TensorProto.FLOAT or (
                    init is None and self.index.constant_dtype(w.tensor) != onnx.TensorProto.FLOAT):
                self.skipped.append(Skip(w.node_label, w.op_type, "only float32 weights are quantized", w.tensor,
                                         rule=1))
                continue
            axis = w.axis if per_channel else None
            key = (w.tensor, axis)
            if key not in cache:
                cache[key], record = self._weight_dq(w, axis, w.node in float_weight_nodes)
                weights.append(record)
            self._rewire_weight(w, cache[key])
            quantized_layers.append(w.node_label)
        with_weights = {w.node for w in placement.weights}
        for i, count in planned.items():
            if i not in with_weights and done_nodes.get(i, 0) >= count:
                quantized_layers.append(node_label(self.graph.node[i]))
        return weights, quantized_layers

    def myelin_weight_layers(self, placement: Placement, trt_version) -> Set[int]:
        """The planned MatMuls whose weights get the FP32-on-the-INT8-grid form: those TensorRT 8.x gives Myelin.

        :func:`.myelin.myelin_matmuls` of the graph before :meth:`quantize_activations` rewires any input (after
        it a layer reads a DequantizeLinear output whose node is emitted at the end, and shape inference knows
        nothing downstream of the first one), from the memo when an export of the same source had the same graph
        (its shape inference is the costly part).
        """
        nodes = {w.node for w in placement.weights if w.op_type == "MatMul"}
        if self.memo is None or not nodes:
            return myelin_matmuls(self.proto, nodes, trt_version)
        key = ("myelin", str(trt_version), tuple(sorted(nodes)), tuple((o.domain, o.version) for o in
                                                                     self.proto.opset_import),
               tuple((n.op_type, tuple(n.input), tuple(n.output)) for n in self.graph.node))
        if key not in self.memo:
            self.memo[key] = frozenset(myelin_matmuls(self.proto, nodes, trt_version))
        return set(self.memo[key])

    def _quantized_weight(self, tensor: str, axis: Optional[int]) -> Tuple[np.ndarray, np.ndarray, float]:
        """:func:`.weights.quantize_weight` of a weight, from the memo when an export of the source had it."""
        if self.memo is None:
            return quantize_weight(self.index.constant_value(tensor), axis, self.precision)
        key = ("weight", tensor, axis, self.precision, tuple((o.domain, o.version) for o in self.proto.opset_import))
        if key not in self.memo:
            self.memo[key] = quantize_weight(self.index.constant_value(tensor), axis, self.precision)
        return self.memo[key]

    def _weight_dq(self, w, axis: Optional[int], float_grid: bool) -> Tuple[str, QuantizedWeight]:
        """The DequantizeLinear output that replaces weight ``w``, and its record."""
        names, precision = self.names, self.precision
        q, scale, err = self._quantized_weight(w.tensor, axis)
        s_name = names(f"{w.tensor}_scale")
        self.new_inits.append(numpy_helper.from_array(scale, s_name))
        zp = self.zero_point(w.tensor, scale.shape)
        dq_out = names(f"{w.tensor}_dequantized")
        attrs: Dict[str, Any] = {"axis": axis} if axis is not None else {}
        if float_grid and precision == "int8":
            # TensorRT 8.6's Myelin (transformer MatMuls) asserts on INT8 weight constants
            # ("convertMyelinWeightsToFp32 ... weights.type() != kINT8": MiniLM on an H100; PaddleOCR's
            # recognizer on an H200, whose MatMuls read Constant nodes): give it FP32 weights already on the
            # INT8 grid, with their own Q/DQ pair, which it folds itself.
            f_name = names(f"{w.tensor}_on_int8_grid")
            bshape = tuple(scale.size if i == axis else 1 for i in range(q.ndim)) if axis is not None else ()
            self.new_inits.append(numpy_helper.from_array((q.astype(np.float32) * scale.reshape(bshape))
                                                          .astype(np.float32), f_name))
            q_name = names(f"{w.tensor}_quantized")
            self.prefix.append(helper.make_node("QuantizeLinear", [f_name, s_name, zp], [q_name],
                                                name=names(f"{w.tensor}_QuantizeLinear"), **attrs))
            values, stored = f_name, "float32 on the int8 grid"
        else:
            q_name = names(f"{w.tensor}_{precision}")
            self.new_inits.append(weight_tensor(q_name, q, precision))
            values, stored = q_name, ("int8" if precision == "int8" else "float8e4m3fn")
        dq = helper.make_node("DequantizeLinear", [q_name, s_name, zp], [dq_out],
                              name=names(f"{w.tensor}_DequantizeLinear"), **attrs)
        self.prefix.append(dq)
        return dq_out, QuantizedWeight(w.tensor, w.node_label, w.op_type, axis,
                                       int(scale.size) if axis is not None else 1, err,
                                       scale_min=float(scale.min()) if scale.size else float("nan"),
                                       scale_max=float(scale.max()) if scale.size else float("nan"), stored=stored,
                                       dequantize_node=dq.name, scale_name=s_name, values_name=values)

    def _rewire_weight(self, w, dq_out: str) -> None:
        node = self.graph.node[w.node]
        node.input[w.input_index] = dq_out
        if node.op_type in ("Conv", "ConvTranspose") and attribute(node, "kernel_shape") is None:
            # TensorRT 8.6 cannot infer the kernel from a DequantizeLinear output.
            dims = list(self.index.initializers[w.tensor].dims) if w.tensor in self.index.initializers \
                else list(self.index.constant_value(w.tensor).shape)
            node.attribute.append(helper.make_attribute("kernel_shape", dims[2:]))

    def finish(self) -> None:
        """Write the collected nodes and initializers into the graph (see :func:`_rebuild`)."""
        _rebuild(self.graph, self.prefix, self.after, self.new_inits)




def _rebuild(graph: onnx.GraphProto, prefix: List[onnx.NodeProto], after: Dict[int, List[onnx.NodeProto]],
             new_inits: List[onnx.TensorProto]) -> None:
    """Reorder nodes (Q/DQ right after their producers) and drop weights no longer read."""
    old = list(graph.node)
    ordered: List[onnx.NodeProto] = list(prefix)
    for i, n in enumerate(old):
        ordered.append(n)
        ordered.extend(after.get(i, []))
    graph.initializer.extend(new_inits)
    read = {i for n in ordered for i in n.input} | {o.name for o in graph.output} | subgraph_reads(ordered)
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
