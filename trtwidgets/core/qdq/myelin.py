"""Transformer MatMuls that TensorRT 8.x hands to its Myelin backend, and what that means for INT8.

TensorRT 8.x compiles batched MatMuls (activations of rank 3 or more: a transformer's
projections and attention) with Myelin, not with its per-layer kernels:

* Myelin 8.6 cannot take INT8 weight constants (``convertMyelinWeightsToFp32 ...
  weights.type() != kINT8``, H100): the export gives such MatMuls FP32 weights already
  on the INT8 grid, with their own Q/DQ pair, which Myelin folds itself;
* INT8 does not pay there: an implicit INT8+FP16 build of MiniLM-L6 at batch 32 ran the
  whole encoder in FP16 (Myelin ignored INT8), and the Q/DQ model that ONNX Runtime
  scored at cosine 0.9915 ran 1.59x slower than FP16 (0.558 ms against 0.352 ms, H200,
  ``benchmarks/results/zoo``). The planner keeps these MatMuls in high precision for
  TensorRT below 10.

A rank-2 MatMul (a classifier's FC) becomes a convolution and is unaffected.
"""

from __future__ import annotations

from typing import Iterable, Optional, Set

import onnx

__all__ = ["myelin_matmuls", "myelin_target", "MYELIN_QDQ_SLOWDOWN", "MYELIN_REASON"]

#: A Q/DQ MatMul in Myelin (TensorRT 8.x) against its FP16 time: MiniLM-L6 at batch 32 measured 1.59x (H200).
MYELIN_QDQ_SLOWDOWN = 1.5
MYELIN_REASON = ("TensorRT 8.x compiles this batched MatMul with Myelin, where INT8 does not pay: a Q/DQ "
                 "transformer ran 1.59x slower than FP16 there (MiniLM-L6, batch 32, H200); TensorRT 10+ differs")


def myelin_target(trt_version) -> Optional[bool]:
    """True for TensorRT 8.x, False for 10 and later, None when the version is unknown."""
    if trt_version is None:
        return None
    from ..model.trt_version import parse_trt_version

    return parse_trt_version(trt_version).major < 10


def myelin_matmuls(proto: onnx.ModelProto, nodes: Iterable[int], trt_version) -> Set[int]:
    """The MatMuls among ``nodes`` (indices into ``graph.node``) that TensorRT 8.x compiles with Myelin.

    Empty for TensorRT 10 and later. An unknown version is treated as 8.x (the FP32
    weight form reads on every TensorRT). Without static shapes every MatMul counts.
    """
    if myelin_target(trt_version) is False:
        return set()
    wanted = {i for i in nodes if proto.graph.node[i].op_type == "MatMul"}
    if not wanted:
        return set()
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - without shapes, assume the batched form (the safe one)
        return wanted
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in list(inferred.graph.value_info)
             + list(inferred.graph.input) if v.type.tensor_type.HasField("shape")}
    out = set()
    for i in wanted:
        data = [x for x in proto.graph.node[i].input if x in ranks]
        if not data or max(ranks[x] for x in data) >= 3:
            out.add(i)
    return out
