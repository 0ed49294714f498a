"""Pre-build lint, one room per part: what it reports, what its rules share, the rules, the run.

:mod:`.codes` the finding codes, their severities, TensorRT's own texts and the :class:`Finding`
value; :mod:`.context` what every rule reads (the model's facts, the user's intent); :mod:`.rules`
the rules, as the table :data:`~.rules.RULES` in the order lint runs them (with
:mod:`.rules_graph` on the graph's structure and :mod:`.rules_types` on types); :mod:`.run`
:func:`lint` itself. Callers know these names as ``trtwidgets.core.model.lint.*``.
"""

from __future__ import annotations

from .codes import CODES, SEVERITIES, TRT_TEXT, Finding, has_errors
from .run import lint, normalize_calibrator, normalize_flags

__all__ = ["CODES", "SEVERITIES", "TRT_TEXT", "Finding", "has_errors", "lint", "normalize_calibrator",
           "normalize_flags"]
