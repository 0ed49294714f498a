"""Reference (loop) implementations of published range algorithms, for checking the vectorised ones.

``entropy_bin_reference`` follows NVIDIA pytorch-quantization's ``_compute_amax_entropy``
line by line (with scipy's KL divergence replaced by its formula, to avoid the dependency).
"""

from __future__ import annotations

from collections import Counter

import numpy as np


def _kl(p, q):
    p = np.asarray(p, dtype=np.float64) / np.sum(p)
    q = np.asarray(q, dtype=np.float64) / np.sum(q)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p / q), 0.0)
    return float(np.sum(terms))


def entropy_bin_reference(calib_hist, num_quantized_bins=128, start_bin=128):
    bins = np.array(calib_hist, dtype=np.float64)
    bins[0] = bins[1]
    divergences = []
    stop = len(bins)
    new_density_counts = np.zeros(num_quantized_bins, dtype=np.float64)
    for i in range(start_bin, stop + 1):
        new_density_counts.fill(0)
        space = np.linspace(0, i, num=num_quantized_bins + 1)
        digitized_space = np.digitize(range(i), space) - 1
        digitized_space[bins[:i] == 0] = -1
        for idx, digitized in enumerate(digitized_space):
            if digitized != -1:
                new_density_counts[digitized] += bins[idx]
        counter = Counter(digitized_space)
        for key, val in counter.items():
            if key != -1:
                new_density_counts[key] = new_density_counts[key] / val
        new_density = np.zeros(i, dtype=np.float64)
        for idx, digitized in enumerate(digitized_space):
            if digitized != -1:
                new_density[idx] = new_density_counts[digitized]
        reference_density = np.array(bins[:len(digitized_space)])
        reference_density[-1] += np.sum(bins[i:])
        divergences.append(_kl(reference_density, new_density))
    divergences = np.array(divergences)
    last_argmin = len(divergences) - 1 - np.argmin(divergences[::-1])
    return int(last_argmin + start_bin)
