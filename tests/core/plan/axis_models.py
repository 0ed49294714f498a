"""Small models whose layout breaks "axis 0 is the batch": time-major outputs, no batch axis, packed detections."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, inits, name) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _w(rng, *shape) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


def time_major_model(named: bool = True, channels: int = 8, classes: int = 12, steps: int = 16) -> onnx.ModelProto:
    """``x[N, C, T] -> Transpose -> [T, N, C] -> MatMul -> Relu -> MatMul -> logits[T, N, K]`` (an RNN head's layout).

    ``named``: the output's dims carry the input's ``batch`` name; otherwise the output has no
    declared shape and only the batch-2 run can tell where its batch axis is.
    """
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(_w(rng, channels, 32), "w0"), numpy_helper.from_array(_w(rng, 32, classes), "w1")]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1], name="to_time_major"),
             helper.make_node("MatMul", ["t", "w0"], ["h"], name="fc0"),
             helper.make_node("Relu", ["h"], ["hr"], name="relu0"),
             helper.make_node("MatMul", ["hr", "w1"], ["logits"], name="fc1")]
    dims = [steps, "batch", classes] if named else [None, None, None]
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, dims)
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", channels, steps])], [out],
                  inits, "time_major")


def time_major_feeds(n: int = 12, channels: int = 8, steps: int = 16, seed: int = 2):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, channels, steps)).astype(np.float32)} for _ in range(n)]


def frames_model(frames: int = 94, features: int = 16) -> onnx.ModelProto:
    """``x[94, 16]`` (frames x features, **no batch axis**) ``-> MatMul -> Relu -> MatMul -> Sigmoid -> y[94, 1]``."""
    rng = np.random.default_rng(12)
    inits = [numpy_helper.from_array(_w(rng, features, 32), "w0"), numpy_helper.from_array(_w(rng, 32, 1), "w1")]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"], name="fc0"),
             helper.make_node("Relu", ["h"], ["hr"], name="relu0"),
             helper.make_node("MatMul", ["hr", "w1"], ["z"], name="fc1"),
             helper.make_node("Sigmoid", ["z"], ["y"], name="prob")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [frames, features])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [frames, 1])], inits, "frames")


def frames_feeds(n: int = 10, frames: int = 94, features: int = 16, seed: int = 3):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((frames, features)).astype(np.float32)} for _ in range(n)]


def packed_detector_model(classes: int = 3, size: int = 16, stride_px: float = 640.0) -> onnx.ModelProto:
    """``images[N, 3, 16, 16] -> Conv -> Relu -> Conv -> [N, 4+C, 256]``: boxes in pixels, class scores in [0, 1].

    The YOLOv8 head's packed layout: the 4 box channels carry nearly all of the output's
    energy, so a pooled output cosine cannot see the class scores.
    """
    rng = np.random.default_rng(13)
    k = 4 + classes
    w0 = (rng.standard_normal((16, 3, 3, 3)) * 0.4).astype(np.float32)
    w1 = (rng.standard_normal((k, 16, 1, 1)) * 0.5).astype(np.float32)
    inits = [numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(w1, "w1"),
             numpy_helper.from_array(np.array([0, k, -1], np.int64), "flat"),
             numpy_helper.from_array(np.array([4, classes], np.int64), "split"),
             numpy_helper.from_array(np.array(stride_px, np.float32), "px")]
    nodes = [helper.make_node("Conv", ["images", "w0"], ["c0"], name="stem", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
             helper.make_node("Conv", ["r0", "w1"], ["c1"], name="head", kernel_shape=[1, 1]),
             helper.make_node("Reshape", ["c1", "flat"], ["packed"], name="flatten"),
             helper.make_node("Split", ["packed", "split"], ["box_raw", "cls_raw"], axis=1, name="split"),
             helper.make_node("Sigmoid", ["box_raw"], ["box_unit"], name="box_sig"),
             helper.make_node("Mul", ["box_unit", "px"], ["boxes"], name="box_px"),
             helper.make_node("Sigmoid", ["cls_raw"], ["scores"], name="cls_sig"),
             helper.make_node("Concat", ["boxes", "scores"], ["output0"], axis=1, name="pack")]
    return _model(nodes, [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, size, size])],
                  [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["N", k, size * size])], inits,
                  "packed_detector")


def detector_feeds(n: int = 12, size: int = 16, seed: int = 4):
    rng = np.random.default_rng(seed)
    return [{"images": rng.uniform(0, 1, (1, 3, size, size)).astype(np.float32)} for _ in range(n)]


def pooled_frames_model(features: int = 16) -> onnx.ModelProto:
    """``x[T, 16]`` (frames, T dynamic) ``-> MatMul -> Relu -> ReduceMean over the frames -> y[1, 8]``.

    Axis 0 is dynamic, so it looks like a batch; a batch-2 run (the frames of two samples
    together) does not split into the two samples' outputs, so it is not one.
    """
    rng = np.random.default_rng(14)
    inits = [numpy_helper.from_array(_w(rng, features, 8), "w0")]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"], name="fc0"),
             helper.make_node("Relu", ["h"], ["hr"], name="relu0"),
             helper.make_node("ReduceMean", ["hr"], ["y"], axes=[0], keepdims=1, name="pool")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", features])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits, "pooled_frames")
