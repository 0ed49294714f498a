"""What the float part's conversion (:func:`~.convert.convert_float_part`) changed, as records.

Kept apart from the conversion so that readers of an export's report (the export check, the report's
"as written" values) need none of the conversion's machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Tuple

__all__ = ["FloatPartReport", "QdqValue"]


@dataclass(frozen=True)
class FloatPartReport:
    """What :func:`~.convert.convert_float_part` changed.

    Attributes
    ----------
    dtype : str
        ``"fp32"``, ``"fp16"`` or ``"bf16"``.
    converted_initializers : int
        Float initializers and Constant values written in ``dtype``.
    kept_fp32 : tuple of (str, str)
        Node label and why it stays FP32 (with Casts around it).
    casts : int
        Cast nodes added (graph inputs/outputs included).
    clamped : tuple of str
        Values outside the type's range that were clamped (e.g. an FP16 constant above 65504).
    qdq_values : tuple of QdqValue
        Each Q/DQ scale, and each stored weight's integers, that the conversion wrote anew: which node
        reads it (by its index in the graph before the conversion) and under which name the converted
        model holds it. What the conversion changed in the quantization is read here, not guessed from names.
    """

    dtype: str
    converted_initializers: int = 0
    kept_fp32: Tuple[Tuple[str, str], ...] = ()
    casts: int = 0
    clamped: Tuple[str, ...] = field(default=())
    qdq_values: Tuple["QdqValue", ...] = field(default=(), repr=False)

    def to_dict(self) -> dict:
        return {"dtype": self.dtype, "converted_initializers": self.converted_initializers,
                "kept_fp32": [{"node": n, "reason": r} for n, r in self.kept_fp32], "casts": self.casts,
                "clamped": list(self.clamped), "qdq_values": [v.to_dict() for v in self.qdq_values]}

    def __repr__(self) -> str:
        return (f"FloatPartReport({self.dtype}: {self.converted_initializers} values converted, "
                f"{len(self.kept_fp32)} nodes kept FP32, {self.casts} casts, {len(self.clamped)} clamped, "
                f"{len(self.qdq_values)} Q/DQ values rewritten)")


@dataclass(frozen=True)
class QdqValue:
    """A value of a Q/DQ node that :func:`~.convert.convert_float_part` wrote anew (a scale in the float
    part's type, or a stored weight's integers re-quantized to the FP16 scale).

    Attributes
    ----------
    node_index : int
        The Q/DQ node's index in ``graph.node`` before the conversion (the FP32 model's order).
    node : str
        Its label (name, or ``Op(output)``), to check that a model matches.
    slot : int
        The input it reads the value at: 1 (the scale) or 0 (a DequantizeLinear's stored values).
    name : str
        The initializer (or Constant output) holding the value in the converted model.
    """

    node_index: int
    node: str
    slot: int
    name: str

    def to_dict(self) -> dict:
        return {"node_index": self.node_index, "node": self.node, "slot": self.slot, "name": self.name}
