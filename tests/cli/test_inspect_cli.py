"""``trtwidgets inspect``: CSV, JSON summary, recipe and cache, and bad input (exit 2)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from trtwidgets.cli import main
from trtwidgets.core.calibration.cache import write_cache

from ..core import inspector_samples as s


@pytest.fixture()
def int8_graph_path(tmp_path):
    path = tmp_path / "int8.graph.json"
    path.write_text(s.trt_text(s.synthetic_int8_implicit()), encoding="utf-8")
    return path


def test_csv_has_one_row_per_layer(int8_graph_path, tmp_path, capsys):
    out = tmp_path / "layers.csv"
    assert main(["inspect", str(int8_graph_path), "--csv", str(out)]) == 0
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 9
    assert {"name", "type", "input_precision", "output_precision", "why_not_int8"} <= set(rows[0])
    conv = next(r for r in rows if r["name"] == "conv1 + relu1")
    assert conv["input_precision"] == "INT8" and conv["why_not_int8"] == "BIAS_FLOAT"
    text = capsys.readouterr().out
    assert "INT8" in text and "why not INT8" in text


def test_json_summary_with_recipe_and_cache(int8_graph_path, tmp_path, capsys):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"flags": ["fp16", "int8"], "calibrator": {"kind": "toolkit"}}))
    cache = tmp_path / "calibration.cache"
    write_cache({n: 1.0 for n in s.SYNTHETIC_CACHE}, cache)
    assert main(["inspect", str(int8_graph_path), "--json", "--recipe", str(recipe), "--cache", str(cache)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["layers"] == 9
    assert summary["precisions"]["INT8"]["layers"] == 5
    assert summary["precisions"]["FP16"]["share"] == pytest.approx(4 / 9, abs=1e-6)
    assert summary["why_not_int8"]["NO_SCALE"] == 1  # fc_out is not in the cache


def test_dynamic_without_context_warns(tmp_path, capsys):
    path = tmp_path / "dyn.graph.json"
    path.write_text(s.trt_text(s.synthetic_dynamic_na()))
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning:" in out and "execution context" in out


@pytest.mark.parametrize("content, expected", [
    ("this is not json", "is not JSON"),
    (json.dumps({"Layers": ["conv1 + relu1", "softmax"]}), "ProfilingVerbosity.DETAILED"),
    (json.dumps({"weights": [1, 2]}), "not TensorRT engine-inspector output"),
    (s.trt_text(s.synthetic_fp16())[:300], "truncated"),
])
def test_bad_input_exits_2_with_message(tmp_path, capsys, content, expected):
    path = tmp_path / "bad.json"
    path.write_text(content)
    out_csv = tmp_path / "out.csv"
    assert main(["inspect", str(path), "--csv", str(out_csv)]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert not out_csv.exists()


def test_console_entry_point(int8_graph_path):
    proc = subprocess.run([sys.executable, "-m", "trtwidgets", "inspect", str(int8_graph_path), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["layers"] == 9


def test_build_folder_siblings_are_picked_up(tmp_path, capsys):
    folder = tmp_path / "build"
    folder.mkdir()
    graph = folder / "engine.graph.json"
    graph.write_text(s.trt_text(s.synthetic_fp16()))
    (folder / "recipe.json").write_text(json.dumps({"flags": ["fp16"]}))
    assert main(["inspect", str(graph), "--json"]) == 0
    captured = capsys.readouterr()
    assert "recipe.json" in captured.err
    summary = json.loads(captured.out)
    assert summary["why_not_int8"] == {"INT8_NOT_ENABLED": 8}
    assert main(["inspect", str(graph), "--json", "--no-siblings"]) == 0
    assert "recipe.json" not in capsys.readouterr().err


def test_compare_builds(tmp_path, capsys):
    paths = []
    for name, doc in (("fp16", s.synthetic_fp16()), ("int8", s.synthetic_int8_implicit())):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "engine.graph.json").write_text(s.trt_text(doc))
        paths.append(str(folder / "engine.graph.json"))
    assert main(["inspect", paths[0], "--compare", paths[1]]) == 0
    out = capsys.readouterr().out
    assert "fp16" in out and "int8" in out
    assert "conv1 + relu1" in out and "FP16 -> INT8" in out
    assert main(["inspect", paths[0], "--compare", paths[1], "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["compare"]["builds"] == ["fp16", "int8"]
    assert summary["compare"]["precision_counts"]["int8"]["INT8"] == 5
    assert summary["compare"]["differing_layers"] >= 5


# --------------------------------------------------------------------------- real TensorRT 8.6 build folders

TRT86 = Path(__file__).resolve().parents[1] / "fixtures" / "trt86"
REAL = ["cls_static_int8_entropy2", "cls_static_fp16", "cls_static_qdq_int8", "cls_dynamic_int8_entropy2"]


def _means(name):
    doc = json.loads((TRT86 / name / "timings.json").read_text())
    return {r["name"]: r["mean_ms"] for r in doc["layers"]["layers"]}


@pytest.mark.parametrize("name", REAL)
def test_real_build_folder_with_timings(name, tmp_path, capsys):
    graph = str(TRT86 / name / "engine.graph.json")
    assert main(["inspect", graph]) == 0
    captured = capsys.readouterr()
    assert "timings.json" in captured.err and "ms (" in captured.out  # time share per precision

    out = tmp_path / "layers.csv"
    assert main(["inspect", graph, "--csv", str(out)]) == 0
    capsys.readouterr()
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    means = _means(name)
    timed = [r for r in rows if r["name"] in means]
    assert len(timed) >= 0.9 * len(rows)
    for r in timed:
        assert float(r["latency_ms"]) == pytest.approx(means[r["name"]], rel=1e-6)

    assert main(["inspect", graph, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    total = sum(d["time_ms"] or 0.0 for d in summary["precisions"].values())
    assert total == pytest.approx(sum(means[r["name"]] for r in timed), rel=1e-4)


@pytest.mark.parametrize("content, expected", [
    (json.dumps({"conv": [1.0, 2.0]}), "not per-layer timings"),
    (json.dumps({"latency": {"mean_ms": 0.4}, "layers": {"runs": 2, "layers": []}}), "no per-layer times"),
    ("{not json", "not JSON"),
])
def test_bad_sibling_timings_exit_2_with_message(tmp_path, capsys, content, expected):
    folder = tmp_path / "build"
    folder.mkdir()
    graph = folder / "engine.graph.json"
    graph.write_bytes((TRT86 / "cls_static_fp16" / "engine.graph.json").read_bytes())
    (folder / "timings.json").write_text(content)
    out_csv = tmp_path / "out.csv"
    assert main(["inspect", str(graph), "--csv", str(out_csv)]) == 2
    err = capsys.readouterr().err
    assert expected in err and "timings.json" in err and "Traceback" not in err
    assert "--no-siblings" in err
    assert not out_csv.exists()
    # The advice works: without siblings the same folder inspects.
    assert main(["inspect", str(graph), "--no-siblings", "--json"]) == 0


def test_bad_sibling_recipe_exits_2_with_message(tmp_path, capsys):
    folder = tmp_path / "build"
    folder.mkdir()
    graph = folder / "engine.graph.json"
    graph.write_bytes((TRT86 / "cls_static_fp16" / "engine.graph.json").read_bytes())
    (folder / "recipe.json").write_text(json.dumps({"flags": 5}))
    assert main(["inspect", str(graph)]) == 2
    err = capsys.readouterr().err
    assert "recipe.json" in err and "Traceback" not in err


def _engine_total_ms(name):
    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    means = _means(name)
    return sum(means.get(layer.name, 0.0) for layer in parse_inspector_json(TRT86 / name / "engine.graph.json").layers)


@pytest.mark.parametrize("how", ["positional", "--compare"])
def test_compare_real_builds_prints_each_builds_time(how, capsys):
    a, b = "cls_static_fp16", "cls_static_int8_entropy2"
    paths = [str(TRT86 / n / "engine.graph.json") for n in (a, b)]
    argv = ["inspect", paths[0], paths[1]] if how == "positional" else ["inspect", paths[0], "--compare", paths[1]]
    assert main(argv) == 0
    out = capsys.readouterr().out
    time_rows = [line for line in out.splitlines() if line.startswith("time ms")]
    assert len(time_rows) == 1
    shown = [float(v) for v in time_rows[0].split()[2:]]
    assert shown == pytest.approx([_engine_total_ms(a), _engine_total_ms(b)], abs=1e-4)
    assert main(argv + ["--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["compare"]["builds"] == [a, b]
    assert summary["compare"]["total_latency_ms"][b] == pytest.approx(_engine_total_ms(b), rel=1e-6)
    # Without the build folders' files there is no time to show.
    assert main(argv + ["--no-siblings"]) == 0
    assert "time ms" not in capsys.readouterr().out


def test_network_prebuild_view_printed_and_exported(tmp_path, capsys):
    from collections import Counter

    raw = json.loads((TRT86 / "cls_static_qdq_int8" / "network_layers.json").read_text())
    out = tmp_path / "network.csv"
    assert main(["inspect", "--network", str(TRT86 / "cls_static_qdq_int8"), "--csv", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{len(raw)} network layers before the build" in text
    assert raw[-1]["name"] in text  # every layer is listed
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["name"] for r in rows] == [r["name"] for r in raw]
    assert {"requested_precision", "output_types", "precision_is_set"} <= set(rows[0])
    assert main(["inspect", "--network", str(TRT86 / "cls_static_qdq_int8" / "network_layers.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["types"] == dict(Counter(r["type"] for r in raw))


def test_build_folder_argument_shows_engine_and_prebuild_gist(capsys):
    folder = TRT86 / "cls_static_fp16"
    assert main(["inspect", str(folder), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    raw = json.loads((folder / "network_layers.json").read_text())
    assert summary["layers"] == len(json.loads((folder / "engine.graph.json").read_text(), strict=False)["Layers"])
    assert summary["network"]["layers"] == len(raw)
    assert main(["inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"{len(raw)} network layers before the build" in out and "inspect --network" in out
    assert main(["inspect", str(folder), "--no-siblings", "--json"]) == 0
    assert "network" not in json.loads(capsys.readouterr().out)


def test_network_bad_input_exits_2(tmp_path, capsys):
    assert main(["inspect"]) == 2
    assert "Nothing to inspect" in capsys.readouterr().err
    (tmp_path / "network_layers.json").write_text(json.dumps({"Layers": []}))
    assert main(["inspect", "--network", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a network layer list" in err and "Traceback" not in err
    assert main(["inspect", "--network", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
