"""The state lint's rules share: the model's facts, the user's intent, the findings.

:class:`LintContext` walks the model once (its Q/DQ nodes and their quantized
types) so that every rule in :mod:`trtwidgets.core.model.lint.rules` reads the
same facts, and collects what the rules report.
"""

from __future__ import annotations

from typing import List, Optional

import onnx

from .codes import CODES, Finding
from ..load import LoadedModel, ModelSummary
from ..onnx_graph import GraphIndex, attribute, dtype_name
from ..trt_version import TrtVersion

#: The ONNX default domain, by both of its names.
STD_DOMAINS = ("", "ai.onnx")


def node_name(node: onnx.NodeProto) -> str:
    """A node's name for messages: its name, else its first output, else its op type."""
    return node.name or (node.output[0] if node.output else node.op_type)


class LintContext:
    """What the rules look at: the model, what the user intends, and the findings so far.

    Built once per :func:`~trtwidgets.core.model.lint.lint` call and handed to
    every rule of :data:`~trtwidgets.core.model.lint.rules.RULES`, which reads its
    attributes and reports through :meth:`add`.

    Parameters
    ----------
    model : LoadedModel
        The model with its summary.
    flags : tuple of str or None
        Normalized precision flags; None when not decided.
    trt : TrtVersion or None
        The TensorRT version checked against; None when unknown.
    calibrator : str or None
        Normalized calibrator name (``"none"``, ``"toolkit"``, ``"entropy2"``, ...).
    profiles : list or None
        Optimization profiles; None when not decided.
    cc : tuple of int or None
        GPU compute capability ``(major, minor)``; None when unknown.
    """

    def __init__(self, model: LoadedModel, flags, trt, calibrator, profiles, cc) -> None:
        self.model = model
        self.proto = model.proto
        self.summary: ModelSummary = model.summary
        self.index = GraphIndex(self.proto.graph)
        self.flags = flags
        self.trt: Optional[TrtVersion] = trt
        self.calibrator = calibrator
        self.profiles = profiles
        self.cc = cc
        self.findings: List[Finding] = []
        self.qdq_nodes = [n for n in self.proto.graph.node
                          if n.op_type in ("QuantizeLinear", "DequantizeLinear") and n.domain in STD_DOMAINS]
        self.qtypes = {node_name(n): self._qtype(n) for n in self.qdq_nodes}

    def add(self, code, message, why="", fix="", nodes=(), severity=None) -> None:
        """Record a finding; ``severity`` defaults to the code's usual one in :data:`CODES`."""
        self.findings.append(Finding(code, severity or CODES[code][0], message, why, fix, tuple(nodes)))

    # --- TensorRT version facts -------------------------------------------------------
    @property
    def trt11(self) -> bool:
        """True on TensorRT 11 and later (strong typing only: no flags, no calibrators)."""
        return self.trt is not None and self.trt.major >= 11

    @property
    def trt_name(self) -> str:
        """``"TensorRT 10.16"``, or plain ``"TensorRT"`` when the version is unknown."""
        return f"TensorRT {self.trt.short}" if self.trt else "TensorRT"

    def _qtype(self, node: onnx.NodeProto) -> str:
        zp = node.input[2] if len(node.input) > 2 else ""
        qtype = self.index.constant_dtype(zp) if zp else None
        if qtype is None:
            qtype = attribute(node, "output_dtype", 0) or None
        if qtype is None and node.op_type == "DequantizeLinear":
            qtype = self.index.constant_dtype(node.input[0])
            if qtype is None:
                producer = self.index.producer.get(node.input[0])
                if producer is not None and producer.op_type == "QuantizeLinear":
                    return self._qtype(producer)
        # ONNX: a QuantizeLinear without zero point or output_dtype produces uint8.
        return dtype_name(qtype) if qtype else "uint8"
