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
import re
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

from ..core.common.errors import BuildError, UserError
from ..core.common.atomic import write_bytes_atomic

__all__ = ["DebugBuild", "mark_outputs", "build_debug_engine", "engine_intermediates", "network_tensors",
           "pin_layer_precisions", "restricted_tactic_sources"]

#: Tactic sources left out of builds by default: the GPU machine's cuBLAS/cuDNN are stubs,
#: and TensorRT 10+ dropped them anyway.
EXCLUDED_TACTIC_SOURCES = ("CUBLAS", "CUBLAS_LT", "CUDNN")

ShapeSpec = Union[Sequence[int], Tuple[Sequence[int], Sequence[int], Sequence[int]]]


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


def network_tensors(network) -> Dict[str, object]:
    """Name -> ITensor for every layer output and network input of a parsed network."""
    tensors: Dict[str, object] = {}
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
        if getattr(t, "is_shape_tensor", False):
            continue
        network.mark_output(t)
        # Keep the comparison in float32 whatever precision the layer runs in.
        if trt_module is not None:
            t.dtype = trt_module.DataType.FLOAT
        marked.append(name)
        already.add(name)
    return tuple(marked), tuple(not_found)


def restricted_tactic_sources(trt_module, excluded: Sequence[str] = EXCLUDED_TACTIC_SOURCES) -> Optional[int]:
    """The tactic-source bit mask of every source this TensorRT knows except ``excluded`` (None if no enum)."""
    enum = getattr(trt_module, "TacticSource", None)
    if enum is None:
        return None
    mask = 0
    for name, member in enum.__members__.items():
        if name not in excluded:
            mask |= 1 << int(member)
    return mask


_LAYER_DTYPES = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BF16", "int8": "INT8", "fp8": "FP8"}


def pin_layer_precisions(network, layer_precisions: Mapping[str, str], trt_module) -> Tuple[Tuple[str, str], ...]:
    """Set ``layer.precision`` on the layers whose names fully match a regex of ``layer_precisions``.

    Only layers that compute float tensors are pinned (shape and index
    arithmetic stays as TensorRT chose). Output types are left to TensorRT, so
    a marked output keeps the float32 type :func:`mark_outputs` gave it.

    Returns
    -------
    tuple of (layer name, precision)

    Raises
    ------
    UserError
        An unknown precision, or a pattern that matches no layer.
    """
    trt = trt_module
    compiled = []
    for pattern, prec in layer_precisions.items():
        key = str(prec).lower()
        if key not in _LAYER_DTYPES or not hasattr(trt.DataType, _LAYER_DTYPES[key]):
            raise UserError(f"Cannot pin layers to {prec!r}.", f"TensorRT {trt.__version__} layers take "
                            + ", ".join(k for k, v in _LAYER_DTYPES.items() if hasattr(trt.DataType, v)) + ".",
                            "Use one of those precisions.")
        compiled.append((pattern, re.compile(pattern), getattr(trt.DataType, _LAYER_DTYPES[key]), key))
    floats = {getattr(trt.DataType, n) for n in ("FLOAT", "HALF", "BF16") if hasattr(trt.DataType, n)}
    hits = {pattern: 0 for pattern, _, _, _ in compiled}
    pinned = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        for pattern, rx, dt, key in compiled:
            if not rx.fullmatch(layer.name):
                continue
            hits[pattern] += 1
            outs = [layer.get_output(j) for j in range(layer.num_outputs)]
            if any(o is None or o.dtype not in floats for o in outs):
                continue
            if not hasattr(layer, "precision"):
                raise UserError(f"TensorRT {trt.__version__} cannot pin layer precisions.",
                                "Layer precision was removed with strong typing (TensorRT 11).",
                                "Cast the ONNX model instead, or export Q/DQ for INT8.")
            layer.precision = dt
            pinned.append((layer.name, key))
            break
    unmatched = [p for p, n in hits.items() if n == 0]
    if unmatched:
        names = [network.get_layer(i).name for i in range(network.num_layers)]
        raise UserError(f"Layer pattern(s) {', '.join(map(repr, unmatched))} match no layer of the parsed network.",
                        f"Patterns are regular expressions matched against the whole TensorRT layer name "
                        f"(e.g. {', '.join(map(repr, names[:4]))}).", "Fix the pattern, e.g. 'conv.*'.")
    return tuple(pinned)


def _profile_triplet(shape: ShapeSpec) -> Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...]]:
    if len(shape) == 3 and all(isinstance(s, (list, tuple)) for s in shape):
        mn, opt, mx = shape  # type: ignore[misc]
        return tuple(int(d) for d in mn), tuple(int(d) for d in opt), tuple(int(d) for d in mx)
    s = tuple(int(d) for d in shape)  # type: ignore[arg-type]
    return s, s, s


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
    if trt_module is None:
        from . import tensorrt

        trt_module = tensorrt()
    trt = trt_module
    from . import cuda

    cuda.require_gpu()
    from .logger import LogCollector, decisive_lines, trt_logger

    collector = LogCollector(on_line=(lambda ln: on_log(ln.format())) if on_log else None)
    logger = trt_logger(collector, trt)
    builder = trt.Builder(logger)
    flag_bits = 0
    explicit = getattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH", None)
    if explicit is not None and int(trt.__version__.split(".")[0]) < 10:
        flag_bits |= 1 << int(explicit)
    network = builder.create_network(flag_bits)
    parser = trt.OnnxParser(network, logger)
    path = os.fspath(model_path)
    notes = []
    renamed = _renamed_copy(path, shapes, notes)
    ok = parser.parse(renamed, path) if renamed is not None else parser.parse_from_file(path)
    if not ok:
        errs = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise BuildError(f"TensorRT could not parse {path}.", "The ONNX parser rejected the model.",
                         "Run `trtwidgets lint` on the model for known causes.", log_lines=errs[:8])
    if mark == "all":
        names = [n for n in network_tensors(network)]
    else:
        names = list(mark)
    marked, not_found = mark_outputs(network, names, trt)

    config = builder.create_builder_config()
    pinned: Tuple[Tuple[str, str], ...] = ()
    if precision_constraints is not None:
        pc = str(precision_constraints).lower()
        if pc not in ("obey", "prefer"):
            raise UserError(f"Unknown precision_constraints {precision_constraints!r}.", None, "Use 'obey' or 'prefer'.")
        flag = getattr(trt.BuilderFlag, pc.upper() + "_PRECISION_CONSTRAINTS", None)
        if flag is None:
            raise UserError(f"TensorRT {trt.__version__} has no precision constraints.",
                            "Strongly typed TensorRT (11) takes precisions from the model's types and Q/DQ nodes.",
                            "Cast the ONNX model, or export Q/DQ for INT8, instead of pinning layers.")
        config.set_flag(flag)
    if layer_precisions:
        if precision_constraints is None:
            raise UserError("layer_precisions without precision_constraints.",
                            "TensorRT ignores layer precisions unless told to obey or prefer them.",
                            "Pass precision_constraints='obey' (fail if impossible) or 'prefer'.")
        pinned = pin_layer_precisions(network, layer_precisions, trt)
    for f in flags:
        attr = {"fp16": "FP16", "int8": "INT8", "bf16": "BF16", "fp8": "FP8", "tf32": "TF32"}.get(f.lower())
        if attr is None or not hasattr(trt.BuilderFlag, attr):
            raise UserError(f"TensorRT {trt.__version__} has no precision flag {f!r}.", None,
                            "Use the flags trtwidgets.trt.features() lists.")
        config.set_flag(getattr(trt.BuilderFlag, attr))
    if "tf32" not in [f.lower() for f in flags] and hasattr(trt.BuilderFlag, "TF32"):
        # TensorRT enables TF32 by default; a debug build compares against FP32 and must not add its own error.
        config.clear_flag(trt.BuilderFlag.TF32)
    if hasattr(trt, "ProfilingVerbosity"):
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    mask = restricted_tactic_sources(trt)
    if mask is not None:
        config.set_tactic_sources(mask)
    if builder_optimization_level is not None and hasattr(config, "builder_optimization_level"):
        config.builder_optimization_level = int(builder_optimization_level)
    if workspace_mib is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_mib) << 20)
    cache_obj, empty_cache = _attach_timing_cache(config, timing_cache, builder_optimization_level, collector, notes)

    dynamic = False
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):
        t = network.get_input(i)
        if any(d < 0 for d in t.shape):
            dynamic = True
            if not shapes or t.name not in shapes:
                raise UserError(f"Input {t.name!r} has dynamic shape {list(t.shape)}.",
                                "A build needs a shape range for every dynamic input.",
                                f"Pass shapes={{{t.name!r}: (1, 3, 48, 192)}} or a (min, opt, max) triple.")
            mn, opt, mx = _profile_triplet(shapes[t.name])
            profile.set_shape(t.name, mn, opt, mx)
    if dynamic:
        config.add_optimization_profile(profile)
        if "int8" in [f.lower() for f in flags] and hasattr(config, "set_calibration_profile"):
            config.set_calibration_profile(profile)

    if "int8" in [f.lower() for f in flags]:
        if calibrator is None and calibration_cache is not None:
            from .calibrators import make_calibrator

            with open(os.fspath(calibration_cache), "rb") as f:
                data = f.read()
            specs = {}
            for i in range(network.num_inputs):
                t = network.get_input(i)
                shape = _profile_triplet(shapes[t.name])[1] if shapes and t.name in shapes else tuple(t.shape)
                specs[t.name] = (shape, "float32")
            calibrator = make_calibrator("entropy2", [], specs, trt, cache_in=data)
        if calibrator is not None:
            config.int8_calibrator = calibrator

    start = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    seconds = time.perf_counter() - start
    if serialized is None:
        raise BuildError("The TensorRT debug build failed.", "TensorRT returned no engine.",
                         "Read TensorRT's lines below; try fewer marked tensors or another precision.",
                         log_lines=decisive_lines(collector.lines))
    if cache_obj is not None:
        data = bytes(memoryview(cache_obj.serialize()))
        # An empty cache is not worth a file, and TensorRT 8.6 cannot read its own empty caches back.
        if data and data != empty_cache:
            write_bytes_atomic(timing_cache, data)
    log = tuple(ln.format() for ln in collector.lines if ln.severity in ("WARNING", "ERROR", "INTERNAL_ERROR"))
    return DebugBuild(engine=bytes(memoryview(serialized)), marked=marked, not_found=tuple(not_found),
                      build_seconds=seconds, log=log, pinned=pinned, notes=tuple(notes))


def _renamed_copy(path: str, shapes: Optional[Mapping[str, ShapeSpec]], notes: list) -> Optional[bytes]:
    """The model's bytes with shared ``dim_param`` names made unique, or None if the file parses as it is.

    The same fix as the release build: TensorRT ties axes with one name (the demo
    cls model's ``[-1, 3, "?", "?"]``) and fails with "Input dimensions with this
    name are inconsistent" for 48x192.
    """
    import onnx

    from ..core.model.dim_names import with_unique_dim_names

    proto = onnx.load(path, load_external_data=False)
    profiles = [{k: _profile_triplet(v) for k, v in shapes.items()}] if shapes else None
    copy, shared = with_unique_dim_names(proto, profiles)
    if copy is None:
        return None
    for sh in shared:
        notes.append(f"dim name {sh.describe()} renamed " + ", ".join(f"{i}[{a}] -> {n!r}" for i, a, n in sh.renames)
                     + " for TensorRT (the model file is unchanged).")
    return copy.SerializeToString()


def _attach_timing_cache(config, timing_cache, level: Optional[int], collector, notes: list):
    """Attach the timing cache as the release build does: ``(cache or None, empty cache bytes)``.

    Level 0 does not time tactics (nothing read or written); a missing or empty
    file starts a new cache; a file TensorRT cannot read is noted and replaced
    after the build, never fed to the builder (TensorRT 8.6 logs ``[E] ... Myelin``
    and "The timing cache will not be used!" for those).
    """
    if timing_cache is None or not hasattr(config, "create_timing_cache"):
        return None, b""
    from .build import timing_cache_plan

    tc = os.fspath(timing_cache)
    empty = config.create_timing_cache(b"")
    empty_bytes = bytes(memoryview(empty.serialize())) if empty is not None else b""
    data = b""
    if os.path.isfile(tc):
        with open(tc, "rb") as f:
            data = f.read()
    action, why = timing_cache_plan(level, data, empty_bytes)
    notes.append(f"timing cache {tc}: {why}")
    if action == "off":
        return None, empty_bytes
    cache = None
    if action == "load":
        demote = getattr(collector, "demoting_errors", None)
        if demote is not None:
            with demote("timing cache: ") as complaints:
                cache = config.create_timing_cache(data)
        else:
            complaints = []
            cache = config.create_timing_cache(data)
        if cache is None or complaints:
            notes.append(f"timing cache {tc} cannot be read by this TensorRT/GPU; a new one replaces it.")
            cache = None
    if cache is None:
        cache = empty if empty is not None else config.create_timing_cache(b"")
    ok = config.set_timing_cache(cache, False)
    if ok is False:
        notes.append(f"timing cache {tc} does not match this TensorRT/GPU; building without it.")
        return None, empty_bytes
    return cache, empty_bytes


def engine_intermediates(model_path: Union[str, os.PathLike], feeds: Mapping[str, "object"],
                         names: Optional[Sequence[str]] = None, **build_kwargs):
    """Build a debug engine that exposes ``names`` and run ``feeds`` through it.

    Parameters
    ----------
    model_path : path
    feeds : mapping
        Input name -> array (their shapes are the build's static shapes unless
        ``shapes=`` is given).
    names : sequence of str, optional
        Tensors to expose; default every float intermediate
        (:func:`trtwidgets.core.accuracy.intermediates.float_intermediates`).
    **build_kwargs
        Passed to :func:`build_debug_engine` (``flags``, ``calibration_cache``, ...).

    Returns
    -------
    (outputs, build) : dict, DebugBuild
        Every engine output (the model's and the marked ones), and the build.
    """
    import numpy as np
    import onnx

    from .runner import EngineRunner

    if names is None:
        from ..core.accuracy.intermediates import float_intermediates

        names = float_intermediates(onnx.load(os.fspath(model_path), load_external_data=False))
    build_kwargs.setdefault("shapes", {k: tuple(np.shape(v)) for k, v in feeds.items()})
    dbg = build_debug_engine(model_path, mark=list(names), **build_kwargs)
    with EngineRunner(dbg.engine) as runner:
        outputs = runner.infer(feeds)
    return outputs, dbg
