"""Quantization arithmetic in numpy: scales, the symmetric grid, quantize-dequantize. The one home.

Every part of the toolkit that turns an amax into a scale or puts values on the INT8 grid calls
this module: the export (activation scales, weights), the calibration's range methods (the MSE
search's error), the explorer's figures (grid step, error split), the calibration cache, and
the FP16 float part's re-quantized weights. Keeping it in one place keeps their numbers the same.

TensorRT's explicit quantization is symmetric: ``scale = amax / qmax`` (``qmax`` 127 for INT8,
448 for FP8 E4M3), zero point 0, one scale per activation tensor and one per output channel of a
weight. Its ``QuantizeLinear`` computes ``q = clamp(round(x / scale) + zero_point, -128, 127)``
(round half to even) and ``DequantizeLinear`` gives back ``(q - zero_point) * scale``. A range
``[-amax, amax]`` uses the narrow grid ``[-127, 127]`` (:func:`quantize_symmetric`). The asymmetric
variant (a zero point that shifts the grid onto ``[lo, hi]``) is here to show what it would buy;
TensorRT does not take it.

Numpy only: ``core`` runs on Python 3.9 with numpy, onnx and tensorrt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

#: TensorRT's explicit INT8 grid: QuantizeLinear clamps to [-128, 127].
INT8_MIN, INT8_MAX = -128, 127
#: Largest finite FP8 E4M3FN magnitude.
E4M3FN_MAX = 448.0
#: The largest magnitude each precision's symmetric grid represents: ``scale = amax / QMAX[precision]``.
QMAX = {"int8": float(INT8_MAX), "fp8": E4M3FN_MAX}

__all__ = ["INT8_MIN", "INT8_MAX", "E4M3FN_MAX", "QMAX", "symmetric_qmax", "symmetric_scale", "amax_of_scale",
           "activation_scale", "per_channel_amax", "weight_scales", "quantize_symmetric", "fake_quant_symmetric",
           "qdq_error", "requantize_int8", "asymmetric_params", "quantize", "fake_quant", "ste_mask", "GridUse",
           "grid_use"]


def _broadcast(v, x: np.ndarray, axis: Optional[int]) -> np.ndarray:
    """``v`` (scalar, or one value per slice along ``axis``) shaped to broadcast against ``x``."""
    v = np.asarray(v, dtype=np.float32)
    if axis is None or v.ndim == 0:
        return v
    shape = [1] * x.ndim
    shape[axis] = -1
    return v.reshape(shape)


def symmetric_qmax(num_bits: int = 8) -> int:
    """The largest code of a symmetric ``num_bits`` grid: 127 at 8 bits."""
    return 2 ** (num_bits - 1) - 1


def symmetric_scale(amax, num_bits: int = 8, qmax: Optional[float] = None) -> np.ndarray:
    """TensorRT's scale for a range ``[-amax, amax]``: ``amax / qmax`` in float64 (per value of ``amax``).

    ``qmax`` defaults to :func:`symmetric_qmax` of ``num_bits`` (127 at 8 bits); FP8 E4M3 takes
    :data:`E4M3FN_MAX`. ``float(symmetric_scale(a))`` is the scale of a single amax.
    """
    return np.asarray(amax, dtype=np.float64) / (symmetric_qmax(num_bits) if qmax is None else qmax)


def amax_of_scale(scale, qmax: float = QMAX["int8"]) -> np.ndarray:
    """The inverse of :func:`symmetric_scale`: ``scale * qmax`` (a calibration cache stores scales)."""
    return np.asarray(scale, dtype=np.float64) * qmax


def activation_scale(amax: float, precision: str = "int8") -> np.float32:
    """The float32 scale an export writes for an activation of range ``amax``: ``amax / QMAX[precision]``."""
    return np.float32(symmetric_scale(float(amax), qmax=QMAX[precision]))


def per_channel_amax(weights, axis: int = 0) -> np.ndarray:
    """``max |w|`` of each slice along ``axis`` (a Conv's output channels are axis 0), in float64.

    Parameters
    ----------
    weights : array_like
        The weight tensor, e.g. ``(C_out, C_in / groups, kH, kW)``.
    axis : int
        The channel axis; one amax per index along it.
    """
    w = np.abs(np.asarray(weights, dtype=np.float64))
    other = tuple(i for i in range(w.ndim) if i != axis % w.ndim)
    return w.max(axis=other) if other else w


def weight_scales(w: np.ndarray, axis: Optional[int], qmax: float) -> Tuple[np.ndarray, Tuple[int, ...]]:
    """``(scale, broadcast shape)`` of a symmetric weight quantization, as the export stores it (float32).

    ``w`` is float32. One scale per index along ``axis`` (``max|w_c| / qmax``), or one for the tensor
    when ``axis`` is None; an all-zero channel gets scale 1 (it quantizes to zeros with any scale).
    """
    if axis is None:
        amax = np.array(np.abs(w).max() if w.size else 0.0, dtype=np.float32)
        bshape: Tuple[int, ...] = ()
    else:
        others = tuple(i for i in range(w.ndim) if i != axis)
        amax = np.abs(w).max(axis=others) if w.size else np.zeros(w.shape[axis], np.float32)
        bshape = tuple(w.shape[axis] if i == axis else 1 for i in range(w.ndim))
    return np.where(amax > 0, amax / qmax, 1.0).astype(np.float32), bshape


def quantize_symmetric(x: np.ndarray, scale, qmax: float) -> np.ndarray:
    """The codes of the narrow symmetric grid: ``clip(round(x / scale), -qmax, qmax)``, in ``x``'s float type.

    ``scale`` broadcasts against ``x``; rounding is half to even, as QuantizeLinear's. The caller turns
    the codes into integers (``astype(np.int8)``) or multiplies them back (:func:`fake_quant_symmetric`).
    """
    return np.clip(np.rint(x / scale), -qmax, qmax)


def fake_quant_symmetric(x, amax, num_bits: int = 8) -> np.ndarray:
    """Quantize-dequantize ``x`` on the symmetric grid of range ``amax`` (float64; ``amax`` broadcasts).

    Where ``amax`` is 0 the value is 0 (no range: nothing survives).
    """
    scale = symmetric_scale(amax, num_bits)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = quantize_symmetric(np.asarray(x, dtype=np.float64), scale, symmetric_qmax(num_bits)) * scale
    return np.where(scale > 0, q, 0.0)


def qdq_error(values, amax, num_bits: int = 8) -> np.ndarray:
    """Squared error of :func:`fake_quant_symmetric` of ``values`` at each amax (broadcast), float64."""
    values = np.asarray(values, dtype=np.float64)
    return (values - fake_quant_symmetric(values, amax, num_bits)) ** 2


def requantize_int8(q: np.ndarray, ratio) -> np.ndarray:
    """INT8 codes ``q`` moved to a scale ``ratio`` times smaller: ``clip(round(q * ratio), -128, 127)`` (int8)."""
    return np.clip(np.rint(q.astype(np.float32) * ratio), INT8_MIN, INT8_MAX).astype(np.int8)


def asymmetric_params(lo: float, hi: float, num_bits: int = 8) -> Tuple[float, int]:
    """Scale and zero point that map ``[lo, hi]`` onto the whole signed grid (zero stays exact).

    The range is widened to include 0, as ONNX's asymmetric quantization does, so that
    zero padding and ReLU zeros quantize without error.

    Returns
    -------
    scale : float
    zero_point : int
        Within ``[-2^(b-1), 2^(b-1) - 1]``.
    """
    qmin, qmax = -(2 ** (num_bits - 1)), 2 ** (num_bits - 1) - 1
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi == lo:
        return 1.0, 0
    scale = (hi - lo) / (qmax - qmin)
    zero_point = int(np.clip(np.round(qmin - lo / scale), qmin, qmax))
    return scale, zero_point


def quantize(x, scale, zero_point=0, axis: Optional[int] = None, num_bits: int = 8) -> np.ndarray:
    """The integer codes: ``clamp(round(x / scale) + zero_point, qmin, qmax)`` (int32 array).

    ``scale`` and ``zero_point`` are scalars, or one value per index along ``axis``.
    A scale of 0 (a tensor that was all zeros) gives code ``zero_point``. The division is
    done in float32, as TensorRT and ONNX Runtime do it, so ties round the same way.
    """
    x = np.asarray(x, dtype=np.float32)
    s, z = _broadcast(scale, x, axis), _broadcast(zero_point, x, axis)
    qmin, qmax = -(2 ** (num_bits - 1)), 2 ** (num_bits - 1) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s > 0, np.round(x / np.where(s > 0, s, 1.0)) + z, z)
    return np.clip(q, qmin, qmax).astype(np.int32)


def fake_quant(x, scale, zero_point=0, axis: Optional[int] = None, num_bits: int = 8) -> np.ndarray:
    """Quantize then dequantize: the value the next layer sees, as float32.

    Parameters
    ----------
    x : array_like
    scale, zero_point : float or array_like
        Scalars (per tensor), or one value per index along ``axis`` (per channel).
    axis : int, optional
        The channel axis of per-channel parameters.
    num_bits : int
        8 for INT8 (grid ``[-128, 127]``).
    """
    x = np.asarray(x)
    q = quantize(x, scale, zero_point, axis, num_bits)
    s, z = _broadcast(scale, x, axis), _broadcast(zero_point, x, axis)
    return ((q - z) * s).astype(np.float32)


def ste_mask(x, scale, zero_point=0, axis: Optional[int] = None, num_bits: int = 8) -> np.ndarray:
    """Where the straight-through estimator lets the gradient through: the values not clamped.

    Quantization-aware training treats ``round`` as the identity in the backward pass
    (its true gradient is 0 almost everywhere); a clamped value gets no gradient,
    since moving it does not change the output.
    """
    x = np.asarray(x, dtype=np.float32)
    s, z = _broadcast(scale, x, axis), _broadcast(zero_point, x, axis)
    qmin, qmax = -(2 ** (num_bits - 1)), 2 ** (num_bits - 1) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        code = np.where(s > 0, x / np.where(s > 0, s, 1.0) + z, z)
    return (code >= qmin - 0.5) & (code <= qmax + 0.5)


@dataclass(frozen=True)
class GridUse:
    """How much of the int grid a tensor's values occupy.

    Attributes
    ----------
    levels_used : int
        Distinct integer codes that occur.
    levels_reachable : int
        Codes between the smallest and the largest representable value of the data's own
        range: the grid positions the tensor could ever land on at this scale.
    levels_total : int
        ``2 ** num_bits``.
    """

    levels_used: int
    levels_reachable: int
    levels_total: int

    @property
    def reachable_share(self) -> float:
        """Share of the grid the data's range can reach (0.5: half the grid is never used)."""
        return self.levels_reachable / self.levels_total


def grid_use(x, scale, zero_point=0, num_bits: int = 8) -> GridUse:
    """How many of the ``2 ** num_bits`` codes a per-tensor quantization of ``x`` uses and can reach."""
    x = np.asarray(x, dtype=np.float32)
    q = quantize(x, scale, zero_point, None, num_bits)
    lo = quantize(np.array([x.min()]), scale, zero_point, None, num_bits)[0]
    hi = quantize(np.array([x.max()]), scale, zero_point, None, num_bits)[0]
    return GridUse(levels_used=int(np.unique(q).size), levels_reachable=int(hi - lo + 1),
                   levels_total=2 ** num_bits)
