"""Synthetic engine-inspector JSON, written the way TensorRT writes it.

Every builder here is ``synthetic_*``: hand-made, faithful to what TensorRT 8.6
emits with ProfilingVerbosity.DETAILED (field names, English format strings,
``TacticName``/``TacticValue``, ``StreamId``, ``Metadata`` with raw ``\\x1e``
separators that make the text invalid for strict JSON parsers), and the
TensorRT 11 variant that splits ``Datatype``/``Format`` and lists ``I/O Tensors``.
The real TensorRT 8.6 outputs live under ``tests/fixtures/trt86/``.
"""

from __future__ import annotations

import json
from typing import List, Optional, Sequence

LINEAR_FP32 = "Row major linear FP32"
LINEAR_FP16 = "Row major linear FP16 format"
HWC8_FP16 = "Channel major FP16 format where channel % 8 == 0"
CHW4_INT8 = "Four wide channel vectorized row major Int8 format"
CHW32_INT8 = "Thirty-two wide channel vectorized row major Int8 format"
CHW32_FP16 = "Thirty-two wide channel vectorized row major FP16 format"
LINEAR_INT32 = "Row major linear Int32"
NA = "N/A due to dynamic shapes"


def tensor(name: str, dims: Sequence[int], fmt: str) -> dict:
    return {"Name": name, "Location": "Device", "Dimensions": list(dims), "Format/Datatype": fmt}


def metadata(*nodes: str) -> str:
    return "\x1e".join(f"[ONNX Layer: {n}]" for n in nodes)


def conv(name: str, nodes: Sequence[str], inp: dict, out: dict, weights: str = "Float", bias: str = "Float",
         count: int = 432, outmaps: int = 16, tactic: str = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc",
         layer_type: str = "CaskConvolution", extra_inputs: Sequence[dict] = ()) -> dict:
    return {
        "Name": name, "LayerType": layer_type, "Inputs": [inp, *extra_inputs], "Outputs": [out],
        "ParameterType": "Convolution", "Kernel": [3, 3], "PaddingMode": "kEXPLICIT_ROUND_DOWN",
        "PrePadding": [1, 1], "PostPadding": [1, 1], "Stride": [1, 1], "Dilation": [1, 1],
        "OutMaps": outmaps, "Groups": 1, "Weights": {"Type": weights, "Count": count},
        "Bias": {"Type": bias, "Count": outmaps}, "HasBias": 1, "HasReLU": 1, "HasSparseWeights": 0,
        "HasDynamicFilter": 0, "HasDynamicBias": 0, "HasResidual": 0, "ConvXAsActInputIdx": -1,
        "BiasAsActInputIdx": -1, "ResAsActInputIdx": -1, "Activation": "RELU",
        "TacticName": tactic, "TacticValue": "0x8a0f3b5a6c1e2d01", "StreamId": 0, "Metadata": metadata(*nodes),
    }


def simple(name: str, layer_type: str, inputs: List[dict], outputs: List[dict], parameter_type: Optional[str] = None,
           nodes: Sequence[str] = (), tactic_value: str = "0x0000000000000000", **extra) -> dict:
    d = {"Name": name, "LayerType": layer_type, "Inputs": inputs, "Outputs": outputs}
    if parameter_type:
        d["ParameterType"] = parameter_type
    d.update(extra)
    d["TacticValue"] = tactic_value
    d["StreamId"] = 0
    if nodes:
        d["Metadata"] = metadata(*nodes)
    return d


def trt_text(doc: dict) -> str:
    """Serialise like TensorRT 8.6: one layer object per chunk, raw control characters kept."""
    parts = []
    for layer in doc["Layers"]:
        body = json.dumps(layer, indent=2)
        parts.append(body)
    io_key = "I/O Tensors" if "I/O Tensors" in doc else "Bindings"
    io = doc.get(io_key, [])
    text = '{"Layers": [' + ",".join(parts) + "],\n" + json.dumps(io_key) + ": [" + "\n,".join(
        json.dumps(b) for b in io) + "\n]}\n"
    # TensorRT writes the separators raw; json.dumps escaped them.
    return text.replace("\\u001e", "\x1e").replace("\\u001f", "\x1f")


def saved_build_dir(parent, name: str, doc: dict, recipe):
    """A saved build folder ``parent/name`` as the widgets open it: the inspector JSON of ``doc`` and ``recipe``."""
    d = parent / name
    d.mkdir()
    (d / "engine.graph.json").write_text(trt_text(doc), encoding="utf-8")
    (d / "recipe.json").write_text(recipe.to_json(), encoding="utf-8")
    return d


# --------------------------------------------------------------------------- models


def _cls_like(fmt_in: str, fmt_mid: str, conv_w: str, pool_fmt: str, fc_w: str, soft_fmt: str,
              tactic: str, reformat: bool) -> dict:
    """A small classifier in the shape of the demo cls model: convs, pooling, FC, softmax."""
    x = tensor("x", [1, 3, 48, 192], LINEAR_FP32)
    layers = []
    first_in = x
    if reformat:
        first_in = tensor("Reformatted Input Tensor 0 to conv1 + relu1", [1, 3, 48, 192], fmt_in)
        layers.append(simple("Reformatting CopyNode for Input Tensor 0 to conv1 + relu1", "Reformat", [x], [first_in],
                             "Reformat", Origin="REFORMAT", tactic_value="0x00000000000003e8"))
    layers.append(conv("conv1 + relu1", ["conv1", "relu1"], first_in, tensor("relu1_out", [1, 16, 24, 96], fmt_mid),
                       weights=conv_w, tactic=tactic))
    layers.append(conv("conv2 + relu2", ["conv2", "relu2"], tensor("relu1_out", [1, 16, 24, 96], fmt_mid),
                       tensor("relu2_out", [1, 32, 12, 48], fmt_mid), weights=conv_w, count=4608, outmaps=32,
                       tactic=tactic))
    layers.append(simple("PWN(PWN(hsig_add, hsig_clip), hswish_mul)", "PointWiseV2",
                         [tensor("relu2_out", [1, 32, 12, 48], fmt_mid)], [tensor("hswish_out", [1, 32, 12, 48], fmt_mid)],
                         "PointWise", ["hsig_add", "hsig_clip", "hswish_mul"],
                         TacticName="PointWiseV2", tactic_value="0x0000000000000009"))
    layers.append(simple("gap", "CaskPooling", [tensor("hswish_out", [1, 32, 12, 48], pool_fmt)],
                         [tensor("gap_out", [1, 32, 1, 1], pool_fmt)], "Pooling", ["gap"],
                         PoolingType="AVERAGE", WindowSize=[12, 48], TacticName="sm50_xmma_pooling_coalescedC_NHWC_kAVG",
                         tactic_value="0x56d7b61f084f251e"))
    layers.append(simple("(Unnamed Layer* 9) [Shuffle] + flatten", "NoOp", [tensor("gap_out", [1, 32, 1, 1], pool_fmt)],
                         [tensor("flat_out", [1, 32], pool_fmt)], None, ["flatten"]))
    fc = conv("fc_weight + fc", ["fc"], tensor("flat_out", [1, 32, 1, 1], pool_fmt), tensor("fc_out", [1, 2, 1, 1], soft_fmt),
              weights=fc_w, count=64, outmaps=2, tactic=tactic)
    fc["Kernel"] = [1, 1]
    layers.append(fc)
    layers.append(simple("softmax", "CaskSoftMaxV2", [tensor("fc_out", [1, 2], soft_fmt)],
                         [tensor("probs", [1, 2], LINEAR_FP32 if soft_fmt != NA else NA)], "SoftMax", ["softmax"],
                         tactic_value="0x0000000000000001"))
    return {"Layers": layers, "Bindings": ["x", "probs"]}


def synthetic_fp32() -> dict:
    return _cls_like(LINEAR_FP32, LINEAR_FP32, "Float", LINEAR_FP32, "Float", LINEAR_FP32,
                     "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc", False)


def synthetic_fp16() -> dict:
    return _cls_like(HWC8_FP16, HWC8_FP16, "Half", HWC8_FP16, "Half", LINEAR_FP16,
                     "sm90_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize64x32x64", True)


def synthetic_int8_implicit() -> dict:
    """INT8+FP16 with a calibration cache: the convs run INT8, the pooling stayed FP16."""
    doc = _cls_like(CHW4_INT8, CHW32_INT8, "Int8", HWC8_FP16, "Half", LINEAR_FP16,
                    "sm90_xmma_fprop_implicit_gemm_interleaved_i8i8_i8i32_f32_nchw_vect_c_32kcrs_vect_c_32", True)
    # The pointwise is fused INT8 -> FP16: a reformat feeds the FP16 pooling.
    doc["Layers"][3]["Outputs"][0]["Format/Datatype"] = CHW32_INT8
    doc["Layers"][4]["Inputs"][0]["Name"] = "Reformatted Input Tensor 0 to gap"
    reformat = simple("Reformatting CopyNode for Input Tensor 0 to gap", "Reformat",
                      [tensor("hswish_out", [1, 32, 12, 48], CHW32_INT8)],
                      [tensor("Reformatted Input Tensor 0 to gap", [1, 32, 12, 48], HWC8_FP16)], "Reformat",
                      Origin="REFORMAT", tactic_value="0x00000000000003e8")
    doc["Layers"].insert(4, reformat)
    return doc


#: Tensors the synthetic INT8 build had in its calibration cache (fc_out is missing on purpose).
SYNTHETIC_CACHE = ("x", "relu1_out", "relu2_out", "hswish_out", "gap_out", "flat_out", "probs")


def synthetic_dynamic_na() -> dict:
    """A dynamic-batch engine inspected without an execution context."""
    doc = synthetic_fp16()
    for layer in doc["Layers"]:
        for t in layer["Inputs"] + layer["Outputs"]:
            t["Format/Datatype"] = NA
            t["Dimensions"] = [-1] + t["Dimensions"][1:]
    return doc


def synthetic_names_only() -> dict:
    return {"Layers": [layer["Name"] for layer in synthetic_fp16()["Layers"]], "Bindings": ["x", "probs"]}


_SPLIT = {
    LINEAR_FP32: ("FP32", "LINEAR"), LINEAR_FP16: ("FP16", "LINEAR"), HWC8_FP16: ("FP16", "HWC8"),
    CHW4_INT8: ("Int8", "CHW4"), CHW32_INT8: ("Int8", "CHW32"), NA: (NA, NA),
}


def synthetic_trt11(doc: Optional[dict] = None, datatype_key: str = "Datatype") -> dict:
    """The TensorRT 11 layout: separate Datatype/Format keys, 'I/O Tensors' objects."""
    doc = json.loads(json.dumps(doc or synthetic_int8_implicit()))
    for layer in doc["Layers"]:
        for t in layer["Inputs"] + layer["Outputs"]:
            dtype, form = _SPLIT[t.pop("Format/Datatype")]
            t[datatype_key] = dtype
            t["Format"] = form
    doc.pop("Bindings")
    doc["I/O Tensors"] = [
        {"Name": "x", "IOMode": "Input", "DataType": "FP32", "Dimensions": [1, 3, 48, 192], "Location": "Device",
         "Format": "LINEAR"},
        {"Name": "probs", "IOMode": "Output", "DataType": "FP32", "Dimensions": [1, 2], "Location": "Device",
         "Format": "LINEAR"},
    ]
    return doc


def synthetic_large(n: int = 2000) -> dict:
    """``n`` layers of mixed precision and type, for speed checks."""
    fmts = [CHW32_INT8, HWC8_FP16, LINEAR_FP32]
    layers = []
    prev = "x"
    for i in range(n):
        fmt = fmts[i % 3]
        out = f"t{i}"
        if i % 5 == 4:
            layers.append(simple(f"PWN(add_{i}, relu_{i})", "PointWiseV2", [tensor(prev, [1, 64, 28, 28], fmt)],
                                 [tensor(out, [1, 64, 28, 28], fmt)], "PointWise", [f"add_{i}", f"relu_{i}"]))
        else:
            layers.append(conv(f"conv_{i} + relu_{i}", [f"conv_{i}", f"relu_{i}"], tensor(prev, [1, 64, 28, 28], fmt),
                               tensor(out, [1, 64, 28, 28], fmt), weights={0: "Int8", 1: "Half", 2: "Float"}[i % 3]))
        prev = out
    return {"Layers": layers, "Bindings": ["x", prev]}
