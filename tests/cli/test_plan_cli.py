"""``trtwidgets plan``: files written, the table printed, exit codes."""

from __future__ import annotations

import json

import numpy as np
import onnx

from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.cli import main


def _data(tmp_path, n=16):
    d = tmp_path / "data"
    d.mkdir()
    for i, f in enumerate(feeds(n)):
        np.save(d / f"s{i:03d}.npy", f["x"])
    return d


def test_plan_writes_plan_html_and_the_qdq_model(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(conv_stack(), model)
    out = tmp_path / "plan"
    code = main(["plan", str(model), "--data", str(_data(tmp_path)), "--out", str(out), "--no-progress",
                 "--trt-version", "10.16", "--batch", "32"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "FP16 (no INT8)" in text and "->" in text and "searched in" in text
    doc = json.loads((out / "plan.json").read_text())
    assert doc["candidates"][0]["name"].startswith("FP16")
    html = (out / "plan.html").read_text()
    assert "plotly" in html.lower() and "Candidates: accuracy against latency" in html
    # The held-back check travels with the plan, for `plan measure` to judge the engines by on a GPU machine.
    from trtwidgets.core.plan.engine_check import CHECK_FILE, EngineCheck
    from trtwidgets.core.plan.plan_artifact import Plan

    plan = Plan.load(out)
    assert plan.to_dict() == doc  # the folder's plan.json reads back as the Plan it was written from
    check = EngineCheck.load(out / CHECK_FILE, plan.target)
    assert len(check.feeds) == len(doc["held_back"]["held_back"]) == check.outputs["y"].shape[0]
    assert check.verdict(check.outputs).meets is True
    assert check.verdict({"y": -check.outputs["y"]}).meets is False
    if doc["candidates"][doc["recommended"]]["quantized"]:
        qdq = onnx.load(out / "model.qdq.onnx")
        assert any(n.op_type == "QuantizeLinear" for n in qdq.graph.node)
    else:
        assert not (out / "model.qdq.onnx").exists()


def test_plan_exits_1_when_nothing_meets_the_target(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(conv_stack(), model)
    code = main(["plan", str(model), "--data", str(_data(tmp_path, 8)), "--out", str(tmp_path / "o"),
                 "--no-progress", "--target-snr", "500"])
    err = capsys.readouterr().err
    assert code == 1 and "no candidate meets the target" in err
    assert (tmp_path / "o" / "plan.json").exists()  # the search is kept even when it fails


def test_plan_bad_input_is_exit_2(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(conv_stack(), model)
    data = _data(tmp_path, 4)
    assert main(["plan", str(model), "--data", str(data), "--out", str(tmp_path / "o"), "--holdout", "1.5"]) == 2
    assert "holdout" in capsys.readouterr().err
    assert main(["plan", str(model), "--data", str(data), "--out", str(tmp_path / "o"), "--metric", "f1"]) == 2
    assert "Unknown metric" in capsys.readouterr().err
    assert main(["plan", str(model), "--data", str(data), "--out", str(tmp_path / "o"), "--metric", "top1"]) == 2
    assert "--labels" in capsys.readouterr().err


def test_plan_records_its_placement_and_can_leave_rule_8_off(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(conv_stack(), model)
    data = _data(tmp_path)
    for flag, dense in (([], True), (["--no-dense-int8"], False)):
        out = tmp_path / f"plan{int(dense)}"
        code = main(["plan", str(model), "--data", str(data), "--out", str(out), "--no-progress",
                     "--trt-version", "10.16", "--batch", "32"] + flag)
        assert code in (0, 1), capsys.readouterr().out
        doc = json.loads((out / "plan.json").read_text())
        assert doc["placement"] == {"dense_int8": dense}
        # The QdqOptions the candidates were scored with: the CLI's inputs on the one set of defaults.
        assert doc["options"]["dense_int8"] is dense and doc["options"]["trt_version"] == "10.16"
        # The range method is the calibration's (plan.json's ranges), not an export option.
        assert doc["options"]["high_precision"] == "fp16" and "method" not in doc["options"]
