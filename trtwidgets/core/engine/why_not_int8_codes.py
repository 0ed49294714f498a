"""The why-not-INT8 codes and the reason value, shared by the rules and the cause grouping.

See :mod:`trtwidgets.core.engine.why_not_int8` for what each code means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

#: Every code, with a short title for legends and filters.
CODES: Dict[str, str] = {
    "PRECISION_UNKNOWN": "precision unknown",
    "NOT_FLOAT": "integer/bool data",
    "INT8_NOT_ENABLED": "INT8 not enabled",
    "PRECISION_CONSTRAINT": "precision override",
    "NO_INT8_IMPLEMENTATION": "no INT8 kernel",
    "NO_SCALE": "no scale",
    "KEPT_FLOAT_BY_EXPORT": "kept float by the export",
    "FIRST_TACTIC": "opt level 0: first tactic taken",
    "QDQ_NOT_FUSED": "Q/DQ not fused into an INT8 kernel",
    "HIGHER_PRECISION_FASTER": "FP tactic was faster",
    "BIAS_FLOAT": "bias stays float (expected)",
}


@dataclass(frozen=True)
class Int8Reason:
    """Why one layer is not INT8 (or, for BIAS_FLOAT, a note on an INT8 layer).

    Attributes
    ----------
    code : str
        One of :data:`CODES`.
    sentence : str
        The explanation, naming tensors, nodes and settings.
    tensors : tuple of str
        Tensors concerned (for NO_SCALE: the ones without a scale).
    expected : bool
        True for notes that need no action (BIAS_FLOAT).
    short : str
        A few words for the layer's row, naming the tensor or node concerned.
    cause : str
        The explanation and the fix, the same for every layer with this cause (no names).
    """

    code: str
    sentence: str
    tensors: Tuple[str, ...] = ()
    expected: bool = False
    short: str = ""
    cause: str = ""
