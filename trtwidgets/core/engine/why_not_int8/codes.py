"""The why-not-INT8 codes, what each means, and the reason value the rules return.

The rules (:data:`~.rules.RULES`) are tried in this order, most certain first; the first
that applies is a layer's reason:

======================== ==================================================================
code                     meaning
======================== ==================================================================
PRECISION_UNKNOWN        the inspector gave no formats (dynamic shapes, no context)
NOT_FLOAT                the layer works on Int32/Int64/Bool tensors (shapes, indices)
INT8_NOT_ENABLED         the build's flags lack INT8 (from the recipe; or guessed when no
                         layer of the engine runs INT8 and no recipe was given)
PRECISION_CONSTRAINT     a recipe override pins a fused node to another precision
NO_INT8_IMPLEMENTATION   the layer type has no INT8 kernel (table :data:`NO_INT8_TYPES`)
NO_SCALE                 an input or output has no scale: missing from the calibration cache
                         (implicit) or not surrounded by Q/DQ (explicit); tensors named. Without
                         the Q/DQ model, read from the engine's own Q/DQ layers and INT8 tensors
KEPT_FLOAT_BY_EXPORT     (explicit) the Q/DQ export kept the node in high precision on purpose
                         (a placement rule, numbered as in trtwidgets.core.qdq.placement);
                         given as ``kept_float`` (the export's Skip records)
QDQ_NOT_FUSED            (explicit) Q/DQ surround the layer, yet TensorRT found no INT8 fusion
                         for it and ran it in floating point between its Q/DQ
FIRST_TACTIC             INT8 was allowed and the scales were there, but the build ran at builder
                         optimization level 0, where TensorRT takes the first tactic that runs
HIGHER_PRECISION_FASTER  (implicit) INT8 was allowed and the scales were there, yet TensorRT timed a
                         FP16/FP32 tactic faster; the reason says so when the recipe's level is below 3
                         (evidence: docs/evidence.md, "why_not_int8")
BIAS_FLOAT               (INT8 layers) the bias stays float: expected, said so
======================== ==================================================================

In explicit quantization Q/DQ placement decides, and TensorRT does not time INT8 against float,
so FIRST_TACTIC and HIGHER_PRECISION_FASTER are implicit-only.

Each reason has a ``short`` text for its table row and a ``cause`` shared by every row with the
same cause, which :func:`~.causes.group_causes` lists once.
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
