"""The lint rules: one function per check, in :data:`RULES`, the order lint runs them.

Each rule takes a :class:`~trtwidgets.core.model.lint.context.LintContext` (the
model's facts and the user's intent) and reports findings with ``ctx.add(code,
message, why, fix, nodes)``. A message says what TensorRT will do (quoting its
own text from :data:`~trtwidgets.core.model.lint.codes.TRT_TEXT` where known),
``why`` the cause, ``fix`` what to do.

To add a rule: add its code to :data:`~trtwidgets.core.model.lint.codes.CODES`,
write a function here, append it to :data:`RULES`, and add a test that
produces the code (tests/core/model/test_lint.py checks that every code has one).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ...common.errors import UserError
from .codes import TRT_TEXT
from .context import STD_DOMAINS, LintContext, node_name
from .rules_graph import check_cycles, check_huge_shapes, check_no_inputs
from .rules_types import check_batch_pinned_shapes, check_schema_types
from ..onnx_graph import attribute
from ..trt_support import (DYNAMIC_QUANT_OPS, FLAG_SINCE, LOW_PRECISION_SCALES_SINCE, MAX_OPSET, MIN_OPSET,
                          OPS_ADDED_IN, PRECISION_FLAGS, QDQ_TYPES_SINCE, TRT_CALIBRATORS, UNSUPPORTED_OPS)
from ..trt_version import TrtVersion

_ML_DOMAIN = "ai.onnx.ml"
_MAX_NODES_IN_MESSAGE = 5


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_NODES_IN_MESSAGE])
    more = len(items) - _MAX_NODES_IN_MESSAGE
    return shown + (f" and {more} more" if more > 0 else "")


def _profile_shapes(profile: Any) -> Mapping[str, Any]:
    shapes = getattr(profile, "shapes", profile)
    if not isinstance(shapes, Mapping):
        raise UserError(f"{type(profile).__name__} is not an optimization profile.",
                        "A profile maps each input name to its (min, opt, max) shapes.",
                        "Pass trtwidgets.core.recipe.profiles.Profile objects or dicts of input -> shapes.")
    return shapes


def check_onnx(ctx: LintContext) -> None:
    """ONNX_CHECKER_FAILED: the model breaks the ONNX specification."""
    try:
        if ctx.summary.external_data and ctx.model.path:
            # The in-memory proto may exceed protobuf's 2 GiB once external data is loaded.
            onnx.checker.check_model(str(ctx.model.path))
        else:
            onnx.checker.check_model(ctx.proto)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        ctx.add("ONNX_CHECKER_FAILED", f"onnx.checker.check_model rejects the model: {first}",
                "The model breaks the ONNX specification; TensorRT's parser is more lenient but often fails on "
                "the same node, and other tools (onnxruntime, graph surgeon) may misread it.",
                "Re-export the model, or repair it (onnxsim / onnx-graphsurgeon) and check it with onnx.checker.")


def check_opset(ctx: LintContext) -> None:
    """OPSET_TOO_OLD / OPSET_TOO_NEW: the opset against what the parser documents."""
    opset = ctx.summary.opset
    if not opset:
        return
    if opset < MIN_OPSET:
        ctx.add("OPSET_TOO_OLD", f"The model uses ONNX opset {opset}; TensorRT's parser supports opset {MIN_OPSET} "
                "and newer.", "Ops changed meaning before opset 7 and the parser has no importers for them.",
                "Convert it: onnx.version_converter.convert_version(model, 13), or re-export with a newer opset.")
    if ctx.trt is None:
        return
    limit = None
    for since, max_opset in MAX_OPSET:
        if ctx.trt >= since:
            limit = max_opset
    if limit is not None and opset > limit:
        ctx.add("OPSET_TOO_NEW", f"The model uses ONNX opset {opset}; {ctx.trt_name}'s parser documents opsets up "
                f"to {limit}.", "Ops whose definition changed after that opset may be rejected or imported "
                "with the older meaning.",
                f"Export with opset {limit} (torch.onnx.export(..., opset_version={limit})) or use a newer TensorRT.")


def check_ops(ctx: LintContext) -> None:
    """Ops the parser cannot import: dynamic quantization, unsupported, too new, custom domains."""
    dyn: Dict[str, List[str]] = {}
    unsupported: Dict[str, List[str]] = {}
    too_new: Dict[str, List[str]] = {}
    custom: Dict[Tuple[str, str], List[str]] = {}
    for node in ctx.proto.graph.node:
        name = node_name(node)
        if node.domain in STD_DOMAINS or node.domain == "com.microsoft" and node.op_type in DYNAMIC_QUANT_OPS:
            if node.op_type in DYNAMIC_QUANT_OPS:
                dyn.setdefault(node.op_type, []).append(name)
            elif node.op_type in UNSUPPORTED_OPS:
                unsupported.setdefault(node.op_type, []).append(name)
            elif node.op_type in OPS_ADDED_IN and ctx.trt is not None and ctx.trt < OPS_ADDED_IN[node.op_type]:
                too_new.setdefault(node.op_type, []).append(name)
        else:
            custom.setdefault((node.domain, node.op_type), []).append(name)
    if dyn:
        nodes = [n for names in dyn.values() for n in names]
        first = next(iter(dyn))
        ctx.add("UNSUPPORTED_DYNAMIC_QUANTIZE",
                f"{', '.join(f'{op} ({len(v)})' for op, v in dyn.items())}: TensorRT has no importer for these ops; "
                f"the parser fails with \"{TRT_TEXT['plugin_not_found'].format(op=first)}\" "
                f"(TensorRT 8.6: \"{TRT_TEXT['plugin_not_found_8_6']}\"). Nodes: {_names(nodes)}.",
                "onnxruntime.quantization.quantize_dynamic and the QOperator format compute scales at run time or "
                "fuse quantization into ONNX Runtime-only ops; TensorRT needs static scales on QuantizeLinear/"
                "DequantizeLinear pairs.",
                "Quantize statically: export the FP32 model and let trtwidgets calibrate it (Q/DQ export), or use "
                "onnxruntime.quantization.quantize_static with quant_format=QuantFormat.QDQ, "
                "activation_type=weight_type=QuantType.QInt8 and ActivationSymmetric=True.", nodes)
    for op, names in unsupported.items():
        ctx.add("UNSUPPORTED_OP", f"{op} ({len(names)} node(s): {_names(names)}) has no TensorRT importer: "
                f"\"{TRT_TEXT['no_importer'].format(op=op)}\", then the parse fails.",
                "TensorRT's ONNX parser implements a fixed list of operators; sequence, optional, string and "
                "random-sampling ops are not among them.",
                "Remove or replace these ops before export (constant-fold with onnxsim / polygraphy surgeon "
                "sanitize), or write and register a TensorRT plugin named after the op.", names)
    for op, names in too_new.items():
        ctx.add("OP_NEEDS_NEWER_TRT", f"{op} ({_names(names)}) is imported by TensorRT {OPS_ADDED_IN[op].short} and "
                f"later, not by {ctx.trt_name}: \"{TRT_TEXT['no_importer'].format(op=op)}\".",
                f"The parser of {ctx.trt_name} predates the op's importer.",
                f"Use TensorRT {OPS_ADDED_IN[op].short}+, or export the op decomposed (e.g. an older opset).", names)
    for (domain, op), names in custom.items():
        ml = domain == _ML_DOMAIN
        ctx.add("CUSTOM_DOMAIN_OP", f"{op} from domain '{domain}' ({_names(names)}) is not a standard ONNX op: "
                f"\"{TRT_TEXT['no_importer'].format(op=op)}\"; the parse fails unless a plugin named {op} is "
                "registered.",
                "ONNX-ML ops (classical ML) have no TensorRT implementation." if ml else
                "Ops of custom domains are framework-specific (ONNX Runtime contrib ops, exporter extensions).",
                "Run this part outside TensorRT, export without contrib ops (e.g. no ORT transformer "
                "optimizations), or register a TensorRT plugin for it.", names,
                severity="error" if ml else None)


def check_qdq(ctx: LintContext) -> None:
    """An explicitly quantized model: its Q/DQ types, scales, zero points and Conv kernel shapes."""
    q = ctx.summary.qdq
    if not ctx.qdq_nodes:
        return
    types: Dict[str, List[str]] = {}
    for name, t in ctx.qtypes.items():
        types.setdefault(t, []).append(name)
    ctx.add("QDQ_MODEL", f"Explicitly quantized: {q.quantize} QuantizeLinear and {q.dequantize} DequantizeLinear "
            f"nodes ({', '.join(f'{t} {len(v)}' for t, v in types.items())}); per-tensor {q.per_tensor}, "
            f"per-channel {q.per_channel}.",
            "TensorRT takes the scales from the Q/DQ nodes and quantizes exactly where they are (explicit "
            "quantization); no calibration runs.", "Nothing to do; the Q/DQ placement decides which layers run in INT8.")
    uint8 = types.get("uint8", [])
    if uint8:
        ctx.add("UINT8_QDQ", f"{len(uint8)} Q/DQ node(s) quantize to UINT8 ({_names(uint8)}). TensorRT 8.6 "
                "parses and builds such a model (seen on an H200 with TensorRT 8.6.0), but TensorRT's Q/DQ layers "
                "quantize to signed INT8 (and FP8/INT4 on newer releases): the engine does not compute the UINT8 "
                "quantization the model describes, so its outputs can differ from onnxruntime's.",
                "UINT8 is onnxruntime's default activation type (QuantType.QUInt8), and a QuantizeLinear without "
                "a zero point produces uint8 by the ONNX spec; TensorRT documents INT8 as its 8-bit Q/DQ type.",
                "Quantize to INT8: quantize_static(..., activation_type=QuantType.QInt8, "
                "weight_type=QuantType.QInt8), and give every QuantizeLinear an int8 zero point of 0.", uint8)
    for qtype, names in types.items():
        since = QDQ_TYPES_SINCE.get(qtype)
        if since is not None and ctx.trt is not None and ctx.trt < since:
            ctx.add("QDQ_TYPE_NEEDS_NEWER_TRT", f"{len(names)} Q/DQ node(s) quantize to {qtype}, which "
                    f"{ctx.trt_name}'s parser does not import (from TensorRT {since.short}).",
                    f"{qtype} quantization came to TensorRT's ONNX parser in {since.short}.",
                    f"Use TensorRT {since.short} or newer, or quantize to int8.", names)
    _check_scales_and_zero_points(ctx)
    _check_scale_types(ctx)
    _check_conv_kernel_shape(ctx)
    if ctx.cc is not None and ctx.cc < (6, 1) and types.get("int8"):
        ctx.add("INT8_NEEDS_HARDWARE", f"INT8 Q/DQ on compute capability {ctx.cc[0]}.{ctx.cc[1]}: TensorRT has "
                "no fast INT8 kernels below 6.1.", "INT8 dot-product instructions arrived with compute capability 6.1.",
                "Build in FP16/FP32 on this GPU, or use a newer one.", types["int8"])


_LOW_SCALE_TYPES: Dict[Optional[int], str] = {onnx.TensorProto.FLOAT16: "FP16", onnx.TensorProto.BFLOAT16: "BF16"}



def _check_scale_types(ctx: LintContext) -> None:
    """FP16/BF16 scales for a TensorRT whose parser reads FP32 scales only (its positivity check fails on them)."""
    if ctx.trt is None or ctx.trt >= LOW_PRECISION_SCALES_SINCE:
        return
    low: Dict[str, List[str]] = {}
    for node in ctx.qdq_nodes:
        scale = node.input[1] if len(node.input) > 1 else ""
        kind = _LOW_SCALE_TYPES.get(ctx.index.constant_dtype(scale)) if scale else None

        if kind:
            low.setdefault(kind, []).append(node_name(node))
    names = [n for v in low.values() for n in v]
    if names:
        kinds = "/".join(sorted(low))
        ctx.add("QDQ_SCALE_TYPE_NEEDS_NEWER_TRT", f"{len(names)} Q/DQ node(s) have {kinds} scales ({_names(names)}); "
                f"{ctx.trt_name}'s parser reads FP32 scales only and stops with \"{TRT_TEXT['scale_positive']}\", "
                "though every scale is positive.",
                "TensorRT 8.x's Q/DQ importer checks the scales as FP32 values; an FP16 or BF16 float part (opset "
                "19 and later) writes its scales in that type (seen on TensorRT 8.6.0 with ModelOpt's default "
                f"files). The parser reads them from TensorRT {LOW_PRECISION_SCALES_SINCE.short}.",
                "Export for this TensorRT with an FP32 float part (the toolkit's default for 8.x: high_precision "
                "'auto' or 'fp32') and build with the FP16 flag, or build with TensorRT "
                f"{LOW_PRECISION_SCALES_SINCE.short} or newer.", names)


def _check_scales_and_zero_points(ctx: LintContext) -> None:
    dynamic, asym, per_channel_act, fp8_pc = [], [], [], []
    for node in ctx.qdq_nodes:
        name = node_name(node)
        scale = node.input[1] if len(node.input) > 1 else ""
        if scale and not ctx.index.is_constant(scale):
            dynamic.append(name)
        zp = node.input[2] if len(node.input) > 2 else ""
        if zp:
            value = ctx.index.constant(zp) if ctx.index.is_constant(zp) else None
            if not ctx.index.is_constant(zp):
                asym.append(name)
            elif value is not None and value.dtype.kind in "iu" and np.any(value != 0):
                asym.append(name)
        size = ctx.index.constant_size(scale) if scale else None
        if size is not None and size > 1:
            if node.op_type == "QuantizeLinear" and not ctx.index.is_constant(node.input[0]):
                per_channel_act.append(name)
            if ctx.qtypes[name].startswith("float8"):
                fp8_pc.append(name)
    if dynamic:
        ctx.add("DYNAMIC_Q_SCALE", f"{len(dynamic)} Q/DQ node(s) take their scale from a tensor computed at run "
                f"time ({_names(dynamic)}); TensorRT needs constant scales.",
                "Some QAT exports leave the amax computation (ReduceMax/Abs/Div) in the graph instead of folding "
                "it to a constant; TensorRT builds the quantization scales at build time.",
                "Calibrate statically before export (e.g. pytorch-quantization / modelopt: load calibrated amax, "
                "learn_amax, then export), or constant-fold the graph (polygraphy surgeon sanitize --fold-constants).",
                dynamic)
    if asym:
        ctx.add("NONZERO_ZERO_POINT", f"{len(asym)} Q/DQ node(s) have a zero point that is not 0 ({_names(asym)}); "
                f"the parser fails with \"{TRT_TEXT['symmetric']}\".",
                "TensorRT implements symmetric quantization only (real = scale * q); asymmetric ranges need a "
                "shift it does not have.",
                "Quantize symmetrically: quantize_static(..., extra_options={'ActivationSymmetric': True, "
                "'WeightSymmetric': True}) with QInt8 types, or let trtwidgets export Q/DQ from calibrated amax.",
                asym)
    if per_channel_act:
        ctx.add("PER_CHANNEL_ACTIVATION", f"{len(per_channel_act)} QuantizeLinear node(s) on activations use "
                f"per-channel scales ({_names(per_channel_act)}).",
                "TensorRT supports per-channel scales for weights (constant inputs) only; activations are "
                "quantized per tensor.", "Use one scale per activation tensor (per_channel only for weights).",
                per_channel_act)
    if fp8_pc:
        ctx.add("FP8_PER_CHANNEL", f"{len(fp8_pc)} FP8 Q/DQ node(s) use per-channel scales ({_names(fp8_pc)}).",
                "TensorRT's FP8 kernels take per-tensor scales; per-channel FP8 is accepted for weights on recent "
                "releases only and is rejected or falls back on older ones.",
                "Use per-tensor FP8 scales (or INT8 for per-channel weights).", fp8_pc)


def _check_conv_kernel_shape(ctx: LintContext) -> None:
    bad = []
    for node in ctx.proto.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose") or len(node.input) < 2:
            continue
        producer = ctx.index.producer.get(node.input[1])
        if producer is not None and producer.op_type == "DequantizeLinear" and attribute(node, "kernel_shape") is None:
            bad.append(node_name(node))
    if bad:
        old = ctx.trt is None or ctx.trt.major < 10
        ctx.add("CONV_DQ_WEIGHTS_NO_KERNEL_SHAPE",
                f"{len(bad)} Conv node(s) take weights from a DequantizeLinear and have no kernel_shape attribute "
                f"({_names(bad)}); TensorRT 8.6's parser rejects them: \"{TRT_TEXT['kernel_shape']}\".",
                "With Q/DQ weights the kernel is not a constant the parser can read the spatial size from, so it "
                "relies on the optional kernel_shape attribute.",
                "Add kernel_shape to each Conv (onnx.helper.make_attribute('kernel_shape', list(W.shape[2:]))); "
                "trtwidgets' Q/DQ export does this.", bad, severity=None if old else "warning")


def check_fp8_hardware(ctx: LintContext) -> None:
    """FP8_NEEDS_HARDWARE: FP8 Q/DQ nodes or the FP8 flag on a GPU below compute capability 8.9."""
    fp8 = [n for n, t in ctx.qtypes.items() if t in ("float8e4m3fn", "float8e5m2")]
    fp8_flag = bool(ctx.flags and "fp8" in ctx.flags and not ctx.trt11)
    if (fp8 or fp8_flag) and ctx.cc is not None and ctx.cc < (8, 9):
        what = f"{len(fp8)} FP8 Q/DQ node(s)" if fp8 else "The FP8 flag"
        ctx.add("FP8_NEEDS_HARDWARE", f"{what} need(s) a GPU of compute capability 8.9 or newer "
                f"(Ada, Hopper, Blackwell); this GPU is {ctx.cc[0]}.{ctx.cc[1]}.",
                "FP8 tensor cores exist from compute capability 8.9; TensorRT has no FP8 kernels below it and the "
                "build fails.", "Build on an 8.9+ GPU, or quantize to INT8 instead of FP8.", fp8)


def check_flags(ctx: LintContext) -> None:
    """Precision flags against the TensorRT version and the Q/DQ types of the model."""
    flags = ctx.flags
    if flags is None:
        return
    precision = [f for f in flags if f in PRECISION_FLAGS]
    if ctx.trt11:
        if precision:
            ctx.add("FLAGS_IGNORED_ON_TRT11", f"{ctx.trt_name} has no precision flags ({', '.join(precision)} "
                    "asked for): every network is strongly typed and the model's types decide each layer's "
                    "precision.", "TensorRT 11 removed BuilderFlag FP16/INT8/FP8/BF16 and precision constraints.",
                    "Convert the model instead: FP16 weights/activations for FP16, Q/DQ nodes for INT8/FP8 "
                    "(trtwidgets exports Q/DQ from calibration); leave the flags empty.")
        return
    for f in flags:
        if ctx.trt is not None and ctx.trt < FLAG_SINCE[f]:
            ctx.add("FLAG_NEEDS_NEWER_TRT", f"The {f.upper()} flag does not exist in {ctx.trt_name} (added in "
                    f"{FLAG_SINCE[f].short}).", f"BuilderFlag.{f.upper()} is newer than this TensorRT.",
                    f"Drop {f}, or use TensorRT {FLAG_SINCE[f].short}+.")
    if precision and ctx.trt is not None and ctx.trt >= TrtVersion(10, 12):
        ctx.add("FLAGS_DEPRECATED", f"Precision flags ({', '.join(precision)}) are deprecated since TensorRT 10.12 "
                "and removed in 11.", "NVIDIA moves to strongly typed networks where the model carries the types.",
                "They still work on this version; to be ready for 11 express precision in the model (FP16 "
                "conversion, Q/DQ).")
    types = set(ctx.qtypes.values())
    int8_like = bool(types & {"int8", "uint8"})  # UINT8 is reported on its own; it needs the flag too
    if int8_like and "int8" not in flags:
        ctx.add("QDQ_REQUIRES_INT8", f"The model has INT8 Q/DQ nodes but the INT8 flag is not set; the build fails "
                f"with \"{TRT_TEXT['int8_not_configured']}\".",
                "Up to TensorRT 10, explicit quantization still needs BuilderFlag.INT8 to enable INT8 kernels.",
                "Add the int8 flag (fp16,int8 lets TensorRT pick FP16 for the layers the Q/DQ nodes leave "
                "unquantized).")
    elif int8_like and "fp16" not in flags and "bf16" not in flags:
        ctx.add("QDQ_INT8_WITHOUT_FP16", "INT8 without FP16: layers outside the Q/DQ pairs run in FP32.",
                "TensorRT only picks precisions the flags allow.",
                "Add fp16 (flags fp16,int8) unless FP32 accuracy is needed for the unquantized layers.")
    if types & {"float8e4m3fn", "float8e5m2"} and "fp8" not in flags:
        ctx.add("QDQ_REQUIRES_FP8", "The model has FP8 Q/DQ nodes but the FP8 flag is not set; TensorRT up to 10 "
                "refuses FP8 layers without it.", "FP8 kernels are enabled by BuilderFlag.FP8.", "Add the fp8 flag.")


def check_calibrator(ctx: LintContext) -> None:
    """The calibrator against the flags, the TensorRT version, Q/DQ nodes and dynamic inputs."""
    cal = ctx.calibrator
    if cal is None:
        if (ctx.flags and "int8" in ctx.flags and not ctx.qdq_nodes and not ctx.trt11):
            ctx.add("INT8_WITHOUT_CALIBRATION", "The INT8 flag is set but the model has no Q/DQ nodes and no "
                    "calibrator was named: unless a calibrator, a calibration cache or per-tensor dynamic ranges "
                    f"are given, TensorRT says \"{TRT_TEXT['no_calibrator']}\" and runs those layers in higher "
                    "precision.", "Implicit INT8 needs a range for every tensor.",
                    "Choose a calibrator (entropy2, or trtwidgets' own with a calibration cache), or export Q/DQ.",
                    severity="info")
        return
    trt_cal = cal in TRT_CALIBRATORS
    if cal == "none":
        if ctx.flags and "int8" in ctx.flags and not ctx.qdq_nodes and not ctx.trt11:
            ctx.add("INT8_WITHOUT_CALIBRATION", "The INT8 flag is set without a calibrator and the model has no Q/DQ "
                    f"nodes; TensorRT says \"{TRT_TEXT['no_calibrator']}\" and runs those layers in FP16/FP32: "
                    "nothing is quantized.", "Implicit INT8 needs a range for every tensor.",
                    "Choose a calibrator (entropy2, or trtwidgets' own with a calibration cache), or export Q/DQ.")
        return
    if ctx.qdq_nodes:
        ctx.add("CALIBRATOR_IGNORED_WITH_QDQ", f"The {cal} calibrator is ignored: the model is explicitly quantized "
                "(Q/DQ), and TensorRT takes the scales from the Q/DQ nodes.",
                "Calibration and explicit quantization are exclusive; TensorRT uses the Q/DQ scales.",
                "Drop the calibrator, or calibrate the FP32 model (without Q/DQ) instead.")
    if trt_cal and ctx.trt11:
        ctx.add("CALIBRATOR_REMOVED_ON_TRT11", f"{ctx.trt_name} has no calibrators (IInt8{cal.capitalize()}"
                "Calibrator was removed).", "TensorRT 11 only quantizes explicitly, from Q/DQ nodes in the model.",
                "Use trtwidgets' own calibration (calibrator 'toolkit'), which exports a Q/DQ model for "
                "TensorRT 10/11.")
    elif trt_cal and ctx.trt is not None and ctx.trt >= TrtVersion(10, 1):
        ctx.add("CALIBRATOR_DEPRECATED", f"TensorRT's calibrators are deprecated since 10.1 ({ctx.trt_name}) and "
                "removed in 11.", "NVIDIA moved INT8 to explicit quantization (Q/DQ) only.",
                "It still works here; trtwidgets' own calibration (toolkit) also exports Q/DQ for TensorRT 11.")
    if ctx.flags is not None and "int8" not in ctx.flags and not ctx.trt11 and not ctx.qdq_nodes:
        ctx.add("CALIBRATOR_WITHOUT_INT8", f"A calibrator ({cal}) is set but the INT8 flag is not: TensorRT only "
                "calibrates for INT8, so nothing is quantized.", "BuilderConfig.int8_calibrator is read only with "
                "BuilderFlag.INT8.", "Add int8 to the flags, or drop the calibrator.")
    dyn = ctx.summary.dynamic_inputs
    if trt_cal and dyn and not ctx.trt11:
        ctx.add("CALIBRATION_AT_OPT_SHAPE", "TensorRT calibrates a dynamic-shape network only at the calibration "
                "profile's opt shape (set_calibration_profile, in its API since 7.1); calibration batches must have "
                "exactly that shape.",
                f"Inputs {', '.join(t.name for t in dyn)} have dynamic dims.",
                "Set the calibration profile's opt shape to the shape of your calibration data (or let "
                "trtwidgets pad/resize samples to it).", [t.name for t in dyn])


def check_profiles(ctx: LintContext) -> None:
    """DYNAMIC_INPUT_NEEDS_PROFILE: every dynamic input needs shapes in every profile."""
    dyn = ctx.summary.dynamic_inputs
    if not dyn:
        return
    if ctx.profiles is None or len(ctx.profiles) == 0:
        from ..dim_text import dim_text  # p2o.DynamicDimension.1 reads as H

        dims = "; ".join(f"{t.name}: " + ", ".join(f"dim {i} ({dim_text(n, i, len(t.shape))})"
                                                   for i, n in t.dynamic_dims.items()) for t in dyn)
        ctx.add("DYNAMIC_INPUT_NEEDS_PROFILE", f"Dynamic input dims ({dims}) need an optimization profile (min, opt, "
                f"max shapes); without one the build fails with \"{TRT_TEXT['no_profile']}\".",
                "TensorRT picks kernels for a range of shapes, given by the profile; TensorRT also calibrates "
                "only at the calibration profile's opt shape.",
                "Add a profile with min/opt/max for each dynamic input (opt = the shape you run most).",
                [t.name for t in dyn])
        return
    for i, profile in enumerate(ctx.profiles):
        shapes = _profile_shapes(profile)
        missing = [t.name for t in dyn if t.name not in shapes]
        if missing:
            ctx.add("DYNAMIC_INPUT_NEEDS_PROFILE", f"Optimization profile {i} gives no shapes for dynamic "
                    f"input(s) {_names(missing)}; the build fails (\"{TRT_TEXT['no_profile']}\" or an "
                    "invalid-profile error).", "Every profile must set min/opt/max for every dynamic input.",
                    f"Add shapes for {', '.join(missing)} to profile {i}.", missing, severity="error")


_SPATIAL_OPS = ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool")


def check_profile_opt_size(ctx: LintContext) -> None:
    """PROFILE_OPT_TOO_SMALL: an opt spatial size below the model's largest kernel (1x1 on a conv net)."""
    dims = {t.name: tuple(t.dims) for t in ctx.proto.graph.initializer}
    kernels = [k for n in ctx.proto.graph.node if n.op_type in _SPATIAL_OPS and n.domain in STD_DOMAINS
               # Conv may leave kernel_shape out: its weight's trailing dims say it.
               for k in (attribute(n, "kernel_shape") or dims.get(n.input[1] if len(n.input) > 1 else "", ())[2:])]
    if not kernels or not ctx.profiles:
        return
    kernel = max(int(k) for k in kernels)
    for i, profile in enumerate(ctx.profiles):
        shapes = _profile_shapes(profile)
        for t in ctx.summary.dynamic_inputs:
            rng = shapes.get(t.name)
            opt = getattr(rng, "opt", None) if not isinstance(rng, Mapping) else rng.get("opt")
            if opt is None or len(opt) < 3 or len(opt) != len(t.shape):
                continue
            # Only the dims the model leaves open: a static spatial size is the model's own choice.
            small = [a for a in t.dynamic_dims if a >= 2 and int(opt[a]) < kernel]
            if not small:
                continue
            shown = "x".join(str(int(d)) for d in opt)
            ctx.add("PROFILE_OPT_TOO_SMALL", f"Optimization profile {i} runs input {t.name!r} at opt {shown}: "
                    f"dimension(s) {', '.join(map(str, small))} are smaller than the model's {kernel}x{kernel} "
                    "kernels, so this cannot be the size of real inputs.",
                    "TensorRT tunes its kernels for the opt shape, and calibration runs at it; an opt of a few pixels "
                    "usually means the model's dynamic dims were never set (a placeholder of 1).",
                    "Set opt to the size you run (or give calibration data: the app and trtwidgets.calibrate take the "
                    "opt shape from it).", [t.name])


def check_dim_names(ctx: LintContext) -> None:
    """SHARED_DIM_NAME: one dim_param name on input axes that differ."""
    from ..dim_names import shared_dim_names

    for s in shared_dim_names(ctx.proto, ctx.profiles):
        why = ("the exporter wrote a placeholder for 'unknown', not a claim that the axes are equal"
               if s.reason == "placeholder" else "the optimization profile gives these axes different sizes")
        ctx.add("SHARED_DIM_NAME", f"Input dims {s.describe()} share one dim_param name: TensorRT's parser makes "
                f"them one symbolic dimension, and a build whose shapes differ on them fails with "
                f"\"{TRT_TEXT['shared_dim_name'].format(name=s.name)}\".",
                f"TensorRT treats every dim_param name as one dimension; here {why}.",
                "trtwidgets renames them for the build (" + ", ".join(f"{i}[{a}] -> {n}" for i, a, n in s.renames)
                + "); or re-export with distinct dim names (torch.onnx.export dynamic_axes={'x': {2: 'height', "
                "3: 'width'}}).", sorted({i for i, _ in s.axes}))


def check_dtypes(ctx: LintContext) -> None:
    """INT64 and FLOAT64 tensors, which TensorRT casts or rejects."""
    int64_w = [t.name for t in ctx.proto.graph.initializer if t.data_type == onnx.TensorProto.INT64]
    int64_io = [t.name for t in ctx.summary.inputs + ctx.summary.outputs if t.dtype == "int64"]
    if (int64_w or int64_io) and (ctx.trt is None or ctx.trt.major < 10):
        names = int64_io + int64_w
        ctx.add("INT64_CAST_TO_INT32", f"{len(int64_w)} INT64 initializer(s) and {len(int64_io)} INT64 input(s)/"
                f"output(s) ({_names(names)}); TensorRT up to 9 says \"{TRT_TEXT['int64']}\".",
                "TensorRT before 10 has no INT64 tensors; values outside the INT32 range are clamped.",
                "Usually harmless (shape constants); feed INT32 inputs, and check that no value exceeds 2**31-1.",
                names, severity="warning" if int64_io or ctx.trt is not None else "info")
    f64 = [t.name for t in ctx.proto.graph.initializer if t.data_type == onnx.TensorProto.DOUBLE]
    f64 += [t.name for t in ctx.summary.inputs + ctx.summary.outputs if t.dtype == "float64"]
    if f64:
        ctx.add("FLOAT64_UNSUPPORTED", f"{len(f64)} FLOAT64 tensor(s) ({_names(f64)}); TensorRT computes in 32 bits "
                "at most.", "DOUBLE is not a TensorRT data type; the parser casts or rejects it.",
                "Export in float32 (model.float() before torch.onnx.export).", f64)


#: The rules in the order lint runs them (findings are sorted by severity and code afterwards).
RULES: Tuple[Callable[[LintContext], None], ...] = (
    check_onnx, check_no_inputs, check_cycles, check_huge_shapes, check_opset, check_ops, check_qdq, check_flags, check_fp8_hardware, check_calibrator,
    check_profiles, check_profile_opt_size, check_dim_names, check_dtypes, check_schema_types,
    check_batch_pinned_shapes,
)
