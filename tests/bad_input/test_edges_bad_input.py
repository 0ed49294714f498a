"""Issue 32 outside the planner, and issue 34's ONNX Runtime log: each case ends in exit 0 with a correct result,
or in exit 2 with what, why and fix; no traceback; nothing the user had changed; nothing written outside the output.

- the write rule covers folders: a symbolic link to a folder inside an output folder is never written through
  (``plan measure``'s ``candidates/``, ``run``'s build folder); ``run`` never replaces the recipe's own inputs, and
  its default build folder standing as a file is a clear error;
- paths and data: a recipe's relative paths are taken beside the recipe; a changed model is reported; recipe
  field types are strict; EXIF orientation is applied; unusable entries of a data folder are listed in one note;
  dot files are passed over;
- edges: undecodable bytes in file names, a deleted working folder, closed standard streams, runaway regular
  expressions, ``TRTWIDGETS_ORT_THREADS`` beyond the CPUs, ``.npz``/``.npy`` headers that lie, CSV cells that
  start like formulas;
- what ONNX Runtime logs on standard error becomes a note (issue 34, item 4).

Real processes where the case is the process itself (closed streams, a deleted working folder); everything else
through ``trtwidgets.cli.main`` in this process, with standard error read at the descriptor (``capfd``), where
ONNX Runtime writes.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets import demo

from .workspace import FIXTURES, MODEL, fingerprint, fill_argv, run_cli

ROOT = Path(__file__).resolve().parents[2]
M = str(MODEL)
STATS = str(FIXTURES / "calib" / "cls_demo_stats.npz")
RECIPE = json.loads((FIXTURES / "trt86" / "cls_static_int8_entropy2" / "recipe.json").read_text())
QDQ = ["export-qdq", M, "--stats", STATS, "--out", "{ws}/q.onnx"]
CAL = ["calibrate", M, "--no-progress", "--cache", "{ws}/o.cache"]
#: A byte that is not UTF-8, as Python hands it over from a file name (surrogateescape).
FF = "\udcff"


# --------------------------------------------------------------------------- the shelf of edge inputs


def _recipe(path: Path, **fields) -> Path:
    doc = dict(RECIPE, **fields)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _lying_array(path: Path, shape=(10 ** 11,), dtype="<f4") -> None:
    """A .npy (or an .npz holding one) whose header claims ``shape`` and that holds 12 bytes."""
    def write(f):
        np.lib.format.write_array_header_1_0(f, {"descr": dtype, "fortran_order": False, "shape": shape})
        f.write(b"\0" * 12)

    if path.suffix == ".npz":
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z, z.open("x.npy", "w") as f:
            write(f)
    else:
        with open(path, "wb") as f:
            write(f)


def cubic_resize_model() -> onnx.ModelProto:
    """A bicubic Resize of a 3-D tensor, as a ViT resizes its position embeddings: ORT's CPU provider refuses it."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="cubic", name="/backbone/embeddings/Resize")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("roi", TensorProto.FLOAT, [0], []),
         helper.make_tensor("scales", TensorProto.FLOAT, [3], [1.0, 2.0, 2.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _data_folder(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True)
    x = demo.sample_inputs(1)[0]["x"]
    for i in range(n):
        np.save(folder / f"s{i}.npy", x * (1 + i / 10))
    return folder


def _unusable_entries(folder: Path) -> None:
    """Entries named like samples that no file read can use."""
    os.mkfifo(folder / "fifo.npy")
    os.symlink(folder / "nowhere.npy", folder / "dangling.npy")
    (folder / "folder.npy").mkdir()
    os.symlink("loop.npy", folder / "loop.npy")


def _recipe_shelf(bad: Path) -> None:
    data = RECIPE["calibration_data"]
    for name, change in {"batch_size_text": {"batch_size": "8"}, "max_samples_fraction": {"max_samples": 2.5},
                         "opt_shape_text": {"opt_shapes": {"x": "1348"}}, "adapt_number": {"adapt": {"x": 3}},
                         "preprocessing_list": {"preprocessing": [1]}}.items():
        _recipe(bad / f"{name}.recipe.json", calibration_data=dict(data, **change))
    _recipe(bad / "runaway_layer_regex.recipe.json",
            layer_precisions=[{"pattern": "(a+)+$", "precision": "fp32", "regex": True}])
    # run's default build folder (REPORT-build) as a file; holding the recipe's own cache; its engine/ a link.
    (bad / "runs" / "file").mkdir(parents=True)
    (bad / "runs" / "file" / "s-build").write_text("not a folder")
    own = _recipe(bad / "runs" / "own" / "r.json", calibrator={
        "kind": "toolkit", "method": "max", "percentile": 99.99, "cache_path": "s-build/calibration.cache",
        "amax_overrides": {}})
    (own.parent / "s-build").mkdir()
    shutil.copy(FIXTURES / "trt86" / "cls_entropy2.cache", own.parent / "s-build" / "calibration.cache")
    (bad / "runs" / "link" / "s-build").mkdir(parents=True)
    os.symlink(bad.parent / "elsewhere", bad / "runs" / "link" / "s-build" / "engine")


def _plan_shelf(ws: Path) -> None:
    """A real plan folder (``trtwidgets plan`` on a small model), copied with a ``candidates`` link in two places."""
    bad = ws / "bad"
    onnx.save(conv_stack(), ws / "stack.onnx")
    _data_folder(ws / "stack_data", 0)
    for i, f in enumerate(feeds(12)):
        np.save(ws / "stack_data" / f"s{i:02d}.npy", f["x"])
    assert run_cli(["plan", str(ws / "stack.onnx"), "--data", str(ws / "stack_data"), "--out", str(ws / "plan"),
                    "--no-progress"]) == 0
    shutil.copytree(ws / "plan", bad / "plan_link")
    os.symlink(ws / "elsewhere", bad / "plan_link" / "candidates")
    shutil.copytree(ws / "plan", bad / "plan_nested")
    (bad / "plan_nested" / "candidates").mkdir()
    os.symlink(ws / "elsewhere", bad / "plan_nested" / "candidates" / "candidates")


def make_edge_inputs(ws: Path) -> None:
    bad = ws / "bad"
    bad.mkdir(parents=True)
    (ws / "elsewhere").mkdir()
    (ws / "elsewhere" / "implicit_int8.cache").write_text("a file outside every output folder\n")
    _recipe_shelf(bad)
    # Headers that claim 10^11 floats (issue 32: MemoryError).
    with zipfile.ZipFile(STATS) as src, zipfile.ZipFile(bad / "lying_stats.npz", "w") as z:
        for name in src.namelist():  # the real statistics, but the histograms' header claims 10^11 values
            if name != "hists.npy":
                z.writestr(name, src.read(name))
        with z.open("hists.npy", "w") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (10 ** 11,)})
    for name in ("data_npz_lies/s.npz", "data_npy_lies/s.npy", "labels_lie.npy", "labels_lie.npz"):
        (bad / name).parent.mkdir(exist_ok=True)
        _lying_array(bad / name, dtype="<i8" if name.startswith("labels") else "<f4")
    # Data folders that hold nothing usable.
    (bad / "data_dot_only").mkdir()
    (bad / "data_dot_only" / "._x.npy").write_bytes(b"\0")
    (bad / "data_dot_only" / ".DS_Store").write_bytes(b"Bud1")
    (bad / "data_unusable_only").mkdir()
    _unusable_entries(bad / "data_unusable_only")
    onnx.save(cubic_resize_model(), bad / "cubic.onnx")
    (bad / "data_cubic").mkdir()
    np.save(bad / "data_cubic" / "s.npy", np.ones((1, 4, 8), np.float32))
    _plan_shelf(ws)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("edges_ws")
    make_edge_inputs(root)
    return root


# --------------------------------------------------------------------------- what is refused (exit 2)

#: (id, argv with {bad}/{user}/{ws} placeholders, a phrase the message must hold, environment)
CASES = [
    # recipe field types (issue 32: "batch_size": "8" was accepted)
    ("run-recipe-batch-size-as-text", ["run", "{bad}/batch_size_text.recipe.json", "--report", "{ws}/r.html"],
     "not a whole number", {}),
    ("run-recipe-max-samples-fraction", ["run", "{bad}/max_samples_fraction.recipe.json", "--report", "{ws}/r.html"],
     "max_samples", {}),
    ("run-recipe-opt-shape-as-text", ["run", "{bad}/opt_shape_text.recipe.json", "--report", "{ws}/r.html"],
     "list of whole numbers", {}),
    ("run-recipe-adapt-a-number", ["run", "{bad}/adapt_number.recipe.json", "--report", "{ws}/r.html"],
     "adapt", {}),
    ("run-recipe-preprocessing-a-list", ["run", "{bad}/preprocessing_list.recipe.json", "--report", "{ws}/r.html"],
     "preprocessing", {}),
    ("run-recipe-runaway-layer-regex", ["run", "{bad}/runaway_layer_regex.recipe.json", "--report", "{ws}/r.html"],
     "practically forever", {}),
    # run's build folder (issue 32: `run --report s.html` replaced the recipe's s-build/calibration.cache; s-build as
    # a file was a FileExistsError traceback)
    ("run-default-build-folder-is-a-file", ["run", "{user}/recipe.json", "--report", "{bad}/runs/file/s.html"],
     "is a file", {}),
    ("run-default-build-folder-holds-the-recipes-cache", ["run", "{bad}/runs/own/r.json", "--report",
                                                          "{bad}/runs/own/s.html"], "own input", {}),
    ("run-build-dir-holds-the-recipes-cache", ["run", "{bad}/runs/own/r.json", "--report", "{ws}/r.html",
                                               "--build-dir", "{bad}/runs/own/s-build"], "own input", {}),
    ("run-build-engine-folder-is-a-link", ["run", "{user}/recipe.json", "--report", "{bad}/runs/link/s.html"],
     "symbolic link", {}),
    # plan measure through a link inside the plan folder (issue 32: an outside implicit_int8.cache was replaced)
    ("plan-measure-candidates-is-a-link", ["plan", "measure", "{bad}/plan_link"], "symbolic link", {}),
    ("plan-measure-nested-candidates-is-a-link", ["plan", "measure", "{bad}/plan_nested"], "symbolic link", {}),
    # regular expressions that backtrack without bound (issue 32: minutes)
    ("exclude-nested-repetition", QDQ + ["--exclude", "(a+)+$"], "practically forever", {}),
    ("exclude-alternatives-in-a-repetition", QDQ + ["--exclude", "(x|xx)*y"], "practically forever", {}),
    ("exclude-back-reference", QDQ + ["--exclude", "(conv)\\1"], "refers back", {}),
    ("exclude-many-open-repetitions", QDQ + ["--exclude", ".*a.*b.*c.*d.*e"], "unbounded repetitions", {}),
    ("exclude-very-long", QDQ + ["--exclude", "conv" * 300], "characters long", {}),
    # TRTWIDGETS_ORT_THREADS
    ("ort-threads-as-text", CAL + ["--data", "demo", "--max-samples", "1"], "not a positive whole number",
     {"TRTWIDGETS_ORT_THREADS": "many"}),
    ("ort-threads-zero", CAL + ["--data", "demo", "--max-samples", "1"], "not a positive whole number",
     {"TRTWIDGETS_ORT_THREADS": "000"}),
    # headers that claim more than the file holds (issue 32: 10^11 floats -> MemoryError)
    ("qdq-stats-header-lies", ["export-qdq", M, "--stats", "{bad}/lying_stats.npz", "--out", "{ws}/q.onnx"],
     "not a trtwidgets statistics file", {}),
    ("resume-header-lies", CAL + ["--data", "demo", "--resume", "{bad}/lying_stats.npz"],
     "not a trtwidgets statistics file", {}),
    ("data-npz-header-lies", CAL + ["--data", "{bad}/data_npz_lies"], "could not be read as .npz", {}),
    ("data-npy-header-lies", CAL + ["--data", "{bad}/data_npy_lies"], "could not be read as .npy", {}),
    ("labels-npy-header-lies", QDQ + ["--data", "demo", "--samples", "4", "--labels", "{bad}/labels_lie.npy"],
     "could not be read", {}),
    ("labels-npz-header-lies", QDQ + ["--data", "demo", "--samples", "4", "--labels", "{bad}/labels_lie.npz"],
     "could not be read", {}),
    # data folders with nothing usable: dot files are no samples (a 1-byte ._x.npy failed the run as "pickled data")
    ("data-only-dot-files", CAL + ["--data", "{bad}/data_dot_only"], "holds no", {}),
    ("data-only-unusable-entries", CAL + ["--data", "{bad}/data_unusable_only"], "holds no", {}),
    # file names holding a byte that is not UTF-8
    ("model-name-undecodable-missing", ["summary", "{ws}/m" + FF + ".onnx"], "\\xff", {}),
    ("output-name-undecodable-under-a-file", QDQ[:-1] + ["{user}/old.cache/q" + FF + ".onnx"], "is a file", {}),
    # a model ONNX Runtime cannot run: its log line is a note, not raw text (issue 34)
    ("ort-cannot-run-bicubic-resize", ["calibrate", "{bad}/cubic.onnx", "--data", "{bad}/data_cubic",
                                       "--no-progress", "--cache", "{ws}/o.cache"], "ONNX Runtime", {}),
]


def test_the_table_is_big_and_its_entries_distinct():
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES) and len({(tuple(c[1]), str(c[3])) for c in CASES}) == len(CASES)


@pytest.mark.parametrize("argv, phrase, env", [pytest.param(c[1], c[2], c[3], id=c[0]) for c in CASES])
def test_an_edge_is_refused_clearly_and_costs_nothing(ws, user, capfd, monkeypatch, argv, phrase, env):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    argv = fill_argv(argv, ws, user)
    for name in ("q.onnx", "o.cache", "r.html"):  # a row that wrongly wrote one fails; the next starts clean
        (ws / name).unlink(missing_ok=True)
    before, shelf, outside = fingerprint(user), fingerprint(ws / "bad"), fingerprint(ws / "elsewhere")
    rc = run_cli(argv)
    out, err = capfd.readouterr()
    assert rc == 2, f"exit {rc}\n{err}"
    command = "plan-measure" if argv[:2] == ["plan", "measure"] else argv[0]
    assert "Traceback" not in err + out and err.count(f"trtwidgets {command}: ") == 1, err
    assert phrase in err, err
    assert "Why:" in err and "Fix:" in err, f"the message lacks a why or a fix:\n{err}"
    assert "[E:onnxruntime" not in err and "[W:onnxruntime" not in err, "ONNX Runtime's raw log reached stderr"
    assert fingerprint(user) == before, "a file the user had was changed"
    assert fingerprint(ws / "bad") == shelf, "something was written into the inputs' folders"
    assert fingerprint(ws / "elsewhere") == outside, "a file outside every output folder was changed"
    assert not (ws / "q.onnx").exists() and not (ws / "o.cache").exists() and not (ws / "r.html").exists()


def test_each_edge_says_what_the_case_is_about(ws, user, capfd):
    # Notes made on the way out are part of the answer: the unusable entries are named, ORT's line explained.
    run_cli(fill_argv(CAL + ["--data", "{bad}/data_unusable_only"], ws, user))
    err = capfd.readouterr().err
    assert err.count("note: ") == 1 and all(n in err for n in ("fifo.npy", "dangling.npy", "folder.npy", "loop.npy"))
    run_cli(fill_argv(["calibrate", "{bad}/cubic.onnx", "--data", "{bad}/data_cubic", "--no-progress"], ws, user))
    err = capfd.readouterr().err
    assert "note: ONNX Runtime error" in err and "'/backbone/embeddings/Resize'" in err and "bicubic" in err


def test_a_deleted_working_folder_is_exit_2_with_a_relative_output(ws, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (f"import os, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
              "from trtwidgets.cli import main; "
              f"sys.exit(main(['calibrate', {M!r}, '--data', 'demo', '--max-samples', '1', '--cache', 'o.cache']))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2, proc.stderr
    assert "current folder no longer exists" in proc.stderr and "Fix:" in proc.stderr
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- what works (exit 0), and how


def _calibrate_json(argv, capfd):
    rc = run_cli(argv + ["--json"])
    out, err = capfd.readouterr()
    assert rc == 0, err
    return json.loads(out), err


def test_dot_files_beside_the_samples_are_passed_over_silently(tmp_path, capfd):
    data = _data_folder(tmp_path / "d", 2)
    (data / "._s0.npy").write_bytes(b"\0")  # macOS AppleDouble: one byte, no npy header
    (data / ".hidden.npy").write_bytes(b"\0")
    doc, err = _calibrate_json(["calibrate", M, "--data", str(data), "--no-progress"], capfd)
    assert doc["samples"] == 2 and "note:" not in err and "Traceback" not in err


def test_unusable_entries_beside_the_samples_are_listed_in_one_note(tmp_path, capfd):
    data = _data_folder(tmp_path / "d", 3)
    _unusable_entries(data)
    doc, err = _calibrate_json(["calibrate", M, "--data", str(data), "--no-progress"], capfd)
    assert doc["samples"] == 3
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "4 entries" in notes[0], err
    assert all(n in notes[0] for n in ("fifo.npy (a named pipe", "dangling.npy (a link to nothing",
                                       "folder.npy (a folder", "loop.npy (a link loop"))


def test_exif_orientation_is_applied_to_images(tmp_path):
    from PIL import Image

    from trtwidgets.core.calibration.sources import load_image

    rng = np.random.default_rng(0)
    upright = rng.integers(0, 255, (48, 192, 3), dtype=np.uint8)
    # Stored as a camera does: the pixels turned, and EXIF Orientation 6 ("turn 90 degrees clockwise to view").
    stored = Image.fromarray(np.ascontiguousarray(np.rot90(upright, 1)))
    exif = Image.Exif()
    exif[0x0112] = 6
    stored.save(tmp_path / "turned.png", exif=exif)
    Image.fromarray(upright).save(tmp_path / "upright.png")
    pre = {"input": "x", "layout": "NCHW"}
    turned = load_image(tmp_path / "turned.png", pre)
    assert turned.shape == (1, 3, 48, 192)
    assert np.array_equal(turned, load_image(tmp_path / "upright.png", pre))


def test_a_recipes_relative_data_is_found_beside_the_recipe_from_any_folder(tmp_path, capfd, monkeypatch):
    project = tmp_path / "project"
    _data_folder(project / "data", 3)
    shutil.copy(MODEL, project / "model.onnx")
    data = dict(RECIPE["calibration_data"], kind="npy_dir", path="data")
    _recipe(project / "r.json", model_path="model.onnx", calibration_data=data,
            calibrator={"kind": "toolkit", "method": "max", "percentile": 99.99, "cache_path": None,
                        "amax_overrides": {}})
    elsewhere = tmp_path / "elsewhere"
    _data_folder(elsewhere / "data", 1)  # a folder of the same name where `run` is started
    monkeypatch.chdir(elsewhere)
    assert run_cli(["run", str(project / "r.json"), "--report", "s.html"]) == 0
    err = capfd.readouterr().err
    assert f"3 samples from {(project / 'data').resolve()}" in (elsewhere / "s.html").read_text()
    assert "calibrated on 3 samples" in err
    assert "has changed since the recipe" not in err


def test_a_model_changed_since_the_recipe_is_reported(tmp_path, capfd):
    model = onnx.load(M)
    model.producer_version += "-edited"
    onnx.save(model, tmp_path / "model.onnx")
    _recipe(tmp_path / "r.json", model_path="model.onnx")
    assert run_cli(["run", str(tmp_path / "r.json"), "--report", str(tmp_path / "s.html"), "--no-calibrate"]) == 0
    err = capfd.readouterr().err
    assert "note: " in err and "has changed since the recipe was saved" in err
    assert "has changed since the recipe was saved" in (tmp_path / "s.html").read_text()


@pytest.mark.parametrize("redirect", [">&-", "2>&-", ">&- 2>&-"], ids=["stdout", "stderr", "both"])
def test_closed_standard_streams_keep_the_work_and_the_exit_code(tmp_path, redirect):
    # Issue 32: `>&-` did the work, then failed with "'NoneType' has no attribute 'flush'", exit 1.
    cmd = (f"{sys.executable} -m trtwidgets calibrate {M} --data demo --max-samples 2 --no-progress "
           f"--cache {tmp_path / 'o.cache'} {redirect}; echo rc=$? >&9")
    proc = subprocess.run(["bash", "-c", f"exec 9>&1; {cmd}"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert "rc=0" in proc.stdout, proc.stdout + proc.stderr
    assert (tmp_path / "o.cache").read_text().startswith("TRT-"), "the cache was not written"
    assert "Traceback" not in proc.stderr


def test_file_names_with_undecodable_bytes_print_and_write(tmp_path, capfd):
    model = tmp_path / f"m{FF}.onnx"
    shutil.copy(MODEL, model)
    cache = tmp_path / f"o{FF}.cache"
    assert run_cli(["calibrate", str(model), "--data", "demo", "--max-samples", "1", "--no-progress",
                    "--cache", str(cache)]) == 0
    out, err = capfd.readouterr()
    assert cache.is_file() and "o\\xff.cache" in out + err and "Traceback" not in err
    report = tmp_path / f"r{FF}.html"
    recipe = _recipe(tmp_path / "r.json", model_path=str(model))
    assert run_cli(["run", str(recipe), "--report", str(report), "--no-calibrate"]) == 0
    html = report.read_bytes().decode("utf-8")  # valid UTF-8: the byte is written as an escape
    assert "m\\udcff.onnx" in html


def test_a_plan_of_a_model_whose_name_holds_an_undecodable_byte_is_written(ws, tmp_path, capfd):
    # Issue 32: the whole search ran, then UnicodeEncodeError writing plan.html, nothing written.
    model = tmp_path / f"st{FF}ack.onnx"
    shutil.copy(ws / "stack.onnx", model)
    assert run_cli(["plan", str(model), "--data", str(ws / "stack_data"), "--out", str(tmp_path / "p"),
                    "--no-progress"]) == 0
    assert "Traceback" not in capfd.readouterr().err
    assert "st\\udcffack.onnx" in (tmp_path / "p" / "plan.html").read_bytes().decode("utf-8")
    assert json.loads((tmp_path / "p" / "plan.json").read_text())["model"] == str(model)


def test_csv_cells_that_start_like_formulas_are_written_as_text(tmp_path, capfd):
    doc = json.loads((FIXTURES / "trt86" / "tiny" / "fp32" / "engine.graph.json").read_text(), strict=False)
    names = ['=HYPERLINK("http://evil.example","click")', "+cmd|' /C calc'!A0"]
    for layer, name in zip(doc["Layers"], names):
        layer["Name"] = name
    (tmp_path / "engine.graph.json").write_text(json.dumps(doc))
    assert run_cli(["inspect", str(tmp_path / "engine.graph.json"), "--no-siblings", "--csv",
                    str(tmp_path / "layers.csv")]) == 0
    with open(tmp_path / "layers.csv", newline="") as f:
        rows = list(csv.reader(f))
    cells = [cell for row in rows for cell in row]
    assert not any(c.startswith(("=", "+", "@", "\t", "\r")) for c in cells), cells
    assert all(any(c == "'" + n for c in cells) for n in names), cells


def test_more_ort_threads_than_cpus_run_on_the_cpus_with_a_note(ws, tmp_path, capfd, monkeypatch):
    # Issue 32: 99999 grew to 11.8 GB and was killed; 256 ran ten times slower, silently.
    from trtwidgets.core.common import ort

    monkeypatch.setattr(ort, "_THREAD_NOTES", set())
    monkeypatch.setenv("TRTWIDGETS_ORT_THREADS", "99999")
    doc, err = _calibrate_json(["calibrate", M, "--data", "demo", "--max-samples", "2", "--no-progress"], capfd)
    monkeypatch.delenv("TRTWIDGETS_ORT_THREADS")
    plain, _ = _calibrate_json(["calibrate", M, "--data", "demo", "--max-samples", "2", "--no-progress"], capfd)
    assert doc["samples"] == 2 and doc["tensors"] == plain["tensors"], "the result must not depend on the threads"
    assert err.count("note: TRTWIDGETS_ORT_THREADS=99999 asks for more ONNX Runtime threads") == 1, err


def test_plan_measure_through_the_api_never_writes_through_a_link(ws, tmp_path):
    from trtwidgets.core.common.write_rule import WriteError
    from trtwidgets.core.plan.plan_artifact import Plan
    from trtwidgets.trt.plan_measure import measure_plan

    work = tmp_path / "work"
    work.mkdir()
    os.symlink(ws / "elsewhere", work / "candidates")
    before = fingerprint(ws / "elsewhere")

    def never(*args, **kwargs):
        raise AssertionError("nothing may be measured")

    with pytest.raises(WriteError, match="symbolic link"):
        measure_plan(Plan.load(ws / "plan"), ws / "stack.onnx", work_dir=work, measure_fn=never,
                     cache_dir=tmp_path / "e")
    assert fingerprint(ws / "elsewhere") == before and not (work / "implicit_int8.cache").exists()


def test_an_exclusion_that_names_a_node_is_matched_exactly_first(tmp_path, capfd):
    # Node names full of regular-expression characters are compared as names before any expression runs.
    from trtwidgets.core.qdq.exclusions import match_exclusions

    model = onnx.load(M)
    name = next(n.name for n in model.graph.node if n.op_type == "Conv")
    model.graph.node[[n.name for n in model.graph.node].index(name)].name = "conv(a+)+$[1]"
    excluded, _ = match_exclusions(model.graph, ["conv(a+)+$[1]"])
    assert list(excluded.values()) == ["excluded by the user (pattern 'conv(a+)+$[1]')"]


#: Entries of this module in the tables' count (issue 32: >= 60 new entries overall).
ENTRIES = len(CASES) + 16  # the tests below the table, the closed-stream one counted per stream
