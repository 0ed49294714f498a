"""What the planner's accuracy check sees: the one verdict's scoring (:mod:`~..accuracy.verdict`).

Kept as the planner's name for it: every output's worst channel group, non-finite values, and what
the target cannot see.
"""

from __future__ import annotations

from ..accuracy.verdict import (OutputScore, non_finite_where_finite, reference_notes, score_outputs,
                                target_notes)

__all__ = ["OutputScore", "non_finite_where_finite", "reference_notes", "score_outputs", "target_notes"]
