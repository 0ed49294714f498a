"""The flat, lazy top-level API: ``trtwidgets.load``, ``lint``, ``calibrate`` ... ``App``, ``Recipe``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import trtwidgets
from tests.conftest import ROOT
from tests.own_models import dynamic_hw_model, image_samples, save

HEAVY = ("onnx", "numpy", "pandas", "ipywidgets", "plotly", "onnxruntime", "tensorrt", "traitlets")


def test_import_is_cheap():
    # A fresh interpreter: this process has long imported everything.
    code = ("import sys, json, trtwidgets; "
            f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout) == []


def test_every_step_is_listed_and_resolves():
    assert trtwidgets.__all__[:19] == ["load", "lint", "calibrate", "Calibration", "export_qdq", "plan",
                                       "export_plan", "build", "layers", "inspect", "compare", "App", "Recipe",
                                       "QdqOptions", "Target", "PlanTarget", "Plan", "share", "register_metric"]
    assert set(trtwidgets.__all__) <= set(dir(trtwidgets))
    for name in [n for n in trtwidgets.__all__ if n != "plan"]:  # plan: see test_plan_is_the_planner
        assert callable(getattr(trtwidgets, name)), name
    from trtwidgets.core.calibration.calibration import Calibration
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import Recipe

    assert trtwidgets.load is load_model and trtwidgets.Recipe is Recipe and trtwidgets.Calibration is Calibration
    # tw.layers: the layer table without shadowing the standard library's inspect in user code.
    assert trtwidgets.layers is trtwidgets.inspect


def test_the_errors_are_exported():
    # ``except tw.UserError`` catches what every step raises; each kind is there under its own name.
    from trtwidgets.core.common import errors

    names = trtwidgets.__all__
    kinds = names[names.index("UserError"):]  # the errors come last, the family's root first
    assert len(kinds) == len(set(kinds)) and len(kinds) >= 10
    for name in kinds:
        cls = getattr(trtwidgets, name)
        assert isinstance(cls, type) and issubclass(cls, trtwidgets.UserError) and cls.__name__ == name, name
    public = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, errors.UserError)}
    assert public <= set(kinds)
    with pytest.raises(trtwidgets.UserError):
        trtwidgets.load("no/such/model.onnx")


def test_every_lazy_name_is_imported_for_type_checkers():
    # Editors and mypy see the real signatures: each _LAZY name is imported, as itself, under TYPE_CHECKING.
    import ast

    tree = ast.parse((ROOT / "trtwidgets" / "__init__.py").read_text(encoding="utf-8"))
    lazy = next(n.value for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "_LAZY")
    wanted = {ast.literal_eval(k): tuple(ast.literal_eval(v)) for k, v in zip(lazy.keys, lazy.values)}
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    typed = {a.asname: (imp.module, a.name) for imp in block.body for a in imp.names}
    assert typed == wanted
    assert set(wanted) == set(trtwidgets.__all__)


def test_the_public_export_is_the_calibration_export():
    # One export_qdq: the public name is the core function (build_qdq takes a QdqSpec: amax, nodes, options).
    from trtwidgets.core.qdq import export

    assert trtwidgets.export_qdq is export.export_qdq and not hasattr(export, "qdq_model")
    assert trtwidgets.QdqOptions().dense_int8 is True and trtwidgets.PlanTarget().cosine == 0.99
    assert trtwidgets.Target is trtwidgets.PlanTarget  # one target: the planner's name for it stays
    from trtwidgets.core.plan.plan_artifact import Plan

    assert trtwidgets.Plan is Plan and callable(trtwidgets.Plan.load)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'calibrat'"):
        trtwidgets.calibrat  # noqa: B018


def test_build_does_not_import_tensorrt_until_called():
    code = "import sys, trtwidgets; trtwidgets.build; print('tensorrt' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_build_without_tensorrt_is_the_clear_error(tmp_path):
    from trtwidgets.core.common.errors import TensorRTUnavailable
    from trtwidgets import trt

    if trt.available():
        pytest.skip("TensorRT is installed here")
    from trtwidgets import demo

    model = trtwidgets.load(demo.MODEL_PATH)
    with pytest.raises(TensorRTUnavailable) as info:
        trtwidgets.build(trtwidgets.Recipe.for_model(model), out_dir=tmp_path / "b", progress=False)
    assert "TensorRT" in str(info.value)


def test_the_steps_read_like_the_notebook(tmp_path):
    # A user's own model: every dim dynamic; the data decide the shapes.
    path = save(dynamic_hw_model(), tmp_path / "det.onnx")
    data = image_samples(tmp_path / "samples", n=4, sizes=[(64, 96)])
    model = trtwidgets.load(path)
    assert not [f for f in trtwidgets.lint(model) if f.severity == "error"]
    cal = trtwidgets.calibrate(model, data, progress=False)
    assert cal.stats.samples == 4 and "stem.relu" in cal.ranges
    out = trtwidgets.export_qdq(model, cal, tmp_path / "det.qdq.onnx")
    # auto (the default): each tensor's method from its statistics and role, counted in the description.
    assert (tmp_path / "det.qdq.onnx").is_file() and out.report.ranges.startswith("auto ranges from the calib")
    assert cal.method == "auto" and set(cal.choices) == set(cal.ranges)
    # The calibration travels as one file (laptop -> GPU machine) and exports the same scales from there.
    again = trtwidgets.Calibration.load(cal.save(tmp_path / "cal.npz"))
    assert again.amax == cal.amax and again.fingerprint == cal.fingerprint and len(repr(again)) < 2000
    twin = trtwidgets.export_qdq(path, tmp_path / "cal.npz")
    assert [(a.tensor, a.scale) for a in twin.report.activations] == [(a.tensor, a.scale)
                                                                       for a in out.report.activations]


def test_inspect_and_compare_a_saved_build():
    from trtwidgets.core.engine.saved_build import find_saved_builds

    builds = find_saved_builds()
    table = trtwidgets.inspect(builds["cls_static_int8_entropy2"])
    assert len(table) > 10 and {"precision", "why_not_int8"} <= set(table.columns)
    comparison = trtwidgets.compare({k: builds[k] for k in ("cls_static_fp16", "cls_static_int8_entropy2")})
    assert list(comparison.labels) == ["cls_static_fp16", "cls_static_int8_entropy2"]


def test_plan_is_the_planner():
    # The core planner, through trtwidgets/plan_api.py (which turns measure=True into TensorRT's source).
    from trtwidgets.core.plan import planner
    from trtwidgets import plan_api

    assert trtwidgets.plan is plan_api.plan and trtwidgets.plan.__wrapped__ is planner.plan


def test_calibrate_samples_of_several_sizes_needs_and_takes_an_adaptation(tmp_path):
    from trtwidgets.core.common.errors import CalibrationDataError

    model = trtwidgets.load(save(dynamic_hw_model(), tmp_path / "det.onnx"))
    data = image_samples(tmp_path / "mixed", n=4, sizes=[(64, 96), (80, 80)])
    with pytest.raises(CalibrationDataError, match="differs from the calibration opt shape"):
        trtwidgets.calibrate(model, data, progress=False)
    assert trtwidgets.calibrate(model, data, adapt={"x": "resize"}, progress=False).stats.samples == 4
