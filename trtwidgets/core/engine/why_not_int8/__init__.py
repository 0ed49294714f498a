"""Why a layer does not run in INT8, one room per part.

:mod:`.codes` the codes, what each means and the reason value; :mod:`.inputs` what is read
besides the engine (recipe, calibration cache, Q/DQ tensors); :mod:`.facts` what the rules
read (the build's context, a layer's facts, layer types without INT8); :mod:`.rules` the
rules, as a table tried in order; :mod:`.explain` the runner (:func:`why_not_int8`);
:mod:`.causes` one entry per cause, and the Q/DQ export's own reasons.
"""

from __future__ import annotations

from .causes import Int8Cause, export_kept_float, group_causes
from .codes import CODES, Int8Reason
from .explain import why_not_int8
from .facts import NO_INT8_TYPES
from .inputs import calibration_names, qdq_tensor_names

__all__ = ["CODES", "NO_INT8_TYPES", "Int8Cause", "Int8Reason", "calibration_names", "export_kept_float",
           "group_causes", "qdq_tensor_names", "why_not_int8"]
