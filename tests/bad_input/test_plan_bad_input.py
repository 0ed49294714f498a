"""A shared plan runs no code, and no verdict rests on a broken reference (issue 32, the planner's side).

Each refusal row must end with exit 2, a message with what, why and fix and no traceback, leave every file the
user had and every file on the shelf unchanged, write nothing where it was asked to write, and import nothing
a file named. Each "works" row must exit 0 with the right result. The shelf holds a small model, its data, a
module of bad metrics, plan folders made by the real ``plan`` and copies of them edited as a hostile user would.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import textwrap
import zipfile

import numpy as np
import onnx
import pytest

from tests.core.plan.plan_models import conv_stack, feeds
from tests.core.plan.test_non_finite import sqrt_model

from .workspace import fill_argv, fingerprint, run_cli

PLAN = ["plan", "{bad}/m.onnx", "--data", "{bad}/data", "--out", "{ws}/out", "--no-progress", "--trt-version", "10.16"]
MEASURE = ["plan", "measure", "--no-progress"]
#: The limit a hanging metric gets in these rows (seconds).
HANG_LIMIT = "2"

BAD_METRICS = '''
import sys
import time

import numpy as np

def raises(reference, candidate):
    raise ValueError("bad shape")

def returns_str(reference, candidate):
    return "high"

def returns_none(reference, candidate):
    return None

def returns_nan(reference, candidate):
    return float("nan")

def exits0(reference, candidate):
    sys.exit(0)

def hangs(reference, candidate):
    time.sleep(30)

def none_on_candidates(reference, candidate):
    return 1.0 if candidate is reference or np.array_equal(candidate["y"], reference["y"]) else None

def raises_on_candidates(reference, candidate):
    if not np.array_equal(candidate["y"], reference["y"]):
        raise KeyError("logits")
    return 1.0

def returns_huge_int(reference, candidate):
    return 10 ** 400

def returns_huge_fraction(reference, candidate):
    from fractions import Fraction
    return Fraction(10 ** 400, 3)

class FloatRaises(float):
    def __float__(self):
        raise RuntimeError("no float for you")

def float_raises(reference, candidate):
    return FloatRaises(1.0)

class SlowFloat(float):
    def __float__(self):
        time.sleep(30)
        return 1.0

def slow_float(reference, candidate):
    return SlowFloat(1.0)

def moves_the_working_folder(reference, candidate):
    import os
    os.chdir("/")
    return 1.0

def prints(reference, candidate):
    print("the metric speaks", {"not": "json"})
    return 1.0

def softmax_in_place(reference, candidate):
    for out in (reference, candidate):
        x = out["y"].reshape(len(out["y"]), -1)
        np.exp(x - x.max(-1, keepdims=True), out=x)
        x /= x.sum(-1, keepdims=True)
    return float(np.mean(np.argmax(reference["y"].reshape(len(reference["y"]), -1), -1)
                         == np.argmax(candidate["y"].reshape(len(candidate["y"]), -1), -1)))
'''

EVIL = '''
open({marker!r}, "w").write("imported")

def x(reference, candidate):
    return 1.0
'''


def _samples(folder, samples):
    folder.mkdir(parents=True)
    for i, f in enumerate(samples):
        np.save(folder / f"s{i:02d}.npy", f["x"])


def _members(path):
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def _zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in members.items():
            z.writestr(n, b)


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _edit_meta(path, change):
    members = _members(path)
    meta = json.loads(str(np.load(io.BytesIO(members["meta.npy"]))))
    change(meta)
    members["meta.npy"] = _npy(np.array(json.dumps(meta)))
    _zip(path, members)


def _header_only(shape) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buf.getvalue() + bytes(64)


def _plan_copy(bad, name, spec=None):
    folder = bad / "plans" / name
    shutil.copytree(bad / "plans" / "good", folder)
    if spec is not None:
        doc = json.loads((folder / "plan.json").read_text())
        doc["target"].update(metric_spec=spec, metric=spec)
        (folder / "plan.json").write_text(json.dumps(doc))
    return folder


def _edit_check(bad, name, edit):
    folder = _plan_copy(bad, name)
    edit(folder / "held_back.npz")
    return folder


def make_shelf(bad, marker):
    """The model, its data, the bad metrics, and plan folders (the real plan's, then hostile edits)."""
    from trtwidgets.cli import main

    bad.mkdir(parents=True)
    onnx.save(conv_stack(), bad / "m.onnx")
    _samples(bad / "data", feeds(8))
    (bad / "lib").mkdir()
    (bad / "lib" / "bad_metrics_32.py").write_text(textwrap.dedent(BAD_METRICS))
    np.save(bad / "labels_99.npy", np.full(8, 99, np.int64))
    held = [{"x": np.random.default_rng(2).random((1, 16), np.float32)} for _ in range(4)]
    onnx.save(sqrt_model(held, -1e6), bad / "nan_everywhere.onnx")
    _samples(bad / "sqrt_data", [{"x": np.random.default_rng(i).random((1, 16), np.float32)} for i in range(8)])
    (bad / "plans").mkdir()
    assert main(["plan", str(bad / "m.onnx"), "--data", str(bad / "data"), "--out", str(bad / "plans" / "good"),
                 "--no-progress", "--trt-version", "10.16", "--batch", "32", "--metric", "top1-agreement"]) == 0
    assert main(["plan", str(bad / "m.onnx"), "--data", str(bad / "data"), "--out", str(bad / "plans" / "seed3"),
                 "--no-progress", "--trt-version", "10.16", "--seed", "3"]) == 0
    for name, spec in {"venv_main": "venv.__main__:x", "builtins_print": "builtins:print", "this_x": "this:x",
                       "os_system": "os:system", "shipped": "evil_metric_32:x"}.items():
        _plan_copy(bad, name, spec)
    (bad / "plans" / "shipped" / "evil_metric_32.py").write_text(EVIL.format(marker=str(marker)))
    other = bad / "plans" / "seed3" / "held_back.npz"
    _edit_check(bad, "other_check", lambda p: shutil.copy(other, p))
    nan_ref = lambda p: _zip(p, dict(_members(p), **{"ref0.npy": _npy(np.full((2, 64, 1, 1), np.nan, np.float32))}))
    _edit_check(bad, "nan_check", nan_ref)
    _edit_check(bad, "huge_header", lambda p: _zip(p, dict(_members(p), **{"in0_0.npy": _header_only((10 ** 11,))})))
    _edit_check(bad, "claims_50", lambda p: _edit_meta(p, lambda m: m.update(samples=50)))
    _edit_check(bad, "format_2", lambda p: _edit_meta(p, lambda m: m.update(format=2)))
    _edit_check(bad, "ref_rows", lambda p: _zip(p, dict(_members(p), **{"ref0.npy": _npy(np.zeros((5, 64, 1, 1),
                                                                                                    np.float32))})))
    _edit_check(bad, "random_check", lambda p: p.write_bytes(np.random.default_rng(0).bytes(2048)))
    _edit_check(bad, "object_check", lambda p: _zip(p, dict(_members(p), **{
        "ref0.npy": _npy_objects()})))
    # Degenerate data (issue 45): all-zero samples of a model without biases, and of one whose output alone is not 0.
    from .hostile_models import no_bias_stack

    onnx.save(no_bias_stack(), bad / "nb.onnx")
    onnx.save(no_bias_stack(offset=True), bad / "nb_offset.onnx")
    _samples(bad / "zeros", [{"x": np.zeros((1, 8, 8, 8), np.float32)} for _ in range(8)])
    assert main(["calibrate", str(bad / "nb.onnx"), "--data", str(bad / "zeros"), "--no-progress",
                 "--stats", str(bad / "zero_stats.npz"), "--out", str(bad / "zero_cal.npz")]) == 0
    folder = _plan_copy(bad, "no_model")
    doc = json.loads((folder / "plan.json").read_text())
    doc["model"] = str(bad / "gone.onnx")
    (folder / "plan.json").write_text(json.dumps(doc))


def _npy_objects() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    return buf.getvalue()


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan_bad_ws")
    marker = root / "IMPORTED"
    make_shelf(root / "bad", marker)
    # The metric module the user has, and a folder shipping a module: both importable, as the issue found them.
    sys.path[:0] = [str(root / "bad" / "lib"), str(root / "bad" / "plans" / "shipped")]
    old = os.environ.get("TRTWIDGETS_METRIC_SECONDS")
    os.environ["TRTWIDGETS_METRIC_SECONDS"] = HANG_LIMIT
    yield root
    for p in (str(root / "bad" / "lib"), str(root / "bad" / "plans" / "shipped")):
        sys.path.remove(p)
    for name in [n for n in sys.modules if n.startswith(("bad_metrics_32", "evil_metric_32"))]:
        del sys.modules[name]
    from trtwidgets.core.accuracy.task_metrics import REGISTRY

    for name in [n for n in REGISTRY if n.startswith("bad_metrics_32")]:
        REGISTRY.pop(name)
    if old is None:
        os.environ.pop("TRTWIDGETS_METRIC_SECONDS")
    else:
        os.environ["TRTWIDGETS_METRIC_SECONDS"] = old


def _m(fn):
    return PLAN + ["--metric", f"bad_metrics_32:{fn}"]


#: (id, argv with {bad}/{user}/{ws} placeholders, a phrase the message must hold)
CASES = [
    # user metrics: exceptions, non-numbers, exiting, hanging -> exit 2 (1 means "no candidate meets")
    ("metric-raises", _m("raises"), "failed on the float model's own outputs"),
    ("metric-returns-a-string", _m("returns_str"), "returned 'high' (str)"),
    ("metric-returns-none", _m("returns_none"), "returned None"),
    ("metric-returns-nan", _m("returns_nan"), "returned NaN"),
    ("metric-calls-sys-exit-0", _m("exits0"), "called sys.exit(0)"),
    ("metric-hangs", _m("hangs"), f"did not return within {HANG_LIMIT} s"),
    ("metric-none-on-a-candidate", _m("none_on_candidates"), "on a candidate's outputs, not a number"),
    ("metric-raises-on-a-candidate", _m("raises_on_candidates"), "failed on a candidate's outputs"),
    # issue 45: the value's conversion to a float is the metric's too (it was a traceback, or a hang)
    ("metric-returns-10-to-the-400", _m("returns_huge_int"), "too large for a float"),
    ("metric-returns-a-huge-fraction", _m("returns_huge_fraction"), "too large for a float"),
    ("metric-float-conversion-raises", _m("float_raises"), "could not be made a float"),
    ("metric-float-conversion-hangs", _m("slow_float"), f"did not return within {HANG_LIMIT} s"),
    ("metric-no-such-function", _m("missing"), "has no function 'missing'"),
    ("metric-snr-is-a-target", PLAN + ["--metric", "snr"], "snr is not a task metric"),
    ("metric-snr-on-an-output", PLAN + ["--metric", "snr:y"], "snr is not a task metric"),
    ("labels-outside-the-classes", PLAN + ["--metric", "top1", "--labels", "{bad}/labels_99.npy"],
     "not classes of 'y'"),
    ("fp32-nan-everywhere", ["plan", "{bad}/nan_everywhere.onnx", "--data", "{bad}/sqrt_data", "--out", "{ws}/out",
                             "--no-progress"], "NaN or Inf in every value"),
    # degenerate data (issue 45): said as zero everywhere, not as ranges of another model
    ("plan-all-zero-data", ["plan", "{bad}/nb.onnx", "--data", "{bad}/zeros", "--out", "{ws}/out", "--no-progress"],
     "were zero on every calibration sample"),
    ("plan-all-zero-but-the-output", ["plan", "{bad}/nb_offset.onnx", "--data", "{bad}/zeros", "--out", "{ws}/out",
                                      "--no-progress"], "(x, r0, r1) were zero on every calibration sample"),
    ("export-all-zero-statistics", ["export-qdq", "{bad}/nb.onnx", "--stats", "{bad}/zero_stats.npz", "--out",
                                    "{ws}/x.onnx"], "were zero on every calibration sample"),
    ("export-all-zero-calibration", ["export-qdq", "{bad}/nb.onnx", "--calibration", "{bad}/zero_cal.npz", "--out",
                                     "{ws}/x.onnx"], "were zero on every calibration sample"),
    # a plan folder names a metric: looked up, never imported
    ("plan-json-names-venv-main", MEASURE + ["{bad}/plans/venv_main"], "'venv.__main__:x' is not registered"),
    ("plan-json-names-builtins-print", MEASURE + ["{bad}/plans/builtins_print"], "'builtins:print' is not registered"),
    ("plan-json-names-this", MEASURE + ["{bad}/plans/this_x"], "'this:x' is not registered"),
    ("plan-json-names-os-system", MEASURE + ["{bad}/plans/os_system"], "'os:system' is not registered"),
    ("plan-json-names-a-shipped-module", MEASURE + ["{bad}/plans/shipped"], "'evil_metric_32:x' is not registered"),
    ("measure-metric-not-the-plans", MEASURE + ["{bad}/plans/good", "--metric", "bad_metrics_32:raises"],
     "is not the plan's metric"),
    # held_back.npz checked before it judges
    ("check-of-another-plan", MEASURE + ["{bad}/plans/other_check"], "is not this plan's held-back check"),
    ("check-nan-references", MEASURE + ["{bad}/plans/nan_check"], "NaN or Inf in every value"),
    ("check-header-claims-1e11-floats", MEASURE + ["{bad}/plans/huge_header"], "declares 400000000000 bytes"),
    ("check-claims-50-samples-holds-2", MEASURE + ["{bad}/plans/claims_50"], "declares 50 samples but holds 2"),
    ("check-output-rows-not-the-samples", MEASURE + ["{bad}/plans/ref_rows"], "FP32's output 'y' holds 5"),
    ("check-format-2", MEASURE + ["{bad}/plans/format_2"], "format 2"),
    ("check-random-bytes", MEASURE + ["{bad}/plans/random_check"], "is not a held-back check"),
    ("check-python-objects", MEASURE + ["{bad}/plans/object_check"], "Python objects"),
    # plan export
    ("export-candidate-out-of-range", ["plan", "export", "{bad}/plans/good", "--candidate", "99", "--out",
                                       "{ws}/x.onnx"], "no candidate 99"),
    ("export-over-plan-json", ["plan", "export", "{bad}/plans/good", "--out", "{bad}/plans/good/plan.json"],
     "the run's own input"),
    ("export-into-the-plan-set", ["plan", "export", "{bad}/plans/good", "--out", "{bad}/plans/good/model.qdq.onnx"],
     "is a file of the plan folder"),
    ("export-model-gone", ["plan", "export", "{bad}/plans/no_model", "--out", "{ws}/x.onnx"], "gone.onnx"),
    ("export-model-not-the-plans", ["plan", "export", "{bad}/plans/good", "--model", "{bad}/nan_everywhere.onnx",
                                    "--out", "{ws}/x.onnx"], "plans/good/plan.json is not a plan of"),
]


def test_the_table_is_big_and_its_entries_distinct():
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES) and len({tuple(c[1]) for c in CASES}) == len(CASES)


@pytest.mark.parametrize("argv, phrase", [pytest.param(c[1], c[2], id=c[0]) for c in CASES])
def test_plan_bad_input_on_the_command_line(ws, user, capsys, argv, phrase):
    argv = fill_argv(argv, ws, user)
    before, shelf = fingerprint(user), fingerprint(ws / "bad")
    rc = run_cli(argv)
    out, err = capsys.readouterr()
    assert rc == 2, f"exit {rc}\n{err}"
    assert "Traceback" not in err + out
    assert phrase in err, err
    assert "Why:" in err and "Fix:" in err, f"the message lacks a why or a fix:\n{err}"
    assert fingerprint(user) == before, "a user file was changed"
    assert fingerprint(ws / "bad") == shelf, "a file on the shelf (an input) was changed"
    assert not (ws / "out").exists() and not (ws / "x.onnx").exists(), "something was written"
    assert not (ws / "IMPORTED").exists(), "a module a file named was imported"
    assert not any(p.is_dir() and p.name == "candidates" for p in (ws / "bad" / "plans").rglob("*"))


# ----------------------------------------------------------------------------------------------- what must work


def _plan_json(ws):
    return json.loads((ws / "out" / "plan.json").read_text())


def _work(ws, argv):
    if (ws / "out").exists():
        shutil.rmtree(ws / "out")
    rc = run_cli(fill_argv(argv, ws, ws / "user"))
    return rc


def test_a_metric_that_softmaxes_in_place_cannot_corrupt_the_reference(ws, capsys):
    """It once turned FP32's reference into probabilities: FP16 then 'missed' at cosine -0.57."""
    assert _work(ws, _m("softmax_in_place")) == 0, capsys.readouterr().err
    fp16 = _plan_json(ws)["candidates"][0]
    assert fp16["meets_target"] and fp16["accuracy"]["metric"] == fp16["accuracy"]["metric_reference"] == 1.0
    assert fp16["accuracy"]["cosine"] > 0.99


def test_an_int8_candidate_writing_nan_where_fp32_is_finite_is_not_picked(ws, tmp_path, capsys):
    """y = Sqrt(fc(x) - m): INT8 wrote NaN where FP32 is finite and the plan said cosine 0.9995 'meets'."""
    held = [{"x": np.random.default_rng(10 + i).random((1, 16), np.float32)} for i in range(4)]
    onnx.save(sqrt_model(held, 3e-3), tmp_path / "sqrt.onnx")
    _samples(tmp_path / "calib", [{"x": np.random.default_rng(i).random((1, 16), np.float32)} for i in range(12)])
    _samples(tmp_path / "held", held)
    rc = _work(ws, ["plan", str(tmp_path / "sqrt.onnx"), "--data", str(tmp_path / "calib"), "--held-back",
                    str(tmp_path / "held"), "--out", "{ws}/out", "--no-progress", "--trt-version", "10.16"])
    out = capsys.readouterr().out
    assert rc == 0
    doc = _plan_json(ws)
    int8 = doc["candidates"][1]
    assert int8["accuracy"]["non_finite"] >= 1 and not int8["meets_target"] and doc["recommended"] == 0
    assert "NaN/Inf where FP32 is finite" in out


def test_fp32s_own_nan_is_in_the_notes(ws, tmp_path, capsys):
    held = [{"x": np.random.default_rng(20 + i).random((1, 16), np.float32)} for i in range(4)]
    onnx.save(sqrt_model(held, -0.05), tmp_path / "sqrt_nan.onnx")
    _samples(tmp_path / "calib", [{"x": np.random.default_rng(i).random((1, 16), np.float32)} for i in range(12)])
    _samples(tmp_path / "held", held)
    assert _work(ws, ["plan", str(tmp_path / "sqrt_nan.onnx"), "--data", str(tmp_path / "calib"), "--held-back",
                      str(tmp_path / "held"), "--out", "{ws}/out", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "note: FP32's output 'y' holds" in out and "NaN or Inf" in out
    assert any("FP32's output 'y' holds" in n for n in _plan_json(ws)["notes"])


class _NoShapes:
    """The latency a model gets whose shapes cannot be resolved (issue 32's matting network): no layer is timed,
    so FP16's estimate is 0 us, and the Q/DQ at an INT8 part's edges cost 2 us. That network's plan ended in
    ZeroDivisionError (judge.not_worth_it: 1 / speed-up 0)."""

    kind = "oracle"  # a timing source, used as it is (the cost model's own estimates are vetted by the zoo's record)
    source = "a latency model that timed no layer"

    def estimate(self, int8_layers):
        return 2.0 if set(int8_layers) else 0.0

    def why_not_int8(self, layer):
        return None

    def gain_us(self, layer):
        return 1.0


def test_a_latency_estimate_of_zero_plans_to_fp16_and_asks_for_a_measurement(ws):
    import trtwidgets as tw

    p = tw.plan(ws / "bad" / "m.onnx", str(ws / "bad" / "data"), oracle=_NoShapes(), progress=False,
                target=tw.PlanTarget(cosine=0.5))
    assert p.recommended == 0 and "Cannot estimate" in p.reason, p.reason
    assert all(c.speedup != c.speedup for c in p.candidates[1:])  # NaN: "cannot estimate", never 0
    from trtwidgets.plots.pareto import plan_html

    assert "Cannot estimate" in plan_html(p)


def test_plan_export_writes_the_pick(ws, tmp_path, capsys):
    assert run_cli(["plan", "export", str(ws / "bad" / "plans" / "good"), "--out", str(tmp_path / "p.onnx")]) == 0
    assert (tmp_path / "p.onnx").read_bytes() == (ws / "bad" / "plans" / "good" / "model.qdq.onnx").read_bytes()


def test_a_metric_that_moves_the_working_folder_cannot_move_the_output(ws, capsys, monkeypatch):
    """Issue 45: os.chdir('/') inside the metric made a relative --out p_rel land in /p_rel."""
    monkeypatch.chdir(ws)
    for gone in (ws / "p_rel", ws / "out"):
        shutil.rmtree(gone, ignore_errors=True)
    argv = fill_argv(PLAN, ws, ws / "user")
    argv[argv.index("--out") + 1] = "p_rel"
    assert run_cli(argv + ["--metric", "bad_metrics_32:moves_the_working_folder"]) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert os.getcwd() == str(ws) and (ws / "p_rel" / "plan.json").is_file() and not os.path.exists("/p_rel")
    assert "changed the working folder (to /); it was set back" in err
    shutil.rmtree(ws / "p_rel")


def test_what_a_metric_prints_leaves_plan_json_on_standard_output(ws, capsys):
    """Issue 45: a metric's prints broke --json (the output no longer parsed)."""
    assert _work(ws, _m("prints") + ["--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["target"]["metric_spec"] == "bad_metrics_32:prints"
    assert "the metric speaks" in err and "the metric speaks" not in out


def test_tensors_zero_on_every_sample_are_named_as_such_and_the_rest_is_quantized(ws, tmp_path, capsys):
    """Issue 45: a zero input was 'not in the statistics', and plan spoke of 'the plan given' made for another model."""
    _samples(tmp_path / "zero_input", [{"x": np.zeros((1, 64, 8, 8), np.float32)} for _ in range(8)])
    bad = ws / "bad"
    assert run_cli(["calibrate", str(bad / "m.onnx"), "--data", str(tmp_path / "zero_input"), "--no-progress",
                    "--stats", str(tmp_path / "s.npz")]) == 0
    assert "1 of 10 tensors were zero on every calibration sample: x." in capsys.readouterr().err
    assert run_cli(["export-qdq", str(bad / "m.onnx"), "--stats", str(tmp_path / "s.npz"), "--out",
                    str(tmp_path / "q.onnx")]) == 0
    out = capsys.readouterr().out
    assert "conv0 [Conv] x: zero on every calibration sample: no range can be computed" in out
    assert "not in the statistics" not in out and "quantized layers    3" in out
    assert _work(ws, ["plan", str(bad / "m.onnx"), "--data", str(tmp_path / "zero_input"), "--out", "{ws}/out",
                      "--no-progress", "--batch", "32"]) == 0
    out, err = capsys.readouterr()
    assert "plan given" not in out + err and "another model" not in out + err
    assert _plan_json(ws)["ranges"]["zero"] == ["x"]
    assert run_cli(["plan", "export", str(ws / "out"), "--candidate", "1", "--out", str(tmp_path / "c1.onnx")]) == 0


# ----------------------------------------------------------------------------------------------- through the API


def _plan_with(metric):
    def call(ws, bad, user):
        import trtwidgets as tw

        return tw.plan(bad / "m.onnx", str(bad / "data"), target=tw.PlanTarget.for_metric(metric), progress=False)
    return call


def _load_edited(edit):
    def call(ws, bad, user):
        import trtwidgets as tw

        doc = json.loads((bad / "plans" / "good" / "plan.json").read_text())
        edit(doc)
        return tw.Plan.from_dict(doc)
    return call


def _register_twice(name, first, second):
    def call(ws, bad, user):
        import trtwidgets as tw
        from trtwidgets.core.accuracy.task_metrics import REGISTRY

        tw.register_metric(name, first)
        try:
            tw.register_metric(name, second)
        finally:
            REGISTRY.pop(name)
    return call


def _mine(reference, options, labels):
    from trtwidgets.core.accuracy.task_metrics import TaskMetric

    return TaskMetric(lambda outputs: 1.0, "mine")


def _theirs(reference, options, labels):
    from trtwidgets.core.accuracy.task_metrics import TaskMetric

    return TaskMetric(lambda outputs: 0.0, "theirs")


def _zero(call):
    def run(ws, bad, user):
        import trtwidgets as tw

        return call(tw, bad)
    return run


API_CASES = [
    # issue 45: all-zero data
    ("export-qdq-of-all-zero-data", _zero(lambda tw, bad: tw.export_qdq(
        bad / "nb.onnx", tw.calibrate(bad / "nb.onnx", str(bad / "zeros"), progress=False))),
     "were zero on every calibration sample"),
    ("plan-of-all-zero-data", _zero(lambda tw, bad: tw.plan(bad / "nb_offset.onnx", str(bad / "zeros"),
                                                            progress=False)), "were zero on every calibration sample"),
    # issue 45: a registered name silently went to another function
    ("register-a-name-again-with-another-factory", _register_twice("team-metric-45", _mine, _theirs),
     "is registered already"),
    ("register-a-module-function-again-with-another", _register_twice(
        "team45.metrics:score", lambda reference, candidate: 1.0, lambda reference, candidate: 0.0),
     "is registered already"),
    ("plan-metric-returns-10-to-the-400", _plan_with(lambda r, c: 10 ** 400), "too large for a float"),
    ("register-over-a-built-in", lambda ws, bad, user: __import__("trtwidgets").register_metric(
        "detection", lambda r, o, l: None), "is a built-in metric"),
    ("register-a-bad-name", lambda ws, bad, user: __import__("trtwidgets").register_metric(
        "Bad Name", lambda r, o, l: None), "is not a metric name"),
    ("for-metric-snr", lambda ws, bad, user: __import__("trtwidgets").PlanTarget.for_metric("snr"),
     "snr is not a task metric"),
    ("plan-metric-returns-a-string", _plan_with(lambda r, c: "high"), "returned 'high'"),
    ("plan-metric-exits", _plan_with(lambda r, c: sys.exit(3)), "called sys.exit(3)"),
    ("plan-json-non-finite-text", _load_edited(lambda d: d["candidates"][1]["accuracy"].update(non_finite="two")),
     "candidates[1].accuracy.non_finite"),
    ("plan-json-non-finite-negative", _load_edited(lambda d: d["candidates"][1]["accuracy"].update(non_finite=-1)),
     "a count of values"),
]


def test_a_name_registered_again_with_the_same_function_or_replace_true_is_kept(ws):
    """The refusal above must not stop a notebook cell run twice (a new function object of the same code)."""
    import trtwidgets as tw
    from trtwidgets.core.accuracy.task_metrics import REGISTRY, parse_task_metric

    ref = {"y": np.ones((2, 3), np.float32)}
    cell = "def score(reference, candidate):\n    return 0.25\n"
    made = [{}, {}]
    for scope in made:
        exec(cell, scope)
    try:
        tw.register_metric("team45.cell:score", made[0]["score"])
        tw.register_metric("team45.cell:score", made[1]["score"])  # the cell run again
        assert parse_task_metric("team45.cell:score", ref)(ref) == 0.25
        tw.register_metric("team45.cell:score", lambda reference, candidate: 0.75, replace=True)
        assert parse_task_metric("team45.cell:score", ref)(ref) == 0.75
    finally:
        REGISTRY.pop("team45.cell:score")


@pytest.mark.parametrize("call, phrase", [pytest.param(c[1], c[2], id=c[0]) for c in API_CASES])
def test_plan_bad_input_through_the_api(ws, user, call, phrase):
    from trtwidgets.core.common.errors import UserError

    before, shelf = fingerprint(user), fingerprint(ws / "bad")
    with pytest.raises(UserError) as info:
        call(ws, ws / "bad", user)
    assert info.value.what and info.value.why and info.value.fix, info.value.message
    assert phrase in info.value.message, info.value.message
    assert fingerprint(user) == before and fingerprint(ws / "bad") == shelf
