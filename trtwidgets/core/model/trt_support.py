"""What each TensorRT release's ONNX parser and builder accept, as plain tables.

Facts lint checks a model against: which precision flags and calibrators exist
(and since when), which ONNX ops and opsets the parser imports, and which
quantized types its Q/DQ importer reads. They come from TensorRT's release notes
and onnx-tensorrt's operators.md; :mod:`trtwidgets.core.model.lint.rules` turns
them into findings.
"""

from __future__ import annotations

from typing import Dict, Tuple

from .trt_version import TrtVersion

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

#: First TensorRT whose ONNX parser reads FP16/BF16 Q/DQ scales. TensorRT 8.6.0's does not: its
#: ``scaleAllPositive`` check ("Scale coefficients must all be positive") fails on FP16 scales that are all
#: positive (seen on an H200: ModelOpt 0.47's default files of every zoo family, the toolkit's TensorRT 10 export
#: of an SVTR block; ``benchmarks/results/peer/zoo_run/``). TensorRT 10 reads them (ModelOpt's default, written
#: for 10). 9.x was not checked and is taken as 8.x.
LOW_PRECISION_SCALES_SINCE = TrtVersion(10, 0)

#: Quantized types TensorRT's Q/DQ importer accepts, with the first TensorRT release that does.
QDQ_TYPES_SINCE: Dict[str, TrtVersion] = {
    "int8": TrtVersion(8, 0), "float8e4m3fn": TrtVersion(9, 0), "int4": TrtVersion(10, 0),
    "float4e2m1": TrtVersion(10, 8),
}
