"""Failed builds explained in lint-code words."""

from __future__ import annotations

from tests.gpu import models
from trtwidgets.core.model.lint import CODES, lint
from trtwidgets.trt.diagnose import _RULES, BUILD_CODES, diagnose, match_causes, summarize_causes

QDQ = ("2: [network.cpp::validate::2925] Error Code 4: Internal Error (Int8 precision has been set for a layer or "
       "layer output, but int8 is not configured in the builder)")


def test_every_rule_code_is_a_lint_or_build_code():
    for _, code, why, fix in _RULES:
        assert code in CODES or code in BUILD_CODES, code
        assert why and fix


def test_qdq_fp16_only_error_maps_to_qdq_requires_int8():
    causes = match_causes(["Some info", QDQ])
    assert [c.code for c in causes] == ["QDQ_REQUIRES_INT8"]
    assert causes[0].evidence == QDQ and "int8" in causes[0].fix.lower()


def test_known_texts_map_to_their_codes():
    cases = {
        "Error Code 4: Internal Error (Network has dynamic or shape inputs, but no optimization profile has been defined.)":
            "DYNAMIC_INPUT_NEEDS_PROFILE",
        "ModelImporter.cpp:773: ERROR: builtin_op_importers.cpp:4890 In function importFallbackPluginImporter: "
        "Assertion failed: creator && \"Plugin not found, are the plugin name, version, and namespace correct?\"":
            "UNSUPPORTED_OP",
        "checkSpatialDims: The input tensor shape misaligns with the input kernel shape": "CONV_DQ_WEIGHTS_NO_KERNEL_SHAPE",
        "Calibration failure occurred with no scaling factors detected.": "CALIBRATION_FAILED",
        "Requested amount of GPU memory (1073741824 bytes) could not be allocated.": "OUT_OF_MEMORY",
        "Could not find any implementation for node conv1.": "NO_IMPLEMENTATION",
    }
    for text, code in cases.items():
        assert [c.code for c in match_causes([text])] == [code], text


def test_tensorrt_86_texts_of_a_real_failed_build_name_no_wrong_cause():
    # A real implicit INT8 build of the PP-OCRv4 detector at batch 32 (H200, TensorRT 8.6) that failed in an
    # internal assertion: the per-tensor fallback warnings around it are not its cause.
    texts = ["[refitUtils.cpp::buildRefitEngine::71] Error Code 2: Internal Error (Assertion engine failed. )",
             "Missing scale and zero-point for tensor (Unnamed Layer* 3) [Constant]_output, expect fall back to "
             "non-int8 implementation for any layer consuming or producing given tensor"]
    assert match_causes(texts) == []
    asym = ("In node 0 (QuantDequantLinearHelper): INVALID_NODE: Assertion failed: shiftIsAllZeros(zeroPoint) && "
            "\"TensorRT only supports symmetric quantization. The zero point for the QuantizeLinear/DequantizeLinear "
            "operator must be all zeros.\"")
    assert [c.code for c in match_causes([asym])] == ["NONZERO_ZERO_POINT"]


def test_unknown_text_has_no_cause():
    assert match_causes(["Error Code 1: Cuda Runtime (something new)"]) == []
    assert summarize_causes([]) == (None, None)


def test_lint_findings_fill_in_what_the_log_does_not_say():
    findings = lint(models.qdq_conv(), flags=("fp16",), trt_version="8.6")
    causes = diagnose(["Error Code 2: Internal Error (Assertion engine != nullptr failed.)"], findings)
    assert [c.code for c in causes] == ["QDQ_REQUIRES_INT8"]
    # When the log names it too, it is listed once, with TensorRT's line as evidence.
    causes = diagnose([QDQ], findings)
    assert [c.code for c in causes] == ["QDQ_REQUIRES_INT8"] and causes[0].evidence == QDQ
    why, fix = summarize_causes(causes)
    assert why.startswith("[QDQ_REQUIRES_INT8]") and fix


def test_a_kernel_that_crashed_while_timed_is_named_before_the_missing_implementation_it_left():
    # TensorRT 8.6's own lines of the failed build of ModelOpt's FP32-float-part demo classifier at batch 32 (H200,
    # benchmarks/results/peer/zoo_run/cls-b32.json): the crash is the cause, not the precisions asked for.
    texts = ["[virtualMemoryBuffer.cpp::~StdVirtualMemoryBufferImpl::105] Error Code 1: Cuda Runtime (an illegal "
             "memory access was encountered)",
             "Could not find any implementation for node PWN(Constant@1 + (Unnamed Layer* 358) [Shuffle] + Add@0, "
             "PWN(Clip@0))."]
    causes = match_causes(texts)
    assert [c.code for c in causes] == ["KERNEL_CRASHED", "NO_IMPLEMENTATION"]
    why, fix = summarize_causes(causes)
    assert "crashed" in why and "Restart the process" in fix


def test_the_86_parsers_scale_check_on_fp16_scales_is_named():
    """TensorRT 8.6.0's own lines (H200): ModelOpt's default file of the demo classifier at batch 32, and the
    toolkit's TensorRT 10 export of an SVTR block built with 8.6 (tests/gpu/test_myelin_weights.py's first run)."""
    import json

    from tests.conftest import ROOT

    rec = json.loads((ROOT / "benchmarks" / "results" / "peer" / "zoo_run" / "cls-b32.json").read_text())
    modelopt = next(p["error"] for p in rec["peers"] if p["name"] == "peer_modelopt")
    svtr = ('[E] ModelImporter.cpp:774: ERROR: builtin_op_importers.cpp:1197 In function QuantDequantLinearHelper:\n'
            '[6] Assertion failed: scaleAllPositive && "Scale coefficients must all be positive"')
    for text in (modelopt, svtr):
        causes = match_causes(text.splitlines())
        assert [c.code for c in causes] == ["QDQ_SCALE_TYPE_NEEDS_NEWER_TRT"], text[:300]
        why, fix = summarize_causes(causes)
        assert "FP32 float part" in fix and "TensorRT 10" in fix
