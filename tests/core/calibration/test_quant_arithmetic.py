"""One home for the quantization arithmetic (core/calibration/fake_quant.py): its users get the numbers they
computed on their own before, bit for bit.

Each ``_old_*`` function below is the formula a caller wrote itself before the arithmetic moved into
fake_quant (copied, not imported: the callers no longer hold them), run against the caller's code of today.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from trtwidgets.core.calibration import fake_quant as fq
from trtwidgets.core.calibration.cache import cache_text, parse_cache
from trtwidgets.core.calibration.explorer_data import error_split, int8_levels, int8_step
from trtwidgets.core.calibration.ranges import RangeResult, compute_amax, evaluate_amax
from trtwidgets.core.calibration.stats import TensorStats
from trtwidgets.core.qdq.fp8 import e4m3fn_to_float, float_to_e4m3fn
from trtwidgets.core.qdq.float_part.weight_scales import weight_scale_fp16
from trtwidgets.core.qdq.weights import quantize_weight


def _old_qdq_error(values, amax, num_bits=8):  # core/calibration/ranges.py _qdq_error
    qmax = 2 ** (num_bits - 1) - 1
    scale = np.asarray(amax, dtype=np.float64) / qmax
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.clip(np.round(values / scale), -qmax, qmax) * scale
    q = np.where(scale > 0, q, 0.0)
    return (values - q) ** 2


def _old_quantize_weight(w, axis, precision="int8"):  # core/qdq/weights.py quantize_weight
    qmax = {"int8": 127.0, "fp8": 448.0}[precision]
    w = np.asarray(w, dtype=np.float32)
    if axis is None:
        amax = np.array(np.abs(w).max() if w.size else 0.0, dtype=np.float32)
        bshape = ()
    else:
        others = tuple(i for i in range(w.ndim) if i != axis)
        amax = np.abs(w).max(axis=others) if w.size else np.zeros(w.shape[axis], np.float32)
        bshape = tuple(w.shape[axis] if i == axis else 1 for i in range(w.ndim))
    scale = np.where(amax > 0, amax / qmax, 1.0).astype(np.float32)
    scaled = w / scale.reshape(bshape)
    if precision == "int8":
        q = np.clip(np.rint(scaled), -qmax, qmax).astype(np.int8)
        back = q.astype(np.float32) * scale.reshape(bshape)
    else:
        q = float_to_e4m3fn(scaled)
        back = e4m3fn_to_float(q) * scale.reshape(bshape)
    top = float(np.abs(w).max()) if w.size else 0.0
    err = float(np.abs(back - w).max() / top) if top > 0 else 0.0
    return q, scale, err


def _amaxes(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.0, 100.0, n) * 10.0 ** rng.uniform(-6, 6, n)


def _stats(x, hist) -> TensorStats:
    return TensorStats(name="t", count=x.size, nan_count=0, inf_count=0, min=0.0, max=float(x.max()),
                       hist=hist.astype(np.int64), hist_max=float(x.max()))


def test_the_mse_search_error_is_the_old_one_bit_for_bit():
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.standard_normal(4000) * 3, (np.arange(-300, 300) + 0.5) * (2.0 / 127)])
    amax = np.concatenate([[0.0], _amaxes(300)])
    new = fq.qdq_error(values[None, :], amax[:, None])
    assert np.array_equal(new, _old_qdq_error(values[None, :], amax[:, None]))
    assert np.array_equal(fq.qdq_error(values, 0.0), values ** 2), "no range: nothing survives"


def test_range_methods_give_the_amax_they_gave():
    # The MSE method searches over qdq_error; its result (and every method's error) must not move.
    rng = np.random.default_rng(2)
    x = np.abs(np.concatenate([rng.standard_normal(20000), rng.standard_normal(50) * 12]))
    hist, _ = np.histogram(x, bins=2048, range=(0.0, float(x.max())))
    t = _stats(x, hist)
    mse = compute_amax(t, "mse")
    centers = (np.nonzero(hist)[0] + 0.5) * t.bin_width
    counts = hist[np.nonzero(hist)[0]].astype(np.float64)
    q = evaluate_amax(t, mse)
    assert q.mse == float(_old_qdq_error(centers, mse) @ counts / counts.sum())


@pytest.mark.parametrize("shape, axis", [((16, 8, 3, 3), 0), ((8, 16, 3, 3), 1), ((64, 32), 1), ((64, 32), None),
                                         ((5,), None), ((0, 4), 1)])
@pytest.mark.parametrize("precision", ["int8", "fp8"])
def test_weights_quantize_as_before(shape, axis, precision):
    rng = np.random.default_rng(sum(shape) + (axis or 0))
    w = (rng.standard_normal(shape) * rng.uniform(1e-4, 3.0)).astype(np.float32)
    if w.ndim > 1 and w.size:
        w[(slice(None),) * (axis or 0) + (0,)] = 0.0  # an all-zero channel: scale 1
    if w.size > 4:  # values exactly halfway between two codes
        flat = w.reshape(-1)
        flat[1:4] = np.float32(np.abs(w).max() / 127) * np.float32([0.5, 1.5, -2.5])
    q, scale, err = quantize_weight(w, axis, precision)
    q0, scale0, err0 = _old_quantize_weight(w, axis, precision)
    assert q.dtype == q0.dtype and np.array_equal(q, q0)
    assert scale.dtype == np.float32 and np.array_equal(scale, scale0) and err == err0


def test_scales_are_amax_over_127_as_every_caller_wrote_it():
    amax = _amaxes()
    assert all(fq.activation_scale(a) == np.float32(a / 127.0) for a in amax[:2000])  # the Q/DQ writer
    assert all(fq.activation_scale(a, "fp8") == np.float32(a / 448.0) for a in amax[:2000])
    assert all(RangeResult("max", a, 0.0, 0.0, 0.0).scale == a / 127.0 for a in amax[:2000])  # ranges.py
    assert all(int8_step(a) == float(a) / 127 for a in amax[1:2000])  # the explorer
    for a in amax[1:200]:
        assert np.array_equal(int8_levels(a), np.arange(128, dtype=np.float64) * (float(a) / 127))
        assert np.array_equal(int8_levels(a, max_lines=20, x_range=(0.1 * a, 0.6 * a)),
                              _old_levels(a, 20, (0.1 * a, 0.6 * a)))


def _old_levels(amax, max_lines, x_range):  # core/calibration/explorer_data.py int8_levels
    import math

    qmax = 127
    step = float(amax) / qmax
    lo, hi = max(0, int(math.floor(x_range[0] / step))), min(qmax, int(math.ceil(x_range[1] / step)))
    k = np.arange(lo, hi + 1)
    if len(k) > max_lines:
        stride = int(math.ceil(len(k) / max_lines))
        keep = k[::stride]
        k = np.append(keep, k[-1]) if keep[-1] != k[-1] else keep
    return k.astype(np.float64) * (float(amax) / qmax)


def test_the_calibration_cache_round_trips_its_scales_as_before():
    amax = {f"t{i}": float(a) for i, a in enumerate(_amaxes(500, seed=3))}
    text = cache_text(amax)
    import struct

    for line, (name, a) in zip(text.splitlines()[1:], amax.items()):
        assert line == f"{name}: {struct.pack('>f', a / 127.0).hex()}"
    back = parse_cache(text, "cache")
    assert all(back.amax[n] == back.scales[n] * 127.0 for n in amax)


def test_requantized_fp16_weights_are_the_old_integers():
    rng = np.random.default_rng(4)
    q = rng.integers(-127, 128, (4, 8)).astype(np.int8)
    scale = np.array([1e-8, 3e-9, 0.01, 0.02], np.float32)
    got, s16 = weight_scale_fp16(q, scale, 0, "w", [], True)
    tiny = np.float16(2.0 ** -24)
    ratio = (scale / np.float32(tiny)).reshape(4, 1)
    old = np.clip(np.rint(q.astype(np.float32) * ratio), -128, 127).astype(np.int8)
    zero = (scale > 0) & (scale.astype(np.float16) == 0)
    assert np.array_equal(got, np.where(zero[:, None], old, q)) and not np.array_equal(got, q)


def test_the_explorer_error_split_uses_tensorrts_grid():
    # The split used to clip at amax itself; TensorRT clips the codes at 127, i.e. at 127 * (amax / 127), which
    # differs from amax in the last bit for some amax. Unclipped bins are the old numbers exactly.
    rng = np.random.default_rng(5)
    x = np.abs(rng.standard_normal(50000)) * 2
    hist, _ = np.histogram(x, bins=512, range=(0.0, float(x.max())))
    t = _stats(x, hist)
    for amax in (0.7, 1.9, float(x.max()), 3.0 / 7):
        split = error_split(t, amax)
        step = float(amax) / 127
        edges = np.linspace(0.0, t.hist_max, len(hist) + 1)
        frac = (np.arange(16) + 0.5) / 16
        xs = edges[:-1, None] + (edges[1:] - edges[:-1])[:, None] * frac[None, :]
        old_q = np.minimum(np.round(xs / step) * step, amax)
        old_rounding = np.where(xs > amax, 0.0, (xs - old_q) ** 2).mean(axis=1) * hist
        old_clipping = np.where(xs > amax, (xs - old_q) ** 2, 0.0).mean(axis=1) * hist
        assert np.allclose(split.rounding, old_rounding, rtol=1e-12, atol=0)
        assert np.allclose(split.clipping, old_clipping, rtol=1e-9, atol=0)
        below = edges[1:] * (1 + 1e-12) < amax  # bins wholly below amax: the same numbers
        assert np.array_equal(split.rounding[below], old_rounding[below])


def test_the_teaching_functions_follow_tensorrt():
    x = np.array([-2.7, -1.0, -0.003, 0.0, 0.005, 1.0, 2.7], np.float32)
    s = fq.symmetric_scale(1.0)
    assert s == 1.0 / 127 and fq.symmetric_qmax(8) == 127 and fq.symmetric_qmax(4) == 7
    assert list(fq.quantize(x, s)) == [-128, -127, 0, 0, 1, 127, 127]  # QuantizeLinear: [-128, 127]
    assert list(fq.quantize_symmetric(x.astype(np.float64), s, 127)) == [-127, -127, 0, 0, 1, 127, 127]
    assert np.array_equal(fq.fake_quant_symmetric(x, 1.0), fq.quantize_symmetric(x.astype(np.float64), s, 127) * s)
    assert float(fq.amax_of_scale(fq.symmetric_scale(3.0))) == pytest.approx(3.0, rel=1e-15)


def test_a_stored_weight_reads_back_as_its_fake_quant():
    # The export's weights dequantize (DequantizeLinear: q * scale) to what fake_quant gives for the same scales.
    w = np.random.default_rng(6).standard_normal((8, 4, 3, 3)).astype(np.float32)
    q, scale, _ = quantize_weight(w, 0, "int8")
    dq = numpy_helper.to_array(numpy_helper.from_array(q)).astype(np.float32) * scale.reshape(8, 1, 1, 1)
    assert np.array_equal(dq, fq.fake_quant(w, scale, axis=0))
