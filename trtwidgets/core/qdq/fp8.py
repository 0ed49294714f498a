"""FP8 E4M3FN encoding in numpy, for FP8 Q/DQ weights.

ONNX's own conversion helpers differ between onnx 1.16 (element-wise Python)
and newer releases (ml_dtypes); a 256-entry table works the same on both and is
exact: every E4M3FN value is listed, and values are rounded to the nearest one
(ties to the even code, as QuantizeLinear does) and saturated to +-448.
"""

from __future__ import annotations

import numpy as np

from ..calibration.fake_quant import E4M3FN_MAX

__all__ = ["E4M3FN_MAX", "e4m3fn_values", "float_to_e4m3fn", "e4m3fn_to_float"]


def e4m3fn_values() -> np.ndarray:
    """The float32 value of each of the 256 codes (NaN for 0x7F and 0xFF)."""
    codes = np.arange(256, dtype=np.uint32)
    exp = (codes >> 3) & 0xF
    man = (codes & 7).astype(np.float64)
    mag = np.where(exp == 0, man * 2.0 ** -9, (1.0 + man / 8.0) * 2.0 ** (exp.astype(np.float64) - 7.0))
    mag[(codes & 0x7F) == 0x7F] = np.nan
    return np.where(codes & 0x80, -mag, mag).astype(np.float32)


_POS = e4m3fn_values()[:127].astype(np.float64)  # codes 0..126, ascending


def float_to_e4m3fn(x) -> np.ndarray:
    """Encode float values as E4M3FN codes (uint8), saturating, round-to-nearest-even."""
    x = np.asarray(x, dtype=np.float64)
    mag = np.minimum(np.abs(x), E4M3FN_MAX)
    hi = np.clip(np.searchsorted(_POS, mag, side="left"), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    d_hi = _POS[hi] - mag
    d_lo = mag - _POS[lo]
    pick_lo = (d_lo < d_hi) | ((d_lo == d_hi) & (lo % 2 == 0))
    code = np.where(pick_lo, lo, hi).astype(np.uint8)
    code = np.where(np.signbit(x), code | 0x80, code).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), code).astype(np.uint8)


def e4m3fn_to_float(codes) -> np.ndarray:
    """Decode E4M3FN codes (uint8) to float32."""
    return e4m3fn_values()[np.asarray(codes, dtype=np.uint8)]
