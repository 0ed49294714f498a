"""The headless install (issue 47): ``pip install trtwidgets`` without the ``lab`` extra.

The command line and the API's computing steps run without ipywidgets, anywidget and plotly (the ``lab`` extra
brings them, with JupyterLab): each command runs in a process where importing those packages fails, as on a
machine that never installed them. What needs them says so and names the extra.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from trtwidgets import demo

LAB = ("plotly", "ipywidgets", "anywidget")

#: Makes the lab packages unimportable in the child, as an install without the extra.
_BLOCK = textwrap.dedent(f"""
    import sys
    class _NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {LAB!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None
    sys.meta_path.insert(0, _NotInstalled())
""")


def _headless(code: str, tmp_path):
    return subprocess.run([sys.executable, "-c", _BLOCK + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def _cli(argv, tmp_path):
    return _headless(f"from trtwidgets.cli import main\nraise SystemExit(main({list(map(str, argv))!r}))", tmp_path)


def test_the_blocker_blocks(tmp_path):
    proc = _headless("import plotly", tmp_path)
    assert proc.returncode != 0 and "No module named 'plotly'" in proc.stderr


def test_calibrate_export_and_plan_run_headless(tmp_path):
    model = demo.MODEL_PATH
    proc = _cli(["calibrate", model, "--data", "demo", "--out", tmp_path / "cal.npz", "--no-progress"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = _cli(["export-qdq", model, "--calibration", tmp_path / "cal.npz", "--out", tmp_path / "m.qdq.onnx",
                 "--trt-version", "8.6", "--no-progress"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "m.qdq.onnx").is_file()
    proc = _cli(["plan", model, "--data", "demo", "--out", tmp_path / "plan", "--no-progress", "--max-samples", "48"],
                tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    page = (tmp_path / "plan" / "plan.html").read_text()
    assert "trtwidgets[lab]" in page and "<table" in page  # the table without the chart, and how to get it
    assert "plotly" not in proc.stderr.lower() or "trtwidgets[lab]" in proc.stderr


def test_inspect_and_the_api_run_headless(tmp_path):
    from pathlib import Path

    build = Path(__file__).resolve().parents[1] / "fixtures" / "trt86" / "cls_static_qdq_int8"
    proc = _cli(["inspect", build], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "engine layers" in proc.stdout
    proc = _headless("""
        import trtwidgets as tw
        from trtwidgets import demo
        m = tw.load(demo.MODEL_PATH)
        print(len(tw.lint(m, flags="fp16,int8")) >= 0, tw.Plan.__name__)
    """, tmp_path)
    assert proc.returncode == 0 and "True Plan" in proc.stdout, proc.stderr


def test_what_needs_the_lab_extra_says_so(tmp_path):
    proc = _headless("""
        import trtwidgets as tw
        try:
            tw.App
        except ImportError as err:
            print("refused:", err)
    """, tmp_path)
    assert proc.returncode == 0 and "refused:" in proc.stdout and "trtwidgets[lab]" in proc.stdout, proc.stderr
    # A shared page of a notebook with a Plotly figure embeds plotly.js, which comes with plotly.
    figure = {"data": [{"type": "bar", "x": ["a"], "y": [1]}], "layout": {}}
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "fig",
            "outputs": [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                         "data": {"application/vnd.plotly.v1+json": figure, "text/plain": "Figure"}}]}
    nb = tmp_path / "a.ipynb"
    nb.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    proc = _cli(["share", nb, "--out", tmp_path / "a.html"], tmp_path)
    assert proc.returncode == 2 and "trtwidgets[lab]" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "a.html").exists()
