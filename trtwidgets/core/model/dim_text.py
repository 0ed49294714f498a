"""Shapes with symbolic dimensions, printed so a person can read them.

Exporters name dynamic dimensions for machines: Paddle2ONNX writes
``p2o.DynamicDimension.0``, onnxruntime tools ``unk__12``, others ``-1`` or
``?``. In a table, ``[p2o.DynamicDimension.0, 3, p2o.DynamicDimension.1,
p2o.DynamicDimension.2]`` hides the one thing that matters (which axes are
open), so :func:`shape_text` prints ``N×3×H×W``: machine-made names become the
usual letter for their position, short human names (``batch_size``,
``sequence_length``) are kept.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

#: dim_param names that say nothing: the exporter's counters and placeholders.
_MACHINE = re.compile(r"(DynamicDimension|^unk_*\d*$|^dim_?\d+$|^d\d+$|^\?$|^-?1$|^unknown$|^\d+$|^None$|^$|"
                      r"^Dim\d+$|^s\d+$|^[a-z_]*\.\d+$)", re.IGNORECASE)
#: Position letters for the common layouts, by rank.
_LETTERS = {1: "N", 2: "NS", 3: "NSD", 4: "NCHW", 5: "NCDHW"}
#: Human names longer than this are cut (with an ellipsis) in fixed-width terminal tables; widgets pass
#: ``limit=None`` (a cut name, ``Sigmoidoutput_i…``, cannot be told from its neighbours).
MAX_NAME = 16


def dim_text(dim, axis: int, rank: int, limit: Optional[int] = MAX_NAME) -> str:
    """One dimension: an int as is; a symbolic one as its name (cut at ``limit`` characters, None: whole), or its
    position's letter when the name is machine-made."""
    if isinstance(dim, int):
        return str(dim)
    name = str(dim).strip()
    if _MACHINE.search(name):
        letters = _LETTERS.get(rank, "")
        return letters[axis] if axis < len(letters) else f"d{axis}"
    return name if limit is None or len(name) <= limit else name[:limit - 1] + "…"


def shape_text(shape: Sequence, sep: str = "×", limit: Optional[int] = MAX_NAME) -> str:
    """``("p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2")`` -> ``"N×3×H×W"``.

    Parameters
    ----------
    shape : sequence of (int or str)
        A model's declared shape (ints static, strings symbolic).
    sep : str
        Between dimensions.
    limit : int, optional
        Symbolic names longer than this are cut (None: never).
    """
    dims = list(shape)
    return sep.join(dim_text(d, i, len(dims), limit) for i, d in enumerate(dims)) or "scalar"


def tensor_shape_text(tensor, sep: str = "×", limit: Optional[int] = MAX_NAME) -> str:
    """A model input's or output's shape as :func:`shape_text` writes it, or ``"unknown shape"`` when the model
    declares none (a tensor without a shape is not a scalar: its rank is unknown).

    Parameters
    ----------
    tensor : TensorInfo
    """
    if not tensor.has_shape:
        return "unknown shape"
    return shape_text(tensor.shape, sep, limit)
