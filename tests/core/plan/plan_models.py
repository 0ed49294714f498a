"""Models for the planner tests: a conv stack whose cost depends on the shape it is planned for."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_stack(channels: int = 64, depth: int = 4, seed: int = 3) -> onnx.ModelProto:
    """``x[N, C, H, W] -> (Conv 3x3 -> Relu) x depth -> GlobalAveragePool``; every dim but C dynamic.

    Planned at 16x64x56x56 it is compute bound (INT8 pays, an estimate of 0.61x FP16, within the zoo's span); at 1x64x8x8 it is launch bound.
    """
    rng = np.random.default_rng(seed)
    nodes, inits, t = [], [], "x"
    for i in range(depth):
        w = (rng.standard_normal((channels, channels, 3, 3)) * np.sqrt(2.0 / (9 * channels))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        inits.append(numpy_helper.from_array(np.full(channels, 0.01, np.float32), f"b{i}"))
        nodes.append(helper.make_node("Conv", [t, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", kernel_shape=[3, 3],
                                      pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        t = f"r{i}"
    nodes.append(helper.make_node("GlobalAveragePool", [t], ["y"], name="gap"))
    graph = helper.make_graph(nodes, "conv_stack",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", channels, 1, 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def feeds(n: int = 24, channels: int = 64, size: int = 8, seed: int = 5):
    rng = np.random.default_rng(seed)
    return [{"x": np.abs(rng.standard_normal((1, channels, size, size))).astype(np.float32)} for _ in range(n)]


def cli_plan_folder(root, trt_version: str, batch: int = 32) -> int:
    """``conv_stack`` and 8 samples under ``root`` (m.onnx, data/), planned by the real ``trtwidgets plan`` into
    ``root/plan``; returns the command's exit status."""
    from trtwidgets.cli import main

    onnx.save(conv_stack(), root / "m.onnx")
    data = root / "data"
    data.mkdir()
    for i, f in enumerate(feeds(8)):
        np.save(data / f"s{i}.npy", f["x"])
    return main(["plan", str(root / "m.onnx"), "--data", str(data), "--out", str(root / "plan"), "--no-progress",
                 "--trt-version", trt_version, "--batch", str(batch)])


def log_spectrum(seed: int = 4) -> onnx.ModelProto:
    """``x[N, 1, 16, 16] -> Conv -> Square -> Add(1e-10) -> Log -> *10/ln10 -> (v - min) / (max - min) -> Conv -> y``.

    A log-spectrogram's front end (basic-pitch's ``normalized_log``): the epsilon is 0 in FP16, so a quiet
    sample (its squares below FP16's smallest subnormal) takes ``Log(0) = -inf`` and the normalization NaN.
    """
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((8, 1, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((4, 8, 3, 3)) * 0.3).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(np.array(1e-10, np.float32), "eps"),
             numpy_helper.from_array(np.array(10.0 / np.log(10.0), np.float32), "db")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="filters", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["c1", "c1"], ["power"], name="square"),
             helper.make_node("Add", ["power", "eps"], ["power_eps"], name="add_eps"),
             helper.make_node("Log", ["power_eps"], ["ln"], name="log"),
             helper.make_node("Mul", ["ln", "db"], ["decibels"], name="to_db"),
             helper.make_node("ReduceMin", ["decibels"], ["lo"], name="min", axes=[1, 2, 3], keepdims=1),
             helper.make_node("Sub", ["decibels", "lo"], ["shifted"], name="shift"),
             helper.make_node("ReduceMax", ["shifted"], ["hi"], name="max", axes=[1, 2, 3], keepdims=1),
             helper.make_node("Div", ["shifted", "hi"], ["normalized"], name="normalize"),
             helper.make_node("Conv", ["normalized", "w2"], ["y"], name="head", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "log_spectrum",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 16, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def spectra(n: int = 16, seed: int = 6):
    """Loud samples, and every third one quiet (1e-6 of the loud ones: its squares underflow in FP16)."""
    rng = np.random.default_rng(seed)
    return [{"x": (rng.standard_normal((1, 1, 16, 16)) * (1e-6 if i % 3 == 2 else 1.0)).astype(np.float32)}
            for i in range(n)]
