"""Where INT8 pays: a latency estimate per layer, FP16 against INT8, without TensorRT.

An INT8 layer is faster than FP16 only where its kernel gains more than the reformats its
precision borders add: true for large, compute-bound convolutions and matrix products, false for
small layers, whose time is kernel launch and memory. Per weighted layer:

``t(p) = launch + max(floor, 2 * MACs / (peak(p) * efficiency(MACs)), bytes(p) / bandwidth)``

with ``floor`` the shortest a kernel runs, ``bytes`` the input, weights and output at ``p``'s element
size, and an efficiency that grows with the layer's work. INT8's compute term is FP16's divided by a
speed-up that grows with the work, from none for small layers to INT8's peak ratio (2x) for large
ones (:data:`INT8_HALF_GAIN_MACS`). Depthwise/grouped convolutions with few channels per group get
only the halved bytes. Each INT8/float border costs a reformat (``border`` + bytes / bandwidth).

These are estimates, said so wherever they are shown; with TensorRT, an implicit INT8+FP16 build's
per-layer choices and timings replace them (:mod:`.latency_oracle`). Evidence behind the shape of
the model: docs/evidence.md, "cost_model".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

import onnx

from ..model.onnx_graph import WEIGHTED_OPS, GraphIndex, attribute
from ..model.graph_patterns import node_label

__all__ = ["GpuSpec", "GPUS", "INT8_HALF_GAIN_MACS", "IslandCost", "LayerCost", "island_cost", "layer_costs", "static_shapes"]


@dataclass(frozen=True)
class GpuSpec:
    """Dense peak rates and memory bandwidth of a GPU (per second), and fixed per-kernel costs."""

    name: str
    fp16_flops: float
    int8_ops: float
    bandwidth: float
    launch_us: float = 2.5
    border_us: float = 1.5
    min_kernel_us: float = 2.0


#: Data-sheet figures (dense tensor-core peaks, HBM bandwidth).
GPUS = {
    "h100": GpuSpec("H100 SXM", 989e12, 1979e12, 3.35e12),
    "h200": GpuSpec("H200 SXM", 989e12, 1979e12, 4.8e12),
    "a100": GpuSpec("A100 SXM", 312e12, 624e12, 2.0e12),
    "l4": GpuSpec("L4", 121e12, 242e12, 0.3e12),
}


@dataclass(frozen=True)
class LayerCost:
    """Estimated time of one weighted layer in FP16 and INT8 (microseconds).

    Attributes
    ----------
    node : str
        The layer's node label.
    op_type : str
    macs : int
        Multiply-accumulates at the planned shapes.
    out_bytes_fp16 : int
        Its output at FP16 (what a border reformat moves).
    fp16_us, int8_us : float
        Estimated kernel time in each precision.
    """

    node: str
    op_type: str
    macs: int
    out_bytes_fp16: int
    fp16_us: float
    int8_us: float

    @property
    def gain_us(self) -> float:
        """FP16 time minus INT8 time (positive: INT8 is faster)."""
        return self.fp16_us - self.int8_us

    def to_dict(self) -> dict:
        return {"node": self.node, "op_type": self.op_type, "macs": self.macs,
                "fp16_us": round(self.fp16_us, 3), "int8_us": round(self.int8_us, 3)}


def static_shapes(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]) -> Dict[str, Tuple[int, ...]]:
    """Every tensor's shape with the inputs fixed to ``input_shapes`` (ONNX shape inference).

    Tensors whose shape stays unknown are left out.
    """
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    for vi in model.graph.input:
        if vi.name in input_shapes:
            dims = vi.type.tensor_type.shape.dim
            shape = list(input_shapes[vi.name])
            del dims[:]
            for d in shape:
                dims.add().dim_value = int(d)
    del model.graph.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:
        inferred = model
    out: Dict[str, Tuple[int, ...]] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
            out[vi.name] = tuple(int(d.dim_value) for d in dims)
    for init in inferred.graph.initializer:
        out[init.name] = tuple(int(d) for d in init.dims)
    return out


def _efficiency(macs: float) -> float:
    # Fraction of the tensor-core peak a kernel reaches: ~1% for a 1 MMAC layer, ~50% from ~10 GMAC.
    return max(0.01, min(0.6, macs / (macs + 2e9) * 0.6 + 0.005))


#: Work (MACs) at which an INT8 kernel gets half of INT8's peak advantage over FP16 (:func:`_int8_speedup`).
#: Fitted on the zoo's measured engines (``benchmarks/estimate_error.py``, 30 with a number, 8 families, H100 and
#: H200, batch 1 and 32): anywhere from 2.5e8 to 1e9 keeps every estimate within 30% of its measurement (mean
#: absolute log error 0.086-0.092), and with each family left out, the value fitted on the others keeps that
#: family's estimates within 30% too; without the term (INT8 twice as fast at any size) resnet's and the 1024 YOLO's
#: batch-1 estimates were 13-34% too fast (mean 0.159), e.g. ResNet-50 "where it pays" 0.69x, measured 1.02x
#: (H200, 15 quiet rounds) and 0.89x (H100).
INT8_HALF_GAIN_MACS = 2.5e8


def _int8_speedup(macs: float, peak_ratio: float) -> float:
    """How much faster an INT8 kernel runs than the FP16 one of the same work: INT8's peak ratio for large layers,
    little for small ones, whose time is mostly a fixed part (a wave of tiles, prologue and epilogue) that INT8 does
    not shorten."""
    return 1.0 + (peak_ratio - 1.0) * macs / (macs + INT8_HALF_GAIN_MACS)


def _padding(cin_per_group: int, group: int, multiple: int) -> float:
    """How much work a dense conv's channel padding to ``multiple`` adds (1.0: none, or a grouped conv)."""
    if group != 1 or cin_per_group <= 0:
        return 1.0
    return math.ceil(cin_per_group / multiple) * multiple / cin_per_group


def _numel(shape: Optional[Tuple[int, ...]]) -> int:
    return int(math.prod(shape)) if shape else 0


def _macs(node: onnx.NodeProto, shapes: Mapping[str, Tuple[int, ...]], index: GraphIndex) -> int:
    out = shapes.get(node.output[0])
    w = shapes.get(node.input[1]) if len(node.input) > 1 else None
    if out is None:
        return 0
    if node.op_type in ("Conv", "ConvTranspose") and w is not None and len(w) >= 2:
        if node.op_type == "Conv":
            per_out = _numel(w[1:])  # Cin/group * kernel
            return _numel(out) * per_out
        x = shapes.get(node.input[0])
        return _numel(x) * _numel(w[1:]) if x else 0
    a = shapes.get(node.input[0])
    if node.op_type in ("MatMul", "Gemm") and a:
        k = a[-1] if not (node.op_type == "Gemm" and attribute(node, "transA", 0)) else a[0]
        return _numel(out) * int(k)
    return 0


def layer_costs(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]], gpu: str = "h100",
                nodes: Optional[Sequence[str]] = None,
                shapes: Optional[Mapping[str, Tuple[int, ...]]] = None) -> Dict[str, LayerCost]:
    """Estimated FP16 and INT8 time of every weighted layer (Conv, ConvTranspose, MatMul, Gemm).

    Parameters
    ----------
    proto : onnx.ModelProto
        The float model.
    input_shapes : mapping
        Input name -> the shape it is planned for (batch included).
    gpu : str
        A key of :data:`GPUS`.
    nodes : sequence of str, optional
        Only these node labels.
    shapes : mapping, optional
        Every tensor's shape at ``input_shapes`` where known (:func:`~.observed_shapes.observed_shapes`:
        shape inference, then a sample run); default: shape inference alone.

    Returns
    -------
    dict
        Node label -> :class:`LayerCost`; layers whose shapes are unknown are left out.
    """
    spec = GPUS[gpu.lower()] if gpu.lower() in GPUS else GPUS["h100"]
    shapes = static_shapes(proto, input_shapes) if shapes is None else shapes
    index = GraphIndex(proto.graph)
    wanted = set(nodes) if nodes is not None else None
    out: Dict[str, LayerCost] = {}
    for node in proto.graph.node:
        if node.op_type not in WEIGHTED_OPS:
            continue
        label = node_label(node)
        if wanted is not None and label not in wanted:
            continue
        macs = _macs(node, shapes, index)
        o = _numel(shapes.get(node.output[0]))
        if not macs or not o:
            continue
        x = _numel(shapes.get(node.input[0]))
        w = _numel(shapes.get(node.input[1])) if len(node.input) > 1 else 0
        group = int(attribute(node, "group", 1) or 1)
        cin_per_group = (shapes.get(node.input[1]) or (0, 0))[1] if node.op_type == "Conv" else 64
        eff = _efficiency(macs)
        # Tensor-core kernels pad the input channels: to 8 in FP16 (NHWC8), to 32 in INT8 (NC/32HW32).
        # A 3-channel image stem does 10.7x its MACs in INT8 against 2.7x in FP16 (TensorRT's implicit
        # builds keep it FP16; quantized, the classifier's stem took 2x its FP16 time, H200).
        pad16, pad8 = _padding(cin_per_group, group, 8), _padding(cin_per_group, group, 32)
        t_fp16 = max(2 * macs * pad16 / (spec.fp16_flops * eff), 2 * (x * pad16 + w + o) / spec.bandwidth)
        # Few channels per group (depthwise): no tensor-core INT8 path, only half the bytes.
        int8_rate = spec.int8_ops if (group == 1 or cin_per_group >= 16) else spec.fp16_flops
        t_int8 = max(2 * macs * pad8 / (spec.fp16_flops * eff) / _int8_speedup(macs, int8_rate / spec.fp16_flops),
                     1 * (x * pad8 + w + o) / spec.bandwidth)
        out[label] = LayerCost(label, node.op_type, int(macs), 2 * o,
                               spec.launch_us + max(spec.min_kernel_us, 1e6 * t_fp16),
                               spec.launch_us + max(spec.min_kernel_us, 1e6 * t_int8))
    return out



@dataclass(frozen=True)
class IslandCost:
    """Estimated extra time of an FP32 island in an FP16 engine (microseconds), and what it is made of.

    Attributes
    ----------
    us : float
        The extra time: ``memory_us + compute_us + borders * border`` (a border's own time included).
    memory_us : float
        The island's tensors read and written at 4 bytes instead of FP16's 2.
    compute_us : float
        Its weighted layers at TF32's peak (half FP16's) instead of FP16's.
    borders : int
        Tensors crossing its edge: each a reformat (FP16 -> FP32 in, FP32 -> FP16 out).
    unknown : int
        Island tensors whose shape is unknown (priced at a launch, no bytes).
    """

    us: float
    memory_us: float
    compute_us: float
    borders: int
    unknown: int


def island_cost(proto: onnx.ModelProto, island: Sequence[str], shapes: Mapping[str, Tuple[int, ...]],
                gpu: str = "h100") -> IslandCost:
    """What keeping ``island`` (node names as ``keep_fp32`` names them) FP32 costs an FP16 engine.

    TensorRT runs an FP32 layer's point-wise work at twice FP16's bytes and its matrix work at TF32 (half the
    FP16 tensor-core peak), and converts every tensor that crosses the island's edge (a reformat: a launch and
    the tensor read and written). Data-movement ops (Reshape, Concat ...) cost no arithmetic either way; their
    bytes are counted as every other tensor's.
    """
    from ..qdq.float_island import island_name

    spec = GPUS[gpu.lower()] if gpu.lower() in GPUS else GPUS["h100"]
    members = set(island)
    nodes = [n for n in proto.graph.node if island_name(n) in members]
    produced_inside = {o for n in nodes for o in n.output}
    consumers: Dict[str, list] = {}
    for n in proto.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(island_name(n) in members)
    consts = {t.name for t in proto.graph.initializer}
    consts |= {o for n in proto.graph.node if n.op_type == "Constant" for o in n.output}
    index = GraphIndex(proto.graph)
    graph_outputs = {o.name for o in proto.graph.output}
    memory = compute = 0.0
    borders, unknown = 0, 0
    crossing = set()
    for n in nodes:
        for t in list(n.input) + list(n.output):
            if not t or t in consts:
                continue
            size = _numel(shapes.get(t))
            unknown += size == 0
            memory += 2.0 * size / spec.bandwidth  # 4 bytes a value instead of 2
        for t in n.input:  # an input made outside the island (a graph input included): converted FP16 -> FP32
            if t and t not in consts and t not in produced_inside:
                crossing.add(t)
        for t in n.output:  # read outside the island: converted back to FP16
            if not all(consumers.get(t, [True])) or t in graph_outputs:
                crossing.add(t)
        if n.op_type in WEIGHTED_OPS:  # TF32 takes twice FP16's time: the extra is FP16's compute time once more
            macs = _macs(n, shapes, index)
            compute += 2.0 * macs / (spec.fp16_flops * _efficiency(macs)) if macs else 0.0
    for t in crossing:
        borders += 1
        memory += 6.0 * _numel(shapes.get(t)) / spec.bandwidth  # read at 2 bytes, written at 4 (or back)
    us = 1e6 * (memory + compute) + borders * spec.launch_us
    return IslandCost(us, 1e6 * memory, 1e6 * compute, borders, unknown)
