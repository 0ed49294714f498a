"""TensorRT's tensor format and type strings -> precision and layout names.

The engine inspector describes each tensor in English up to TensorRT 10
(``"Row major linear FP32"``, ``"Channel major FP16 format where channel % 8 == 0"``,
``"Thirty-two wide channel vectorized row major Int8 format"``), as a bare type
name for generated kernels (``"Half"``), or, on TensorRT 11, as enum names in
separate ``Datatype`` and ``Format`` keys. :func:`precision_from_format` and
:func:`layout_from_format` read all of them.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["NA_DYNAMIC", "PRECISIONS", "QUANTIZED", "precision_from_format", "layout_from_format"]

#: What TensorRT writes for a tensor's format when the engine's shapes were not fixed.
NA_DYNAMIC = "N/A due to dynamic shapes"
#: Every precision name this module produces, most to least common in tables.
PRECISIONS = ("INT8", "FP8", "INT4", "FP4", "FP16", "BF16", "FP32", "FP64", "INT32", "INT64", "UINT8", "BOOL",
              "N/A", "UNKNOWN")
#: Precisions that mean a quantized layer when a layer touches them.
QUANTIZED = ("INT8", "FP8", "INT4", "FP4")

# Tokens of format strings and type names, lower-cased, "k" prefix of enum names removed.
_TOKEN_PRECISION = {
    "fp32": "FP32", "float": "FP32", "float32": "FP32",
    "fp16": "FP16", "half": "FP16", "float16": "FP16",
    "bf16": "BF16", "bfloat16": "BF16",
    "fp8": "FP8", "float8": "FP8", "e4m3": "FP8", "fp8e4m3": "FP8",
    "fp4": "FP4", "e2m1": "FP4", "fp4e2m1": "FP4",
    "int8": "INT8", "uint8": "UINT8", "int4": "INT4",
    "int32": "INT32", "int64": "INT64", "bool": "BOOL",
    "double": "FP64", "fp64": "FP64",
}
_ENUM_TOKENS = {"kfloat", "khalf", "kint8", "kint32", "kint64", "kbool", "kuint8", "kfp8", "kbf16", "kint4", "kfp4"}
_WORD = re.compile(r"[A-Za-z0-9]+")

# English layouts (TensorRT 8.x-10.x) -> TensorFormat names.
_WIDTH = {"two": 2, "four": 4, "eight": 8, "sixteen": 16, "thirty-two": 32}
_VECTORIZED = re.compile(r"^(two|four|eight|sixteen|thirty-two) wide channel vectorized row major", re.I)
_CHANNEL_MOD = re.compile(r"channel (?:%|==) (\d+)")
# trt.TensorFormat member names (TensorRT 11 writes them in the Format key).
_TENSOR_FORMATS = {"LINEAR", "CHW2", "HWC8", "CHW4", "CHW16", "CHW32", "DHWC8", "CDHW32", "HWC", "DLA_LINEAR",
                   "DLA_HWC4", "HWC16", "DHWC"}


def precision_from_format(text: Optional[str]) -> str:
    """The data type named in a TensorRT format or type string.

    Parameters
    ----------
    text : str or None
        ``"Row major linear FP32"``, ``"Four wide channel vectorized row major Int8 format"``,
        ``"Half"``, ``"kINT8"``, ``"N/A due to dynamic shapes"``...

    Returns
    -------
    str
        One of :data:`PRECISIONS`.
    """
    if text is None:
        return "UNKNOWN"
    s = str(text).strip()
    if s.startswith("N/A"):
        return "N/A"
    for word in _WORD.findall(s):
        w = word.lower()
        if w in _ENUM_TOKENS:
            w = w[1:]
        if w in _TOKEN_PRECISION:
            return _TOKEN_PRECISION[w]
    return "UNKNOWN"


def layout_from_format(text: Optional[str]) -> str:
    """The memory layout in a format string, as a TensorFormat name (``"CHW32"``, ``"HWC8"``...).

    Empty for strings that name only a type (``"Half"``) and ``"N/A"`` for dynamic shapes.
    """
    if not text:
        return ""
    s = str(text).strip().rstrip(".")
    if s.startswith("N/A"):
        return "N/A"
    three_d = "3 spatial" in s
    m = _VECTORIZED.match(s)
    if m:
        width = _WIDTH[m.group(1).lower()]
        return f"{'CDHW' if three_d else 'CHW'}{width}"
    low = s.lower()
    if low.startswith("channel major"):
        mod = _CHANNEL_MOD.search(s)
        base = "DHWC" if three_d else "HWC"
        return f"{base}{mod.group(1)}" if mod else base
    if low.startswith("row major"):
        return "LINEAR"
    # TensorRT 11 style: the Format key holds the enum name itself.
    word = s.split()[0] if s.split() else ""
    word = word[1:] if word[:1] == "k" and word[1:2].isupper() else word
    return word.upper() if word.upper() in _TENSOR_FORMATS else ""
