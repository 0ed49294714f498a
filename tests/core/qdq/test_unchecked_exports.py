"""Exports inside ``unchecked_exports`` (the planner's) are the exports outside it, byte for byte.

The planner scores dozens of exports of one model; within the context they skip onnx.checker and
share what depends on the source alone (weights' integers and scales, which MatMuls TensorRT 8.x
gives Myelin). Sharing must never leak one export's graph into another's.
"""

from __future__ import annotations

import pytest

from tests.core import qdq_blocks as qb
from tests.core import qdq_family_blocks as fb
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq, unchecked_exports
from trtwidgets.core.qdq.placement import place_qdq


def _amax(model, scale: float):
    tensors = {t for n in model.graph.node for t in n.input} | {o.name for o in model.graph.input}
    return {t: scale * (1 + i % 7) for i, t in enumerate(sorted(tensors))}


def _specs(model):
    layers = sorted({e.node_label for e in place_qdq(model).edges if e.rule == "weighted-op input"})
    assert len(layers) >= 2
    opts = QdqOptions(high_precision="fp32", trt_version="8.6")
    return [QdqSpec(_amax(model, 0.5), opts), QdqSpec(_amax(model, 0.25), opts),
            QdqSpec(_amax(model, 0.5), opts, nodes=frozenset(layers[:1])),
            QdqSpec(_amax(model, 0.5), opts, nodes=frozenset(layers[1:])),
            QdqSpec(_amax(model, 0.5), QdqOptions(high_precision="fp16", trt_version="10.0")),
            QdqSpec(_amax(model, 0.5), QdqOptions(high_precision="fp32", trt_version="8.6", weights_per_channel=False))]


@pytest.mark.parametrize("maker", [fb.vit_attention, qb.encoder_layer])
def test_exports_sharing_a_memo_equal_exports_alone(maker):
    model = maker()
    specs = _specs(model)
    alone = [build_qdq(model, s) for s in specs]
    memo: dict = {}
    with unchecked_exports(model, memo):
        shared = [build_qdq(model, s) for s in specs] + [build_qdq(model, s) for s in reversed(specs)]
    assert memo  # the exports did share something
    for a, b in zip(alone + alone[::-1], shared):
        assert a.model.SerializeToString() == b.model.SerializeToString()
        assert a.report.quantized_layers == b.report.quantized_layers
        assert [w.stored for w in a.report.weights] == [w.stored for w in b.report.weights]


def test_the_memo_is_used_only_for_the_source_it_was_given_with():
    model, other = fb.vit_attention(), fb.vit_attention(seq=32)
    memo: dict = {}
    with unchecked_exports(model, memo):
        got = build_qdq(other, QdqSpec(_amax(other, 0.5), QdqOptions(high_precision="fp32", trt_version="8.6")))
    assert not memo
    want = build_qdq(other, QdqSpec(_amax(other, 0.5), QdqOptions(high_precision="fp32", trt_version="8.6")))
    assert got.model.SerializeToString() == want.model.SerializeToString()
