"""Which tensor the calibration explorer opens on.

The top of the disagreement ranking is often a tiny tensor (a 160-value
``Reshape`` of a classifier head): its histogram has a handful of values and
says little about calibration. The explorer opens instead on the
highest-ranked tensor that holds at least as many values per sample as the
median tensor, so the first figure shows a real activation distribution.
"""

from __future__ import annotations

from typing import Optional, Sequence


def opening_tensor(stats, ranked: Sequence[str] = ()) -> Optional[str]:
    """The first tensor of ``ranked`` with at least the median number of values; else the largest tensor.

    Parameters
    ----------
    stats : ActivationStats
        ``stats.tensors`` maps name -> TensorStats (with ``count``, the finite values seen).
    ranked : sequence of str
        Tensor names, most interesting first (e.g. the explorer's disagreement ranking).

    Returns
    -------
    str or None
        None when the statistics hold no tensor.
    """
    counts = {name: int(t.count) for name, t in stats.tensors.items()}
    if not counts:
        return None
    ordered = sorted(counts.values())
    median = ordered[len(ordered) // 2]
    for name in ranked:
        if counts.get(name, 0) >= max(median, 1):
            return name
    return max(counts, key=lambda n: counts[n])
