"""Repeated patterns found by structure (core/qdq/repeated_patterns.py), on built blocks and on the zoo's record."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from tests.conftest import ROOT
from tests.core import region_models as rm
from trtwidgets.core.qdq.repeated_patterns import find_regions

ZOO_RECORD = ROOT / "benchmarks" / "results" / "regions" / "zoo_regions.json"


def _by_kind(model, kind):
    return [p for p in find_regions(model) if p.kind == kind]


def test_a_c2f_bottleneck_at_two_widths_is_one_pattern_with_its_silu_branch_gated():
    (res,) = _by_kind(rm.c2f_stack(), "residual")
    assert [i.anchor for i in res.instances] == ["c2f1/m.0/Add", "c2f2/m.0/Add"]
    assert res.gated
    inst = res.instances[0]
    assert inst.inputs == ("c2f1.b",) and inst.outputs == ("c2f1.d",)
    assert inst.weighted == ("c2f1/m.0/cv1/conv", "c2f1/m.0/cv2/conv")
    assert res.description == "Conv > Sigmoid > Mul > Conv > Sigmoid > Mul > Add"


def test_names_and_the_order_of_an_adds_inputs_do_not_change_the_signature():
    a = _by_kind(rm.c2f_stack(), "residual")[0]
    swapped = rm.c2f_stack(swap_second_add=True)
    assert len(_by_kind(swapped, "residual")[0].instances) == 2  # Add(m2, b) is Add(b, m2)
    renamed = rm.c2f_stack()
    for n in renamed.graph.node:
        n.name = "n" + str(abs(hash(n.name)) % 10 ** 6)
    assert _by_kind(renamed, "residual")[0].signature == a.signature


def test_kernel_geometry_changes_the_signature():
    model = rm.c2f_stack()
    conv = next(n for n in model.graph.node if n.name == "c2f2/m.0/cv2/conv")
    w = next(t for t in model.graph.initializer if t.name == conv.input[1])
    arr = onnx.numpy_helper.to_array(w)[:, :, :1, :1]
    w.CopyFrom(onnx.numpy_helper.from_array(arr.copy(), w.name))
    for a in conv.attribute:
        if a.name == "kernel_shape":
            a.ints[:] = [1, 1]
        if a.name == "pads":
            a.ints[:] = [0, 0, 0, 0]
    sigs = {p.signature for p in _by_kind(model, "residual")}
    assert len(sigs) == 2


def test_concats_with_their_movement_feeders_and_branches_in_canonical_order():
    pats = find_regions(rm.c2f_stack())
    (cat,) = [p for p in pats if p.kind == "concat"]
    assert cat.instances[0].joins == ("c2f1/Split", "c2f1/Concat") and len(cat.instances) == 2
    (branch,) = [p for p in pats if p.kind == "branch"]
    assert branch.instances[0].branches == (("box0/conv", "box1"), ("cls0/conv", "cls1"))


def test_residual_blocks_of_other_families_are_not_gated_and_keep_the_activation_after_the_add():
    (res,) = _by_kind(rm.resnet_stack(), "residual")
    assert not res.gated and len(res.instances) == 2
    assert res.instances[0].nodes[-1] == "layer0/relu2" and res.instances[0].outputs == ("layer0.o",)
    (ir,) = _by_kind(rm.inverted_residuals(), "residual")
    assert not ir.gated and len(ir.instances) == 2 and len(ir.instances[0].weighted) == 3


def test_the_zoo_record_has_each_familys_repeated_blocks():
    doc = json.loads(ZOO_RECORD.read_text())
    assert set(doc) >= {"cls", "det", "rec", "minilm", "resnet", "yolo320", "vit", "captcha", "vad"}

    def repeated(fam, kind):
        return sorted((len(p["instances"]) for p in doc[fam]["patterns"] if p["kind"] == kind), reverse=True)

    yolo = [p for p in doc["yolo320"]["patterns"] if p["kind"] == "residual"]
    assert len(yolo) == 1 and yolo[0]["gated"] and len(yolo[0]["instances"]) == 6  # the six C2f bottlenecks
    assert repeated("yolo320", "concat")[0] == 6 and any(
        p["ops"] == "MaxPool > MaxPool > MaxPool > Concat" for p in doc["yolo320"]["patterns"])  # C2f concats, SPPF
    assert repeated("resnet", "residual")[:2] == [12, 3]  # ResNet-50's identity and projection bottlenecks
    assert repeated("vit", "residual") == [12, 12] and repeated("vit", "branch") == [12]  # attention/MLP, Q K V
    assert repeated("minilm", "residual")[0] == 6 and repeated("minilm", "branch") == [6]
    assert repeated("cls", "residual")[0] == 6 and repeated("cls", "gate")[0] == 9  # MobileNetV3 blocks, SE gates
    assert not any(p["gated"] for fam in ("resnet", "cls", "vit", "minilm") for p in doc[fam]["patterns"])
    assert doc["vad"]["patterns"] == []


@pytest.mark.parametrize("family", ["cls", "det", "rec", "minilm", "resnet", "yolo320"])
def test_todays_finder_gives_the_recorded_patterns_where_the_zoo_is_here(family):
    path = Path("/work/zoo/families") / family / "float.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is not on this machine (benchmarks/zoo_families.py prepares it)")
    doc = json.loads(ZOO_RECORD.read_text())[family]["patterns"]
    got = [{"kind": p.kind, "signature": p.signature, "instances": [i.anchor for i in p.instances]}
           for p in find_regions(onnx.load(str(path)))]
    assert got == [{k: p[k] for k in ("kind", "signature", "instances")} for p in doc]
