"""Why a build failed, in the words of the lint codes.

TensorRT's errors are precise but cryptic ("Error Code 4: Internal Error (Int8
precision has been set for a layer or layer output, but int8 is not configured
in the builder)"). :func:`diagnose` matches the log against known texts and
returns the cause with a lint code (:data:`trtwidgets.core.model.lint.CODES`) where
lint has one, or a build-only code otherwise, plus what to do. It also takes
the findings lint made before the build, so that a cause lint predicted is
named even when TensorRT's text is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

#: Failure causes lint cannot predict (the build's own codes).
BUILD_CODES = {
    "CALIBRATION_FAILED": "INT8 calibration failed",
    "CALIBRATION_DATA_ERROR": "calibration data did not fit the network",
    "NO_IMPLEMENTATION": "no kernel implements a layer under the chosen precisions",
    "KERNEL_CRASHED": "a kernel TensorRT timed hit an illegal memory access (a TensorRT fault)",
    "OUT_OF_MEMORY": "the GPU ran out of memory, or the workspace limit is too small",
    "TACTIC_SOURCE_UNAVAILABLE": "a cuBLAS/cuDNN-backed layer with those tactic sources off or missing",
    "PARSE_FAILED": "the ONNX parser rejected the model",
    "NO_GPU": "no usable CUDA GPU",
    "BUILD_FAILED": "TensorRT returned no engine",
}


@dataclass(frozen=True)
class Cause:
    """One explanation of a failed build."""

    code: str
    why: str
    fix: str
    evidence: str = ""


# (pattern on TensorRT's text, code, why, fix), most specific first.
_RULES: Tuple[Tuple[re.Pattern, str, str, str], ...] = tuple((re.compile(p, re.IGNORECASE), c, w, f) for p, c, w, f in (
    (r"Int8 precision has been set for a layer or layer output, but int8 is not configured",
     "QDQ_REQUIRES_INT8",
     "The model is explicitly quantized (it has QuantizeLinear/DequantizeLinear nodes), and TensorRT <= 10 builds such "
     "a model only with the INT8 flag on.",
     "Turn the int8 flag on beside fp16 (no calibrator is needed: the Q/DQ scales are the ranges)."),
    (r"FP8 precision has been set|fp8 is not configured", "QDQ_REQUIRES_FP8",
     "The model has FP8 Q/DQ nodes, which TensorRT builds only with the FP8 flag on.",
     "Turn the fp8 flag on (FP8 needs compute capability 8.9 or newer)."),
    (r"checkSpatialDims|misaligns with the input kernel shape", "CONV_DQ_WEIGHTS_NO_KERNEL_SHAPE",
     "A Conv whose weights come from a DequantizeLinear has no kernel_shape attribute; TensorRT's parser then cannot "
     "infer the kernel size.",
     "Add kernel_shape to those Conv nodes (the toolkit's Q/DQ export does), or re-export the model."),
    (r"Plugin not found, are the plugin name, version, and namespace correct|getPluginCreator could not find plugin",
     "UNSUPPORTED_OP",
     "An op has no TensorRT importer, so the parser looked for a plugin of that name and found none.",
     "Run lint to see which ops; replace them (e.g. quantize statically with Q/DQ instead of dynamic quantization) "
     "or load a plugin library."),
    (r"No importer registered for op", "UNSUPPORTED_OP",
     "An op has no TensorRT importer.", "Run lint to see which ops, and replace or implement them as a plugin."),
    # Not a bare "zero-point": "Missing scale and zero-point for tensor ..." is a harmless warning of every
    # implicit INT8 build (it named a detector's failed build asymmetric, H200).
    (r"only supports symmetric quantization|shiftIsAllZeros|zero.?point .*must be (all )?zero",
     "NONZERO_ZERO_POINT",
     "TensorRT supports symmetric quantization only (zero point 0).",
     "Re-export the Q/DQ model with symmetric (zero point 0) INT8 quantization."),
    # TensorRT 8.6.0's parser on FP16 scales, all positive (ModelOpt's default files; an export for TensorRT 10).
    (r"scaleAllPositive|Scale coefficients must all be positive", "QDQ_SCALE_TYPE_NEEDS_NEWER_TRT",
     "TensorRT 8.x's ONNX parser checks Q/DQ scales as FP32 values: FP16 or BF16 scales (an FP16/BF16 float part, "
     "as TensorRT 10 exports write) fail its positivity check even when every scale is positive; a scale of 0 or "
     "less fails it too.",
     "Export for this TensorRT with an FP32 float part (the toolkit's default for 8.x: --trt-version 8.6 with "
     "--high-precision auto or fp32) and build with the FP16 flag, or build with TensorRT 10 or newer."),
    (r"no optimization profile has been defined|dynamic or shape inputs, but no optimization profile",
     "DYNAMIC_INPUT_NEEDS_PROFILE",
     "The network has dynamic input dimensions and the build had no optimization profile for them.",
     "Add a profile (min/opt/max) for every dynamic input in the profile editor."),
    (r"Calibration failure|calibration failed|Calibrator .*failed", "CALIBRATION_FAILED",
     "TensorRT could not compute INT8 scales from the calibration batches.",
     "Check that the calibration data is real and shaped like the calibration profile's opt shape; try more samples."),
    # "Missing scale and zero-point for tensor X, expect fall back to non-int8" is one tensor's fallback, not a failure.
    (r"Calibrator is not being used", "INT8_WITHOUT_CALIBRATION",
     "The INT8 flag is on but TensorRT got no ranges for some tensors.",
     "Choose a calibrator, or export a Q/DQ model from the toolkit's calibration."),
    (r"out of memory|Requested amount of GPU memory|insufficient memory|cudaErrorMemoryAllocation|"
     r"Available memory .* is too small", "OUT_OF_MEMORY",
     "TensorRT could not get the GPU memory a layer or the workspace needs.",
     "Free GPU memory (other processes, notebooks), raise workspace_mib, or shrink the profile's max shapes."),
    (r"cublas|cudnn|cuBLASLt", "TACTIC_SOURCE_UNAVAILABLE",
     "A layer needs cuBLAS or cuDNN, whose tactic sources are off or whose libraries are missing.",
     "Turn those tactic sources on (unset TRTWIDGETS_NO_CUBLAS_CUDNN) where the libraries exist, or avoid the layer."),
    # Before NO_IMPLEMENTATION: the crash is why no implementation was left (TensorRT 8.6 on ModelOpt 0.47's
    # FP32-float-part file of the demo classifier at batch 32, H200: benchmarks/results/peer/zoo_run/cls-b32.json).
    (r"illegal memory access|misaligned address|unspecified launch failure", "KERNEL_CRASHED",
     "A kernel TensorRT ran while timing its tactics crashed (a fault of TensorRT with this graph, not of the "
     "precisions asked for). The process's CUDA context is now broken: every later CUDA call in it fails.",
     "Restart the process (the notebook's kernel) before building again. Build the model with another placement "
     "(the toolkit's export of it), another builder optimization level or another TensorRT version; plan measure "
     "builds each candidate in a worker process, so the others still build."),
    (r"Could not find any implementation for node|no implementation obeys reformatting-free rules|"
     r"Could not find .*implementation", "NO_IMPLEMENTATION",
     "No kernel implements a layer with the precisions and formats the build insisted on.",
     "Use precision_constraints 'prefer' instead of 'obey', drop the layer's precision override, or add flags."),
    (r"CUDA initialization failure|no CUDA-capable device|CUDA driver version is insufficient", "NO_GPU",
     "TensorRT could not initialise CUDA.",
     "Build on a machine with an NVIDIA GPU and a driver new enough for this TensorRT."),
))


def match_causes(messages: Iterable[str]) -> List[Cause]:
    """Causes whose known TensorRT text appears in ``messages`` (each code once, in rule order)."""
    messages = list(messages)
    found: List[Cause] = []
    for pattern, code, why, fix in _RULES:
        if any(c.code == code for c in found):
            continue
        hit = next((m for m in messages if pattern.search(m)), None)
        if hit is not None:
            found.append(Cause(code, why, fix, hit))
    return found


def diagnose(messages: Sequence[str], findings: Sequence = ()) -> List[Cause]:
    """Causes of a failed build: matched from TensorRT's messages, then lint's error findings.

    Parameters
    ----------
    messages : sequence of str
        Error and warning texts from the build log (errors first).
    findings : sequence of lint Finding
        What :func:`trtwidgets.core.model.lint.lint` said before the build; its errors
        are added (once per code) when the log does not already name them.
    """
    causes = match_causes(messages)
    codes = {c.code for c in causes}
    for f in findings:
        if f.severity == "error" and f.code not in codes:
            causes.append(Cause(f.code, f.why or f.message, f.fix, f.message))
            codes.add(f.code)
    return causes


def summarize_causes(causes: Sequence[Cause]) -> Tuple[Optional[str], Optional[str]]:
    """``(why, fix)`` text for a BuildError from the causes (None when none is known)."""
    if not causes:
        return None, None
    why = " ".join(f"[{c.code}] {c.why}" for c in causes)
    fix = " ".join(dict.fromkeys(c.fix for c in causes if c.fix)) or None
    return why, fix
