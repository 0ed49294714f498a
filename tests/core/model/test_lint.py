from __future__ import annotations

import dataclasses

import onnx
import pytest
from onnx import TensorProto

from tests.core.models import (conv_model, int64_model, matmul_model, op_model, qdq_conv_model,
                               quantize_dynamic_model, save)
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.lint import CODES, TRT_TEXT, Finding, has_errors, lint, normalize_calibrator, normalize_flags
from trtwidgets.core.model.load import load_model


def codes(findings):
    return {f.code for f in findings}


def only(findings, code):
    matches = [f for f in findings if f.code == code]
    assert len(matches) == 1, [f.code for f in findings]
    return matches[0]


def test_every_finding_is_well_formed_and_sorted(cls_model_path):
    all_findings = []
    for model, kw in [(qdq_conv_model(zero_point=3, kernel_shape=False), dict(flags="fp16", trt_version="8.6",
                                                                              calibrator="entropy2")),
                      (cls_model_path, dict(flags="int8", trt_version="10.16", calibrator="minmax")),
                      (conv_model(), dict(flags="fp16,int8", trt_version="11.0", calibrator="entropy2"))]:
        findings = lint(model, **kw)
        order = [("error", "warning", "info").index(f.severity) for f in findings]
        assert order == sorted(order)
        all_findings += findings
    for f in all_findings:
        assert f.code in CODES and f.message and f.why and f.fix
        assert isinstance(f.nodes, tuple)
        assert set(f.to_dict()) >= {"code", "severity", "message", "why", "fix", "nodes"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        all_findings[0].code = "X"


def test_finding_rejects_unknown_code_and_severity():
    with pytest.raises(ValueError):
        Finding("NOT_A_CODE", "error", "m")
    with pytest.raises(ValueError):
        Finding("QDQ_MODEL", "fatal", "m")


# --- the real model --------------------------------------------------------------------------

def test_real_cls_model_fp32_is_clean_but_needs_a_profile(cls_model_path):
    findings = lint(cls_model_path)
    assert not has_errors(findings)
    f = only(findings, "DYNAMIC_INPUT_NEEDS_PROFILE")
    assert f.nodes == ("x",) and f.severity == "warning"
    assert "no optimization profile has been defined" in f.message
    assert "opt shape" in f.why


def test_real_cls_model_with_profile_only_has_its_shared_dim_name(cls_model_path):
    # x is [-1, 3, "?", "?"]: TensorRT 8.6 on the H200 refused it at 48x192 ("?: Input dimensions with this
    # name are inconsistent"); the build renames the dims, lint warns.
    profile = {"x": ((1, 3, 48, 192), (1, 3, 48, 192), (8, 3, 48, 320))}
    found = lint(load_model(cls_model_path), flags="fp16", trt_version="8.6", profiles=[profile])
    assert [(f.code, f.severity) for f in found] == [("SHARED_DIM_NAME", "warning")]


def test_profile_missing_an_input_is_an_error(cls_model_path):
    f = only(lint(cls_model_path, profiles=[{"other": ()}]), "DYNAMIC_INPUT_NEEDS_PROFILE")
    assert f.severity == "error" and f.nodes == ("x",)


def test_profile_objects_with_shapes_attribute(cls_model_path):
    @dataclasses.dataclass(frozen=True)
    class P:
        shapes: dict

    assert "DYNAMIC_INPUT_NEEDS_PROFILE" not in codes(lint(cls_model_path, profiles=[P({"x": None})]))


def test_real_cls_model_implicit_int8_calibration(cls_model_path):
    findings = lint(cls_model_path, flags="fp16,int8", trt_version="8.6", calibrator="trt_entropy2",
                    profiles=[{"x": None}])
    assert codes(findings) == {"CALIBRATION_AT_OPT_SHAPE", "SHARED_DIM_NAME"}  # x is [-1, 3, "?", "?"]
    assert not has_errors(findings)


# --- Q/DQ models ---------------------------------------------------------------------------

def test_qdq_requires_int8_quotes_tensorrt():
    findings = lint(qdq_conv_model(), flags="fp16", trt_version="8.6")
    f = only(findings, "QDQ_REQUIRES_INT8")
    assert f.severity == "error"
    assert "Int8 precision has been set for a layer or layer output, but int8 is not configured in the builder" in f.message
    assert "QDQ_MODEL" in codes(findings)


@pytest.mark.parametrize("version", [None, "8.6", "10.3"])
def test_qdq_with_int8_and_fp16_builds(version):
    assert not has_errors(lint(qdq_conv_model(), flags=["FP16", "INT8"], trt_version=version))


def test_qdq_int8_without_fp16_is_info():
    f = only(lint(qdq_conv_model(), flags="int8", trt_version="8.6"), "QDQ_INT8_WITHOUT_FP16")
    assert f.severity == "info"


def test_qdq_on_trt11_has_no_flag_findings():
    findings = lint(qdq_conv_model(), flags=[], trt_version="11.0")
    assert not has_errors(findings)
    assert "QDQ_REQUIRES_INT8" not in codes(findings)


def test_calibrator_ignored_with_qdq():
    f = only(lint(qdq_conv_model(), flags="fp16,int8", trt_version="8.6", calibrator="entropy2"),
             "CALIBRATOR_IGNORED_WITH_QDQ")
    assert f.severity == "warning" and "entropy2" in f.message


def test_asymmetric_zero_point():
    f = only(lint(qdq_conv_model(zero_point=5), flags="fp16,int8"), "NONZERO_ZERO_POINT")
    assert TRT_TEXT["symmetric"] in f.message
    assert set(f.nodes) == {"x_quant", "x_dequant", "w_dequant"}


def test_uint8_qdq():
    findings = lint(qdq_conv_model(qtype=TensorProto.UINT8), flags="fp16,int8")
    f = only(findings, "UINT8_QDQ")
    # TensorRT 8.6 builds it (H200 run, tests/fixtures/trt86/lint_vs_tensorrt.json): a warning, not an error.
    assert f.severity == "warning" and "signed INT8" in f.message and "builds" in f.message
    assert "NONZERO_ZERO_POINT" not in codes(findings)
    # Without a zero-point input the ONNX default type is uint8.
    assert "UINT8_QDQ" in codes(lint(qdq_conv_model(zero_point_input=False), flags="fp16,int8"))


def test_dynamic_scale():
    f = only(lint(qdq_conv_model(dynamic_scale=True), flags="fp16,int8"), "DYNAMIC_Q_SCALE")
    assert f.severity == "error"
    assert set(f.nodes) == {"x_quant", "x_dequant"}


def test_conv_dq_weights_without_kernel_shape():
    f = only(lint(qdq_conv_model(kernel_shape=False), flags="fp16,int8", trt_version="8.6"),
             "CONV_DQ_WEIGHTS_NO_KERNEL_SHAPE")
    assert f.severity == "error" and f.nodes == ("qconv",)
    assert "The input tensor shape misaligns with the input kernel shape" in f.message
    assert "CONV_DQ_WEIGHTS_NO_KERNEL_SHAPE" not in codes(lint(qdq_conv_model(), flags="fp16,int8"))


def test_per_channel_weights_are_fine():
    findings = lint(qdq_conv_model(per_channel=True), flags="fp16,int8", trt_version="8.6")
    assert not has_errors(findings)
    assert "PER_CHANNEL_ACTIVATION" not in codes(findings)


def test_fp8_needs_hardware_and_flag():
    model = qdq_conv_model(fp8=True)
    findings = lint(model, flags="fp16", trt_version="10.3", gpu_compute_capability=(8, 0))
    assert {"FP8_NEEDS_HARDWARE", "QDQ_REQUIRES_FP8"} <= codes(findings)
    assert "QDQ_REQUIRES_INT8" not in codes(findings)
    assert "FP8_NEEDS_HARDWARE" not in codes(lint(model, flags="fp8", trt_version="10.3", gpu_compute_capability="9.0"))
    assert "FP8_NEEDS_HARDWARE" not in codes(lint(model, flags="fp8", trt_version="10.3"))
    assert "QDQ_TYPE_NEEDS_NEWER_TRT" in codes(lint(model, flags="fp8", trt_version="8.6"))
    # The flag alone, on an FP32 model, needs the hardware too.
    f = only(lint(conv_model(batch=1), flags="fp16,fp8", gpu_compute_capability="8.6"), "FP8_NEEDS_HARDWARE")
    assert f.message.startswith("The FP8 flag") and f.nodes == ()


def test_fp8_per_channel():
    model = qdq_conv_model(fp8=True)
    # Make the weight DQ per-channel by replacing its scale with a vector.
    for i, t in enumerate(model.graph.initializer):
        if t.name == "w_scale":
            model.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(
                onnx.numpy_helper.to_array(t).reshape(1).repeat(4), "w_scale"))
    f = only(lint(model, flags="fp8", trt_version="10.3"), "FP8_PER_CHANNEL")
    assert f.nodes == ("w_dequant",)


# --- onnxruntime's dynamic quantization: really run it -------------------------------------

def test_quantize_dynamic_output_is_unsupported(tmp_path):
    path = quantize_dynamic_model(tmp_path)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert "DynamicQuantizeLinear" in ops
    f = only(lint(path, flags="fp16,int8", trt_version="8.6"), "UNSUPPORTED_DYNAMIC_QUANTIZE")
    assert f.severity == "error"
    assert "getPluginCreator could not find plugin" in f.message
    assert any("MatMulInteger" in n or "DynamicQuantizeLinear" in n for n in ops)
    assert "quantize_static" in f.fix


def test_quantize_dynamic_conv(tmp_path):
    path = quantize_dynamic_model(tmp_path, conv_model(batch=1))
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert ops & {"ConvInteger", "DynamicQuantizeLinear"}
    assert "UNSUPPORTED_DYNAMIC_QUANTIZE" in codes(lint(path))


# --- flags, calibrators and TensorRT versions -------------------------------------------------

def test_trt11_flags_and_calibrator():
    findings = lint(conv_model(batch=1), flags="fp16,int8", trt_version="11.0", calibrator="entropy2")
    assert only(findings, "FLAGS_IGNORED_ON_TRT11").severity == "error"
    assert only(findings, "CALIBRATOR_REMOVED_ON_TRT11").severity == "error"
    assert "toolkit" in only(findings, "CALIBRATOR_REMOVED_ON_TRT11").fix
    assert not has_errors(lint(conv_model(batch=1), flags="tf32", trt_version="11.0", calibrator="toolkit"))


def test_trt10_deprecations():
    findings = lint(conv_model(batch=1), flags="fp16,int8", trt_version="10.16", calibrator="minmax")
    assert {"CALIBRATOR_DEPRECATED", "FLAGS_DEPRECATED"} <= codes(findings)
    assert not has_errors(findings)
    old = lint(conv_model(batch=1), flags="fp16,int8", trt_version="10.0", calibrator="minmax")
    assert not {"CALIBRATOR_DEPRECATED", "FLAGS_DEPRECATED"} & codes(old)


def test_calibrator_without_int8():
    assert "CALIBRATOR_WITHOUT_INT8" in codes(lint(conv_model(batch=1), flags="fp16", calibrator="entropy2"))


def test_int8_without_calibration():
    f = only(lint(conv_model(batch=1), flags="int8", trt_version="8.6", calibrator="none"), "INT8_WITHOUT_CALIBRATION")
    assert f.severity == "warning" and "Calibrator is not being used" in f.message
    assert only(lint(conv_model(batch=1), flags="int8"), "INT8_WITHOUT_CALIBRATION").severity == "info"


def test_bf16_flag_needs_newer_trt():
    assert "FLAG_NEEDS_NEWER_TRT" in codes(lint(conv_model(batch=1), flags="bf16", trt_version="8.6"))
    assert "FLAG_NEEDS_NEWER_TRT" not in codes(lint(conv_model(batch=1), flags="bf16", trt_version="10.0"))


def test_installed_version_without_tensorrt_is_a_user_error():
    from trtwidgets.core.model.trt_version import installed_trt_version

    if installed_trt_version() is not None:
        pytest.skip("a TensorRT is installed here")
    with pytest.raises(UserError, match="No installed TensorRT"):
        lint(conv_model(batch=1), trt_version="installed")


@pytest.mark.parametrize("kw", [dict(flags="fp17"), dict(calibrator="magic"), dict(trt_version="banana"),
                                dict(gpu_compute_capability="fast")])
def test_bad_arguments_are_user_errors(kw):
    with pytest.raises(UserError):
        lint(conv_model(batch=1), **kw)


def test_normalizers():
    assert normalize_flags("int8, FP16") == ("fp16", "int8")
    assert normalize_flags([]) == ()
    assert normalize_flags("fp32") == ()
    assert normalize_flags(None) is None
    for name in ("trt_entropy2", "IInt8EntropyCalibrator2", "entropy2"):
        assert normalize_calibrator(name) == "entropy2"
    assert normalize_calibrator("trt_minmax") == "minmax"
    assert normalize_calibrator("none") == "none"
    assert normalize_calibrator(None) is None


# --- ops, opsets and types ---------------------------------------------------------------------

def test_unsupported_op():
    f = only(lint(op_model("Unique")), "UNSUPPORTED_OP")
    assert f.nodes == ("my_Unique",) and "No importer registered for op: Unique" in f.message


def test_op_needs_newer_trt():
    model = op_model("GroupNormalization", opset=18)
    assert "OP_NEEDS_NEWER_TRT" in codes(lint(model, trt_version="8.6"))
    assert "OP_NEEDS_NEWER_TRT" not in codes(lint(model, trt_version="10.0"))


def test_custom_domain_ops():
    assert only(lint(op_model("MyPlugin", domain="com.example")), "CUSTOM_DOMAIN_OP").severity == "warning"
    assert only(lint(op_model("ZipMap", domain="ai.onnx.ml")), "CUSTOM_DOMAIN_OP").severity == "error"


def test_opsets():
    assert "OPSET_TOO_OLD" in codes(lint(conv_model(batch=1, opset=6)))
    new = conv_model(batch=1, opset=21)
    assert "OPSET_TOO_NEW" in codes(lint(new, trt_version="8.6"))
    assert "OPSET_TOO_NEW" not in codes(lint(new, trt_version="10.8"))
    assert "OPSET_TOO_NEW" not in codes(lint(new))


def test_int64_cast():
    f = only(lint(int64_model(), trt_version="8.6"), "INT64_CAST_TO_INT32")
    assert "Attempting to cast down to INT32" in f.message
    assert set(f.nodes) == {"idx", "shape"}
    assert "INT64_CAST_TO_INT32" not in codes(lint(int64_model(), trt_version="10.0"))


def test_checker_failure_is_a_finding():
    model = matmul_model()
    model.graph.node[0].input[1] = "does_not_exist"
    f = only(lint(model), "ONNX_CHECKER_FAILED")
    assert "does_not_exist" in f.message


def test_path_and_loaded_model_agree(tmp_path):
    path = save(qdq_conv_model(), tmp_path / "q.onnx")
    assert lint(path, flags="fp16") == lint(load_model(path), flags="fp16") == lint(qdq_conv_model(), flags="fp16")


def test_every_code_is_reachable_by_these_tests():
    # Keeps CODES and the tests in step: a new code needs a test that produces it.
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    missing = [c for c in CODES if f'"{c}"' not in source]
    assert missing == []


def test_int8_needs_hardware():
    f = only(lint(qdq_conv_model(), flags="fp16,int8", gpu_compute_capability=(5, 2)), "INT8_NEEDS_HARDWARE")
    assert "5.2" in f.message
    assert "INT8_NEEDS_HARDWARE" not in codes(lint(qdq_conv_model(), flags="fp16,int8", gpu_compute_capability="sm_86"))


def test_float64():
    model = matmul_model()
    w = model.graph.initializer[0]
    w.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(w).astype("float64"), "W"))
    assert only(lint(model), "FLOAT64_UNSUPPORTED").nodes == ("W",)


def test_per_channel_activation():
    model = qdq_conv_model()
    for i, t in enumerate(model.graph.initializer):
        if t.name == "x_scale":
            model.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(
                onnx.numpy_helper.to_array(t).reshape(1, 1, 1, 1).repeat(3, axis=1).reshape(3), "x_scale"))
    model.graph.node[0].attribute.append(onnx.helper.make_attribute("axis", 1))
    f = only(lint(model, flags="fp16,int8"), "PER_CHANNEL_ACTIVATION")
    assert f.nodes == ("x_quant",)


def test_a_1x1_opt_shape_on_a_conv_net_cannot_be_right():
    # Issue 15: a fully dynamic [N, 3, H, W] model got a 1x3x1x1 profile and lint said nothing.
    from tests.own_models import dynamic_hw_model
    from trtwidgets.core.recipe.profiles import Profile, ShapeRange

    model = dynamic_hw_model()
    placeholder = Profile({"x": ShapeRange((1, 3, 1, 1), (1, 3, 1, 1), (1, 3, 1, 1))})
    f = only(lint(model, profiles=[placeholder]), "PROFILE_OPT_TOO_SMALL")
    assert "'x'" in f.message and "1x3x1x1" in f.message and "3x3" in f.message
    real = Profile({"x": ShapeRange((1, 3, 48, 64), (1, 3, 96, 128), (1, 3, 192, 256))})
    assert "PROFILE_OPT_TOO_SMALL" not in [x.code for x in lint(model, profiles=[real])]


def test_schema_types_and_batch_pinned_shapes_are_reported():
    # The rules' own tests: tests/core/model/test_lint_types.py.
    from tests.core.model.test_lint_types import _reshape_model
    from tests.core.qdq import dynamic_models as dm

    assert "BATCH_PINNED_SHAPE" in codes(lint(_reshape_model("N", 1)))
    assert "SCHEMA_KEEPS_TYPE" in codes(lint(dm.anchor_head()))


def test_a_model_without_inputs_is_said_to_have_none():
    from tests.bad_input.hostile_models import no_input_model

    f = only(lint(no_input_model()), "NO_INPUTS")
    assert "no inputs" in f.message and f.fix


def test_a_cycle_is_an_error_naming_the_nodes_on_it():
    from tests.bad_input.hostile_models import cycle_model
    from trtwidgets.core.model.lint.rules_graph import find_cycle

    f = only(lint(cycle_model()), "GRAPH_CYCLE")
    assert f.severity == "error" and set(f.nodes) == {"add", "relu"}, f
    assert "add -> relu -> add" in f.message or "relu -> add -> relu" in f.message
    assert find_cycle(conv_model().graph) is None


def test_a_dimension_beyond_int32_is_found():
    from tests.bad_input.hostile_models import huge_dim_model

    f = only(lint(huge_dim_model()), "HUGE_SHAPE")
    assert "3000000000" in f.message and f.severity == "warning"
    assert only(lint(huge_dim_model(), trt_version="8.6"), "HUGE_SHAPE").severity == "error"
    # 2**31-1 elements in one static tensor is too many as well; a large but possible one is not.
    assert "HUGE_SHAPE" in codes(lint(huge_dim_model(2**31)))
    f = only(lint(huge_dim_model(65536, batch=65536)), "HUGE_SHAPE")
    assert "4,294,967,296 elements" in f.message
    assert "HUGE_SHAPE" not in codes(lint(huge_dim_model(2**20)))


def test_fp16_scales_are_an_error_for_tensorrt_86_and_fine_for_10():
    """TensorRT 8.6.0's parser stopped on FP16 scales, all positive (an H200: ModelOpt's default files, the toolkit's
    TensorRT 10 export of an SVTR block): lint says so before a build does."""
    from tests.core import qdq_blocks as qb
    from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq

    block = qb.svtr_block(2, 8, 16)
    fp16 = build_qdq(block, QdqSpec(qb.simple_amax(block), QdqOptions(trt_version="10.16"))).model
    fp32 = build_qdq(block, QdqSpec(qb.simple_amax(block), QdqOptions(trt_version="8.6"))).model
    f = only(lint(fp16, flags="fp16,int8", trt_version="8.6"), "QDQ_SCALE_TYPE_NEEDS_NEWER_TRT")
    assert f.severity == "error" and "FP16 scales" in f.message and "Scale coefficients must all be positive" in f.message
    assert f.nodes and all(n in {node.name for node in fp16.graph.node} for n in f.nodes)
    assert "QDQ_SCALE_TYPE_NEEDS_NEWER_TRT" not in codes(lint(fp16, flags="fp16,int8", trt_version="10.0"))
    assert "QDQ_SCALE_TYPE_NEEDS_NEWER_TRT" not in codes(lint(fp32, flags="fp16,int8", trt_version="8.6"))
