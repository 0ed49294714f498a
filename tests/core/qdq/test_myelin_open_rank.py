"""MatMul weights TensorRT 8.6 builds, and which MatMuls the planner takes for Myelin, where ranks are open.

Found in issue 33's zoo run (H200, TensorRT 8.6): PaddleOCR's recognizer reshapes its features with a
target computed from ``Shape -> Slice -> Concat`` (Constant nodes for the bounds), so ONNX shape
inference knows no rank for its transformer's activations, and its weights are Constant nodes (rank 2,
known). The export judged a MatMul by the ranks it could see, the weight's, took the transformer's
projections for a classifier's FC and gave them INT8 weight constants: TensorRT 8.6 put them in Myelin
and failed with ``convertMyelinWeightsToFp32 ... Assertion params.weights.type() != DataType::kINT8``
(``benchmarks/results/peer/zoo_run/superseded/rec-b*.json``). MiniLM's and the ViT's exports, whose projections
had the FP32-on-the-INT8-grid form, built in the same run. Which MatMuls Myelin takes is now read from
the activations' ranks (a computed Reshape target's length followed; for the planner, a sample run's
shapes; a rank still open counts), on the graph before the export rewires any input.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.myelin import myelin_matmuls

from tests.core import qdq_models as qm

C, H, W, D = 4, 2, 6, 8


def _const(name, arr):
    return helper.make_node("Constant", [], [name], name=f"{name}_const", value=numpy_helper.from_array(arr, name))


def projection(target: str) -> onnx.ModelProto:
    """x [1, C, H, W] -> conv -> Transpose -> Reshape -> MatMul (a Constant node's weight [C, D]) -> Add.

    ``target`` is how the Reshape's target is made: ``"constant"`` [1, H*W, C]; ``"sequence"`` the same, computed
    as PaddleOCR's exporter does (the batch sliced from ``Shape``, Constant nodes for the bounds and the rest);
    ``"rows"`` computed the same way as [batch*H*W, C] (rank 2: a classifier FC's input); ``"input"`` read from a
    graph input (no rank anyone can know here).
    """
    rng = np.random.default_rng(3)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])]
    nodes = [helper.make_node("Conv", ["x", "wc"], ["feat"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Transpose", ["feat"], ["feat_t"], name="to_nhwc", perm=[0, 2, 3, 1])]
    if target == "constant":
        nodes.append(_const("seq_shape", np.array([1, H * W, C], np.int64)))
    elif target == "input":
        inputs.append(helper.make_tensor_value_info("seq_shape", TensorProto.INT64, ["n"]))
    else:
        rest = [H * W, C] if target == "sequence" else [C]
        nodes += [helper.make_node("Shape", ["feat_t"], ["shp"], name="shape"),
                  _const("s0", np.array([0], np.int64)), _const("s1", np.array([1], np.int64)),
                  helper.make_node("Slice", ["shp", "s0", "s1"], ["batch"], name="batch_of"),
                  _const("rest", np.array(rest, np.int64)),
                  helper.make_node("Concat", ["batch", "rest"], ["seq_shape"], name="target", axis=0)]
        if target == "rows":  # batch * H * W rows: the batch entry scaled, as [-1, C] would be
            nodes[-1] = helper.make_node("Concat", ["batch", "rest"], ["seq_shape0"], name="target", axis=0)
            nodes += [_const("scale", np.array([H * W, 1], np.int64)),
                      helper.make_node("Mul", ["seq_shape0", "scale"], ["seq_shape"], name="target_rows")]
    nodes += [helper.make_node("Reshape", ["feat_t", "seq_shape"], ["seq"], name="to_sequence"),
              _const("proj_w", (rng.standard_normal((C, D)) * 0.3).astype(np.float32)),
              helper.make_node("MatMul", ["seq", "proj_w"], ["proj"], name="projection"),
              _const("proj_b", (rng.standard_normal(D) * 0.1).astype(np.float32)),
              helper.make_node("Add", ["proj", "proj_b"], ["y"], name="projection_bias")]
    out_shape = [H * W, D] if target == "rows" else [1, H * W, D]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                              [numpy_helper.from_array((rng.standard_normal((C, C, 1, 1)) * 0.3)
                                                       .astype(np.float32), "wc")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def _matmul(model):
    return next(i for i, n in enumerate(model.graph.node) if n.op_type == "MatMul")


def _inferred_rank(model, tensor="seq"):
    inferred = onnx.shape_inference.infer_shapes(model)
    return {v.name: len(v.type.tensor_type.shape.dim) for v in inferred.graph.value_info
            if v.type.tensor_type.HasField("shape")}.get(tensor)


def _myelin(model, version="8.6", **kw):
    return bool(myelin_matmuls(model, [_matmul(model)], version, **kw))


def test_shape_inference_leaves_a_computed_reshape_open():
    # The premise: ONNX shape inference knows the weight's rank (a Constant node's), not the activation's.
    assert _inferred_rank(projection("sequence")) is None
    assert _inferred_rank(projection("rows")) is None
    assert _inferred_rank(projection("constant")) == 3


def test_the_activations_rank_decides_never_the_weights():
    # A computed target's length is followed (rank 3: Myelin; rank 2: an FC, TensorRT's own convolution).
    assert _myelin(projection("sequence")) and _myelin(projection("constant"))
    assert not _myelin(projection("rows"))
    # A rank nobody knows counts (the weight form every TensorRT builds); a sample run's shapes decide it.
    assert _myelin(projection("input"))
    assert not _myelin(projection("input"), shapes={"seq": (H * W, C)})
    assert _myelin(projection("rows"), shapes={"seq": (1, H * W, C)})
    assert not _myelin(projection("sequence"), version="10.16")


def _stored(model, version):
    amax = qm.max_amax(model, qm.random_feeds(model, 4))
    report = build_qdq(model, QdqSpec(amax, QdqOptions(trt_version=version))).report
    return {w.node_label: w.stored for w in report.weights}


def test_the_trt86_export_writes_myelins_matmul_weights_in_the_form_it_builds():
    # Judged on the graph as it reads before the export rewires any input (after it no activation's rank is known).
    for target in ("sequence", "constant"):
        stored = _stored(projection(target), "8.6")
        assert stored["projection"] == "float32 on the int8 grid", target
        assert stored["conv"] == "int8"  # convolutions keep INT8 weight constants
    # An FC (rank 2, TensorRT's own convolution) keeps INT8 constants: the demo's FC built so (H200, TensorRT 8.6,
    # tests/gpu/test_measure_restart.py's "toolkit" engine).
    assert _stored(projection("rows"), "8.6")["projection"] == "int8"
    # TensorRT 10+ has no Myelin rule: INT8 constants there.
    assert _stored(projection("sequence"), "10.16")["projection"] == "int8"


def test_an_svtr_block_as_paddle2onnx_writes_it_gets_myelins_weight_form():
    from tests.core import qdq_blocks as qb

    block = qb.svtr_block()
    assert _inferred_rank(block, "xs") is None  # the premise: shape inference stops at the computed Reshape
    assert _inferred_rank(block, "x_target") == 1  # (it knows the target's own rank, not its length)
    stored = _stored(block, "8.6")
    assert stored == {k: "float32 on the int8 grid" for k in ("q_proj", "k_proj", "v_proj", "o_proj", "fc1", "fc2")}

