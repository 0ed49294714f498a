"""Placement rule 12 (core/qdq/sibling_layers.py): sibling INT8 convs that all write float are kept float.

The rule's evidence is TensorRT 8.6 itself (``scripts/gpu_border_blocks.py`` on an H200, recorded in
``benchmarks/results/peer/borders_run{1,2}.json``): the rule must say "unbuildable" for exactly the blocks of
``tests/core/qdq_border_blocks.py`` that failed to build there, and the export must never write such a group.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core import qdq_border_blocks as bb
from tests.core.qdq_blocks import simple_amax
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.sibling_layers import applies_to, float_output_siblings

ROOT = Path(__file__).resolve().parents[3]
RECORDS = [ROOT / "benchmarks" / "results" / "peer" / f"borders_run{i}.json" for i in (1, 2)]


def _recorded() -> dict:
    out = {}
    for path in RECORDS:
        for rec in json.loads(path.read_text()):
            out[rec["job"]] = rec
    return out


@pytest.mark.parametrize("name", sorted(bb.BORDER_BLOCKS))
def test_the_rule_says_unbuildable_exactly_where_tensorrt_failed(name):
    rec = _recorded()[name]
    assert rec["status"] in ("built", "build failed"), rec
    groups = float_output_siblings(bb.BORDER_BLOCKS[name][0]())
    assert bool(groups) == (rec["status"] == "build failed"), (name, rec["status"], groups, rec["errors"][:1])
    if groups:
        assert any("chooseHigherPrecision" in e for e in rec["errors"]), rec["errors"]


def test_the_recorded_failures_are_the_chooser_assertion():
    failed = [r for r in _recorded().values() if r["status"] == "build failed"]
    assert failed
    for rec in failed:
        assert any("chooseHigherPrecision::7079" in e and "dt1 == DataType::kFLOAT" in e for e in rec["errors"]), rec


def _export(model, trt_version="8.6", exclude=("s0_next", "s1_next"), nodes=None):
    opts = QdqOptions(high_precision="fp32", trt_version=trt_version, exclude=exclude)
    return build_qdq(model, QdqSpec(simple_amax(model), opts, nodes=nodes))


def test_the_export_keeps_float_output_siblings_float_and_says_why():
    ex = _export(bb.float_siblings())
    assert float_output_siblings(ex.model) == []
    assert not {"s0", "s1"} & set(ex.report.quantized_layers)
    rule12 = {s.node_label: s.reason for s in ex.report.skipped if s.rule == 12}
    assert set(rule12) == {"s0", "s1"}
    assert "chooseHigherPrecision" in rule12["s0"] and "s1" in rule12["s0"]
    assert any("rule 12" in w and "s0, s1" in w for w in ex.report.warnings)


def test_a_node_set_loses_the_siblings_as_a_plan_candidate_would():
    # The planner's candidates are node sets: the siblings leave the set, the readers were never in it.
    ex = _export(bb.float_siblings(), exclude=(), nodes={"c0", "s0", "s1"})
    assert set(ex.report.quantized_layers) == {"c0"}
    assert {s.node_label for s in ex.report.skipped if s.rule == 12} == {"s0", "s1"}
    assert float_output_siblings(ex.model) == []


def test_without_the_float_readers_nothing_is_kept_float():
    ex = _export(bb.float_siblings(), exclude=())
    assert {"s0", "s1", "s0_next", "s1_next"} <= set(ex.report.quantized_layers)
    assert not [s for s in ex.report.skipped if s.rule == 12]


def test_one_sibling_writing_int8_is_enough():
    # s1_next float, s0_next INT8: s0 writes its output quantized, which TensorRT 8.6 builds (siblings_mixed_out).
    ex = _export(bb.float_siblings(), exclude=("s1_next",))
    assert {"s0", "s1"} <= set(ex.report.quantized_layers)
    assert float_output_siblings(ex.model) == []


def test_siblings_of_different_kernels_are_not_grouped():
    ex = _export(bb.float_siblings(kernels=(3, 1)))
    assert {"s0", "s1"} <= set(ex.report.quantized_layers)


def test_the_rule_is_for_tensorrt_8():
    assert applies_to("8.6") and applies_to(None) and applies_to("9.3")
    assert not applies_to("10.16") and not applies_to("11.4")
    ex = _export(bb.float_siblings(), trt_version="10.16")
    assert {"s0", "s1"} <= set(ex.report.quantized_layers)
    assert len(float_output_siblings(ex.model)) == 1
