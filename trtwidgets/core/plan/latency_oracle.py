"""TensorRT as the oracle of where INT8 pays: an implicit INT8+FP16 build, read back.

With the INT8 and FP16 flags and a calibration cache, TensorRT times every layer
in both precisions and keeps the faster: its engine says, layer by layer, where
INT8 pays on this GPU at this shape. The planner quantizes only those layers
(and charges the rest at FP16), which is what an explicit engine must do to be
no slower than implicit INT8.

Engine layers name the ONNX nodes they fused (:mod:`..engine.fused_nodes`);
TensorRT 8.6's parser names an unnamed node ``<Op>@<k>``, the k-th node of that op
type, which :func:`node_aliases` maps back to the model's node labels.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional, Union

import onnx

from ..common.errors import UserError
from ..model.onnx_graph import WEIGHTED_OPS
from ..model.graph_patterns import node_label

__all__ = ["OracleLayer", "LatencyOracle", "node_aliases", "read_oracle"]

_ALIAS = re.compile(r"^(?P<op>[A-Za-z]+)[@_](?P<k>\d+)$")


@dataclass(frozen=True)
class OracleLayer:
    """What TensorRT chose for one ONNX node in the implicit INT8+FP16 build."""

    node: str
    precision: str
    latency_ms: Optional[float]


@dataclass(frozen=True)
class LatencyOracle:
    """Per ONNX node: the precision TensorRT chose and the time of the engine layer that holds it.

    Attributes
    ----------
    source : str
        Where it was read from.
    layers : mapping of str to OracleLayer
        Node label -> choice. A layer fused with others shares its time with them
        (the time is charged once, to its first weighted node).
    total_ms : float or None
        The engine's measured latency, when the build recorded one.
    """

    source: str
    layers: Mapping[str, OracleLayer]
    total_ms: Optional[float] = None


def node_aliases(proto: onnx.ModelProto) -> Dict[str, str]:
    """Names TensorRT may use for a node -> the node's label (its name, or ``Op(output)``).

    Named nodes keep their names; an unnamed node is also known as ``Op@k`` and
    ``Op_k`` (k counts nodes of that op type, in graph order), as TensorRT 8.6's
    parser and older exporters name them.
    """
    out: Dict[str, str] = {}
    counts: Dict[str, int] = {}
    for node in proto.graph.node:
        label = node_label(node)
        k = counts.get(node.op_type, 0)
        counts[node.op_type] = k + 1
        out[label] = label
        if node.name:
            continue
        out.setdefault(f"{node.op_type}@{k}", label)
        out.setdefault(f"{node.op_type}_{k}", label)
        for o in node.output:
            out.setdefault(o, label)
    return out


def read_oracle(build: Union[str, os.PathLike, Mapping], proto: onnx.ModelProto) -> LatencyOracle:
    """Read an implicit INT8+FP16 build (a build folder or its ``*.graph.json``) for the planner.

    Raises
    ------
    UserError
        The build ran no layer in INT8 and FP16 both allowed (not an INT8+FP16 build),
        or none of its layers names a node of ``proto`` (a build of another model).
    """
    from ..engine.inspector_json import parse_inspector_json
    from ..engine.build_records import recorded_latency
    from ..engine.saved_build import load_saved_build

    total = None
    timings: Dict[str, float] = {}
    if isinstance(build, Mapping):
        graph, source = parse_inspector_json(build), "inspector JSON"
    else:
        saved = load_saved_build(build)
        graph, source = parse_inspector_json(saved.inspector_json), str(Path(build))
        timings = dict(saved.timings or {})
        recorded = recorded_latency(saved)  # the whole engine's, where the build timed it
        total = None if recorded is None else recorded.median_ms
    aliases = node_aliases(proto)
    layers: Dict[str, OracleLayer] = {}
    weighted = {node_label(n) for n in proto.graph.node if n.op_type in WEIGHTED_OPS}
    for layer in graph.layers:
        nodes = [aliases[n] for n in layer.onnx_nodes if n in aliases]
        charged = False
        for n in nodes:
            if n not in weighted:
                continue
            ms = timings.get(layer.name) if not charged else 0.0
            charged = True
            layers[n] = OracleLayer(n, layer.precision, ms)
    if not layers:
        raise UserError(f"No layer of the build {source} names a weighted node of this model.",
                        "The latency oracle maps engine layers to ONNX nodes by name; this build is of another "
                        "model, or its layer names were changed.",
                        "Give an implicit INT8+FP16 build of the same ONNX model (trtwidgets build with "
                        "flags fp16,int8 and a calibration cache).")
    return LatencyOracle(source=source, layers=layers, total_ms=total)
