"""Why each layer of an engine does not run in INT8: the build's context gathered once, the rules run per layer.

:func:`why_not_int8` reads what is known about the build (the recipe, the calibration cache
or the Q/DQ tensors, the engine's reformat copies, whether it is explicitly quantized) into an
:class:`~.facts.ExplainContext`; :func:`explain` computes a layer's facts and returns the first
reason the rules of :data:`~.rules.RULES` give (the codes and their order: :mod:`.codes`).

Inputs are the parsed :class:`~trtwidgets.core.engine.inspector_json.EngineGraph` and,
optionally, the recipe (a :class:`~trtwidgets.core.recipe.recipe.Recipe` or its dict),
the calibration cache (a ``CalibrationCache``, a path, a mapping or the names),
and the names of the model's Q/DQ tensors (:func:`~.inputs.qdq_tensor_names`).
"""

from __future__ import annotations

import re
from typing import Any, Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

from ..inspector_json import QUANTIZED, EngineGraph, EngineLayer
from .causes import export_kept_float
from .codes import Int8Reason
from .facts import ExplainContext, layer_facts, network_name
from .inputs import calibration_names, recipe_view
from .rules import RULES, bias_float_note

__all__ = ["explain", "why_not_int8"]


_QDQ_NAME = re.compile(r"(?:^|[/_.])(?:Quantize|Dequantize)Linear", re.I)


# --------------------------------------------------------------------------- helpers


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
                names.add(network_name(t.name, aliases))
    return frozenset(names)


def _is_explicit(graph: EngineGraph, qdq: Optional[FrozenSet[str]]) -> bool:
    if qdq:
        return True
    return any(layer.origin.upper() == "QDQ" or any(_QDQ_NAME.search(n) for n in layer.onnx_nodes)
               for layer in graph.layers)


def explain(layer: EngineLayer, ctx: ExplainContext) -> Optional[Int8Reason]:
    """The first reason of :data:`RULES` for a non-INT8 layer; for an INT8 layer None, or its float-bias note."""
    if layer.precision == "INT8":
        return bias_float_note(layer)
    facts = layer_facts(layer, ctx)
    for _code, rule in RULES:
        reason = rule(layer, ctx, facts)
        if reason is not None:
            return reason
    return None


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
        Tensors with Q/DQ in the model (explicit quantization); see :func:`~.inputs.qdq_tensor_names`.
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

    ctx = ExplainContext(view, cache, qdq, explicit, int8_on, reformat_source, from_engine,
                   export_kept_float(kept_float) if kept_float is not None else {},
                   sum(layer.precision in QUANTIZED for layer in graph.layers), len(qdq or ()))
    return tuple(explain(layer, ctx) for layer in graph.layers)


