"""Samples into model runs along each input's own batch axis (:class:`~.sample_axes.SampleAxes`).

A file of one sample is fed as it is; a file of several is cut along each input's batch
axis, and samples are joined along it to the batch size asked for. An input without a batch
axis (a scalar sample rate) is passed whole: samples are joined only where those inputs are
equal, otherwise the batch so far is fed as it is. Cuts are views, and a run's arrays are
copied only when it is fed, so a large file costs one run's memory at a time.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .sample_axes import SampleAxes

__all__ = ["SampleBatcher", "batch_label", "first_samples"]

Feed = Dict[str, np.ndarray]


def _contiguous(a: np.ndarray) -> np.ndarray:
    # np.ascontiguousarray makes a 0-d array 1-d; a scalar input must stay a scalar.
    return np.ascontiguousarray(a) if a.ndim else a


def batch_label(labels: Sequence[str]) -> str:
    """The label of a run made of the samples of these files (or positions)."""
    if len(labels) == 1:
        return labels[0]
    return f"{labels[0]} .. {labels[-1]} ({len(labels)} samples)" if len(labels) > 2 else " and ".join(labels)


def first_samples(raw: Any, rows: Optional[int], axes: SampleAxes) -> Any:
    """``raw`` with at most ``rows`` samples, each input cut along its own batch axis (anything else as it is)."""
    if rows is None or not isinstance(raw, Mapping) or not all(isinstance(v, np.ndarray) for v in raw.values()):
        return raw
    return axes.take(raw, 0, rows)


class SampleBatcher:
    """Checked feeds in, runs of ``size`` samples out (``size`` None: each feed as it is).

    ``max_samples`` stops it: the feed that passes the limit is cut to it.
    """

    def __init__(self, axes: SampleAxes, size: Optional[int], max_samples: Optional[int]):
        self.axes, self.size, self.max = axes, size, max_samples
        self.seen = 0
        self.pending: List[Feed] = []
        self.labels: List[str] = []
        self.pending_n = 0

    def left(self) -> Optional[int]:
        """Samples still wanted (at least 1), or None for all."""
        return None if self.max is None else max(1, self.max - self.seen - self.pending_n)

    def done(self) -> bool:
        return self.max is not None and self.seen + self.pending_n >= self.max

    def add(self, label: str, feed: Feed) -> Iterator[Tuple[str, Feed]]:
        """The runs ``feed`` completes."""
        # Re-batching cuts and joins along the batch axes, so they must agree; a feed used as it is is only counted.
        n = self.axes.count(feed, label, strict=self.size is not None)
        if self.max is not None and self.seen + self.pending_n + n > self.max:
            n = self.max - self.seen - self.pending_n
            feed = self.axes.take(feed, 0, n)
        if n <= 0:
            return
        if self.size is None:
            self.seen += n
            yield label, {name: _contiguous(a) for name, a in feed.items()}
            return
        if self.pending and not self.axes.joinable(self.pending[0], feed):
            yield from self.flush()
        self.pending.append(feed)
        self.labels.append(label)
        self.pending_n += n
        while self.pending_n >= self.size:
            cat = self.axes.join(self.pending)
            out = {name: _contiguous(a) for name, a in self.axes.take(cat, 0, self.size).items()}
            rest = self.axes.take(cat, self.size, self.pending_n)
            self.pending_n -= self.size
            out_label = batch_label(self.labels)
            self.pending = [rest] if self.pending_n else []
            self.labels = self.labels[-1:] if self.pending_n else []
            self.seen += self.size
            yield out_label, out

    def flush(self) -> Iterator[Tuple[str, Feed]]:
        """The last, incomplete run: still fed, since dropping samples silently would change the ranges."""
        if not self.pending_n:
            return
        cat = self.axes.join(self.pending)
        label = batch_label(self.labels)
        self.seen += self.pending_n
        self.pending, self.labels, self.pending_n = [], [], 0
        yield label, {name: _contiguous(a) for name, a in cat.items()}
