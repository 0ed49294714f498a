"""The LayerNorm / Softmax / GELU patterns and graph helpers of placement rule 4.

They live in :mod:`trtwidgets.core.model.graph_patterns` (the calibration's ``auto`` range method reads the
same patterns, and calibration stands below the export); this name keeps the export's imports short.
"""

from __future__ import annotations

from ..model.graph_patterns import (PROTECTED_OPS, ConstIndex, PatternMatch, find_protected_patterns, node_key,
                                    node_label, nonconst_inputs, single_consumer)

__all__ = ["PROTECTED_OPS", "PatternMatch", "ConstIndex", "node_label", "node_key", "nonconst_inputs", "single_consumer",
           "find_protected_patterns"]
