"""The rules of why-not-INT8, as a table: one function per cause, tried in order.

A rule is a function ``(layer, ctx, facts) -> Int8Reason or None`` (the context and the
facts: :mod:`.facts`); None passes to the next rule. :data:`RULES` lists them most certain
first, in the order of the codes' table (:mod:`.codes`); the runner is :func:`.explain.explain`.
"""

from __future__ import annotations

import re
from typing import Callable, Optional, Sequence, Tuple

from ..inspector_json import EngineLayer
from .codes import Int8Reason
from .facts import NO_INT8_TYPES, ZERO_COPY, ExplainContext, LayerFacts
from .inputs import RecipeView

__all__ = ["RULES", "bias_float_note"]


def _matching_override(layer: EngineLayer, view: RecipeView) -> Optional[Tuple[str, str, bool, str]]:
    candidates = list(layer.onnx_nodes) + [layer.name]
    for pattern, precision, regex in reversed(view.overrides):  # later overrides win, as in the build
        for cand in candidates:
            # The same rule as the build's LayerPrecision.matches: re.search, or the exact name.
            hit = re.search(pattern, cand) if regex else cand == pattern
            if hit:
                return pattern, precision, regex, cand
    return None


def _fmt_list(names: Sequence[str], limit: int = 4) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _short_list(names: Sequence[str]) -> str:
    return _fmt_list(names, 2)


# --------------------------------------------------------------------------- the rules, most certain first


def bias_float_note(layer: EngineLayer) -> Optional[Int8Reason]:
    """An INT8 layer has nothing to explain, except a float bias (expected)."""
    if layer.bias is not None and layer.bias.precision in ("FP32", "FP16", "BF16"):
        cause = ("Expected: TensorRT adds the bias after rescaling the INT32 accumulator, so biases are never "
                 "quantized.")
        return Int8Reason(
            "BIAS_FLOAT",
            f"Runs in INT8. Its bias stays {layer.bias.precision} ({layer.bias.count} values): expected — "
            "TensorRT adds the bias after rescaling the INT32 accumulator, so biases are never quantized.",
            expected=True, short=f"INT8; bias stays {layer.bias.precision} (expected)", cause=cause)
    return None


def _precision_unknown(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    if layer.precision != "N/A":
        return None
    text = ("TensorRT reported 'N/A due to dynamic shapes' for this layer's tensors: the engine was inspected "
            "without an execution context whose input shapes were set. Attach one at the profile's opt shape "
            "(trtwidgets.trt does that on fresh builds) and inspect again.")
    return Int8Reason("PRECISION_UNKNOWN", text, short="precision not reported (dynamic shapes)", cause=text)


def _not_float(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    floats = ("FP32", "FP16", "BF16", "FP8", "FP64", "INT8", "INT4", "FP4", "UNKNOWN")
    precisions = [t.precision for t in layer.inputs + layer.outputs]
    if not precisions or any(p in floats for p in precisions):
        return None
    kinds = "/".join(sorted(set(precisions)))
    return Int8Reason(
        "NOT_FLOAT", f"Works on {kinds} data (shapes, indices or masks): quantization does not apply.",
        short=f"{kinds} data", cause="Shapes, indices and masks are integers or booleans: quantization does not apply.")


def _int8_not_enabled(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    if ctx.int8_on is False:
        view = ctx.view
        flags = ", ".join(sorted(view.flags)) if view is not None and view.flags else "none"
        text = (f"INT8 was not enabled: the build's precision flags are {flags}, so TensorRT never considered INT8 "
                "kernels. Add 'int8' to the recipe's flags, with a calibrator or a Q/DQ model.")
        return Int8Reason("INT8_NOT_ENABLED", text, short=f"flags {flags}: no INT8", cause=text)
    if ctx.int8_on is None and ctx.cache is None and not ctx.qdq:
        text = ("No layer of this engine runs INT8 and no recipe was given: INT8 was most likely not enabled. "
                "Pass the recipe (--recipe) to know for sure.")
        return Int8Reason("INT8_NOT_ENABLED", text, short="INT8 most likely off", cause=text)
    return None


def _precision_constraint(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    view = ctx.view
    hit = _matching_override(layer, view) if view is not None else None
    if hit is None or view is None or hit[1] == "int8":
        return None
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


def _no_int8_implementation(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    entry, missing = facts.entry, facts.missing
    if entry is None or (entry == "myelin" and ctx.explicit):
        return None
    extra = f" (Also without a scale: {_fmt_list(missing)}.)" if missing and entry not in ("reformat", "noop") else ""
    text = ZERO_COPY if entry == "noop" and layer.name.startswith("Reformatting") else NO_INT8_TYPES[entry]
    label = {"noop": "zero-copy reformat" if text is ZERO_COPY else "NoOp"}.get(entry, entry)
    return Int8Reason("NO_INT8_IMPLEMENTATION", text + extra, tuple(missing),
                      short=f"{label}: no INT8 kernel" if entry not in ("reformat", "noop", "shuffle", "constant")
                      else f"{label}: takes its neighbours' precision", cause=text)


def _no_calibrator(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    view = ctx.view
    if not (view is not None and ctx.int8_on and view.calibrator == "none" and ctx.cache is None and not ctx.explicit):
        return None
    text = ("INT8 is enabled but nothing gives scales: the recipe has no calibrator and the model no Q/DQ "
            "nodes, so no tensor has a dynamic range. Choose a calibrator or export a Q/DQ model.")
    return Int8Reason("NO_SCALE", text, tuple(facts.names), short="no calibrator, no Q/DQ", cause=text)


def _kept_float_by_export(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    if not (facts.kept and facts.missing):
        return None
    node, (rule, reason) = facts.kept[0]
    rule_text = f"rule {rule}" if rule is not None else "a placement rule"
    text = (f"The Q/DQ export kept {node!r} in high precision on purpose ({rule_text}): {reason}. TensorRT runs "
            "it in floating point, as the export intended.")
    return Int8Reason("KEPT_FLOAT_BY_EXPORT", text, tuple(facts.missing),
                      short=f"kept float by the export, {rule_text} ({node})",
                      # The reason without its per-node details, so that one rule reads as one cause.
                      cause=(f"The Q/DQ export kept these in high precision on purpose ({rule_text}): "
                             + re.sub(r"\s*\((?:by|e\.g\.) [^)]*\)", "", re.sub(r"^kept in high precision:\s*", "",
                                                                             reason)) + "."))


def _missing_scale(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    missing = facts.missing
    if not missing:
        return None
    if ctx.explicit and ctx.qdq:
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


def _qdq_not_fused(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    # Explicit quantization: TensorRT does not time INT8 against float for a layer; Q/DQ decide.
    if not ctx.explicit or facts.known is None:
        return None
    precision, tactic = layer.precision, facts.tactic
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
        tuple(facts.names), short=f"Q/DQ not fused: ran {precision}", cause=cause)


def _qdq_placement_unknown(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    if not ctx.explicit:
        return None
    text = ("Explicit quantization (the engine has Q/DQ layers): TensorRT runs a layer in INT8 only where the model "
            "puts Q/DQ on its tensors, and which tensors have them is not known here. Pass the Q/DQ model "
            "(--qdq-model, qdq_tensors=) to name them.")
    return Int8Reason("NO_SCALE", text, tuple(facts.names), short="Q/DQ placement not known", cause=text)


def _first_tactic(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    if ctx.view is None or ctx.view.opt_level != 0:
        return None
    return Int8Reason(
        "FIRST_TACTIC",
        f"INT8 was allowed{' and its tensors have scales' if facts.known is not None else ''}, but the engine was "
        f"built at builder optimization level 0, where TensorRT takes the first tactic that runs instead of "
        f"timing them: here a {layer.precision} one{facts.tactic}. Rebuild at level 3 (TensorRT's default) or "
        "higher to let it time the INT8 kernels.",
        tuple(facts.names), short=f"level 0 took a {layer.precision} tactic",
        cause=("The engine was built at builder optimization level 0, where TensorRT takes the first tactic that "
               "runs instead of timing them. Rebuild at level 3 (TensorRT's default) or higher to let it time the "
               "INT8 kernels."))


def _higher_precision_faster(layer: EngineLayer, ctx: ExplainContext, facts: LayerFacts) -> Optional[Int8Reason]:
    precision, known = layer.precision, facts.known
    if known is not None:
        scales = "its tensors have scales"
    else:
        scales = "whether its tensors have scales is not known (pass the calibration cache or the Q/DQ model to check)"
    level = ctx.view.opt_level if ctx.view is not None else None
    if level is not None and level < 3:
        timed = (f" This engine was built at builder optimization level {level}, where TensorRT times only part of the "
                 "tactics it tries at its default level 3: rebuild at level 3 before concluding that INT8 does not pay.")
    else:
        timed = ""
    cause = ("INT8 was allowed, yet TensorRT timed a floating-point tactic faster than the INT8 kernels it tried for this "
             "shape (reformats around INT8 often cost more than they save; on an H200 with TensorRT 8.6 at builder "
             "optimization level 1 a whole calibrated CNN built INT8+FP16 ran zero INT8 layers). To compare, pin a "
             "layer to INT8 with a layer-precision override and OBEY constraints." + timed)
    return Int8Reason(
        "HIGHER_PRECISION_FASTER",
        f"INT8 was allowed and {scales}, yet TensorRT chose a {precision} tactic{facts.tactic}: it timed it faster "
        "than the INT8 kernels it tried for this shape (reformats around INT8 often cost more than they save; on an "
        "H200 with TensorRT 8.6 at builder optimization level 1 a whole calibrated CNN built INT8+FP16 ran zero INT8 "
        "layers). To compare, pin the layer to INT8 with a layer-precision override and OBEY constraints." + timed,
        tuple(facts.names), short=f"{precision} tactic timed faster" + ("" if known is not None else " (scales not known)"),
        cause=cause)


Rule = Callable[[EngineLayer, ExplainContext, LayerFacts], Optional[Int8Reason]]

#: The causes of a non-INT8 layer, most certain first; the first that applies is reported.
#: The last rule always applies.
RULES: Tuple[Tuple[str, Rule], ...] = (
    ("PRECISION_UNKNOWN", _precision_unknown),
    ("NOT_FLOAT", _not_float),
    ("INT8_NOT_ENABLED", _int8_not_enabled),
    ("PRECISION_CONSTRAINT", _precision_constraint),
    ("NO_INT8_IMPLEMENTATION", _no_int8_implementation),
    ("NO_SCALE", _no_calibrator),
    ("KEPT_FLOAT_BY_EXPORT", _kept_float_by_export),
    ("NO_SCALE", _missing_scale),
    ("QDQ_NOT_FUSED", _qdq_not_fused),
    ("NO_SCALE", _qdq_placement_unknown),
    ("FIRST_TACTIC", _first_tactic),
    ("HIGHER_PRECISION_FASTER", _higher_precision_faster),
)
