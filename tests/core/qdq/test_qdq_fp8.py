"""FP8 E4M3FN encoding used for FP8 Q/DQ weights, checked against ONNX's own conversion."""

from __future__ import annotations

import numpy as np

from trtwidgets.core.qdq.fp8 import E4M3FN_MAX, e4m3fn_to_float, e4m3fn_values, float_to_e4m3fn


def test_table_has_the_e4m3fn_landmarks():
    v = e4m3fn_values()
    assert v[0x7E] == E4M3FN_MAX == 448.0 and v[0x01] == 2.0 ** -9 and v[0x08] == 2.0 ** -6
    assert v[0x38] == 1.0 and np.isnan(v[0x7F]) and np.isnan(v[0xFF]) and v[0xB8] == -1.0


def test_encoding_matches_onnx_reference_conversion():
    from onnx import helper

    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(2000) * 40, rng.standard_normal(500) * 0.01,
                        [0.0, -0.0, 448.0, -448.0, 464.0, 1e6, -1e6, 2.0 ** -10, 3 * 2.0 ** -10]]).astype(np.float32)
    ours = float_to_e4m3fn(x)
    conv = getattr(helper, "float32_to_float8e4m3", None)
    if conv is not None:  # onnx <= 1.17 (the Python 3.9 side)
        theirs = np.array([conv(float(v), fn=True, uz=False, saturate=True) for v in x], dtype=np.uint8)
    else:  # newer onnx converts through ml_dtypes inside make_tensor (saturating, like QuantizeLinear)
        t = helper.make_tensor("t", onnx_fp8(), [len(x)], x)
        theirs = np.frombuffer(t.raw_data, np.uint8) if t.raw_data else np.array(t.int32_data, np.uint8)
    assert np.array_equal(ours, theirs), (x[ours != theirs], ours[ours != theirs], theirs[ours != theirs])


def onnx_fp8():
    from onnx import TensorProto

    return TensorProto.FLOAT8E4M3FN


def test_round_trip_error_is_within_half_a_step():
    x = np.linspace(-448, 448, 10001, dtype=np.float32)
    back = e4m3fn_to_float(float_to_e4m3fn(x))
    # Relative step of 3 mantissa bits: 2^-3; rounding error at most half of it (normal range).
    normal = np.abs(x) >= 2.0 ** -6
    assert np.all(np.abs(back[normal] - x[normal]) <= np.abs(x[normal]) * 2.0 ** -4 + 1e-6)
    assert np.array_equal(float_to_e4m3fn(np.array([np.nan]))[0:1], np.array([0x7F], np.uint8))
