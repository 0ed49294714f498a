"""Which axis of each input holds the samples of calibration data: found as the planner finds it.

A model promises nothing about axis 0: an LSTM's state is ``[layers, N, hidden]`` (batch on
axis 1), a sample rate is a scalar with no batch axis, a frames x features input ``[T, 576]``
is one sample. :class:`SampleAxes` gives each input's batch axis with the planner's machinery
(:func:`~..model.batch_axis.find_batch_axes`): the user's ``--batch-axis``, a dim named like a
batch, a dynamic dim, a static leading 1. Given the model, the axes found are checked once with
ONNX Runtime on the first file that holds several samples (or whose samples are batched with
others): a batch-2 run against two batch-1 runs, and, as in the planner, an input axis that no
output splits along is no batch (the frames are one sample).

The feed loop (:mod:`.data`) then reads a file of one sample as it is, cuts a file of several
along each input's own batch axis, joins samples along it, and passes inputs without one (a
scalar sample rate) whole. An input with a static leading 1 next to batched ones (a ``[1, C]``
parameter broadcast over the batch) is passed whole too.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Set, Union

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..common.errors import CalibrationDataError
from ..model.batch_axis import find_batch_axes, settle_input_axes, user_batch_axes

__all__ = ["PROBE_SAMPLES", "SampleAxes"]

Feed = Dict[str, np.ndarray]
#: At most this many samples of a file make the ONNX Runtime check of its batch axes.
PROBE_SAMPLES = 8


def _stand_in(summary) -> onnx.ModelProto:
    """A graph of the summary's inputs alone, with their declared dims: what find_batch_axes reads without a run."""
    inputs = []
    for info in summary.inputs:
        shape = getattr(info, "shape", None)
        has = getattr(info, "has_shape", True) and shape is not None
        inputs.append(helper.make_tensor_value_info(info.name, TensorProto.FLOAT, list(shape) if has else None))
    return helper.make_model(helper.make_graph([], "inputs", inputs, []))


class SampleAxes:
    """The batch axis of each input, and how a feed is counted, cut and joined along them.

    Parameters
    ----------
    summary : ModelSummary
        The model's inputs (their declared dims give the axes without running anything).
    model : LoadedModel or onnx.ModelProto, optional
        With it, the axes are checked with ONNX Runtime (:meth:`settle`) on the first file that
        needs them; without it, the declared dims decide.
    batch_axis : str, int or mapping, optional
        The user's axes (:func:`~..model.batch_axis.user_batch_axes`): they win and are never changed by the check.

    Attributes
    ----------
    inputs : dict
        Input name -> batch axis, or None (the input is part of every sample, whole).
    fixed : set
        Inputs whose batch axis is a static leading 1.
    settled : bool
        True once the axes are final (checked, or nothing to check them with).
    """

    def __init__(self, summary, model=None, batch_axis: Union[None, str, int, Mapping] = None):
        self.user = user_batch_axes(batch_axis)
        found = find_batch_axes(_stand_in(summary), self.user, run=False)
        self.inputs: Dict[str, Optional[int]] = dict(found.inputs)
        self.fixed: Set[str] = set(found.fixed_batch)
        self.model = model
        self.settled = model is None or not any(a is not None for a in self.inputs.values())

    def needs_check(self, feed: Mapping[str, np.ndarray], batching: bool) -> bool:
        """True when ``feed`` is the first whose axes matter (several samples, or joined with others) and a
        check is still to come."""
        if self.settled:
            return False
        counts = self._counts(feed)
        return bool(counts) and (batching or any(n != 1 for n in counts.values()))

    def settle(self, feed: Mapping[str, np.ndarray]) -> bool:
        """Check the axes with ONNX Runtime on ``feed``'s first samples, once; True when an input lost its axis."""
        if self.settled:
            return False
        self.settled = True
        probe = self.take(feed, 0, PROBE_SAMPLES)
        found = find_batch_axes(getattr(self.model, "proto", self.model), self.user, sample=probe)
        checked = dict(settle_input_axes(found, self.user).inputs)
        lost = any(self.inputs.get(k) is not None and a is None for k, a in checked.items())
        self.inputs = checked
        self.fixed = {k for k in found.fixed_batch if checked.get(k) is not None}
        return lost

    def rows(self, rows: Optional[int]) -> Optional[Dict[str, int]]:
        """How many rows (along axis 0) of each input a bounded read may stop at: the inputs batched on axis 0.

        Before :meth:`settle`, an axis may still be found to be no batch: the caller reads that file again whole.
        """
        if rows is None:
            return None
        return {k: rows for k, a in self.inputs.items() if a == 0 and k not in self.fixed}

    # ----------------------------------------------------------------- one feed

    def _counts(self, feed: Mapping[str, np.ndarray]) -> Dict[str, int]:
        """Input name -> its size along its batch axis, for the inputs that split this feed into samples."""
        batched = {k: a for k, a in self.inputs.items() if a is not None and k in feed and np.ndim(feed[k]) > a}
        counts = {k: int(np.shape(feed[k])[a]) for k, a in batched.items()}
        free = {k: n for k, n in counts.items() if k not in self.fixed}
        return free or counts

    def split_axes(self, feed: Mapping[str, np.ndarray]) -> Dict[str, int]:
        """Input name -> axis, for the inputs cut and joined along their batch axis in ``feed`` (the others pass whole)."""
        return {k: self.inputs[k] for k in self._counts(feed)}

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

    def split(self, feed: Mapping[str, np.ndarray]) -> List[Feed]:
        """One feed per sample, each input keeping its batch axis (of size 1)."""
        return [self.take(feed, i, i + 1) for i in range(self.count(feed, strict=False))]

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

    def opt_batch(self, opt_shapes: Mapping[str, Sequence[int]], names: Sequence[str]) -> Optional[int]:
        """The calibration profile's batch: the opt shape's dim at the first batched input's axis."""
        ordered = [n for n in names if n not in self.fixed] + [n for n in names if n in self.fixed]
        for name in ordered:
            axis = self.inputs.get(name)
            if name in opt_shapes and axis is not None and axis < len(opt_shapes[name]):
                return int(opt_shapes[name][axis])
        return None
