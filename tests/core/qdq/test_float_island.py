"""A float part you can trust (issue 42): FP16 judged like every candidate, and the nodes that break it kept FP32."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.core.plan.plan_models import conv_stack, feeds, log_spectrum, spectra
from trtwidgets.core.accuracy.reference import Reference
from trtwidgets.core.accuracy.target import Target
from trtwidgets.core.qdq.float_island import check_float_part, float_part_model


@pytest.fixture(scope="module")
def spectrum():
    model = log_spectrum()
    return model, Reference.compute(model, spectra(12))


def test_an_epsilon_fp16_cannot_hold_is_found_kept_fp32_and_verified(spectrum):
    model, ref = spectrum
    found = check_float_part(model, ref, Target())
    # FP16 as TensorRT's kernels hold it: quiet samples' powers underflow, Log(0) = -inf, the normalization NaN.
    assert found.verdict.meets is False and found.verdict.non_finite
    assert "NaN or Inf" in found.verdict.why[0]
    assert found.fixed and found.island_verdict.meets and not found.island_verdict.non_finite
    assert {"add_eps", "log"} <= set(found.island)
    assert "1e-10, which FP16 holds as 0" in found.reasons["add_eps"]
    assert "NaN or Inf first appears here" in found.reasons["log"]
    assert "add_eps (reads the constant 1e-10" in found.describe()
    # The island is what the conversion keeps: those nodes compute in FP32 in the written model.
    emulated = float_part_model(model, "fp16", found.island)
    out = ref.run(emulated, optimization="disable")
    assert np.isfinite(out["y"]).all()


def test_a_float_part_fp16_holds_needs_no_island():
    model = conv_stack(channels=8, depth=2)
    ref = Reference.compute(model, feeds(4, channels=8))
    found = check_float_part(model, ref, Target())
    assert found.meets and found.island == () and found.island_verdict is None


def test_without_the_search_the_verdict_alone(spectrum):
    model, ref = spectrum
    found = check_float_part(model, ref, Target(), find_island=False)
    assert found.verdict.meets is False and found.island == ()


def test_the_users_own_fp32_nodes_are_kept_and_not_searched_again(spectrum):
    model, ref = spectrum
    found = check_float_part(model, ref, Target(), keep_fp32=("add_eps", "log", "square"))
    assert found.meets, found.verdict.why
    assert isinstance(float_part_model(model, "fp16", ("log",)), onnx.ModelProto)


def test_the_export_advice_says_when_the_float_part_not_the_ranges_is_what_fails(tmp_path):
    """Issue 42: advice that kept more tensors float made the check worse, because the FP16 float part was what
    failed, and nothing said so. The float part is judged alone first, and its island advised and verified."""
    import trtwidgets as tw
    from trtwidgets.core.qdq.export_check import ExportCheckError
    from trtwidgets.core.qdq.options import QdqOptions

    model = log_spectrum()
    cal = tw.calibrate(model, spectra(16, seed=1), progress=False)
    with pytest.raises(ExportCheckError) as err:
        tw.export_qdq(model, cal, tmp_path / "q.onnx", options=QdqOptions(trt_version="10.16"), held_back=spectra(12))
    assert not (tmp_path / "q.onnx").exists()
    assert err.value.why.startswith("The float part, not the ranges, is what fails: in FP16 alone")
    result = tw.export_qdq(model, cal, options=QdqOptions(trt_version="10.16"), held_back=spectra(12))
    advice = result.advice
    assert {"add_eps", "log"} <= set(advice.keep_fp32) and "NaN or Inf" in advice.float_part
    assert "add: --keep-fp32 add_eps log" in advice.summary()
    assert advice.to_dict()["keep_fp32"] == list(advice.keep_fp32)
    # Kept FP32 as advised (and the ranges' advice applied), the export passes its check.
    fixed = tw.export_qdq(model, cal, options=QdqOptions(trt_version="10.16", keep_fp32=advice.keep_fp32,
                                                         exclude=advice.exclude), held_back=spectra(12))
    assert fixed.check.passed, fixed.check.summary()
