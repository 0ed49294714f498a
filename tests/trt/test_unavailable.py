"""Without TensorRT: available() is False, and building says what to install (subprocesses hide tensorrt)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# `sys.modules["tensorrt"] = None` makes `import tensorrt` raise ImportError, as on a machine without it.
_HIDE = "import sys; sys.modules['tensorrt'] = None\n"


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _HIDE + code], cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_available_is_false_and_tensorrt_raises_with_install_advice():
    out = _run(
        "import json\n"
        "from trtwidgets import trt\n"
        "from trtwidgets.core.common.errors import TensorRTUnavailable\n"
        "try:\n"
        "    trt.tensorrt(); err = None\n"
        "except TensorRTUnavailable as e:\n"
        "    err = e.to_dict()\n"
        "print(json.dumps({'available': trt.available(), 'version': trt.version(), 'err': err}))\n")
    assert out["available"] is False and out["version"] is None
    assert out["err"]["error"] == "TensorRTUnavailable"
    assert 'pip install "trtwidgets[trt]"' in out["err"]["fix"]
    assert "pypi.nvidia.com" in out["err"]["fix"] and "TensorRT 11" in out["err"]["fix"]


def test_build_raises_tensorrt_unavailable_before_touching_files(tmp_path):
    out_dir = tmp_path / "b"
    out = _run(
        "import json\n"
        "from trtwidgets import demo\n"
        "from trtwidgets.core.model.load import load_model\n"
        "from trtwidgets.core.recipe.recipe import Recipe\n"
        "from trtwidgets.core.common.errors import TensorRTUnavailable\n"
        "from trtwidgets.trt.build import build\n"
        "r = Recipe.for_model(load_model(demo.MODEL_PATH), flags=('fp16',))\n"
        "try:\n"
        f"    build(r, out_dir={str(out_dir)!r}, progress=False); err = None\n"
        "except TensorRTUnavailable as e:\n"
        "    err = e.to_dict()\n"
        "print(json.dumps({'err': err}))\n")
    assert out["err"] is not None and "pip install" in out["err"]["fix"]
    assert not out_dir.exists()


def test_cli_build_without_tensorrt_exits_2_with_advice(tmp_path):
    from tests.gpu import models
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import Recipe, save_recipe

    recipe = Recipe.for_model(load_model(models.save(models.conv_relu(), tmp_path / "m.onnx")))
    path = save_recipe(recipe, tmp_path / "recipe.json")
    code = ("import sys; from trtwidgets.cli import main\n"
            f"rc = main(['build', {str(path)!r}, '--out', {str(tmp_path / 'out')!r}])\n"
            "print('{\"rc\": %d}' % rc)\n")
    proc = subprocess.run([sys.executable, "-c", _HIDE + code], cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"rc": 2}, proc.stderr
    assert "TensorRT is not available" in proc.stderr and "pip install" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_build_missing_recipe_is_bad_input(tmp_path, capsys):
    from trtwidgets.cli import main

    assert main(["build", str(tmp_path / "nope.json")]) == 2
    assert "No recipe at" in capsys.readouterr().err
