"""Held-back data you can trust: which samples measure accuracy, named, and never the calibration's own.

A plan's accuracy is measured on samples its ranges were not fitted to. Either the
user gives them (``--held-back DIR``), or the data is split at random with a seed
(not "the last 25% in file order", which puts one kind of file, e.g. the last
camera's, in the held-back part) and the split's file names are returned, so that
plan.json can record exactly which files were held back.

Each sample has a **fingerprint** (:func:`sample_fingerprint`: a hash of its inputs'
bytes, dtype and shape, without the batch axis), and statistics collected by
:func:`~trtwidgets.core.calibration.collect.collect_stats` carry the fingerprints of the
samples they saw (``ActivationStats.sample_hashes``). :func:`stats_overlap_note` says
so when statistics were collected on the held-back samples: accuracy measured there
flatters the plan.

For the planner::

    labelled = list(iter_labelled_feeds(data, summary, batch_size=1))
    calib, held, split = split_labelled(labelled, fraction=0.25, seed=0)   # or held_back_split(...)
    plan_json["held_back"] = split.to_dict()
    prints = [p for feed in held for p in feed_fingerprints(feed)]
    note = stats_overlap_note(stats, prints)                              # None, or a warning to show
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.errors import UserError

__all__ = ["HeldBackSplit", "feed_fingerprints", "sample_fingerprint", "split_labelled",
           "split_names", "stats_overlap_note"]

#: The default share of the data held back, and the default seed of the split.
HOLDOUT = 0.25
SEED = 0


@dataclass(frozen=True)
class HeldBackSplit:
    """Which samples calibrate and which measure accuracy.

    Attributes
    ----------
    calibration, held_back : tuple of str
        Sample labels (file paths for a folder), in data order.
    source : str
        ``"random split"`` or ``"held-back data"`` (given by the user).
    seed : int or None
        The split's seed (None for given data).
    fraction : float or None
        The share held back (None for given data).
    """

    calibration: Tuple[str, ...]
    held_back: Tuple[str, ...]
    source: str = "random split"
    seed: Optional[int] = SEED
    fraction: Optional[float] = HOLDOUT

    def to_dict(self) -> dict:
        """The record for plan.json."""
        return {"source": self.source, "seed": self.seed, "fraction": self.fraction,
                "calibration": list(self.calibration), "held_back": list(self.held_back)}


def _check_fraction(fraction: float) -> float:
    f = float(fraction)
    if not 0.0 < f < 1.0:
        raise UserError(f"A held-back fraction of {fraction!r} leaves nothing to calibrate or to measure.",
                        "Some samples calibrate and the rest measure accuracy.",
                        "Use a fraction between 0 and 1 (0.25 is the default), or give --held-back DIR.")
    return f


def split_names(names: Sequence[str], fraction: float = HOLDOUT, seed: int = SEED) -> HeldBackSplit:
    """A seeded random split of sample names: ``round(len * fraction)`` held back, at least one on each side.

    The same names, fraction and seed always give the same split (NumPy's PCG64);
    each part keeps the names' order.

    Raises
    ------
    UserError
        Fewer than 2 distinct names, repeated names, or a fraction outside (0, 1).
    """
    fraction = _check_fraction(fraction)
    names = list(names)
    if len(set(names)) != len(names):
        raise UserError("Sample names repeat, so a split by name is ambiguous.", None,
                        "Give each sample its own name (file name).")
    if len(names) < 2:
        raise UserError(f"The planner needs at least 2 samples; the data has {len(names)}.",
                        "Some samples calibrate, the rest (held back) measure accuracy.",
                        "Give more samples (32 or more is better), or --held-back DIR with separate data.")
    n_held = min(len(names) - 1, max(1, int(round(len(names) * fraction))))
    order = np.random.default_rng(seed).permutation(len(names))
    held = set(order[:n_held].tolist())
    return HeldBackSplit(tuple(n for i, n in enumerate(names) if i not in held),
                         tuple(n for i, n in enumerate(names) if i in held), "random split", int(seed), fraction)


def split_labelled(labelled: Sequence[Tuple[str, Mapping[str, np.ndarray]]], fraction: float = HOLDOUT,
                   seed: int = SEED, held_back: Optional[Sequence[Tuple[str, Mapping[str, np.ndarray]]]] = None):
    """``(calibration feeds, held-back feeds, HeldBackSplit)`` from ``(label, feed)`` pairs.

    Parameters
    ----------
    labelled : sequence of (str, mapping)
        From :func:`~trtwidgets.core.calibration.data.iter_labelled_feeds`. Feeds that share
        a label (several samples of one file) stay together on one side.
    fraction, seed
        For :func:`split_names`.
    held_back : sequence of (str, mapping), optional
        The user's held-back data: then every ``labelled`` feed calibrates.
    """
    labelled = list(labelled)
    if held_back is not None:
        held_back = list(held_back)
        if not held_back:
            raise UserError("The held-back data is empty.", "Accuracy is measured on samples not used to calibrate.",
                            "Give --held-back a folder with at least one sample.")
        split = HeldBackSplit(tuple(dict.fromkeys(lb for lb, _ in labelled)),
                              tuple(dict.fromkeys(lb for lb, _ in held_back)), "held-back data", None, None)
        return [f for _, f in labelled], [f for _, f in held_back], split
    split = split_names(list(dict.fromkeys(lb for lb, _ in labelled)), fraction, seed)
    held = set(split.held_back)
    return ([f for lb, f in labelled if lb not in held], [f for lb, f in labelled if lb in held], split)


def sample_fingerprint(arrays: Mapping[str, np.ndarray]) -> str:
    """A hex SHA-256 (16 characters) of one sample: each input's name, dtype, shape and bytes, by name."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode("utf-8") + b"\0" + a.dtype.str.encode() + b"\0" + repr(a.shape).encode() + b"\0")
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def feed_fingerprints(feed: Mapping[str, np.ndarray], batch_axis: Union[int, Mapping[str, Optional[int]]] = 0
                      ) -> List[str]:
    """The fingerprint of each sample of one feed (its items along the batch axis, the axis removed).

    A sample gets the same fingerprint in a feed of 1 and in a feed of 32.

    Parameters
    ----------
    feed : mapping
        Input name -> array.
    batch_axis : int or mapping
        One axis for every input, or input name -> axis (None: the input has no batch axis,
        e.g. a scalar sample rate, and is part of every sample; all None: the feed is one sample),
        as :func:`trtwidgets.core.model.batch_axis.find_batch_axes` gives them.
    """
    if not feed:
        return []
    arrays = {k: np.asarray(v) for k, v in feed.items()}
    axes = {k: (batch_axis.get(k, 0) if isinstance(batch_axis, Mapping) else batch_axis) for k in arrays}
    axes = {k: (a if a is not None and arrays[k].ndim > a else None) for k, a in axes.items()}
    batched = [k for k, a in axes.items() if a is not None]
    if not batched:
        return [sample_fingerprint(arrays)]
    first = axes[batched[0]]
    assert first is not None
    n = arrays[batched[0]].shape[first]
    return [sample_fingerprint({k: (v if axes[k] is None else np.take(v, i, axis=axes[k])) for k, v in arrays.items()})
            for i in range(n)]


def stats_overlap_note(stats, held_fingerprints: Sequence[str]) -> Optional[str]:
    """A warning when ``stats`` were collected on held-back samples, else None.

    Parameters
    ----------
    stats : ActivationStats
        Its ``sample_hashes`` (empty for statistics saved before they were recorded; a Calibration's are
        ``cal.stats``).
    held_fingerprints : sequence of str
        :func:`feed_fingerprints` of every held-back feed, in order.
    """
    seen = set(stats.sample_hashes)
    held = list(held_fingerprints)
    if not held:
        return None
    if not seen:
        return ("The statistics do not record which samples they saw (collected before fingerprints were kept), "
                "so nothing checks that they were not collected on the held-back samples.")
    both = [h for h in held if h in seen]
    if not both:
        return None
    return (f"{len(both)} of the {len(held)} held-back samples were also used to collect the statistics: "
            "accuracy measured on them flatters the plan. Give held-back data the statistics never saw "
            "(--held-back DIR), or collect the statistics on the calibration part of the split only.")

