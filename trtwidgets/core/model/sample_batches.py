"""Samples cut into model runs along each input's own batch axis: the one sample batcher.

Calibration's feed loop (:mod:`..calibration.data`) re-batches files into runs of the batch
size asked for; the planner cuts its files into samples for the held-back split
(:mod:`..plan.plan_data`) and runs them through ONNX Runtime; the engine check runs the
held-back samples through an engine (``trtwidgets.trt.engine_outputs``). All of them count, cut
and join with :class:`SampleCutter` and group samples into runs with :class:`SampleBatcher`
(:func:`run_in_batches` for a list of samples).

A file of one sample is fed as it is; a file of several is cut along each input's batch axis
(found by :mod:`.batch_axis`), and samples are joined along it to the batch size asked for. An
input without a batch axis (a scalar sample rate) is passed whole: samples are joined only where
those inputs are equal, otherwise the batch so far is fed as it is. An input whose batch axis is
a static leading 1 beside batched ones (a ``[1, C]`` parameter broadcast over the batch) is
passed whole too. Cuts are views, and a run's arrays are copied only when it is fed, so a large
file costs one run's memory at a time. Outputs come back **batch first**
(:func:`gather_outputs`), the layout every task metric reads.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..common.errors import CalibrationDataError, UserError
from .batch_axis import BatchAxes

__all__ = ["SampleBatcher", "SampleCutter", "batch_label", "first_samples", "gather_outputs", "run_in_batches"]

Feed = Dict[str, np.ndarray]


class SampleCutter:
    """How a feed is counted, cut and joined along each input's batch axis.

    Parameters
    ----------
    inputs : mapping
        Input name -> batch axis, or None (the input is part of every sample, whole).
    fixed : iterable of str
        Inputs whose batch axis is a static leading 1: passed whole beside inputs that are batched.
    """

    def __init__(self, inputs: Mapping[str, Optional[int]], fixed: Iterable[str] = ()) -> None:
        self.inputs: Dict[str, Optional[int]] = dict(inputs)
        self.fixed = set(fixed)

    def _counts(self, feed: Mapping[str, np.ndarray]) -> Dict[str, int]:
        """Input name -> its size along its batch axis, for the inputs that split this feed into samples."""
        batched = {k: a for k, a in self.inputs.items() if a is not None and k in feed and np.ndim(feed[k]) > a}
        counts = {k: int(np.shape(feed[k])[a]) for k, a in batched.items()}
        free = {k: n for k, n in counts.items() if k not in self.fixed}
        return free or counts

    def split_axes(self, feed: Mapping[str, np.ndarray]) -> Dict[str, int]:
        """Input name -> axis, for the inputs cut and joined along their batch axis in ``feed`` (the others pass whole)."""
        return {k: a for k in self._counts(feed) if (a := self.inputs[k]) is not None}

    def count(self, feed: Mapping[str, np.ndarray], where: str = "", strict: bool = True) -> int:
        """The samples ``feed`` holds (1 where no input has a batch axis).

        Raises
        ------
        CalibrationDataError
            (``strict``) The inputs hold different numbers of samples along their batch axes.
        """
        counts = self._counts(feed)
        if not counts:
            return 1
        if strict and len(set(counts.values())) > 1:
            at = f" ({where})" if where else ""
            raise CalibrationDataError(
                f"The inputs of one sample file{at} hold different numbers of samples along their batch axes.",
                ", ".join(f"{k}: {n} (axis {self.inputs[k]})" for k, n in counts.items()) + ".",
                "Give --batch-axis NAME:AXIS for the inputs whose batch axis is not the one found, "
                "or --batch-axis NAME:none for an input that is not batched.")
        return next(iter(counts.values()))

    def take(self, feed: Mapping[str, np.ndarray], start: int, stop: int) -> Feed:
        """Samples ``start`` to ``stop`` of ``feed`` (views), each input along its own axis; the others whole."""
        axes = self.split_axes(feed)
        return {k: (v[(slice(None),) * axes[k] + (slice(start, stop),)] if k in axes else v) for k, v in feed.items()}

    def split(self, feed: Mapping[str, np.ndarray], where: str = "", strict: bool = False) -> List[Feed]:
        """One feed per sample (views), each input keeping its batch axis (of size 1)."""
        return [self.take(feed, i, i + 1) for i in range(self.count(feed, where, strict=strict))]

    def join(self, feeds: Sequence[Mapping[str, np.ndarray]]) -> Feed:
        """Feeds put together along each input's batch axis; inputs without one are the first feed's."""
        if len(feeds) == 1:
            return dict(feeds[0])
        axes = self.split_axes(feeds[0])
        return {k: (np.concatenate([f[k] for f in feeds], axis=axes[k]) if k in axes else v)
                for k, v in feeds[0].items()}

    def joinable(self, a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> bool:
        """True when ``a`` and ``b`` can go in one run: the same inputs batched, the others equal."""
        axes = self.split_axes(a)
        if not axes or axes != self.split_axes(b):
            return False  # without a batch axis each feed is one run
        for k, v in a.items():
            other = b.get(k)
            if k in axes:
                if other is None or np.shape(v)[:axes[k]] + np.shape(v)[axes[k] + 1:] != \
                        np.shape(other)[:axes[k]] + np.shape(other)[axes[k] + 1:]:
                    return False
            elif other is None or np.shape(v) != np.shape(other) or np.asarray(v).dtype != np.asarray(other).dtype \
                    or not np.array_equal(v, other):
                return False
        return True

    def with_batch_axes(self, sample: Mapping[str, np.ndarray], ranks: Optional[Mapping[str, int]] = None) -> Feed:
        """One sample's model inputs, each batched input with its batch axis (of 1).

        A sample may come with that axis or without it: ``ranks`` (input name -> the model's rank)
        tells them apart; without an input's rank its sample is taken to come without the axis.
        """
        ranks = dict(ranks or {})
        out = {}
        for name, axis in self.inputs.items():
            x = np.asarray(sample[name])
            has_axis = axis is not None and ranks.get(name) is not None and x.ndim == ranks[name] \
                and x.shape[axis] == 1
            out[name] = x if axis is None or has_axis else np.expand_dims(x, axis)
        return out


def _contiguous(a: np.ndarray) -> np.ndarray:
    # np.ascontiguousarray makes a 0-d array 1-d; a scalar input must stay a scalar.
    return np.ascontiguousarray(a) if a.ndim else a


def batch_label(labels: Sequence[str]) -> str:
    """The label of a run made of the samples of these files (or positions)."""
    if len(labels) == 1:
        return labels[0]
    return f"{labels[0]} .. {labels[-1]} ({len(labels)} samples)" if len(labels) > 2 else " and ".join(labels)


def first_samples(raw: Any, rows: Optional[int], cutter: SampleCutter) -> Any:
    """``raw`` with at most ``rows`` samples, each input cut along its own batch axis (anything else as it is)."""
    if rows is None or not isinstance(raw, Mapping) or not all(isinstance(v, np.ndarray) for v in raw.values()):
        return raw
    return cutter.take(raw, 0, rows)


class SampleBatcher:
    """Checked feeds in, runs of ``size`` samples out (``size`` None: each feed as it is).

    ``max_samples`` stops it: the feed that passes the limit is cut to it.
    """

    def __init__(self, axes: SampleCutter, size: Optional[int], max_samples: Optional[int]) -> None:
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


def gather_outputs(per_run: Sequence[Mapping[str, np.ndarray]], axes: BatchAxes) -> Dict[str, np.ndarray]:
    """Per-run outputs (of one sample or several) together, **batch first**.

    An output with batch axis k is concatenated along k and moved to axis 0; an output
    without one gets a new axis 0 (one entry per sample). Task metrics read this layout.
    """
    if not per_run:
        return {}
    out = {}
    for name in per_run[0]:
        parts = [np.asarray(p[name]) for p in per_run]
        axis = axes.outputs.get(name)
        if axis is None:
            out[name] = np.stack(parts, axis=0)
        else:
            out[name] = np.moveaxis(np.concatenate(parts, axis=axis), axis, 0)
    return out


def run_in_batches(run: Callable[[Dict[str, np.ndarray]], Mapping[str, np.ndarray]],
                   samples: Sequence[Mapping[str, np.ndarray]], axes: BatchAxes, batch_size: int = 1,
                   ranks: Optional[Mapping[str, int]] = None) -> Dict[str, np.ndarray]:
    """Every sample through ``run``, ``batch_size`` at a time where the model takes a batch, outputs batch first.

    Parameters
    ----------
    run : callable
        ``run(feed) -> {output name: array}`` (an ONNX Runtime session's run, an engine's infer).
    samples : sequence of mapping
        One sample per entry (each input with or without its batch axis of 1).
    axes : BatchAxes
    batch_size : int
        Samples per run; 1 (one at a time) for a model without a batch axis or a fixed batch.
    ranks : mapping, optional
        Input name -> the model's rank (see :meth:`SampleCutter.with_batch_axes`).

    Returns
    -------
    dict
        Output name -> all samples' outputs, batch axis first (:func:`gather_outputs`).
    """
    if batch_size < 1:
        raise UserError(f"A batch of {batch_size} runs nothing.", None, "Use a batch size of 1 or more.")
    cutter = SampleCutter(axes.inputs, axes.fixed_batch)
    batcher = SampleBatcher(cutter, batch_size if axes.batched else 1, None)
    parts = []
    for i, sample in enumerate(samples):
        for _label, feed in batcher.add(f"sample {i}", cutter.with_batch_axes(sample, ranks)):
            parts.append(dict(run(feed)))
    for _label, feed in batcher.flush():
        parts.append(dict(run(feed)))
    return gather_outputs(parts, axes)
