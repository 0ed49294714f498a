"""Bad input of issue 22 that gave tracebacks, late failures, raw terminal escapes or misleading messages.

Three tables, as in the other files here (CLI, Python API, the App's widgets): each entry must end in exit 2
or a UserError with what, why and fix, no traceback, quickly, leaving the user's files unchanged and nothing
new behind. The CLI entries also check that no raw control character reaches the terminal. Further tests
cover what exits 0 but used to print badly: names holding ANSI escapes, a terminal that cannot print ``×``,
a model input without a shape, and the HTML pages (report, plan.html) against markup in names.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest


from .hostile_models import ANSI, cycle_model, demo_without_shape, huge_dim_model, no_input_model
from .workspace import FIXTURES, MODEL, fingerprint, make_user_files, fill_argv, run_cli, assert_api_refusal, fresh_user_files

M = str(MODEL)
STATS = str(FIXTURES / "calib" / "cls_demo_stats.npz")
TINY = FIXTURES / "trt86" / "tiny" / "fp32"
RECIPE = json.loads((FIXTURES / "trt86" / "cls_static_int8_entropy2" / "recipe.json").read_text())
DEEP = 200_000
#: Raw control characters: none may reach the terminal (tab and newline are text).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")


def _graph(**change) -> dict:
    doc = json.loads((TINY / "engine.graph.json").read_text(), strict=False)
    doc["Layers"][0].update(change)
    return doc


def make_hostile_inputs(bad: Path) -> None:
    """One file or folder per case of issue 22 (names say what is wrong)."""
    bad.mkdir(parents=True)
    deep = "[" * DEEP + "]" * DEEP
    (bad / "deep.recipe.json").write_text(deep)
    (bad / "deep_field.recipe.json").write_text(json.dumps(dict(RECIPE, flags="HOLE")).replace('"HOLE"', deep))
    (bad / "huge_path.recipe.json").write_text(json.dumps(dict(RECIPE, model_path="m" * 100_000_000)))
    (bad / "long_path.recipe.json").write_text(json.dumps(dict(RECIPE, model_path="m" * 5000)))
    (bad / "nul_path.recipe.json").write_text(json.dumps(dict(RECIPE, model_path=M + "\x00.onnx")))
    (bad / "ansi_key.recipe.json").write_text(json.dumps(dict(RECIPE, **{f"flags{ANSI}": ["fp16"]})))
    (bad / "deep.graph.json").write_text('{"Layers": ' + deep + "}")
    (bad / "deep_bindings.graph.json").write_text(
        json.dumps(dict(_graph(), Bindings="HOLE")).replace('"HOLE"', "[" * 5000 + "]" * 5000))
    inputs = _graph()["Layers"][0]["Inputs"]
    (bad / "inf_dims.graph.json").write_text(json.dumps(_graph(Inputs=[dict(inputs[0], Dimensions=[1, 3, "INF"])]))
                                             .replace('"INF"', "1e400"))
    (bad / "nan_dims.graph.json").write_text(json.dumps(_graph(Inputs=[dict(inputs[0], Dimensions=[1, float("nan")])])))
    (bad / "int_overflow_dims.graph.json").write_text(
        json.dumps(_graph(Inputs=[dict(inputs[0], Dimensions=[1, 10**30])])))
    # Saved builds whose inspector JSON or side files are damaged.
    for name, graph in (("build_deep", deep), ("build_inf", (bad / "inf_dims.graph.json").read_text())):
        d = bad / name
        d.mkdir()
        (d / "engine.graph.json").write_text(graph if name == "build_inf" else '{"Layers": ' + deep + "}")
    d = bad / "build_deep_recipe"
    d.mkdir()
    (d / "engine.graph.json").write_text((TINY / "engine.graph.json").read_text())
    (d / "recipe.json").write_text(deep)
    d = bad / "build_deep_timings"
    d.mkdir()
    (d / "engine.graph.json").write_text((TINY / "engine.graph.json").read_text())
    (d / "timings.json").write_text(deep)
    (bad / "deep_network_layers.json").write_text(deep)
    # A recipe in a folder with a broken *.graph.json beside it (run inspects that folder's build).
    d = bad / "beside"
    d.mkdir()
    (d / "recipe.json").write_text(json.dumps(dict(RECIPE, model_path=M)))
    (d / "engine.graph.json").write_text((bad / "inf_dims.graph.json").read_text())
    # Plans.
    (bad / "deep_plan").mkdir()
    (bad / "deep_plan" / "plan.json").write_text('{"candidates": ' + deep + ', "recommended": 0}')
    with open(bad / "huge_plan.json", "wb") as f:  # sparse: refused from its size, never read
        f.truncate((64 << 20) + 1)
    # Models.
    for name, model in (("no_inputs", no_input_model()), ("cycle", cycle_model()), ("huge_dim", huge_dim_model()),
                        ("output_no_shape", demo_without_shape("output")),
                        ("input_no_shape", demo_without_shape("input"))):
        onnx.save(model, str(bad / f"{name}.onnx"))
    notype = onnx.load(M)
    notype.graph.output[0].ClearField("type")
    onnx.save(notype, str(bad / "output_no_type.onnx"))


CAL = ["calibrate", M, "--no-progress", "--data", "demo"]
RUN = ["run", "{user}/recipe.json", "--report", "{ws}/rep.html", "--max-samples", "2"]
QDQ = ["--stats", STATS, "--out", "{ws}/q.onnx"]

#: (id, argv with {bad}/{user}/{ws} placeholders, a phrase the message must hold)
CLI_CASES = [
    # recipes: deep, huge, long paths (tracebacks: RecursionError, OSError 'File name too long')
    ("run-recipe-nested-200k", ["run", "{bad}/deep.recipe.json", "--report", "{ws}/rep.html"], "200,000 levels deep"),
    ("run-recipe-deep-field", ["run", "{bad}/deep_field.recipe.json", "--report", "{ws}/rep.html"], "levels deep"),
    ("build-recipe-nested-200k", ["build", "{bad}/deep.recipe.json", "--out", "{ws}/b"], "levels deep"),
    ("run-recipe-100mb-model-path", ["run", "{bad}/huge_path.recipe.json", "--report", "{ws}/rep.html"],
     "larger than any recipe"),
    ("build-recipe-100mb-model-path", ["build", "{bad}/huge_path.recipe.json", "--out", "{ws}/b"], "larger than any"),
    ("run-recipe-5000-char-model-path", ["run", "{bad}/long_path.recipe.json", "--report", "{ws}/rep.html"],
     "5,000 characters"),
    ("run-recipe-nul-in-model-path", ["run", "{bad}/nul_path.recipe.json", "--report", "{ws}/rep.html"], "NUL"),
    ("run-recipe-ansi-key", ["run", "{bad}/ansi_key.recipe.json", "--report", "{ws}/rep.html"], "unknown key"),
    # inspect: deep JSON and impossible dims (RecursionError, OverflowError)
    ("inspect-nested-200k", ["inspect", "{bad}/deep.graph.json", "--csv", "{user}/layers.csv"], "levels deep"),
    ("inspect-deep-bindings", ["inspect", "{bad}/deep_bindings.graph.json"], "levels deep"),
    ("inspect-dims-1e400", ["inspect", "{bad}/inf_dims.graph.json", "--csv", "{user}/layers.csv"], "dimension of inf"),
    ("inspect-dims-nan", ["inspect", "{bad}/nan_dims.graph.json"], "dimension of nan"),
    ("inspect-dims-beyond-int64", ["inspect", "{bad}/int_overflow_dims.graph.json"], "dimension of"),
    ("inspect-build-folder-nested", ["inspect", "{bad}/build_deep"], "levels deep"),
    ("inspect-build-folder-deep-timings", ["inspect", "{bad}/build_deep_timings"], "levels deep"),
    # run checks every input before calibrating (it used to fail after, with a traceback and no report)
    ("run-graph-nested-200k", RUN + ["--graph", "{bad}/deep.graph.json"], "levels deep"),
    ("run-graph-dims-1e400", RUN + ["--graph", "{bad}/inf_dims.graph.json"], "dimension of inf"),
    ("run-graph-folder-nested", RUN + ["--graph", "{bad}/build_deep"], "levels deep"),
    ("run-graph-folder-deep-recipe", RUN + ["--graph", "{bad}/build_deep_recipe"], "levels deep"),
    ("run-graph-folder-deep-timings", RUN + ["--graph", "{bad}/build_deep_timings"], "levels deep"),
    ("run-graph-beside-the-recipe", ["run", "{bad}/beside/recipe.json", "--report", "{ws}/rep.html",
                                     "--max-samples", "2"], "dimension of inf"),
    ("run-top-negative", RUN + ["--top", "-1"], "negative"),
    # misleading messages
    ("qdq-output-without-shape", ["export-qdq", "{bad}/output_no_shape.onnx"] + QDQ, "does not pass onnx.checker"),
    ("qdq-output-without-type", ["export-qdq", "{bad}/output_no_type.onnx"] + QDQ, "does not pass onnx.checker"),
    ("qdq-input-without-shape", ["export-qdq", "{bad}/input_no_shape.onnx"] + QDQ, "does not pass onnx.checker"),
    ("calibrate-no-inputs", ["calibrate", "{bad}/no_inputs.onnx", "--no-progress", "--data", "demo",
                             "--cache", "{user}/old.cache"], "has no inputs"),
    ("calibrate-no-inputs-npy-data", ["calibrate", "{bad}/no_inputs.onnx", "--no-progress", "--data",
                                      str(FIXTURES / "calib"), "--stats", "{user}/stats.npz"], "has no inputs"),
    ("plan-no-inputs", ["plan", "{bad}/no_inputs.onnx", "--data", "demo", "--out", "{ws}/p"], "has no inputs"),
    ("plan-output-without-shape", ["plan", "{bad}/output_no_shape.onnx", "--data", "demo", "--out", "{ws}/p"],
     "does not pass onnx.checker"),
    ("calibrate-cycle", ["calibrate", "{bad}/cycle.onnx", "--no-progress", "--data", "demo"], "acyclic"),
    ("calibrate-huge-dim", ["calibrate", "{bad}/huge_dim.onnx", "--no-progress", "--data", "demo"], "3000000000"),
    # control characters in what the user typed reach the terminal escaped
    ("ansi-in-a-model-path", ["summary", "{ws}/m" + ANSI + ".onnx"], "\\x1b[31m"),
    ("ansi-in-a-flag", ["lint", M, "--flags", "fp16," + ANSI], "\\x1b[2J"),
    ("ansi-in-a-shape", CAL + ["--shape", "x" + ANSI + ":1x3x48x192"], "\\x1b[31m"),
    ("bidi-override-in-a-path", ["inspect", "{ws}/evil\u202egnp.graph.json"], "\\u202e"),
]


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_messages_ws")
    make_hostile_inputs(root / "bad")
    return root


@pytest.fixture()
def user(ws):
    folder = fresh_user_files(ws)
    (folder / "recipe.json").write_text(json.dumps(dict(RECIPE, model_path=M)))  # runnable here
    return folder




def test_the_tables_are_distinct():
    for cases in (CLI_CASES, API_CASES, WIDGET_CASES):
        assert len({c[0] for c in cases}) == len(cases)
    assert len({tuple(c[1]) for c in CLI_CASES}) == len(CLI_CASES)


@pytest.mark.parametrize("argv, phrase", [pytest.param(c[1], c[2], id=c[0]) for c in CLI_CASES])
def test_bad_input_on_the_command_line(ws, user, capsys, argv, phrase):
    argv = fill_argv(argv, ws, user)
    before, before_ws = fingerprint(user), sorted(p.name for p in ws.iterdir())
    rc = run_cli(argv)
    out, err = capsys.readouterr()
    assert rc == 2, f"exit {rc}\n{err}"
    assert "Traceback" not in err + out
    # A note may come first (inspect says which side files of a build folder it reads); then the error.
    assert f"\ntrtwidgets {argv[0]}: " in "\n" + err and phrase in err, err
    assert "Why:" in err and "Fix:" in err, f"the message lacks a why or a fix:\n{err}"
    assert not RAW_CONTROL.search(err + out), f"a raw control character reached the terminal: {err!r}"
    assert fingerprint(user) == before, "a file the user had was changed"
    assert sorted(p.name for p in ws.iterdir()) == before_ws, "something was written (a report, a build folder)"


# --------------------------------------------------------------------------- the Python API


def _api_cases():
    from trtwidgets.core.calibration.collect import collect_stats
    from trtwidgets.core.common.json_limits import RECIPE_LIMITS, load_json
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.core.engine.layer_table import layer_table
    from trtwidgets.core.engine.saved_build import load_saved_build, read_network_layers, read_timings
    from trtwidgets.core.plan.plan_artifact import Plan
    from trtwidgets.core.qdq.export import export_qdq
    from trtwidgets.core.recipe.recipe import Recipe, load_recipe
    import trtwidgets as tw

    deep = "[" * DEEP + "]" * DEEP
    return [
        ("recipe-from-json-nested", lambda ws, bad, user: Recipe.from_json(deep)),
        ("recipe-from-bytes-nested", lambda ws, bad, user: Recipe.from_json(deep.encode())),
        ("load-recipe-nested", lambda ws, bad, user: load_recipe(bad / "deep.recipe.json")),
        ("load-recipe-100mb-model-path", lambda ws, bad, user: load_recipe(bad / "huge_path.recipe.json")),
        ("recipe-5000-char-model-path", lambda ws, bad, user: Recipe(model_path="m" * 5000, model_sha256="")),
        ("recipe-replace-long-timing-cache", lambda ws, bad, user: Recipe(model_path=M, model_sha256="").replace(
            timing_cache="t" * 5000)),
        ("load-json-nested", lambda ws, bad, user: load_json(deep, "x.json", RECIPE_LIMITS)),
        ("inspector-nested", lambda ws, bad, user: parse_inspector_json(bad / "deep.graph.json")),
        ("inspector-nested-text", lambda ws, bad, user: parse_inspector_json('{"Layers": ' + deep + "}")),
        ("inspector-dims-1e400", lambda ws, bad, user: parse_inspector_json(bad / "inf_dims.graph.json")),
        ("inspector-dims-mapping-inf", lambda ws, bad, user: parse_inspector_json(
            _graph(Inputs=[{"Name": "x", "Dimensions": [float("inf")]}]))),
        ("inspect-build-folder-nested", lambda ws, bad, user: tw.inspect(bad / "build_deep")),
        ("saved-build-deep-recipe", lambda ws, bad, user: load_saved_build(bad / "build_deep_recipe")),
        ("saved-build-deep-timings", lambda ws, bad, user: load_saved_build(bad / "build_deep_timings")),
        ("read-timings-nested", lambda ws, bad, user: read_timings(bad / "deep.recipe.json")),
        ("network-layers-nested", lambda ws, bad, user: read_network_layers(bad / "deep_network_layers.json")),
        ("layer-table-profile-nested", lambda ws, bad, user: layer_table(
            parse_inspector_json(TINY / "engine.graph.json"), profile=deep)),
        ("load-plan-nested", lambda ws, bad, user: Plan.load(bad / "deep_plan")),
        ("load-plan-64mb", lambda ws, bad, user: Plan.load(bad / "huge_plan.json")),
        ("collect-stats-no-inputs", lambda ws, bad, user: collect_stats(bad / "no_inputs.onnx", "demo",
                                                                        progress=False)),
        ("export-qdq-output-without-shape", lambda ws, bad, user: export_qdq(
            bad / "output_no_shape.onnx", STATS, user / "old.qdq.onnx")),
    ]


API_CASES = _api_cases()


@pytest.fixture(scope="module")
def api_ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_messages_api_ws")
    make_hostile_inputs(root / "bad")
    make_user_files(root / "user")
    return root


@pytest.mark.parametrize("call", [pytest.param(c[1], id=c[0]) for c in API_CASES])
def test_bad_input_to_the_python_api(api_ws, call):
    assert_api_refusal(call, api_ws, api_ws / "user")


# --------------------------------------------------------------------------- the App's widgets

#: (id, box, text, action), as in test_widgets_bad_input.py.
WIDGET_CASES = [
    ("recipe-nested-200k", "load_step.recipe_path", "{bad}/deep.recipe.json", "load_recipe"),
    ("recipe-deep-field", "load_step.recipe_path", "{bad}/deep_field.recipe.json", "load_recipe"),
    ("recipe-100mb-model-path", "load_step.recipe_path", "{bad}/huge_path.recipe.json", "load_recipe"),
    ("recipe-5000-char-model-path", "load_step.recipe_path", "{bad}/long_path.recipe.json", "load_recipe"),
    ("recipe-nul-in-model-path", "load_step.recipe_path", "{bad}/nul_path.recipe.json", "load_recipe"),
    ("build-json-nested-200k", "build_step.saved_path", "{bad}/deep.graph.json", "load_saved_build"),
    ("build-json-dims-1e400", "build_step.saved_path", "{bad}/inf_dims.graph.json", "load_saved_build"),
    ("build-json-dims-nan", "build_step.saved_path", "{bad}/nan_dims.graph.json", "load_saved_build"),
    ("build-folder-nested", "build_step.saved_path", "{bad}/build_deep", "load_saved_build"),
    ("build-folder-deep-recipe", "build_step.saved_path", "{bad}/build_deep_recipe", "load_saved_build"),
    ("build-folder-deep-timings", "build_step.saved_path", "{bad}/build_deep_timings", "load_saved_build"),
    ("model-ansi-name-missing", "load_step.loader.path", "{ws}/m" + ANSI + ".onnx", "load"),
]


@pytest.fixture(scope="module")
def app(api_ws):
    from trtwidgets.widgets import App

    app = App(model_path=MODEL, out_dir=str(api_ws / "out"))
    assert app.calibrate(max_samples=2, progress=False)
    assert app.load_saved_build(str(FIXTURES / "trt86" / "cls_static_fp16"))  # of MODEL: another model's is refused
    return app


@pytest.mark.parametrize("box, text, action", [pytest.param(*c[1:], id=c[0]) for c in WIDGET_CASES])
def test_bad_input_in_the_app(app, api_ws, box, text, action):
    s = app.session
    user = api_ws / "user"
    before = fingerprint(user)
    kept = (s.model, s.recipe, s.stats, s.ranges, s.builds)
    widget = app
    for part in box.split("."):
        widget = getattr(widget, part)
    try:
        widget.value = fill_argv([text], api_ws, user)[0]
        ok = getattr(app, action)()
    finally:
        for step in app.steps.values():
            step.quiet = True
        try:  # back to the good state's boxes for the next case
            app.load_step.loader.path.value = str(MODEL)
            app.load_step.recipe_path.value = ""
            app.build_step.saved_path.value = ""
        finally:
            for step in app.steps.values():
                step.quiet = False
    panel = re.sub(r"<[^>]+>", " ", app.error.value + app.load_step.loader.error.value)
    assert not ok, "bad input was accepted"
    assert "trtw-error" in app.error.value + app.load_step.loader.error.value, "no error panel"
    assert "Why:" in panel and "Fix:" in panel, f"the panel lacks a why or a fix: {panel}"
    assert "Traceback" not in panel
    assert (s.model, s.recipe, s.stats, s.ranges, s.builds) == kept, "the session lost something it had"
    assert fingerprint(user) == before
    app.error.value = ""
    s.error = ""


def test_the_bad_input_tables_hold_at_least_150_entries():
    # Issue 22's target, across the CLI, API and widgets tables of tests/bad_input.
    from . import test_api_bad_input, test_cli_bad_input, test_widgets_bad_input

    total = sum(len(m.CASES) for m in (test_api_bad_input, test_cli_bad_input, test_widgets_bad_input))
    total += len(CLI_CASES) + len(API_CASES) + len(WIDGET_CASES)
    assert total >= 150, total


def test_issue_32_grew_the_tables_by_at_least_60_entries():
    # Issue 32's target: its hostile cases (edges of paths, data and streams; the planner's folders,
    # references and user metrics) are rows of their own tables.
    from . import test_edges_bad_input, test_plan_bad_input

    assert test_edges_bad_input.ENTRIES + len(test_plan_bad_input.CASES) >= 60


# --------------------------------------------------------------------------- what exits 0 but printed badly


def _ansi_graph(path: Path) -> Path:
    doc = _graph(Name=f"conv{ANSI}")
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("argv", [["summary", "{m}"], ["lint", "{m}"], ["summary", "{m}", "--json"],
                                  ["inspect", "{g}"]], ids=["summary", "lint", "summary-json", "inspect"])
def test_names_holding_ansi_escapes_reach_the_terminal_escaped(tmp_path, capsys, argv):
    from .hostile_models import ansi_model

    model = tmp_path / "ansi.onnx"
    onnx.save(ansi_model(), str(model))
    graph = _ansi_graph(tmp_path / "ansi.graph.json")
    argv = [a.replace("{m}", str(model)).replace("{g}", str(graph)) for a in argv]
    rc = run_cli(argv)
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    assert not RAW_CONTROL.search(out + err), repr(out + err)
    assert "\\x1b[31m" in out or "\\u001b[31m" in out, out


def test_a_terminal_without_unicode_gets_a_summary(tmp_path):
    env = dict(os.environ, PYTHONIOENCODING="ascii", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    r = subprocess.run([sys.executable, "-m", "trtwidgets", "summary", M], capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert b"Traceback" not in r.stderr and b"\\xd7" in r.stdout, r.stdout  # 1x3x48x192 written with \xd7


def test_an_input_without_a_shape_is_not_called_a_scalar(tmp_path, capsys):
    from trtwidgets.core.model.load import load_model

    path = tmp_path / "m.onnx"
    onnx.save(demo_without_shape("input"), str(path))
    assert run_cli(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("input"))
    assert "unknown shape" in line and "scalar" not in line, line
    info = load_model(path).summary.inputs[0]
    assert not info.has_shape and info.to_dict()["has_shape"] is False
    assert load_model(MODEL).summary.inputs[0].has_shape


EVIL = "<script>alert(1)</script>\x1b[2J"


def test_plan_html_escapes_names():
    from trtwidgets.core.plan.plan_artifact import Plan
    from trtwidgets.plots.pareto import plan_html

    doc = {"model": EVIL, "recommended": 0, "reason": EVIL, "notes": [EVIL], "target": {"cosine": 0.9},
           "high_precision": "fp32", "ranges": {"amax": {EVIL: 1.0}},
           "candidates": [{"name": EVIL, "quantized": [EVIL], "kept": [{"layer": EVIL, "reason": EVIL}],
                           "accuracy": {"cosine": 0.99}, "speedup_vs_fp16": 1.2, "meets_target": True}]}
    page = plan_html(Plan.from_dict(doc), EVIL)
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)" in page


def test_the_run_report_escapes_names(tmp_path, capsys):
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe import report as rep
    from trtwidgets.core.recipe.recipe import Recipe

    from .hostile_models import _model
    from onnx import TensorProto, helper

    model = _model([helper.make_node("Relu", [EVIL], ["y"], name=EVIL)],
                   [helper.make_tensor_value_info(EVIL, TensorProto.FLOAT, [1, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "evil.onnx"
    onnx.save(model, str(path))
    loaded = load_model(path)
    from trtwidgets.core.model.lint import lint

    doc = rep.render_document(EVIL, [rep.summary_section(loaded.summary, Recipe.for_model(loaded)),
                                     rep.findings_section(lint(loaded)), rep.steps_section([{"step": EVIL}])],
                              subtitle=EVIL)
    assert "<script>alert" not in doc and "&lt;script&gt;alert(1)" in doc
