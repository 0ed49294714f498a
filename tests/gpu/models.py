"""Tiny ONNX models for the GPU build tests, built with onnx.helper (numpy + onnx only, Python 3.9).

Static shapes where the test allows: TensorRT 8.6 builds on the GPU machine are
slow, and every tactic it times costs seconds. Every Conv carries
``kernel_shape`` (TensorRT's parser needs it when weights come from a
DequantizeLinear). :func:`conv_relu_reference` computes the FP32 result in
numpy, so a test can check what an engine computes without ONNX Runtime.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
INPUT = "x"


def _model(nodes, inputs, outputs, inits, name="g") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="trtwidgets-gpu-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def conv_relu_weights(channels: int = 32, seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((channels, 3, 3, 3)) * 0.3).astype(np.float32),
        "b1": (rng.standard_normal(channels) * 0.1).astype(np.float32),
        "w2": (rng.standard_normal((channels, channels, 3, 3)) * 0.2).astype(np.float32),
        "b2": (rng.standard_normal(channels) * 0.1).astype(np.float32),
    }


def conv_relu(shape: Sequence[Union[int, str]] = (1, 3, 16, 16), channels: int = 32, seed: int = 0) -> onnx.ModelProto:
    """Conv3x3+Relu, Conv3x3+Relu (node names conv1, relu1, conv2, relu2). A str dim is dynamic.

    conv2 (32 -> 32 channels) is wide enough that TensorRT has INT8 and FP16 kernels for it.
    """
    w = conv_relu_weights(channels, seed)
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    nodes = [
        helper.make_node("Conv", [INPUT, "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["y"], name="relu2"),
    ]
    out_shape = [shape[0], channels, shape[2], shape[3]]
    x = helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)
    return _model(nodes, [x], [y], inits, name="conv_relu")


#: ONNX tensor names of :func:`conv_relu` (TensorRT's parser keeps them), for calibration caches.
CONV_RELU_TENSORS = (INPUT, "c1", "r1", "c2", "y")


def _conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd), np.float64)
    for i in range(3):
        for j in range(3):
            patch = xp[:, :, i:i + h, j:j + wd]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + b[None, :, None, None]


def conv_relu_reference(x: np.ndarray, channels: int = 32, seed: int = 0) -> np.ndarray:
    """What :func:`conv_relu` computes, in float64 numpy."""
    w = conv_relu_weights(channels, seed)
    r1 = np.maximum(_conv2d(x.astype(np.float64), w["w1"], w["b1"]), 0)
    return np.maximum(_conv2d(r1, w["w2"], w["b2"]), 0)


def qdq_conv(shape: Tuple[int, ...] = (1, 16, 16, 16), channels: int = 32, seed: int = 0) -> onnx.ModelProto:
    """An explicitly quantized Conv+Relu: symmetric INT8 Q/DQ on the input and per-channel weights.

    TensorRT 8.6 builds it with FP16+INT8 and fails with FP16 alone ("Int8 precision
    has been set for a layer or layer output, but int8 is not configured in the builder").
    """
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((channels, shape[1], 3, 3)) * 0.3).astype(np.float32)
    w_scale = (np.abs(w).reshape(channels, -1).max(axis=1) / 127.0).astype(np.float32)
    w_q = np.clip(np.round(w / w_scale[:, None, None, None]), -127, 127).astype(np.int8)
    inits = [
        numpy_helper.from_array(np.array(4.0 / 127.0, np.float32), "x_scale"),
        numpy_helper.from_array(np.array(0, np.int8), "x_zp"),
        numpy_helper.from_array(w_q, "w_q"),
        numpy_helper.from_array(w_scale, "w_scale"),
        numpy_helper.from_array(np.zeros(channels, np.int8), "w_zp"),
        numpy_helper.from_array(np.zeros(channels, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", [INPUT, "x_scale", "x_zp"], ["xq"], name="q_x"),
        helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xdq"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["wdq"], name="dq_w", axis=0),
        helper.make_node("Conv", ["xdq", "wdq", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    x = helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], channels, shape[2], shape[3]])
    return _model(nodes, [x], [y], inits, name="qdq_conv")


def conv_stack(shape: Tuple[int, int, int, int] = (8, 128, 64, 64), depth: int = 6, seed: int = 0) -> onnx.ModelProto:
    """``depth`` x (Conv3x3 C->C + Relu) at a size where reduced precision pays off on an H200.

    Node names conv{i}, relu{i}; tensors x, c{i}, r{i}, last output y. With
    8x128x64x64 every conv is ~10 GFLOP: tensor-core FP16/INT8 kernels beat FP32
    by far (a larger stack ran INT8 at 0.49x the FP16 time there), unlike the tiny
    :func:`conv_relu`, where TensorRT may keep FP32. He-scaled weights keep the
    activations of the order of 1.
    """
    n, c, h, w = shape
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    prev = INPUT
    for i in range(1, depth + 1):
        wt = (rng.standard_normal((c, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
        inits += [numpy_helper.from_array(wt, f"w{i}"),
                  numpy_helper.from_array((rng.standard_normal(c) * 0.05).astype(np.float32), f"b{i}")]
        out = "y" if i == depth else f"r{i}"
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", kernel_shape=[3, 3],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [out], name=f"relu{i}")]
        prev = out
    x = helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [n, c, h, w])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, c, h, w])
    return _model(nodes, [x], [y], inits, name="conv_stack")


def conv_stack_tensors(depth: int = 6) -> Tuple[str, ...]:
    """ONNX tensor names of :func:`conv_stack`, for a calibration cache."""
    names = [INPUT]
    for i in range(1, depth + 1):
        names += [f"c{i}", "y" if i == depth else f"r{i}"]
    return tuple(names)


def save(model: onnx.ModelProto, path: Union[str, Path]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def feeds(shape: Sequence[int], n: int, seed: int = 1, name: str = INPUT):
    """``n`` feeds of ``shape`` with smooth, image-like values (calibration data for the tiny models)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = rng.standard_normal(tuple(shape)).astype(np.float32)
        out.append({name: np.clip(base, -3, 3).astype(np.float32)})
    return out


def amax_for(tensors: Sequence[str], value: float = 4.0, overrides: Optional[Dict[str, float]] = None) -> Dict[str, float]:
    d = {t: float(value) for t in tensors}
    d.update(overrides or {})
    return d
