"""Where accuracy is lost: per-layer error against a reference, and its growth.

Both sides expose the same intermediate tensors (see
:mod:`~trtwidgets.core.accuracy.intermediates`: ONNX Runtime on one side, a
TensorRT debug build with the same names marked as outputs on the other).
:func:`layer_errors` compares them tensor by tensor and ranks the layers by error
*growth*: a layer that only passes on the error of its inputs is not where
accuracy is lost; the one whose output is much worse than its inputs is.

Error is the noise-to-signal power ratio ``NSR = sum((x - ref)^2) / sum(ref^2)``
of a tensor, shown in dB (``error_db = -SNR``, floored at :data:`NSR_FLOOR_DB`
so that bit-exact tensors stay finite). A node's *growth* is the noise it adds:
``NSR(output) - max NSR(nearest compared tensors upstream of its inputs)`` in
linear power, shown in dB (the floor when it adds none). Graph inputs and
constants are exact. Growth is a difference of powers, not of decibels, so that
the first lossy layer of a network does not outrank a much worse layer after it
merely because its inputs were exact.

The sensitivity sweep that acts on the ranking lives in
:mod:`~trtwidgets.core.accuracy.sweep`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..common.errors import UserError
from .intermediates import float_intermediates
from .local_errors import local_errors
from .metrics import ComparisonError, OutputMetrics, compare_tensor
from ..common.serial import json_float
from .noise_db import NSR_FLOOR_DB, nsr_db
from ..model.load import as_model_proto

__all__ = [
    "NSR_FLOOR_DB",
    "GROWTH_MODES",
    "LayerError",
    "ErrorReport",
    "layer_errors",
]

GROWTH_MODES = ("added", "ratio", "local")


def _node_label(node: onnx.NodeProto) -> str:
    # TensorRT's ONNX parser names a layer after its node, or after its first output.
    return node.name or (node.output[0] if node.output else node.op_type)



def _ratio_growth_db(error_db: float, input_error_db: float) -> float:
    """Output error minus input error, in dB (0 when both are infinite)."""
    if math.isinf(error_db) and math.isinf(input_error_db):
        return 0.0 if error_db == input_error_db else error_db
    return error_db - input_error_db


def _growth_db(error_db: float, input_error_db: float) -> float:
    """Noise power a node adds, relative to its output's signal, in dB (floored)."""
    if math.isinf(error_db) and error_db > 0:
        # A NaN/inf mismatch: new if the inputs had none, else passed on.
        return math.inf if not (math.isinf(input_error_db) and input_error_db > 0) else NSR_FLOOR_DB
    added = 10.0 ** (error_db / 10.0) - 10.0 ** (input_error_db / 10.0)
    if added <= 0.0:
        return NSR_FLOOR_DB
    return max(NSR_FLOOR_DB, 10.0 * math.log10(added))



@dataclass(frozen=True)
class LayerError:
    """Error of one node output against the reference.

    Attributes
    ----------
    layer : str
        Node name (TensorRT's layer name for it), or its first output if unnamed.
    op_type : str
    tensor : str
        The compared output tensor.
    order : int
        Position of the node in topological order.
    metrics : OutputMetrics
    error_db : float
        Noise-to-signal ratio in dB (``-SNR``, floored); ``inf`` for a NaN/inf mismatch.
    input_error_db : float
        Largest error among the nearest compared tensors upstream.
    growth_db : float
        Noise power added by this node, ``NSR(out) - NSR(inputs)`` in dB; the floor
        when it adds none; ``inf`` for a new NaN/inf mismatch.
    """

    layer: str
    op_type: str
    tensor: str
    order: int
    metrics: OutputMetrics
    error_db: float
    input_error_db: float
    growth_db: float

    def to_dict(self) -> dict:
        return {
            "layer": self.layer, "op_type": self.op_type, "tensor": self.tensor, "order": self.order,
            "metrics": self.metrics.to_dict(), "error_db": json_float(self.error_db),
            "input_error_db": json_float(self.input_error_db), "growth_db": json_float(self.growth_db),
        }



@dataclass(frozen=True)
class ErrorReport:
    """Per-layer errors in topological order, with a ranking by growth.

    Attributes
    ----------
    layers : tuple of LayerError
        Topological order.
    missing : tuple of str
        Tensors asked for that a side did not provide (not compared).
    incomparable : tuple of str
        Tensors both sides provided with different sizes (not compared).
    """

    layers: Tuple[LayerError, ...]
    missing: Tuple[str, ...] = ()
    incomparable: Tuple[str, ...] = ()

    def ranked(self) -> Tuple[LayerError, ...]:
        """Tensors by error growth, largest first (ties: earlier layer first)."""
        return tuple(sorted(self.layers, key=lambda e: (-_finite_key(e.growth_db), e.order)))

    def ranked_layers(self, n: Optional[int] = None) -> Tuple[str, ...]:
        """Distinct layer names by their largest output growth, most sensitive first."""
        names: List[str] = []
        for e in self.ranked():
            if e.layer not in names:
                names.append(e.layer)
        return tuple(names if n is None else names[:n])

    def to_rows(self) -> List[dict]:
        """One flat dict per compared tensor, ranked (for pandas / HTML tables)."""
        rows = []
        for rank, e in enumerate(self.ranked(), 1):
            m = e.metrics
            rows.append({
                "rank": rank, "layer": e.layer, "op_type": e.op_type, "tensor": e.tensor,
                "growth_db": e.growth_db, "error_db": e.error_db, "input_error_db": e.input_error_db,
                "cosine": m.cosine, "snr_db": m.snr_db, "max_abs": m.max_abs, "mean_abs": m.mean_abs,
                "nonfinite_mismatch": m.nonfinite_mismatch,
            })
        return rows

    def to_dict(self) -> dict:
        return {"layers": [e.to_dict() for e in self.layers], "missing": list(self.missing),
                "incomparable": list(self.incomparable),
                "ranked_layers": list(self.ranked_layers())}


def _finite_key(v: float) -> float:
    if math.isnan(v):
        return -math.inf
    return v


def layer_errors(
    model,
    reference: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    names: Optional[Sequence[str]] = None,
    growth: str = "added",
) -> ErrorReport:
    """Compare intermediate tensors of two runs of the same model and rank by growth.

    Parameters
    ----------
    model : path, onnx.ModelProto or LoadedModel
        The model whose graph defines producers and topological order.
    reference, candidate : mapping
        Tensor name -> array, e.g. :func:`~.intermediates.run_reference` and an engine debug build.
        Several runs can be concatenated along the batch axis first.
    names : sequence of str, optional
        Tensors to compare; default all float intermediates present on both sides.
    growth : {"added", "ratio"}
        ``"added"`` (default): noise power a node adds (see the module docstring);
        ranks the layers that contribute most to the final error, the right view
        when every layer is quantized (INT8 engines). ``"ratio"``: output error minus
        input error in dB; ranks the layer where error *first appears* highest (an
        exact input makes any loss a huge ratio), the right view when a single
        layer is suspect. ``"local"``: the error of each node's output against the
        *model's own* computation of that node on the candidate's inputs (one-node
        ONNX models run in ONNX Runtime, or ``onnx.reference`` without it): the noise
        the node itself adds, free of what it inherits or amplifies; the best guide
        for which layers to keep out of INT8. Nodes that cannot be evaluated alone
        (an input neither compared nor constant) fall back to ``"added"``.

    Returns
    -------
    ErrorReport
    """
    if growth not in GROWTH_MODES:
        raise UserError(f"Unknown growth measure {growth!r}.", f"Choose one of {', '.join(GROWTH_MODES)}.", None)
    proto = as_model_proto(model)
    wanted = float_intermediates(proto) if names is None else list(names)
    missing = tuple(n for n in wanted if n not in reference or n not in candidate)
    compared = [n for n in wanted if n in reference and n in candidate]
    metrics: Dict[str, OutputMetrics] = {}
    incomparable: List[str] = []
    for n in compared:
        try:
            metrics[n] = compare_tensor(reference[n], candidate[n], topk=(), name=n)
        except ComparisonError:
            # e.g. a tensor TensorRT computes at another size (padded channels): not comparable, not fatal.
            incomparable.append(n)
    local_db = local_errors(proto, reference, candidate, metrics) if growth == "local" else {}
    layers = _rank_nodes(proto.graph, metrics, growth, local_db)
    return ErrorReport(layers=tuple(layers), missing=missing, incomparable=tuple(incomparable))


def _rank_nodes(graph, metrics: Mapping[str, OutputMetrics], growth: str, local_db: Mapping[str, float]
                ) -> List[LayerError]:
    """One LayerError per compared node output, in graph order, with its error and its growth."""
    grow = _ratio_growth_db if growth == "ratio" else _growth_db
    err = {n: nsr_db(m) for n, m in metrics.items()}
    upstream: Dict[str, float] = {}

    def up_error(t: str) -> float:
        # Nodes are in topological order, so an uncompared tensor's upstream error
        # was filled in when its producer was visited; graph inputs, constants and
        # anything else unknown are exact (both sides get the same values).
        if t in err:
            return err[t]
        return upstream.get(t, NSR_FLOOR_DB)

    layers: List[LayerError] = []
    for position, node in enumerate(graph.node):
        ins = [up_error(t) for t in node.input if t]
        in_err = max(ins) if ins else NSR_FLOOR_DB
        for out in node.output:
            if not out:
                continue
            if out in err:
                e = err[out]
                g = grow(e, in_err)
                if growth == "local":
                    local = local_db.get(out)
                    if local is not None:
                        g = local
                layers.append(LayerError(
                    layer=_node_label(node), op_type=node.op_type, tensor=out, order=position,
                    metrics=metrics[out], error_db=e, input_error_db=in_err, growth_db=g,
                ))
            else:
                upstream[out] = in_err
    return layers
