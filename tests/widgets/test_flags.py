"""FlagsPicker and CalibratorPicker against the features of real TensorRT 10.16 / 11.4 modules and without TensorRT."""

from __future__ import annotations

import pytest

from tests.trtapi.stubs import local_features86, real_features
from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe, validate_recipe
from trtwidgets.trt.features import TrtFeatures, features_unavailable
from trtwidgets.widgets.calibrator import CalibratorPicker
from trtwidgets.widgets.flags import FlagsPicker

SHA = "0" * 64


def recipe(**kw) -> Recipe:
    return Recipe(model_path="m.onnx", model_sha256=SHA, **kw)


@pytest.fixture(scope="module")
def f10() -> TrtFeatures:
    return TrtFeatures.from_dict(real_features("10"))


@pytest.fixture(scope="module")
def f11() -> TrtFeatures:
    return TrtFeatures.from_dict(real_features("11"))


@pytest.mark.trtapi
def test_flags_picker_11_offers_no_weak_typing_flags_and_explains(f11):
    picker = FlagsPicker(f11)
    assert picker.offered_flags == ("tf32",)
    assert "fp16" not in picker.checkboxes and "int8" not in picker.checkboxes
    assert picker.constraints.disabled and picker.constraints.value == "none"
    note = picker.note.value
    assert "precision comes from the model" in note and "Q/DQ" in note and "cast the ONNX model" in note
    assert "always strongly typed" in picker.header.value
    picker.checkboxes["tf32"].value = True
    assert picker.value == {"flags": ("tf32",), "precision_constraints": "none"}
    r = picker.to_recipe(recipe())
    assert r.flags == ("tf32",)
    validate_recipe(r, None, f11)


@pytest.mark.trtapi
def test_flags_picker_11_warns_about_a_recipe_it_cannot_honour(f11):
    picker = FlagsPicker(f11, recipe=recipe(flags=("fp16", "int8"), precision_constraints="obey"))
    assert picker.value["flags"] == ()
    assert "fp16" in picker.warning.value and "int8" in picker.warning.value and "constraints=obey" in picker.warning.value


@pytest.mark.trtapi
def test_flags_picker_10_offers_all_and_marks_deprecation(f10):
    picker = FlagsPicker(f10, recipe=recipe(flags=("int8", "fp16"), precision_constraints="prefer"))
    assert picker.offered_flags == ("fp16", "bf16", "int8", "fp8", "tf32")
    assert [v for _, v in picker.constraints.options] == ["none", "obey", "prefer"]
    assert picker.value == {"flags": ("fp16", "int8"), "precision_constraints": "prefer"}
    assert "deprecated since TensorRT 10.12" in picker.note.value
    assert picker.warning.value == ""
    seen = []
    picker.on_change(lambda p: seen.append(p.value["flags"]))
    picker.checkboxes["bf16"].value = True
    assert seen == [("fp16", "bf16", "int8")]


@pytest.mark.trtapi
def test_calibrator_picker_11_offers_none_and_explains(f11):
    picker = CalibratorPicker(f11)
    assert picker.offered == ("none",)
    assert "Q/DQ" in picker.note.value and "no INT8 calibrators" in picker.note.value
    assert picker.value == {"calibrator": CalibratorSpec()}
    picker2 = CalibratorPicker(f11, recipe=recipe(flags=(), calibrator=CalibratorSpec(kind="trt_entropy2")))
    assert picker2.choice.value == "none" and "trt_entropy2" in picker2.error.value


@pytest.mark.trtapi
def test_calibrator_picker_10(f10):
    picker = CalibratorPicker(f10)
    assert picker.offered[:5] == ("none", "trt_entropy2", "trt_minmax", "trt_entropy", "trt_legacy")
    assert "toolkit:percentile" in picker.offered and "toolkit:cache" in picker.offered
    assert "(deprecated)" in picker.choice.options[1][0]
    picker.choice.value = "toolkit:percentile"
    assert picker.percentile.layout.display == ""
    picker.percentile.value = 99.9
    picker.cache_path.value = "out/calib.cache"
    spec = picker.value["calibrator"]
    assert (spec.kind, spec.method, spec.percentile, spec.cache_path) == ("toolkit", "percentile", 99.9, "out/calib.cache")
    picker.choice.value = "toolkit:cache"
    picker.cache_path.value = ""
    assert "neither a range method nor a calibration cache" in picker.error.value
    picker.choice.value = "trt_minmax"
    assert picker.percentile.layout.display == "none" and picker.error.value == ""
    assert picker.to_recipe(recipe(flags=("int8",))).calibrator.kind == "trt_minmax"


def test_without_tensorrt_pickers_offer_tensorrt_10_choices_and_say_what_to_install():
    f = features_unavailable("No module named 'tensorrt'")
    flags = FlagsPicker(f)
    assert flags.offered_flags == ("fp16", "bf16", "int8", "fp8", "tf32")
    assert "TensorRT is not installed" in flags.note.value and "pip install" in flags.note.value
    cal = CalibratorPicker(f)
    assert "trt_entropy2" in cal.offered and "TensorRT is not installed" in cal.note.value


def test_round_trip_recipe_through_pickers():
    f = features_unavailable()
    r = recipe(flags=("fp16", "int8"), precision_constraints="obey",
               calibrator=CalibratorSpec(kind="toolkit", method="mse", cache_path="c.cache", amax_overrides={"t": 2.0}))
    out = CalibratorPicker(f, recipe=r).to_recipe(FlagsPicker(f, recipe=r).to_recipe(recipe()))
    assert out == r


@pytest.mark.trtapi
def test_pickers_on_local_tensorrt_8_6():
    d = local_features86()
    if d is None:
        pytest.skip("no local Python 3.9 + TensorRT 8.6 bundle")
    f = TrtFeatures.from_dict(d)
    flags = FlagsPicker(f)
    assert "bf16" not in flags.offered_flags and {"fp16", "int8", "tf32"} <= set(flags.offered_flags)
    assert "TensorRT 9" in flags.note.value and "Deprecated" not in flags.note.value
    cal = CalibratorPicker(f)
    assert "(deprecated)" not in cal.choice.options[1][0] and "trt_legacy" in cal.offered
