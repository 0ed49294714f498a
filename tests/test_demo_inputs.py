"""The bundled demo's feeds: whole batches only, and a clear error for a batch size below 1."""

from __future__ import annotations

import pytest

from trtwidgets import demo
from trtwidgets.core.common.errors import UserError


def test_sample_inputs_are_whole_batches():
    feeds = demo.sample_inputs(batch_size=5)
    assert feeds and all(f[demo.INPUT_NAME].shape[0] == 5 for f in feeds)


@pytest.mark.parametrize("batch", [0, -3])
def test_a_batch_size_below_one_is_a_user_error(batch):
    with pytest.raises(UserError, match="not a batch size"):
        demo.sample_inputs(batch_size=batch)


def test_labelled_inputs_are_each_line_upright_then_turned_by_180_degrees():
    import numpy as np

    feeds, labels = demo.labelled_inputs(batch_size=8, n_lines=12)
    x = np.concatenate([f[demo.INPUT_NAME] for f in feeds])
    assert len(x) == len(labels) == 24 and labels.sum() == 12
    # the second half is the first half rotated: flip H and W back and they are equal
    np.testing.assert_array_equal(x[12:][:, :, ::-1, ::-1], x[:12])
    assert list(labels[:12]) == [0] * 12 and list(labels[12:]) == [1] * 12


def test_the_float_model_reads_the_rendered_lines_and_is_near_chance_on_their_mirror_labels():
    # The labels mean something only if the FP32 model gets them right; swapped labels must score badly.
    acc = demo.orientation_top1(demo.MODEL_PATH)
    assert acc >= 0.85
    feeds, labels = demo.labelled_inputs(batch_size=16)
    from trtwidgets.core.qdq.validate import run_model
    import numpy as np

    scores = next(iter(run_model(demo.MODEL_PATH, feeds)[0].values()))
    assert np.mean(scores.argmax(1) == 1 - labels) == pytest.approx(1 - acc)


def test_demo_build_rows_carry_latency_precisions_and_a_metric_with_its_source(tmp_path):
    import math

    from trtwidgets.demo.builds import demo_build_rows

    rows = {r["build"]: r for r in demo_build_rows(tmp_path)}
    assert set(rows) == {"cls_static_fp32", "cls_static_fp16", "cls_static_int8_entropy2", "cls_static_qdq_int8"}
    assert all(math.isfinite(r["median_ms"]) and 0 <= r["metric"] <= 1 for r in rows.values())
    assert rows["cls_static_qdq_int8"]["INT8"] == 48 and "Q/DQ" in rows["cls_static_qdq_int8"]["metric_source"]
    assert rows["cls_static_fp16"]["metric"] == rows["cls_static_fp32"]["metric"]  # same ONNX model, said so
    assert "FP32 model" in rows["cls_static_fp16"]["metric_source"]
