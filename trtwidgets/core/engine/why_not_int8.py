"""Why a layer does not run in INT8: the most likely cause, as a code and a sentence.

For each engine layer that runs in another precision, the causes are tried from
the most to the least certain; the first that applies is reported:

======================== ==================================================================
code                     meaning
======================== ==================================================================
PRECISION_UNKNOWN        the inspector gave no formats (dynamic shapes, no context)
NOT_FLOAT                the layer works on Int32/Int64/Bool tensors (shapes, indices)
INT8_NOT_ENABLED         the build's flags lack INT8 (from the recipe; or guessed when no
                         layer of the engine runs INT8 and no recipe was given)
PRECISION_CONSTRAINT     a recipe override pins a fused node to another precision
NO_INT8_IMPLEMENTATION   the layer type has no INT8 kernel (table :data:`NO_INT8_TYPES`)
NO_SCALE                 an input or output has no scale: missing from the calibration cache
                         (implicit) or not surrounded by Q/DQ (explicit); tensors named. For an
                         explicit engine without the Q/DQ model, the quantized tensors are read
                         from the engine itself (its Q/DQ layers and INT8 tensors)
KEPT_FLOAT_BY_EXPORT     (explicit) the Q/DQ export left the layer's node in high precision on
                         purpose (a placement rule, numbered as in trtwidgets.core.qdq.placement);
                         given as ``kept_float`` (the export's Skip records)
QDQ_NOT_FUSED            (explicit) Q/DQ surround the layer, yet TensorRT found no INT8 fusion
                         for it and ran it in floating point between its Q/DQ
FIRST_TACTIC             INT8 was allowed and the scales were there, but the build ran at builder
                         optimization level 0, where TensorRT takes the first tactic that runs
                         instead of timing them (seen on TensorRT 8.6: an INT8 recipe ran FP32)
HIGHER_PRECISION_FASTER  (implicit) INT8 was allowed and the scales were there, yet TensorRT timed a
                         FP16/FP32 tactic faster. This happens: a whole calibrated CNN built
                         INT8+FP16 on an H200 with TensorRT 8.6 ran with zero INT8 layers.
BIAS_FLOAT               (INT8 layers) the bias stays float: expected, said so
======================== ==================================================================

In explicit quantization TensorRT does not time INT8 against float for a layer:
Q/DQ placement decides, so FIRST_TACTIC and HIGHER_PRECISION_FASTER are implicit-only.

Each reason has a ``short`` text for its table row (naming the tensor or node) and a
``cause``: the explanation shared by every row with the same cause, which
:func:`group_causes` lists once.

Inputs are the parsed :class:`~trtwidgets.core.engine.inspector_json.EngineGraph` and,
optionally, the recipe (a :class:`~trtwidgets.core.recipe.recipe.Recipe` or its dict),
the calibration cache (a ``CalibrationCache``, a path, a mapping or the names),
and the names of the model's Q/DQ tensors (:func:`qdq_tensor_names`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

from .inspector_json import QUANTIZED, EngineGraph, EngineLayer
from .why_not_int8_causes import Int8Cause, export_kept_float, group_causes
from .why_not_int8_codes import CODES, Int8Reason
from .why_not_int8_inputs import RecipeView, recipe_view, calibration_names, qdq_tensor_names

__all__ = ["Int8Reason", "Int8Cause", "CODES", "NO_INT8_TYPES", "why_not_int8", "group_causes", "export_kept_float",
           "qdq_tensor_names", "calibration_names"]

#: Layer types (matched case-insensitively against ``ParameterType`` and
#: ``LayerType``, as substrings) that TensorRT does not run in INT8, or that
#: have no computation of their own and take their neighbours' precision. From
#: TensorRT's layer support matrix (8.6-10): these list FP32/FP16/BF16 only.
NO_INT8_TYPES: Dict[str, str] = {
    "softmax": "Softmax has no INT8 kernel in TensorRT; it runs in FP16 or FP32.",
    "normalization": "Normalization layers (LayerNorm, InstanceNorm, GroupNorm) have no INT8 kernel; they run in FP16/FP32.",
    "reduce": "Reduce layers have no INT8 kernel in TensorRT; they run in FP16/FP32.",
    "topk": "TopK has no INT8 kernel; it runs in FP16/FP32.",
    "einsum": "Einsum has no INT8 kernel; it runs in FP16/FP32.",
    "nonzero": "NonZero has no INT8 kernel.",
    "nms": "Non-max suppression has no INT8 kernel.",
    "nonmaxsuppression": "Non-max suppression has no INT8 kernel.",
    "cumulative": "Cumulative sums have no INT8 kernel.",
    "gridsample": "GridSample has no INT8 kernel.",
    "scatter": "Scatter has no INT8 kernel.",
    "raggedsoftmax": "RaggedSoftMax has no INT8 kernel.",
    "ragged": "RaggedSoftMax has no INT8 kernel.",
    "loop": "Loops and recurrences run in FP16/FP32.",
    "recurrence": "Loops and recurrences run in FP16/FP32.",
    "myelin": ("A Myelin-compiled region ({ForeignNode[...]}): TensorRT 8.6 applies implicit (calibrated) INT8 "
               "only outside Myelin; quantize it with explicit Q/DQ nodes instead."),
    "reformat": ("A Reformat only copies data between layouts or types for its neighbours; it has no precision "
                 "of its own (it turns INT8 only as a Q/DQ, Origin 'QDQ')."),
    "noop": "A NoOp (reshape without a kernel) only relabels its input; it takes its producer's precision.",
    "shuffle": ("A Shuffle (reshape/transpose) moves data in its producer's precision; TensorRT keeps INT8 through it "
                "only when the neighbours are INT8 in a layout it supports."),
    "constant": "A Constant holds weights as given (FP32/FP16); TensorRT does not quantize constants implicitly.",
}

_QDQ_NAME = re.compile(r"(?:^|[/_.])(?:Quantize|Dequantize)Linear", re.I)
#: A reformat TensorRT found free (compatible layouts on both sides): LayerType NoOp, a reformat's name.
_ZERO_COPY = ("A zero-copy reformat: TensorRT needed no data movement between these layouts, so the copy became "
              "a NoOp that only relabels its input; it has no precision of its own and carries its producer's.")


# --------------------------------------------------------------------------- inputs


# --------------------------------------------------------------------------- helpers


def _type_entry(layer: EngineLayer) -> Optional[str]:
    keys = " ".join(x for x in (layer.parameter_type or "", layer.layer_type) if x).lower().replace(" ", "")
    if layer.name.lstrip("{").startswith("ForeignNode"):
        keys += " myelin"
    for key in NO_INT8_TYPES:
        if key in keys:
            return key
    return None


def _is_reformat_copy(layer: EngineLayer) -> bool:
    return layer.name.startswith("Reformatting CopyNode") or layer.layer_type == "Reformat"


def _reformat_aliases(graph: EngineGraph) -> Dict[str, str]:
    """Tensor name -> the name it copies, for the tensors of reformat layers (``Reformat`` or zero-copy ``NoOp``).

    An input reformat writes ``Reformatted Input Tensor i to L`` from a network tensor; an output
    reformat reads ``Reformatted Output Tensor i to L`` and writes the network tensor.
    """
    aliases: Dict[str, str] = {}
    for layer in graph.layers:
        if _is_reformat_copy(layer) and len(layer.inputs) == 1 and len(layer.outputs) == 1:
            src, dst = layer.inputs[0].name, layer.outputs[0].name
            if src.startswith("Reformatted ") and not dst.startswith("Reformatted "):
                aliases[src] = dst
            else:
                aliases[dst] = src
    return aliases


def _network_name(name: str, aliases: Mapping[str, str]) -> str:
    seen = 0
    while name in aliases and seen < 8:  # a chain of reformats ends at a network tensor
        name = aliases[name]
        seen += 1
    return name


def _network_tensor_names(layer: EngineLayer, aliases: Mapping[str, str]) -> List[str]:
    """The layer's I/O tensors under their network names (reformat copies traced to their source)."""
    names: List[str] = []
    for t in layer.inputs + layer.outputs:
        name = _network_name(t.name, aliases)
        if name and not name.startswith("Reformatted ") and name not in names:
            names.append(name)
    return names


def _engine_quantized_tensors(graph: EngineGraph, aliases: Mapping[str, str]) -> FrozenSet[str]:
    """Network tensors the engine itself shows quantized: INT8/FP8 anywhere, or read/written by a Q/DQ layer.

    In explicit quantization a tensor is INT8 only where the model put Q/DQ, so this is the
    model's Q/DQ placement as TensorRT applied it, when the Q/DQ model is not at hand.
    """
    names = set()
    for layer in graph.layers:
        is_qdq = layer.origin.upper() == "QDQ" or ("+" not in layer.name and bool(_QDQ_NAME.search(layer.name)))
        for t in layer.inputs + layer.outputs:
            if is_qdq or t.precision in QUANTIZED:
                names.add(_network_name(t.name, aliases))
    return frozenset(names)


def _matching_override(layer: EngineLayer, view: RecipeView) -> Optional[Tuple[str, str, bool, str]]:
    candidates = list(layer.onnx_nodes) + [layer.name]
    for pattern, precision, regex in reversed(view.overrides):  # later overrides win, as in the build
        for cand in candidates:
            # The same rule as the build's LayerPrecision.matches: re.search, or the exact name.
            hit = re.search(pattern, cand) if regex else cand == pattern
            if hit:
                return pattern, precision, regex, cand
    return None


def _is_explicit(graph: EngineGraph, qdq: Optional[FrozenSet[str]]) -> bool:
    if qdq:
        return True
    return any(layer.origin.upper() == "QDQ" or any(_QDQ_NAME.search(n) for n in layer.onnx_nodes)
               for layer in graph.layers)


def _fmt_list(names: Sequence[str], limit: int = 4) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# --------------------------------------------------------------------------- main


def why_not_int8(graph: EngineGraph, recipe: Any = None, calibration: Any = None,
                 qdq_tensors: Optional[Iterable[str]] = None,
                 kept_float: Any = None) -> Tuple[Optional[Int8Reason], ...]:
    """The most likely reason each layer is not INT8.

    Parameters
    ----------
    graph : EngineGraph
    recipe : Recipe, dict or path of a recipe.json, optional
        Gives the precision flags, the precision constraints and overrides.
    calibration : CalibrationCache, path, mapping or iterable of str, optional
        The calibration cache the build used (implicit quantization).
    qdq_tensors : iterable of str, optional
        Tensors with Q/DQ in the model (explicit quantization); see :func:`qdq_tensor_names`.
    kept_float : optional
        What the Q/DQ export left in high precision on purpose: its ``Skip`` records, a plan or
        report with ``.skipped``, or node -> reason (see :func:`export_kept_float`).

    Returns
    -------
    tuple of (Int8Reason or None)
        One entry per layer of ``graph.layers``: None for INT8 layers with
        nothing to say, a BIAS_FLOAT note for INT8 layers with a float bias.
    """
    view = recipe_view(recipe)
    cache = calibration_names(calibration)
    qdq = frozenset(qdq_tensors) if qdq_tensors is not None else None
    explicit = _is_explicit(graph, qdq)
    any_quantized = any(layer.precision in QUANTIZED for layer in graph.layers)
    reformat_source = _reformat_aliases(graph)
    if explicit and not qdq:
        # Explicit engine, no model given: its Q/DQ placement is readable from the engine itself.
        qdq = _engine_quantized_tensors(graph, reformat_source) or None
        from_engine = True
    else:
        from_engine = False

    int8_on: Optional[bool]
    if view is not None and view.flags is not None:
        int8_on = "int8" in view.flags
    elif any_quantized:
        int8_on = True
    else:
        int8_on = None  # not known

    ctx = _Context(view, cache, qdq, explicit, int8_on, reformat_source, from_engine,
                   export_kept_float(kept_float) if kept_float is not None else {},
                   sum(layer.precision in QUANTIZED for layer in graph.layers), len(qdq or ()))
    return tuple(_explain(layer, ctx) for layer in graph.layers)


@dataclass(frozen=True)
class _Context:
    view: Optional[RecipeView]
    cache: Optional[FrozenSet[str]]
    qdq: Optional[FrozenSet[str]]
    explicit: bool
    int8_on: Optional[bool]
    reformat_source: Mapping[str, str]
    qdq_from_engine: bool
    kept_float: Mapping[str, Tuple[Optional[int], str]]
    int8_layers: int
    quantized_tensors: int


def _short_list(names: Sequence[str]) -> str:
    return _fmt_list(names, 2)


def _explain(layer: EngineLayer, ctx: _Context) -> Optional[Int8Reason]:
    view, cache, qdq, explicit, int8_on = ctx.view, ctx.cache, ctx.qdq, ctx.explicit, ctx.int8_on
    precision = layer.precision
    if precision == "INT8":
        if layer.bias is not None and layer.bias.precision in ("FP32", "FP16", "BF16"):
            cause = ("Expected: TensorRT adds the bias after rescaling the INT32 accumulator, so biases are never "
                     "quantized.")
            return Int8Reason(
                "BIAS_FLOAT",
                f"Runs in INT8. Its bias stays {layer.bias.precision} ({layer.bias.count} values): expected — "
                "TensorRT adds the bias after rescaling the INT32 accumulator, so biases are never quantized.",
                expected=True, short=f"INT8; bias stays {layer.bias.precision} (expected)", cause=cause)
        return None
    if precision == "N/A":
        text = ("TensorRT reported 'N/A due to dynamic shapes' for this layer's tensors: the engine was inspected "
                "without an execution context whose input shapes were set. Attach one at the profile's opt shape "
                "(trtwidgets.trt does that on fresh builds) and inspect again.")
        return Int8Reason("PRECISION_UNKNOWN", text, short="precision not reported (dynamic shapes)", cause=text)
    floats = ("FP32", "FP16", "BF16", "FP8", "FP64", "INT8", "INT4", "FP4", "UNKNOWN")
    precisions = [t.precision for t in layer.inputs + layer.outputs]
    if precisions and not any(p in floats for p in precisions):
        kinds = "/".join(sorted(set(precisions)))
        return Int8Reason(
            "NOT_FLOAT", f"Works on {kinds} data (shapes, indices or masks): quantization does not apply.",
            short=f"{kinds} data", cause="Shapes, indices and masks are integers or booleans: quantization does not apply.")
    if int8_on is False:
        flags = ", ".join(sorted(view.flags)) if view is not None and view.flags else "none"
        text = (f"INT8 was not enabled: the build's precision flags are {flags}, so TensorRT never considered INT8 "
                "kernels. Add 'int8' to the recipe's flags, with a calibrator or a Q/DQ model.")
        return Int8Reason("INT8_NOT_ENABLED", text, short=f"flags {flags}: no INT8", cause=text)
    if int8_on is None and cache is None and not qdq:
        text = ("No layer of this engine runs INT8 and no recipe was given: INT8 was most likely not enabled. "
                "Pass the recipe (--recipe) to know for sure.")
        return Int8Reason("INT8_NOT_ENABLED", text, short="INT8 most likely off", cause=text)
    if view is not None:
        hit = _matching_override(layer, view)
        if hit is not None and hit[1] != "int8":
            pattern, prec, regex, cand = hit
            how = {"obey": "OBEY_PRECISION_CONSTRAINTS makes it binding",
                   "prefer": "PREFER_PRECISION_CONSTRAINTS makes TensorRT follow it where it can",
                   }.get(view.constraints, "without OBEY/PREFER constraints TensorRT may still honour it")
            return Int8Reason(
                "PRECISION_CONSTRAINT",
                f"The recipe pins {cand!r} to {prec.upper()} ({'regex' if regex else 'pattern'} {pattern!r}); "
                f"{how}. Remove the override to let TensorRT choose INT8.",
                (cand,), short=f"{cand!r} pinned to {prec.upper()} by {pattern!r}",
                cause=f"A layer-precision override in the recipe pins these layers; {how}. Remove the override to "
                      "let TensorRT choose INT8.")
    entry = _type_entry(layer)
    missing: List[str] = []
    names = _network_tensor_names(layer, ctx.reformat_source)
    known = qdq if explicit and qdq else cache
    if known is not None:
        missing = [n for n in names if n not in known]
    if entry is not None and not (entry == "myelin" and explicit):
        extra = f" (Also without a scale: {_fmt_list(missing)}.)" if missing and entry not in ("reformat", "noop") else ""
        text = _ZERO_COPY if entry == "noop" and layer.name.startswith("Reformatting") else NO_INT8_TYPES[entry]
        label = {"noop": "zero-copy reformat" if text is _ZERO_COPY else "NoOp"}.get(entry, entry)
        return Int8Reason("NO_INT8_IMPLEMENTATION", text + extra, tuple(missing),
                          short=f"{label}: no INT8 kernel" if entry not in ("reformat", "noop", "shuffle", "constant")
                          else f"{label}: takes its neighbours' precision", cause=text)
    if view is not None and int8_on and view.calibrator == "none" and cache is None and not explicit:
        text = ("INT8 is enabled but nothing gives scales: the recipe has no calibrator and the model no Q/DQ "
                "nodes, so no tensor has a dynamic range. Choose a calibrator or export a Q/DQ model.")
        return Int8Reason("NO_SCALE", text, tuple(names), short="no calibrator, no Q/DQ", cause=text)
    kept = [(n, ctx.kept_float[n]) for n in layer.onnx_nodes if n in ctx.kept_float] if explicit else []
    if kept and missing:
        node, (rule, reason) = kept[0]
        rule_text = f"rule {rule}" if rule is not None else "a placement rule"
        text = (f"The Q/DQ export kept {node!r} in high precision on purpose ({rule_text}): {reason}. TensorRT runs "
                "it in floating point, as the export intended.")
        return Int8Reason("KEPT_FLOAT_BY_EXPORT", text, tuple(missing),
                          short=f"kept float by the export, {rule_text} ({node})",
                          # The reason without its per-node details, so that one rule reads as one cause.
                          cause=(f"The Q/DQ export kept these in high precision on purpose ({rule_text}): "
                                 + re.sub(r"\s*\((?:by|e\.g\.) [^)]*\)", "", re.sub(r"^kept in high precision:\s*", "",
                                                                                 reason)) + "."))
    if missing:
        if explicit and qdq:
            counted = (f"this engine quantizes {ctx.quantized_tensors} tensors and runs {ctx.int8_layers} layers in INT8"
                       if ctx.qdq_from_engine else f"the Q/DQ model quantizes {ctx.quantized_tensors} tensors")
            where = (f"no Q/DQ on them ({counted}; these are not among them); with explicit quantization TensorRT "
                     "runs a layer in INT8 only where the model puts Q/DQ on its tensors")
            fix = ("If the export left them float on purpose, pass its skip records (kept_float=) to see its rule; "
                   "otherwise add Q/DQ on them (trtwidgets.export_qdq places them)"
                   + ("; pass the Q/DQ model (--qdq-model, qdq_tensors=) to check against the model itself"
                      if ctx.qdq_from_engine else ""))
            cause = ("Explicit quantization: TensorRT runs a layer in INT8 only where the model puts Q/DQ on its "
                     f"tensors; {counted}, and the named tensors are not among them. {fix}.")
            short = f"no Q/DQ on {_short_list(missing)}"
        else:
            where = "missing from the calibration cache"
            fix = "Calibrate with data that reaches this layer, or add amax overrides for them"
            cause = ("The calibration cache has no scale for the named tensors, so TensorRT keeps these layers in "
                     f"floating point. {fix}.")
            short = f"no scale for {_short_list(missing)}"
        return Int8Reason(
            "NO_SCALE",
            f"No scale for {_fmt_list(missing)}: {where}, so TensorRT must keep the layer in floating point. "
            f"{fix}.",
            tuple(missing), short=short, cause=cause)
    tactic = f" ({layer.tactic})" if layer.tactic and not layer.tactic.startswith("0x") else ""
    if explicit:
        # Explicit quantization: TensorRT does not time INT8 against float for a layer; Q/DQ decide.
        if known is not None:
            cause = ("Q/DQ surround these layers' tensors, yet TensorRT found no INT8 fusion for them (no INT8 kernel "
                     "for this layer or layout, or a Q/DQ pattern its fusion rules do not match), so the DQ and Q ran "
                     "around a float layer. Check the Q/DQ placement around them (weights quantized per channel on "
                     "axis 0, Q/DQ directly on inputs and output).")
            return Int8Reason(
                "QDQ_NOT_FUSED",
                f"Q/DQ surround its tensors, yet it runs in {precision}{tactic}: TensorRT found no INT8 fusion for "
                "this layer with these Q/DQ (no INT8 kernel for this layer or layout, or a Q/DQ pattern its fusion "
                "rules do not match), so the DQ and Q ran around a float layer. Check the Q/DQ placement around "
                "it (weights quantized per channel on axis 0, Q/DQ directly on its inputs and output).",
                tuple(names), short=f"Q/DQ not fused: ran {precision}", cause=cause)
        text = ("Explicit quantization (the engine has Q/DQ layers): TensorRT runs a layer in INT8 only where the model "
                "puts Q/DQ on its tensors, and which tensors have them is not known here. Pass the Q/DQ model "
                "(--qdq-model, qdq_tensors=) to name them.")
        return Int8Reason("NO_SCALE", text, tuple(names), short="Q/DQ placement not known", cause=text)
    if view is not None and view.opt_level == 0:
        return Int8Reason(
            "FIRST_TACTIC",
            f"INT8 was allowed{' and its tensors have scales' if known is not None else ''}, but the engine was "
            f"built at builder optimization level 0, where TensorRT takes the first tactic that runs instead of "
            f"timing them: here a {precision} one{tactic}. Rebuild at level 3 (TensorRT's default) or higher to "
            "let it time the INT8 kernels.",
            tuple(names), short=f"level 0 took a {precision} tactic",
            cause=("The engine was built at builder optimization level 0, where TensorRT takes the first tactic that "
                   "runs instead of timing them. Rebuild at level 3 (TensorRT's default) or higher to let it time the "
                   "INT8 kernels."))
    if known is not None:
        scales = "its tensors have scales"
    else:
        scales = "whether its tensors have scales is not known (pass the calibration cache or the Q/DQ model to check)"
    cause = ("INT8 was allowed, yet TensorRT timed a floating-point tactic faster than its INT8 kernels for this shape "
             "(reformats around INT8 often cost more than they save; on an H200 with TensorRT 8.6 a whole calibrated "
             "CNN built INT8+FP16 ran zero INT8 layers). To compare, pin a layer to INT8 with a layer-precision "
             "override and OBEY constraints.")
    return Int8Reason(
        "HIGHER_PRECISION_FASTER",
        f"INT8 was allowed and {scales}, yet TensorRT chose a {precision} tactic{tactic}: it timed it faster "
        "than its INT8 kernels for this shape (reformats around INT8 often cost more than they save; on an H200 "
        "with TensorRT 8.6 a whole calibrated CNN built INT8+FP16 ran zero INT8 layers). To compare, pin the "
        "layer to INT8 with a layer-precision override and OBEY constraints.",
        tuple(names), short=f"{precision} tactic timed faster" + ("" if known is not None else " (scales not known)"),
        cause=cause)
