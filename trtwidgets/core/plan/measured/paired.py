"""Two engines compared round by round: the exact sign test on interleaved rounds.

The engines of a measurement are timed interleaved, A B C A B C ... (:mod:`trtwidgets.trt.measure`), and a
round counts only when every engine ran in it, so round i of one engine and round i of another form a pair.
A clock that drifts moves both sides of a pair alike; a steady difference shows as one engine winning most
pairs. :func:`paired_rounds` counts the pairs each side won (ties and incomplete pairs dropped) and gives the
one-sided exact binomial p of the first engine winning that many by chance; the first is faster when
p < :data:`PAIRED_ALPHA`. With every pair won, p is ``0.5 ** n``, so :data:`PAIRED_MIN_ROUNDS` is the fewest
rounds that can decide. Why not the round spread: docs/evidence.md, "paired".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from ...common.serial import fields_json, from_json
from .measurement import Measurement

__all__ = ["PAIRED_ALPHA", "PAIRED_MIN_ROUNDS", "PairedRounds", "paired_rounds"]

#: The one-sided level of the sign test.
PAIRED_ALPHA = 0.05
#: The fewest paired rounds in which an engine can be shown faster at :data:`PAIRED_ALPHA` (all won: 0.5**5 = 0.031).
PAIRED_MIN_ROUNDS = next(n for n in range(1, 64) if 0.5 ** n < PAIRED_ALPHA)


def _sign_test_p(won: int, n: int) -> float:
    """P(X >= won) for X ~ Binomial(n, 1/2): exact, one-sided (1.0 without a pair)."""
    if n <= 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(won, n + 1)) / 2.0 ** n


@dataclass(frozen=True)
class PairedRounds:
    """One engine against another, round by round.

    Attributes
    ----------
    won, lost : int
        Pairs of rounds where the first engine's median was below / above the other's (ties and pairs
        without both times are left out).
    p : float
        The one-sided exact sign test's p of winning ``won`` of ``won + lost`` pairs by chance.
    """

    won: int
    lost: int
    p: float

    @property
    def pairs(self) -> int:
        """The pairs counted (ties left out)."""
        return self.won + self.lost

    @property
    def faster(self) -> bool:
        """The first engine wins the pairs by the sign test (p < :data:`PAIRED_ALPHA`)."""
        return self.p < PAIRED_ALPHA

    def text(self) -> str:
        """``faster in 13 of 15 paired rounds (one-sided sign test p = 0.0037)``, and why a few rounds cannot decide."""
        out = f"faster in {self.won} of {self.pairs} paired rounds (one-sided sign test p = {self.p:.2g})"
        if not self.faster and self.pairs < PAIRED_MIN_ROUNDS:
            out += f"; {self.pairs} cannot reach p < {PAIRED_ALPHA:g}, {PAIRED_MIN_ROUNDS} can"
        return out

    def to_dict(self) -> dict:
        """For plan.json."""
        return dict(fields_json(self), alpha=PAIRED_ALPHA)

    @classmethod
    def from_dict(cls, d: Mapping) -> "PairedRounds":
        """Inverse of :meth:`to_dict`."""
        return from_json(cls, d)


def paired_rounds(first: Measurement, other: Measurement) -> PairedRounds:
    """``first`` against ``other``, pair by pair of interleaved rounds (see the module docstring).

    Parameters
    ----------
    first, other : Measurement
        Two engines of one measurement (their ``round_ms`` in round order).

    Returns
    -------
    PairedRounds
    """
    won = lost = 0
    for a, b in zip(first.round_ms, other.round_ms):
        if math.isfinite(a) and math.isfinite(b) and a != b:
            won += a < b
            lost += a > b
    return PairedRounds(won, lost, _sign_test_p(won, won + lost))
