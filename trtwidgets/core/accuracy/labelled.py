"""A classifier's quantized outputs scored three ways: against labels, against float, and in dB.

Teaching notebooks show every quantization choice by its effect on the task (top-1
accuracy on labelled data), on agreement with the float model (top-1 agreement), and on
the output's signal-to-noise ratio; one frozen value carries the three, so the
prose and the printed numbers come from the same object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..common.errors import UserError
from .metrics import snr_db
from ..calibration.ranges import evaluate_amax
from ..calibration.stats import ActivationStats


@dataclass(frozen=True)
class LabelledScore:
    """One classifier run scored against labels and against the float run.

    Attributes
    ----------
    accuracy : float
        Top-1 accuracy against the labels.
    agreement : float
        Share of samples whose top-1 class is the float model's.
    snr_db : float
        Output SNR against the float output (``inf`` when identical).
    samples : int
    """

    accuracy: float
    agreement: float
    snr_db: float
    samples: int

    def line(self) -> str:
        """``accuracy 0.828 | agreement 0.961 | output SNR 16.9 dB`` (one line for tables)."""
        return f"accuracy {self.accuracy:.3f} | agreement {self.agreement:.3f} | output SNR {self.snr_db:5.1f} dB"


def score_classifier(reference, candidate, labels) -> LabelledScore:
    """Score class scores ``candidate`` (N, classes) against ``labels`` and the float ``reference``.

    Raises
    ------
    UserError
        When the shapes or the number of labels do not match.
    """
    ref, cand = np.asarray(reference), np.asarray(candidate)
    labels = np.asarray(labels).astype(np.int64).ravel()
    if ref.shape != cand.shape or ref.ndim != 2 or len(labels) != ref.shape[0]:
        raise UserError(f"Scores {ref.shape} / {cand.shape} and {len(labels)} labels do not match.",
                        "Both runs need one row of class scores per labelled sample.",
                        "Run both models on the same labelled samples, in the same order.")
    pred = cand.argmax(axis=1)
    return LabelledScore(accuracy=float(np.mean(pred == labels)),
                         agreement=float(np.mean(pred == ref.argmax(axis=1))),
                         snr_db=float(snr_db(ref, cand)), samples=int(len(labels)))


def mean_tensor_sqnr(stats: ActivationStats, amax: Mapping[str, float]) -> float:
    """Mean int8 SQNR (dB, on the histograms) of the tensors in ``amax`` at those amax.

    Tensors without statistics or with an infinite SQNR (all zeros) are left out.
    """
    values = [evaluate_amax(stats.tensors[name], float(a)).sqnr_db for name, a in amax.items()
              if name in stats.tensors]
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")
