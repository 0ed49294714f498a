from __future__ import annotations

import pytest

from tests.core.recipe_models import summary_of, two_input_model
from trtwidgets.core.common.errors import RecipeError
from trtwidgets.core.model.load import load_model
from trtwidgets.core.recipe.profiles import ShapeRange
from trtwidgets.core.recipe.recipe import Recipe
from trtwidgets.widgets.profiles import ProfileEditor


@pytest.fixture(scope="module")
def demo():
    from trtwidgets import demo as demo_pkg

    return load_model(demo_pkg.MODEL_PATH)


def test_prefilled_from_model_and_warns_about_opt(demo):
    ed = ProfileEditor(demo.summary)
    x = ed.fields[0]["x"]
    assert (x["min"].value, x["opt"].value, x["max"].value) == ("1x3x48x192", "1x3x48x192", "1x3x48x192")
    assert "calibration runs at the opt shapes of profile 0: x 1x3x48x192" in ed.calibration_warning.value
    assert "fit the model" in ed.message.value and ed.problems == []
    r = ed.to_recipe(Recipe.for_model(demo))
    assert r.profiles[0].shapes["x"].opt == (1, 3, 48, 192)


def test_prefilled_from_data_shapes(demo):
    ed = ProfileEditor(demo.summary, data_shapes={"x": [(8, 3, 48, 192), (8, 3, 48, 320)]})
    assert ed.fields[0]["x"]["max"].value == "8x3x48x320"


def test_bad_edit_names_input_and_dimension(demo):
    ed = ProfileEditor(demo.summary)
    ed.fields[0]["x"]["opt"].value = "1x3x64x192"
    assert ed.problems == ["profile 0: input 'x' dimension 2 (H): opt 64 is outside [min, max] = [48, 48]."]
    assert "dimension 2" in ed.message.value and "trtw-error" in ed.message.value
    with pytest.raises(RecipeError, match="input 'x' dimension 2"):
        _ = ed.value
    ed.fields[0]["x"]["max"].value = "4x3x64x256"
    assert ed.problems == []
    assert ed.value["profiles"][0].shapes["x"] == ShapeRange((1, 3, 48, 192), (1, 3, 64, 192), (4, 3, 64, 256))


def test_unparsable_text_is_named(demo):
    ed = ProfileEditor(demo.summary)
    ed.fields[0]["x"]["min"].value = "1x3xHx192"
    assert ed.problems[0].startswith("The profile 0: input 'x' min shape '1x3xHx192': dimension 2 is 'H'")


def test_several_profiles_and_calibration_profile():
    summary = summary_of(two_input_model())
    ed = ProfileEditor(summary, data_shapes={"x": (2, 3, 32, 32), "mask": (2, 16)})
    ed.add_profile()
    assert len(ed.fields) == 2 and len(ed.profiles_box.children) == 2
    ed.fields[1]["x"]["opt"].value = "2x3x64x64"
    ed.fields[1]["x"]["max"].value = "2x3x64x64"
    ed.calibration_select.value = 1
    assert "profile 1: x 2x3x64x64" in ed.calibration_warning.value
    value = ed.value
    assert value["calibration_profile"] == 1 and len(value["profiles"]) == 2
    ed.fields[1]["mask"]["opt"].value = "2x17"
    assert any("input 'mask' dimension 1 is static (16)" in p for p in ed.problems)
    ed.remove_profile()
    assert len(ed.fields) == 1 and ed.calibration_select.value == 0 and ed.problems == []


def test_static_model_needs_no_profile():
    ed = ProfileEditor(summary_of(two_input_model((1, 3, 8, 8), (1, 16))))
    assert ed.value == {"profiles": (), "calibration_profile": 0}
    assert "no profile" in ed.children[0].value


def test_model_names_are_escaped():
    evil = "<img src=x onerror=alert(1)>"
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info(evil, TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", [evil], ["y"])], "g", [x], [y]))
    ed = ProfileEditor(summary_of(model))
    html = "".join(w.value for box in ed.profiles_box.children for row in box.children
                   for w in getattr(row, "children", [row]) if hasattr(w, "value") and isinstance(w.value, str))
    html += ed.calibration_warning.value + ed.message.value
    assert "<img" not in html and "&lt;img" in html
