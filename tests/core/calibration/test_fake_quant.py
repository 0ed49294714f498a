"""fake_quant against ONNX Runtime's QuantizeLinear/DequantizeLinear, and its helpers."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.accuracy.metrics import snr_db
from trtwidgets.core.calibration.fake_quant import (asymmetric_params, fake_quant, grid_use, per_channel_amax,
                                                    quantize, ste_mask, symmetric_scale)


def _ort_qdq(x, scale, zero_point, axis=None):
    """QuantizeLinear + DequantizeLinear run by ONNX Runtime: the reference the numpy code must match."""
    ort = pytest.importorskip("onnxruntime")
    s = np.asarray(scale, np.float32)
    z = np.asarray(zero_point, np.int8)
    kw = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], **kw),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **kw)]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))],
                          [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.astype(np.float32)})[0]


def test_per_tensor_matches_onnxruntime_including_ties_and_clamp():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, 500), [2.5 / 127 * 3.5, -2.5 / 127 * 4.5, 9.0, -9.0]]).astype(np.float32)
    s = float(np.float32(2.5 / 127))
    np.testing.assert_allclose(fake_quant(x, s), _ort_qdq(x, s, 0), rtol=0, atol=1e-6)
    # The explicit Q clamps to -128, not -127: a value far below -amax lands on -128 * s.
    assert quantize(np.array([-9.0]), s)[0] == -128
    assert quantize(np.array([9.0]), s)[0] == 127


def test_per_channel_and_zero_point_match_onnxruntime():
    rng = np.random.default_rng(1)
    w = rng.normal(0, 1, (4, 3, 3, 3)).astype(np.float32) * np.array([0.01, 0.1, 1, 10], np.float32)[:, None, None, None]
    s = np.float32(per_channel_amax(w, 0) / 127).astype(np.float32)
    np.testing.assert_allclose(fake_quant(w, s, axis=0), _ort_qdq(w, s, np.zeros(4), axis=0), rtol=1e-6, atol=1e-7)
    a = rng.uniform(0, 1, 300).astype(np.float32)
    scale, zp = asymmetric_params(0.0, 1.0)
    np.testing.assert_allclose(fake_quant(a, np.float32(scale), zp), _ort_qdq(a, scale, zp), atol=1e-6)


def test_per_channel_amax_is_max_abs_per_slice():
    w = np.array([[[1.0, -3.0]], [[0.5, 0.25]]])
    np.testing.assert_array_equal(per_channel_amax(w, 0), [3.0, 0.5])
    np.testing.assert_array_equal(per_channel_amax(w, -1), [1.0, 3.0])


def test_per_channel_beats_per_tensor_when_channels_differ_in_scale():
    rng = np.random.default_rng(2)
    w = rng.normal(0, 1, (8, 1, 3, 3)) * np.logspace(-2, 0, 8)[:, None, None, None]
    per_tensor = fake_quant(w, symmetric_scale(np.abs(w).max()))
    per_channel = fake_quant(w, symmetric_scale(per_channel_amax(w, 0)), axis=0)
    # The tensor's SNR is ruled by its largest channels; the small channels are where per-tensor fails.
    assert snr_db(w, per_channel) > snr_db(w, per_tensor)
    assert snr_db(w[0], per_channel[0]) > snr_db(w[0], per_tensor[0]) + 20


def test_asymmetric_uses_the_whole_grid_on_positive_data():
    x = np.linspace(0.0, 1.0, 10_000)
    sym = grid_use(x, symmetric_scale(1.0))
    scale, zp = asymmetric_params(0.0, 1.0)
    asym = grid_use(x, scale, zp)
    assert sym.levels_reachable == 128 and sym.reachable_share == pytest.approx(0.5)
    assert asym.levels_reachable == 256
    assert zp == -128 and scale == pytest.approx(1 / 255)
    # Twice the levels: about 6 dB better on uniformly spread values.
    gain = snr_db(x, fake_quant(x, scale, zp)) - snr_db(x, fake_quant(x, symmetric_scale(1.0)))
    assert 5.0 < gain < 7.0


def test_asymmetric_range_always_contains_zero():
    scale, zp = asymmetric_params(2.0, 4.0)
    assert fake_quant(np.array([0.0]), scale, zp)[0] == 0.0
    assert fake_quant(np.array([4.0]), scale, zp)[0] == pytest.approx(4.0, abs=scale)
    assert asymmetric_params(0.0, 0.0) == (1.0, 0)


def test_ste_mask_blocks_only_clamped_values():
    s = 1.0 / 127
    x = np.array([0.0, 0.5, 1.0, 1.01, -1.0, -1.008, -1.02])
    np.testing.assert_array_equal(ste_mask(x, s), [True, True, True, False, True, True, False])


def test_zero_scale_gives_zero_point():
    np.testing.assert_array_equal(fake_quant(np.array([1.0, -2.0]), 0.0), [0.0, 0.0])
