"""TensorRT's layer information: a network's layers before it is built, the engine inspector's JSON after.

:func:`engine_inspector_json` returns TensorRT's engine-inspector JSON with an
execution context attached at concrete input shapes: for an engine with
dynamic shapes the inspector otherwise reports every tensor's format and type
as ``N/A due to dynamic shapes``. By default the shapes are the opt shapes of
the chosen profile, the shapes the engine was tuned (and calibrated) for.

:func:`network_layers` lists the parsed network's layers with their types and
precisions before the build: the names that per-layer precision overrides match.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from .probe import enum_name, probe

Shape = Tuple[int, ...]


def _trt(trt_module):
    if trt_module is not None:
        return trt_module
    from . import tensorrt

    return tensorrt()


def network_layers(network, trt_module=None) -> List[dict]:
    """The layers of a parsed ``INetworkDefinition`` as plain dicts.

    Each dict has ``index``, ``name``, ``type``, ``precision``, ``precision_is_set``,
    ``inputs`` (tensor names) and ``outputs`` (``name``, ``dtype``, ``shape``,
    ``type_is_set``); attributes this TensorRT lacks (TensorRT 11 has no layer
    precision) are left out.
    """
    layers = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        d = {"index": i, "name": layer.name, "type": enum_name(layer.type)}
        if hasattr(layer, "precision"):
            d["precision"] = enum_name(layer.precision)
            d["precision_is_set"] = bool(probe(layer, "precision_is_set", False))
        d["inputs"] = [layer.get_input(j).name if layer.get_input(j) is not None else None
                       for j in range(layer.num_inputs)]
        outs = []
        for j in range(layer.num_outputs):
            t = layer.get_output(j)
            o = {"name": t.name, "dtype": enum_name(t.dtype), "shape": [int(x) for x in t.shape]}
            if hasattr(layer, "output_type_is_set"):
                o["type_is_set"] = bool(layer.output_type_is_set(j))
            outs.append(o)
        d["outputs"] = outs
        layers.append(d)
    return layers


def input_names(engine, trt_module=None) -> List[str]:
    """Names of an engine's input tensors, in binding order."""
    trt = _trt(trt_module)
    if hasattr(engine, "num_io_tensors"):
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        return [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
    return [engine.get_binding_name(i) for i in range(engine.num_bindings) if engine.binding_is_input(i)]


def profile_shapes(engine, profile: int = 0, trt_module=None) -> Dict[str, Tuple[Shape, Shape, Shape]]:
    """Input name -> (min, opt, max) of one optimization profile (static inputs: their shape three times)."""
    trt = _trt(trt_module)
    out = {}
    for name in input_names(engine, trt):
        if hasattr(engine, "get_tensor_profile_shape"):
            shape = tuple(engine.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                lo, opt, hi = engine.get_tensor_profile_shape(name, profile)
            else:
                lo = opt = hi = shape
        else:
            idx = engine.get_binding_index(name)
            shape = tuple(engine.get_binding_shape(idx))
            if any(d < 0 for d in shape):
                lo, opt, hi = engine.get_profile_shape(profile, idx)
            else:
                lo = opt = hi = shape
        out[name] = (tuple(int(d) for d in lo), tuple(int(d) for d in opt), tuple(int(d) for d in hi))
    return out


def _io_names(engine, trt) -> List[str]:
    if hasattr(engine, "num_io_tensors"):
        return [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    return [engine.get_binding_name(i) for i in range(engine.num_bindings)]


def _context_shape(engine, ctx, name: str) -> Shape:
    if hasattr(ctx, "get_tensor_shape"):
        return tuple(int(d) for d in ctx.get_tensor_shape(name))
    return tuple(int(d) for d in ctx.get_binding_shape(engine.get_binding_index(name)))


def execution_context_at(engine, shapes: Optional[Mapping[str, Sequence[int]]] = None, profile: int = 0,
                         trt_module=None):
    """An execution context with concrete input shapes (default: ``profile``'s opt shapes), shapes resolved.

    TensorRT >= 8.5 resolves shapes lazily after ``set_input_shape``; the engine
    inspector reads resolved ones. So the profile is selected explicitly, every
    input shape is set, ``infer_shapes()`` runs, and every I/O tensor's shape is
    read back; an input left unspecified raises instead of yielding
    ``N/A due to dynamic shapes`` silently.
    """
    from ..core.common.errors import BuildError

    trt = _trt(trt_module)
    if shapes is None:
        shapes = {name: opt for name, (_, opt, _) in profile_shapes(engine, profile, trt).items()}
    ctx = engine.create_execution_context()
    if ctx is None:
        raise BuildError("TensorRT could not create an execution context for the engine.",
                         "Usually the GPU is out of memory.", "Free GPU memory and try again.")
    nprof = int(probe(engine, "num_optimization_profiles", 1) or 1)
    if profile or nprof > 1:
        if hasattr(ctx, "set_optimization_profile_async"):
            from . import cuda

            with cuda.Stream() as stream:
                ctx.set_optimization_profile_async(int(profile), stream.handle)
                stream.synchronize()
        else:
            ctx.active_optimization_profile = int(profile)
    for name, shape in shapes.items():
        shape = tuple(int(d) for d in shape)
        if hasattr(ctx, "set_input_shape"):
            ok = ctx.set_input_shape(name, shape)
        else:
            ok = ctx.set_binding_shape(engine.get_binding_index(name), shape)
        if ok is False:
            raise BuildError(f"The engine does not accept shape {list(shape)} for input {name!r} in profile {profile}.",
                             "The shape is outside the profile's [min, max] range.",
                             "Inspect at a shape inside the profile, e.g. its opt shape (the default).")
    missing = list(ctx.infer_shapes()) if hasattr(ctx, "infer_shapes") else []
    if not missing and probe(ctx, "all_binding_shapes_specified", True) is False:
        missing = [n for n in input_names(engine, trt) if any(d < 0 for d in _context_shape(engine, ctx, n))]
    if missing:
        raise BuildError(f"Input shape(s) of {', '.join(map(repr, missing))} are not specified for the inspector.",
                         f"Shapes given: { {k: list(v) for k, v in shapes.items()} }.",
                         "Give a concrete shape for every dynamic input (default: the profile's opt shapes).")
    # Reading every I/O shape resolves them (outputs with data-dependent shapes stay -1; that is fine here).
    for name in _io_names(engine, trt):
        _context_shape(engine, ctx, name)
    return ctx


_NA = "N/A due to dynamic shapes"


def _run_once(engine, ctx, trt) -> list:
    """Enqueue one run on zeros at the context's shapes; returns the device buffers (free them after)."""
    import numpy as np

    from . import cuda
    from .dtypes import nptype

    buffers = []
    for name in _io_names(engine, trt):
        shape = _context_shape(engine, ctx, name)
        dtype = engine.get_tensor_dtype(name) if hasattr(engine, "get_tensor_dtype") else \
            engine.get_binding_dtype(engine.get_binding_index(name))
        nbytes = int(np.prod(shape, dtype=np.int64)) * nptype(trt, dtype).itemsize
        buf = cuda.DeviceBuffer(nbytes)
        buffers.append(buf)
        if hasattr(ctx, "set_tensor_address"):
            ctx.set_tensor_address(name, buf.ptr)
    with cuda.Stream() as stream:
        if hasattr(ctx, "execute_async_v3"):
            ctx.execute_async_v3(stream.handle)
        else:
            ctx.execute_async_v2([b.ptr for b in buffers], stream.handle)
        stream.synchronize()
    return buffers


def inspector_json_for(engine, shapes: Optional[Mapping[str, Sequence[int]]] = None, profile: int = 0,
                       trt_module=None) -> str:
    """Engine-inspector JSON of a deserialized engine (see :func:`engine_inspector_json`)."""
    trt = _trt(trt_module)
    dynamic = any(any(d < 0 for d in _engine_shape(engine, n)) for n in input_names(engine, trt))
    if not dynamic:
        inspector = engine.create_engine_inspector()
        text = inspector.get_engine_information(trt.LayerInformationFormat.JSON)
        del inspector
        return text
    ctx = execution_context_at(engine, shapes, profile, trt)
    buffers: list = []
    try:
        # The inspector reads formats from the context; ctx stays referenced until the JSON is out.
        inspector = engine.create_engine_inspector()
        inspector.execution_context = ctx
        text = inspector.get_engine_information(trt.LayerInformationFormat.JSON)
        if _NA in text:
            # Seen on TensorRT 8.6 (H200): shapes set on the context but not yet used by a run. One run
            # on zeros makes the context's shapes those of an executed inference, as in trtexec.
            try:
                buffers = _run_once(engine, ctx, trt)
                inspector.execution_context = ctx
                text = inspector.get_engine_information(trt.LayerInformationFormat.JSON)
            except Exception:
                pass
        del inspector
    finally:
        for buf in buffers:
            buf.free()
        del ctx
    return text


def _engine_shape(engine, name: str) -> Shape:
    if hasattr(engine, "get_tensor_shape"):
        return tuple(int(d) for d in engine.get_tensor_shape(name))
    return tuple(int(d) for d in engine.get_binding_shape(engine.get_binding_index(name)))


def engine_inspector_json(engine_path_or_bytes: Any, shapes
: Optional[Mapping[str, Sequence[int]]] = None,
                          profile: int = 0, trt_module=None) -> str:
    """TensorRT's engine-inspector JSON for an engine, with an execution context attached.

    Parameters
    ----------
    engine_path_or_bytes : str, path-like, bytes or ICudaEngine
        A serialized engine file, its bytes, or a deserialized engine.
    shapes : mapping, optional
        Input name -> concrete shape. Default: ``profile``'s opt shapes.
    profile : int
        Optimization profile to inspect.

    Returns
    -------
    str
        JSON text. It may hold raw control characters in ``Metadata``:
        parse with ``json.loads(text, strict=False)``.
        Per-layer detail needs an engine built with ``ProfilingVerbosity.DETAILED``
        (every trtwidgets build is).
    """
    import os

    trt = _trt(trt_module)
    if hasattr(engine_path_or_bytes, "create_engine_inspector"):
        return inspector_json_for(engine_path_or_bytes, shapes, profile, trt)
    if isinstance(engine_path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(engine_path_or_bytes)
    else:
        with open(os.fspath(engine_path_or_bytes), "rb") as f:

            data = f.read()
    from .logger import LogCollector, trt_logger

    collector = LogCollector(keep="WARNING")
    logger = trt_logger(collector, trt)
    runtime = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(data)
    if engine is None:
        from ..core.common.errors import InspectorError
        from .logger import decisive_lines

        raise InspectorError("TensorRT could not deserialize the engine.",
                             " / ".join(decisive_lines(collector.lines)) or "The file is not an engine of this TensorRT version.",
                             "Engines only load in the TensorRT version (and usually the GPU) that built them.")
    try:
        return inspector_json_for(engine, shapes, profile, trt)
    finally:
        # TensorRT wants the engine destroyed before the runtime that made it.
        del engine
        del runtime
