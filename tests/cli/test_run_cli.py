"""``trtwidgets run RECIPE --report OUT.html``: headless re-run into one self-contained, escaped report."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from tests.core.inspector_samples import synthetic_int8_implicit, trt_text
from tests.core.models import EVIL, evil_names_model, save
from trtwidgets import demo, trt
from trtwidgets.cli import main
from trtwidgets.core.calibration.cache import read_cache
from trtwidgets.core.calibration.data import CalibrationDataSpec
from trtwidgets.core.engine.inspector_json import as_graph
from trtwidgets.core.model.load import load_model
from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe, save_recipe
from trtwidgets.core.engine.saved_build import load_saved_build


class _Tables(HTMLParser):
    """Rows per table and the text of the document, as a browser sees them."""

    def __init__(self, text):
        super().__init__()
        self.tables, self.text, self.tags = [], [], []
        self._row = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._row.append("")

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None and self.tables:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._row:
            self._row[-1] += data


@pytest.fixture
def demo_recipe(tmp_path):
    model = load_model(demo.MODEL_PATH)
    recipe = Recipe.for_model(model, flags=("fp16", "int8"), calibrator=CalibratorSpec(kind="toolkit", method="entropy"),
                              calibration_data=CalibrationDataSpec(kind="demo", max_samples=3))
    return recipe, save_recipe(recipe, tmp_path / "recipe.json")


def _saved_build(tmp_path, recipe, name="int8", doc=None):
    d = tmp_path / name
    d.mkdir()
    (d / "engine.graph.json").write_text(trt_text(doc or synthetic_int8_implicit()), encoding="utf-8")
    save_recipe(recipe, d / "recipe.json")
    return d


def test_report_has_tables_figures_and_plotly_once(demo_recipe, tmp_path, capsys):
    recipe, path = demo_recipe
    saved = _saved_build(tmp_path, recipe.replace(flags=("int8",)))
    out = tmp_path / "out" / "report.html"
    rc = main(["run", str(path), "--report", str(out), "--graph", str(saved), "--top", "3"])
    assert rc == 0
    text = out.read_text(encoding="utf-8")
    doc = _Tables(text)
    # Offline: plotly.js is inside, once; no script is loaded from elsewhere.
    from plotly.offline import get_plotlyjs

    assert not any(t == "script" and "src" in a for t, a in doc.tags)
    plotly_js = get_plotlyjs()
    assert text.count(plotly_js[:200]) == 1
    assert text.count('class="plotly-graph-div"') == 5  # overview, 3 histograms, precision chart
    assert len(re.findall(r"Plotly\.newPlot\(", text)) - plotly_js.count("Plotly.newPlot(") == 5
    headings = [t for t, _ in doc.tags if t == "h2"]
    assert len(headings) >= 7
    body = "".join(doc.text)
    for title in ("Steps", "Summary", "Lint findings", "Ranges per tensor", "Calibration figures",
                  "Precision summary", "Precision chart", "Layer table: int8"):
        assert title in body
    # Ranges: one row per tensor with amax per method, lowest SQNR first.
    ranges = next(t for t in doc.tables if t and t[0][:2] == ["tensor", "entropy"])
    sqnr = [float(r[5]) for r in ranges[1:] if r[5]]
    assert sqnr == sorted(sqnr) and len(ranges) > 100
    # The layer table of the saved build, and its mismatch with the recipe is said.
    layers = next(t for t in doc.tables if t and t[0][:2] == ["name", "type"])
    assert len(layers) - 1 == 9 and any(r[3] == "INT8" for r in layers[1:])
    assert "does not match the recipe" in body and "precision flags" in body
    # The build step says what happened.
    steps = next(t for t in doc.tables if t and t[0] == ["step", "status", "detail"])
    status = {r[0]: r[1] for r in steps[1:]}
    assert status["calibrate"] == "done"
    if not trt.available():
        assert status["build"] == "skipped" and "TensorRT is not installed" in body
    # The calibration cache was written where the build would read it.
    cache = read_cache(tmp_path / "out" / "report-build" / "calibration.cache")
    assert len(cache.amax) > 100
    assert "report ->" in capsys.readouterr().out


def test_recipe_in_a_build_folder_inspects_that_build(demo_recipe, tmp_path):
    recipe, _ = demo_recipe
    saved = _saved_build(tmp_path, recipe)
    out = tmp_path / "r.html"
    assert main(["run", str(saved / "recipe.json"), "--report", str(out), "--no-calibrate"]) == 0
    body = "".join(_Tables(out.read_text(encoding="utf-8")).text)
    assert "Layer table: int8" in body and "does not match the recipe" not in body
    assert "Ranges per tensor" not in body and "--no-calibrate" in body


def test_model_provided_names_are_escaped(tmp_path):
    model_path = save(evil_names_model(), tmp_path / "evil.onnx")
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        np.save(data / f"{i}.npy", np.random.default_rng(i).normal(size=(1, 4)).astype(np.float32))
    recipe = Recipe.for_model(load_model(model_path), flags=("int8",), calibrator=CalibratorSpec(kind="toolkit", method="max"),
                              calibration_data=CalibrationDataSpec(kind="npy_dir", path=str(data)))
    doc_json = synthetic_int8_implicit()
    doc_json["Layers"][0]["Name"] = EVIL
    saved = _saved_build(tmp_path, recipe, doc=doc_json)
    out = tmp_path / "evil.html"
    assert main(["run", str(save_recipe(recipe, tmp_path / "evil.json")), "--report", str(out), "--graph", str(saved)]) == 0
    text = out.read_text(encoding="utf-8")
    assert EVIL not in text  # never raw, not even inside figure JSON
    assert html.escape(EVIL) in text
    doc = _Tables(text)
    assert not any(t == "img" for t, _ in doc.tags)
    assert not any(k.startswith("on") for _, a in doc.tags for k in a)
    assert EVIL in "".join(doc.text)  # shown as text


@pytest.mark.parametrize("content, needle", [
    ("{not json", "not valid JSON"),
    ('{"schema_version": 1, "model_path": "m.onnx", "model_sha256": "", "flagz": []}', "unknown key"),
    ('{"schema_version": 1, "model_path": "/nonexistent/m.onnx", "model_sha256": ""}', "m.onnx"),
])
def test_bad_recipe_exits_2_and_keeps_the_old_report(tmp_path, capsys, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    out = tmp_path / "report.html"
    out.write_text("previous report", encoding="utf-8")
    assert main(["run", str(bad), "--report", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert out.read_text(encoding="utf-8") == "previous report"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []


def test_missing_saved_build_and_wrong_report_suffix_exit_2(demo_recipe, tmp_path, capsys):
    _, path = demo_recipe
    assert main(["run", str(path), "--report", str(tmp_path / "r.html"), "--graph", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["run", str(path), "--report", str(tmp_path / "r.txt")]) == 2
    assert ".html" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_recipe_from_another_machine_finds_the_demo(demo_recipe, tmp_path):
    recipe, _ = demo_recipe
    moved = save_recipe(recipe.replace(model_path="/gpu/box/work/cls.onnx"), tmp_path / "moved.json")
    out = tmp_path / "m.html"
    assert main(["run", str(moved), "--report", str(out), "--no-calibrate"]) == 0
    assert "ch_ppocr_mobile_v2.0_cls_infer.onnx" in out.read_text(encoding="utf-8")


REAL = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "trt86").glob("**/conv_relu_int8_implicit"))


@pytest.mark.skipif(not REAL, reason="the real TensorRT 8.6 fixtures are not in this checkout")
def test_report_of_a_real_tensorrt_build(demo_recipe, tmp_path):
    _, path = demo_recipe
    out = tmp_path / "real.html"
    assert main(["run", str(path), "--report", str(out), "--no-calibrate", "--graph", str(REAL[0])]) == 0
    doc = _Tables(out.read_text(encoding="utf-8"))
    layers = next(t for t in doc.tables if t and t[0][:2] == ["name", "type"])
    real = load_saved_build(REAL[0])
    assert len(layers) - 1 == len(as_graph(real).layers)
    assert {r[3] for r in layers[1:]} >= {"INT8"}
    body = "".join(doc.text)
    assert "8.6" in real.trt_version and "does not match the recipe" in body  # a tiny model, not the demo


def test_a_malformed_timings_file_beside_a_saved_build_exits_2_naming_it(demo_recipe, tmp_path, capsys):
    import shutil

    _, path = demo_recipe
    saved = tmp_path / "saved"
    shutil.copytree(REAL[0], saved)
    (saved / "timings.json").write_text('{"layers": {"conv1": "fast"}}')
    out = tmp_path / "r.html"
    assert main(["run", str(path), "--report", str(out), "--no-calibrate", "--graph", str(saved)]) == 2
    err = capsys.readouterr().err
    assert "timings.json" in err and "Traceback" not in err
    assert not out.exists()


def test_step_lines_keep_the_detail_whole_and_wrap_at_spaces():
    from trtwidgets.cli.run import _step_lines

    words = [f"word{i:03d}" for i in range(60)]
    path = "/data/" + "x" * 150 + "/model.onnx"
    lines = _step_lines({"step": "calibrate", "status": "done", "detail": " ".join(words) + " " + path})
    assert len(lines) > 1 and lines[0].startswith("  calibrate")
    assert all(line[:36].strip() == "" and line[36] != " " for line in lines[1:])  # continuations under the detail column
    # Every word and the long path whole, in order: nothing cut mid-word.
    assert " ".join(line[36:] for line in lines).split() == words + [path]
    assert all(len(line) <= 36 + 110 for line in lines if path not in line)
