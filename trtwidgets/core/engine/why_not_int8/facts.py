"""What the rules of why-not-INT8 read: the build's context, one layer's facts, the layer types without INT8.

:class:`ExplainContext` is what is known about the whole build (recipe, scales, explicit or
implicit, reformat copies); :func:`layer_facts` computes, once per layer, what the rules of
:mod:`.rules` read about it (:class:`LayerFacts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Mapping, Optional, Tuple

from ..inspector_json import EngineLayer
from .inputs import RecipeView

__all__ = ["NO_INT8_TYPES", "ZERO_COPY", "ExplainContext", "LayerFacts", "layer_facts", "network_name"]

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

#: A reformat TensorRT found free (compatible layouts on both sides): LayerType NoOp, a reformat's name.
ZERO_COPY = ("A zero-copy reformat: TensorRT needed no data movement between these layouts, so the copy became "
              "a NoOp that only relabels its input; it has no precision of its own and carries its producer's.")


@dataclass(frozen=True)
class ExplainContext:
    """What is known about the whole build, shared by every layer's rules."""

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


@dataclass(frozen=True)
class LayerFacts:
    """What the rules read about one layer, computed once: its NO_INT8_TYPES entry, network tensor names,
    the names with scales (``known``: the Q/DQ tensors or the cache), those without, and export skips."""

    entry: Optional[str]
    names: List[str]
    known: Optional[FrozenSet[str]]
    missing: List[str]
    kept: List[Tuple[str, Tuple[Optional[int], str]]]
    tactic: str


def network_name(name: str, aliases: Mapping[str, str]) -> str:
    """``name`` traced through reformat copies (``aliases``: tensor -> the tensor it copies) to a network tensor."""
    seen = 0
    while name in aliases and seen < 8:  # a chain of reformats ends at a network tensor
        name = aliases[name]
        seen += 1
    return name


def _type_entry(layer: EngineLayer) -> Optional[str]:
    keys = " ".join(x for x in (layer.parameter_type or "", layer.layer_type) if x).lower().replace(" ", "")
    if layer.name.lstrip("{").startswith("ForeignNode"):
        keys += " myelin"
    for key in NO_INT8_TYPES:
        if key in keys:
            return key
    return None


def _network_tensor_names(layer: EngineLayer, aliases: Mapping[str, str]) -> List[str]:
    """The layer's I/O tensors under their network names (reformat copies traced to their source)."""
    names: List[str] = []
    for t in layer.inputs + layer.outputs:
        name = network_name(t.name, aliases)
        if name and not name.startswith("Reformatted ") and name not in names:
            names.append(name)
    return names


def layer_facts(layer: EngineLayer, ctx: ExplainContext) -> LayerFacts:
    """The facts the rules (:data:`~.rules.RULES`) read about ``layer``."""
    names = _network_tensor_names(layer, ctx.reformat_source)
    known = ctx.qdq if ctx.explicit and ctx.qdq else ctx.cache
    missing = [n for n in names if n not in known] if known is not None else []
    kept = [(n, ctx.kept_float[n]) for n in layer.onnx_nodes if n in ctx.kept_float] if ctx.explicit else []
    tactic = f" ({layer.tactic})" if layer.tactic and not layer.tactic.startswith("0x") else ""
    return LayerFacts(_type_entry(layer), names, known, missing, kept, tactic)
