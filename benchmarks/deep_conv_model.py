"""A deep residual CNN built with onnx.helper: >= 300 activation tensors at 480x480 input.

Used by ``benchmarks/calibration.py`` as the "large model" case: a stem with stride 2, then
four stages (240, 120, 60, 30 pixels; 8, 16, 32, 64 channels) of residual blocks
``Conv-Relu-Conv-Add-Relu`` (5 activations each) and a pooled Gemm head.
"""

from __future__ import annotations

from typing import Iterator, Dict

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STAGES = ((8, 4), (16, 12), (32, 24), (64, 24))  # (channels, blocks)
INPUT_SHAPE = (1, 3, 480, 480)


def build(seed: int = 0, stages=STAGES, size: int = 480) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def weight(name, cout, cin, k, gain=1.0):
        std = gain * np.sqrt(2.0 / (cin * k * k))
        inits.append(numpy_helper.from_array(rng.normal(0, std, (cout, cin, k, k)).astype(np.float32), name))
        inits.append(numpy_helper.from_array(rng.normal(0, 0.05, (cout,)).astype(np.float32), name + "_b"))
        return [name, name + "_b"]

    def conv(x, out, cout, cin, k=3, stride=1, gain=1.0):
        nodes.append(helper.make_node("Conv", [x] + weight(out + "_w", cout, cin, k, gain), [out], kernel_shape=[k, k],
                                      pads=[k // 2] * 4, strides=[stride, stride]))
        return out

    x = conv("input", "stem", stages[0][0], 3, 3, 2)
    nodes.append(helper.make_node("Relu", [x], ["stem_relu"]))
    x, cin = "stem_relu", stages[0][0]
    for s, (ch, blocks) in enumerate(stages):
        if s:
            x = conv(x, f"s{s}_down", ch, cin, 3, 2)
            nodes.append(helper.make_node("Relu", [x], [f"s{s}_down_relu"]))
            x = f"s{s}_down_relu"
        for b in range(blocks):
            p = f"s{s}b{b}"
            h = conv(x, f"{p}_conv1", ch, ch)
            nodes.append(helper.make_node("Relu", [h], [f"{p}_relu1"]))
            h = conv(f"{p}_relu1", f"{p}_conv2", ch, ch, gain=0.3)
            nodes.append(helper.make_node("Add", [x, h], [f"{p}_add"]))
            nodes.append(helper.make_node("Relu", [f"{p}_add"], [f"{p}_out"]))
            x = f"{p}_out"
        cin = ch
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"]))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"]))
    inits.append(numpy_helper.from_array(rng.normal(0, 0.1, (cin, 10)).astype(np.float32), "fc_w"))
    inits.append(numpy_helper.from_array(np.zeros(10, np.float32), "fc_b"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"]))
    graph = helper.make_graph(nodes, "deep_resnet", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                                  ["N", 3, size, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def iter_inputs(n: int, seed: int = 0, size: int = 480) -> Iterator[Dict[str, np.ndarray]]:
    """``n`` deterministic smooth random images, one at a time (nothing is kept)."""
    for i in range(n):
        rng = np.random.default_rng(seed * 100003 + i)
        low = rng.normal(0, 1, (1, 3, size // 16, size // 16)).astype(np.float32)
        img = np.repeat(np.repeat(low, 16, axis=2), 16, axis=3)
        img += rng.normal(0, 0.3, img.shape).astype(np.float32)
        yield {"input": img}


if __name__ == "__main__":  # pragma: no cover
    import sys

    onnx.save(build(), sys.argv[1] if len(sys.argv) > 1 else "deep_resnet.onnx")
