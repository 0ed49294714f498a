"""``trtwidgets summary`` prints symbolic dims readably (issue 15), keeping the exporter's names beside them."""

from __future__ import annotations

from tests.own_models import dynamic_hw_model, save
from trtwidgets.cli import main


def test_summary_prints_n_3_h_w(tmp_path, capsys):
    path = save(dynamic_hw_model(), tmp_path / "detector.onnx")
    assert main(["summary", str(path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("input"))
    assert "float32 N×3×H×W" in line and "dim 2 H (p2o.DynamicDimension.1)" in line


def test_lint_names_open_dims_by_their_letter():
    import trtwidgets as tw

    (f,) = [f for f in tw.lint(dynamic_hw_model()) if f.code == "DYNAMIC_INPUT_NEEDS_PROFILE"]
    assert "x: dim 0 (N), dim 2 (H), dim 3 (W)" in f.message and "DynamicDimension" not in f.message
