"""Rule 2's default (both inputs of a residual Add quantized after a gated branch, else the shortcut only) against the
GPU runs that decided it (H200, TensorRT 8.6, builder level 1, batch 32; ``benchmarks/results/regions``).

* ``residual_schemes.json``: ``tests/gpu/test_residual_schemes.py``'s three blocks, each scheme built and timed in 5
  interleaved rounds;
* ``whole_both_b32.json``: the 320x320 YOLOv8n's all-INT8 export with rule 2 as it was (``skip`` on its six C2f
  bottleneck adds) and with ``both``, built and timed in 9 interleaved rounds;
* ``region_b32.json``: ``scripts/gpu_region_search.py`` (``plan measure`` with the region search) on the same model.

The GPU test's own assertions (:mod:`tests.core.residual_evidence`) are held here on the committed layers, and the
export's default is held against what was faster: a rule change that places otherwise fails here.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.core import region_models as rm
from tests.core.residual_evidence import add_fused_in_conv, dequantize_layers, silu_in_conv
from trtwidgets.core.qdq.placement import place_qdq
from trtwidgets.core.qdq.repeated_patterns import find_regions

RESULTS = ROOT / "benchmarks" / "results" / "regions"
BLOCKS = {"c2f": rm.c2f_stack, "resnet": rm.resnet_stack, "inverted_residual": rm.inverted_residuals}


def _load(name):
    return json.loads((RESULTS / name).read_text())


def _paired(a, b):
    """Rounds in which ``a`` ran faster than ``b`` (interleaved: round k of each is one pass)."""
    return sum(1 for x, y in zip(a["round_ms"], b["round_ms"]) if x < y)


@pytest.fixture(scope="module")
def blocks():
    return _load("residual_schemes.json")["engines"]


def test_the_gpu_tests_assertions_hold_on_the_recorded_blocks(blocks):
    skip, both = blocks["c2f skip"], blocks["c2f both"]
    assert silu_in_conv(both["layers"], "m.0/cv2") and not silu_in_conv(skip["layers"], "m.0/cv2")
    assert dequantize_layers(skip["layers"]) and not dequantize_layers(both["layers"])
    assert both["summary"]["reformats"] < skip["summary"]["reformats"]
    for block in ("resnet", "inverted_residual"):
        s, b = blocks[f"{block} skip"], blocks[f"{block} both"]
        assert add_fused_in_conv(s["layers"], "add") and not add_fused_in_conv(b["layers"], "add")


def test_the_default_is_the_scheme_that_ran_faster_in_every_round(blocks):
    for block, make in BLOCKS.items():
        model = make()
        res = next(p for p in find_regions(model) if p.kind == "residual")
        add = res.instances[0].anchor
        reads = sum(1 for e in place_qdq(model, dense_int8=True).edges if e.node_label == add)
        default = "both" if reads == 2 else "skip"
        other = "skip" if default == "both" else "both"
        fast, slow = blocks[f"{block} {default}"], blocks[f"{block} {other}"]
        assert _paired(fast, slow) == len(fast["round_ms"]) == 5, (block, default)
        assert fast["median_ms"] < slow["median_ms"]


def test_on_the_whole_yolo_both_dropped_the_six_shortcut_dequantize_layers_and_ran_faster():
    doc = _load("whole_both_b32.json")
    skip, both = doc["base skip"], doc["base both"]
    assert len(dequantize_layers(skip["layers"])) == 6 and not dequantize_layers(both["layers"])
    assert _paired(both, skip) == 9
    assert both["median_ms"] < skip["median_ms"] - max(skip["spread_ms"], both["spread_ms"])
    assert both["median_ms"] / skip["median_ms"] == pytest.approx(0.914, abs=0.002)
    # Five of six bottlenecks keep their SiLU in the conv; the first (16 channels) runs it as a layer of its own.
    convs = [f"/model.{b}/m.{k}/cv2/" for b, k in ((2, 0), (4, 0), (4, 1), (6, 0), (6, 1), (8, 0))]
    fused = [c for c in convs if silu_in_conv(both["layers"], c)]
    assert fused == convs[1:] and not any(silu_in_conv(skip["layers"], c) for c in convs)


def test_the_region_search_timed_the_bottleneck_and_the_plan_reads_back():
    from trtwidgets.core.plan.plan_artifact import Plan

    doc = _load("region_b32.json")
    plan = Plan.from_dict(doc["plan"], "region_b32.json")
    (pattern,) = plan.regions.patterns
    assert pattern.kind == "residual" and len(pattern.instances) == 6
    skip, both = pattern.scheme("skip"), pattern.scheme("both")
    assert skip.default and skip.timing.ok and both.timing.ok
    # The 16-channel representative showed no difference (1.003x within 0.0003 ms): the search kept the default then.
    assert pattern.chosen == "skip" and "no scheme faster beyond the noise" in pattern.reason
    assert plan.regions.settings["gpu"] == "NVIDIA H200" and plan.regions.settings["rounds"] == 9
    base = doc["engines"]["#1 INT8 everywhere the rules allow (max)"]
    assert base["accuracy"]["meets"] and base["summary"]["reformats"] == 40
