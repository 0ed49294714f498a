"""Placement choices per node: what a region's placement scheme tells the export, as values.

A :class:`~.spec.QdqSpec` carries ``choices``, node label -> one of :data:`CHOICES`; the placement rules
(:func:`~.placement.place_qdq`) read them where a rule has more than one buildable answer:

* ``"skip"`` on a residual ``Add`` (rule 2 as it was): the shortcut is read quantized and the add fuses
  into the convolution of the other branch, which writes float;
* ``"both"`` on a residual ``Add``: both inputs are read quantized, so the convolution keeps its whole
  epilogue (a SiLU, a HardSwish) and writes INT8, and the add runs as an INT8 point-wise layer (what
  NVIDIA ModelOpt places; on YOLOv8's C2f bottlenecks TensorRT 8.6 otherwise splits the SiLU from the
  conv and dequantizes the shortcut in a layer of its own, ``benchmarks/results/peer``);
* ``"float"`` on any node without weights (a Concat and its Split/MaxPool/Resize feeders, an Add): it
  reads every input in float: rules 2, 3, 8 and 9 place nothing on its inputs;
* ``"shared"``: the rules' own answer, said explicitly (rule 9's shared scale at a Concat).

Node sets (which weighted layers run INT8) stay the spec's ``nodes``: "which branch stays float" is a
node set, not a choice. The labels are checked against the model the spec is applied to.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

import onnx

from ..common.errors import UserError
from ..model.onnx_graph import WEIGHTED_OPS
from .exclusions import QdqExclusionError
from ..model.graph_patterns import node_label

__all__ = ["BOTH", "CHOICES", "FLOAT", "SHARED", "SKIP", "check_choices", "choice_nodes"]

SKIP = "skip"
BOTH = "both"
FLOAT = "float"
SHARED = "shared"
#: Every choice, with what it means (for messages).
CHOICES = {SKIP: "residual Add: only the shortcut read quantized, the add fused into the conv",
           BOTH: "residual Add: both inputs read quantized, the conv writes INT8",
           FLOAT: "a node without weights reads every input in float",
           SHARED: "the placement rules' own answer"}


def check_choices(choices: Any) -> Dict[str, str]:
    """``choices`` as a plain dict of label -> choice, or a UserError naming the first that is not one."""
    if choices is None:
        return {}
    if not isinstance(choices, Mapping):
        raise UserError(f"choices is a {type(choices).__name__}, not a mapping of node label -> choice.",
                        "A placement scheme names nodes and what placement does there.",
                        f"Pass e.g. {{'/model.2/m.0/Add': 'both'}}; choices are {', '.join(CHOICES)}.")
    out: Dict[str, str] = {}
    for label, choice in choices.items():
        if not isinstance(label, str) or choice not in CHOICES:
            raise UserError(f"The placement choice {label!r}: {choice!r} is not one the export knows.",
                            "; ".join(f"{k}: {v}" for k, v in CHOICES.items()) + ".",
                            "Give node labels (as reports and plans name nodes) and one of those choices.")
        out[label] = choice
    return out


def choice_nodes(graph: onnx.GraphProto, choices: Mapping[str, str]) -> Dict[int, str]:
    """Node index -> choice for ``choices`` on ``graph``.

    Raises
    ------
    QdqExclusionError
        A label the model has no node for, a residual choice on a node that is not an Add, or ``"float"``
        on a weighted layer (a node set keeps those float).
    """
    if not choices:
        return {}
    by_label = {node_label(n): i for i, n in enumerate(graph.node)}
    out: Dict[int, str] = {}
    for label, choice in choices.items():
        i = by_label.get(label)
        if i is None:
            raise QdqExclusionError(f"The placement choice names {label!r}, which the model has no node for.",
                                    "Choices are made for one model (its regions' nodes).",
                                    "Make the choices on this model (trtwidgets.core.qdq.repeated_patterns.find_regions).")
        op = graph.node[i].op_type
        if choice in (SKIP, BOTH) and op != "Add":
            raise QdqExclusionError(f"{choice!r} is a choice for a residual Add; {label!r} is a {op}.", CHOICES[choice],
                                    "Give it to the Add that joins the residual branches.")
        if choice == FLOAT and op in WEIGHTED_OPS:
            raise QdqExclusionError(f"{label!r} is a weighted layer: 'float' is for nodes without weights.",
                                    "Which weighted layers run INT8 is the spec's node set.",
                                    "Leave the layer out of QdqSpec.nodes instead.")
        out[i] = choice
    return out
