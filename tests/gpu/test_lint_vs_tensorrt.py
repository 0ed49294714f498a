"""Lint's predictions against a real TensorRT: every error finding must be a real failure.

For each tiny model, lint (at the installed TensorRT's version) either predicts an
error or not, and TensorRT then parses and builds it. The test fails when they
disagree, or when TensorRT's message does not contain the text the finding quotes.
Runs on Python 3.9 with numpy, onnx, tensorrt and pytest only. With
``TRTWIDGETS_ARTIFACTS`` set, writes ``lint_vs_tensorrt.json`` there (model,
flags, lint codes, TensorRT outcome and its error lines) for the fixtures.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from onnx import TensorProto

from tests.core.models import conv_model, dynamic_quant_matmul_model, op_model, qdq_conv_model
from tests.gpu.build_helpers import tactic_sources_mask
from trtwidgets.core.model.lint import lint

_RESULTS = {}

# name -> (model factory, flags, lint code that must be an error (None: must build), text TensorRT must say)
CASES = {
    "qdq_fp16_only": (qdq_conv_model, ("fp16",), "QDQ_REQUIRES_INT8", "int8 is not configured in the builder"),
    "qdq_fp16_int8": (qdq_conv_model, ("fp16", "int8"), None, None),
    "qdq_per_channel": (lambda: qdq_conv_model(per_channel=True), ("fp16", "int8"), None, None),
    "qdq_no_kernel_shape": (lambda: qdq_conv_model(kernel_shape=False), ("fp16", "int8"),
                            "CONV_DQ_WEIGHTS_NO_KERNEL_SHAPE", "kernel shape"),
    "qdq_asymmetric": (lambda: qdq_conv_model(zero_point=3), ("fp16", "int8"), "NONZERO_ZERO_POINT", "symmetric"),
    # TensorRT 8.6.0 built this on the H200 (2026-11-21): lint warns (UINT8_QDQ), it does not predict a failure.
    "qdq_uint8": (lambda: qdq_conv_model(qtype=TensorProto.UINT8), ("fp16", "int8"), None, None),
    "qdq_dynamic_scale": (lambda: qdq_conv_model(dynamic_scale=True), ("fp16", "int8"), "DYNAMIC_Q_SCALE", None),
    "dynamic_quantize": (dynamic_quant_matmul_model, ("fp16", "int8"), "UNSUPPORTED_DYNAMIC_QUANTIZE", "plugin"),
    "unique_op": (lambda: op_model("Unique"), (), "UNSUPPORTED_OP", None),
    "fp32_static": (lambda: conv_model(batch=1), (), None, None),
    "fp16_static": (lambda: conv_model(batch=1), ("fp16",), None, None),
}


# name -> lint code that must be a warning (the model builds, but not as the user may think)
WARNINGS = {"qdq_uint8": "UINT8_QDQ"}


class _Logger:
    """A tensorrt.ILogger that keeps every line (built lazily: tensorrt is the fixture's)."""

    @staticmethod
    def make(trt):
        class Collect(trt.ILogger):
            def __init__(self):
                trt.ILogger.__init__(self)
                self.lines = []

            def log(self, severity, msg):
                self.lines.append(f"{severity}: {msg}")

        return Collect()


def _parse_and_build(trt, model, flags):
    logger = _Logger.make(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(model.SerializeToString()):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        return "parse_failed", errors + logger.lines
    config = builder.create_builder_config()
    # cuBLAS/cuDNN are load-time stubs on the GPU machine (DEVELOPERS.md, "The GPU machine").
    config.set_tactic_sources(tactic_sources_mask(trt))
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 28)
    if hasattr(config, "builder_optimization_level"):
        config.builder_optimization_level = 0
    for f in flags:
        config.set_flag(getattr(trt.BuilderFlag, f.upper()))
    engine = builder.build_serialized_network(network, config)
    return ("built" if engine is not None else "build_failed"), logger.lines


@pytest.mark.parametrize("case", sorted(CASES))
def test_lint_agrees_with_tensorrt(trt, case):
    factory, flags, code, text = CASES[case]
    model = factory()
    findings = lint(model, flags=flags, trt_version=trt.__version__)
    errors = sorted(f.code for f in findings if f.severity == "error")
    warnings = sorted(f.code for f in findings if f.severity == "warning")
    outcome, lines = _parse_and_build(trt, model, flags)
    _RESULTS[case] = {"flags": list(flags), "lint_errors": errors, "lint_all": [f.code for f in findings],
                      "tensorrt": trt.__version__, "outcome": outcome,
                      "errors": [ln for ln in lines if "ERROR" in ln.upper() or "Assertion" in ln][:20],
                      "warnings": [ln for ln in lines if ln.startswith("Severity.WARNING")][:20]}
    _write_artifacts()
    if case in WARNINGS:
        assert WARNINGS[case] in warnings, [f.code for f in findings]
    if code is None:
        assert errors == [] and outcome == "built", (errors, outcome, lines[-10:])
    else:
        assert code in errors
        assert outcome != "built", f"lint predicted {code} but TensorRT built it"
        if text:
            assert any(text.lower() in ln.lower() for ln in lines), lines[-15:]


def test_dynamic_input_without_profile_fails(trt):
    model = conv_model(batch="N")
    codes = {f.code for f in lint(model, trt_version=trt.__version__)}
    assert "DYNAMIC_INPUT_NEEDS_PROFILE" in codes
    outcome, lines = _parse_and_build(trt, model, ())
    _RESULTS["dynamic_no_profile"] = {"lint_all": sorted(codes), "outcome": outcome, "errors": lines[-10:]}
    _write_artifacts()
    assert outcome == "build_failed"
    assert any("no optimization profile has been defined" in ln for ln in lines), lines[-10:]


def _write_artifacts():
    out = os.environ.get("TRTWIDGETS_ARTIFACTS")
    if not out:
        return
    path = Path(out) / "lint_vs_tensorrt.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(_RESULTS, f, indent=2, sort_keys=True)
    os.replace(tmp, path)
