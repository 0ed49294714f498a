"""The float part of a Q/DQ model, named: what a weakly typed TensorRT build should run in FP16.

TensorRT 8.6 (and 10 without strong typing) decides the precision of the layers between Q/DQ
regions by timing, and with the FP16 flag it may still run some in FP32. Pinning those layers to
FP16 with precision constraints (``prefer``) is the weakly typed twin of writing the float part in
FP16 (:mod:`.convert`), which TensorRT 8.6's parser cannot read. Evidence: docs/evidence.md,
"float_part".
"""

from __future__ import annotations

import re
from typing import Iterable, List, Tuple

import onnx

__all__ = ["float_part_nodes", "float_part_pattern"]

# Nodes that hold no math TensorRT could run in FP16 (or that are Q/DQ themselves).
_NOT_MATH = {"QuantizeLinear", "DequantizeLinear", "Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat",
             "Reshape", "Flatten", "Transpose", "Identity", "Cast", "Slice", "ConstantOfShape", "Range", "Size"}


def float_part_nodes(model: onnx.ModelProto, quantized_layers: Iterable[str]) -> List[str]:
    """Names of the nodes of a Q/DQ model that compute in float (not Q/DQ, not a quantized layer).

    Unnamed nodes are left out: a precision pin needs the name TensorRT gives the layer.
    """
    quantized = set(quantized_layers)
    return [n.name for n in model.graph.node
            if n.name and n.op_type not in _NOT_MATH and n.name not in quantized]


def float_part_pattern(names: Iterable[str]) -> Tuple[str, int]:
    """One regular expression matching exactly these layer names (for a recipe's layer precisions), and a count."""
    names = sorted(set(names))
    return "^(" + "|".join(re.escape(n) for n in names) + ")$", len(names)
