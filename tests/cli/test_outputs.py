"""One rule for every output option of every command (issue 16): a missing folder is created and said so;
a path that cannot be written is refused with exit 2 before any work; the user's files are untouched."""

from __future__ import annotations

import hashlib
import importlib

import pytest

from trtwidgets.cli import _command_modules, main

FIXTURES = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures"
NOTEBOOKS = FIXTURES.parents[1] / "notebooks"
GRAPH = FIXTURES / "trt86" / "cls_static_fp16" / "engine.graph.json"


def _argv(command: str, option: str, value: str, tmp_path, model) -> list:
    """The smallest command line that reaches the output check (inputs exist; the work itself may need a GPU)."""
    recipe = tmp_path / "recipe.json"
    recipe.write_text("{}")
    base = {
        "calibrate": ["calibrate", str(model), "--data", "demo", "--no-progress"],
        "export-qdq": ["export-qdq", str(model), "--stats", str(FIXTURES / "calib" / "cls_demo_stats.npz")],
        "inspect": ["inspect", str(GRAPH)],
        "run": ["run", str(recipe), "--report", str(tmp_path / "r.html")],
        "compare": ["compare", str(tmp_path)],
        "bench": ["bench", str(tmp_path)],
        "build": ["build", str(recipe)],
        "plan": ["plan", str(model), "--data", "demo", "--no-progress"],
        "plan-export": ["plan-export", str(FIXTURES / "plans" / "cls_b32_cpu"), "--model", str(model), "--out", "x"],
        "share": ["share", str(NOTEBOOKS / "01_quickstart.ipynb"), "--out", "x"],
    }[command]
    if option in base:  # a required option given above: replace its value
        i = base.index(option)
        return base[:i + 1] + [value] + base[i + 2:]
    return base + [option, value]


def _outputs():
    for modname in _command_modules():
        mod = importlib.import_module(f"trtwidgets.cli.{modname}")
        for dest, kind in getattr(mod, "OUTPUTS", {}).items():
            yield pytest.param(mod.NAME, "--" + dest.replace("_", "-"), kind, id=f"{mod.NAME}-{dest}")


def test_every_command_that_writes_declares_its_outputs():
    declared = {p.values[:2] for p in _outputs()}
    assert {("calibrate", "--cache"), ("calibrate", "--stats"), ("export-qdq", "--out"), ("inspect", "--csv"),
            ("run", "--report"), ("run", "--build-dir"), ("compare", "--save-reference"), ("bench", "--save-profile"),
            ("build", "--out"), ("build", "--builds-root"), ("share", "--out"), ("plan-export", "--out")} <= declared


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command, option, kind", list(_outputs()))
def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys, cls_model_path,
                                                                     command, option, kind):
    blocker = tmp_path / "a-file"
    blocker.write_text("the user's file")
    before = _digest(blocker)
    # A folder cannot be made inside a file.
    rc = main(_argv(command, option, str(blocker / "sub" / "out.x"), tmp_path, cls_model_path))
    err = capsys.readouterr().err
    assert rc == 2 and f"{blocker} is a file" in err and "Why:" in err and "Fix:" in err and "Traceback" not in err
    # A folder where a file is wanted, or a file where a folder is wanted.
    wrong = tmp_path if kind == "file" else blocker
    rc = main(_argv(command, option, str(wrong), tmp_path, cls_model_path))
    err = capsys.readouterr().err
    assert rc == 2 and ("is a folder" if kind == "file" else "is a file") in err and "Fix:" in err
    assert _digest(blocker) == before and not (blocker.parent / "sub").exists()


def test_a_missing_folder_is_created_and_said_once(tmp_path, capsys, cls_model_path):
    # Issue 16: --cache /no/such/dir/o.cache created the folder without a word.
    cache, stats = tmp_path / "no" / "such" / "o.cache", tmp_path / "no" / "such" / "s.npz"
    rc = main(["calibrate", str(cls_model_path), "--data", "demo", "--max-samples", "2", "--cache", str(cache),
               "--stats", str(stats), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0 and cache.is_file() and stats.is_file()
    assert err.splitlines() == [f"trtwidgets calibrate: created folder {tmp_path / 'no'} for --cache"]


def test_no_folder_is_created_when_the_command_fails_first(tmp_path, capsys, cls_model_path):
    out = tmp_path / "new" / "q.onnx"
    rc = main(["export-qdq", str(cls_model_path), "--stats", str(tmp_path / "missing.npz"), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and not (tmp_path / "new").exists() and "created folder" not in err


def test_two_outputs_on_one_file_and_an_output_over_an_input_are_refused(tmp_path, capsys, cls_model_path):
    same = str(tmp_path / "x.out")
    rc = main(["calibrate", str(cls_model_path), "--data", "demo", "--cache", same, "--stats", same])
    assert rc == 2 and "both name" in capsys.readouterr().err
    model = tmp_path / "model.onnx"
    model.write_bytes(cls_model_path.read_bytes())
    before = _digest(model)
    rc = main(["export-qdq", str(model), "--stats", str(FIXTURES / "calib" / "cls_demo_stats.npz"), "--out", str(model)])
    assert rc == 2 and "is the command's own input (the model)" in capsys.readouterr().err
    assert _digest(model) == before


def test_resuming_into_the_same_statistics_file_is_allowed(tmp_path, capsys, cls_model_path):
    stats = tmp_path / "s.npz"
    assert main(["calibrate", str(cls_model_path), "--data", "demo", "--max-samples", "1", "--stats", str(stats),
                 "--no-progress"]) == 0
    assert main(["calibrate", str(cls_model_path), "--data", "demo", "--max-samples", "1", "--resume", str(stats),
                 "--stats", str(stats), "--no-progress"]) == 0
    from trtwidgets.core.calibration.stats import load_stats

    assert load_stats(stats).samples == 2
