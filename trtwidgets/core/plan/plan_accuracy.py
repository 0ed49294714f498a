"""What the planner's accuracy check sees: every output and every channel group, and what the target cannot see.

The default target (a cosine, an SNR) is judged on the **worst channel group** of every
output (:func:`~..accuracy.output_groups.check_outputs`: values standardized per channel),
not on a pooled output cosine: a packed detector output ``[N, 4+C, A]`` keeps a pooled
cosine of 0.999 while its class scores lose a quarter of the confident detections,
because the box coordinates carry nearly all of its energy. The pooled cosine is kept
beside it, for comparison.

:func:`target_notes` says, once per plan, what the target cannot see: outputs a task
metric does not read, and channel groups a pooled metric (``--metric cosine``) is blind to.
"""

from __future__ import annotations

import math
from typing import List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..accuracy.metrics import cosine_similarity
from ..accuracy.output_groups import BLIND_ENERGY_SHARE, check_outputs, group_metrics

__all__ = ["OutputScore", "non_finite_where_finite", "reference_notes", "score_outputs", "target_notes"]


class OutputScore(NamedTuple):
    """A candidate's accuracy against FP32 as the planner's check sees it."""

    cosine: float  #: the lowest cosine of any channel group of any output
    snr_db: float  #: the SNR of the worst group (lowest SNR)
    worst: str  #: that group, ``output[group]``
    pooled_cosine: float  #: the lowest plain output cosine (what the check looked at before)
    non_finite: int = 0  #: values that are NaN or Inf in the candidate where FP32's are finite


def _numeric(reference: Mapping[str, np.ndarray]) -> List[str]:
    return [n for n in reference if np.issubdtype(np.asarray(reference[n]).dtype, np.number)]


def non_finite_where_finite(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]) -> int:
    """How many values are NaN or Inf in ``candidate`` where FP32's ``reference`` is finite (every numeric output).

    Every metric leaves non-finite positions out (:mod:`~..accuracy.metrics`), so a candidate that writes NaN
    into 2 of 40 values can keep a cosine of 0.9995: this count is what fails it.
    """
    count = 0
    for name in _numeric(reference):
        ref = np.asarray(reference[name])
        cand = np.asarray(candidate[name])
        if cand.size != ref.size or not np.issubdtype(cand.dtype, np.number):
            continue  # check_outputs has refused another size; a non-numeric candidate has no score at all
        count += int(np.count_nonzero(np.isfinite(ref) & ~np.isfinite(cand.reshape(ref.shape))))
    return count


def score_outputs(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]) -> OutputScore:
    """The worst channel group's cosine and SNR over every output, its label, the worst pooled output cosine, and
    the count of non-finite values where FP32 is finite (:func:`non_finite_where_finite`; any fails the target).

    Outputs are batch first (:func:`~.plan_data.run_samples`); non-numeric outputs are skipped.
    """
    check = check_outputs(dict(reference), dict(candidate))
    pooled = [cosine_similarity(reference[n], candidate[n]) for n in _numeric(reference)]
    bad = non_finite_where_finite(reference, candidate)
    worst = check.worst
    if worst is None:
        return OutputScore(math.nan, math.nan, "", min(pooled, default=math.nan), bad)
    # The target's cosine is the lowest of any group; its SNR the lowest of any group (they may be two groups).
    cos = min(g.cosine for g in check.groups)
    return OutputScore(float(cos), float(worst.snr_db), worst.label, float(min(pooled, default=math.nan)), bad)


def reference_notes(reference: Mapping[str, np.ndarray], where: str = "on the held-back samples") -> List[str]:
    """What FP32's own outputs leave out of every score: a note per output holding NaN or Inf.

    Raises
    ------
    UserError
        Every numeric output is NaN or Inf throughout: there is nothing to judge a candidate against
        (every metric would score it perfect).
    """
    from ..common.errors import UserError

    notes: List[str] = []
    empty: List[str] = []
    names = _numeric(reference)
    for name in names:
        ref = np.asarray(reference[name])
        bad = int(ref.size - np.count_nonzero(np.isfinite(ref)))
        if not bad:
            continue
        if bad == ref.size:
            empty.append(name)
            notes.append(f"FP32's output {name!r} is NaN or Inf in every value {where}: it is not checked at all")
        else:
            notes.append(f"FP32's output {name!r} holds {bad} NaN or Inf of its {ref.size} values {where}: those "
                         "positions are left out of every score (a candidate must be finite wherever FP32 is)")
    if names and len(empty) == len(names):
        raise UserError(f"FP32's outputs {where} are NaN or Inf in every value ({', '.join(map(repr, empty))}).",
                        "Every score compares finite values only: against these outputs any candidate, even one of "
                        "random numbers, would meet the target.",
                        "Check the model and the samples (an input out of its range, a division by zero in the "
                        "graph): FP32 must give finite outputs on the held-back samples.")
    return notes


def _pooled_blind(reference: Mapping[str, np.ndarray], outputs: Sequence[str]) -> List[Tuple[str, List[str], float]]:
    """``(output, tiny groups, their energy share)`` for outputs with groups a pooled metric cannot see."""
    out = []
    for name in outputs:
        ref = np.asarray(reference[name])
        if not np.issubdtype(ref.dtype, np.number):
            continue
        groups = group_metrics(ref, ref, name)
        tiny = [g for g in groups if g.energy_share < BLIND_ENERGY_SHARE]
        if len(groups) > 1 and tiny and len(tiny) < len(groups):
            out.append((name, [g.group for g in tiny], sum(g.energy_share for g in tiny)))
    return out


def target_notes(reference: Mapping[str, np.ndarray], target, metric_outputs: Optional[Sequence[str]] = None,
                 metric_pooled: bool = False) -> List[str]:
    """Warnings about what ``target`` cannot see, in words (empty when it sees everything).

    Parameters
    ----------
    reference : mapping
        FP32's outputs, batch first.
    target : PlanTarget
    metric_outputs : sequence of str, optional
        The outputs the target's task metric reads (None: unknown, e.g. the user's own metric).
    metric_pooled : bool
        The task metric is a pooled cosine or SNR.
    """
    names = [n for n in reference if np.issubdtype(np.asarray(reference[n]).dtype, np.number)]
    notes: List[str] = []
    metric_only = target.cosine is None and target.snr_db is None
    has_metric = target.metric is not None or target.metric_factory is not None
    if metric_only and has_metric and metric_outputs is not None:
        unread = [n for n in names if n not in set(metric_outputs)]
        if unread:
            notes.append(f"warning: the target's metric reads {', '.join(map(repr, metric_outputs))} only: output(s) "
                         f"{', '.join(map(repr, unread))} are not checked; add --target-cosine to check every "
                         "output's channel groups too")
    if metric_pooled:
        for name, tiny, share in _pooled_blind(reference, metric_outputs or names):
            shown = ", ".join(tiny[:6]) + (" ..." if len(tiny) > 6 else "")
            notes.append(f"warning: the target's metric is a pooled cosine/SNR: in output {name!r} it cannot see "
                         f"{shown} ({share:.2%} of the output's energy); use --target-cosine (worst channel group), "
                         "or a task metric such as --metric detection")
    elif not metric_only:
        for name, tiny, share in _pooled_blind(reference, names):
            notes.append(f"output {name!r}: a pooled cosine cannot see {', '.join(tiny[:6])} ({share:.2%} of its "
                         "energy); the target is checked on the worst channel group instead")
    return notes
