"""Pre-build lint: what would go wrong in TensorRT, said before the build.

:func:`lint` looks at an ONNX model together with what the user intends (the
precision flags, the TensorRT version, the calibrator, the optimization
profiles, the GPU) and returns :class:`Finding` values. Each has a stable
``code`` (listed in :data:`CODES`), a severity, and says what TensorRT will do,
why, and what to do about it; where TensorRT's own error text is known the
message quotes it, so a user who saw the error can search for it.

The answer depends on the TensorRT version: flags and calibrators exist up to
10.x (deprecated from 10.12 and 10.1) and are gone in 11, where the model's
types decide (strong typing). When the version is not given, findings that
depend on it are phrased for the version the flags imply (flags exist only up
to 10.x).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import onnx

from ..common.errors import UserError
from .load import LoadedModel, ModelSummary, load_model, summarize
from .onnx_graph import GraphIndex, attribute, dtype_name
from .trt_version import TrtVersion, VersionLike, installed_trt_version, parse_trt_version

SEVERITIES = ("error", "warning", "info")

#: Precision flags a recipe may name (lower case), and the TensorRT version that added each.
FLAG_SINCE: Dict[str, TrtVersion] = {
    "fp16": TrtVersion(5), "int8": TrtVersion(5), "tf32": TrtVersion(7, 1),
    "fp8": TrtVersion(8, 6), "bf16": TrtVersion(9, 0),
}
#: Flags that pick a reduced precision; they do not exist on TensorRT 11 (strong typing).
PRECISION_FLAGS = ("fp16", "int8", "fp8", "bf16")

#: TensorRT's own calibrators, by the names recipes and the CLI use.
TRT_CALIBRATORS = ("entropy2", "minmax", "entropy", "legacy")

#: Ops that onnxruntime's dynamic quantization and QOperator format produce; TensorRT has no importer for them.
DYNAMIC_QUANT_OPS = ("DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul",
                     "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool",
                     "QLinearGlobalAveragePool", "QLinearConcat", "QLinearSoftmax", "QGemm")

#: Default-domain ONNX ops without a TensorRT importer in any release up to 10.x
#: (from onnx-tensorrt's operators.md). The parser reports "No importer registered
#: for op: X. Attempting to import as plugin." and then fails unless a plugin of that
#: name is registered. The list is deliberately short: ops missing here are not
#: claimed to work, they are just not flagged.
UNSUPPORTED_OPS = frozenset({
    "BitShift", "ConcatFromSequence", "ImageDecoder", "Multinomial", "Optional", "OptionalGetElement",
    "OptionalHasElement", "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase",
    "SequenceInsert", "SequenceLength", "SequenceMap", "SplitToSequence", "StringConcat",
    "StringNormalizer", "StringSplit", "RegexFullMatch", "TfIdfVectorizer", "Unique",
})
#: Default-domain ops that TensorRT's parser gained late: op -> first TensorRT version that imports it.
OPS_ADDED_IN: Dict[str, TrtVersion] = {
    "GroupNormalization": TrtVersion(10, 0),
    "DFT": TrtVersion(10, 5),
    "Col2Im": TrtVersion(10, 0),
    "BitwiseAnd": TrtVersion(10, 0), "BitwiseOr": TrtVersion(10, 0), "BitwiseXor": TrtVersion(10, 0),
    "BitwiseNot": TrtVersion(10, 0),
}

#: Highest ONNX opset the parser of each TensorRT release documents (approximate,
#: from the onnx-tensorrt release notes); newer opsets usually still parse when
#: they changed no op the model uses, so exceeding it is a warning.
MAX_OPSET: Tuple[Tuple[TrtVersion, int], ...] = (
    (TrtVersion(8, 0), 13), (TrtVersion(8, 2), 15), (TrtVersion(8, 4), 17), (TrtVersion(8, 6), 17),
    (TrtVersion(9, 0), 18), (TrtVersion(10, 0), 20), (TrtVersion(10, 8), 22), (TrtVersion(11, 0), 23),
)
MIN_OPSET = 7

#: Quantized types TensorRT's Q/DQ importer accepts, with the first TensorRT release that does.
QDQ_TYPES_SINCE: Dict[str, TrtVersion] = {
    "int8": TrtVersion(8, 0), "float8e4m3fn": TrtVersion(9, 0), "int4": TrtVersion(10, 0),
    "float4e2m1": TrtVersion(10, 8),
}

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
    "SHARED_DIM_NAME": ("warning", "one dim_param name on input axes of different sizes"),
    "INT64_CAST_TO_INT32": ("warning", "INT64 weights or inputs are cast to INT32"),
    "FLOAT64_UNSUPPORTED": ("warning", "FLOAT64 tensors are not supported by TensorRT"),
}

_STD_DOMAINS = ("", "ai.onnx")
_ML_DOMAIN = "ai.onnx.ml"
_MAX_NODES_IN_MESSAGE = 5

#: TensorRT's own texts, quoted in messages so users can match them to what they saw.
TRT_TEXT = {
    "int8_not_configured": ("Error Code 4: Internal Error (Int8 precision has been set for a layer or layer output, "
                            "but int8 is not configured in the builder)"),
    "plugin_not_found": "getPluginCreator could not find plugin: {op} version: 1",
    "plugin_not_found_8_6": "Plugin not found, are the plugin name, version, and namespace correct?",
    "no_importer": "No importer registered for op: {op}. Attempting to import as plugin.",
    "symmetric": "TensorRT only supports symmetric quantization",
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
        return self.severity == "error"

    def to_dict(self) -> dict:
        return {"code": self.code, "severity": self.severity, "message": self.message, "why": self.why,
                "fix": self.fix, "nodes": list(self.nodes)}


def has_errors(findings: Iterable[Finding]) -> bool:
    """True when any finding is an error (the build would fail or be wrong)."""
    return any(f.is_error for f in findings)


def normalize_flags(flags: Union[None, str, Iterable[str]]) -> Optional[Tuple[str, ...]]:
    """Flags as a sorted tuple of lower-case names; ``"fp16,int8"`` and ``["FP16", "INT8"]`` both work.

    Raises
    ------
    UserError
        For a flag name TensorRT does not have.
    """
    if flags is None:
        return None
    if isinstance(flags, str):
        flags = [f for f in flags.replace(" ", ",").split(",") if f]
    out = []
    for f in flags:
        name = str(f).strip().lower()
        if name in ("fp32", "none", ""):
            continue  # FP32 is the default: no flag
        if name not in FLAG_SINCE:
            raise UserError(f"Unknown precision flag {f!r}.", f"TensorRT's precision flags are {', '.join(FLAG_SINCE)}.",
                            "Use e.g. --flags fp16,int8 (an empty list means FP32).")
        out.append(name)
    return tuple(sorted(set(out)))


def normalize_calibrator(calibrator: Optional[str]) -> Optional[str]:
    """``None`` (not said), ``"none"``, ``"toolkit"`` or one of :data:`TRT_CALIBRATORS`.

    Accepts the recipe names (``"trt_entropy2"``) and TensorRT's class names
    (``"IInt8EntropyCalibrator2"``).
    """
    if calibrator is None:
        return None
    kind = getattr(calibrator, "kind", calibrator)  # a recipe's CalibratorSpec works too
    name = str(kind).strip().lower().replace("-", "_")
    for prefix in ("trt_", "iint8", "int8"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    name = name.replace("calibrator", "").replace("_", "")
    if name in ("", "none", "off"):
        return "none"
    if name in ("toolkit", "trtwidgets"):
        return "toolkit"
    if name in TRT_CALIBRATORS:
        return name
    raise UserError(f"Unknown calibrator {calibrator!r}.",
                    "TensorRT's calibrators are entropy2, minmax, entropy and legacy; 'toolkit' is trtwidgets' own "
                    "calibration; 'none' means no calibration.",
                    "Use one of: none, toolkit, entropy2, minmax, entropy, legacy.")


def _compute_capability(cc) -> Optional[Tuple[int, int]]:
    if cc is None:
        return None
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        return int(cc[0]), int(cc[1])
    text = str(cc).strip().lower().replace("sm_", "").replace("sm", "")
    if "." in text:
        major, minor = text.split(".", 1)
        return int(major), int(minor[:1] or 0)
    if text.isdigit() and len(text) in (2, 3):  # "89", "120"
        return int(text[:-1]), int(text[-1])
    raise UserError(f"{cc!r} is not a GPU compute capability.", "It is written like 8.9 (Ada), 9.0 (Hopper) or (8, 0).",
                    "Pass a (major, minor) tuple or 'major.minor'.")


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_NODES_IN_MESSAGE])
    more = len(items) - _MAX_NODES_IN_MESSAGE
    return shown + (f" and {more} more" if more > 0 else "")


def _node_name(node: onnx.NodeProto) -> str:
    return node.name or (node.output[0] if node.output else node.op_type)


def _profile_shapes(profile: Any) -> Mapping[str, Any]:
    shapes = getattr(profile, "shapes", profile)
    if not isinstance(shapes, Mapping):
        raise UserError(f"{type(profile).__name__} is not an optimization profile.",
                        "A profile maps each input name to its (min, opt, max) shapes.",
                        "Pass trtwidgets.core.recipe.profiles.Profile objects or dicts of input -> shapes.")
    return shapes


class _Linter:
    def __init__(self, model: LoadedModel, flags, trt, calibrator, profiles, cc):
        self.model = model
        self.proto = model.proto
        self.summary: ModelSummary = model.summary
        self.index = GraphIndex(self.proto.graph)
        self.flags = flags
        self.trt: Optional[TrtVersion] = trt
        self.calibrator = calibrator
        self.profiles = profiles
        self.cc = cc
        self.findings: List[Finding] = []
        self.qdq_nodes = [n for n in self.proto.graph.node
                          if n.op_type in ("QuantizeLinear", "DequantizeLinear") and n.domain in _STD_DOMAINS]
        self.qtypes = {_node_name(n): self._qtype(n) for n in self.qdq_nodes}

    def add(self, code, message, why="", fix="", nodes=(), severity=None):
        self.findings.append(Finding(code, severity or CODES[code][0], message, why, fix, tuple(nodes)))

    # --- TensorRT version facts -------------------------------------------------------
    @property
    def trt11(self) -> bool:
        return self.trt is not None and self.trt.major >= 11

    @property
    def trt_name(self) -> str:
        return f"TensorRT {self.trt.short}" if self.trt else "TensorRT"

    def _qtype(self, node: onnx.NodeProto) -> str:
        zp = node.input[2] if len(node.input) > 2 else ""
        qtype = self.index.constant_dtype(zp) if zp else None
        if qtype is None:
            qtype = attribute(node, "output_dtype", 0) or None
        if qtype is None and node.op_type == "DequantizeLinear":
            qtype = self.index.constant_dtype(node.input[0])
            if qtype is None:
                producer = self.index.producer.get(node.input[0])
                if producer is not None and producer.op_type == "QuantizeLinear":
                    return self._qtype(producer)
        # ONNX: a QuantizeLinear without zero point or output_dtype produces uint8.
        return dtype_name(qtype) if qtype else "uint8"

    # --- checks -----------------------------------------------------------------------
    def run(self) -> Tuple[Finding, ...]:
        self.check_onnx()
        self.check_opset()
        self.check_ops()
        self.check_qdq()
        self.check_flags()
        self.check_fp8_hardware()
        self.check_calibrator()
        self.check_profiles()
        self.check_dim_names()
        self.check_dtypes()
        order = {s: i for i, s in enumerate(SEVERITIES)}
        return tuple(sorted(self.findings, key=lambda f: (order[f.severity], f.code)))

    def check_onnx(self):
        try:
            if self.summary.external_data and self.model.path:
                # The in-memory proto may exceed protobuf's 2 GiB once external data is loaded.
                onnx.checker.check_model(str(self.model.path))
            else:
                onnx.checker.check_model(self.proto)
        except Exception as exc:  # noqa: BLE001 - the checker raises several types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.add("ONNX_CHECKER_FAILED", f"onnx.checker.check_model rejects the model: {first}",
                     "The model breaks the ONNX specification; TensorRT's parser is more lenient but often fails on "
                     "the same node, and other tools (onnxruntime, graph surgeon) may misread it.",
                     "Re-export the model, or repair it (onnxsim / onnx-graphsurgeon) and check it with onnx.checker.")

    def check_opset(self):
        opset = self.summary.opset
        if not opset:
            return
        if opset < MIN_OPSET:
            self.add("OPSET_TOO_OLD", f"The model uses ONNX opset {opset}; TensorRT's parser supports opset {MIN_OPSET} "
                     "and newer.", "Ops changed meaning before opset 7 and the parser has no importers for them.",
                     "Convert it: onnx.version_converter.convert_version(model, 13), or re-export with a newer opset.")
        if self.trt is None:
            return
        limit = None
        for since, max_opset in MAX_OPSET:
            if self.trt >= since:
                limit = max_opset
        if limit is not None and opset > limit:
            self.add("OPSET_TOO_NEW", f"The model uses ONNX opset {opset}; {self.trt_name}'s parser documents opsets up "
                     f"to {limit}.", "Ops whose definition changed after that opset may be rejected or imported "
                     "with the older meaning.",
                     f"Export with opset {limit} (torch.onnx.export(..., opset_version={limit})) or use a newer TensorRT.")

    def check_ops(self):
        dyn, unsupported, too_new, custom = {}, {}, {}, {}
        for node in self.proto.graph.node:
            name = _node_name(node)
            if node.domain in _STD_DOMAINS or node.domain == "com.microsoft" and node.op_type in DYNAMIC_QUANT_OPS:
                if node.op_type in DYNAMIC_QUANT_OPS:
                    dyn.setdefault(node.op_type, []).append(name)
                elif node.op_type in UNSUPPORTED_OPS:
                    unsupported.setdefault(node.op_type, []).append(name)
                elif node.op_type in OPS_ADDED_IN and self.trt is not None and self.trt < OPS_ADDED_IN[node.op_type]:
                    too_new.setdefault(node.op_type, []).append(name)
            else:
                custom.setdefault((node.domain, node.op_type), []).append(name)
        if dyn:
            nodes = [n for names in dyn.values() for n in names]
            first = next(iter(dyn))
            self.add("UNSUPPORTED_DYNAMIC_QUANTIZE",
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
            self.add("UNSUPPORTED_OP", f"{op} ({len(names)} node(s): {_names(names)}) has no TensorRT importer: "
                     f"\"{TRT_TEXT['no_importer'].format(op=op)}\", then the parse fails.",
                     "TensorRT's ONNX parser implements a fixed list of operators; sequence, optional, string and "
                     "random-sampling ops are not among them.",
                     "Remove or replace these ops before export (constant-fold with onnxsim / polygraphy surgeon "
                     "sanitize), or write and register a TensorRT plugin named after the op.", names)
        for op, names in too_new.items():
            self.add("OP_NEEDS_NEWER_TRT", f"{op} ({_names(names)}) is imported by TensorRT {OPS_ADDED_IN[op].short} and "
                     f"later, not by {self.trt_name}: \"{TRT_TEXT['no_importer'].format(op=op)}\".",
                     f"The parser of {self.trt_name} predates the op's importer.",
                     f"Use TensorRT {OPS_ADDED_IN[op].short}+, or export the op decomposed (e.g. an older opset).", names)
        for (domain, op), names in custom.items():
            ml = domain == _ML_DOMAIN
            self.add("CUSTOM_DOMAIN_OP", f"{op} from domain '{domain}' ({_names(names)}) is not a standard ONNX op: "
                     f"\"{TRT_TEXT['no_importer'].format(op=op)}\"; the parse fails unless a plugin named {op} is "
                     "registered.",
                     "ONNX-ML ops (classical ML) have no TensorRT implementation." if ml else
                     "Ops of custom domains are framework-specific (ONNX Runtime contrib ops, exporter extensions).",
                     "Run this part outside TensorRT, export without contrib ops (e.g. no ORT transformer "
                     "optimizations), or register a TensorRT plugin for it.", names,
                     severity="error" if ml else None)

    def check_qdq(self):
        q = self.summary.qdq
        if not self.qdq_nodes:
            return
        types = {}
        for name, t in self.qtypes.items():
            types.setdefault(t, []).append(name)
        self.add("QDQ_MODEL", f"Explicitly quantized: {q.quantize} QuantizeLinear and {q.dequantize} DequantizeLinear "
                 f"nodes ({', '.join(f'{t} {len(v)}' for t, v in types.items())}); per-tensor {q.per_tensor}, "
                 f"per-channel {q.per_channel}.",
                 "TensorRT takes the scales from the Q/DQ nodes and quantizes exactly where they are (explicit "
                 "quantization); no calibration runs.", "Nothing to do; the Q/DQ placement decides which layers run in INT8.")
        uint8 = types.get("uint8", [])
        if uint8:
            self.add("UINT8_QDQ", f"{len(uint8)} Q/DQ node(s) quantize to UINT8 ({_names(uint8)}). TensorRT 8.6 "
                     "parses and builds such a model (seen on an H200 with TensorRT 8.6.0), but TensorRT's Q/DQ layers "
                     "quantize to signed INT8 (and FP8/INT4 on newer releases): the engine does not compute the UINT8 "
                     "quantization the model describes, so its outputs can differ from onnxruntime's.",
                     "UINT8 is onnxruntime's default activation type (QuantType.QUInt8), and a QuantizeLinear without "
                     "a zero point produces uint8 by the ONNX spec; TensorRT documents INT8 as its 8-bit Q/DQ type.",
                     "Quantize to INT8: quantize_static(..., activation_type=QuantType.QInt8, "
                     "weight_type=QuantType.QInt8), and give every QuantizeLinear an int8 zero point of 0.", uint8)
        for qtype, names in types.items():
            since = QDQ_TYPES_SINCE.get(qtype)
            if since is not None and self.trt is not None and self.trt < since:
                self.add("QDQ_TYPE_NEEDS_NEWER_TRT", f"{len(names)} Q/DQ node(s) quantize to {qtype}, which "
                         f"{self.trt_name}'s parser does not import (from TensorRT {since.short}).",
                         f"{qtype} quantization came to TensorRT's ONNX parser in {since.short}.",
                         f"Use TensorRT {since.short} or newer, or quantize to int8.", names)
        self._check_scales_and_zero_points()
        self._check_conv_kernel_shape()
        if self.cc is not None and self.cc < (6, 1) and types.get("int8"):
            self.add("INT8_NEEDS_HARDWARE", f"INT8 Q/DQ on compute capability {self.cc[0]}.{self.cc[1]}: TensorRT has "
                     "no fast INT8 kernels below 6.1.", "INT8 dot-product instructions arrived with compute capability 6.1.",
                     "Build in FP16/FP32 on this GPU, or use a newer one.", types["int8"])

    def _check_scales_and_zero_points(self):
        dynamic, asym, per_channel_act, fp8_pc = [], [], [], []
        for node in self.qdq_nodes:
            name = _node_name(node)
            scale = node.input[1] if len(node.input) > 1 else ""
            if scale and not self.index.is_constant(scale):
                dynamic.append(name)
            zp = node.input[2] if len(node.input) > 2 else ""
            if zp:
                value = self.index.constant(zp) if self.index.is_constant(zp) else None
                if not self.index.is_constant(zp):
                    asym.append(name)
                elif value is not None and value.dtype.kind in "iu" and np.any(value != 0):
                    asym.append(name)
            size = self.index.constant_size(scale) if scale else None
            if size is not None and size > 1:
                if node.op_type == "QuantizeLinear" and not self.index.is_constant(node.input[0]):
                    per_channel_act.append(name)
                if self.qtypes[name].startswith("float8"):
                    fp8_pc.append(name)
        if dynamic:
            self.add("DYNAMIC_Q_SCALE", f"{len(dynamic)} Q/DQ node(s) take their scale from a tensor computed at run "
                     f"time ({_names(dynamic)}); TensorRT needs constant scales.",
                     "Some QAT exports leave the amax computation (ReduceMax/Abs/Div) in the graph instead of folding "
                     "it to a constant; TensorRT builds the quantization scales at build time.",
                     "Calibrate statically before export (e.g. pytorch-quantization / modelopt: load calibrated amax, "
                     "learn_amax, then export), or constant-fold the graph (polygraphy surgeon sanitize --fold-constants).",
                     dynamic)
        if asym:
            self.add("NONZERO_ZERO_POINT", f"{len(asym)} Q/DQ node(s) have a zero point that is not 0 ({_names(asym)}); "
                     f"the parser fails with \"{TRT_TEXT['symmetric']}\".",
                     "TensorRT implements symmetric quantization only (real = scale * q); asymmetric ranges need a "
                     "shift it does not have.",
                     "Quantize symmetrically: quantize_static(..., extra_options={'ActivationSymmetric': True, "
                     "'WeightSymmetric': True}) with QInt8 types, or let trtwidgets export Q/DQ from calibrated amax.",
                     asym)
        if per_channel_act:
            self.add("PER_CHANNEL_ACTIVATION", f"{len(per_channel_act)} QuantizeLinear node(s) on activations use "
                     f"per-channel scales ({_names(per_channel_act)}).",
                     "TensorRT supports per-channel scales for weights (constant inputs) only; activations are "
                     "quantized per tensor.", "Use one scale per activation tensor (per_channel only for weights).",
                     per_channel_act)
        if fp8_pc:
            self.add("FP8_PER_CHANNEL", f"{len(fp8_pc)} FP8 Q/DQ node(s) use per-channel scales ({_names(fp8_pc)}).",
                     "TensorRT's FP8 kernels take per-tensor scales; per-channel FP8 is accepted for weights on recent "
                     "releases only and is rejected or falls back on older ones.",
                     "Use per-tensor FP8 scales (or INT8 for per-channel weights).", fp8_pc)

    def _check_conv_kernel_shape(self):
        bad = []
        for node in self.proto.graph.node:
            if node.op_type not in ("Conv", "ConvTranspose") or len(node.input) < 2:
                continue
            producer = self.index.producer.get(node.input[1])
            if producer is not None and producer.op_type == "DequantizeLinear" and attribute(node, "kernel_shape") is None:
                bad.append(_node_name(node))
        if bad:
            old = self.trt is None or self.trt.major < 10
            self.add("CONV_DQ_WEIGHTS_NO_KERNEL_SHAPE",
                     f"{len(bad)} Conv node(s) take weights from a DequantizeLinear and have no kernel_shape attribute "
                     f"({_names(bad)}); TensorRT 8.6's parser rejects them: \"{TRT_TEXT['kernel_shape']}\".",
                     "With Q/DQ weights the kernel is not a constant the parser can read the spatial size from, so it "
                     "relies on the optional kernel_shape attribute.",
                     "Add kernel_shape to each Conv (onnx.helper.make_attribute('kernel_shape', list(W.shape[2:]))); "
                     "trtwidgets' Q/DQ export does this.", bad, severity=None if old else "warning")

    def check_fp8_hardware(self):
        fp8 = [n for n, t in self.qtypes.items() if t in ("float8e4m3fn", "float8e5m2")]
        fp8_flag = bool(self.flags and "fp8" in self.flags and not self.trt11)
        if (fp8 or fp8_flag) and self.cc is not None and self.cc < (8, 9):
            what = f"{len(fp8)} FP8 Q/DQ node(s)" if fp8 else "The FP8 flag"
            self.add("FP8_NEEDS_HARDWARE", f"{what} need(s) a GPU of compute capability 8.9 or newer "
                     f"(Ada, Hopper, Blackwell); this GPU is {self.cc[0]}.{self.cc[1]}.",
                     "FP8 tensor cores exist from compute capability 8.9; TensorRT has no FP8 kernels below it and the "
                     "build fails.", "Build on an 8.9+ GPU, or quantize to INT8 instead of FP8.", fp8)

    def check_flags(self):
        flags = self.flags
        if flags is None:
            return
        precision = [f for f in flags if f in PRECISION_FLAGS]
        if self.trt11:
            if precision:
                self.add("FLAGS_IGNORED_ON_TRT11", f"{self.trt_name} has no precision flags ({', '.join(precision)} "
                         "asked for): every network is strongly typed and the model's types decide each layer's "
                         "precision.", "TensorRT 11 removed BuilderFlag FP16/INT8/FP8/BF16 and precision constraints.",
                         "Convert the model instead: FP16 weights/activations for FP16, Q/DQ nodes for INT8/FP8 "
                         "(trtwidgets exports Q/DQ from calibration); leave the flags empty.")
            return
        for f in flags:
            if self.trt is not None and self.trt < FLAG_SINCE[f]:
                self.add("FLAG_NEEDS_NEWER_TRT", f"The {f.upper()} flag does not exist in {self.trt_name} (added in "
                         f"{FLAG_SINCE[f].short}).", f"BuilderFlag.{f.upper()} is newer than this TensorRT.",
                         f"Drop {f}, or use TensorRT {FLAG_SINCE[f].short}+.")
        if precision and self.trt is not None and self.trt >= TrtVersion(10, 12):
            self.add("FLAGS_DEPRECATED", f"Precision flags ({', '.join(precision)}) are deprecated since TensorRT 10.12 "
                     "and removed in 11.", "NVIDIA moves to strongly typed networks where the model carries the types.",
                     "They still work on this version; to be ready for 11 express precision in the model (FP16 "
                     "conversion, Q/DQ).")
        types = set(self.qtypes.values())
        int8_like = bool(types & {"int8", "uint8"})  # UINT8 is reported on its own; it needs the flag too
        if int8_like and "int8" not in flags:
            self.add("QDQ_REQUIRES_INT8", f"The model has INT8 Q/DQ nodes but the INT8 flag is not set; the build fails "
                     f"with \"{TRT_TEXT['int8_not_configured']}\".",
                     "Up to TensorRT 10, explicit quantization still needs BuilderFlag.INT8 to enable INT8 kernels.",
                     "Add the int8 flag (fp16,int8 lets TensorRT pick FP16 for the layers the Q/DQ nodes leave "
                     "unquantized).")
        elif int8_like and "fp16" not in flags and "bf16" not in flags:
            self.add("QDQ_INT8_WITHOUT_FP16", "INT8 without FP16: layers outside the Q/DQ pairs run in FP32.",
                     "TensorRT only picks precisions the flags allow.",
                     "Add fp16 (flags fp16,int8) unless FP32 accuracy is needed for the unquantized layers.")
        if types & {"float8e4m3fn", "float8e5m2"} and "fp8" not in flags:
            self.add("QDQ_REQUIRES_FP8", "The model has FP8 Q/DQ nodes but the FP8 flag is not set; TensorRT up to 10 "
                     "refuses FP8 layers without it.", "FP8 kernels are enabled by BuilderFlag.FP8.", "Add the fp8 flag.")

    def check_calibrator(self):
        cal = self.calibrator
        if cal is None:
            if (self.flags and "int8" in self.flags and not self.qdq_nodes and not self.trt11):
                self.add("INT8_WITHOUT_CALIBRATION", "The INT8 flag is set but the model has no Q/DQ nodes and no "
                         "calibrator was named: unless a calibrator, a calibration cache or per-tensor dynamic ranges "
                         f"are given, TensorRT says \"{TRT_TEXT['no_calibrator']}\" and runs those layers in higher "
                         "precision.", "Implicit INT8 needs a range for every tensor.",
                         "Choose a calibrator (entropy2, or trtwidgets' own with a calibration cache), or export Q/DQ.",
                         severity="info")
            return
        trt_cal = cal in TRT_CALIBRATORS
        if cal == "none":
            if self.flags and "int8" in self.flags and not self.qdq_nodes and not self.trt11:
                self.add("INT8_WITHOUT_CALIBRATION", "The INT8 flag is set without a calibrator and the model has no Q/DQ "
                         f"nodes; TensorRT says \"{TRT_TEXT['no_calibrator']}\" and runs those layers in FP16/FP32: "
                         "nothing is quantized.", "Implicit INT8 needs a range for every tensor.",
                         "Choose a calibrator (entropy2, or trtwidgets' own with a calibration cache), or export Q/DQ.")
            return
        if self.qdq_nodes:
            self.add("CALIBRATOR_IGNORED_WITH_QDQ", f"The {cal} calibrator is ignored: the model is explicitly quantized "
                     "(Q/DQ), and TensorRT takes the scales from the Q/DQ nodes.",
                     "Calibration and explicit quantization are exclusive; TensorRT uses the Q/DQ scales.",
                     "Drop the calibrator, or calibrate the FP32 model (without Q/DQ) instead.")
        if trt_cal and self.trt11:
            self.add("CALIBRATOR_REMOVED_ON_TRT11", f"{self.trt_name} has no calibrators (IInt8{cal.capitalize()}"
                     "Calibrator was removed).", "TensorRT 11 only quantizes explicitly, from Q/DQ nodes in the model.",
                     "Use trtwidgets' own calibration (calibrator 'toolkit'), which exports a Q/DQ model for "
                     "TensorRT 10/11.")
        elif trt_cal and self.trt is not None and self.trt >= TrtVersion(10, 1):
            self.add("CALIBRATOR_DEPRECATED", f"TensorRT's calibrators are deprecated since 10.1 ({self.trt_name}) and "
                     "removed in 11.", "NVIDIA moved INT8 to explicit quantization (Q/DQ) only.",
                     "It still works here; trtwidgets' own calibration (toolkit) also exports Q/DQ for TensorRT 11.")
        if self.flags is not None and "int8" not in self.flags and not self.trt11 and not self.qdq_nodes:
            self.add("CALIBRATOR_WITHOUT_INT8", f"A calibrator ({cal}) is set but the INT8 flag is not: TensorRT only "
                     "calibrates for INT8, so nothing is quantized.", "BuilderConfig.int8_calibrator is read only with "
                     "BuilderFlag.INT8.", "Add int8 to the flags, or drop the calibrator.")
        dyn = self.summary.dynamic_inputs
        if trt_cal and dyn and not self.trt11:
            self.add("CALIBRATION_AT_OPT_SHAPE", "TensorRT (8.5 and later) calibrates a dynamic-shape network only at "
                     "the calibration profile's opt shape; calibration batches must have exactly that shape.",
                     f"Inputs {', '.join(t.name for t in dyn)} have dynamic dims.",
                     "Set the calibration profile's opt shape to the shape of your calibration data (or let "
                     "trtwidgets pad/resize samples to it).", [t.name for t in dyn])

    def check_profiles(self):
        dyn = self.summary.dynamic_inputs
        if not dyn:
            return
        if self.profiles is None or len(self.profiles) == 0:
            dims = "; ".join(f"{t.name}: " + ", ".join(f"dim {i} ({n})" for i, n in t.dynamic_dims.items()) for t in dyn)
            self.add("DYNAMIC_INPUT_NEEDS_PROFILE", f"Dynamic input dims ({dims}) need an optimization profile (min, opt, "
                     f"max shapes); without one the build fails with \"{TRT_TEXT['no_profile']}\".",
                     "TensorRT picks kernels for a range of shapes, given by the profile; TensorRT 8.5+ also calibrates "
                     "only at the calibration profile's opt shape.",
                     "Add a profile with min/opt/max for each dynamic input (opt = the shape you run most).",
                     [t.name for t in dyn])
            return
        for i, profile in enumerate(self.profiles):
            shapes = _profile_shapes(profile)
            missing = [t.name for t in dyn if t.name not in shapes]
            if missing:
                self.add("DYNAMIC_INPUT_NEEDS_PROFILE", f"Optimization profile {i} gives no shapes for dynamic "
                         f"input(s) {_names(missing)}; the build fails (\"{TRT_TEXT['no_profile']}\" or an "
                         "invalid-profile error).", "Every profile must set min/opt/max for every dynamic input.",
                         f"Add shapes for {', '.join(missing)} to profile {i}.", missing, severity="error")

    def check_dim_names(self):
        from .dim_names import shared_dim_names

        for s in shared_dim_names(self.proto, self.profiles):
            why = ("the exporter wrote a placeholder for 'unknown', not a claim that the axes are equal"
                   if s.reason == "placeholder" else "the optimization profile gives these axes different sizes")
            self.add("SHARED_DIM_NAME", f"Input dims {s.describe()} share one dim_param name: TensorRT's parser makes "
                     f"them one symbolic dimension, and a build whose shapes differ on them fails with "
                     f"\"{TRT_TEXT['shared_dim_name'].format(name=s.name)}\".",
                     f"TensorRT treats every dim_param name as one dimension; here {why}.",
                     "trtwidgets renames them for the build (" + ", ".join(f"{i}[{a}] -> {n}" for i, a, n in s.renames)
                     + "); or re-export with distinct dim names (torch.onnx.export dynamic_axes={'x': {2: 'height', "
                     "3: 'width'}}).", sorted({i for i, _ in s.axes}))

    def check_dtypes(self):
        int64_w = [t.name for t in self.proto.graph.initializer if t.data_type == onnx.TensorProto.INT64]
        int64_io = [t.name for t in self.summary.inputs + self.summary.outputs if t.dtype == "int64"]
        if (int64_w or int64_io) and (self.trt is None or self.trt.major < 10):
            names = int64_io + int64_w
            self.add("INT64_CAST_TO_INT32", f"{len(int64_w)} INT64 initializer(s) and {len(int64_io)} INT64 input(s)/"
                     f"output(s) ({_names(names)}); TensorRT up to 9 says \"{TRT_TEXT['int64']}\".",
                     "TensorRT before 10 has no INT64 tensors; values outside the INT32 range are clamped.",
                     "Usually harmless (shape constants); feed INT32 inputs, and check that no value exceeds 2**31-1.",
                     names, severity="warning" if int64_io or self.trt is not None else "info")
        f64 = [t.name for t in self.proto.graph.initializer if t.data_type == onnx.TensorProto.DOUBLE]
        f64 += [t.name for t in self.summary.inputs + self.summary.outputs if t.dtype == "float64"]
        if f64:
            self.add("FLOAT64_UNSUPPORTED", f"{len(f64)} FLOAT64 tensor(s) ({_names(f64)}); TensorRT computes in 32 bits "
                     "at most.", "DOUBLE is not a TensorRT data type; the parser casts or rejects it.",
                     "Export in float32 (model.float() before torch.onnx.export).", f64)


def lint(model: Union[LoadedModel, onnx.ModelProto, str, Any], flags: Union[None, str, Iterable[str]] = None,
         trt_version: Optional[VersionLike] = None, calibrator: Optional[str] = None,
         profiles: Optional[Sequence[Any]] = None, gpu_compute_capability=None) -> Tuple[Finding, ...]:
    """What would go wrong building ``model`` with TensorRT, said before the build.

    Parameters
    ----------
    model : LoadedModel, onnx.ModelProto or path
        The model (a path is loaded with :func:`~trtwidgets.core.model.load.load_model`).
    flags : str or iterable of str, optional
        Intended precision flags (``"fp16,int8"`` or ``("fp16", "int8")``); None when
        not decided (flag-dependent checks are skipped). An empty list means FP32.
    trt_version : str or TrtVersion, optional
        The TensorRT version to check against (``"8.6"``, ``"10.16"``, ``"11.0"``,
        or ``"installed"``); None when unknown.
    calibrator : str, optional
        ``"none"``, ``"toolkit"`` or a TensorRT calibrator (``"entropy2"``,
        ``"minmax"``, ``"entropy"``, ``"legacy"``, also as ``"trt_entropy2"``).
    profiles : sequence, optional
        Optimization profiles: objects with a ``shapes`` mapping or mappings of
        input name -> shapes. None when not decided.
    gpu_compute_capability : tuple or str, optional
        e.g. ``(8, 9)`` or ``"9.0"``; hardware checks are skipped when None.

    Returns
    -------
    tuple of Finding
        Errors first, then warnings, then infos.

    Raises
    ------
    UserError
        For an unknown flag, calibrator, version or compute capability, or a model that cannot be loaded.
    """
    if isinstance(model, onnx.ModelProto):
        if not model.graph.node:
            raise UserError("The model has an empty graph (no nodes).", "There is nothing for TensorRT to build.",
                            "Check the export: the model must contain at least one operator.")
        model = LoadedModel(path=None, proto=model, summary=summarize(model))
    elif not isinstance(model, LoadedModel):
        model = load_model(model)
    if isinstance(trt_version, str) and trt_version.strip().lower() == "installed":
        trt = installed_trt_version()
        if trt is None:
            raise UserError("No installed TensorRT found.", "--trt-version installed reads the version of the installed "
                            "tensorrt package, and none is installed in this Python environment.",
                            "Name the version you build with (e.g. --trt-version 10.16), or install tensorrt.")
    else:
        trt = parse_trt_version(trt_version) if trt_version is not None else None
    return _Linter(model, normalize_flags(flags), trt, normalize_calibrator(calibrator),
                   None if profiles is None else list(profiles), _compute_capability(gpu_compute_capability)).run()
