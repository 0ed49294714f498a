"""Tiny static CNN for the runner/bench/debug-build GPU tests, and its numpy reference.

Built with onnx.helper only (the GPU side has numpy, onnx and tensorrt alone).
Conv -> Relu -> Conv -> Relu -> Conv 1x1 -> GlobalAveragePool, batch 2, 32x32:
small enough to build in seconds, large enough that kernels (not launch
overhead) make most of the run time. No MatMul/Gemm: the GPU machine's cuBLAS
is a stub.
"""

from __future__ import annotations

from typing import Dict

import numpy as np
import onnx
from onnx import helper, numpy_helper

SHAPE = (2, 3, 32, 32)
INTERMEDIATES = ("c1", "r1", "c2", "r2", "c3")


def weights(seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32),
        "b1": (rng.standard_normal(16) * 0.1).astype(np.float32),
        "w2": (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32),
        "b2": (rng.standard_normal(16) * 0.1).astype(np.float32),
        "w3": (rng.standard_normal((4, 16, 1, 1)) * 0.3).astype(np.float32),
        "b3": (rng.standard_normal(4) * 0.1).astype(np.float32),
    }


def tiny_cnn(seed: int = 0) -> onnx.ModelProto:
    w = weights(seed)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="conv3", kernel_shape=[1, 1]),
        helper.make_node("GlobalAveragePool", ["c3"], ["y"], name="gap"),
    ]
    g = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [SHAPE[0], 4, 1, 1])],
        [numpy_helper.from_array(v, k) for k, v in w.items()],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    n, c, h, wd = x.shape
    k = w.shape[2]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - k + 1, wd + 2 * pad - k + 1
    cols = np.empty((n, c, k, k, oh, ow))
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + oh, j:j + ow]
    out = np.einsum("nckluv,ockl->nouv", cols, w.astype(np.float64))
    return out + b.astype(np.float64)[None, :, None, None]


def reference(x: np.ndarray, seed: int = 0) -> Dict[str, np.ndarray]:
    """Every tensor of :func:`tiny_cnn`, computed in float64 with numpy."""
    w = weights(seed)
    c1 = _conv(x, w["w1"], w["b1"], 1)
    r1 = np.maximum(c1, 0)
    c2 = _conv(r1, w["w2"], w["b2"], 1)
    r2 = np.maximum(c2, 0)
    c3 = _conv(r2, w["w3"], w["b3"], 0)
    y = c3.mean(axis=(2, 3), keepdims=True)
    return {k: v.astype(np.float32) for k, v in dict(c1=c1, r1=r1, c2=c2, r2=r2, c3=c3, y=y).items()}


def conv_stack(layers: int = 8, batch: int = 16, channels: int = 64, size: int = 56, seed: int = 0) -> onnx.ModelProto:
    """``layers`` 3x3 Conv+Relu at batch x channels x size x size: each conv ~1.8 GMAC, so kernels (not launch
    gaps) make up the run time, which is what a per-layer timing check needs."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = (rng.standard_normal((channels, channels, 3, 3)) * np.sqrt(2.0 / (9 * channels))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1],
                                      kernel_shape=[3, 3]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        x = f"r{i}"
    shape = [batch, channels, size, size]
    g = helper.make_graph(nodes, "conv_stack", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model
