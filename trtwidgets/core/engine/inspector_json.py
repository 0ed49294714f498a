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

The graph's values are in :mod:`~trtwidgets.core.engine.engine_graph`, the
format-string reading in :mod:`~trtwidgets.core.engine.tensor_formats`, and the
files saved beside a build's JSON in :mod:`~trtwidgets.core.engine.build_context`.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from ..common.errors import InspectorError
from ..common.json_limits import INSPECTOR_LIMITS, check_file_size, load_json
# The values, format names and build-folder helpers live in their own modules; they are re-exported
# because notebooks, the CLI and the widgets import them from here.
from .build_context import BUILD_ARTIFACTS, CONTEXT_FAILURES, build_context, context_failure, find_build_artifacts
from .engine_graph import (EngineGraph, EngineLayer, InspectorWarning, IOTensor, TensorDesc, WeightsDesc,
                           iter_tensors)
from .fused_nodes import onnx_nodes, parse_layer_name
from .tensor_formats import NA_DYNAMIC, PRECISIONS, QUANTIZED, layout_from_format, precision_from_format

__all__ = [
    "TensorDesc",
    "WeightsDesc",
    "IOTensor",
    "EngineLayer",
    "EngineGraph",
    "InspectorWarning",
    "parse_inspector_json",
    "as_graph",
    "iter_tensors",
    "precision_from_format",
    "layout_from_format",
    "NA_DYNAMIC",
    "PRECISIONS",
    "QUANTIZED",
    "BUILD_ARTIFACTS",
    "CONTEXT_FAILURES",
    "build_context",
    "context_failure",
    "find_build_artifacts",
]


def _tensor(obj: Any, where: str) -> TensorDesc:
    if not isinstance(obj, Mapping):
        raise InspectorError(
            f"{where} is {type(obj).__name__}, not a tensor description.",
            "Each layer input/output of DETAILED inspector JSON is an object with Name, Dimensions and Format/Datatype.",
            "Check that the file was written by IEngineInspector.get_engine_information(LayerInformationFormat.JSON).",
        )
    dims = _dims(obj.get("Dimensions") or (), where) or ()
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


#: Beyond any dimension an engine can have (TensorRT's Dims hold int64).
_MAX_DIM = 2**63 - 1


def _dims(values: Any, where: str) -> Optional[Tuple[int, ...]]:
    """The dimensions as ints; None when absent or not a list of numbers (TensorRT writes text there at times).

    A number no tensor can have (``1e400`` reads as infinity, NaN, or beyond int64) is an InspectorError:
    turning it into a dimension would overflow, and quietly dropping it would hide a damaged file.
    """
    if values is None:
        return None
    try:
        items = list(values)
    except TypeError:
        return None
    out = []
    for d in items:
        if isinstance(d, float) and not math.isfinite(d) or isinstance(d, (int, float)) and abs(d) > _MAX_DIM:
            raise InspectorError(
                f"{where} has a dimension of {d!r:.40}.",
                "No engine tensor has such a dimension (TensorRT writes whole numbers up to 2**63-1; a value "
                "such as 1e400 reads as infinity): the file is damaged or was edited.",
                "Write the inspector JSON again from the engine (trtwidgets saves it as <engine>.graph.json).")
        try:
            out.append(int(d))
        except (TypeError, ValueError):
            return None
    return tuple(out)


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
        dims = _dims(obj.get("Dimensions"), f"I/O tensor {str(obj.get('Name', ''))[:80]!r}")
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
            "Nothing is at that path." if not path.exists() else "The inspector JSON is one .json file.",
            "Give the path of the .json file written beside the engine (trtwidgets saves it as <engine>.graph.json).",
        )
    check_file_size(path, INSPECTOR_LIMITS, InspectorError)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InspectorError(f"Could not read inspector JSON {path}.", str(exc),
                             "Check the path and its permissions.") from exc
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
        # strict=False: TensorRT 8.6 writes raw \x1e / \x1f into Metadata strings. Limits: a deeply nested file
        # would otherwise end in RecursionError.
        return load_json(text, source, INSPECTOR_LIMITS, InspectorError, strict=False)
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
    _check_detailed(raw_layers, source)
    layers = []
    split_keys = False
    for i, raw in enumerate(raw_layers):
        layer, split = _engine_layer(i, raw, source)
        split_keys = split_keys or split
        if layer is not None:
            layers.append(layer)
    warnings: List[InspectorWarning] = []
    if profile is not None:
        layers = _keep_profile(layers, profile, source, warnings)
    io_key = "I/O Tensors" if "I/O Tensors" in doc else "Bindings"
    io_raw = doc.get(io_key) or []
    if not isinstance(io_raw, list):
        raise InspectorError(f"{source}: '{io_key}' is {type(io_raw).__name__}, not a list.",
                             f"Engine-inspector JSON lists the engine's inputs and outputs under '{io_key}'.", _FIX_SOURCE)
    io_tensors = tuple(_io_tensor(t) for t in io_raw if not (isinstance(t, str) and re.search(r"\[profile \d+\]", t)))
    warnings.extend(_dynamic_na_warnings(layers))
    trt_major = 11 if (split_keys or "I/O Tensors" in doc) else 8
    return EngineGraph(tuple(layers), io_tensors, trt_major, tuple(warnings), source)


def _check_detailed(raw_layers: list, source: str) -> None:
    """InspectorError when the JSON lists no layers, or layer names only (not a DETAILED build)."""
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


def _engine_layer(i: int, raw: Any, source: str) -> Tuple[Optional[EngineLayer], bool]:
    """Layer ``i`` of the JSON (None for multi-stream sync layers), and whether its tensors use
    TensorRT 11's split ``Datatype`` / ``Format`` keys."""
    if not isinstance(raw, Mapping):
        raise InspectorError(
            f"{source}: layer {i} is {type(raw).__name__}, not an object.",
            "DETAILED inspector JSON has one object per layer.", _FIX_SOURCE)
    if raw.get("LayerType") in ("signal", "wait"):
        return None, False  # multi-stream synchronisation, not computation
    name = str(raw.get("Name", f"layer {i}"))
    for key in ("Inputs", "Outputs"):
        if not isinstance(raw.get(key) or [], list):
            raise InspectorError(f"{source}: layer {name!r} has {key} of type {type(raw[key]).__name__}, not a list.",
                                 "DETAILED inspector JSON lists each layer's tensors.", _FIX_SOURCE)
    ins = tuple(_tensor(t, f"{source}: layer {name!r} input {j}") for j, t in enumerate(raw.get("Inputs") or ()))
    outs = tuple(_tensor(t, f"{source}: layer {name!r} output {j}") for j, t in enumerate(raw.get("Outputs") or ()))
    split_keys = False
    for t in list(raw.get("Inputs") or ()) + list(raw.get("Outputs") or ()):
        if isinstance(t, Mapping) and "Format/Datatype" not in t and ("Datatype" in t or "DataType" in t):
            split_keys = True
    tactic_value = raw.get("TacticValue", "")
    tactic = raw.get("TacticName") or (str(tactic_value) if tactic_value not in ("", None) else "")
    metadata = str(raw.get("Metadata") or "")
    info = parse_layer_name(name)
    return EngineLayer(
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
    ), split_keys


def _keep_profile(layers: List[EngineLayer], profile: int, source: str, warnings: list) -> List[EngineLayer]:
    """The layers of optimization profile ``profile``; a warning in ``warnings`` when others were dropped."""
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
    return kept


def _dynamic_na_warnings(layers: Sequence[EngineLayer]) -> List[InspectorWarning]:
    """A DYNAMIC_SHAPES_NA warning when TensorRT reported no precisions (dynamic shapes, no context)."""
    tensors = [t for layer in layers for t in layer.inputs + layer.outputs]
    na = sum(t.dynamic_na for t in tensors)
    if not na:
        return []
    scope = "every tensor" if na == len(tensors) else f"{na} of {len(tensors)} tensors"
    return [InspectorWarning(
        "DYNAMIC_SHAPES_NA",
        f"TensorRT reported '{NA_DYNAMIC}' for {scope}: the engine has dynamic shapes and was inspected "
        "without an execution context (or with one whose input shapes were not set), so precisions and "
        "formats are unknown. Attach an execution context at the optimization profile's opt shape "
        "(context.set_input_shape(...), then inspector.execution_context = context) and write the JSON "
        "again; trtwidgets.trt does that on fresh builds (trtwidgets.trt.layer_info.engine_inspector_json).")]


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
