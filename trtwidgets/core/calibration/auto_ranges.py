"""The range method ``auto``: each tensor's range chosen from its statistics and its role in the model.

Every method computes its range per tensor (:mod:`.ranges`); ``auto`` picks, per tensor, which one
is exported, and says why (a :class:`RangeChoice`):

* by the tensor's **role** (:mod:`trtwidgets.core.model.tensor_roles`): Softmax outputs, Softmax
  inputs (attention logits) and the tensors inside a LayerNorm or a GELU take **max** (their largest
  values dominate what the next op computes); LayerNorm and GELU **outputs** take **mse** (keeps
  outlier channels and long tails that a percentile or entropy cuts);
* a tensor with fewer than :data:`MIN_VALUES` calibration values takes **max**;
* every other tensor takes **percentile** (99.99 by default): it clips a stated share of the values,
  where entropy clips a share the data decides.

A chosen range that still clips more than :data:`CLIP_NOTE_SHARE` of a tensor's calibration values
is named by :func:`clipping_notes` with what to do. How the rule was chosen: docs/evidence.md,
"auto_ranges".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Mapping, Optional

from .ranges import METHODS, RangeResult

__all__ = ["AUTO", "CLIP_NOTE_SHARE", "DEFAULT_METHOD", "EXPORT_METHODS", "ROLE_METHOD",
           "MIN_VALUES", "RULE_VERSION", "RangeChoice", "auto_choices", "choose_range", "choice_counts", "clipping_notes"]

AUTO = "auto"
#: The methods a calibration exports: ``auto`` (per tensor) or one method for every tensor.
EXPORT_METHODS = (AUTO,) + tuple(METHODS)
#: The version of the rule a saved calibration's choices were made by.
RULE_VERSION = 1
#: A chosen range clipping more than this share of the calibration values is named, with what to do.
CLIP_NOTE_SHARE = 0.001
#: A tensor with fewer calibration values than this takes max: too few to judge what a clipping range loses
#: (a squeeze-excite block's pooled vector: a few hundred values).
MIN_VALUES = 4096
#: The method of every tensor without a role.
DEFAULT_METHOD = "percentile"

#: Role -> (method, why): the tensors whose range the graph decides.
ROLE_METHOD: Dict[str, tuple] = {
    "softmax_output": ("max", "Softmax output, bounded in [0, 1]: max keeps its peaks (the attention paid)"),
    "attention_logits": ("max", "attention logits: Softmax weighs their largest values, max keeps them"),
    "softmax_input": ("max", "Softmax input: its largest values decide the output, max keeps them"),
    "layernorm_internal": ("max", "inside a LayerNorm (mean, variance, scale): max keeps the rows' statistics"),
    "gelu_internal": ("max", "inside a GELU: max keeps its input's range through erf/tanh"),
    "layernorm_output": ("mse", "LayerNorm output: mse keeps the outlier channels the next layer reads, with the "
                                "least INT8 error"),
    "gelu_output": ("mse", "GELU output: mse weighs its long positive tail against resolution"),
}


@dataclass(frozen=True)
class RangeChoice:
    """The method ``auto`` exported for one tensor, and why (a short reason)."""

    method: str
    reason: str

    def to_list(self) -> list:
        return [self.method, self.reason]


def _pct(share: float) -> str:
    return f"{share * 100:.3g}%" if share >= 0.001 else f"{share * 100:.1g}%"


def _default_choice(per: Mapping[str, RangeResult], percentile: float) -> RangeChoice:
    r = per.get(DEFAULT_METHOD)
    if r is None or not _usable(r):
        return RangeChoice("max", "no usable percentile range")
    return RangeChoice(DEFAULT_METHOD, f"percentile {percentile:g}: clips {_pct(r.clipped_fraction)} of values, "
                                       "the histogram's rare outliers")


def _usable(r: Optional[RangeResult]) -> bool:
    return r is not None and math.isfinite(r.amax) and r.amax > 0


def choose_range(per: Mapping[str, RangeResult], role: Optional[str] = None,
                 count: Optional[int] = None, percentile: float = 99.99) -> RangeChoice:
    """The method ``auto`` exports for a tensor with these ranges (every method's, at ``percentile``), this role
    and ``count`` values."""
    if role in ROLE_METHOD:
        method, why = ROLE_METHOD[role]
        if _usable(per.get(method)):
            return RangeChoice(method, why)
    if count is not None and count < MIN_VALUES and _usable(per.get("max")):
        return RangeChoice("max", f"{count} values only: too few to judge what clipping loses, max keeps them")
    return _default_choice(per, percentile)


def auto_choices(ranges: Mapping[str, Mapping[str, RangeResult]], roles: Optional[Mapping[str, str]] = None,
                 counts: Optional[Mapping[str, int]] = None, percentile: float = 99.99) -> Dict[str, RangeChoice]:
    """Tensor -> :class:`RangeChoice` for every tensor with ranges (``roles``: tensor -> role, from the graph;
    ``counts``: tensor -> calibration values; ``percentile``: the ranges' percentile)."""
    roles, counts = roles or {}, counts or {}
    return {name: choose_range(per, roles.get(name), counts.get(name), percentile) for name, per in ranges.items()}


def choice_counts(choices: Mapping[str, RangeChoice]) -> Dict[str, int]:
    """Method -> how many tensors ``auto`` gave it, most first."""
    counts: Dict[str, int] = {}
    for c in choices.values():
        counts[c.method] = counts.get(c.method, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def clipping_notes(clipped: Mapping[str, float], methods: Mapping[str, str],
                   share: float = CLIP_NOTE_SHARE) -> Dict[str, str]:
    """Tensor -> what to do, for each tensor whose exported range clips more than ``share`` of its values.

    Parameters
    ----------
    clipped : mapping
        Tensor -> share of its calibration values above the exported amax.
    methods : mapping
        Tensor -> the method (or ``"override"``) the amax came from.
    """
    out = {}
    for name, frac in clipped.items():
        if not frac > share:
            continue
        how = methods.get(name, "")
        fix = ("raise its override" if how == "override" else
               "give it the max range (an amax override) or keep its readers in high precision")
        out[name] = f"{how or 'its'} range clips {_pct(frac)} of its calibration values: {fix}"
    return out
