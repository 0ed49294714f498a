"""The shapes the cost model prices: ONNX shape inference, and where it leaves a shape open, the shape a sample produced.

Shape inference cannot follow every graph (a ViT's position embeddings resized by a computed
size, shapes built from ``Shape`` ops through arithmetic it does not fold): a weighted layer whose
shapes stay open would not be priced at all, and a candidate's estimate would leave it out. The
planner runs the model on its samples anyway, so the shape of every open tensor is known there:
one held-back sample run with those tensors as outputs gives them.

The engine may run at another batch than the sample's. A second run at twice the sample's batch
tells which dims follow the batch (they double); those are scaled to the engine's batch, the rest
kept. Where the engine's inputs differ from the samples' in more than the batch (``shapes=`` of a
larger image), the sample's shapes say nothing: those tensors stay open, and the estimate says it
cannot price them.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..model.onnx_graph import WEIGHTED_OPS
from .cost_model import static_shapes

__all__ = ["batch_scaled", "doubled", "free_batch", "observed_shapes", "open_tensors", "sample_shapes"]

Shape = Tuple[int, ...]


def open_tensors(proto: onnx.ModelProto, known: Mapping[str, Shape]) -> List[str]:
    """The inputs and outputs of weighted layers whose shapes ``known`` lacks (what the cost model needs)."""
    out: List[str] = []
    for node in proto.graph.node:
        if node.op_type not in WEIGHTED_OPS:
            continue
        for name in list(node.input[:2]) + list(node.output[:1]):
            if name and name not in known and name not in out:
                out.append(name)
    return out


def sample_shapes(proto: onnx.ModelProto, names: Sequence[str], feed: Mapping[str, np.ndarray],
                  purpose: str = "find the shapes shape inference leaves open") -> Dict[str, Shape]:
    """The shapes of ``names`` in one ONNX Runtime run of ``feed`` (those the run can output).

    Parameters
    ----------
    proto : onnx.ModelProto
        The float model.
    names : sequence of str
        The tensors wanted.
    feed : mapping
        One sample.
    purpose : str
        What the run is for, for the error a session that cannot open raises.

    Returns
    -------
    dict
        Tensor name -> its shape in the run.
    """
    from ..calibration.collect import instrumented_model
    from ..common.ort import open_session

    sess = open_session(instrumented_model(proto, names), optimization="disable", purpose=purpose)
    wanted = [n for n in names if n in sess.output_names]
    return {n: tuple(int(d) for d in np.shape(v)) for n, v in zip(wanted, sess.run(wanted, dict(feed)))}


def free_batch(proto: onnx.ModelProto, axes: Mapping[str, Optional[int]]) -> onnx.ModelProto:
    """A copy whose inputs take any batch on their batch axis, other shapes left to ORT (a static batch-1 export).

    Parameters
    ----------
    proto : onnx.ModelProto
        The model.
    axes : mapping
        Input name -> its batch axis (None: none).

    Returns
    -------
    onnx.ModelProto
    """
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    for vi in model.graph.input:
        ax = axes.get(vi.name)
        dims = vi.type.tensor_type.shape.dim
        if ax is not None and ax < len(dims):
            dims[ax].dim_param = "trtw_batch"
    del model.graph.value_info[:]
    for vi in model.graph.output:
        vi.type.tensor_type.ClearField("shape")
    return model


def doubled(feed: Mapping[str, np.ndarray], axes: Mapping[str, Optional[int]]) -> Dict[str, np.ndarray]:
    """``feed`` at twice its batch (each input concatenated with itself on its batch axis; no axis: as it is)."""
    return {k: (np.concatenate([v, v], axis=axes[k]) if axes.get(k) is not None else v) for k, v in feed.items()}


def batch_scaled(one: Shape, two: Shape, factor: float) -> Optional[Shape]:
    """``one`` with the dims that doubled from ``one`` to ``two`` scaled by ``factor``.

    Parameters
    ----------
    one, two : tuple of int
        A tensor's shape at the sample's batch and at twice it.
    factor : float
        The engine's batch over the sample's.

    Returns
    -------
    tuple of int or None
        None where a dim changed otherwise (or the ranks differ).
    """
    if len(one) != len(two):
        return None
    out = []
    for a, b in zip(one, two):
        if a == b:
            out.append(a)
        elif b == 2 * a:
            out.append(int(round(a * factor)))
        else:
            return None
    return tuple(out)


def observed_shapes(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]],
                    feed: Optional[Mapping[str, np.ndarray]] = None,
                    batch_axes: Optional[Mapping[str, Optional[int]]] = None) -> Tuple[Dict[str, Shape], List[str]]:
    """Every tensor's shape at ``input_shapes``: ``(name -> shape, notes)``.

    Parameters
    ----------
    proto : onnx.ModelProto
        The float model.
    input_shapes : mapping
        Input name -> the shape the engine runs at.
    feed : mapping, optional
        One sample (each input at its own sample shape); without it only shape inference speaks.
    batch_axes : mapping, optional
        Input name -> its batch axis (None: none); default axis 0.

    Returns
    -------
    (dict, list of str)
        The shapes (shape inference's, then the sample's where it left one open), and notes on what
        the sample run filled in or could not.
    """
    shapes = static_shapes(proto, input_shapes)
    missing = open_tensors(proto, shapes)
    if not missing or not feed:
        return shapes, []
    axes = {k: (batch_axes.get(k) if batch_axes is not None else 0) for k in feed}
    sample = {k: tuple(np.shape(v)) for k, v in feed.items()}
    factors = set()
    for k, s in sample.items():
        want = tuple(int(d) for d in input_shapes.get(k, s))
        ax = axes.get(k)
        rest_same = len(want) == len(s) and all(a == b for i, (a, b) in enumerate(zip(want, s)) if i != ax)
        if not rest_same:
            return shapes, [f"{len(missing)} tensors' shapes are open to shape inference, and the engine's input "
                            f"{k} {list(want)} differs from the samples' {list(s)} beyond the batch: not filled in"]
        if ax is not None and s[ax] > 0:
            factors.add(want[ax] / s[ax])
    if len(factors) > 1:
        return shapes, [f"{len(missing)} tensors' shapes are open to shape inference, and the inputs' batches "
                        "scale differently: not filled in"]
    factor = factors.pop() if factors else 1.0
    from ..common.errors import UserError

    try:
        one = sample_shapes(proto, missing, feed)
        if factor != 1.0:
            two = sample_shapes(free_batch(proto, axes), missing, doubled(feed, axes))
            one = {n: s for n, s in ((n, batch_scaled(one[n], two.get(n, ()), factor)) for n in one)
                   if s is not None}
    except UserError as err:  # a model that runs at its own static batch only: its sample says nothing of another
        return shapes, [f"{len(missing)} tensors' shapes are open to shape inference, and a sample run could not "
                        f"fill them in ({err.what})"]
    shapes.update(one)
    left = [n for n in missing if n not in one]
    note = (f"{len(one)} tensors' shapes that shape inference left open were taken from a sample run"
            + (f"; {len(left)} stay unknown" if left else ""))
    return shapes, [note]
