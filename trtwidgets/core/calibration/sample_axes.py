"""Which axis of each input holds the samples of calibration data: found as the planner finds it.

A model promises nothing about axis 0: an LSTM's state is ``[layers, N, hidden]`` (batch on
axis 1), a sample rate is a scalar with no batch axis, a frames x features input ``[T, 576]``
is one sample. :class:`SampleAxes` gives each input's batch axis with the planner's machinery
(:func:`~..model.batch_axis.find_batch_axes`): the user's ``--batch-axis``, a dim named like a
batch, a dynamic dim, a static leading 1. Given the model, the axes found are checked once with
ONNX Runtime on the first file that holds several samples (or whose samples are batched with
others): a batch-2 run against two batch-1 runs, and, as in the planner, an input axis that no
output splits along is no batch (the frames are one sample).

The feed loop (:mod:`.data`) then cuts and joins samples along these axes with the one sample
batcher (:mod:`..model.sample_batches`).
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence, Union

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..model.batch_axis import find_batch_axes, settle_input_axes, user_batch_axes
from ..model.load import as_model_proto
from ..model.sample_batches import SampleCutter

__all__ = ["PROBE_SAMPLES", "SampleAxes"]

#: At most this many samples of a file make the ONNX Runtime check of its batch axes.
PROBE_SAMPLES = 8


def _stand_in(summary) -> onnx.ModelProto:
    """A graph of the summary's inputs alone, with their declared dims: what find_batch_axes reads without a run."""
    inputs = []
    for info in summary.inputs:
        inputs.append(helper.make_tensor_value_info(info.name, TensorProto.FLOAT,
                                                    list(info.shape) if info.has_shape else None))
    return helper.make_model(helper.make_graph([], "inputs", inputs, []))


class SampleAxes(SampleCutter):
    """The batch axis of each input of calibration data, found and checked; feeds are counted, cut and joined
    along them as :class:`~..model.sample_batches.SampleCutter` does.

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

    def __init__(self, summary, model=None, batch_axis: Union[None, str, int, Mapping] = None) -> None:
        self.user = user_batch_axes(batch_axis)
        found = find_batch_axes(_stand_in(summary), self.user, run=False)
        super().__init__(found.inputs, found.fixed_batch)
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
        found = find_batch_axes(as_model_proto(self.model), self.user, sample=probe)
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

    def opt_batch(self, opt_shapes: Mapping[str, Sequence[int]], names: Sequence[str]) -> Optional[int]:
        """The calibration profile's batch: the opt shape's dim at the first batched input's axis."""
        ordered = [n for n in names if n not in self.fixed] + [n for n in names if n in self.fixed]
        for name in ordered:
            axis = self.inputs.get(name)
            if name in opt_shapes and axis is not None and axis < len(opt_shapes[name]):
                return int(opt_shapes[name][axis])
        return None
