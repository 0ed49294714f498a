"""Task metrics by name and the user's own metric by module:function (imported when the user typed it, never
evaluated, never because a file named it), called on copies, bounded, its answer checked."""

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
    from trtwidgets.core.accuracy.task_metrics import REGISTRY

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
    for name in [n for n in REGISTRY if n.startswith("mymetrics_pkg")]:
        REGISTRY.pop(name)


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
    with pytest.raises(UserError, match="snr is not a task metric") as err:
        parse_task_metric("snr:mask", ref)
    assert "--target-snr" in err.value.fix
    det = {"o": packed_output()}
    worst = parse_task_metric("worst-group", det)
    assert worst(det) == pytest.approx(1.0) and worst({"o": perturb_scores(det["o"], 0.1)}) < 0.9


def test_user_metric_by_module_name(user_module):
    ref = {"logits": _logits()}
    metric = parse_task_metric(f"{user_module}.m:agree", ref, own=True)
    assert isinstance(metric, TaskMetric) and metric.reference_value == 1.0
    # Registered now: the same text from a file (own=False) is looked up, not imported again.
    assert parse_task_metric(f"{user_module}.m:agree", ref).reference_value == 1.0
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
        parse_task_metric(text, {"logits": _logits()}, own=True)


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
    for bad in ("f1", "pkg.mod", "pkg.mod:", "a b:c", "snr"):
        with pytest.raises(UserError, match="Unknown metric|snr is not a task metric") as err:
            check_metric_text(bad)
        assert "detection" in err.value.why or "--target-snr" in err.value.fix


def test_top1_against_labels_reads_a_pooled_head_per_sample():
    logits = np.zeros((4, 5, 1, 1), np.float32)
    logits[np.arange(4), [0, 3, 2, 4], 0, 0] = 1.0
    metric = parse_task_metric("top1", {"y": logits}, labels=np.array([0, 3, 1, 4]))
    assert metric.reference_value == pytest.approx(0.75)


# -- data never names code (issue 32) ---------------------------------------------------------------


@pytest.mark.parametrize("text", ["venv.__main__:x", "builtins:print", "this:x", "os:system", "mymetrics_pkg.m:agree"])
def test_a_metric_named_by_a_file_is_looked_up_never_imported(user_module, text):
    """What plan.json says is only looked up: nothing is imported, and the message says how to register it."""
    before = set(sys.modules)
    with pytest.raises(UserError, match="is not registered in this process") as err:
        parse_task_metric(text, {"logits": _logits()})
    assert set(sys.modules) == before, set(sys.modules) - before
    assert f"--metric {text}" in err.value.fix and "tw.register_metric" in err.value.fix
    assert "never chooses code to import" in err.value.why


def test_register_metric_by_name_and_by_module_function(user_module):
    import trtwidgets as tw

    ref = {"logits": _logits()}
    tw.register_metric("mymetrics_pkg.m:mine", lambda reference, candidate: 0.75)
    assert parse_task_metric("mymetrics_pkg.m:mine", ref)(ref) == 0.75  # no such module: never imported
    with pytest.raises(UserError, match="is a built-in metric"):
        register_metric("detection", lambda reference, options, labels: None)
    with pytest.raises(UserError, match="not a function"):
        register_metric("mymetrics_pkg.m:x", 3)
    register_metric("half-made", lambda reference, options, labels: "not a metric")
    try:
        with pytest.raises(UserError, match="returned str"):
            parse_task_metric("half-made", ref)
    finally:
        REGISTRY.pop("half-made")


def _call(fn):
    return make_task_metric(fn, {"logits": _logits()})


@pytest.mark.parametrize("body, message", [
    ("raise ValueError('bad shape')", "failed on the float model's own outputs"),
    ("return 'high'", "returned 'high' \\(str\\)"),
    ("return None", "returned None"),
    ("return float('nan')", "returned NaN"),
    ("return True", "returned True \\(bool\\)"),
    ("return np.ones(3)", "not a number"),
    ("import sys; sys.exit(0)", "called sys.exit\\(0\\)"),
    ("raise SystemExit(3)", "called sys.exit\\(3\\)"),
])
def test_a_metric_that_fails_or_answers_no_number_is_a_clear_error(body, message):
    scope = {"np": np}
    exec(f"def metric(reference, candidate):\n    {body}\n", scope)
    with pytest.raises(UserError, match=message) as err:
        _call(scope["metric"])
    assert err.value.why and err.value.fix


def test_a_metric_failing_on_a_candidate_only_is_a_clear_error():
    calls = []

    def metric(reference, candidate):
        calls.append(1)
        if len(calls) > 1:
            return None
        return 1.0

    made = _call(metric)
    with pytest.raises(UserError, match="returned None .* on a candidate's outputs"):
        made({"logits": _logits(1)})


def test_a_metric_gets_copies_and_cannot_corrupt_the_reference():
    """A metric that softmaxes in place once corrupted the planner's FP32 reference (FP16 then 'missed' at -0.57)."""
    def softmax_in_place(reference, candidate):
        for out in (reference, candidate):
            x = out["logits"]
            np.exp(x - x.max(-1, keepdims=True), out=x)
            x /= x.sum(-1, keepdims=True)
        return float(np.mean(np.argmax(reference["logits"], -1) == np.argmax(candidate["logits"], -1)))

    ref = {"logits": _logits()}
    kept = ref["logits"].copy()
    made = make_task_metric(softmax_in_place, ref)
    cand = {"logits": _logits(2)}
    kept_cand = cand["logits"].copy()
    for _ in range(3):
        made(cand)
    assert np.array_equal(ref["logits"], kept) and np.array_equal(cand["logits"], kept_cand)
    assert made(ref) == 1.0


def test_a_metric_that_hangs_is_stopped_with_a_clear_error(monkeypatch):
    import time

    from trtwidgets.core.accuracy.metric_guard import METRIC_SECONDS_ENV

    monkeypatch.setenv(METRIC_SECONDS_ENV, "0.5")

    def spins(reference, candidate):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 30:  # "forever" for the test, bounded should the limit not stop it
            pass

    def sleeps(reference, candidate):
        time.sleep(30)

    for fn in (spins, sleeps):
        t = time.perf_counter()
        with pytest.raises(UserError, match="did not return within 0.5 s") as err:
            _call(fn)
        assert time.perf_counter() - t < 10 and METRIC_SECONDS_ENV in err.value.fix
    # In a thread (a widget's worker): the metric overruns in a thread of its own and the caller goes on.
    import threading

    box = {}

    def worker():
        try:
            _call(sleeps)
        except UserError as e:
            box["err"] = e

    th = threading.Thread(target=worker)
    th.start()
    th.join(20)
    assert "did not return within" in box["err"].what
    monkeypatch.setenv(METRIC_SECONDS_ENV, "soon")
    with pytest.raises(UserError, match="is not a number of seconds"):
        _call(lambda r, c: 1.0)


def test_top1_labels_outside_the_classes_are_refused():
    """--labels all 99 for a 5-class output: top-1 0.0 for FP32 and every candidate, so every candidate 'met'."""
    ref = {"y": np.random.default_rng(0).normal(size=(6, 5)).astype(np.float32)}
    for labels in (np.full(6, 99), np.array([0, 1, 2, 3, 4, 5]), np.array([0, -1, 2, 3, 4, 0])):
        with pytest.raises(UserError, match="not classes of 'y'") as err:
            parse_task_metric("top1", ref, labels=labels)
        assert "0 to 4" in err.value.what
    assert parse_task_metric("top1", ref, labels=np.array([0, 1, 2, 3, 4, 0])).reference_value >= 0


def test_a_built_in_metric_on_outputs_it_cannot_read_is_a_clear_error():
    """Found by tests/fuzz/test_fuzz_plan_folder.py: top1-agreement on a [3, 0] output was numpy's ValueError."""
    with pytest.raises(UserError, match="cannot be made on FP32's outputs \\(y \\(3, 0\\)\\)") as err:
        parse_task_metric("top1-agreement", {"y": np.zeros((3, 0), np.float32)})
    assert "ValueError" in err.value.why
