"""Error as a noise-to-signal power ratio in dB, the unit of every per-layer error.

``NSR = sum((x - ref)^2) / sum(ref^2)``, shown in dB (``-SNR``), floored at
:data:`NSR_FLOOR_DB` so that bit-exact tensors stay finite. Shared by the
per-layer comparison (``layer_errors``), the one-node re-runs (``local_errors``)
and the JSON of every result that carries dB values (``sweep``).
"""

from __future__ import annotations

import math

from .metrics import OutputMetrics

__all__ = ["NSR_FLOOR_DB", "nsr_db"]

#: Error floor in dB: float32 rounding of an exact computation sits near -140 dB.
NSR_FLOOR_DB = -160.0


def nsr_db(m: OutputMetrics) -> float:
    """Noise-to-signal ratio of a comparison in dB (floored); ``inf`` for a NaN/inf mismatch."""
    if not m.ok:
        return math.inf
    if m.snr_db == math.inf:
        return NSR_FLOOR_DB
    return max(NSR_FLOOR_DB, -m.snr_db)
