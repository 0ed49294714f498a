"""The float candidates of a plan: FP16, FP16 with its FP32 island, FP16 of the rewritten graph.

Each quantizes nothing. FP16 is the model as given in FP16. Where FP16 misses the target because some nodes
cannot be held in FP16 (:mod:`~..qdq.float_island`), "FP16 with an FP32 island" keeps them FP32, and so does
every INT8 candidate: the island's extra time (:func:`~.cost_model.island_cost`) is added to each candidate that
keeps it. Where the export rewrites the graph (:mod:`~..model.trt_rewrites`), "FP16 (rewritten graph)" is FP16 of
the graph the Q/DQ candidates are written on, so that a measurement compares them with the FP16 of the same
graph.
"""

from __future__ import annotations

import dataclasses
from typing import List, Mapping, Sequence

import onnx

from .accuracy_search import Candidates

__all__ = ["ISLAND_NAME", "REWRITTEN_NAME", "add_float_candidates", "add_rewritten", "island_note", "price_island"]


def add_float_candidates(cands: Candidates, float_part, rewrites, notes: List[str]) -> None:
    """FP16, FP16 with its FP32 island (where the float part needed one), FP16 of the rewritten graph (where the
    export rewrites), in that order."""
    cands.add("FP16 (no INT8)", (), (), float_part.verdict.accuracy, float_island=False)
    if float_part.fixed:
        cands.add(f"{ISLAND_NAME} ({len(float_part.island)} nodes)", (), (), float_part.island_verdict.accuracy)
    if rewrites:
        add_rewritten(cands, rewrites, float_part, notes)


def price_island(proto: onnx.ModelProto, island: Sequence[str], input_shapes: Mapping[str, Sequence[int]],
                 gpu: str, notes: List[str]) -> float:
    """The island's extra time in microseconds (:func:`~.cost_model.island_cost`), said in a note."""
    from .cost_model import island_cost, static_shapes

    cost = island_cost(proto, island, static_shapes(proto, input_shapes), gpu)
    unknown = f"; {cost.unknown} of its tensors' shapes are unknown (priced at no bytes)" if cost.unknown else ""
    notes.append(f"the FP32 island ({len(island)} nodes) is priced at +{cost.us:.1f} us in every candidate that keeps "
                 f"it (an estimate: its tensors at FP32's 4 bytes {cost.memory_us:.1f} us, its matrix work at TF32 "
                 f"{cost.compute_us:.1f} us, {cost.borders} reformats at its edges{unknown})")
    return cost.us


#: The name of the float candidate that keeps its FP32 island (:mod:`~..qdq.float_island`).
ISLAND_NAME = "FP16 with an FP32 island"
#: The name of the float candidate of the rewritten graph (``Candidate.rewritten``).
REWRITTEN_NAME = "FP16 (rewritten graph)"


def add_rewritten(cands: Candidates, rewrites, float_part, notes: List[str]) -> None:
    """FP16 of the graph the Q/DQ candidates are written on, with a note on what it is and how it is timed.

    The rewrites are exact (the same arithmetic on the same values), so its accuracy is the float part's: FP16's
    verdict, or the island's where the float part needed one (every INT8 candidate keeps the island, and so does
    this one's export). Its estimate is FP16's: the cost model prices weighted layers and precision borders, and
    the rewrites change neither (they remove copies TensorRT makes around a Concat and move a Transpose), so any
    gain of theirs is left to the measurement rather than invented here.
    """
    acc = float_part.island_verdict.accuracy if float_part.fixed else float_part.verdict.accuracy
    index = len(cands.items)
    cand = dataclasses.replace(cands.make(REWRITTEN_NAME, (), (), acc), rewritten=True)
    cands.items.append(cand)
    kinds = sorted({kind for kind, _ in rewrites})
    island = f", its {len(float_part.island)} island nodes kept FP32" if float_part.fixed else ""
    notes.append(f"the Q/DQ candidates are written with {len(rewrites)} exact graph rewrites ({', '.join(kinds)}; "
                 f"docs/placement.md, 'Graph rewrites'); '{REWRITTEN_NAME}' is FP16 of that graph{island} "
                 f"(`plan export --candidate {index}` writes it), so a measurement compares every Q/DQ candidate with the "
                 "FP16 engine of the same graph and reports the rewrites' own gain; its estimate is FP16's, since "
                 "the cost model does not price what the rewrites remove (QdqOptions(rewrites=()) writes the graph "
                 "as it is)")


def island_note(float_part) -> str:
    """What the float part's check found, naming the island's nodes and why."""
    fp16 = "; ".join(float_part.verdict.why) or "it misses the target"
    return (f"FP16 misses the target ({fp16}); {len(float_part.island)} nodes kept FP32 make it meet it, and every "
            f"INT8 candidate keeps them FP32 too (--keep-fp32): {float_part.describe()}")
