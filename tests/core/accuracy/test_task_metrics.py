"""Task metrics by name and the user's own metric by module:function (imported, never evaluated)."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from tests.core.accuracy.detector_outputs import packed_output, perturb_scores
from trtwidgets.core.accuracy.task_metrics import (REGISTRY, TaskMetric, make_task_metric, metric_names,
                                                   parse_task_metric, register_metric)
from trtwidgets.core.common.errors import UserError


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A package on sys.path holding good and bad metrics."""
    pkg = tmp_path / "mymetrics_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(textwrap.dedent("""
        import numpy as np

        def agree(reference, candidate):
            return float(np.mean(np.argmax(reference["logits"], -1) == np.argmax(candidate["logits"], -1)))

        def one_arg(reference):
            return 1.0

        def broken(reference, candidate):
            raise KeyError("nope")

        NOT_A_FUNCTION = 3
    """))
    (pkg / "bad_import.py").write_text("import module_that_does_not_exist_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "mymetrics_pkg"
    for name in [n for n in sys.modules if n.startswith("mymetrics_pkg")]:
        del sys.modules[name]


def _logits(seed=0, n=50, k=10):
    return np.random.default_rng(seed).normal(0, 1, (n, k)).astype(np.float32)


def test_detection_metric_sees_score_noise():
    ref = {"output0": packed_output()}
    metric = parse_task_metric("detection", ref)
    assert metric.name == "detection F1@0.25 (output0)"
    assert metric(ref) == 1.0
    assert metric({"output0": perturb_scores(ref["output0"], 0.1)}) < 0.5
    strict = parse_task_metric("detection:0.5:output0:0.9", ref)
    assert strict.name.startswith("detection F1@0.5")
    with pytest.raises(UserError, match="finds no detection"):
        parse_task_metric("detection:0.99", ref)
    with pytest.raises(UserError, match="not a number"):
        parse_task_metric("detection:high", ref)


def test_top1_and_topk_agreement_and_labels():
    ref = {"logits": _logits()}
    cand = {"logits": ref["logits"].copy()}
    cand["logits"][:10] = -cand["logits"][:10]  # flips most of the first 10 arg-maxes
    top1 = parse_task_metric("top1-agreement", ref)
    assert top1(ref) == 1.0 and 0.78 <= top1(cand) <= 0.82
    top3 = parse_task_metric("topk-agreement:3:logits", ref)
    assert top3(ref) == 1.0 and top3(cand) < 1.0
    labels = np.argmax(ref["logits"], -1)
    labelled = parse_task_metric("top1", ref, labels=labels)
    assert labelled.reference_value == 1.0 and labelled(cand) == pytest.approx(top1(cand))
    with pytest.raises(UserError, match="needs --labels"):
        parse_task_metric("top1", ref)
    with pytest.raises(UserError, match="no output 'nope'"):
        parse_task_metric("top1-agreement:nope", ref)


def test_mask_iou_pooled_and_worst_group():
    mask = np.zeros((2, 1, 16, 16), np.float32)
    mask[:, :, 4:12, 4:12] = 0.9
    ref = {"mask": mask}
    half = mask.copy()
    half[:, :, 4:8] = 0.0
    assert parse_task_metric("mask-iou:0.5", ref)({"mask": half}) == pytest.approx(0.5)
    assert parse_task_metric("cosine", ref)(ref) == pytest.approx(1.0)
    assert parse_task_metric("snr:mask", ref).reference_value == float("inf")
    det = {"o": packed_output()}
    worst = parse_task_metric("worst-group", det)
    assert worst(det) == pytest.approx(1.0) and worst({"o": perturb_scores(det["o"], 0.1)}) < 0.9


def test_user_metric_by_module_name(user_module):
    ref = {"logits": _logits()}
    metric = parse_task_metric(f"{user_module}.m:agree", ref)
    assert isinstance(metric, TaskMetric) and metric.reference_value == 1.0
    assert metric({"logits": -ref["logits"]}) < 0.2


@pytest.mark.parametrize("text, message", [
    ("mymetrics_pkg.missing_module:f", "does not import"),
    ("mymetrics_pkg.bad_import:f", "does not import"),
    ("mymetrics_pkg.m:nothing", "has no function 'nothing'"),
    ("mymetrics_pkg.m:NOT_A_FUNCTION", "has no function"),
    ("mymetrics_pkg.m:one_arg", "does not take \\(reference, candidate\\)"),
    ("mymetrics_pkg.m:broken", "failed on the float model's own outputs"),
    ("__import__('os').system('true')", "neither a built-in metric"),
    ("no-such-metric", "neither a built-in metric"),
])
def test_user_metric_errors_are_clear(user_module, text, message):
    with pytest.raises(UserError, match=message):
        parse_task_metric(text, {"logits": _logits()})


def test_api_callable_and_registry():
    ref = {"logits": _logits()}
    m = make_task_metric(lambda r, c: float(np.allclose(r["logits"], c["logits"])), ref)
    assert m.reference_value == 1.0 and m({"logits": ref["logits"] + 1}) == 0.0
    assert make_task_metric(m, ref) is m
    with pytest.raises(UserError, match="is not a metric"):
        make_task_metric(3, ref)
    assert {"detection", "top1-agreement", "mask-iou", "worst-group"} <= set(metric_names())
    register_metric("always-half", lambda reference, options, labels: TaskMetric(lambda o: 0.5, "half"))
    try:
        assert parse_task_metric("always-half", ref)(ref) == 0.5
    finally:
        REGISTRY.pop("always-half")
    with pytest.raises(UserError, match="not a metric name"):
        register_metric("Bad Name", None)


def test_segmentation_miou():
    logits = np.zeros((1, 3, 4, 4), np.float32)
    logits[0, 0] = 1.0
    logits[0, 1, :2, :2] = 2.0  # class 1 top-left, class 0 elsewhere
    ref = {"seg": logits}
    metric = parse_task_metric("seg-miou", ref)
    assert metric(ref) == 1.0
    moved = logits.copy()
    moved[0, 1, :2, :2] = 0.0
    moved[0, 1, 2:, 2:] = 2.0  # class 1 found in the wrong corner
    assert metric({"seg": moved}) == pytest.approx((8 / 16 + 0.0) / 2)
    with pytest.raises(UserError, match="seg-miou reads"):
        parse_task_metric("seg-miou:x", {"x": np.zeros((2, 10))})


def test_metrics_say_which_outputs_they_read_and_whether_they_are_pooled():
    ref = {"output0": packed_output(), "aux": np.ones((2, 8), np.float32)}
    det = parse_task_metric("detection", ref)
    assert det.outputs == ("output0",) and not det.pooled
    cos = parse_task_metric("cosine:output0", ref)
    assert cos.outputs == ("output0",) and cos.pooled
    assert parse_task_metric("worst-group", ref).outputs == ("output0", "aux")
    assert make_task_metric(lambda r, c: 1.0, ref).outputs is None  # the user's own: unknown


def test_check_metric_text_refuses_unknown_names_before_any_work():
    from trtwidgets.core.accuracy.task_metrics import check_metric_text

    for ok in ("detection", "mask-iou:0.3:out", "seg-miou", "pkg.mod:fn", "mod:fn"):
        check_metric_text(ok)  # no import happens here
    for bad in ("f1", "pkg.mod", "pkg.mod:", "a b:c"):
        with pytest.raises(UserError, match="Unknown metric") as err:
            check_metric_text(bad)
        assert "detection" in err.value.why


def test_top1_against_labels_reads_a_pooled_head_per_sample():
    logits = np.zeros((4, 5, 1, 1), np.float32)
    logits[np.arange(4), [0, 3, 2, 4], 0, 0] = 1.0
    metric = parse_task_metric("top1", {"y": logits}, labels=np.array([0, 3, 1, 4]))
    assert metric.reference_value == pytest.approx(0.75)
