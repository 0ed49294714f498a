"""How sure a measured accuracy is: Wilson intervals for top-1, and paired flips between two models.

"0.961 against 0.953" on 128 samples is one sample; whether such a difference means
anything depends on how many samples there are and on which samples changed. Two
tools, for the notebooks' prose and for tests:

- :func:`top1` (and :func:`wilson_interval`): the top-1 accuracy with its Wilson score
  interval, which stays inside [0, 1] and is honest near 1.0, where a classifier's
  accuracy lives (the normal approximation is not).
- :func:`paired_flips`: on the same labelled samples, how many went from right to
  wrong and from wrong to right between two models (a reference and a quantized
  candidate), with the exact two-sided McNemar p-value of that split. Two models with
  equal accuracy can still disagree on many samples; the flips say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Tuple

import numpy as np

from ..common.errors import UserError


def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> Tuple[float, float]:
    """The Wilson score interval of a proportion ``correct / n``.

    Parameters
    ----------
    correct, n : int
        Successes and trials (``0 <= correct <= n``, ``n >= 1``).
    confidence : float
        Two-sided confidence level, in (0, 1).

    Returns
    -------
    (float, float)
        Lower and upper bound, within [0, 1].
    """
    if not (isinstance(n, (int, np.integer)) and n >= 1 and 0 <= correct <= n):
        raise UserError(f"{correct} correct of {n} is not a proportion.", "An interval needs 0 <= correct <= n and n >= 1.",
                        "Count the samples that were scored, and those right among them.")
    if not 0.0 < confidence < 1.0:
        raise UserError(f"confidence {confidence} is not a level.", "A confidence level lies strictly between 0 and 1.",
                        "Use e.g. 0.95.")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At p = 0 or 1 the bound equals p exactly; rounding must not push it past.
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


@dataclass(frozen=True)
class Top1:
    """A top-1 accuracy with its Wilson interval.

    Attributes
    ----------
    correct, n : int
    low, high : float
        The interval's bounds at ``confidence``.
    confidence : float
    """

    correct: int
    n: int
    low: float
    high: float
    confidence: float = 0.95

    @property
    def accuracy(self) -> float:
        return self.correct / self.n

    def __str__(self) -> str:
        return (f"{self.accuracy:.3f} ({self.correct:,} of {self.n:,}; {self.confidence:.0%} interval "
                f"{self.low:.3f}-{self.high:.3f})")


def predictions(scores) -> np.ndarray:
    """The predicted class of each row of class scores ``(n, classes)`` (or the labels themselves, 1-D ints)."""
    s = np.asarray(scores)
    if s.ndim == 1 and np.issubdtype(s.dtype, np.integer):
        return s.astype(np.int64)
    if s.ndim != 2:
        raise UserError(f"Scores of shape {s.shape} are not one row of class scores per sample.",
                        "Top-1 reads the largest score of each row.", "Pass the classifier's (n, classes) output.")
    return s.argmax(axis=1)


def _labels(labels, n: int) -> np.ndarray:
    lab = np.asarray(labels).astype(np.int64).ravel()
    if len(lab) != n or n == 0:
        raise UserError(f"{len(lab)} labels for {n} scored samples.", "Every scored sample needs its label.",
                        "Run the model on the labelled samples, in order.")
    return lab


def top1(scores, labels, confidence: float = 0.95) -> Top1:
    """Top-1 accuracy of ``scores`` (``(n, classes)``, or predicted labels) against ``labels``, with its interval."""
    pred = predictions(scores)
    lab = _labels(labels, len(pred))
    correct = int(np.sum(pred == lab))
    low, high = wilson_interval(correct, len(lab), confidence)
    return Top1(correct, len(lab), low, high, confidence)


@dataclass(frozen=True)
class Flips:
    """How two models' top-1 answers differ on the same labelled samples.

    Attributes
    ----------
    right_to_wrong : int
        Samples the first model (the reference) gets right and the second gets wrong.
    wrong_to_right : int
        Samples the first gets wrong and the second right.
    both_right, both_wrong : int
    """

    right_to_wrong: int
    wrong_to_right: int
    both_right: int
    both_wrong: int

    @property
    def n(self) -> int:
        return self.right_to_wrong + self.wrong_to_right + self.both_right + self.both_wrong

    @property
    def net(self) -> int:
        """Correct answers the second model gains (negative: loses)."""
        return self.wrong_to_right - self.right_to_wrong

    @property
    def p_value(self) -> float:
        """Exact two-sided McNemar p-value: how likely a split at least this uneven is if neither model is better."""
        k, m = min(self.right_to_wrong, self.wrong_to_right), self.right_to_wrong + self.wrong_to_right
        if m == 0:
            return 1.0
        tail = sum(math.comb(m, i) for i in range(k + 1)) / 2.0 ** m
        return min(1.0, 2 * tail)

    def __str__(self) -> str:
        return (f"{self.right_to_wrong} right->wrong, {self.wrong_to_right} wrong->right of {self.n:,} "
                f"(net {self.net:+d}, McNemar p={self.p_value:.2g})")


def paired_flips(labels, reference, candidate) -> Flips:
    """Count the samples whose top-1 answer changed between ``reference`` and ``candidate``.

    Parameters
    ----------
    labels : array-like of int
    reference, candidate : array-like
        Class scores ``(n, classes)`` or predicted labels ``(n,)`` of the two models, on the
        same samples in the same order.
    """
    a, b = predictions(reference), predictions(candidate)
    if a.shape != b.shape:
        raise UserError(f"The two models scored {len(a)} and {len(b)} samples.", "Flips pair the same samples.",
                        "Run both models on the same labelled samples, in the same order.")
    lab = _labels(labels, len(a))
    ra, rb = a == lab, b == lab
    return Flips(right_to_wrong=int(np.sum(ra & ~rb)), wrong_to_right=int(np.sum(~ra & rb)),
                 both_right=int(np.sum(ra & rb)), both_wrong=int(np.sum(~ra & ~rb)))
