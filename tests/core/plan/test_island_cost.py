"""The FP32 island's latency (issue 42): priced by the cost model, in every candidate that keeps it."""

from __future__ import annotations

import pytest

from tests.core.plan.plan_models import log_spectrum, spectra
from trtwidgets.core.plan.cost_model import GPUS, island_cost, static_shapes


def _shapes(batch: int):
    model = log_spectrum()
    return model, static_shapes(model, {"x": (batch, 1, 16, 16)})


def test_an_island_costs_its_fp32_bytes_and_a_reformat_at_each_edge():
    model, shapes = _shapes(8)
    spec = GPUS["h100"]
    cost = island_cost(model, ("add_eps", "log"), shapes)
    # One tensor comes in (power, FP16 -> FP32), one goes out (ln, read by to_db in FP16): two reformats.
    assert cost.borders == 2 and cost.unknown == 0 and cost.compute_us == 0.0
    numel = 8 * 8 * 16 * 16
    # add_eps reads power, writes power_eps; log reads power_eps, writes ln: four tensors at 2 extra bytes a value.
    assert cost.memory_us == pytest.approx(1e6 * (4 * 2.0 * numel + 2 * 6.0 * numel) / spec.bandwidth)
    assert cost.us == pytest.approx(cost.memory_us + 2 * spec.launch_us)
    # More data, more time; no island, no time.
    assert island_cost(model, ("add_eps", "log"), _shapes(64)[1]).us > cost.us
    assert island_cost(model, (), shapes).us == 0.0


def test_a_weighted_layer_in_the_island_pays_tf32_and_a_graph_output_converts_back():
    model, shapes = _shapes(8)
    cost = island_cost(model, ("head",), shapes)
    assert cost.compute_us > 0 and cost.borders == 2  # normalized comes in; y is the graph's output


def test_every_candidate_that_keeps_the_island_carries_its_price_and_fp16_does_not():
    from trtwidgets.core.plan.planner import plan
    from trtwidgets.core.qdq.options import QdqOptions

    p = plan(log_spectrum(), spectra(24), options=QdqOptions(trt_version="10.16"), progress=False, regions=False)
    fp16, island = p.candidates[0], p.candidates[1]
    assert island.name.startswith("FP16 with an FP32 island")
    priced = next(n for n in p.notes if n.startswith("the FP32 island ("))
    extra = float(priced.split("+")[1].split(" us")[0])
    assert extra > 0 and "reformats at its edges" in priced
    assert island.latency_us == pytest.approx(fp16.latency_us + extra, abs=0.06)
    assert island.latency_us > fp16.latency_us  # FP16 as given keeps nothing FP32: not charged
    int8 = [c for c in p.candidates if c.quantized]
    assert int8 and all(c.latency_us >= extra for c in int8)
