"""Tiny ONNX models built with onnx.helper for the core tests (no files checked in)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
EVIL = "<img src=x onerror=alert(1)>"


def _model(nodes, inputs, outputs, inits, opset=OPSET, name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="trtwidgets-tests")
    model.ir_version = 8
    return model


def conv_model(batch="N", channels=4, input_name="x", node_name="conv", opset=OPSET) -> onnx.ModelProto:
    """FP32 Conv(3x3) + Relu; ``batch`` a str makes dim 0 dynamic."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((channels, 3, 3, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(np.zeros(channels, np.float32), "B")
    nodes = [helper.make_node("Conv", [input_name, "W", "B"], ["c"], name=node_name, kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    x = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [batch, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, channels, 8, 8])
    return _model(nodes, [x], [y], [w, b], opset=opset)


def matmul_model() -> onnx.ModelProto:
    """FP32 MatMul + Add with a static input, the shape quantize_dynamic turns into MatMulInteger."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "B")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="matmul"),
             helper.make_node("Add", ["m", "B"], ["y"], name="add")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    return _model(nodes, [x], [y], [w, b], opset=13)


def qdq_conv_model(qtype=TensorProto.INT8, zero_point=0, per_channel=False, kernel_shape=True,
                   dynamic_scale=False, zero_point_input=True, batch=1, fp8=False) -> onnx.ModelProto:
    """Q/DQ on the activation and the weights of a Conv, as TensorRT's explicit quantization expects.

    Parameters select the faults lint must catch: ``zero_point`` != 0 (asymmetric),
    ``qtype`` UINT8, ``dynamic_scale`` (activation scale = max|x| / 127 computed in the
    graph), ``kernel_shape=False``, ``fp8`` (FLOAT8E4M3FN, no zero-point values).
    """
    rng = np.random.default_rng(2)
    wq_dtype = np.int8
    w = rng.integers(-127, 128, size=(4, 3, 3, 3)).astype(wq_dtype)
    if fp8:
        qtype = TensorProto.FLOAT8E4M3FN
    inits = []
    if fp8:
        inits.append(helper.make_tensor("Wq", TensorProto.FLOAT8E4M3FN, w.shape, w.astype(np.float32).ravel().tolist()))
    else:
        inits.append(numpy_helper.from_array(w, "Wq"))
    wscale = np.full(4, 0.01, np.float32) if per_channel else np.array(0.01, np.float32)
    inits.append(numpy_helper.from_array(wscale, "w_scale"))
    np_q = {TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8}
    def zp(name, shape=()):
        if fp8:
            return helper.make_tensor(name, TensorProto.FLOAT8E4M3FN, shape, [0.0] * int(np.prod(shape) if shape else 1))
        return numpy_helper.from_array(np.full(shape, zero_point, np_q[qtype]), name)
    inits.append(zp("w_zp", (4,) if per_channel else ()))
    inits.append(zp("x_zp"))
    inits.append(numpy_helper.from_array(np.zeros(4, np.float32), "B"))
    nodes = []
    if dynamic_scale:
        inits.append(numpy_helper.from_array(np.array(127.0, np.float32), "q_max"))
        nodes += [helper.make_node("Abs", ["x"], ["absx"], name="abs"),
                  helper.make_node("ReduceMax", ["absx"], ["amax"], name="amax", keepdims=0),
                  helper.make_node("Div", ["amax", "q_max"], ["x_scale"], name="scale_from_amax")]
    else:
        inits.append(numpy_helper.from_array(np.array(0.02, np.float32), "x_scale"))
    x_q_inputs = ["x", "x_scale", "x_zp"] if zero_point_input else ["x", "x_scale"]
    w_dq_attrs = {"axis": 0} if per_channel else {}
    conv_attrs = {"kernel_shape": [3, 3]} if kernel_shape else {}
    nodes += [
        helper.make_node("QuantizeLinear", x_q_inputs, ["xq"], name="x_quant"),
        helper.make_node("DequantizeLinear", ["xq", "x_scale"] + x_q_inputs[2:], ["xdq"], name="x_dequant"),
        helper.make_node("DequantizeLinear", ["Wq", "w_scale", "w_zp"], ["Wdq"], name="w_dequant", **w_dq_attrs),
        helper.make_node("Conv", ["xdq", "Wdq", "B"], ["y"], name="qconv", pads=[1] * 4, **conv_attrs),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 8, 8])
    return _model(nodes, [x], [y], inits, opset=19 if fp8 else OPSET)


def evil_names_model() -> onnx.ModelProto:
    """A valid model whose input, node and output names are HTML."""
    nodes = [helper.make_node("Relu", [EVIL], ["out<b>bold</b>"], name=EVIL)]
    x = helper.make_tensor_value_info(EVIL, TensorProto.FLOAT, ["<script>", 4])
    y = helper.make_tensor_value_info("out<b>bold</b>", TensorProto.FLOAT, ["<script>", 4])
    return _model(nodes, [x], [y], [])


def op_model(op_type: str, domain: str = "", opset: int = OPSET) -> onnx.ModelProto:
    """One node of ``op_type`` between a float input and output (shape-agnostic; not checker-clean for every op)."""
    nodes = [helper.make_node(op_type, ["x"], ["y"], name=f"my_{op_type}", domain=domain)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    model = _model(nodes, [x], [y], [], opset=opset)
    if domain:
        model.opset_import.append(helper.make_opsetid(domain, 1))
    return model


def int64_model() -> onnx.ModelProto:
    """Reshape with an INT64 shape initializer and an INT64 input (Gather indices)."""
    shape = numpy_helper.from_array(np.array([2, 8], np.int64), "shape")
    data = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(16, 1), "table")
    nodes = [helper.make_node("Gather", ["table", "idx"], ["g"], name="gather"),
             helper.make_node("Reshape", ["g", "shape"], ["y"], name="reshape")]
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    return _model(nodes, [idx], [y], [shape, data])


def save(model: onnx.ModelProto, path: Path, external: bool = False) -> Path:
    path = Path(path)
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data", size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    return path


def quantize_dynamic_model(tmp_path: Path, source: Optional[onnx.ModelProto] = None) -> Path:
    """Really run onnxruntime.quantization.quantize_dynamic on a float model; returns the output path."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src = save(source if source is not None else matmul_model(), tmp_path / "float.onnx")
    out = tmp_path / "dynamic_quant.onnx"
    quantize_dynamic(str(src), str(out), weight_type=QuantType.QInt8)
    return out


def dynamic_quant_matmul_model() -> onnx.ModelProto:
    """What quantize_dynamic makes of a MatMul, built by hand (for places without onnxruntime, e.g. the GPU tests)."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.integers(-127, 128, (16, 8)).astype(np.int8), "W_q"),
             numpy_helper.from_array(np.array(0.01, np.float32), "W_scale"),
             numpy_helper.from_array(np.array(0, np.int8), "W_zp")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["x_q", "x_scale", "x_zp"], name="x_dyn_quant"),
             helper.make_node("MatMulInteger", ["x_q", "W_q", "x_zp", "W_zp"], ["mm"], name="matmul_int"),
             helper.make_node("Cast", ["mm"], ["mm_f"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x_scale", "W_scale"], ["s"], name="scale_mul"),
             helper.make_node("Mul", ["mm_f", "s"], ["y"], name="out_mul")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    return _model(nodes, [x], [y], inits, opset=13)
