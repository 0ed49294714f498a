from __future__ import annotations

import dataclasses
import json
import os

import pytest

from trtwidgets.core.calibration.data import CalibrationDataSpec
from trtwidgets.core.common.errors import RecipeError
from trtwidgets.core.recipe import fields, validate
from trtwidgets.core.recipe.profiles import ShapeRange
from trtwidgets.core.recipe.recipe import (SCHEMA_VERSION, CalibratorSpec, LayerPrecision, Recipe, load_recipe,
                                           recipe_problems, save_recipe, validate_recipe)

from .recipe_samples import full_recipe


def test_recipe_module_names_its_parts():
    # ``from trtwidgets.core.recipe.recipe import ...`` is the documented import for every recipe name.
    assert (CalibratorSpec, LayerPrecision) == (fields.CalibratorSpec, fields.LayerPrecision)
    assert (recipe_problems, validate_recipe) == (validate.recipe_problems, validate.validate_recipe)


def test_for_model_fills_model_hash_and_profiles(demo):
    r = Recipe.for_model(demo)
    assert r.model_sha256 == demo.sha256 and os.path.samefile(r.model_path, demo.path)
    assert r.profiles[0].shapes["x"].opt == (1, 3, 48, 192)
    assert r.calibration_shapes == {"x": (1, 3, 48, 192)}
    assert r.schema_version == SCHEMA_VERSION
    validate_recipe(r, demo.summary)


def test_json_round_trip_keeps_everything(demo):
    r = full_recipe(demo)
    text = r.to_json()
    assert '"opt": [1, 3, 48, 192]' in text  # shapes stay readable
    back = Recipe.from_json(text)
    assert back == r
    assert back.calibration_data == r.calibration_data and back.calibrator.amax_overrides == {"x": 1.0}
    assert json.loads(text)["schema_version"] == SCHEMA_VERSION


def test_flags_normalised(demo):
    r = Recipe.for_model(demo, flags=["INT8", "fp16", "fp16"])
    assert r.flags == ("fp16", "int8")


def test_replace_returns_new_checked_recipe(demo):
    r = Recipe.for_model(demo)
    r2 = r.replace(flags=("fp16",))
    assert r.flags == () and r2.flags == ("fp16",)
    with pytest.raises(RecipeError, match="not one of"):
        r.replace(flags=("fp17",))
    with pytest.raises(RecipeError, match="no field 'flag'"):
        r.replace(flag=("fp16",))
    with pytest.raises(RecipeError, match="calibration profile index is 1"):
        r.replace(calibration_profile=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.flags = ("fp16",)  # frozen


def test_save_is_atomic_and_load_resolves_relative_model(tmp_path, demo):
    r = full_recipe(demo)
    path = save_recipe(r, tmp_path / "sub" / "recipe.json")
    # Every relative path is taken beside the recipe file (issue 32), never in the current folder.
    beside = str((tmp_path / "sub").resolve())
    assert load_recipe(path) == r.replace(
        calibrator=dataclasses.replace(r.calibrator, cache_path=os.path.join(beside, "calib.cache")),
        timing_cache=os.path.join(beside, "timing.cache"))
    assert [p.name for p in path.parent.iterdir()] == ["recipe.json"], "no temp file may remain"
    d = json.loads(path.read_text())
    d["model_path"] = "model.onnx"
    path.write_text(json.dumps(d))
    assert load_recipe(path).model_path == str((tmp_path / "sub" / "model.onnx").resolve())
    d["calibration_data"] = {"kind": "npy_dir", "path": "../data", "batch_size": 2}
    path.write_text(json.dumps(d))
    assert load_recipe(path).calibration_data.path == str((tmp_path / "data").resolve())


def test_save_failure_keeps_old_file(tmp_path, demo):
    path = save_recipe(Recipe.for_model(demo), tmp_path / "r.json")
    before = path.read_text()

    class Boom(Recipe):
        def to_json(self, indent=2):
            raise RuntimeError("disk full")

    bad = Boom(**{f: getattr(Recipe.for_model(demo), f) for f in Recipe.__dataclass_fields__})
    with pytest.raises(RuntimeError):
        save_recipe(bad, path)
    assert path.read_text() == before and len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("text, needle", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"model_path": "m", "model_sha256": ""}', "schema_version is None"),
    ('{"schema_version": 99, "model_path": "m", "model_sha256": ""}', "schema_version is 99"),
    ('{"schema_version": 1, "model_path": "m", "model_sha256": "", "flgs": []}', "unknown key(s) 'flgs'"),
    ('{"schema_version": 1, "model_path": "m", "model_sha256": "", "flags": "fp16"}', "flags must be a list"),
    ('{"schema_version": 1, "model_path": 3, "model_sha256": ""}', "model_path must be a string"),
    ('{"schema_version": 1, "model_path": "m", "model_sha256": "", "workspace_mib": "1G"}', "workspace_mib must be an integer"),
    ('{"schema_version": 1, "model_path": "m", "model_sha256": "", "calibrator": {"kind": "magic"}}', "'magic'"),
    ('{"schema_version": 1, "model_path": "m", "model_sha256": "", "calibrator": {"kind": "none", "x": 1}}', "unknown key(s) 'x'"),
    ('{"schema_version": 1, "model_path": "m", "model_sha256": "", "layer_precisions": [{"pattern": "(", "precision": "fp32", "regex": true}]}',
     "does not compile"),
    ('{"schema_version": 1, "model_path": "m", "model_sha256": "", "layer_precisions": [{"pattern": "a", "precision": "int4"}]}',
     "'int4'"),
    ('{"schema_version": 1, "model_path": "m", "model_sha256": "", "profiles": [{"shapes": {"x": {"min": [1], "opt": [1]}}}]}',
     "missing keys ['max']"),
    ('{"schema_version": 1, "model_path": "m", "model_sha256": "", "calibration_data": {"kind": "weird"}}',
     "calibration_data could not be read"),
])
def test_load_rejects_bad_files_clearly(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert needle in info.value.message


def test_load_missing_file(tmp_path):
    with pytest.raises(RecipeError, match="No recipe at"):
        load_recipe(tmp_path / "nope.json")


def test_recipe_cannot_be_mutated_through_its_containers(demo):
    r = full_recipe(demo)
    before = r.to_json()
    with pytest.raises(TypeError):
        r.profiles[0].shapes["y"] = ShapeRange((1,), (1,), (1,))
    with pytest.raises(TypeError):
        r.calibrator.amax_overrides["x"] = 5.0
    with pytest.raises(TypeError):
        r.calibrator.amax_overrides["new"] = 5.0
    assert r.to_json() == before


def test_recipe_equality_hash_and_copies(demo):
    import copy
    import pickle

    r = Recipe.for_model(demo, flags=("int8",), calibrator=CalibratorSpec(kind="toolkit", method="max", amax_overrides={"x": 2.0}))
    twin = Recipe.from_json(r.to_json())
    assert twin == r and hash(twin) == hash(r)
    assert r.replace(calibrator=CalibratorSpec(kind="toolkit", method="max", amax_overrides={"x": 3.0})) != r
    for c in (copy.copy(r), copy.deepcopy(r), pickle.loads(pickle.dumps(r))):
        assert c == r and c.to_json() == r.to_json()


def test_calibration_data_spec_is_read_only_and_round_trips(demo):
    import copy
    import pickle

    pre = {"input": "x", "resize": [48, 192], "layout": "NCHW", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}
    adapt = {"x": "pad"}
    spec = CalibrationDataSpec(kind="image_dir", path="/data", preprocessing=pre, adapt=adapt,
                               opt_shapes={"x": [1, 3, 48, 192]})
    pre["mean"][0] = 0.0
    adapt["x"] = "resize"
    assert spec.preprocessing["mean"][0] == 0.5 and spec.adapt["x"] == "pad", "the spec owns copies"
    with pytest.raises(TypeError):
        spec.adapt["x"] = "truncate"
    with pytest.raises(TypeError):
        spec.opt_shapes["x"] = [2, 3, 48, 192]
    with pytest.raises(TypeError):
        spec.preprocessing["scale"] = 1.0
    with pytest.raises((TypeError, AttributeError)):
        spec.preprocessing["mean"][0] = 1.0
    with pytest.raises((TypeError, AttributeError)):
        spec.opt_shapes["x"][0] = 2
    assert spec.to_dict()["preprocessing"]["mean"] == [0.5, 0.5, 0.5]
    assert CalibrationDataSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    r = full_recipe(demo).replace(calibration_data=CalibrationDataSpec(kind="demo", adapt={"x": "pad"},
                                                                     opt_shapes={"x": [1, 3, 48, 192]}))
    assert hash(Recipe.from_json(r.to_json())) == hash(r)
    for c in (copy.deepcopy(r), pickle.loads(pickle.dumps(r))):
        assert c == r
