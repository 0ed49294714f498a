"""What a Q/DQ export did: every value it wrote or changed, what stayed float and why.

Each quantized activation is recorded with its amax, its scale as the model holds it (after the float
part's FP16/BF16 rounding) and its zero point; each weight with its scales (a summary, and the names
under which :attr:`QdqExport.model` holds them), its rounding error and what the float part's conversion
changed. The export check (:mod:`.export_check`) reads these records instead of deriving them again.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np
import onnx

from ..model.graph_patterns import PatternMatch
from .float_part.report import FloatPartReport
from .placement import Skip

__all__ = ["QuantizedTensor", "QuantizedWeight", "QdqReport", "QdqExport"]


@dataclass(frozen=True)
class QuantizedTensor:
    """An activation that got a Q/DQ pair.

    Attributes
    ----------
    tensor : str
    amax : float
        The range it is quantized with (its scale group's largest, placement rule 9).
    scale : float
        The scale as the model holds it: ``amax / qmax`` in float32, then rounded to the float part's
        type where the float part is FP16/BF16 (:attr:`scale_type`).
    consumers, rules : tuple of str
        The nodes that read it quantized, and the placement rules that put it there.
    zero_point : int
        Always 0 (symmetric), stored as :attr:`zero_point_type`.
    scale_fp32 : float
        ``amax / qmax`` in float32, before the float part's rounding (NaN when not recorded).
    scale_type : str
        ``"fp32"``, ``"fp16"`` or ``"bf16"``: the type the scale is stored in.
    zero_point_type : str
        ``"int8"`` or ``"float8e4m3fn"``.
    quantize_node, dequantize_node : str
        The names of its QuantizeLinear and DequantizeLinear in the model.
    """

    tensor: str
    amax: float
    scale: float
    consumers: Tuple[str, ...]
    rules: Tuple[str, ...]
    zero_point: int = 0
    scale_fp32: float = float("nan")
    scale_type: str = "fp32"
    zero_point_type: str = "int8"
    quantize_node: str = ""
    dequantize_node: str = ""

    @property
    def rounded(self) -> bool:
        """Whether the float part's type changed the scale (its FP32 value was not representable)."""
        return not math.isnan(self.scale_fp32) and self.scale != self.scale_fp32

    def to_dict(self) -> dict:
        return {"tensor": self.tensor, "amax": self.amax, "scale": self.scale, "scale_fp32": self.scale_fp32,
                "scale_type": self.scale_type, "zero_point": self.zero_point,
                "zero_point_type": self.zero_point_type, "quantize_node": self.quantize_node,
                "dequantize_node": self.dequantize_node, "consumers": list(self.consumers), "rules": list(self.rules)}


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
        Largest ``|W - DequantizeLinear(stored)|`` relative to ``max|W|``, with the scales and values as the
        model holds them (the float part's rounding of the scales included).
    scale_min, scale_max : float
        The smallest and largest scale as written; every scale is :meth:`QdqExport.weight_scales`.
    scale_type : str
        ``"fp32"``, ``"fp16"`` or ``"bf16"``: the type the scales are stored in.
    stored : str
        ``"int8"``, ``"float8e4m3fn"``, or ``"float32 on the int8 grid"`` (TensorRT 8.6's Myelin layers,
        which assert on INT8 weight constants: FP32 values already quantized, behind their own Q/DQ).
    dequantize_node : str
        The name of its DequantizeLinear in the model.
    scale_name, values_name : str
        The initializers of the model holding its scales and its stored values.
    scales_rounded : int
        Scales that the float part's type changed (FP16 / BF16 rounding).
    requantized_channels : int
        Channels whose stored integers the FP16 float part quantized again (a scale that rounds to 0 in FP16
        is raised to 2**-24, :mod:`.float_part.weight_scales`).
    """

    tensor: str
    node_label: str
    op_type: str
    axis: Optional[int]
    channels: int
    max_rel_error: float
    scale_min: float = float("nan")
    scale_max: float = float("nan")
    scale_type: str = "fp32"
    stored: str = "int8"
    dequantize_node: str = ""
    scale_name: str = ""
    values_name: str = ""
    scales_rounded: int = 0
    requantized_channels: int = 0

    def to_dict(self) -> dict:
        return {"tensor": self.tensor, "node": self.node_label, "op_type": self.op_type, "axis": self.axis,
                "channels": self.channels, "max_rel_error": self.max_rel_error, "scale_min": self.scale_min,
                "scale_max": self.scale_max, "scale_type": self.scale_type, "stored": self.stored,
                "dequantize_node": self.dequantize_node, "scale_name": self.scale_name,
                "values_name": self.values_name, "scales_rounded": self.scales_rounded,
                "requantized_channels": self.requantized_channels}


@dataclass(frozen=True)
class QdqReport:
    """What :func:`~.export.build_qdq` quantized, what it left in high precision, and why.

    Attributes
    ----------
    precision : str
        ``"int8"`` or ``"fp8"``.
    opset_from, opset_to : int
        The model's opset before and after export.
    activations : tuple of QuantizedTensor
        Every activation Q/DQ pair: amax, scale as written, zero point.
    weights : tuple of QuantizedWeight
        Every stored weight: scales (summary and where), rounding error, what the float part changed.
    skipped : tuple of Skip
        Everything a rule looked at and left in high precision, with the reason (a layer outside a
        spec's node set: "kept float by the plan").
    patterns : tuple of PatternMatch
        LayerNorm / Softmax / GELU kept free of Q/DQ.
    excluded : tuple of str
        Nodes the user excluded (options' ``exclude`` / ``exclude_op_types``).
    quantized_layers : tuple of str
        Weighted layers (Conv, Gemm, ...) whose inputs and weights are all quantized:
        the layers TensorRT will run in INT8/FP8.
    warnings : tuple of str
    high_precision : FloatPartReport, optional
        What the float part's conversion changed (None: the float part is FP32).
    ranges : str
        Where the amax came from, in words (the spec's ``source``: a calibration's method and
        overrides, a cache, a plan); '' when not said.
    clipped : tuple of (str, str)
        ``(tensor, what to do)`` for each quantized activation whose range clips more than the stated
        share of its calibration values (the spec's ``clipping``).
    rewrites : tuple of (str, str)
        ``(rewrite, node label)`` for each exact graph rewrite applied before placement
        (:mod:`trtwidgets.core.model.trt_rewrites`).
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
    high_precision: Optional[FloatPartReport] = None
    ranges: str = ""
    clipped: Tuple[Tuple[str, str], ...] = ()
    rewrites: Tuple[Tuple[str, str], ...] = ()

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
                "warnings": list(self.warnings), **({"ranges": self.ranges} if self.ranges else {}),
                **({"clipped": {t: why for t, why in self.clipped}} if self.clipped else {}),
                **({"rewrites": [list(r) for r in self.rewrites]} if self.rewrites else {})}

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
        if self.rewrites:
            kinds_rw = Counter(r for r, _ in self.rewrites)
            lines.append("  graph rewrites      " + ", ".join(f"{k} x{v}" for k, v in kinds_rw.items())
                         + " (exact; QdqOptions(rewrites=()) writes the graph as it is)")
        changed = self._changed_line()
        if changed:
            lines.append(f"  scales as written   {changed}")
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
        if self.clipped:
            lines.append(f"  clipped ranges      {len(self.clipped)} quantized tensor(s) clip many of their values:")
            for t, why in self.clipped[:5]:
                lines.append(f"    {t}: {why}")
            if len(self.clipped) > 5:
                lines.append(f"    ... {len(self.clipped) - 5} more (report.clipped)")
        return "\n".join(lines)

    def _changed_line(self) -> str:
        """What the float part's type did to the scales and weights, in words ('' when nothing)."""
        types = sorted(({a.scale_type for a in self.activations} | {w.scale_type for w in self.weights}) - {"fp32"})
        if not types:
            return ""
        rounded = sum(a.rounded for a in self.activations)
        w_rounded = sum(1 for w in self.weights if w.scales_rounded)
        requant = sum(w.requantized_channels for w in self.weights)
        return (f"{'/'.join(t.upper() for t in types)}: {rounded} of {len(self.activations)} activation scales and "
                f"the scales of {w_rounded} of {len(self.weights)} weights rounded"
                + (f", {requant} weight channels re-quantized" if requant else ""))

    def __repr__(self) -> str:
        ranges = self.ranges if len(self.ranges) <= 160 else self.ranges[:157] + "..."
        return (f"QdqReport({self.precision.upper()}, opset {self.opset_to}: {len(self.quantized_layers)} layers in "
                f"{self.precision.upper()}, {len(self.activations)} activation Q/DQ, {len(self.weights)} weights, "
                f"{len(self.skipped)} left in high precision; float part {self.high_precision_dtype.upper()}"
                + (f"; ranges: {ranges}" if ranges else "") + "; .summary() for the details)")


@dataclass(frozen=True)
class QdqExport:
    """A Q/DQ model and its report (``repr`` is a few lines; ``report.summary()`` has the details)."""

    model: onnx.ModelProto = field(repr=False, compare=False)
    report: QdqReport
    #: The same Q/DQ model with its float part in FP32 (None when the float part is FP32): the check's reference.
    float32_model: Optional[onnx.ModelProto] = field(default=None, repr=False, compare=False)
    #: Its check on held-back samples (a :class:`~.validate.QdqValidation`; None when none were given).
    check: Optional[Any] = field(default=None, repr=False, compare=False)
    #: When that check failed on accuracy: the tensors to change and how (an :class:`~.export_advice.ExportAdvice`).
    advice: Optional[Any] = field(default=None, repr=False, compare=False)

    def weight_scales(self, tensor: str) -> np.ndarray:
        """The scales of weight ``tensor`` as :attr:`model` holds them (widened to float32).

        Raises
        ------
        KeyError
            ``tensor`` is not a weight of :attr:`report` (its ``weights``).
        """
        from onnx import numpy_helper

        w = next((w for w in self.report.weights if w.tensor == tensor), None)
        if w is None:
            raise KeyError(f"{tensor!r} is not a quantized weight of this export")
        init = next(t for t in self.model.graph.initializer if t.name == w.scale_name)
        return numpy_helper.to_array(init).astype(np.float32)

    def __repr__(self) -> str:
        r = self.report
        hp = r.high_precision
        per_channel = sum(1 for w in r.weights if w.axis is not None)
        lines = [f"QdqExport: {r.precision.upper()} Q/DQ model, opset {r.opset_from}"
                 + (f" -> {r.opset_to}" if r.opset_to != r.opset_from else "")
                 + f", {len(self.model.graph.node)} nodes",
                 f"  {len(r.quantized_layers)} layers in {r.precision.upper()}, {len(r.activations)} activation Q/DQ, "
                 f"{len(r.weights)} weights ({per_channel} per channel); {len(r.skipped)} left in high precision",
                 f"  float part {r.high_precision_dtype.upper()}"
                 + (f" ({len(hp.kept_fp32)} nodes kept FP32, {hp.casts} casts)" if hp is not None else "")]
        changed = r._changed_line()
        if changed:
            lines.append(f"  scales as written: {changed}")
        if r.ranges:
            lines.append("  ranges: " + (r.ranges if len(r.ranges) <= 300 else r.ranges[:297] + "..."))
        if r.clipped:
            lines.append(f"  {len(r.clipped)} quantized tensor(s) clip many of their values (.report.clipped)")
        if self.check is not None:
            failures = self.check.failures
            lines.append(f"  check on {self.check.samples} held-back samples: "
                         + (("FAILED: " + "; ".join(failures))[:300] if failures else "passed")
                         + (" (.advice says what to change)" if self.advice is not None else ""))
        lines.append("  .model, .report (.report.summary()), .float32_model"
                     + (", .check" if self.check is not None else "") + (", .advice" if self.advice is not None else ""))
        return "\n".join(lines)
