"""``trtwidgets plan export PLAN_DIR --out FILE`` (issue 32: the README spoke of it; it was no command)."""

from __future__ import annotations

import json

import onnx
import pytest

from tests.core.plan.plan_models import cli_plan_folder
from trtwidgets.cli import main


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("pe")
    assert cli_plan_folder(root, "10.16") == 0
    return root / "plan"


def _int8_nodes(path):
    model = onnx.load(str(path))
    return {n.input[0] for n in model.graph.node if n.op_type == "DequantizeLinear"}


def test_plan_export_writes_the_pick_as_plan_wrote_it(plan_dir, tmp_path, capsys):
    capsys.readouterr()
    out = tmp_path / "pick.qdq.onnx"
    assert main(["plan", "export", str(plan_dir), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    # The same model plan wrote beside plan.json: the pick, exported as it was scored.
    assert out.read_bytes() == (plan_dir / "model.qdq.onnx").read_bytes()


def test_plan_export_a_candidate_by_index_and_fp16(plan_dir, tmp_path, capsys):
    doc = json.loads((plan_dir / "plan.json").read_text())
    last = len(doc["candidates"]) - 1
    out = tmp_path / "c.qdq.onnx"
    assert main(["plan", "export", str(plan_dir / "plan.json"), "--candidate", str(last), "--out", str(out),
                 "--model", str(plan_dir.parent / "m.onnx")]) == 0
    assert out.is_file() and _int8_nodes(out)
    capsys.readouterr()
    assert main(["plan", "export", str(plan_dir), "--candidate", "0", "--out", str(tmp_path / "fp16.onnx")]) == 0
    err = capsys.readouterr().err
    assert "quantizes nothing" in err and not (tmp_path / "fp16.onnx").exists()


@pytest.mark.parametrize("argv, phrase", [
    (["--candidate", "99", "--out", "{tmp}/x.onnx"], "no candidate 99"),
    (["--candidate", "-1", "--out", "{tmp}/x.onnx"], "no candidate -1"),
    (["--out", "{plan}/plan.json"], "the run's own input"),
    (["--out", "{plan}/model.qdq.onnx"], "is a file of the plan folder"),
    (["--out", "{plan}/held_back.npz"], "is a file of the plan folder"),
    (["--model", "{tmp}/missing.onnx", "--out", "{tmp}/x.onnx"], "missing.onnx"),
    (["--out", "{plan}"], "is a folder"),
])
def test_plan_export_bad_input_is_exit_2_and_writes_nothing(plan_dir, tmp_path, capsys, argv, phrase):
    before = {p.name: p.read_bytes() for p in plan_dir.iterdir() if p.is_file()}
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{plan}", str(plan_dir)) for a in argv]
    capsys.readouterr()
    assert main(["plan", "export", str(plan_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert phrase in err and "Why:" in err and "Fix:" in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in plan_dir.iterdir() if p.is_file()} == before
    assert not (tmp_path / "x.onnx").exists()


def test_plan_export_of_another_models_plan_is_refused(plan_dir, tmp_path, capsys):
    from tests.core.calib_models import conv_relu_model, save

    save(conv_relu_model(), tmp_path / "other.onnx")
    capsys.readouterr()
    assert main(["plan", "export", str(plan_dir), "--model", str(tmp_path / "other.onnx"),
                 "--out", str(tmp_path / "x.onnx")]) == 2
    assert not (tmp_path / "x.onnx").exists() and "Fix:" in capsys.readouterr().err
