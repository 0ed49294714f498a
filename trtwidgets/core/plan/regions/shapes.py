"""The real shapes of region inputs at the plan's batch: one ONNX Runtime run of a held-back sample.

A region's sub-model is built at the shapes its instance sees in the whole engine. Shape inference
may leave them open (or wrong, where a graph computes shapes); the sample run cannot. The engine
runs at the plan's batch, the sample at its own: a second run at twice the sample's batch tells
which dims follow the batch (they double), and those are scaled to the plan's batch.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..observed_shapes import batch_scaled, doubled, free_batch, sample_shapes

__all__ = ["real_shapes"]

Shape = Tuple[int, ...]
PURPOSE = "find the shapes of the regions' inputs"


def real_shapes(proto: onnx.ModelProto, names: Sequence[str], feed: Mapping[str, np.ndarray],
                input_shapes: Mapping[str, Sequence[int]], batch_axes: Optional[Mapping[str, Optional[int]]] = None
                ) -> Tuple[Dict[str, Shape], List[str]]:
    """``(tensor -> shape at input_shapes' batch, notes)`` for ``names``, from runs of ``feed``.

    Parameters
    ----------
    proto : onnx.ModelProto
        The float model.
    names : sequence of str
        The tensors wanted.
    feed : mapping
        One held-back sample.
    input_shapes : mapping
        Input -> the shape the engine runs at (the plan's).
    batch_axes : mapping, optional
        Input -> batch axis (None: none); default 0.
    """
    from ...common.errors import UserError

    names = list(dict.fromkeys(names))
    axes = {k: (batch_axes.get(k, 0) if batch_axes is not None else 0) for k in feed}
    factors = {input_shapes[k][ax] / np.shape(v)[ax] for k, v in feed.items()
               if (ax := axes.get(k)) is not None and k in input_shapes and np.ndim(v) > ax and np.shape(v)[ax]}
    try:
        one = sample_shapes(proto, names, feed, purpose=PURPOSE)
    except UserError as err:
        return {}, [f"the regions' input shapes could not be taken from a sample run ({err.what})"]
    factor = factors.pop() if len(factors) == 1 else 1.0
    if factor == 1.0:
        return one, []
    try:
        two = sample_shapes(free_batch(proto, axes), names, doubled(feed, axes), purpose=PURPOSE)
    except UserError as err:
        return {}, [f"the model runs at its own batch only: the regions' shapes at batch x{factor:g} are not known "
                    f"from a sample ({err.what})"]
    out: Dict[str, Shape] = {}
    for n, a in one.items():
        scaled = batch_scaled(a, two.get(n, ()), factor)
        if scaled is not None:
            out[n] = scaled
    left = [n for n in names if n not in out]
    return out, ([f"{len(left)} region inputs' shapes did not follow the batch: not known"] if left else [])
