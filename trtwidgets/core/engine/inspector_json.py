"""Engine-inspector JSON -> an immutable engine graph.

``IEngineInspector.get_engine_information(LayerInformationFormat.JSON)`` is the
only place TensorRT says what it really built: each layer's kernel (tactic), and
the data type and memory layout of every tensor. This module reads that JSON,
whichever TensorRT wrote it:

* TensorRT 8.x-10.x: ``{"Layers": [...], "Bindings": ["x", "y"]}`` with each
  tensor's type and layout in one English string, ``"Format/Datatype"``
  (``"Row major linear FP32"``, ``"Channel major FP16 format where channel % 8 == 0"``,
  ``"Thirty-two wide channel vectorized row major Int8 format"``), or just a
  type name (``"Half"``) for generated kernels;
* TensorRT 11: ``Datatype`` (or ``DataType``) and ``Format`` as separate keys,
  and ``"I/O Tensors"`` (objects) instead of ``Bindings`` (names).

TensorRT 8.6 writes raw control characters (``\\x1e``, ``\\x1f``) into
``Metadata``, so the JSON is parsed non-strictly. Layers listed as bare names
(ProfilingVerbosity was not DETAILED) and files that are not inspector JSON
raise :class:`~trtwidgets.core.common.errors.InspectorError`. A dynamic-shape engine
inspected without an execution context reports ``N/A due to dynamic shapes``
for every tensor: that is a warning on the graph, not an error, because names,
types and tactics are still there.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional, Tuple, Union

from ..common.errors import InspectorError
from .fused_nodes import onnx_nodes, parse_layer_name

__all__ = [
    "TensorDesc",
    "WeightsDesc",
    "IOTensor",
    "EngineLayer",
    "EngineGraph",
    "InspectorWarning",
    "parse_inspector_json",
    "as_graph",
    "precision_from_format",
    "layout_from_format",
    "NA_DYNAMIC",
    "PRECISIONS",
]

NA_DYNAMIC = "N/A due to dynamic shapes"
#: Every precision name this module produces, most to least common in tables.
PRECISIONS = ("INT8", "FP8", "INT4", "FP4", "FP16", "BF16", "FP32", "FP64", "INT32", "INT64", "UINT8", "BOOL",
              "N/A", "UNKNOWN")
#: Precisions that mean a quantized layer when a layer touches them.
QUANTIZED = ("INT8", "FP8", "INT4", "FP4")

# Tokens of format strings and type names, lower-cased, "k" prefix of enum names removed.
_TOKEN_PRECISION = {
    "fp32": "FP32", "float": "FP32", "float32": "FP32",
    "fp16": "FP16", "half": "FP16", "float16": "FP16",
    "bf16": "BF16", "bfloat16": "BF16",
    "fp8": "FP8", "float8": "FP8", "e4m3": "FP8", "fp8e4m3": "FP8",
    "fp4": "FP4", "e2m1": "FP4", "fp4e2m1": "FP4",
    "int8": "INT8", "uint8": "UINT8", "int4": "INT4",
    "int32": "INT32", "int64": "INT64", "bool": "BOOL",
    "double": "FP64", "fp64": "FP64",
}
_ENUM_TOKENS = {"kfloat", "khalf", "kint8", "kint32", "kint64", "kbool", "kuint8", "kfp8", "kbf16", "kint4", "kfp4"}
_WORD = re.compile(r"[A-Za-z0-9]+")

# English layouts (TensorRT 8.x-10.x) -> TensorFormat names.
_WIDTH = {"two": 2, "four": 4, "eight": 8, "sixteen": 16, "thirty-two": 32}
_VECTORIZED = re.compile(r"^(two|four|eight|sixteen|thirty-two) wide channel vectorized row major", re.I)
_CHANNEL_MOD = re.compile(r"channel (?:%|==) (\d+)")
# trt.TensorFormat member names (TensorRT 11 writes them in the Format key).
_TENSOR_FORMATS = {"LINEAR", "CHW2", "HWC8", "CHW4", "CHW16", "CHW32", "DHWC8", "CDHW32", "HWC", "DLA_LINEAR",
                   "DLA_HWC4", "HWC16", "DHWC"}


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
    def input_precisions(self) -> Tuple[str, ...]:
        return tuple(t.precision for t in self.inputs)

    @property
    def output_precisions(self) -> Tuple[str, ...]:
        return tuple(t.precision for t in self.outputs)

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


# --------------------------------------------------------------------------- formats


def precision_from_format(text: Optional[str]) -> str:
    """The data type named in a TensorRT format or type string.

    Parameters
    ----------
    text : str or None
        ``"Row major linear FP32"``, ``"Four wide channel vectorized row major Int8 format"``,
        ``"Half"``, ``"kINT8"``, ``"N/A due to dynamic shapes"``...

    Returns
    -------
    str
        One of :data:`PRECISIONS`.
    """
    if text is None:
        return "UNKNOWN"
    s = str(text).strip()
    if s.startswith("N/A"):
        return "N/A"
    for word in _WORD.findall(s):
        w = word.lower()
        if w in _ENUM_TOKENS:
            w = w[1:]
        if w in _TOKEN_PRECISION:
            return _TOKEN_PRECISION[w]
    return "UNKNOWN"


def layout_from_format(text: Optional[str]) -> str:
    """The memory layout in a format string, as a TensorFormat name (``"CHW32"``, ``"HWC8"``...).

    Empty for strings that name only a type (``"Half"``) and ``"N/A"`` for dynamic shapes.
    """
    if not text:
        return ""
    s = str(text).strip().rstrip(".")
    if s.startswith("N/A"):
        return "N/A"
    three_d = "3 spatial" in s
    m = _VECTORIZED.match(s)
    if m:
        width = _WIDTH[m.group(1).lower()]
        return f"{'CDHW' if three_d else 'CHW'}{width}"
    low = s.lower()
    if low.startswith("channel major"):
        mod = _CHANNEL_MOD.search(s)
        base = "DHWC" if three_d else "HWC"
        return f"{base}{mod.group(1)}" if mod else base
    if low.startswith("row major"):
        return "LINEAR"
    # TensorRT 11 style: the Format key holds the enum name itself.
    word = s.split()[0] if s.split() else ""
    word = word[1:] if word[:1] == "k" and word[1:2].isupper() else word
    return word.upper() if word.upper() in _TENSOR_FORMATS else ""


def _tensor(obj: Any, where: str) -> TensorDesc:
    if not isinstance(obj, Mapping):
        raise InspectorError(
            f"{where} is {type(obj).__name__}, not a tensor description.",
            "Each layer input/output of DETAILED inspector JSON is an object with Name, Dimensions and Format/Datatype.",
            "Check that the file was written by IEngineInspector.get_engine_information(LayerInformationFormat.JSON).",
        )
    dims = obj.get("Dimensions") or ()
    try:
        dims = tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        dims = ()
    if "Format/Datatype" in obj:
        fmt = str(obj["Format/Datatype"])
        precision, layout = precision_from_format(fmt), layout_from_format(fmt)
    else:
        dtype = obj.get("Datatype", obj.get("DataType", obj.get("Data Type")))
        form = obj.get("Format")
        fmt = " ".join(str(x) for x in (dtype, form) if x is not None)
        precision = precision_from_format(dtype if dtype is not None else form)
        if dtype is not None and str(dtype).startswith("N/A"):
            precision = "N/A"
        layout = layout_from_format(form) if form is not None else ""
    return TensorDesc(str(obj.get("Name", "")), dims, fmt, precision, layout, str(obj.get("Location", "")))


def _weights(obj: Any) -> Optional[WeightsDesc]:
    if not isinstance(obj, Mapping) or "Type" not in obj:
        return None
    try:
        count = int(obj.get("Count", 0))
    except (TypeError, ValueError):
        count = 0
    return WeightsDesc(str(obj["Type"]), precision_from_format(obj["Type"]), count)


def _io_tensor(obj: Any) -> IOTensor:
    if isinstance(obj, Mapping):
        dtype = obj.get("Datatype", obj.get("DataType"))
        dims = obj.get("Dimensions")
        try:
            dims = tuple(int(d) for d in dims) if dims is not None else None
        except (TypeError, ValueError):
            dims = None
        mode = obj.get("IOMode", obj.get("Mode"))
        return IOTensor(str(obj.get("Name", "")), str(mode) if mode is not None else None,
                        precision_from_format(dtype) if dtype is not None else None, dims,
                        layout_from_format(obj.get("Format")) if obj.get("Format") else None)
    return IOTensor(str(obj))


# --------------------------------------------------------------------------- reading


def _read_text(text_or_path) -> Tuple[str, str]:
    if isinstance(text_or_path, bytes):
        return text_or_path.decode("utf-8", errors="replace"), "<bytes>"
    if isinstance(text_or_path, os.PathLike):
        path = Path(text_or_path)
    else:
        s = str(text_or_path)
        if s.lstrip()[:1] in ("{", "[") or "\n" in s or len(s) > 4096:
            return s, "<text>"
        path = Path(s)
    try:
        is_file = path.is_file()
    except OSError:  # e.g. a name too long to be a path: it was text after all
        return str(text_or_path), "<text>"
    if not is_file:
        raise InspectorError(
            f"Inspector JSON {path} does not exist." if not path.exists() else f"{path} is not a file.",
            None,
            "Give the path of the .json file written beside the engine (trtwidgets saves it as <engine>.graph.json).",
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InspectorError(f"Could not read inspector JSON {path}.", str(exc), "Check the path and its permissions.")
    return data.decode("utf-8", errors="replace"), str(path)


def _describe_other_shape(doc: Any) -> Tuple[str, str]:
    """What the JSON looks like instead, and where the right file comes from."""
    if isinstance(doc, list):
        rows = [r for r in doc if isinstance(r, Mapping)]
        if any("averageMs" in r or "timeMs" in r for r in rows):
            return ("It is a list of per-layer timings: a TensorRT profile (trtexec --exportProfile), "
                    "not the engine graph.", "Pass it as the profile (latency) and give the *.graph.json as the graph.")
        if doc and all(isinstance(x, str) for x in doc):
            return ("It is a bare list of names.", "")
        return (f"It is a JSON list of {len(doc)} items.", "")
    if isinstance(doc, Mapping):
        keys = list(doc.keys())
        if "flags" in doc and ("model_path" in doc or "calibrator" in doc):
            return ("It looks like a trtwidgets recipe.", "")
        shown = ", ".join(repr(k) for k in keys[:6]) + (", ..." if len(keys) > 6 else "")
        if "Layers" in doc:
            return (f"Its 'Layers' is a {type(doc['Layers']).__name__}, not a list.", "")
        return (f"It is an object with keys {shown or '(none)'} and no 'Layers'.", "")
    return (f"It is a JSON {type(doc).__name__}.", "")


_FIX_SOURCE = ("Write it with engine.create_engine_inspector().get_engine_information("
               "trt.LayerInformationFormat.JSON) (trtexec: --exportLayerInfo=FILE --profilingVerbosity=detailed); "
               "trtwidgets.trt.build saves it as <engine>.graph.json.")


def _load(text: str, source: str) -> Any:
    if not text.strip():
        raise InspectorError(f"{source} is empty.", "The inspector JSON was not written, or written as an empty file.",
                             _FIX_SOURCE)
    try:
        # strict=False: TensorRT 8.6 writes raw \x1e / \x1f into Metadata strings.
        return json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        end = len(text.rstrip())
        # With strict=False a string may span lines, so an unterminated one runs to the end of the text.
        at_end = exc.pos >= end - 1 or exc.msg.startswith("Unterminated string")
        if at_end and text.lstrip()[:1] in ("{", "["):
            raise InspectorError(
                f"{source} is truncated: the JSON stops at character {end} in the middle of "
                f"{'a string' if 'Unterminated' in exc.msg else 'the layer list'}.",
                "The file was cut off (an interrupted write or copy, or a size limit on an upload).",
                "Write the inspector JSON again from the engine, or copy the whole file.",
            ) from None
        snippet = text.strip()[:60].replace("\n", " ")
        # Binary content (an engine, an ONNX file) would print as noise: say what it is instead.
        start = (f"It starts with {snippet!r}" if snippet.isprintable()
                 else "It holds binary data (an engine or an ONNX file?)")
        raise InspectorError(
            f"{source} is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}).",
            f"{start}; engine-inspector output is a JSON object with a 'Layers' list.",
            _FIX_SOURCE,
        ) from None


def parse_inspector_json(text_or_path: Union[str, bytes, os.PathLike, Mapping], profile: Optional[int] = 0
                         ) -> EngineGraph:
    """Parse TensorRT engine-inspector JSON.

    Parameters
    ----------
    text_or_path : str, bytes, path-like or mapping
        The JSON text, a path to it, or an already-decoded object.
    profile : int or None, default 0
        Engines with several optimization profiles list each layer once per
        profile (``[profile N]`` suffix); keep only this profile's copies.
        ``None`` keeps all.

    Returns
    -------
    EngineGraph
        With ``warnings`` for ``N/A due to dynamic shapes`` and dropped profiles.

    Raises
    ------
    InspectorError
        The input is not JSON, is truncated, is JSON of another shape, or lists
        layer names only (rebuild with ``ProfilingVerbosity.DETAILED``).
    """
    if isinstance(text_or_path, Mapping):
        doc, source = text_or_path, "<object>"
    else:
        text, source = _read_text(text_or_path)
        doc = _load(text, source)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("Layers"), list):
        what, fix = _describe_other_shape(doc)
        raise InspectorError(f"{source} is JSON, but not TensorRT engine-inspector output. {what}",
                             "Engine-inspector JSON is an object with a 'Layers' list (and 'Bindings' or 'I/O Tensors').",
                             fix or _FIX_SOURCE)
    raw_layers = doc["Layers"]
    if not raw_layers:
        raise InspectorError(
            f"{source} lists no layers.",
            "The engine was built with ProfilingVerbosity.NONE, or the engine is empty.",
            "Rebuild with config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED "
            "(trtexec --profilingVerbosity=detailed); trtwidgets.trt.build does this.",
        )
    if all(isinstance(x, str) for x in raw_layers):
        raise InspectorError(
            f"{source} has layer names only ({len(raw_layers)} layers, e.g. {raw_layers[0][:80]!r}): "
            "no precisions, formats or tactics.",
            "The engine was built with ProfilingVerbosity.LAYER_NAMES_ONLY (TensorRT's default).",
            "Rebuild with config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED "
            "(trtexec --profilingVerbosity=detailed) and write the inspector JSON again; trtwidgets.trt.build does this.",
        )
    layers = []
    split_keys = False
    for i, raw in enumerate(raw_layers):
        if not isinstance(raw, Mapping):
            raise InspectorError(
                f"{source}: layer {i} is {type(raw).__name__}, not an object.",
                "DETAILED inspector JSON has one object per layer.", _FIX_SOURCE)
        if raw.get("LayerType") in ("signal", "wait"):
            continue  # multi-stream synchronisation, not computation
        name = str(raw.get("Name", f"layer {i}"))
        ins = tuple(_tensor(t, f"{name!r} input {j}") for j, t in enumerate(raw.get("Inputs") or ()))
        outs = tuple(_tensor(t, f"{name!r} output {j}") for j, t in enumerate(raw.get("Outputs") or ()))
        for t in list(raw.get("Inputs") or ()) + list(raw.get("Outputs") or ()):
            if isinstance(t, Mapping) and "Format/Datatype" not in t and ("Datatype" in t or "DataType" in t):
                split_keys = True
        tactic_value = raw.get("TacticValue", "")
        tactic = raw.get("TacticName") or (str(tactic_value) if tactic_value not in ("", None) else "")
        metadata = str(raw.get("Metadata") or "")
        info = parse_layer_name(name)
        layers.append(EngineLayer(
            name=name,
            layer_type=str(raw.get("LayerType", "")),
            parameter_type=str(raw["ParameterType"]) if raw.get("ParameterType") else None,
            inputs=ins,
            outputs=outs,
            weights=_weights(raw.get("Weights")),
            bias=_weights(raw.get("Bias")),
            tactic=str(tactic),
            tactic_value=str(tactic_value or ""),
            metadata=metadata,
            onnx_nodes=onnx_nodes(name, metadata),
            profile=info.profile,
            origin=str(raw.get("Origin", "") or ""),
            raw=MappingProxyType(dict(raw)),
        ))
    warnings = []
    if profile is not None:
        kept = [layer for layer in layers if layer.profile == profile]
        dropped = len(layers) - len(kept)
        if not kept:
            raise InspectorError(f"{source} has no layers for optimization profile {profile}.",
                                 f"Profiles present: {sorted({layer.profile for layer in layers})}.",
                                 "Pick one of those profiles.")
        if dropped:
            warnings.append(InspectorWarning(
                "OTHER_PROFILES_DROPPED",
                f"The engine has several optimization profiles; showing profile {profile} "
                f"({len(kept)} layers), {dropped} layers of other profiles left out."))
        layers = kept
    io_key = "I/O Tensors" if "I/O Tensors" in doc else "Bindings"
    io_raw = doc.get(io_key) or []
    io_tensors = tuple(_io_tensor(t) for t in io_raw if not (isinstance(t, str) and re.search(r"\[profile \d+\]", t)))
    tensors = [t for layer in layers for t in layer.inputs + layer.outputs]
    na = sum(t.dynamic_na for t in tensors)
    if na:
        scope = "every tensor" if na == len(tensors) else f"{na} of {len(tensors)} tensors"
        warnings.append(InspectorWarning(
            "DYNAMIC_SHAPES_NA",
            f"TensorRT reported '{NA_DYNAMIC}' for {scope}: the engine has dynamic shapes and was inspected "
            "without an execution context (or with one whose input shapes were not set), so precisions and "
            "formats are unknown. Attach an execution context at the optimization profile's opt shape "
            "(context.set_input_shape(...), then inspector.execution_context = context) and write the JSON "
            "again; trtwidgets.trt does that on fresh builds (trtwidgets.trt.inspect.engine_inspector_json)."))
    trt_major = 11 if (split_keys or "I/O Tensors" in doc) else 8
    return EngineGraph(tuple(layers), io_tensors, trt_major, tuple(warnings), source)


def iter_tensors(graph: EngineGraph) -> Iterable[TensorDesc]:
    """Every layer input and output of the graph, in layer order."""
    for layer in graph.layers:
        yield from layer.inputs
        yield from layer.outputs


def as_graph(source: Any) -> EngineGraph:
    """An :class:`EngineGraph` from a graph, a build result, inspector JSON text, a path or a mapping.

    A build result is anything with an ``inspector_json`` (text) or
    ``inspector_json_path`` attribute, such as ``trtwidgets.trt.build.BuildResult``.
    """
    if isinstance(source, EngineGraph):
        return source
    text = getattr(source, "inspector_json", None)
    if text:
        graph = parse_inspector_json(text)
        path = getattr(source, "inspector_json_path", None)
        return EngineGraph(graph.layers, graph.io_tensors, graph.trt_major, graph.warnings, str(path or graph.source))
    path = getattr(source, "inspector_json_path", None)
    if path:
        return parse_inspector_json(Path(path))
    return parse_inspector_json(source)


#: Files a trtwidgets build folder holds beside the inspector JSON, by role.
BUILD_ARTIFACTS = {"recipe": ("recipe.json",), "calibration": ("calibration.cache",),
                   "profile": ("engine.profile.json", "profile.json", "timings.json", "layer_times.json")}


def find_build_artifacts(graph_path: Union[str, os.PathLike]) -> dict:
    """The recipe, calibration cache and profile saved beside an inspector JSON file, where present.

    Parameters
    ----------
    graph_path : path
        ``<build folder>/engine.graph.json`` (or any ``*.graph.json``).

    Returns
    -------
    dict
        Role (``"recipe"``, ``"calibration"``, ``"profile"``) -> path, for the files that exist.
    """
    folder = Path(graph_path).parent
    found = {}
    for role, names in BUILD_ARTIFACTS.items():
        for name in names:
            if (folder / name).is_file():
                found[role] = str(folder / name)
                break
    return found


def build_context(source: Any) -> dict:
    """What a build source says about how it was built: recipe, calibration cache, per-layer timings.

    Parameters
    ----------
    source : build result, saved build, path of an inspector JSON file, or anything else
        Build results and saved builds give their ``recipe`` (or ``recipe_path``),
        ``calibration_cache_path`` and ``timings_path`` attributes; a path gives the
        files found beside it (:func:`find_build_artifacts`). Other sources give nothing.

    Returns
    -------
    dict
        Keys among ``"recipe"``, ``"calibration"``, ``"profile"`` (the arguments of
        ``layer_table``), for what is known.
    """
    found: dict = {}
    path = None
    if isinstance(source, os.PathLike):
        path = source
    elif isinstance(source, str) and source.strip()[:1] not in ("{", "[") and len(source) < 4096:
        path = source
    else:
        path = getattr(source, "inspector_json_path", None)
        for key, attrs in (("recipe", ("recipe", "recipe_path")), ("calibration", ("calibration_cache_path",)),
                           ("profile", ("timings", "timings_path"))):
            for attr in attrs:
                value = getattr(source, attr, None)
                if value is not None:
                    found[key] = value
                    break
    if path is not None:
        try:
            if Path(path).is_file():
                for key, value in find_build_artifacts(path).items():
                    found.setdefault(key, value)
        except OSError:
            pass
    return found


#: Exceptions a malformed file beside the engine can raise deep in the analysis (an odd recipe field, a cache
#: entry of the wrong type); turned into a :class:`~trtwidgets.core.common.errors.UserError` by :func:`context_failure`.
CONTEXT_FAILURES = (TypeError, ValueError, KeyError, AttributeError, IndexError, OSError)


def context_failure(exc: BaseException, context: Mapping[str, Any], ignore_hint: str) -> Exception:
    """A user-facing error for a failure while using a build's recipe, calibration cache or timings.

    Parameters
    ----------
    exc : exception
        A :class:`~trtwidgets.core.common.errors.UserError`, or one of :data:`CONTEXT_FAILURES`.
    context : mapping
        What :func:`build_context` found (role -> path or value); files among them are named.
    ignore_hint : str
        How the caller leaves those files out (``"--no-siblings"``, ``"use_siblings=False"``).

    Returns
    -------
    UserError
        The same class as ``exc`` when it was one, with the hint added to its fix; else an
        :class:`~trtwidgets.core.common.errors.InspectorError`.
    """
    from ..common.errors import UserError

    files = [str(v) for v in context.values() if isinstance(v, (str, os.PathLike))]
    if not files:
        if isinstance(exc, UserError):
            return exc
        return InspectorError(f"The build could not be inspected ({type(exc).__name__}: {exc}).",
                              "The recipe, calibration cache or timings given have an unexpected shape.",
                              "Give the files saved with the build, or leave them out.")
    hint = (f"Or leave the files beside the engine out ({ignore_hint}): {', '.join(files)}.")
    if isinstance(exc, UserError):
        err = type(exc).__new__(type(exc))
        UserError.__init__(err, exc.what, exc.why, f"{exc.fix} {hint}" if exc.fix else hint)
        return err
    return InspectorError(
        f"A file beside the engine could not be used ({type(exc).__name__}: {exc}).",
        f"The analysis reads {', '.join(files)} from the build folder; one of them has an unexpected shape.",
        f"Fix or remove the broken file. {hint}")
