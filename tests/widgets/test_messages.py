"""Messages a person can act on (issue 15): install advice in one line, why-not-INT8 causes once."""

from __future__ import annotations

import re

from tests.conftest import FIXTURES
from trtwidgets.widgets.calibrator import CalibratorPicker
from trtwidgets.widgets.flags import FlagsPicker


def _outside_details(html: str) -> str:
    return re.sub(r"<details.*?</details>", "", html, flags=re.S)


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def _features_unavailable():
    from trtwidgets.trt.features import features_unavailable

    return features_unavailable("No module named 'tensorrt'")


def test_install_advice_is_one_line_with_the_details_behind_a_disclosure():
    f = _features_unavailable()
    for note in (FlagsPicker(f).note.value, CalibratorPicker(f).note.value):
        visible = _text(_outside_details(note))
        assert "No TensorRT here" in visible
        assert "pip install" not in visible and "extra-index-url" not in visible
        assert "pip install" in note and "<summary" in note  # still there, one click away
    cal = _text(_outside_details(CalibratorPicker(f).note.value))
    assert len(cal) < 200, cal


def test_build_panel_without_tensorrt_says_it_in_one_line():
    import pytest

    from trtwidgets import trt
    from trtwidgets.widgets.build_panel import BuildPanel

    if trt.available():
        pytest.skip("TensorRT is installed here")
    panel = BuildPanel()
    visible = _text(_outside_details(panel.result.value))
    assert "TensorRT is not installed here" in visible and "pip install" not in visible
    assert "pip install" in panel.result.value


def test_inspector_explains_each_cause_once_and_rows_stay_short():
    from trtwidgets.widgets.inspector import Inspector

    insp = Inspector(FIXTURES / "trt86" / "cls_static_qdq_int8" / "engine.graph.json")
    causes = insp.causes.value
    assert "one explanation per cause" in causes
    assert causes.count("Explicit quantization: TensorRT runs a layer in INT8 only where") == 1
    rows = insp.table.loc[insp.table["why_not_int8"] == "NO_SCALE", "why_not_int8_reason"]
    assert len(rows) > 1 and all(len(r) < 90 for r in rows)
