"""Parts of the build that need no GPU: tactic-source choice, layer-precision matching, recipe checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gpu import models
from trtwidgets.core.common.errors import RecipeError
from trtwidgets.core.recipe.recipe import LayerPrecision
from trtwidgets.trt.build import match_layer_precisions, tactic_source_names
from trtwidgets.trt.build_phases.config import _unmatched_error


def test_env_var_drops_cublas_and_cudnn():
    assert tactic_source_names(env={}) == (None, ())
    assert tactic_source_names(env={"TRTWIDGETS_NO_CUBLAS_CUDNN": "1"}) == (None, ("CUBLAS", "CUBLAS_LT", "CUDNN"))
    assert tactic_source_names(env={"TRTWIDGETS_NO_CUBLAS_CUDNN": "0"}) == (None, ())


def test_caller_chooses_exact_sources_and_the_env_var_still_wins():
    exact, drop = tactic_source_names(requested=["cublas", "edge_mask_convolutions"], env={})
    assert exact == ("CUBLAS", "EDGE_MASK_CONVOLUTIONS") and drop == ()
    exact, drop = tactic_source_names(requested=["cublas", "edge_mask_convolutions"],
                                      env={"TRTWIDGETS_NO_CUBLAS_CUDNN": "yes"})
    assert exact == ("EDGE_MASK_CONVOLUTIONS",)


def test_layer_precisions_by_name_and_regex_last_wins():
    names = ["conv1", "relu1", "conv2", "relu2"]
    chosen, unmatched = match_layer_precisions(names, (LayerPrecision("conv.*", "fp16", regex=True),
                                                       LayerPrecision("conv2", "fp32")))
    assert chosen == {"conv1": "fp16", "conv2": "fp32"} and unmatched == []
    chosen, unmatched = match_layer_precisions(names, (LayerPrecision("cnv2", "fp32"),))
    assert chosen == {} and unmatched == ["cnv2"]
    err = _unmatched_error(unmatched, names)
    assert isinstance(err, RecipeError) and "'conv2'" in err.why


def test_calibrators_subclass_tensorrt_and_check_shapes():
    trt = pytest.importorskip("tensorrt")
    import numpy as np

    from trtwidgets.core.common.errors import CalibrationDataError
    from trtwidgets.trt.calibrators import CALIBRATOR_CLASSES, make_calibrator

    for kind, cls_name in CALIBRATOR_CLASSES.items():
        if not hasattr(trt, cls_name):
            continue
        c = make_calibrator(kind, [], {"x": ((1, 3, 16, 16), np.float32)}, trt)
        assert isinstance(c, getattr(trt, cls_name)) and c.get_batch_size() == 1
        assert c.get_batch(["x"]) is None and c.get_batch_calls == 1 and c.error is None
    wrong = make_calibrator("entropy2", models.feeds((1, 3, 16, 8), 1), {"x": ((1, 3, 16, 16), np.float32)}, trt)
    assert wrong.get_batch(["x"]) is None
    assert isinstance(wrong.error, CalibrationDataError) and "opt shape" in wrong.error.what
    short = make_calibrator("entropy2", models.feeds((1, 3, 16, 16), 1), {"x": ((2, 3, 16, 16), np.float32)}, trt)
    assert short.get_batch(["x"]) is None and short.error is None and "short batch" in short.skipped[0]
    cached = make_calibrator("minmax", [], {"x": ((1, 3, 16, 16), np.float32)}, trt, cache_in=b"TRT-8600-MinMaxCalibration\n")
    assert cached.read_calibration_cache() == b"TRT-8600-MinMaxCalibration\n" and cached.cache_read


def test_build_refuses_an_unusable_recipe_before_the_gpu(tmp_path):
    trt = pytest.importorskip("tensorrt")
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import Recipe
    from trtwidgets.trt.build import build

    path = models.save(models.conv_relu((1, 3, 16, "W")), tmp_path / "dyn.onnx")
    recipe = Recipe.for_model(load_model(path), profiles=())
    with pytest.raises(RecipeError, match="no optimization profile"):
        build(recipe, out_dir=tmp_path / "out", progress=False)
    recipe = Recipe.for_model(load_model(models.save(models.conv_relu(), tmp_path / "m.onnx")))
    models.save(models.conv_relu(channels=4), tmp_path / "m.onnx")  # the model changes after the recipe
    with pytest.raises(RecipeError, match="has changed since the recipe"):
        build(recipe, out_dir=tmp_path / "out2", progress=False)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out2").exists()
    del trt


QDQ_LINE = ("2: [network.cpp::validate::2925] Error Code 4: Internal Error (Int8 precision has been set for a layer or "
            "layer output, but int8 is not configured in the builder)")


def test_build_failure_names_the_cause_and_puts_errors_first():
    from trtwidgets.core.model.lint import lint
    from trtwidgets.trt.build import build_failure
    from trtwidgets.trt.logger import LogCollector

    findings = lint(models.qdq_conv(), flags=("fp16",), trt_version="8.6")
    c = LogCollector()
    c.add("INFO", "[MemUsageChange] Init CUDA: CPU +2, GPU +0, now: CPU 18, GPU 1009 (MiB)")
    c.add("WARNING", "lint QDQ_REQUIRES_INT8: " + findings[0].message, source="trtwidgets")
    c.add("WARNING", "Unable to determine GPU memory usage")
    c.add("ERROR", QDQ_LINE)
    c.add("ERROR", "2: [builder.cpp::buildSerializedNetwork::751] Error Code 2: Internal Error (Assertion engine != nullptr failed. )")
    err = build_failure("TensorRT could not build qdq_conv.onnx.", c.lines, findings, codes=("BUILD_FAILED",))
    assert err.codes == ("BUILD_FAILED", "QDQ_REQUIRES_INT8")
    assert err.log_lines[0] == "[E] " + QDQ_LINE
    assert "[QDQ_REQUIRES_INT8]" in err.why and "int8" in err.fix.lower()
    assert "TensorRT said:" in err.message and err.log == c.lines
    assert err.to_dict()["codes"] == ["BUILD_FAILED", "QDQ_REQUIRES_INT8"]


def test_build_failure_ignores_lint_notes_that_merely_quote_tensorrt():
    from trtwidgets.trt.build import build_failure
    from trtwidgets.trt.logger import LogCollector

    c = LogCollector()
    c.add("WARNING", "lint INT8_WITHOUT_CALIBRATION: ... 'Calibrator is not being used' ...", source="trtwidgets")
    c.add("ERROR", "Error Code 1: Cuda Runtime (something no rule knows)")
    err = build_failure("TensorRT could not build m.onnx.", c.lines)
    assert err.codes == () and "TensorRT's messages below" in err.why
    assert err.log_lines[0].startswith("[E] Error Code 1")
    # A real error beside the quoting note is named, the note still not (an illegal memory access: KERNEL_CRASHED).
    c.add("ERROR", "Error Code 1: Cuda Runtime (an illegal memory access was encountered)")
    assert build_failure("TensorRT could not build m.onnx.", c.lines).codes == ("KERNEL_CRASHED",)


def test_timing_cache_plan_skips_level_0_and_empty_caches():
    from trtwidgets.trt.build import timing_cache_plan

    # The 203-byte cache the H200 wrote after a level-0 build (TensorRT 8.6 then refused to read it).
    real_empty = (Path(__file__).resolve().parents[1] / "fixtures" / "trt86" / "tiny" / "empty_timing.cache")
    empty = real_empty.read_bytes() if real_empty.is_file() else b"ptrt-empty"
    assert timing_cache_plan(0, b"", empty)[0] == "off"
    assert timing_cache_plan(0, b"entries", empty)[0] == "off"
    assert timing_cache_plan(1, b"", empty)[0] == "new"
    assert timing_cache_plan(None, empty, empty)[0] == "new"
    action, why = timing_cache_plan(1, empty + b"more", empty)
    assert action == "load" and str(len(empty) + 4) in why
    assert timing_cache_plan(3, b"x", b"")[0] == "load"
