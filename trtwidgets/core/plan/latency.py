"""Latency behind one interface: how long an engine with these INT8 layers runs.

The planner asks one question of latency, whatever answers it: the cost model's
estimate (:mod:`.cost_model`), TensorRT's own per-layer choices and times from an
implicit INT8+FP16 build (:mod:`.latency_oracle`), or a measurement of built
candidates. Each is a :class:`LatencyModel`: ``estimate(int8_layers)`` in
microseconds, a ``kind`` (``"estimate"``, ``"oracle"`` or ``"measured"``, what the
plan reports as each candidate's ``latency_source``), a ``source`` in words, and,
per layer, whether INT8 pays there alone and by how much.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Collection, Dict, Iterable, Mapping, Optional, Protocol, Sequence, Tuple

from ..qdq.myelin import MYELIN_QDQ_SLOWDOWN, MYELIN_REASON
from .cost_model import GpuSpec, LayerCost
from .plan_values import ratio

if TYPE_CHECKING:
    from .latency_oracle import LatencyOracle

__all__ = ["LatencyModel", "LayerLatency"]

#: Below this gain (us, or this share of the FP16 time) the cost model says INT8 does not pay in a layer.
MIN_LAYER_GAIN_US = 0.3
MIN_LAYER_GAIN_SHARE = 0.05


class LatencyModel(Protocol):
    """What the planner needs to know about latency (see the module docstring)."""

    @property
    def kind(self) -> str: ...

    @property
    def source(self) -> str: ...

    def estimate(self, int8_layers: Iterable[str]) -> float:
        """Microseconds of the engine with ``int8_layers`` in INT8 and every other layer in FP16."""

    def why_not_int8(self, layer: str) -> Optional[str]:
        """None when INT8 pays in ``layer`` alone, else why not (shown to the user)."""

    def gain_us(self, layer: str) -> float:
        """Microseconds INT8 saves in ``layer`` alone (ranks the layers worth quantizing)."""


@dataclass(frozen=True)
class LayerLatency:
    """Per-layer FP16/INT8 times plus a reformat at every INT8/float border.

    From the cost model alone (``kind="estimate"``), or with an implicit build's
    choices and times (``oracle``, ``kind="oracle"``): TensorRT timed both precisions
    and kept the faster, so its order is trusted and the cost model gives the sizes.

    Attributes
    ----------
    costs : mapping
        Layer label -> :class:`~.cost_model.LayerCost`.
    edges : sequence of (str, str)
        Weighted layers linked through non-weighted ops (:func:`~.plan_eval.weighted_edges`).
    gpu : GpuSpec
    oracle : LatencyOracle, optional
    myelin : collection of str
        Layers TensorRT 8.x runs in Myelin, where Q/DQ is slower (:mod:`~trtwidgets.core.qdq.myelin`).
    """

    costs: Mapping[str, LayerCost]
    edges: Sequence[Tuple[str, str]]
    gpu: GpuSpec
    oracle: Optional[LatencyOracle] = None
    myelin: Collection[str] = ()
    _times: Dict[str, Tuple[float, float]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._times.update({layer: self._layer_times(layer, c) for layer, c in self.costs.items()})

    @property
    def kind(self) -> str:
        return "oracle" if self.oracle is not None else "estimate"

    @property
    def source(self) -> str:
        if self.oracle is not None:
            return f"TensorRT's implicit INT8 build ({getattr(self.oracle, 'source', 'oracle')})"
        return f"cost model of an {self.gpu.name}"

    def _layer_times(self, layer: str, c: LayerCost) -> Tuple[float, float]:
        fp16_us, int8_us = c.fp16_us, c.int8_us
        choice = self.oracle.layers.get(layer) if self.oracle is not None else None
        if choice is not None:
            if choice.latency_ms:
                measured = 1000 * choice.latency_ms
                # ratio(): a layer time of 0 or NaN is no ratio (NaN: "cannot estimate"), never a division.
                if choice.precision == "INT8":
                    fp16_us, int8_us = measured * max(ratio(c.fp16_us, c.int8_us), 1.05), measured
                else:
                    fp16_us, int8_us = measured, measured * max(ratio(c.int8_us, c.fp16_us), 1.05)
            elif choice.precision == "INT8":
                int8_us = min(int8_us, 0.8 * fp16_us)
            else:
                int8_us = max(int8_us, 1.05 * fp16_us)
        if layer in self.myelin:
            int8_us = max(int8_us, MYELIN_QDQ_SLOWDOWN * fp16_us)
        return fp16_us, int8_us

    def border_us(self, producer: str) -> float:
        """One INT8/float border after ``producer``: a reformat layer (a launch, reading and writing the tensor).

        An implicit engine picks formats without reformat layers; an explicit one gets what its Q/DQ say,
        so the oracle's borders cost too. Measured costs: docs/evidence.md, "latency".
        """
        c = self.costs.get(producer)
        return self.gpu.launch_us + (2e6 * c.out_bytes_fp16 / self.gpu.bandwidth if c is not None else 0.0)

    def estimate(self, int8_layers: Iterable[str]) -> float:
        q = set(int8_layers)
        total = sum(int8 if layer in q else fp16 for layer, (fp16, int8) in self._times.items())
        return total + sum(self.border_us(u) for u, d in self.edges if (u in q) != (d in q))

    def why_not_int8(self, layer: str) -> Optional[str]:
        if layer in self.myelin:
            return MYELIN_REASON
        if self.oracle is not None:
            choice = self.oracle.layers.get(layer)
            if choice is not None and choice.precision == "INT8":
                return None
            return ("TensorRT ran it in " f"{choice.precision if choice else 'high precision'} in the implicit "
                    "INT8 build: INT8 does not pay here")
        c = self.costs.get(layer)
        if c is None or c.gain_us > max(MIN_LAYER_GAIN_US, MIN_LAYER_GAIN_SHARE * c.fp16_us):
            return None  # an unknown shape: accuracy decides (the plan says so)
        return f"INT8 does not pay here (estimated {c.fp16_us:.1f} us in FP16, {c.int8_us:.1f} us in INT8)"

    def gain_us(self, layer: str) -> float:
        c = self.costs.get(layer)
        return c.gain_us if c is not None else 0.0
