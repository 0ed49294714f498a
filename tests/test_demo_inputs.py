"""The bundled demo's feeds: whole batches only, a clear error for a batch size below 1, and its build table.

The labelled set itself: tests/test_demo_labelled_set.py.
"""

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


def test_demo_build_rows_carry_latency_precisions_and_a_metric_with_its_source(tmp_path):
    import math

    from trtwidgets.demo.builds import demo_build_rows

    rows = {r["build"]: r for r in demo_build_rows(tmp_path)}
    assert set(rows) == {"cls_static_fp32", "cls_static_fp16", "cls_static_int8_entropy2", "cls_static_qdq_int8"}
    assert all(math.isfinite(r["median_ms"]) and 0 <= r["metric"] <= 1 for r in rows.values())
    assert rows["cls_static_qdq_int8"]["INT8"] == 48 and "Q/DQ" in rows["cls_static_qdq_int8"]["metric_source"]
    assert rows["cls_static_fp16"]["metric"] == rows["cls_static_fp32"]["metric"]  # same ONNX model, said so
    assert "FP32 model" in rows["cls_static_fp16"]["metric_source"]
