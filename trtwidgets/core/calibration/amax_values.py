"""Which amax values can become Q/DQ scales, checked where ranges are read (statistics, caches, plan.json).

A Q/DQ scale is ``amax / qmax`` (127 for INT8, 448 for FP8) stored in the float part's type. A value
that is not a number, NaN, infinite or negative has no scale; one so large that the scale overflows
float32 (or float16, where the float part is FP16) would be written as an infinite scale; one so
small that the scale rounds to 0 would divide by zero in QuantizeLinear. Each is refused when the
file is read, naming the tensor, rather than exported as a broken model or dropped without a word.

An amax of exactly 0 is what an always-zero tensor gets (the toolkit and TensorRT both write it):
it is accepted, and the export leaves that tensor in high precision and lists it in its report.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Dict, Mapping

import numpy as np

from ..common.errors import StatsError
from .fake_quant import QMAX, symmetric_scale

#: The largest float16 value: a scale above it is infinite in an FP16 float part.
FP16_MAX = float(np.finfo(np.float16).max)
FP32_MAX = float(np.finfo(np.float32).max)
FP32_TINY = float(np.finfo(np.float32).tiny)

__all__ = ["amax_problem", "check_amax_values", "FP16_MAX"]


def amax_problem(value, qmax: float = QMAX["int8"], high_precision: str = "fp32") -> str:
    """Why ``value`` cannot be an amax of a Q/DQ scale in a ``high_precision`` float part; '' when it can."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{value!r} is not a number"
    v = float(value)
    if math.isnan(v):
        return "NaN is not a range"
    if math.isinf(v):
        return f"{v} is not a finite range"
    if v < 0:
        return f"{v:g} is negative (an amax is a magnitude)"
    if v == 0:
        return ""
    scale = float(symmetric_scale(v, qmax=qmax))
    if scale > FP32_MAX:
        return f"{v:g} gives the scale {scale:.3g}, beyond float32's largest value {FP32_MAX:.3g}"
    if scale < FP32_TINY:
        return f"{v:g} gives the scale {scale:.3g}, which rounds to 0 and would divide by zero"
    if high_precision == "fp16" and scale > FP16_MAX:
        return (f"{v:g} gives the scale {scale:.6g}, beyond float16's largest value {FP16_MAX:g} "
                "(the float part, scales included, is FP16)")
    return ""


def check_amax_values(amax: Mapping[str, Any], source: str, qmax: float = QMAX["int8"],
                      high_precision: str = "fp32") -> Dict[str, float]:
    """``amax`` as floats, or a :class:`StatsError` naming the values that cannot be scales.

    Parameters
    ----------
    amax : mapping
        Tensor name -> amax, as read from ``source``.
    source : str
        The file (or object) they came from, for the message.
    qmax : float
        127 (INT8) or 448 (FP8).
    high_precision : str
        The float part's type (``fp32``, ``fp16``, ``bf16``): FP16 scales end at 65504.

    Raises
    ------
    StatsError
    """
    bad = [(str(k), amax_problem(v, qmax, high_precision)) for k, v in amax.items()]
    bad = [(k, why) for k, why in bad if why]
    if bad:
        shown = "; ".join(f"{k!r}: {why}" for k, why in bad[:3]) + (f"; and {len(bad) - 3} more" if len(bad) > 3 else "")
        fp16 = any("float16" in why for _, why in bad)
        raise StatsError(
            f"{source}: {len(bad)} of {len(amax)} ranges cannot be Q/DQ scales ({shown}).",
            f"A scale is amax / {qmax:g}; it must be a finite positive number"
            + (" that float16 can hold" if fp16 else "") + ", or the Q/DQ model would hold infinite or "
            "missing scales. Nothing was written.",
            ("Export with --high-precision fp32 (FP32 scales), or exclude those tensors (--exclude)."
             if fp16 and len(bad) == sum("float16" in w for _, w in bad) else
             "Calibrate again to get the ranges (trtwidgets calibrate), or restore the file as the tool wrote it."))
    return {str(k): float(v) for k, v in amax.items()}
