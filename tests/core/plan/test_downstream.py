"""A candidate scored from one cached float run, only downstream of its quantizers (issue 42): the same scores.

Each test compares the shortcut with the whole export run in its own ONNX Runtime session (what the planner did
before), on real models: the bundled PaddleOCR classifier and an attention block whose FP16 float part ONNX
Runtime runs partly in FP32 (a ``Mul`` feeding a ``MatMul`` passes an FP32 value, never rounded to FP16).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets import demo
from trtwidgets.core.model.load import as_loaded
from trtwidgets.core.plan.downstream import DownstreamRuns, changed_closure
from trtwidgets.core.plan.phases import evaluator
from trtwidgets.core.plan.plan_values import PlanTarget
from trtwidgets.core.plan.planner import _planner_options, plan
from trtwidgets.core.qdq.options import QdqOptions

pytest.importorskip("onnxruntime")


def attention_block(seed: int = 7, d: int = 32, tokens: int = 24) -> onnx.ModelProto:
    """``x[1, T, d]``: q, k, v projections, ``softmax(q * 0.18 @ kT) @ v`` (reshaped), an output projection, a residual add
    and an MLP (MatMul, Erf GELU, MatMul): the ViT block's layers, at a size a test runs in a second."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def weight(name, shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32),
                                             name))
        return name

    def node(op, ins, name, **kw):
        nodes.append(helper.make_node(op, ins, [name + "_out"], name=name, **kw))
        return name + "_out"

    q = node("MatMul", ["x", weight("wq", (d, d))], "q")
    k = node("MatMul", ["x", weight("wk", (d, d))], "k")
    v = node("MatMul", ["x", weight("wv", (d, d))], "v")
    inits.append(numpy_helper.from_array(np.array(0.18, np.float32), "scale"))
    qs = node("Mul", [q, "scale"], "qscale")
    kt = node("Transpose", [k], "kt", perm=[0, 2, 1])
    att = node("Softmax", [node("MatMul", [qs, kt], "qk")], "softmax", axis=-1)
    pv = node("MatMul", [att, v], "pv")
    heads = node("Reshape", [pv, node("Shape", [pv], "pv_shape")], "heads")  # a shape computed: ORT keeps it FP16
    o = node("MatMul", [heads, weight("wo", (d, d))], "proj")
    r = node("Add", ["x", o], "residual")
    # LayerNorm as exporters decompose it (the export keeps its variance FP32: Pow, ReduceMean, Add, Sqrt)
    inits.append(numpy_helper.from_array(np.array(2.0, np.float32), "two"))
    inits.append(numpy_helper.from_array(np.array(1e-5, np.float32), "eps"))
    centred = node("Sub", [r, node("ReduceMean", [r], "mean", axes=[-1])], "centred")
    var = node("ReduceMean", [node("Pow", [centred, "two"], "square")], "var", axes=[-1])
    normed = node("Div", [centred, node("Sqrt", [node("Add", [var, "eps"], "var_eps")], "std")], "normed")
    h = node("MatMul", [normed, weight("w1", (d, 2 * d))], "fc1")
    inits.append(numpy_helper.from_array(np.array(0.7071, np.float32), "c"))
    inits.append(numpy_helper.from_array(np.array(1.0, np.float32), "one"))
    inits.append(numpy_helper.from_array(np.array(0.5, np.float32), "half"))
    gelu = node("Mul", [node("Mul", [h, node("Add", [node("Erf", [node("Mul", [h, "c"], "g0")], "g1"), "one"], "g2")],
                             "g3"), "half"], "g4")
    y = node("Add", [r, node("MatMul", [gelu, weight("w2", (2 * d, d))], "fc2")], "out")
    nodes.append(helper.make_node("Identity", [y], ["y"], name="y"))
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, tokens, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, tokens, d])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _evaluator(model, held):
    """The planner's evaluator (FP16 float part, TensorRT 10.16), and an amax per tensor from a float run."""
    loaded = as_loaded(model)
    opts = _planner_options(QdqOptions(trt_version="10.16"))
    ev, _, _ = evaluator(loaded, held, PlanTarget(), opts.replace(high_precision=opts.resolved_high_precision()))
    from trtwidgets.core.calibration.collect import instrumented_model

    names = [o for n in loaded.proto.graph.node for o in n.output]
    out = ev.run(instrumented_model(loaded.proto, names), ev.feeds)
    amax = {t: float(np.max(np.abs(a))) for t, a in out.items() if a.dtype == np.float32 and a.size}
    return ev, amax


def _same_scores(ev, amax, questions):
    """Each question scored by the shortcut and by a whole run: equal in every field, to the last bit."""
    whole = dataclasses.replace(ev, downstream=False)
    for layers in questions:
        fast, slow = ev.score(amax, layers), whole.score(amax, layers)
        assert fast == slow, (layers, fast, slow)
    down = ev._downstream()
    for layers in questions:  # the outputs themselves, past the check of a cache's first answer
        model = ev.export(amax, layers).model
        got = down._outputs(model, ev.feeds)
        if got is not None:
            want = ev.run(model, ev.feeds)
            assert all(np.array_equal(got[k], want[k]) for k in want), layers
    assert isinstance(down, DownstreamRuns) and whole._down is None
    return down


def test_every_layer_alone_scores_the_same_as_its_whole_export_on_an_attention_block():
    rng = np.random.default_rng(3)
    held = [{"x": rng.standard_normal((1, 24, 32)).astype(np.float32)} for _ in range(4)]
    ev, amax = _evaluator(attention_block(), held)
    layers = list(ev.export(amax).report.quantized_layers)
    assert {"qk", "pv", "proj", "fc1", "fc2"} <= set(layers)
    down = _same_scores(ev, amax, [{n} for n in layers] + [None, set(layers[:3])])
    assert down.runs >= 3 and down.checked and down.disabled is None
    # fc2 alone runs from what the cache holds: the LayerNorm's FP32 statistics are fed, not computed again. The
    # residual stream is run again from the block's input: ORT passes it in FP32 from node to node, never as FP16.
    fc2 = ev.export(amax, {"fc2"}).model
    nodes, fed = changed_closure(fc2, down.serialized, down.base_inits, down.cuttable)
    ran = {fc2.graph.node[i].name for i in nodes}
    assert {"mean_out", "std_out"} <= fed <= down.keep
    assert {"fc1", "fc2", "residual"} <= ran and not ran & {"mean", "var", "square", "std"}


def test_a_model_ort_runs_in_fp32_throughout_is_scored_whole():
    """The bundled classifier's FP16 float part runs in FP32 from its input to its output in ONNX Runtime (no FP16
    Conv, HardSigmoid or Mul kernel on the CPU): no tensor can be fed, so every question runs the whole export
    (no cached run is made for nothing), with the same scores."""
    ev, amax = _evaluator(demo.MODEL_PATH, demo.sample_inputs()[:3])
    layers = list(ev.export(amax).report.quantized_layers)
    down = _same_scores(ev, amax, [{n} for n in layers[::4]] + [None])
    assert down.runs == 0 and not down._cache


def test_a_whole_plan_is_the_same_with_and_without_the_shortcut(monkeypatch):
    """A ViT-S-sized block under a target its all-INT8 model misses runs every phase (layer costs, per-tensor
    ranges, the bisection): the same candidates, scores and pick, the cached path having answered questions."""
    rng = np.random.default_rng(3)
    data = [{"x": rng.standard_normal((1, 197, 384)).astype(np.float32)} for _ in range(16)]
    kw = dict(progress=False, target=PlanTarget(cosine=0.9999), regions=False, options=QdqOptions(trt_version="10.16"))
    answered = []
    outputs = DownstreamRuns.outputs

    def counted(self, *args):
        out = outputs(self, *args)
        answered.append(out is not None)
        return out

    monkeypatch.setattr(DownstreamRuns, "outputs", counted)
    fast = plan(attention_block(d=384, tokens=197), data, **kw)
    monkeypatch.setattr(DownstreamRuns, "outputs", lambda self, *args: None)  # every question run whole
    slow = plan(attention_block(d=384, tokens=197), data, **kw)
    assert [(c.name, c.quantized, c.accuracy) for c in fast.candidates] == [
        (c.name, c.quantized, c.accuracy) for c in slow.candidates]
    assert fast.recommended == slow.recommended and fast.reason == slow.reason
    names = [c.name for c in fast.candidates]
    assert any("most worth it" in n for n in names) and any("tuned ranges" in n for n in names)
    assert sum(answered) >= 2  # layer costs of the MLP, downstream of the attention and its LayerNorm
