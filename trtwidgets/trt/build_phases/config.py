"""The config phase: precision flags and constraints, per-layer precisions, tactic sources, progress monitor.

Only what the installed TensorRT has is used: a flag or feature it lacks is
refused with the explanation from :func:`trtwidgets.trt.features.features`.
"""

from __future__ import annotations

import difflib
import os
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ...core.common.errors import RecipeError, TensorRTUnavailable
from .. import major_version, version_of
from ..progress import trt_progress_monitor
from .state import BuildState
from ..probe import enum_name, probe

#: Tactic sources backed by cuBLAS / cuDNN; off when TRTWIDGETS_NO_CUBLAS_CUDNN=1.
CUBLAS_CUDNN = ("CUBLAS", "CUBLAS_LT", "CUDNN")

_LAYER_DTYPES = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BF16", "int8": "INT8", "fp8": "FP8"}
# Only layers computing on floating-point tensors can be pinned; shape and index math stays as it is.
_PINNABLE = ("FLOAT", "HALF", "BF16", "INT8", "FP8")


def tactic_source_names(requested: Optional[Iterable[str]] = None, env: Optional[Mapping[str, str]] = None
                        ) -> Tuple[Optional[Tuple[str, ...]], Tuple[str, ...]]:
    """Which tactic sources to enable exactly, and which to drop from TensorRT's default.

    Returns
    -------
    (exact, drop)
        ``exact``: the caller's names, upper-case, or None for TensorRT's default; ``drop``:
        cuBLAS/cuLASLt/cuDNN when ``TRTWIDGETS_NO_CUBLAS_CUDNN=1``, else empty.
    """
    env = os.environ if env is None else env
    exact = None if requested is None else tuple(str(s).upper() for s in requested)
    drop: Tuple[str, ...] = ()
    if env.get("TRTWIDGETS_NO_CUBLAS_CUDNN", "").strip().lower() in ("1", "true", "yes", "on"):
        drop = CUBLAS_CUDNN
    if exact is not None:
        exact = tuple(s for s in exact if s not in drop)
    return exact, drop


def match_layer_precisions(layer_names: Sequence[str], overrides: Sequence) -> Tuple[Dict[str, str], List[str]]:
    """Layer name -> precision for every override (the last matching override wins), and unmatched patterns."""
    chosen: Dict[str, str] = {}
    unmatched = []
    for lp in overrides:
        hits = [n for n in layer_names if lp.matches(n)]
        if not hits:
            unmatched.append(lp.pattern)
        for n in hits:
            chosen[n] = lp.precision
    return chosen, unmatched


def _unmatched_error(unmatched: Sequence[str], names: Sequence[str]) -> RecipeError:
    hints = []
    for p in unmatched[:3]:
        close = difflib.get_close_matches(p, names, n=3, cutoff=0.5)
        if close:
            hints.append(f"{p!r}: did you mean {', '.join(map(repr, close))}?")
    return RecipeError(
        f"Layer-precision pattern(s) {', '.join(map(repr, unmatched))} match no layer of the parsed network.",
        "Patterns are matched against TensorRT's layer names (usually the ONNX node names). " + " ".join(hints),
        f"Pick names from the network's layer list ({len(names)} layers, e.g. {', '.join(map(repr, names[:4]))}), "
        "or use a regex.")


def _features(trt):
    try:
        from ..features import features
    except ImportError:  # pragma: no cover - features.py is part of the package
        return None
    return features(trt)


def configure(state: BuildState) -> None:
    """Create the builder config from the recipe's precision and builder settings.

    Precision flags and constraints, per-layer precisions, tactic sources, DETAILED
    profiling, optimization level and workspace; each is refused with an
    explanation where this TensorRT lacks it.
    """
    trt, recipe = state.trt, state.recipe
    feats = _features(trt)
    config = state.builder.create_builder_config()
    state.config = config
    available = set(feats.precision_flags) if feats is not None else {
        f.lower() for f in trt.BuilderFlag.__members__}
    expl = dict(feats.explanations) if feats is not None else {}
    for flag in recipe.flags:
        if flag not in available or not hasattr(trt.BuilderFlag, flag.upper()):
            raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no {flag.upper()} builder flag.",
                                      expl.get(flag, "This TensorRT does not offer it."),
                                      "Remove the flag from the recipe" + (
                                          "; on TensorRT 11 the model's types decide precision (export a Q/DQ or "
                                          "FP16 ONNX model)." if major_version(trt) >= 11 else "."))
        config.set_flag(getattr(trt.BuilderFlag, flag.upper()))
    # Like Polygraphy: TF32 only when asked for, so that an "FP32" build is FP32.
    if "tf32" not in recipe.flags and hasattr(trt.BuilderFlag, "TF32"):
        config.clear_flag(trt.BuilderFlag.TF32)
    if recipe.precision_constraints != "none":
        name = {"obey": "OBEY_PRECISION_CONSTRAINTS", "prefer": "PREFER_PRECISION_CONSTRAINTS"}[recipe.precision_constraints]
        if not hasattr(trt.BuilderFlag, name):
            raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no precision constraints.",
                                      expl.get("precision_constraints", "They were removed with strong typing."),
                                      "Set precision_constraints to 'none'.")
        config.set_flag(getattr(trt.BuilderFlag, name))
    pin_layer_precisions(state)
    set_tactic_sources(state)
    if hasattr(trt, "ProfilingVerbosity"):
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    if recipe.builder_optimization_level is not None:
        if not hasattr(config, "builder_optimization_level"):
            raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no builder optimization level.",
                                      fix="Set builder_optimization_level to null.")
        config.builder_optimization_level = int(recipe.builder_optimization_level)
    if recipe.workspace_mib is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(recipe.workspace_mib) << 20)


def pin_layer_precisions(state: BuildState) -> None:
    """Pin the recipe's per-layer precisions on the parsed network (refusing patterns that match no layer)."""
    trt, recipe = state.trt, state.recipe
    if not recipe.layer_precisions:
        return
    names = [d["name"] for d in state.layers]
    chosen, unmatched = match_layer_precisions(names, recipe.layer_precisions)
    if unmatched:
        raise _unmatched_error(unmatched, names)
    if recipe.precision_constraints == "none":
        state.note("WARNING", "per-layer precisions are set but precision_constraints is 'none': TensorRT ignores "
                   "them (choose 'prefer' or 'obey').")
    pinned = 0
    for i in range(state.network.num_layers):
        layer = state.network.get_layer(i)
        prec = chosen.get(layer.name)
        if prec is None:
            continue
        if not hasattr(layer, "precision"):
            raise TensorRTUnavailable(f"TensorRT {version_of(trt)} cannot pin layer precisions.",
                                      "Layer precision was removed with strong typing (TensorRT 11).",
                                      "Cast the ONNX model instead, or export Q/DQ for INT8.")
        outs = [layer.get_output(j) for j in range(layer.num_outputs)]
        if any(enum_name(o.dtype) not in _PINNABLE for o in outs):
            state.note("INFO", f"layer {layer.name!r} is not pinned to {prec}: it computes integer/bool tensors.")
            continue
        dt = probe(trt.DataType, _LAYER_DTYPES[prec])
        if dt is None:
            raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no {prec.upper()} data type for layer {layer.name!r}.",
                                      f"Its data types are {', '.join(trt.DataType.__members__)}.",
                                      "Pin the layer to another precision (BF16 needs TensorRT 9 or later).")
        layer.precision = dt
        if prec not in ("int8", "fp8"):
            # Float pins fix the output type too, so that the next layer reads what this one computed.
            # Quantized pins leave outputs to TensorRT: an INT8 output would force quantization downstream.
            for j in range(layer.num_outputs):
                layer.set_output_type(j, dt)
        pinned += 1
    state.note("INFO", f"pinned the precision of {pinned} layer(s).")


def set_tactic_sources(state: BuildState) -> None:
    """Enable exactly the asked-for tactic sources, or TensorRT's default minus the dropped ones."""
    trt, config = state.trt, state.config
    if not hasattr(trt, "TacticSource"):
        return
    exact, drop = tactic_source_names(state.tactic_sources)
    members = trt.TacticSource.__members__
    if exact is not None:
        unknown = [s for s in exact if s not in members]
        if unknown:
            raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no tactic source(s) {', '.join(unknown)}.",
                                      f"It has {', '.join(members)}.", "Choose among those.")
        mask = 0
        for s in exact:
            mask |= 1 << int(members[s])
    else:
        mask = int(config.get_tactic_sources())
    for s in drop:
        if s in members:
            mask &= ~(1 << int(members[s]))
    if exact is not None or drop:
        config.set_tactic_sources(mask)
        on = [s for s in members if mask & (1 << int(members[s]))]
        state.note("INFO", f"tactic sources: {', '.join(on) or 'none'}")


def attach_progress_monitor(state: BuildState) -> None:
    """Report build phases through TensorRT's IProgressMonitor (TensorRT 10+; 8.6 reports through its log)."""
    monitor = trt_progress_monitor(state.progress, state.trt)
    if monitor is not None:
        state.config.progress_monitor = monitor
        state.monitor = monitor
