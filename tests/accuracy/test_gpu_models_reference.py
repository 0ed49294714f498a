"""The numpy reference the GPU tests compare TensorRT with must itself be right: check it against ORT."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.accuracy_models import INTERMEDIATES, SHAPE, reference, tiny_cnn


def test_numpy_reference_matches_onnxruntime():
    pytest.importorskip("onnxruntime")
    from trtwidgets.core.accuracy.intermediates import run_reference
    from trtwidgets.core.accuracy.metrics import compare_outputs

    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    ort = run_reference(tiny_cnn(), {"x": x}, list(INTERMEDIATES))
    ref = reference(x)
    for name, m in compare_outputs(ort, ref, topk=()).items():
        assert m.max_abs < 1e-4, name
