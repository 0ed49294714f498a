"""Bad input in the App's widgets (issue 16): typed into a box and acted on as the button would, each shows
the error panel with what, why and fix (no traceback), and the session keeps its model, recipe, statistics
and builds; the user's files are unchanged."""

from __future__ import annotations

import re

import pytest

from .workspace import FIXTURES, MODEL, fingerprint, make_bad_inputs, make_user_files

PRE_DATA = "{bad}/data_images"

#: (id, box, text, action): type ``text`` into ``box`` of the app, then call ``action`` (what its button does).
CASES = [
    ("model-missing", "load_step.loader.path", "{ws}/missing.onnx", "load"),
    ("model-folder", "load_step.loader.path", "{bad}/folder.onnx", "load"),
    ("model-random-bytes", "load_step.loader.path", "{bad}/random.onnx", "load"),
    ("model-truncated", "load_step.loader.path", "{bad}/truncated.onnx", "load"),
    ("model-unknown-home", "load_step.loader.path", "~no_such_user_16/m.onnx", "load"),
    ("data-missing", "calibrate_step.data_path", "{ws}/nowhere", "calibrate"),
    ("data-empty-folder", "calibrate_step.data_path", "{bad}/data_empty", "calibrate"),
    ("data-pickled", "calibrate_step.data_path", "{bad}/data_pickled", "calibrate"),
    ("data-all-nan", "calibrate_step.data_path", "{bad}/data_nan", "calibrate"),
    ("data-float64", "calibrate_step.data_path", "{bad}/data_float64", "calibrate"),
    ("data-corrupt-npz", "calibrate_step.data_path", "{bad}/data_corrupt_npz", "calibrate"),
    ("data-images-without-preprocessing", "calibrate_step.data_path", "{bad}/data_images", "calibrate"),
    ("recipe-missing", "load_step.recipe_path", "{ws}/none.json", "load_recipe"),
    ("recipe-not-json", "load_step.recipe_path", "{bad}/not_json.recipe.json", "load_recipe"),
    ("recipe-empty-object", "load_step.recipe_path", "{bad}/empty_object.recipe.json", "load_recipe"),
    ("recipe-zero-shape", "load_step.recipe_path", "{bad}/zero_shape.recipe.json", "load_recipe"),
    ("recipe-save-under-a-file", "load_step.recipe_path", "{user}/old.cache/recipe.json", "save_recipe"),
    ("build-missing", "build_step.saved_path", "{ws}/no-build", "load_saved_build"),
    ("build-binary-json", "build_step.saved_path", "{bad}/binary.graph.json", "load_saved_build"),
    ("build-names-only", "build_step.saved_path", "{bad}/names_only.graph.json", "load_saved_build"),
    ("build-bindings-not-a-list", "build_step.saved_path", "{bad}/bindings.graph.json", "load_saved_build"),
]


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_widgets_ws")
    make_bad_inputs(root / "bad")
    make_user_files(root / "user")
    return root


@pytest.fixture(scope="module")
def app(ws):
    from trtwidgets.widgets import App

    app = App(model_path=MODEL, out_dir=str(ws / "out"))
    assert app.calibrate(max_samples=2, progress=False)
    assert app.load_saved_build(str(FIXTURES / "trt86" / "cls_static_fp16"))  # a build of this model
    return app


def _panel_text(app) -> str:
    html = app.error.value + app.load_step.loader.error.value
    return re.sub(r"<[^>]+>", " ", html)


def test_the_table_is_big_enough():
    assert len(CASES) >= 20 and len({c[0] for c in CASES}) == len(CASES)


#: Found by this table in code owned by the widgets' author; strict, so the fix must remove the mark.
KNOWN: dict = {}


def _param(case):
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[case[0]])] if case[0] in KNOWN else []
    return pytest.param(*case[1:], id=case[0], marks=marks)


@pytest.mark.parametrize("box, text, action", [_param(c) for c in CASES])
def test_bad_input_in_the_app(app, ws, box, text, action):
    s = app.session
    user = ws / "user"
    before = fingerprint(user)
    kept = (s.model, s.recipe, s.stats, s.ranges, s.builds)
    text = text.replace("{bad}", str(ws / "bad")).replace("{ws}", str(ws)).replace("{user}", str(user))
    widget = app
    for part in box.split("."):
        widget = getattr(widget, part)
    try:
        widget.value = text
        ok = getattr(app, action)(progress=False) if action == "calibrate" else getattr(app, action)()
    finally:
        for step in app.steps.values():
            step.quiet = True
        try:  # back to the good state's boxes for the next case
            app.calibrate_step.data_path.value = "demo"
            app.load_step.loader.path.value = str(MODEL)
            app.load_step.recipe_path.value = ""
            app.build_step.saved_path.value = ""
        finally:
            for step in app.steps.values():
                step.quiet = False
    panel = _panel_text(app)
    assert not ok, "bad input was accepted"
    assert "trtw-error" in app.error.value + app.load_step.loader.error.value, "no error panel"
    assert "Why:" in panel and "Fix:" in panel, f"the panel lacks a why or a fix: {panel}"
    assert "Traceback" not in panel
    assert (s.model, s.recipe, s.stats, s.ranges, s.builds) == kept, "the session lost something it had"
    assert fingerprint(user) == before
    app.error.value = ""
    s.error = ""
