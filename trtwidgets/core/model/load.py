"""Load an ONNX model from a path and summarise it.

:func:`load_model` turns every way a path can be wrong (missing, a directory,
not ONNX, truncated, missing external data, too large for protobuf, an empty
graph) into a :class:`~trtwidgets.core.common.errors.ModelLoadError` that says what to
do. :class:`ModelSummary` is the immutable description that the widgets, the
CLI and lint show.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple, Union

import onnx
from google.protobuf.message import DecodeError
from onnx import external_data_helper

from ..common.errors import ModelLoadError
from .onnx_graph import GraphIndex, attribute, dtype_name
from ..common.paths import user_path

#: protobuf cannot parse a message of 2 GiB or more; such models need external data.
PROTOBUF_LIMIT = 2**31

Dim = Union[int, str]

_QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output.

    Attributes
    ----------
    name : str
    dtype : str
        e.g. ``float32``.
    shape : tuple of (int or str)
        Static dims are ints; dynamic dims are their symbolic name, or ``"?"``
        when the model gives none (``-1`` or unset).
    has_shape : bool
        False when the model declares no shape at all for the tensor (its rank is
        unknown; ``shape`` is then empty). A scalar has a shape, with no dims.
    """

    name: str
    dtype: str
    shape: Tuple[Dim, ...]
    has_shape: bool = True

    @property
    def dynamic_dims(self) -> Dict[int, str]:
        """Index -> name of each dynamic dimension."""
        return {i: d for i, d in enumerate(self.shape) if isinstance(d, str)}

    @property
    def is_dynamic(self) -> bool:
        return bool(self.dynamic_dims)

    def to_dict(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "has_shape": self.has_shape,
                "dynamic_dims": {str(k): v for k, v in self.dynamic_dims.items()}}


@dataclass(frozen=True)
class QDQSummary:
    """Quantize/Dequantize nodes of a model.

    Attributes
    ----------
    quantize, dequantize : int
        Node counts.
    per_tensor, per_channel : int
        Q/DQ nodes with a scalar scale, and with a vector scale.
    dtypes : dict
        Quantized type (``int8``, ``uint8``, ``float8e4m3fn``, ...) -> node count.
    dynamic_scale : tuple of str
        Names of QuantizeLinear nodes whose scale is computed at run time.
    """

    quantize: int = 0
    dequantize: int = 0
    per_tensor: int = 0
    per_channel: int = 0
    dtypes: Dict[str, int] = field(default_factory=dict)
    dynamic_scale: Tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return self.quantize + self.dequantize

    def to_dict(self) -> dict:
        return {"quantize": self.quantize, "dequantize": self.dequantize, "count": self.count,
                "per_tensor": self.per_tensor, "per_channel": self.per_channel,
                "dtypes": dict(self.dtypes), "dynamic_scale": list(self.dynamic_scale)}


@dataclass(frozen=True)
class ModelSummary:
    """What a TensorRT user wants to know about a model before building it."""

    path: str
    sha256: str
    ir_version: int
    opsets: Dict[str, int]
    producer: str
    inputs: Tuple[TensorInfo, ...]
    outputs: Tuple[TensorInfo, ...]
    op_counts: Dict[str, int]
    node_count: int
    param_count: int
    param_bytes: int
    initializer_dtypes: Dict[str, int]
    qdq: QDQSummary
    external_data: bool

    @property
    def opset(self) -> int:
        """The default-domain (``ai.onnx``) opset."""
        return self.opsets.get("", self.opsets.get("ai.onnx", 0))

    @property
    def dynamic_inputs(self) -> Tuple[TensorInfo, ...]:
        return tuple(t for t in self.inputs if t.is_dynamic)

    def to_dict(self) -> dict:
        return {
            "path": self.path, "sha256": self.sha256, "ir_version": self.ir_version,
            "opsets": dict(self.opsets), "producer": self.producer,
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "op_counts": dict(self.op_counts), "node_count": self.node_count,
            "param_count": self.param_count, "param_bytes": self.param_bytes,
            "initializer_dtypes": dict(self.initializer_dtypes), "qdq": self.qdq.to_dict(),
            "external_data": self.external_data,
        }


@dataclass(frozen=True)
class LoadedModel:
    """An ONNX model read from disk together with its summary.

    The ``proto`` is shared, not copied: treat it as read-only.
    """

    path: Path
    proto: onnx.ModelProto = field(repr=False, compare=False)
    summary: ModelSummary

    @property
    def sha256(self) -> str:
        return self.summary.sha256


def file_sha256(path: Union[str, os.PathLike], extra_files=()) -> str:
    """SHA-256 of a model file and (in order) its external-data files."""
    h = hashlib.sha256()
    for p in (path, *extra_files):
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _check_path(path: Path) -> None:
    if not path.exists():
        raise ModelLoadError(
            f"No model at {path}.",
            "The path does not exist" + ("" if path.is_absolute() else f" (relative to {Path.cwd()})") + ".",
            "Check the spelling, or give an absolute path to the .onnx file.",
        )
    if path.is_dir():
        onnx_files = sorted(p.name for p in path.glob("*.onnx"))[:5]
        hint = f" It contains: {', '.join(onnx_files)}." if onnx_files else " It contains no .onnx file."
        raise ModelLoadError(f"{path} is a directory, not an ONNX file.", "A model is one .onnx file (plus its external-data files)." + hint,
                             "Give the path of the .onnx file itself.")
    size = path.stat().st_size
    if size == 0:
        raise ModelLoadError(f"{path} is empty (0 bytes).", "The file was not written completely, or is a placeholder.",
                             "Export the model again.")
    if size >= PROTOBUF_LIMIT:
        raise ModelLoadError(
            f"{path} is {size / 2**30:.1f} GiB in one file.",
            "protobuf cannot parse a message of 2 GiB or more, so ONNX (and TensorRT's parser) need the weights in external-data files.",
            "Re-save it with external data: onnx.save_model(model, 'model.onnx', save_as_external_data=True, location='model.onnx.data').",
        )


def _missing_external_files(proto: onnx.ModelProto, base: Path):
    locations = []
    for tensor in external_data_helper._get_all_tensors(proto):
        if external_data_helper.uses_external_data(tensor):
            info = external_data_helper.ExternalDataInfo(tensor)
            locations.append(info.location)
    uniq = list(dict.fromkeys(locations))
    return uniq, [loc for loc in uniq if not (base / loc).is_file()]


def load_model(path: Union[str, os.PathLike], load_external_data: bool = True) -> LoadedModel:
    """Read an ONNX model and summarise it.

    Parameters
    ----------
    path : str or path-like
        The ``.onnx`` file. External-data files are looked up beside it.
    load_external_data : bool
        Load external weights into memory (needed for parameter statistics and export).

    Returns
    -------
    LoadedModel

    Raises
    ------
    ModelLoadError
        For a missing path, a directory, a file that is not ONNX or is truncated,
        missing external-data files, a single file over 2 GiB, or an empty graph.
    """
    path = user_path(path)
    _check_path(path)
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except DecodeError as exc:
        raise ModelLoadError(
            f"{path} could not be parsed as an ONNX model.",
            f"protobuf said: {exc}. The file is truncated (an interrupted download or copy) or is not an ONNX model.",
            "Download or export it again and check its size; open the .onnx file, not a .pb/.pt/.engine file.",
        ) from None
    except Exception as exc:
        raise ModelLoadError(f"{path} could not be read as ONNX.", f"{type(exc).__name__}: {exc}",
                             "Check that the file is an ONNX model (onnx.load must open it).") from None
    # protobuf happily parses many byte strings as an empty message; real models have a graph.
    if proto.ir_version == 0 and not proto.graph.node and not proto.graph.input:
        raise ModelLoadError(f"{path} does not look like an ONNX model.",
                             "It parsed, but holds no IR version, inputs or nodes: it is probably another file type or truncated.",
                             "Open the exported .onnx file; re-export it if it was cut short.")
    locations, missing = _missing_external_files(proto, path.parent)
    if missing:
        raise ModelLoadError(
            f"{path} refers to external-data files that are missing: {', '.join(missing)}.",
            f"The weights are stored outside the .onnx file and are looked up in {path.parent}.",
            "Copy the data files next to the .onnx file with the same names (or re-export without external data if under 2 GiB).",
        )
    if load_external_data and locations:
        try:
            external_data_helper.load_external_data_for_model(proto, str(path.parent))
        except Exception as exc:
            raise ModelLoadError(f"The external data of {path} could not be loaded.", f"{type(exc).__name__}: {exc}",
                                 "The data file may be truncated; copy or export it again.") from None
    if not proto.graph.node:
        raise ModelLoadError(f"{path} has an empty graph (no nodes).", "There is nothing for TensorRT to build.",
                             "Check the export: the model must contain at least one operator.")
    sha = file_sha256(path, [path.parent / loc for loc in locations])
    return LoadedModel(path=path.resolve(), proto=proto, summary=summarize(proto, path=str(path.resolve()), sha256=sha,
                                                                             external_data=bool(locations)))


def as_loaded(model) -> LoadedModel:
    """``model`` as a :class:`LoadedModel`: the one coercion of a model argument in the package.

    Parameters
    ----------
    model : LoadedModel, onnx.ModelProto, or path
        A LoadedModel is returned as it is; a proto is summarised (its path is the
        graph's name; its SHA-256 is unknown); a path goes
        through :func:`load_model`, so a bad file raises its :class:`ModelLoadError`.

    Raises
    ------
    ModelLoadError
        A bad file, or something that is no model at all.
    """
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, onnx.ModelProto):
        return LoadedModel(Path(model.graph.name or "model.onnx"), model, summarize(model))
    if not isinstance(model, (str, os.PathLike)):
        raise ModelLoadError(f"A {type(model).__name__} is not a model.",
                             "A model is a LoadedModel (trtwidgets.load), an onnx.ModelProto or the path of an "
                             ".onnx file.", "Pass model = trtwidgets.load('model.onnx'), or the path itself.")
    return load_model(model)


def as_model_proto(model) -> onnx.ModelProto:
    """The ``onnx.ModelProto`` of ``model`` (see :func:`as_loaded`; a proto is returned without summarising it)."""
    if isinstance(model, onnx.ModelProto):
        return model
    return as_loaded(model).proto


def _tensor_info(value_info: onnx.ValueInfoProto) -> TensorInfo:
    ttype = value_info.type.tensor_type
    dims: List[Union[int, str]] = []
    if ttype.HasField("shape"):
        for d in ttype.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            else:
                dims.append(d.dim_param or "?")
    return TensorInfo(value_info.name, dtype_name(ttype.elem_type) if ttype.elem_type else "unknown", tuple(dims),
                      has_shape=ttype.HasField("shape"))


def _qdq_summary(graph: onnx.GraphProto, index: GraphIndex) -> QDQSummary:
    counts: Counter = Counter()
    dtypes: Counter = Counter()
    dynamic = []
    for node in graph.node:
        if node.op_type not in _QDQ_OPS or node.domain not in ("", "ai.onnx"):
            continue
        counts[node.op_type] += 1
        scale = node.input[1] if len(node.input) > 1 else ""
        size = index.constant_size(scale) if scale else None
        if size is None:
            if node.op_type == "QuantizeLinear":
                dynamic.append(node.name or node.output[0])
            counts["per_tensor"] += 1
        elif size > 1:
            counts["per_channel"] += 1
        else:
            counts["per_tensor"] += 1
        zp = node.input[2] if len(node.input) > 2 and node.input[2] else ""
        qtype = None
        if zp:
            qtype = index.constant_dtype(zp)
        if qtype is None:
            qtype = attribute(node, "output_dtype", 0) or None
        if qtype is None and node.op_type == "DequantizeLinear":
            qtype = index.constant_dtype(node.input[0])
        dtypes[dtype_name(qtype) if qtype else "uint8"] += 1
    return QDQSummary(quantize=counts["QuantizeLinear"], dequantize=counts["DequantizeLinear"],
                      per_tensor=counts["per_tensor"], per_channel=counts["per_channel"],
                      dtypes=dict(dtypes), dynamic_scale=tuple(dynamic))


def summarize(proto: onnx.ModelProto, path: str = "", sha256: str = "", external_data: bool = False) -> ModelSummary:
    """Summarise an in-memory model (see :class:`ModelSummary`)."""
    graph = proto.graph
    index = GraphIndex(graph)
    init_names = set(index.initializers)
    param_count = 0
    param_bytes = 0
    init_dtypes: Counter = Counter()
    # Paddle and some torch exports keep weights in Constant nodes, not initializers.
    constants = [a.t for n in graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"]
    for t in list(graph.initializer) + constants:
        n = 1
        for d in t.dims:
            n *= d
        param_count += n
        try:
            itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        except (KeyError, TypeError):
            itemsize = 1
        param_bytes += n * itemsize
        init_dtypes[dtype_name(t.data_type)] += 1
    return ModelSummary(
        path=path,
        sha256=sha256,
        ir_version=int(proto.ir_version),
        opsets={o.domain: int(o.version) for o in proto.opset_import},
        producer=" ".join(p for p in (proto.producer_name, proto.producer_version) if p),
        inputs=tuple(_tensor_info(v) for v in graph.input if v.name not in init_names),
        outputs=tuple(_tensor_info(v) for v in graph.output),
        op_counts=dict(Counter(n.op_type for n in graph.node).most_common()),
        node_count=len(graph.node),
        param_count=int(param_count),
        param_bytes=int(param_bytes),
        initializer_dtypes=dict(init_dtypes),
        qdq=_qdq_summary(graph, index),
        external_data=external_data,
    )
