"""What a residual block's engine layers say about rule 2's two schemes: shared by the GPU test that builds them
(``tests/gpu/test_residual_schemes.py``) and the CPU test that reads the committed run
(``tests/core/qdq/test_residual_default.py``). Layers are ``[name, type, precision]`` as the inspector JSON gives them.
"""

from __future__ import annotations

import re
from typing import List, Sequence

__all__ = ["add_fused_in_conv", "dequantize_layers", "silu_in_conv"]

_DQ_LAYER = re.compile(r"DequantizeLinear(_clone_\d+)+$")


def silu_in_conv(layers: Sequence[Sequence[str]], conv: str) -> bool:
    """Whether the convolution whose name holds ``conv`` runs its SiLU (``Sigmoid``, ``Mul``) in its own layer."""
    return any(t == "Convolution" and conv in n and "Sigmoid" in n for n, t, _ in layers)


def add_fused_in_conv(layers: Sequence[Sequence[str]], add: str) -> bool:
    """Whether the residual add whose name holds ``add`` runs inside a convolution layer (its epilogue)."""
    return any(t == "Convolution" and add in n for n, t, _ in layers)


def dequantize_layers(layers: Sequence[Sequence[str]]) -> List[str]:
    """Reformat layers that only dequantize a tensor (a DequantizeLinear TensorRT could not fuse: its clones)."""
    return [n for n, t, _ in layers if t == "Reformat" and _DQ_LAYER.search(n)]
