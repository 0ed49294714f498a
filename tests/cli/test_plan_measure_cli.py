"""``trtwidgets plan measure`` from the command line (issue 32): it replaces only the plan it read, never imports
what plan.json names, and reads only the plan's own held-back check.

TensorRT is absent here: the measurement itself (the edge, ``measure_fn``) is the stand-in of
tests/trt/test_plan_measure_cpu.py and the GPU check is skipped; the command, the plan folder, the check and
the write are the real code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT
from tests.core.plan.plan_models import cli_plan_folder
from tests.trt.test_plan_measure_cpu import StandIn
from trtwidgets import trt
from trtwidgets.cli import main
from trtwidgets.core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ

pytestmark = pytest.mark.skipif(trt.available(), reason="TensorRT is installed: tests/gpu measure for real")

TIMES = {FP16: (1.0, 1.0, 1.0), INT8_IMPLICIT: (0.9, 0.9, 0.9), QDQ: (0.7, 0.7, 0.7)}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A model, its data, and a plan folder of it (written by the real `plan`)."""
    root = tmp_path_factory.mktemp("pm")
    assert cli_plan_folder(root, "8.6") in (0, 1)
    return root


def _copy(made, tmp_path):
    import shutil

    shutil.copytree(made / "plan", tmp_path / "plan")
    return tmp_path / "plan"


@pytest.fixture
def on_a_stand_in(monkeypatch):
    """No GPU here: the measurement is the stand-in (``during`` runs while it "builds")."""
    from trtwidgets.trt import plan_measure

    real = plan_measure.measure_plan
    hooks = {}

    def measure(plan, model=None, **kw):
        if "during" in hooks:
            hooks["during"]()
        return real(plan, model, **dict(kw, measure_fn=StandIn(TIMES)))

    monkeypatch.setattr(plan_measure, "require_measurable", lambda what="": None)
    monkeypatch.setattr(plan_measure, "measure_plan", measure)
    return hooks


def test_plan_measure_writes_the_measured_plan(made, tmp_path, on_a_stand_in, capsys):
    out = _copy(made, tmp_path)
    assert main(["plan", "measure", str(out), "--no-progress"]) == 0, capsys.readouterr().err
    doc = json.loads((out / "plan.json").read_text())
    assert doc["measured"]["status"] == "measured"


def test_a_plan_written_while_measuring_is_never_replaced_by_the_older_one_measured(made, tmp_path, on_a_stand_in,
                                                                                    capsys):
    """Issue 32: `plan measure` running while `plan --out` finished replaced the newer plan with the older one."""
    out = _copy(made, tmp_path)
    newer = {}

    def plan_out_finishes():  # what a concurrent `plan --out` does to the folder
        assert main(["plan", str(made / "m.onnx"), "--data", str(made / "data"), "--out", str(out),
                     "--no-progress", "--trt-version", "8.6", "--batch", "32", "--seed", "3"]) in (0, 1)
        newer["bytes"] = (out / "plan.json").read_bytes()

    on_a_stand_in["during"] = plan_out_finishes
    capsys.readouterr()
    code = main(["plan", "measure", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "changed while this plan was measured" in err and "Traceback" not in err
    assert (out / "plan.json").read_bytes() == newer["bytes"], "the newer plan was replaced"
    assert json.loads(newer["bytes"])["held_back"]["seed"] == 3
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")], "a staging folder was left"


def test_plan_measure_reads_only_its_own_held_back_check(made, tmp_path, on_a_stand_in, capsys):
    out = _copy(made, tmp_path)
    other = tmp_path / "other"
    assert main(["plan", str(made / "m.onnx"), "--data", str(made / "data"), "--out", str(other),
                 "--no-progress", "--trt-version", "8.6", "--seed", "5"]) in (0, 1)
    (out / "held_back.npz").write_bytes((other / "held_back.npz").read_bytes())
    before = (out / "plan.json").read_bytes()
    capsys.readouterr()
    assert main(["plan", "measure", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "is not this plan's held-back check" in err and "other held-back samples" in err
    assert (out / "plan.json").read_bytes() == before


def _with_spec(folder, spec):
    doc = json.loads((folder / "plan.json").read_text())
    doc["target"]["metric_spec"] = spec
    doc["target"]["metric"] = spec
    (folder / "plan.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("spec", ["evil_metric:x", "venv.__main__:x", "builtins:print", "this:x"])
def test_a_plan_folder_never_imports_the_metric_it_names(made, tmp_path, spec):
    """plan.json's metric_spec once ran code: a module shipped in the folder, venv's command line, print, this."""
    out = _copy(made, tmp_path)
    _with_spec(out, spec)
    (out / "evil_metric.py").write_text(textwrap.dedent(f"""
        open({str(tmp_path / 'IMPORTED')!r}, "w").write("imported")
        def x(reference, candidate):
            return 1.0
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(out)]))
    # Run from inside the folder, with the folder on PYTHONPATH: where a module shipped in it would import.
    res = subprocess.run([sys.executable, "-m", "trtwidgets", "plan", "measure", "."], cwd=out, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    assert "is not registered in this process" in res.stderr and f"--metric {spec}" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "IMPORTED").exists()
    assert not (out / "pyvenv.cfg").exists() and not [p for p in out.iterdir() if p.is_dir() and p.name not in
                                                      ("candidates", "__pycache__")]


def test_plan_measure_metric_imports_what_the_user_typed(made, tmp_path, on_a_stand_in, capsys, monkeypatch):
    from trtwidgets.core.accuracy.task_metrics import REGISTRY

    out = _copy(made, tmp_path)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "team_metrics_32b.py").write_text("def score(reference, candidate):\n    return 1.0\n")
    monkeypatch.syspath_prepend(str(lib))
    _with_spec(out, "team_metrics_32b:score")
    try:
        assert main(["plan", "measure", str(out), "--no-progress", "--metric", "team_metrics_32b:other"]) == 2
        assert "is not the plan's metric" in capsys.readouterr().err
        assert main(["plan", "measure", str(out), "--no-progress", "--metric", "team_metrics_32b:score"]) == 0
        assert json.loads((out / "plan.json").read_text())["measured"]["engine_check"]["judged"]
    finally:
        REGISTRY.pop("team_metrics_32b:score", None)
        sys.modules.pop("team_metrics_32b", None)
