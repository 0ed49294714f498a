from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.core.models import conv_model, qdq_conv_model, save
from trtwidgets.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_lint_real_model_text(capsys, cls_model_path):
    code, out, err = run_cli(capsys, "lint", str(cls_model_path))
    assert code == 0, err
    assert "DYNAMIC_INPUT_NEEDS_PROFILE" in out and "fix:" in out
    # x is [-1, 3, "?", "?"]: TensorRT would tie H and W together (SHARED_DIM_NAME).
    assert "SHARED_DIM_NAME" in out
    assert "0 error(s), 2 warning(s)" in out


def test_lint_json_and_exit_1(capsys, tmp_path):
    path = save(qdq_conv_model(), tmp_path / "q.onnx")
    code, out, _ = run_cli(capsys, "lint", str(path), "--flags", "fp16", "--trt-version", "8.6", "--json")
    assert code == 1
    findings = json.loads(out)
    assert isinstance(findings, list)
    for f in findings:
        assert {"code", "severity", "message", "fix"} <= set(f)
    assert "QDQ_REQUIRES_INT8" in {f["code"] for f in findings}
    code, out, _ = run_cli(capsys, "lint", str(path), "--flags", "fp16,int8", "--trt-version", "8.6", "--json")
    assert code == 0
    assert "QDQ_REQUIRES_INT8" not in {f["code"] for f in json.loads(out)}


def test_lint_calibrator_and_trt11(capsys, tmp_path):
    path = save(conv_model(batch=1), tmp_path / "c.onnx")
    code, out, _ = run_cli(capsys, "lint", str(path), "--flags", "int8", "--trt-version", "11.0",
                           "--calibrator", "entropy2", "--json")
    assert code == 1
    assert {"CALIBRATOR_REMOVED_ON_TRT11", "FLAGS_IGNORED_ON_TRT11"} <= {f["code"] for f in json.loads(out)}


@pytest.mark.parametrize("extra", [["--flags", "fp17"], ["--trt-version", "banana"], ["--calibrator", "magic"]])
def test_lint_bad_options_exit_2(capsys, cls_model_path, extra):
    code, out, err = run_cli(capsys, "lint", str(cls_model_path), *extra)
    assert code == 2 and out == ""
    assert err.startswith("trtwidgets lint: ") and "Fix:" in err and "Traceback" not in err


def test_lint_installed_version(capsys, tmp_path):
    from trtwidgets.core.model.trt_version import installed_trt_version

    path = save(conv_model(batch=1), tmp_path / "c.onnx")
    code, _, err = run_cli(capsys, "lint", str(path), "--trt-version", "installed")
    assert code == (0 if installed_trt_version() is not None else 2)
    if code == 2:
        assert "No installed TensorRT" in err


@pytest.mark.parametrize("command", ["lint", "summary"])
def test_bad_model_paths_exit_2(capsys, tmp_path, command):
    (tmp_path / "junk.onnx").write_bytes(b"\x00\xff" * 100)
    for bad in (tmp_path / "missing.onnx", tmp_path, tmp_path / "junk.onnx"):
        code, out, err = run_cli(capsys, command, str(bad))
        assert code == 2 and out == ""
        assert f"trtwidgets {command}: " in err and "Traceback" not in err


def test_summary_text(capsys, cls_model_path):
    code, out, _ = run_cli(capsys, "summary", str(cls_model_path))
    assert code == 0
    assert "input      x  float32" in out and "dynamic: dim 0" in out
    assert "Conv" in out and "Q/DQ       0 nodes" in out


def test_summary_json_matches_core(capsys, cls_model_path):
    from trtwidgets.core.model.load import load_model

    code, out, _ = run_cli(capsys, "summary", str(cls_model_path), "--json")
    assert code == 0
    assert json.loads(out) == json.loads(json.dumps(load_model(cls_model_path).summary.to_dict()))


def test_summary_qdq_model(capsys, tmp_path):
    path = save(qdq_conv_model(per_channel=True), tmp_path / "q.onnx")
    code, out, _ = run_cli(capsys, "summary", str(path))
    assert code == 0
    assert "Q/DQ       3 nodes (1 Q, 2 DQ; per-tensor 2, per-channel 1; int8 3)" in out


def test_console_script_module_entry(cls_model_path):
    # The real process: exit status and streams as a shell sees them.
    proc = subprocess.run([sys.executable, "-m", "trtwidgets", "lint", str(cls_model_path), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["code"] == "DYNAMIC_INPUT_NEEDS_PROFILE"
    proc = subprocess.run([sys.executable, "-m", "trtwidgets", "lint", "/nonexistent/m.onnx"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "No model at" in proc.stderr and "Traceback" not in proc.stderr
