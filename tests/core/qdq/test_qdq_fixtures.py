"""The committed Q/DQ fixtures (used on the GPU machine, which has no ONNX Runtime) are current.

If the exporter changes, these fail until ``python scripts/make_qdq_fixtures.py`` is run again.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from trtwidgets import demo
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.accuracy.reference import load_reference

QDQ = "qdq"


@pytest.fixture(scope="module")
def amax(fixtures_dir):
    return json.loads((fixtures_dir / QDQ / "cls_amax_percentile.json").read_text())


def test_committed_qdq_model_is_what_the_exporter_writes_today(fixtures_dir, amax):
    committed = onnx.load(str(fixtures_dir / QDQ / "cls_qdq_int8.onnx"))
    # as scripts/make_qdq_fixtures.py
    result = build_qdq(str(demo.MODEL_PATH), QdqSpec(amax, QdqOptions(dense_int8=False, trt_version="8.6")))

    # Compare what the exporter decides (Q/DQ nodes, their scales and quantized weights), not
    # the bytes onnx.version_converter writes for the rest, which may change between onnx releases.
    def qdq(model):
        inits = {t.name: t.SerializeToString() for t in model.graph.initializer}
        return sorted((n.op_type, tuple(n.input), tuple(n.output), tuple(inits.get(i, b"") for i in n.input))
                      for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear"))

    assert qdq(committed) == qdq(result.model)
    report = json.loads((fixtures_dir / QDQ / "cls_qdq_int8.report.json").read_text())
    assert report == json.loads(json.dumps(result.report.to_dict()))


def test_held_back_reference_is_onnxruntime_fp32_of_the_demo(fixtures_dir):
    from trtwidgets.core.qdq.validate import run_model

    ref = load_reference(fixtures_dir / QDQ / "cls_heldback.npz")
    images = ref.inputs["images"]
    assert images.dtype == np.uint8 and images.shape == (64, 48, 192, 3)
    got, n = run_model(str(demo.MODEL_PATH), [{"x": demo.preprocess(images)}])
    assert n == 64
    for name, value in got.items():
        np.testing.assert_allclose(ref.outputs[name], value, atol=1e-5)
    # The ranges never saw these crops: they are not among the bundled calibration crops.
    bundled = demo.sample_images()
    assert not any(np.array_equal(a, b) for a in images[:8] for b in bundled)
