"""The FP16 scale of a stored weight's DequantizeLinear: the dequantized weight kept as it was.

A QuantizeLinear/DequantizeLinear pair of an activation reads one scale, so raising a scale that
FP16 cannot hold (below its smallest normal 2**-14) to 2**-14 keeps the pair consistent. A stored
weight is different: its integers were computed with the FP32 scale, so its FP16 scale must stay
the nearest FP16 value (a subnormal), or the weight is multiplied (the zoo's ViT patch embedding:
4e-6 scales raised to 2**-14 multiplied 36 of 384 channels by up to 14). Used by
:mod:`.convert` when it writes the FP16 float part.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from ...calibration.fake_quant import requantize_int8

__all__ = ["stored_weight_dqs", "weight_scale_fp16"]

_FP16_MAX = 65504.0


def weight_scale_fp16(q: np.ndarray, scale: np.ndarray, axis: int, name: str, clamped: List[str],
                       requantize: bool) -> Tuple[np.ndarray, np.ndarray]:
    """``(stored values, FP16 scale)`` of a stored weight's DequantizeLinear: the dequantized weight kept.

    The stored values were quantized with the FP32 scale, so the FP16 scale must stay its nearest FP16
    value (a subnormal below 2**-14): raising a 4e-6 scale to 2**-14, as a QuantizeLinear's scale is,
    multiplied that channel's weights by 14 (the zoo's ViT patch embedding). Only a scale that rounds
    to 0 (below 2**-25) is raised, to the smallest subnormal 2**-24; with ``requantize`` (INT8, zero
    point 0) its channel's integers are quantized again to it; otherwise the channel's weights stay
    below ``qmax * 2**-24`` in magnitude, as they were.
    """
    s32 = np.asarray(scale, np.float32)
    if np.any(s32 > _FP16_MAX):
        clamped.append(name)
        s32 = np.minimum(s32, np.float32(_FP16_MAX))
    s16 = s32.astype(np.float16)
    zero = (s32 > 0) & (s16 == 0)
    if not np.any(zero):
        return q, s16
    clamped.append(name)
    tiny = np.float16(2.0 ** -24)
    s16 = np.where(zero, tiny, s16).astype(np.float16)
    if not requantize:
        return q, s16
    shape = [1] * q.ndim
    if s32.ndim and q.ndim:
        shape[axis % q.ndim] = s32.size
    ratio = (s32 / np.float32(tiny)).reshape(shape)
    mask = np.broadcast_to(zero.reshape(shape), q.shape)
    requant = requantize_int8(q, ratio)
    return np.where(mask, requant, q), s16


def stored_weight_dqs(graph: onnx.GraphProto) -> Dict[str, Tuple[str, int, bool]]:
    """Scale -> (stored initializer, axis, INT8 with zero point 0) of each DequantizeLinear of a stored weight
    (an INT8 / UINT8 / FP8 initializer that only it reads) whose scale no other node reads."""
    T = onnx.TensorProto
    stored = (T.INT8, T.UINT8, T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ)
    inits = {t.name: t for t in graph.initializer}
    readers: Dict[str, int] = {}
    for n in graph.node:
        for x in n.input:
            readers[x] = readers.get(x, 0) + 1
    out: Dict[str, Tuple[str, int, bool]] = {}
    for n in graph.node:
        if n.op_type != "DequantizeLinear" or len(n.input) < 2:
            continue
        data, s = n.input[0], n.input[1]
        if data in inits and inits[data].data_type in stored and s in inits and readers.get(s) == 1 \
                and readers.get(data) == 1:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
            zp = n.input[2] if len(n.input) > 2 and n.input[2] else None
            zero_zp = zp is None or (zp in inits and not np.any(numpy_helper.to_array(inits[zp])))
            out[s] = (data, axis, inits[data].data_type == T.INT8 and zero_zp)
    return out
