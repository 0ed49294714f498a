"""CLI error paths of `trtwidgets bench` and `trtwidgets compare` where TensorRT is missing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trtwidgets import demo
from trtwidgets.cli import main
from trtwidgets.core.accuracy.reference import load_reference


@pytest.fixture
def no_trt(monkeypatch):
    # The CPU test environment has no TensorRT; make that explicit so a developer's install does not change the test.
    import trtwidgets.trt as trt_pkg

    monkeypatch.setenv("TRTWIDGETS_DISABLE_TRT", "1")
    monkeypatch.setattr(trt_pkg, "_module", None)


@pytest.fixture
def build_dir(tmp_path):
    d = tmp_path / "build"
    d.mkdir()
    (d / "engine.plan").write_bytes(b"not an engine")
    (d / "recipe.json").write_text(json.dumps({"model_path": str(demo.MODEL_PATH)}))
    return d


def test_bench_without_tensorrt_says_so(no_trt, build_dir, capsys):
    assert main(["bench", str(build_dir)]) == 2
    err = capsys.readouterr().err
    assert "TensorRT is not available" in err and "Fix:" in err


@pytest.mark.parametrize("argv,match", [
    (["--shape", "x"], "is not NAME:DIMS"),
    (["--shape", "x:1x0x3"], "is not NAME:DIMS"),
    (["--runs", "50"], "too few"),
])
def test_bench_bad_arguments(no_trt, build_dir, capsys, argv, match):
    assert main(["bench", str(build_dir), *argv]) == 2
    assert match in capsys.readouterr().err


def test_bench_missing_dir_and_empty_dir(tmp_path, capsys):
    assert main(["bench", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["bench", str(tmp_path)]) == 2
    assert "holds no engine" in capsys.readouterr().err


def test_compare_needs_inputs_and_tensorrt(no_trt, build_dir, capsys):
    assert main(["compare", str(build_dir)]) == 2
    assert "needs inputs" in capsys.readouterr().err
    assert main(["compare", str(build_dir), "--held-back", "demo"]) == 2
    assert "TensorRT is not available" in capsys.readouterr().err


def test_compare_saves_reference_without_tensorrt(no_trt, build_dir, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "ref.npz"
    assert main(["compare", str(build_dir), "--held-back", "demo", "--max-samples", "4", "--save-reference",
                 str(out)]) == 0
    assert "no engine was run" in capsys.readouterr().out
    ref = load_reference(out)
    assert ref.samples == 4 and ref.inputs["x"].shape == (4, 3, 48, 192)
    (name,) = ref.outputs
    probs = ref.outputs[name]
    assert probs.shape == (4, 2)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_compare_bad_reference_file(no_trt, build_dir, tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"zip? no")
    from trtwidgets.core.common.errors import UserError

    with pytest.raises(UserError, match="could not be read"):
        load_reference(bad)
    with pytest.raises(UserError, match="does not exist"):
        load_reference(tmp_path / "none.npz")
