"""What placement decides, as records: the Q/DQ edges, weight sites, skips and the whole plan.

Kept apart from the rules (:mod:`.placement`) so that the rule helpers
(:mod:`.dense_int8`) and readers of a plan need no rule code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from typing import Mapping, Optional, Tuple

from ..model.graph_patterns import PatternMatch

__all__ = ["QuantEdge", "WeightSite", "Skip", "Placement"]


@dataclass(frozen=True)
class QuantEdge:
    """One activation input that gets a Q/DQ pair.

    Attributes
    ----------
    tensor : str
        The quantized tensor.
    node : int
        Index (in ``graph.node``) of the consumer that reads the dequantized tensor.
    input_index : int
        Which input of that consumer.
    node_label : str
        The consumer's name, or ``Op(output)`` for an unnamed node.
    op_type : str
        The consumer's op type.
    rule : str
        Why: ``"weighted-op input"``, ``"residual add: skip input"``, ``"pooling input"``, or
        rule 8's ``"grouped conv output"``, ``"layer output read by INT8 layers"`` and
        ``"shared read"`` (each may be followed by details in parentheses).
    """

    tensor: str
    node: int
    input_index: int
    node_label: str
    op_type: str
    rule: str


@dataclass(frozen=True)
class WeightSite:
    """A constant input of a weighted layer that becomes int8/fp8 + DequantizeLinear.

    ``axis`` is the per-channel axis (output channels), or None where the layout
    has none (a constant first input of MatMul/Gemm is quantized per tensor).
    """

    tensor: str
    node: int
    input_index: int
    node_label: str
    op_type: str
    axis: Optional[int]


@dataclass(frozen=True)
class Skip:
    """Something a rule looked at and left in high precision, and why.

    ``rule`` is the placement rule's number in this module's docstring (0: no rule,
    e.g. a tensor without a range), so a reader can say "kept float by the export, rule N".
    """

    node_label: str
    op_type: str
    reason: str
    tensor: str = ""
    rule: int = 0

    def to_dict(self) -> dict:
        return {"node": self.node_label, "op_type": self.op_type, "tensor": self.tensor, "reason": self.reason,
                "rule": self.rule}


@dataclass(frozen=True)
class Placement:
    """Where Q/DQ go in one model (a placement): the result of :func:`~.placement.place_qdq`.

    Node indices refer to the ``graph.node`` list of the model it was made for.
    """

    edges: Tuple[QuantEdge, ...]
    weights: Tuple[WeightSite, ...]
    skipped: Tuple[Skip, ...]
    patterns: Tuple[PatternMatch, ...]
    excluded: Tuple[str, ...]
    warnings: Tuple[str, ...] = field(default=())
    #: Groups of tensors joined by data movement (Split, Concat, MaxPool, nearest Resize, reshapes) that are
    #: quantized with one scale, so TensorRT moves INT8 data through them without requantizing (rule 9).
    shared_scales: Tuple[Tuple[str, ...], ...] = field(default=())

    def amax_for(self, tensor: str, amax: Mapping[str, float]) -> Optional[float]:
        """The range ``tensor`` is quantized with: its own, or its scale group's largest (rule 9)."""
        own = amax.get(tensor)
        if own is None or not (math.isfinite(float(own)) and float(own) > 0):
            return own  # no range of its own: it stays float, whatever its group has
        for group in self.shared_scales:
            if tensor in group:
                values = [float(amax[t]) for t in group if t in amax and math.isfinite(float(amax[t]))
                          and float(amax[t]) > 0]
                return max(values)
        return own

    @property
    def activation_tensors(self) -> Tuple[str, ...]:
        """Distinct quantized activation tensors, in first-use order."""
        return tuple(dict.fromkeys(e.tensor for e in self.edges))

    def edges_of(self, tensor: str) -> Tuple[QuantEdge, ...]:
        return tuple(e for e in self.edges if e.tensor == tensor)
