"""Inspector and compare widgets, checked through their state (no browser)."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.widgets.compare import CompareView
from trtwidgets.widgets.inspector import ALL, Inspector

from ..core import inspector_samples as s


class _Rows(HTMLParser):
    """Tags and the text of each table row, as a browser would parse them."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.rows, self._row = [], [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._row.append("")  # one entry per cell, empty ones included

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._row:
            self._row[-1] += data


def _body_rows(widget):
    return _Rows(widget.table_view.value).rows[1:]  # without the header


@pytest.fixture()
def int8_path(tmp_path):
    path = tmp_path / "int8.graph.json"
    path.write_text(s.trt_text(s.synthetic_int8_implicit()))
    return path


def test_from_path_renders_table_chart_and_filters(int8_path):
    w = Inspector(int8_path, recipe={"flags": ["fp16", "int8"]}, calibration=s.SYNTHETIC_CACHE)
    assert w.message.value == ""
    assert len(_body_rows(w)) == 9
    assert "showing 9 of 9" in w.count.value
    assert list(w.precision.options) == [ALL, "INT8", "FP16"]
    assert "Convolution" in w.layer_type.options
    import plotly.graph_objects as go

    from trtwidgets.core.engine.layer_table import PRECISION_COLORS

    assert isinstance(w.chart, go.FigureWidget)
    bar = w.chart.data[0]
    assert list(bar.x) == ["INT8", "FP16"] and list(bar.y) == [5, 4]
    assert list(bar.marker.color) == [PRECISION_COLORS["INT8"], PRECISION_COLORS["FP16"]]
    assert "NO_SCALE" in w.causes.value

    w.precision.value = "FP16"
    assert {r[3] for r in _body_rows(w)} == {"FP16"}  # the precision column
    w.precision.value = ALL
    w.search.value = "hswish"  # an ONNX node of the pointwise layer
    rows = _body_rows(w)
    assert len(rows) == 1 and rows[0][0].startswith("PWN(")
    w.search.value = ""
    w.layer_type.value = "Reformat"
    assert "showing 2 of 2 matching" in w.count.value
    w.layer_type.value = ALL
    assert "NO_SCALE" in w.why.options
    w.why.value = "NO_SCALE"
    assert [r[0] for r in _body_rows(w)] == ["fc_weight + fc"]
    w.why.value = ALL
    w.sort.value = "name"
    w.descending.value = True
    names = [r[0] for r in _body_rows(w)]
    assert names == sorted(names, reverse=True)


def test_from_graph_and_from_a_build_result(int8_path):
    graph = parse_inspector_json(int8_path)
    assert len(Inspector(graph).table) == 9

    class BuildResult:  # the fields of trtwidgets.trt.build.BuildResult the inspector reads
        inspector_json = int8_path.read_text()
        inspector_json_path = str(int8_path)

    w = Inspector(BuildResult())
    assert w.graph.source == str(int8_path) and len(w.table) == 9


def test_max_rows_and_showing_note():
    w = Inspector(json.dumps(s.synthetic_large(300)), max_rows=50)
    assert len(_body_rows(w)) == 50
    assert "showing 50 of 300 matching layers" in w.count.value
    w.search.value = "relu_29"  # relu_29, relu_290..299
    assert "showing 11 of 11" in w.count.value


def test_bad_input_shows_message_and_keeps_the_table(int8_path, tmp_path):
    w = Inspector(int8_path)
    before = w.table_view.value
    bad = tmp_path / "names.json"
    bad.write_text(json.dumps(s.synthetic_names_only()))
    assert w.load(bad) is False
    assert "ProfilingVerbosity.DETAILED" in w.message.value
    assert w.table_view.value == before and len(w.table) == 9
    assert w.load(int8_path) is True and w.message.value == ""


def test_error_panel_on_first_load(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(s.trt_text(s.synthetic_fp16())[:500])
    w = Inspector(path)
    assert "truncated" in w.message.value and w.table is None
    assert w.table_view.value == ""


def test_dynamic_warning_panel():
    w = Inspector(s.trt_text(s.synthetic_dynamic_na()))
    assert "N/A due to dynamic shapes" in w.warnings.value
    assert "execution context" in w.warnings.value


def test_names_are_escaped():
    doc = s.synthetic_fp16()
    evil = '<img src=x onerror="alert(1)">'
    doc["Layers"][1]["Name"] = evil
    doc["Layers"][1]["Metadata"] = s.metadata(evil)
    w = Inspector(json.dumps(doc))
    parsed = _Rows(w.table_view.value)
    assert "img" not in parsed.tags
    assert any(evil in "".join(r) for r in parsed.rows)


def test_session_latest_build(int8_path):
    from trtwidgets.widgets.session import Session

    session = Session()
    w = Inspector(session=session)
    assert w.table is None

    class BuildResult:
        inspector_json = int8_path.read_text()
        inspector_json_path = str(int8_path)

    session.builds = (BuildResult(),)
    assert len(w.table) == 9


def test_compare_view():
    v = CompareView({"fp16": s.trt_text(s.synthetic_fp16()), "int8": s.trt_text(s.synthetic_int8_implicit())})
    assert [t.name for t in v.chart.data] == ["fp16 layers", "int8 layers"]
    rows = _Rows(v.table_view.value).rows
    header, body = rows[0], rows[1:]
    assert "fp16 precision" in header and "int8 precision" in header
    assert any(r[0] == "conv1 + relu1" for r in body)
    assert not any(r[0] == "softmax" for r in body)
    v.only_differences.value = False
    assert any(r[0] == "softmax" for r in _Rows(v.table_view.value).rows[1:])
    assert v.load([s.trt_text(s.synthetic_fp16())]) is False
    assert "two or more builds" in v.message.value
    assert v.comparison is not None


def test_build_folder_recipe_and_cache_are_used(tmp_path):
    from trtwidgets.core.calibration.cache import write_cache

    folder = tmp_path / "int8_build"
    folder.mkdir()
    (folder / "engine.graph.json").write_text(s.trt_text(s.synthetic_int8_implicit()))
    (folder / "recipe.json").write_text(json.dumps({"flags": ["fp16", "int8"], "calibrator": {"kind": "toolkit"}}))
    write_cache({n: 1.0 for n in s.SYNTHETIC_CACHE}, folder / "calibration.cache")
    w = Inspector(str(folder / "engine.graph.json"))
    reasons = dict(zip(w.table["name"], w.table["why_not_int8"]))
    assert reasons["fc_weight + fc"] == "NO_SCALE"  # needs the cache: fc_out is missing from it
    plain = Inspector(folder / "engine.graph.json", use_siblings=False)
    assert dict(zip(plain.table["name"], plain.table["why_not_int8"]))["fc_weight + fc"] == "HIGHER_PRECISION_FASTER"


def test_saved_real_build_shows_its_recipe_causes(fixtures_dir):
    from trtwidgets.core.engine.saved_build import load_saved_build

    saved = load_saved_build(fixtures_dir / "trt86" / "tiny" / "int8_toolkit_cache")
    w = Inspector(saved)
    assert w.message.value == ""
    assert set(w.table["why_not_int8"]) == {"FIRST_TACTIC"}  # from the saved recipe: level 0
    assert list(w.chart.data[0].x) == ["FP32"]


# --------------------------------------------------------------------------- real TensorRT 8.6 build folders

REAL = ["cls_static_int8_entropy2", "cls_static_fp16", "cls_static_qdq_int8", "cls_dynamic_int8_entropy2"]


@pytest.mark.parametrize("name", REAL)
def test_real_build_folder_fills_latency_from_its_timings(fixtures_dir, name):
    folder = fixtures_dir / "trt86" / name
    doc = json.loads((folder / "timings.json").read_text())
    means = {r["name"]: r["mean_ms"] for r in doc["layers"]["layers"]}
    w = Inspector(str(folder / "engine.graph.json"))
    assert w.message.value == ""
    timed = w.table[w.table["name"].isin(list(means))]
    assert len(timed) >= 0.9 * len(w.table)
    assert list(timed["latency_ms"]) == pytest.approx([means[n] for n in timed["name"]])
    # The rendered table shows the time column filled (4 significant digits).
    header = _Rows(w.table_view.value).rows[0]
    col = header.index("latency_ms")
    first = next(r for r in _body_rows(w) if r[0] in means)
    assert float(first[col]) == pytest.approx(means[first[0]], rel=1e-3)


@pytest.mark.parametrize("sibling, content, expected", [
    ("timings.json", json.dumps({"conv": [1.0, 2.0]}), "not per-layer timings"),
    ("timings.json", "{not json", "not JSON"),
    ("recipe.json", json.dumps({"flags": 5}), "flags"),
    # Odd but usable: numbers where names are expected are read as text, nothing is refused.
    ("recipe.json", json.dumps({"flags": ["int8"], "layer_precisions": [{"pattern": 3, "precision": 1}]}), None),
])
def test_bad_sibling_file_is_an_error_panel(fixtures_dir, tmp_path, sibling, content, expected):
    folder = tmp_path / "build"
    folder.mkdir()
    graph = folder / "engine.graph.json"
    graph.write_bytes((fixtures_dir / "trt86" / "cls_static_fp16" / "engine.graph.json").read_bytes())
    (folder / sibling).write_text(content)
    w = Inspector(str(graph))
    if expected is None:
        assert w.message.value == "" and len(w.table) > 0
        return
    assert w.table is None
    assert "trtw-error" in w.message.value and expected in w.message.value
    assert "use_siblings=False" in w.message.value and sibling in w.message.value
    # The advice works.
    assert Inspector(str(graph), use_siblings=False).table is not None


def test_bad_sibling_keeps_the_previous_table(fixtures_dir, tmp_path):
    w = Inspector(str(fixtures_dir / "trt86" / "cls_static_fp16" / "engine.graph.json"))
    before = w.table
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "engine.graph.json").write_bytes((fixtures_dir / "trt86" / "cls_static_fp32" / "engine.graph.json")
                                               .read_bytes())
    (folder / "timings.json").write_text(json.dumps({"latency": {"mean_ms": 1.0}}))
    assert w.load(str(folder / "engine.graph.json")) is False
    assert w.table is before and "no per-layer times" in w.message.value


def test_real_build_shows_its_network_before_the_build(fixtures_dir):
    from trtwidgets.core.engine.saved_build import load_saved_build

    folder = fixtures_dir / "trt86" / "cls_static_qdq_int8"
    raw = json.loads((folder / "network_layers.json").read_text())
    for source in (str(folder / "engine.graph.json"), load_saved_build(folder)):
        w = Inspector(source, max_rows=1000)
        assert w.network_section.layout.display == ""
        assert list(w.network_table["name"]) == [r["name"] for r in raw]
        rows = _Rows(w.network_view.value).rows
        assert len(rows) - 1 == len(raw) and rows[0][:3] == ["index", "name", "type"]
        assert f"{len(raw)} network layers" in w.network_view.value
    # A bare JSON text has no build folder: no section.
    w = Inspector((folder / "engine.graph.json").read_text())
    assert w.network_table is None and w.network_section.layout.display == "none"


def test_broken_network_list_leaves_the_engine_view(fixtures_dir, tmp_path):
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "engine.graph.json").write_bytes((fixtures_dir / "trt86" / "cls_static_fp16" / "engine.graph.json")
                                               .read_bytes())
    (folder / "network_layers.json").write_text("[1, 2]")
    w = Inspector(str(folder / "engine.graph.json"))
    assert w.message.value == "" and w.table is not None
    assert "trtw-error" in w.network_view.value and "not a network layer list" in w.network_view.value
    assert w.network_section.layout.display == ""
