"""A ResNet-50-shaped ONNX model (v1.5, BatchNorm folded into conv biases) built with onnx.helper.

Random He-initialised weights: the model is for latency and operation counts,
not for predictions. The classifier is a 1x1 convolution on the pooled
features (the same math as the usual Gemm) so that it needs no cuBLAS.

    python benchmarks/resnet50.py OUT.onnx [--batch 32]
"""

from __future__ import annotations

import sys
from typing import List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))


class _Builder:
    def __init__(self, materialize: bool, seed: int):
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []
        self.weight_inputs: List[onnx.ValueInfoProto] = []
        self.materialize = materialize
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def _param(self, name: str, shape, scale: float) -> str:
        if self.materialize:
            arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
            self.inits.append(numpy_helper.from_array(arr, name))
        else:
            # Shape-only: weights as graph inputs, enough for shape inference and op counts.
            self.weight_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True, gain: float = 1.0) -> str:
        self.n += 1
        name = f"conv{self.n}"
        w = self._param(f"{name}.w", (cout, cin, k, k), gain * np.sqrt(2.0 / (cin * k * k)))
        b = self._param(f"{name}.b", (cout,), 0.01)
        y = f"{name}.out"
        p = k // 2
        self.nodes.append(helper.make_node("Conv", [x, w, b], [y], name=name, kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[p, p, p, p]))
        if relu:
            self.nodes.append(helper.make_node("Relu", [y], [f"{name}.relu"], name=f"{name}_relu"))
            return f"{name}.relu"
        return y

    def bottleneck(self, x: str, cin: int, width: int, stride: int, idx: str) -> str:
        cout = width * 4
        h = self.conv(x, cin, width, 1)
        h = self.conv(h, width, width, 3, stride)
        # A small gain on the last conv keeps activations bounded through 16 residual blocks.
        h = self.conv(h, width, cout, 1, relu=False, gain=0.2)
        short = x if (stride == 1 and cin == cout) else self.conv(x, cin, cout, 1, stride, relu=False)
        s = f"block{idx}.sum"
        self.nodes.append(helper.make_node("Add", [h, short], [s], name=f"block{idx}_add"))
        self.nodes.append(helper.make_node("Relu", [s], [f"block{idx}.out"], name=f"block{idx}_relu"))
        return f"block{idx}.out"


def resnet50(batch: int = 32, size: int = 224, classes: int = 1000, seed: int = 0, materialize: bool = True) -> onnx.ModelProto:
    """The model with a static input ``input`` of shape (batch, 3, size, size) and output ``logits`` (batch, classes)."""
    b = _Builder(materialize, seed)
    x = b.conv("input", 3, 64, 7, 2)
    b.nodes.append(helper.make_node("MaxPool", [x], ["pool1"], name="maxpool", kernel_shape=[3, 3], strides=[2, 2],
                                    pads=[1, 1, 1, 1]))
    x, cin = "pool1", 64
    for si, (width, blocks, stride) in enumerate(STAGES):
        for bi in range(blocks):
            x = b.bottleneck(x, cin, width, stride if bi == 0 else 1, f"{si + 1}_{bi + 1}")
            cin = width * 4
    b.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"], name="gap"))
    fc = b.conv("pooled", cin, classes, 1, relu=False)
    b.nodes.append(helper.make_node("Flatten", [fc], ["logits"], name="flatten", axis=1))
    graph = helper.make_graph(
        b.nodes, "resnet50",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])] + b.weight_inputs,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])],
        b.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="trtwidgets-benchmarks")
    model.ir_version = 8
    return model


def main(argv: Optional[List[str]] = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args(argv)
    onnx.save(resnet50(a.batch), a.out)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
