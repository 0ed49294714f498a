"""Why a layer does not run in INT8: the most likely cause, as a code and a sentence.

For each engine layer that runs in another precision, the causes are tried from
the most to the least certain; the first that applies is reported (the rules are
the table :data:`~trtwidgets.core.engine.why_not_int8_rules.RULES`, this module
gathers what they read):

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
from typing import Any, Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

from .inspector_json import QUANTIZED, EngineGraph, EngineLayer
from .why_not_int8_causes import Int8Cause, export_kept_float, group_causes
from .why_not_int8_codes import CODES, Int8Reason
from .why_not_int8_inputs import calibration_names, qdq_tensor_names, recipe_view
from .why_not_int8_rules import NO_INT8_TYPES, ExplainContext, explain, network_name

__all__ = ["Int8Reason", "Int8Cause", "CODES", "NO_INT8_TYPES", "why_not_int8", "group_causes", "export_kept_float",
           "qdq_tensor_names", "calibration_names"]


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

    ctx = ExplainContext(view, cache, qdq, explicit, int8_on, reformat_source, from_engine,
                   export_kept_float(kept_float) if kept_float is not None else {},
                   sum(layer.precision in QUANTIZED for layer in graph.layers), len(qdq or ()))
    return tuple(explain(layer, ctx) for layer in graph.layers)


