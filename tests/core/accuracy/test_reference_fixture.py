from __future__ import annotations

import numpy as np
import pytest

from trtwidgets import demo
from trtwidgets.core.accuracy.reference import load_reference, save_reference


def test_committed_cls_reference_matches_demo_and_ort(fixtures_dir):
    ref = load_reference(fixtures_dir / "cls_reference.npz")
    x = np.concatenate([f["x"] for f in demo.sample_inputs(1)])
    np.testing.assert_array_equal(ref.inputs["x"], x)
    (name, probs), = ref.outputs.items()
    assert probs.shape == (32, 2)
    pytest.importorskip("onnxruntime")
    from trtwidgets.core.accuracy.intermediates import run_reference

    now = run_reference(demo.MODEL_PATH, {"x": x[:8]})[name]
    np.testing.assert_allclose(now, probs[:8], rtol=1e-4, atol=1e-5)


def test_round_trip_with_slashes_in_names(tmp_path):
    ins = {"x": np.arange(6, dtype=np.float32).reshape(3, 2)}
    outs = {"save_infer_model/scale_0.tmp_1": np.ones((3, 2), np.float32)}
    p = save_reference(tmp_path / "r.npz", ins, outs, {"note": "t"})
    back = load_reference(p)
    assert back.meta == {"note": "t"} and back.samples == 3
    np.testing.assert_array_equal(back.outputs["save_infer_model/scale_0.tmp_1"], outs["save_infer_model/scale_0.tmp_1"])
