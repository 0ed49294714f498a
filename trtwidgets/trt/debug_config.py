"""The builder settings of a debug build (:mod:`trtwidgets.trt.debug_build`), one function per concern.

Precision constraints, pinned layers and precision flags; profiling, tactic
sources, optimization level and workspace; the optimization profile of dynamic
inputs; the INT8 calibrator; the timing cache. Each takes the ``tensorrt``
module and the objects it configures, and raises a :class:`UserError` for a
setting this TensorRT does not have.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional, Sequence, Tuple, Union, cast

from ..core.common.atomic import write_bytes_atomic
from ..core.common.errors import UserError
from ..core.common.name_patterns import compile_pattern
from .probe import probe

__all__ = ["EXCLUDED_TACTIC_SOURCES", "ShapeSpec", "restricted_tactic_sources", "pin_layer_precisions",
           "profile_triplet", "set_precisions", "set_build_options", "add_profile", "int8_calibrator",
           "attach_timing_cache", "save_timing_cache"]

ShapeSpec = Union[Sequence[int], Tuple[Sequence[int], Sequence[int], Sequence[int]]]

#: Tactic sources left out of builds by default: the GPU machine's cuBLAS/cuDNN are stubs,
#: and TensorRT 10+ dropped them anyway.
EXCLUDED_TACTIC_SOURCES = ("CUBLAS", "CUBLAS_LT", "CUDNN")


def restricted_tactic_sources(trt_module, excluded: Sequence[str] = EXCLUDED_TACTIC_SOURCES) -> Optional[int]:
    """The tactic-source bit mask of every source this TensorRT knows except ``excluded`` (None if no enum)."""
    enum = probe(trt_module, "TacticSource")
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
    a marked output keeps the float32 type :func:`~.debug_build.mark_outputs` gave it.

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
        rx = compile_pattern(pattern, "layer pattern")  # refused when it backtracks without bound ((a+)+)
        if rx is None:
            raise UserError(f"The layer pattern {pattern[:80]!r} is no regular expression.",
                            "Layer patterns are matched with re.fullmatch against TensorRT layer names.",
                            "Fix the expression (escape special characters such as '(' with a backslash).")
        compiled.append((pattern, rx, getattr(trt.DataType, _LAYER_DTYPES[key]), key))
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


def profile_triplet(shape: ShapeSpec) -> Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...]]:
    if len(shape) == 3 and all(isinstance(s, (list, tuple)) for s in shape):
        mn, opt, mx = cast(Tuple[Sequence[int], Sequence[int], Sequence[int]], shape)

        return tuple(int(d) for d in mn), tuple(int(d) for d in opt), tuple(int(d) for d in mx)
    s = tuple(int(d) for d in shape)  # type: ignore[arg-type]
    return s, s, s


def set_precisions(trt, network, config, flags: Sequence[str], precision_constraints: Optional[str],
                    layer_precisions: Optional[Mapping[str, str]]) -> Tuple[Tuple[str, str], ...]:
    """Precision constraints, pinned layers and precision flags on ``config``; the pinned (layer, precision)s."""
    pinned: Tuple[Tuple[str, str], ...] = ()
    if precision_constraints is not None:
        pc = str(precision_constraints).lower()
        if pc not in ("obey", "prefer"):
            raise UserError(f"Unknown precision_constraints {precision_constraints!r}.", None, "Use 'obey' or 'prefer'.")
        flag = probe(trt.BuilderFlag, pc.upper() + "_PRECISION_CONSTRAINTS")
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
    return pinned


def set_build_options(trt, config, builder_optimization_level: Optional[int], workspace_mib: Optional[int]) -> None:
    """Detailed profiling, restricted tactic sources, optimization level and workspace."""
    if hasattr(trt, "ProfilingVerbosity"):
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    mask = restricted_tactic_sources(trt)
    if mask is not None:
        config.set_tactic_sources(mask)
    if builder_optimization_level is not None and hasattr(config, "builder_optimization_level"):
        config.builder_optimization_level = int(builder_optimization_level)
    if workspace_mib is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_mib) << 20)


def add_profile(trt, builder, network, config, shapes, flags: Sequence[str]) -> None:
    """One optimization profile from ``shapes`` when an input is dynamic (also the calibration profile for INT8)."""
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
            mn, opt, mx = profile_triplet(shapes[t.name])
            profile.set_shape(t.name, mn, opt, mx)
    if dynamic:
        config.add_optimization_profile(profile)
        if "int8" in [f.lower() for f in flags] and hasattr(config, "set_calibration_profile"):
            config.set_calibration_profile(profile)


def int8_calibrator(trt, network, shapes, calibrator, calibration_cache):
    """``calibrator``, or a cache-only Entropy2 calibrator reading ``calibration_cache``, or None."""
    if calibrator is None and calibration_cache is not None:
        from .calibrators import make_calibrator

        with open(os.fspath(calibration_cache), "rb") as f:
            data = f.read()
        specs = {}
        for i in range(network.num_inputs):
            t = network.get_input(i)
            shape = profile_triplet(shapes[t.name])[1] if shapes and t.name in shapes else tuple(t.shape)
            specs[t.name] = (shape, "float32")
        calibrator = make_calibrator("entropy2", [], specs, trt, cache_in=data)
    return calibrator


def attach_timing_cache(config, timing_cache, level: Optional[int], collector, notes: list):
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
        if collector is not None:
            with collector.demoting_errors("timing cache: ") as complaints:
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


def save_timing_cache(cache, empty_cache: bytes, timing_cache) -> None:
    """Write the build's timing cache back to ``timing_cache`` when the build added timings to it."""
    if cache is None:
        return
    data = bytes(memoryview(cache.serialize()))
    # An empty cache is not worth a file, and TensorRT 8.6 cannot read its own empty caches back.
    if data and data != empty_cache:
        write_bytes_atomic(timing_cache, data)
