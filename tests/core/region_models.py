"""Models with repeated blocks for the region tests (onnx.helper + numpy only; also built on the GPU machine).

* :func:`c2f_stack`: two YOLOv8 C2f blocks of different widths (their bottlenecks are one pattern), a stride-2
  conv between them, then a two-branch head (a branch point);
* :func:`resnet_stack`: two ResNet basic blocks (conv + BN, ReLU after the add);
* :func:`inverted_residuals`: two MobileNetV2/V3 inverted residual blocks (1x1 expand + ReLU, depthwise 3x3 +
  ReLU, 1x1 project, no activation before the add).
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

_RNG = np.random.default_rng(7)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    fan_in = int(np.prod(shape[1:])) or 1
    return numpy_helper.from_array((_RNG.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32), name)


def _b(name: str, c: int) -> onnx.TensorProto:
    return numpy_helper.from_array((_RNG.standard_normal(c) * 0.05).astype(np.float32), name)


def _conv(name: str, x: str, out: str, cin: int, cout: int, k: int, inits: List, stride: int = 1,
          group: int = 1) -> onnx.NodeProto:
    inits += [_w(f"{name}.w", cout, cin // group, k, k), _b(f"{name}.b", cout)]
    return helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [out], name=name, kernel_shape=[k, k],
                            pads=[k // 2] * 4, strides=[stride, stride], group=group)


def _silu(name: str, x: str, out: str) -> List[onnx.NodeProto]:
    return [helper.make_node("Sigmoid", [x], [f"{name}.s"], name=f"{name}/Sigmoid"),
            helper.make_node("Mul", [x, f"{name}.s"], [out], name=f"{name}/Mul")]


def _conv_silu(name: str, x: str, out: str, cin: int, cout: int, k: int, inits: List, stride: int = 1):
    return [_conv(f"{name}/conv", x, f"{name}.c", cin, cout, k, inits, stride)] + _silu(f"{name}/act", f"{name}.c", out)


def _c2f(p: str, x: str, out: str, c: int, inits: List, swap_add: bool = False) -> List[onnx.NodeProto]:
    h = c // 2
    inits.append(numpy_helper.from_array(np.array([h, h], np.int64), f"{p}.split"))
    nodes = _conv_silu(f"{p}/cv1", x, f"{p}.t", c, c, 1, inits)
    nodes += [helper.make_node("Split", [f"{p}.t", f"{p}.split"], [f"{p}.a", f"{p}.b"], name=f"{p}/Split", axis=1)]
    nodes += _conv_silu(f"{p}/m.0/cv1", f"{p}.b", f"{p}.m1", h, h, 3, inits)
    nodes += _conv_silu(f"{p}/m.0/cv2", f"{p}.m1", f"{p}.m2", h, h, 3, inits)
    add_in = [f"{p}.m2", f"{p}.b"] if swap_add else [f"{p}.b", f"{p}.m2"]
    nodes += [helper.make_node("Add", add_in, [f"{p}.d"], name=f"{p}/m.0/Add"),
              helper.make_node("Concat", [f"{p}.a", f"{p}.b", f"{p}.d"], [f"{p}.cat"], name=f"{p}/Concat", axis=1)]
    nodes += _conv_silu(f"{p}/cv2", f"{p}.cat", out, 3 * h, c, 1, inits)
    return nodes


def _model(name: str, nodes, x_shape, outputs: Dict[str, list], inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outputs.items()],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def c2f_stack(c: int = 32, hw: int = 16, batch: int = 1, swap_second_add: bool = False) -> onnx.ModelProto:
    """stem -> C2f(c) -> stride-2 conv -> C2f(2c) -> two head branches (conv + SiLU -> conv) each."""
    inits: List = []
    nodes = _conv_silu("stem", "x", "s0", 3, c, 3, inits)
    nodes += _c2f("c2f1", "s0", "f1", c, inits)
    nodes += _conv_silu("down", "f1", "s1", c, 2 * c, 3, inits, stride=2)
    nodes += _c2f("c2f2", "s1", "f2", 2 * c, inits, swap_add=swap_second_add)
    for k in ("box", "cls"):
        nodes += _conv_silu(f"{k}0", "f2", f"{k}.h", 2 * c, c, 3, inits)
        nodes += [_conv(f"{k}1", f"{k}.h", k, c, 8, 1, inits)]
    return _model("c2f_stack", nodes, (batch, 3, hw, hw), {"box": [batch, 8, hw // 2, hw // 2],
                                                          "cls": [batch, 8, hw // 2, hw // 2]}, inits)


def _bn(name: str, x: str, out: str, c: int, inits: List) -> onnx.NodeProto:
    for k, lo, hi in (("g", 0.5, 1.5), ("b", -0.1, 0.1), ("m", -0.1, 0.1), ("v", 0.5, 1.5)):
        inits.append(numpy_helper.from_array(_RNG.uniform(lo, hi, c).astype(np.float32), f"{name}.{k}"))
    return helper.make_node("BatchNormalization", [x] + [f"{name}.{k}" for k in "gbmv"], [out], name=name)


def resnet_stack(c: int = 32, hw: int = 16, batch: int = 1) -> onnx.ModelProto:
    """stem -> two basic blocks (conv-BN-ReLU, conv-BN, + shortcut, ReLU) -> conv."""
    inits: List = []
    nodes = [_conv("stem", "x", "s.c", 3, c, 3, inits), helper.make_node("Relu", ["s.c"], ["s0"], name="stem/relu")]
    t = "s0"
    for i in range(2):
        p = f"layer{i}"
        nodes += [_conv(f"{p}/conv1", t, f"{p}.a", c, c, 3, inits), _bn(f"{p}/bn1", f"{p}.a", f"{p}.ab", c, inits),
                  helper.make_node("Relu", [f"{p}.ab"], [f"{p}.r"], name=f"{p}/relu1"),
                  _conv(f"{p}/conv2", f"{p}.r", f"{p}.c", c, c, 3, inits), _bn(f"{p}/bn2", f"{p}.c", f"{p}.cb", c, inits),
                  helper.make_node("Add", [f"{p}.cb", t], [f"{p}.s"], name=f"{p}/add"),
                  helper.make_node("Relu", [f"{p}.s"], [f"{p}.o"], name=f"{p}/relu2")]
        t = f"{p}.o"
    nodes += [_conv("head", t, "y", c, c, 1, inits)]
    return _model("resnet_stack", nodes, (batch, 3, hw, hw), {"y": [batch, c, hw, hw]}, inits)


def inverted_residuals(c: int = 32, hw: int = 16, batch: int = 1, expand: int = 4) -> onnx.ModelProto:
    """stem -> two inverted residual blocks (1x1 expand + ReLU, depthwise 3x3 + ReLU, 1x1 project, + x) -> conv."""
    inits: List = []
    nodes = [_conv("stem", "x", "s.c", 3, c, 3, inits), helper.make_node("Relu", ["s.c"], ["s0"], name="stem/relu")]
    t, e = "s0", c * expand
    for i in range(2):
        p = f"ir{i}"
        nodes += [_conv(f"{p}/expand", t, f"{p}.e", c, e, 1, inits),
                  helper.make_node("Relu", [f"{p}.e"], [f"{p}.er"], name=f"{p}/relu1"),
                  _conv(f"{p}/dw", f"{p}.er", f"{p}.d", e, e, 3, inits, group=e),
                  helper.make_node("Relu", [f"{p}.d"], [f"{p}.dr"], name=f"{p}/relu2"),
                  _conv(f"{p}/project", f"{p}.dr", f"{p}.p", e, c, 1, inits),
                  helper.make_node("Add", [t, f"{p}.p"], [f"{p}.o"], name=f"{p}/add")]
        t = f"{p}.o"
    nodes += [_conv("head", t, "y", c, c, 1, inits)]
    return _model("inverted_residuals", nodes, (batch, 3, hw, hw), {"y": [batch, c, hw, hw]}, inits)


def feeds(model: onnx.ModelProto, n: int = 12, seed: int = 3) -> List[Dict[str, np.ndarray]]:
    """``n`` samples of batch 1 for ``model``'s input ``x``."""
    rng = np.random.default_rng(seed)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    shape[0] = 1
    return [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(n)]


def exported_dfl_head(batch: int = 32, anchors: int = 2100) -> onnx.ModelProto:
    """YOLOv8's DFL decoder as its ONNX export writes it (softmax over the last axis, then a Transpose to the conv's
    layout): [N, 64, A] -> [N, 4, A]. ``trtwidgets.core.model.trt_rewrites``' expectation-head rewrite targets it."""
    shape = numpy_helper.from_array(np.array([batch, 4, 16, anchors], dtype=np.int64), "shape4")
    out_shape = numpy_helper.from_array(np.array([batch, 4, anchors], dtype=np.int64), "shape3")
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1), "dfl.w")
    nodes = [helper.make_node("Reshape", ["x", "shape4"], ["r"], name="dfl/Reshape"),
             helper.make_node("Transpose", ["r"], ["t"], name="dfl/Transpose", perm=[0, 3, 1, 2]),
             helper.make_node("Softmax", ["t"], ["s"], name="dfl/Softmax", axis=3),
             helper.make_node("Transpose", ["s"], ["u"], name="dfl/Transpose_1", perm=[0, 3, 2, 1]),
             helper.make_node("Conv", ["u", "dfl.w"], ["c"], name="dfl/conv/Conv"),
             helper.make_node("Reshape", ["c", "shape3"], ["y"], name="dfl/Reshape_1")]
    g = helper.make_graph(nodes, "dfl_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 64, anchors])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, anchors])],
                          [shape, out_shape, w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def planned_c2f(folder, regions: bool = False):
    """``(plan, path)``: :func:`c2f_stack` saved in ``folder`` and planned for TensorRT 8.6 (cosine 0.95), the region
    search on or off; the export rewrites both C2f blocks."""
    import trtwidgets as tw
    from trtwidgets.core.qdq.options import QdqOptions

    model = c2f_stack()
    path = folder / "c2f.onnx"
    onnx.save(model, str(path))
    plan = tw.plan(str(path), feeds(model, 16), progress=False, options=QdqOptions(trt_version="8.6"),
                   target=tw.PlanTarget(cosine=0.95), regions=regions)
    return plan, path
