"""Why-not-INT8 causes, each explained once, and the Q/DQ export's own reasons for float layers.

:func:`group_causes` turns the per-layer reasons of
:func:`~.explain.why_not_int8` into one entry per
cause (a table explains each once, its rows stay short); :func:`export_kept_float`
reads the export's ``Skip`` records, so that a layer the export kept float says
by which placement rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from .codes import CODES, Int8Reason


@dataclass(frozen=True)
class Int8Cause:
    """One cause, explained once for the layers it concerns (see :func:`group_causes`).

    Attributes
    ----------
    code : str
    title : str
        :data:`CODES`'s title.
    explanation : str
    layers : int
        How many layers have it.
    """

    code: str
    title: str
    explanation: str
    layers: int


def group_causes(reasons: Iterable[Optional[Int8Reason]]) -> Tuple[Int8Cause, ...]:
    """One entry per distinct cause among ``reasons`` (most layers first), so a table explains each once."""
    counts: Dict[Tuple[str, str], int] = {}
    for r in reasons:
        if r is not None:
            key = (r.code, r.cause or r.sentence)
            counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    return tuple(Int8Cause(code, CODES.get(code, code), text, n) for (code, text), n in ordered)


#: The export's placement rules (numbered as in trtwidgets.core.qdq.placement), recognised in a Skip's reason
#: when the record carries no number of its own.
_RULE_WORDS = ((6, ("grouped",)), (5, ("1x1 spatially", "matrix-vector", "output dimension of 1")),
               (3, ("pooling",)), (4, ("layernorm", "softmax", "gelu")), (7, ("exclu",)))


def _rule_of(rule: Any, reason: str) -> Optional[int]:
    """The placement rule a Skip's ``rule`` (0: none recorded) or, failing that, its ``reason`` names."""
    if isinstance(rule, int) and not isinstance(rule, bool) and rule:
        return rule
    match = re.search(r"\brule (\d+)", str(rule or ""))
    if match:
        return int(match.group(1))
    reason = str(reason).lower()
    return next((n for n, words in _RULE_WORDS if any(w in reason for w in words)), None)


def export_kept_float(skipped: Any) -> Dict[str, Tuple[Optional[int], str]]:
    """Node label -> (rule number or None, reason) from the Q/DQ export's ``Skip`` records.

    Parameters
    ----------
    skipped : iterable of Skip, a Placement / export report (``.skipped``), or a mapping node -> reason
    """
    if isinstance(skipped, Mapping):
        return {str(k): (v if isinstance(v, tuple) else (_rule_of(None, str(v)), str(v)))
                for k, v in skipped.items()}
    skipped = getattr(skipped, "skipped", skipped)
    out: Dict[str, Tuple[Optional[int], str]] = {}
    for skip in skipped or ():
        label = skip.node_label
        if label and label not in out:
            out[str(label)] = (_rule_of(skip.rule, skip.reason), str(skip.reason))
    return out
