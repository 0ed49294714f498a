"""``trtwidgets run`` takes open profile dims from the calibration data, as the app does (issue 15)."""

from __future__ import annotations

import json

from tests.own_models import dynamic_hw_model, image_samples, save
from trtwidgets.cli import main
from trtwidgets.core.model.load import load_model
from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe, save_recipe


def test_a_recipe_with_the_placeholder_profile_calibrates_at_the_datas_shape(tmp_path, capsys):
    model = load_model(save(dynamic_hw_model(), tmp_path / "detector.onnx"))
    data = image_samples(tmp_path / "samples", n=3, sizes=[(64, 96)])
    recipe = Recipe.for_model(model, flags=("fp16", "int8"), calibrator=CalibratorSpec(kind="toolkit", method="entropy"))
    assert recipe.calibration_shapes == {"x": (1, 3, 1, 1)}  # what an all-dynamic model gets without data
    path = save_recipe(recipe, tmp_path / "recipe.json")
    out = tmp_path / "report.html"
    rc = main(["run", str(path), "--report", str(out), "--data", str(data)])
    printed = capsys.readouterr().out
    assert rc in (0, 1), printed
    assert "profiles" in printed and "opt 1x3x64x96" in printed and "3 samples" in printed
    assert "opt 1x3x64x96 is the calibration data&#x27;s shape" in out.read_text() or \
        "opt 1x3x64x96 is the calibration data's shape" in out.read_text()
    assert json.loads(path.read_text())["profiles"][0]["shapes"]["x"]["opt"] == [1, 3, 1, 1]  # the file is not rewritten
