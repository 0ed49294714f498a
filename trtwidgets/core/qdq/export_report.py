"""What a Q/DQ export did: the quantized tensors and weights, what stayed float and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import onnx

from .graph_patterns import PatternMatch
from .high_precision import HighPrecisionReport
from .placement import Skip

__all__ = ["QuantizedTensor", "QuantizedWeight", "QdqReport", "QdqExport"]


@dataclass(frozen=True)
class QuantizedTensor:
    """An activation that got a Q/DQ pair."""

    tensor: str
    amax: float
    scale: float
    consumers: Tuple[str, ...]
    rules: Tuple[str, ...]

    def to_dict(self) -> dict:
        return {"tensor": self.tensor, "amax": self.amax, "scale": self.scale,
                "consumers": list(self.consumers), "rules": list(self.rules)}


@dataclass(frozen=True)
class QuantizedWeight:
    """A weight stored quantized with a DequantizeLinear.

    Attributes
    ----------
    tensor, node_label, op_type : str
        The float weight and the layer reading it.
    axis : int or None
        Per-channel axis, None for one scale.
    channels : int
        Number of scales.
    max_rel_error : float
        Largest ``|W - dequant(quant(W))|`` relative to ``max|W|`` (rounding error).
    """

    tensor: str
    node_label: str
    op_type: str
    axis: Optional[int]
    channels: int
    max_rel_error: float

    def to_dict(self) -> dict:
        return {"tensor": self.tensor, "node": self.node_label, "op_type": self.op_type, "axis": self.axis,
                "channels": self.channels, "max_rel_error": self.max_rel_error}


@dataclass(frozen=True)
class QdqReport:
    """What :func:`build_qdq` quantized, what it left in high precision, and why.

    Attributes
    ----------
    precision : str
        ``"int8"`` or ``"fp8"``.
    opset_from, opset_to : int
        The model's opset before and after export.
    activations : tuple of QuantizedTensor
    weights : tuple of QuantizedWeight
    skipped : tuple of Skip
        Everything a rule looked at and left in high precision, with the reason.
    patterns : tuple of PatternMatch
        LayerNorm / Softmax / GELU kept free of Q/DQ.
    excluded : tuple of str
        Nodes the user excluded.
    quantized_layers : tuple of str
        Weighted layers (Conv, Gemm, ...) whose inputs and weights are all quantized:
        the layers TensorRT will run in INT8/FP8.
    warnings : tuple of str
    ranges : str
        Where the amax came from, in words (a calibration's method and overrides, or
        statistics turned into ranges with a stated method); '' when the caller gave amax.
    """

    precision: str
    opset_from: int
    opset_to: int
    activations: Tuple[QuantizedTensor, ...]
    weights: Tuple[QuantizedWeight, ...]
    skipped: Tuple[Skip, ...]
    patterns: Tuple[PatternMatch, ...]
    excluded: Tuple[str, ...]
    quantized_layers: Tuple[str, ...]
    warnings: Tuple[str, ...] = field(default=())
    high_precision: Optional[HighPrecisionReport] = None
    ranges: str = ""

    @property
    def high_precision_dtype(self) -> str:
        """The type of the non-quantized part: ``"fp32"``, ``"fp16"`` or ``"bf16"``."""
        return self.high_precision.dtype if self.high_precision is not None else "fp32"

    def to_dict(self) -> dict:
        extra = {"high_precision": self.high_precision.to_dict()} if self.high_precision is not None else {}
        return {"precision": self.precision, "opset_from": self.opset_from, "opset_to": self.opset_to, **extra,
                "activations": [a.to_dict() for a in self.activations],
                "weights": [w.to_dict() for w in self.weights],
                "skipped": [s.to_dict() for s in self.skipped],
                "patterns": [p.to_dict() for p in self.patterns],
                "excluded": list(self.excluded), "quantized_layers": list(self.quantized_layers),
                "warnings": list(self.warnings), **({"ranges": self.ranges} if self.ranges else {})}

    def summary(self, max_lines: int = 20) -> str:
        """Plain-text report: counts, then each skip with its reason."""
        lines = [f"Q/DQ export ({self.precision.upper()}), opset {self.opset_from}"
                 + (f" -> {self.opset_to}" if self.opset_to != self.opset_from else ""),
                 f"  quantized layers    {len(self.quantized_layers)}",
                 f"  activation Q/DQ     {len(self.activations)} tensors",
                 f"  weight DQ           {len(self.weights)} (per-channel "
                 f"{sum(1 for w in self.weights if w.axis is not None)})",
                 f"  float part          {self.high_precision_dtype.upper()}"
                 + (f" ({len(self.high_precision.kept_fp32)} nodes kept FP32, {self.high_precision.casts} casts)"
                    if self.high_precision is not None else "")]
        if self.ranges:
            lines.append(f"  ranges              {self.ranges}")
        rules: Dict[str, int] = {}
        for a in self.activations:
            for r in a.rules:
                key = r.split(" (")[0]
                rules[key] = rules.get(key, 0) + 1
        for r, n in rules.items():
            lines.append(f"    {r}: {n}")
        if self.patterns:
            kinds: Dict[str, int] = {}
            for p in self.patterns:
                kinds[p.kind] = kinds.get(p.kind, 0) + 1
            lines.append("  kept free of Q/DQ  " + ", ".join(f"{k} x{v}" for k, v in kinds.items()))
        if self.excluded:
            lines.append(f"  excluded by you     {len(self.excluded)}: " + ", ".join(self.excluded[:8])
                         + (" ..." if len(self.excluded) > 8 else ""))
        if self.skipped:
            lines.append(f"  left in high precision ({len(self.skipped)}):")
            for s in self.skipped[:max_lines]:
                lines.append(f"    {s.node_label} [{s.op_type}]{' ' + s.tensor if s.tensor else ''}: {s.reason}")
            if len(self.skipped) > max_lines:
                lines.append(f"    ... {len(self.skipped) - max_lines} more")
        for w in self.warnings:
            lines.append(f"  warning: {w}")
        return "\n".join(lines)


@dataclass(frozen=True)
class QdqExport:
    """A Q/DQ model and its report."""

    model: onnx.ModelProto = field(repr=False, compare=False)
    report: QdqReport
    #: The same Q/DQ model with its float part in FP32 (None when the float part is FP32): the check's reference.
    float32_model: Optional[onnx.ModelProto] = field(default=None, repr=False, compare=False)
