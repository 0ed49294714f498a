"""The planner's data: one feed per sample, each tensor's batch axis found, and a named held-back split.

A model promises nothing about axis 0. The planner therefore reads every file as it is
(never re-batched along axis 0), finds the batch axis of each input and output
(:func:`~..model.batch_axis.find_batch_axes`: the user's ``--batch-axis``, a dim named
like a batch, a dynamic dim, a batch-2 run checked against two batch-1 runs), cuts each
file into samples along its inputs' batch axes (a model without one: each file is one
sample) and runs them through ONNX Runtime, both with the one sample batcher
(:mod:`..model.sample_batches`), so that every output reaches the accuracy
check and the task metrics **batch first**, whatever the model's layout (a time-major
``[T, N, C]`` output arrives as ``[N, T, C]``).

Accuracy is measured on samples the ranges were not fitted to: the user's held-back
data, or a seeded random split of the data (:mod:`..calibration.held_back`) whose
sample names go into plan.json. Statistics given to the planner that saw held-back
samples are caught by the samples' fingerprints: those samples leave the held-back
part when others remain, and the plan says so either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.errors import UserError
from ..model.batch_axis import BatchAxes, find_batch_axes, settle_input_axes, user_batch_axes
from ..accuracy.reference import run_samples
from ..model.sample_batches import SampleCutter

__all__ = ["PlanData", "read_plan_data", "run_samples", "labels_for_held", "RUN_BATCH"]

Feed = Dict[str, np.ndarray]
#: Samples per ONNX Runtime run where the model takes a batch (fewer runs; the same numbers as one by one).
RUN_BATCH = 8


@dataclass(frozen=True)
class PlanData:
    """The samples a plan calibrates and measures on.

    Attributes
    ----------
    calib, held : list of dict
        One feed per sample (each input with its batch axis of 1 where it has one).
    axes : BatchAxes
        The batch axis of every input and output.
    split : HeldBackSplit
        Which sample names calibrate and which are held back (for plan.json).
    held_index : tuple of int
        Position of each held-back sample among the data's samples (None: from held-back data).
    notes : tuple of str
    """

    calib: List[Feed]
    held: List[Feed]
    axes: BatchAxes
    split: object
    held_index: Optional[Tuple[int, ...]] = None
    notes: Tuple[str, ...] = field(default=())

    def run_batch(self) -> int:
        """Samples per run: :data:`RUN_BATCH` where every tensor has a batch axis, else 1."""
        return RUN_BATCH if self.axes.batched and all(a is not None for a in self.axes.outputs.values()) else 1


def _read_files(data, summary, limit: Optional[int] = None) -> List[Tuple[str, Feed]]:
    """``(label, feed)`` per file (or item of an iterable), as read: never cut along axis 0.

    ``limit``: at most this many files (each holds at least one sample).
    """
    import itertools

    from ..calibration.data import iter_labelled_feeds

    feeds = iter_labelled_feeds(data, summary, as_read=True)
    return [(label, dict(feed)) for label, feed in itertools.islice(feeds, limit)]


def _samples(files: Sequence[Tuple[str, Feed]], axes: BatchAxes, max_samples: Optional[int]) -> List[Tuple[str, Feed]]:
    """``(name, feed)`` per sample: a file's name, ``name #i`` where a file holds several samples.

    Each file is cut along its inputs' batch axes (each sample keeps its axis, of size 1); inputs
    without one (a scalar sample rate, a frames x features array) are part of every sample.

    Raises
    ------
    UserError
        The inputs of a file hold different numbers of samples along their batch axes.
    """
    cutter = SampleCutter(axes.inputs, axes.fixed_batch)
    out: List[Tuple[str, Feed]] = []
    for label, feed in files:
        parts = cutter.split({k: np.asarray(v) for k, v in feed.items()}, strict=True)
        out.extend((label if len(parts) == 1 else f"{label} #{i}", p) for i, p in enumerate(parts))
        if max_samples is not None and len(out) >= max_samples:
            return out[:max_samples]
    return out


def read_plan_data(loaded, data, held_back=None, holdout: float = 0.25, seed: int = 0,
                   max_samples: Optional[int] = None, batch_axis: Union[None, str, int, Mapping] = None,
                   stats=None) -> PlanData:
    """The samples of ``data`` (and ``held_back``), split and checked (module docstring).

    Parameters
    ----------
    loaded : LoadedModel
    data, held_back : anything :func:`~..calibration.data.iter_labelled_feeds` takes
    holdout, seed : float, int
        The random split's share and seed (when ``held_back`` is None).
    max_samples : int, optional
        Read at most this many samples of ``data``.
    batch_axis : str, int or mapping, optional
        The user's batch axes (:func:`~..model.batch_axis.parse_batch_axis`); found otherwise.
    stats : ActivationStats, optional
        Statistics given to the planner: their sample fingerprints are checked against the held-back samples.

    Raises
    ------
    UserError
        Too few samples, empty held-back data, a bad fraction or batch axis.
    """
    from ..calibration.held_back import split_labelled

    user = user_batch_axes(batch_axis)
    files = _read_files(data, loaded.summary, max_samples)
    held_files = _read_files(held_back, loaded.summary) if held_back is not None else None
    # A real file checks the batch axes (a batch-2 run of it against two runs), before any file is cut.
    axes = settle_input_axes(find_batch_axes(loaded.proto, user, sample=(held_files or files)[0][1]), user)
    labelled = _samples(files, axes, max_samples)
    held_labelled = _samples(held_files, axes, None) if held_files is not None else None
    calib, held, split = split_labelled(labelled, holdout, seed, held_labelled)
    held_index = None
    if held_labelled is None:
        wanted = set(split.held_back)
        held_index = tuple(i for i, (lb, _) in enumerate(labelled) if lb in wanted)
    notes: List[str] = []
    if stats is not None:
        held, held_index, split = _without_seen(stats, held, held_index, split, notes, axes.inputs)
    notes.extend(axes.notes())
    return PlanData(calib, held, axes, split, held_index, tuple(notes))


def _without_seen(stats, held: List[Feed], held_index, split, notes: List[str],
                  input_axes: Optional[Mapping[str, Optional[int]]] = None):
    """The held-back samples the statistics never saw, when there are any; a note either way."""
    import dataclasses

    from ..calibration.held_back import feed_fingerprints, stats_overlap_note

    # Along each input's own batch axis, as collect_stats fingerprints the samples it reads.
    prints = [feed_fingerprints(f, {k: (input_axes or {}).get(k, 0) for k in f}) for f in held]
    warning = stats_overlap_note(stats, [p for ps in prints for p in ps])
    if warning is None:
        return held, held_index, split
    seen = set(stats.sample_hashes)
    unseen = [i for i, ps in enumerate(prints) if not any(p in seen for p in ps)]
    if not seen or not unseen or len(unseen) == len(held):
        notes.append(warning)
        return held, held_index, split
    dropped = len(held) - len(unseen)
    notes.append(f"{dropped} of the {len(held)} held-back samples were also used to collect the given statistics: "
                 f"accuracy is measured on the other {len(unseen)} only")
    names = [split.held_back[i] for i in unseen] if len(split.held_back) == len(held) else list(split.held_back)
    split = dataclasses.replace(split, held_back=tuple(names))
    index = tuple(held_index[i] for i in unseen) if held_index is not None else None
    return [held[i] for i in unseen], index, split


def labels_for_held(labels, data: PlanData) -> Optional[np.ndarray]:
    """The labels of the held-back samples: given for them, or for every sample of the data (picked by the split).

    Raises
    ------
    UserError
        As many labels as neither.
    """
    if labels is None:
        return None
    labels = np.asarray(labels).ravel()
    n_held = len(data.held)
    if data.held_index is not None:
        total = len(data.calib) + n_held
        if len(labels) >= total:
            return labels[list(data.held_index)]
        if len(labels) == n_held:
            return labels
        raise UserError(f"{len(labels)} labels for {total} samples ({n_held} held back at random).",
                        "Labels are read in data order: one per sample of --data, or one per held-back sample.",
                        "Give one label per sample of --data (the split picks the held-back ones), "
                        "or --held-back DIR with its own labels.")
    return labels
