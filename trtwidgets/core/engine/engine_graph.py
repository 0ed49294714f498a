"""The engine graph as immutable values: layers, their tensors and weights, I/O tensors, warnings.

:func:`~trtwidgets.core.engine.inspector_json.parse_inspector_json` builds an
:class:`EngineGraph` from TensorRT's engine-inspector JSON; the layer table,
why-not-INT8 and build comparisons read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Tuple

from .tensor_formats import QUANTIZED

__all__ = ["TensorDesc", "WeightsDesc", "IOTensor", "EngineLayer", "InspectorWarning", "EngineGraph", "iter_tensors"]


@dataclass(frozen=True)
class TensorDesc:
    """One input or output tensor of an engine layer.

    Attributes
    ----------
    name : str
    dimensions : tuple of int
        ``-1`` for a dynamic dimension.
    format : str
        The raw description TensorRT wrote (``Format/Datatype``, or
        ``"<Datatype> <Format>"`` when given separately).
    precision : str
        One of :data:`PRECISIONS`; ``"N/A"`` for ``N/A due to dynamic shapes``.
    layout : str
        TensorFormat name: ``"LINEAR"``, ``"CHW32"``, ``"HWC8"``...; empty if not given.
    location : str
    """

    name: str
    dimensions: Tuple[int, ...]
    format: str
    precision: str
    layout: str
    location: str = ""

    @property
    def dynamic_na(self) -> bool:
        """True when TensorRT reported no format because shapes were not fixed."""
        return self.precision == "N/A"


@dataclass(frozen=True)
class WeightsDesc:
    """``Weights`` or ``Bias`` of a layer: raw type name, precision and element count."""

    type: str
    precision: str
    count: int


@dataclass(frozen=True)
class IOTensor:
    """An engine input or output (``Bindings`` entry or ``I/O Tensors`` object)."""

    name: str
    mode: Optional[str] = None
    precision: Optional[str] = None
    dimensions: Optional[Tuple[int, ...]] = None
    layout: Optional[str] = None


@dataclass(frozen=True)
class EngineLayer:
    """One layer of the built engine.

    Attributes
    ----------
    name : str
    layer_type : str
        TensorRT's implementation type (``LayerType``: ``CaskConvolution``, ``Reformat``...).
    parameter_type : str or None
        The layer's kind (``ParameterType``: ``Convolution``, ``Pooling``...), if given.
    inputs, outputs : tuple of TensorDesc
    weights, bias : WeightsDesc or None
    tactic : str
        ``TacticName`` if given, else ``TacticValue``, else ``""``.
    tactic_value : str
    metadata : str
        Raw ``Metadata`` (ONNX node names, control-character separated).
    onnx_nodes : tuple of str
        ONNX nodes fused into this layer (from metadata, else from the name).
    profile : int
        Optimization profile this layer copy belongs to.
    origin : str
        ``Origin`` of a reformat (``"QDQ"``, ``"REFORMAT"``...), if given.
    raw : mapping
        The layer's JSON object, read-only, for fields not modelled here.
    """

    name: str
    layer_type: str
    parameter_type: Optional[str]
    inputs: Tuple[TensorDesc, ...]
    outputs: Tuple[TensorDesc, ...]
    weights: Optional[WeightsDesc] = None
    bias: Optional[WeightsDesc] = None
    tactic: str = ""
    tactic_value: str = ""
    metadata: str = ""
    onnx_nodes: Tuple[str, ...] = ()
    profile: int = 0
    origin: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def type(self) -> str:
        """``ParameterType`` where given (the kind of layer), else ``LayerType``."""
        return self.parameter_type or self.layer_type

    @property
    def precision(self) -> str:
        """The precision the layer runs in.

        ``"N/A"`` when TensorRT did not report formats; the quantized type
        (INT8, FP8...) when any input, output or the weights use one (a quantized
        convolution may write FP16, a Q layer reads FP32); otherwise the first
        input's precision, as TREx does, falling back to the first output's.
        """
        tensors = self.inputs + self.outputs
        if any(t.dynamic_na for t in tensors):
            return "N/A"
        touched = [t.precision for t in tensors]
        if self.weights is not None:
            touched.append(self.weights.precision)
        for q in QUANTIZED:
            if q in touched:
                return q
        for t in tensors:
            if t.precision != "UNKNOWN":
                return t.precision
        return "UNKNOWN" if tensors else "N/A"


@dataclass(frozen=True)
class InspectorWarning:
    """Something the user should know about the JSON, that does not stop the analysis."""

    code: str
    message: str


@dataclass(frozen=True)
class EngineGraph:
    """A parsed engine: its layers in execution order and its I/O tensors.

    Attributes
    ----------
    layers : tuple of EngineLayer
    io_tensors : tuple of IOTensor
    trt_major : int or None
        Guess from the schema: 11 for split ``Datatype``/``Format`` or ``I/O
        Tensors``; 8 for the ``Format/Datatype`` schema that TensorRT 8.x and
        10.x share (10 cannot be told apart from 8.6 by the JSON alone).
    warnings : tuple of InspectorWarning
    source : str
        The path read, or ``"<text>"``.
    """

    layers: Tuple[EngineLayer, ...]
    io_tensors: Tuple[IOTensor, ...] = ()
    trt_major: Optional[int] = None
    warnings: Tuple[InspectorWarning, ...] = ()
    source: str = "<text>"

    @property
    def bindings(self) -> Tuple[str, ...]:
        """Names of the engine's inputs and outputs."""
        return tuple(t.name for t in self.io_tensors)

    @property
    def dynamic_na(self) -> bool:
        """True when some tensor formats are ``N/A due to dynamic shapes``."""
        return any(w.code == "DYNAMIC_SHAPES_NA" for w in self.warnings)

    def layer(self, name: str) -> EngineLayer:
        """The first layer called ``name`` (KeyError if none)."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def precision_counts(self) -> dict:
        """Number of layers per precision, most frequent first."""
        counts: dict = {}
        for layer in self.layers:
            counts[layer.precision] = counts.get(layer.precision, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def layer_summary(self) -> dict:
        """What fused and what did not: layers, INT8 layers, reformats, standalone PointWise and Scale layers.

        The counts issue 21 compares a Q/DQ engine's with an implicit INT8 engine's by (the benchmark
        scripts record them per engine); ``reformat_names`` says where the reformats are.
        """
        of = [layer.type for layer in self.layers]
        return {"layers": len(self.layers), "precisions": self.precision_counts(),
                "int8": sum(1 for layer in self.layers if layer.precision == "INT8"),
                "reformats": of.count("Reformat"), "pointwise": of.count("PointWise"), "scale": of.count("Scale"),
                "reformat_names": [layer.name for layer in self.layers if layer.type == "Reformat"]}


def iter_tensors(graph: EngineGraph) -> Iterable[TensorDesc]:
    """Every layer input and output of the graph, in layer order."""
    for layer in graph.layers:
        yield from layer.inputs
        yield from layer.outputs
