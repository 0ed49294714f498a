"""What lint reports: the finding codes, their severities, and the :class:`Finding` value.

Every finding has a stable ``code`` listed in :data:`CODES` with its usual
severity and a one-line title; a new rule adds its code here. :data:`TRT_TEXT`
holds TensorRT's own error texts, quoted in messages so a user who saw the error
can search for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Tuple

SEVERITIES = ("error", "warning", "info")

#: Every finding code, with its usual severity and a one-line title.
CODES: Dict[str, Tuple[str, str]] = {
    "ONNX_CHECKER_FAILED": ("warning", "onnx.checker rejects the model"),
    "OPSET_TOO_OLD": ("error", "opset older than TensorRT's parser supports"),
    "OPSET_TOO_NEW": ("warning", "opset newer than the TensorRT version documents"),
    "UNSUPPORTED_DYNAMIC_QUANTIZE": ("error", "dynamic / QOperator quantization ops have no TensorRT importer"),
    "UNSUPPORTED_OP": ("error", "op without a TensorRT importer"),
    "OP_NEEDS_NEWER_TRT": ("error", "op imported only by a newer TensorRT"),
    "CUSTOM_DOMAIN_OP": ("warning", "op from a custom domain needs a TensorRT plugin"),
    "QDQ_MODEL": ("info", "explicitly quantized model"),
    "QDQ_REQUIRES_INT8": ("error", "Q/DQ model built without the INT8 flag"),
    "QDQ_REQUIRES_FP8": ("error", "FP8 Q/DQ model built without the FP8 flag"),
    "QDQ_INT8_WITHOUT_FP16": ("info", "INT8 without FP16 leaves unquantized layers in FP32"),
    "QDQ_TYPE_NEEDS_NEWER_TRT": ("error", "Q/DQ type not imported by this TensorRT"),
    "QDQ_SCALE_TYPE_NEEDS_NEWER_TRT": ("error", "FP16/BF16 Q/DQ scales, which TensorRT 8.x's parser refuses"),
    "UINT8_QDQ": ("warning", "UINT8 quantization (TensorRT quantizes to signed INT8)"),
    "NONZERO_ZERO_POINT": ("error", "asymmetric quantization (zero point not 0)"),
    "DYNAMIC_Q_SCALE": ("error", "Q/DQ scale computed at run time"),
    "PER_CHANNEL_ACTIVATION": ("error", "per-channel scale on an activation"),
    "FP8_PER_CHANNEL": ("warning", "per-channel FP8 scales"),
    "FP8_NEEDS_HARDWARE": ("error", "FP8 needs compute capability 8.9 or newer"),
    "INT8_NEEDS_HARDWARE": ("warning", "INT8 is slow or absent below compute capability 6.1"),
    "CONV_DQ_WEIGHTS_NO_KERNEL_SHAPE": ("error", "Conv with DequantizeLinear weights lacks kernel_shape"),
    "CALIBRATOR_IGNORED_WITH_QDQ": ("warning", "calibrator ignored for a Q/DQ model"),
    "CALIBRATOR_WITHOUT_INT8": ("warning", "calibrator set but INT8 flag missing"),
    "CALIBRATOR_REMOVED_ON_TRT11": ("error", "TensorRT 11 has no calibrators"),
    "CALIBRATOR_DEPRECATED": ("warning", "TensorRT calibrators are deprecated since 10.1"),
    "INT8_WITHOUT_CALIBRATION": ("warning", "INT8 flag without calibration or Q/DQ"),
    "CALIBRATION_AT_OPT_SHAPE": ("info", "calibration runs at the calibration profile's opt shape"),
    "FLAGS_IGNORED_ON_TRT11": ("error", "precision flags do not exist on TensorRT 11"),
    "FLAGS_DEPRECATED": ("info", "precision flags are deprecated since TensorRT 10.12"),
    "FLAG_NEEDS_NEWER_TRT": ("error", "precision flag not in this TensorRT"),
    "DYNAMIC_INPUT_NEEDS_PROFILE": ("warning", "dynamic input dims need an optimization profile"),
    "PROFILE_OPT_TOO_SMALL": ("warning", "a profile's opt shape is smaller than the model's kernels (e.g. 1x1 on a conv net)"),
    "SHARED_DIM_NAME": ("warning", "one dim_param name on input axes of different sizes"),
    "INT64_CAST_TO_INT32": ("warning", "INT64 weights or inputs are cast to INT32"),
    "FLOAT64_UNSUPPORTED": ("warning", "FLOAT64 tensors are not supported by TensorRT"),
    "SCHEMA_KEEPS_TYPE": ("info", "inputs the ONNX schemas type as FP32 or integer only"),
    "BATCH_PINNED_SHAPE": ("warning", "a Reshape/Expand target holds a literal batch"),
    "NO_INPUTS": ("warning", "the model has no inputs"),
    "GRAPH_CYCLE": ("error", "the graph has a cycle"),
    "HUGE_SHAPE": ("warning", "a dimension beyond int32, or a tensor of more than 2**31-1 elements"),
}

#: TensorRT's own texts, quoted in messages so users can match them to what they saw.
TRT_TEXT = {
    "int8_not_configured": ("Error Code 4: Internal Error (Int8 precision has been set for a layer or layer output, "
                            "but int8 is not configured in the builder)"),
    "plugin_not_found": "getPluginCreator could not find plugin: {op} version: 1",
    "plugin_not_found_8_6": "Plugin not found, are the plugin name, version, and namespace correct?",
    "no_importer": "No importer registered for op: {op}. Attempting to import as plugin.",
    "symmetric": "TensorRT only supports symmetric quantization",
    "scale_positive": 'Assertion failed: scaleAllPositive && "Scale coefficients must all be positive"',
    "kernel_shape": "checkSpatialDims ... The input tensor shape misaligns with the input kernel shape",
    "no_profile": ("Error Code 4: Internal Error (Network has dynamic or shape inputs, but no optimization "
                   "profile has been defined.)"),
    "int64": ("Your ONNX model has been generated with INT64 weights, while TensorRT does not natively support "
              "INT64. Attempting to cast down to INT32."),
    "shared_dim_name": "Error Code 4: Internal Error ({name}: Input dimensions with this name are inconsistent.)",
    "no_calibrator": ("Calibrator is not being used. Users must provide dynamic range for all tensors that are "
                      "not Int32 or Bool."),
}


@dataclass(frozen=True)
class Finding:
    """One thing lint found.

    Attributes
    ----------
    code : str
        Stable identifier, one of :data:`CODES`.
    severity : str
        ``"error"`` (the build fails or the result is wrong), ``"warning"`` (it
        builds but not as intended) or ``"info"``.
    message : str
        What TensorRT will do, quoting its own error text where known.
    why : str
        The cause.
    fix : str
        What to do.
    nodes : tuple of str
        Names of the nodes, tensors or inputs concerned (model-provided: escape before HTML).
    """

    code: str
    severity: str
    message: str
    why: str = ""
    fix: str = ""
    nodes: Tuple[str, ...] = ()

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}")
        object.__setattr__(self, "nodes", tuple(self.nodes))

    @property
    def is_error(self) -> bool:
        """True for an error: the build would fail or its result be wrong."""
        return self.severity == "error"

    def to_dict(self) -> dict:
        """The finding as a JSON-ready dict (``nodes`` as a list)."""
        return {"code": self.code, "severity": self.severity, "message": self.message, "why": self.why,
                "fix": self.fix, "nodes": list(self.nodes)}


def has_errors(findings: Iterable[Finding]) -> bool:
    """True when any finding is an error (the build would fail or be wrong)."""
    return any(f.is_error for f in findings)
