"""Debug builds: intermediate tensors marked as network outputs.

To find the layer where an INT8 engine loses accuracy, both sides must expose
the same intermediate tensors: ONNX Runtime through extra graph outputs
(:func:`trtwidgets.core.accuracy.intermediates.with_intermediate_outputs`), TensorRT through
``network.mark_output`` on the parsed network's ITensors, which this module does
before building. The ONNX parser names each ITensor after its ONNX tensor, so
the names are the same on both sides.

Marking a tensor as an output stops TensorRT from fusing across it, so a debug
engine is slower and can be slightly more accurate than the release engine:
use it to localise error, not to measure it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

from ..core.common.errors import BuildError
from .debug_config import (EXCLUDED_TACTIC_SOURCES, ShapeSpec, add_profile, attach_timing_cache, int8_calibrator,
                           pin_layer_precisions, profile_triplet, restricted_tactic_sources, set_build_options,
                           save_timing_cache, set_precisions)
from .probe import probe

__all__ = ["DebugBuild", "mark_outputs", "build_debug_engine", "network_tensors",
           "pin_layer_precisions", "restricted_tactic_sources", "EXCLUDED_TACTIC_SOURCES"]


@dataclass(frozen=True)
class DebugBuild:
    """An engine built with extra outputs.

    Attributes
    ----------
    engine : bytes
        The serialized engine.
    marked : tuple of str
        Tensors marked as outputs (besides the model's own outputs).
    not_found : tuple of str
        Names asked for that the parsed network does not have (folded constants,
        tensors the parser renamed or removed).
    build_seconds : float
    log : tuple of str
        TensorRT warnings and errors, as text.
    pinned : tuple of (str, str)
        ``(layer name, precision)`` of the layers whose precision was set.
    notes : tuple of str
        What the build did on the user's behalf (renamed dim names, timing cache use).
    """

    engine: bytes
    marked: Tuple[str, ...]
    not_found: Tuple[str, ...]
    build_seconds: float
    log: Tuple[str, ...] = ()
    pinned: Tuple[Tuple[str, str], ...] = ()
    notes: Tuple[str, ...] = ()


def network_tensors(network) -> Dict[str, Any]:
    """Name -> ITensor for every layer output and network input of a parsed network."""
    tensors: Dict[str, Any] = {}

    for i in range(network.num_inputs):
        t = network.get_input(i)
        tensors[t.name] = t
    for li in range(network.num_layers):
        layer = network.get_layer(li)
        for oi in range(layer.num_outputs):
            t = layer.get_output(oi)
            if t is not None:
                tensors.setdefault(t.name, t)
    return tensors


def mark_outputs(network, names: Iterable[str], trt_module=None) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """Mark the named tensors of ``network`` as outputs.

    Network inputs, tensors already marked, and non-float tensors (shape and
    index tensors cannot be compared with the reference) are skipped.

    Returns
    -------
    (marked, not_found) : tuple of str, tuple of str
    """
    tensors = network_tensors(network)
    inputs = {network.get_input(i).name for i in range(network.num_inputs)}
    already = {network.get_output(i).name for i in range(network.num_outputs)}
    float_types = set()
    if trt_module is not None:
        float_types = {getattr(trt_module.DataType, n) for n in ("FLOAT", "HALF", "BF16") if hasattr(trt_module.DataType, n)}
    marked, not_found = [], []
    for name in names:
        t = tensors.get(name)
        if t is None:
            not_found.append(name)
            continue
        if name in inputs or name in already:
            continue
        if float_types and t.dtype not in float_types:
            continue
        if probe(t, "is_shape_tensor", False):
            continue
        network.mark_output(t)
        # Keep the comparison in float32 whatever precision the layer runs in.
        if trt_module is not None:
            t.dtype = trt_module.DataType.FLOAT
        marked.append(name)
        already.add(name)
    return tuple(marked), tuple(not_found)


def build_debug_engine(
    model_path: Union[str, os.PathLike],
    mark: Union[Iterable[str], str] = (),
    shapes: Optional[Mapping[str, ShapeSpec]] = None,
    flags: Sequence[str] = (),
    calibration_cache: Optional[Union[str, os.PathLike]] = None,
    calibrator=None,
    builder_optimization_level: Optional[int] = 1,
    timing_cache: Optional[Union[str, os.PathLike]] = None,
    workspace_mib: Optional[int] = None,
    trt_module=None,
    on_log: Optional[Callable[[str], None]] = None,
    precision_constraints: Optional[str] = None,
    layer_precisions: Optional[Mapping[str, str]] = None,
) -> DebugBuild:
    """Parse an ONNX model, mark intermediates as outputs, and build an engine.

    Parameters
    ----------
    model_path : path
        The ONNX model (the same file the reference side runs).
    mark : iterable of str, or "all"
        Tensors to mark as outputs; ``"all"`` marks every float layer output.
    shapes : mapping, optional
        Input name -> shape, or ``(min, opt, max)``; needed for dynamic inputs.
    flags : sequence of str
        Precision flags, lower-case (``"fp16"``, ``"int8"``, ...).
    calibration_cache : path, optional
        An INT8 calibration cache (TensorRT's, or the toolkit's ``write_cache``);
        used through a cache-only Entropy2 calibrator.
    calibrator : tensorrt.IInt8Calibrator, optional
        A calibrator to use instead (calibrates at the build).
    builder_optimization_level : int, optional
        Low levels (0-1) build much faster; the engine is for error localisation.
    timing_cache : path, optional
        Shared between builds: read when it holds timings, written back when the
        build added some; ignored at optimization level 0, which does not time tactics.
    workspace_mib : int, optional
    precision_constraints : {"obey", "prefer"}, optional
        Make TensorRT honour ``layer_precisions``. Needed to see a precision's
        error at all on small layers: without it TensorRT runs them in FP32 when
        that is as fast, and at optimization level 0 it takes the first tactic
        that runs, whatever its precision.
    layer_precisions : mapping, optional
        Layer-name regex (full match) -> precision (``"fp16"``, ``"int8"``, ...).

    Raises
    ------
    BuildError
        The model does not parse or the build fails (with TensorRT's decisive lines).
    """
    from . import cuda, tensorrt
    from .logger import LogCollector, trt_logger

    trt = trt_module if trt_module is not None else tensorrt()
    cuda.require_gpu()
    collector = LogCollector(on_line=(lambda ln: on_log(ln.format())) if on_log else None)
    logger = trt_logger(collector, trt)
    builder = trt.Builder(logger)
    notes: list = []
    # The parser owns weights the network points to: it must live until the build is done.
    network, parser = _parse_network(trt, builder, logger, os.fspath(model_path), shapes, notes)
    marked, not_found = mark_outputs(network, list(network_tensors(network)) if mark == "all" else list(mark), trt)

    config = builder.create_builder_config()
    pinned = set_precisions(trt, network, config, flags, precision_constraints, layer_precisions)
    set_build_options(trt, config, builder_optimization_level, workspace_mib)
    cache_obj, empty_cache = attach_timing_cache(config, timing_cache, builder_optimization_level, collector, notes)
    add_profile(trt, builder, network, config, shapes, flags)
    if "int8" in [f.lower() for f in flags]:
        calibrator = int8_calibrator(trt, network, shapes, calibrator, calibration_cache)
        if calibrator is not None:
            config.int8_calibrator = calibrator

    engine, seconds = _build(builder, network, config, collector)
    save_timing_cache(cache_obj, empty_cache, timing_cache)
    log = tuple(ln.format() for ln in collector.lines if ln.severity in ("WARNING", "ERROR", "INTERNAL_ERROR"))
    return DebugBuild(engine=engine, marked=marked, not_found=tuple(not_found),
                      build_seconds=seconds, log=log, pinned=pinned, notes=tuple(notes))


def _parse_network(trt, builder, logger, path: str, shapes, notes: list):
    """(network, parser) of the ONNX file at ``path``; BuildError when the parser rejects it."""
    flag_bits = 0
    explicit = probe(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH")
    if explicit is not None and int(trt.__version__.split(".")[0]) < 10:
        flag_bits |= 1 << int(explicit)
    network = builder.create_network(flag_bits)
    parser = trt.OnnxParser(network, logger)
    renamed = _renamed_copy(path, shapes, notes)
    ok = parser.parse(renamed, path) if renamed is not None else parser.parse_from_file(path)
    if not ok:
        errs = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise BuildError(f"TensorRT could not parse {path}.", "The ONNX parser rejected the model.",
                         "Run `trtwidgets lint` on the model for known causes.", log_lines=errs[:8])
    return network, parser


def _build(builder, network, config, collector) -> Tuple[bytes, float]:
    """The serialized engine and the build's seconds; BuildError with TensorRT's decisive lines when it fails."""
    from .logger import decisive_lines

    start = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    seconds = time.perf_counter() - start
    if serialized is None:
        raise BuildError("The TensorRT debug build failed.", "TensorRT returned no engine.",
                         "Read TensorRT's lines below; try fewer marked tensors or another precision.",
                         log_lines=decisive_lines(collector.lines))
    return bytes(memoryview(serialized)), seconds


def _renamed_copy(path: str, shapes: Optional[Mapping[str, ShapeSpec]], notes: list) -> Optional[bytes]:
    """The model's bytes with shared ``dim_param`` names made unique, or None if the file parses as it is.

    The same fix as the release build: TensorRT ties axes with one name (the demo
    cls model's ``[-1, 3, "?", "?"]``) and fails with "Input dimensions with this
    name are inconsistent" for 48x192.
    """
    import onnx

    from ..core.model.dim_names import with_unique_dim_names

    proto = onnx.load(path, load_external_data=False)
    profiles = [{k: profile_triplet(v) for k, v in shapes.items()}] if shapes else None
    copy, shared = with_unique_dim_names(proto, profiles)
    if copy is None:
        return None
    for sh in shared:
        notes.append(f"dim name {sh.describe()} renamed " + ", ".join(f"{i}[{a}] -> {n!r}" for i, a, n in sh.renames)
                     + " for TensorRT (the model file is unchanged).")
    return copy.SerializeToString()
