"""A user's own models, as a newcomer brings them: every dimension dynamic, exporter-style dim names.

- :func:`dynamic_hw_model`: a small conv net whose input is ``[N, 3, H, W]`` with Paddle2ONNX-style
  names (``p2o.DynamicDimension.0``...), like the text detector of issue 15.
- :func:`encoder_model`: a one-layer transformer encoder with integer inputs ``input_ids`` and
  ``attention_mask`` ``[batch, sequence]``.
- :func:`image_samples` / :func:`token_samples`: folders of ``.npy`` samples (real photographs from
  ``skimage.data``, cut to a size).

Imports only numpy and onnx at module level (skimage inside the function that needs it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
#: The dim_param names Paddle2ONNX writes for a fully dynamic image input.
P2O_DIMS = ("p2o.DynamicDimension.0", "p2o.DynamicDimension.1", "p2o.DynamicDimension.2")


def _init(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(arr), name)


def dynamic_hw_model(seed: int = 0) -> onnx.ModelProto:
    """Conv-BN-ReLU x2, a strided conv, global pooling and a classifier; input ``x`` is ``[N, 3, H, W]``."""
    rng = np.random.default_rng(seed)
    n, h, w = P2O_DIMS
    nodes, inits = [], []

    def conv(name, src, cin, cout, stride=1):
        inits.append(_init(f"{name}.w", (rng.standard_normal((cout, cin, 3, 3)) * (2 / (9 * cin)) ** 0.5).astype(np.float32)))
        inits.append(_init(f"{name}.b", (rng.standard_normal(cout) * 0.1).astype(np.float32)))
        nodes.append(helper.make_node("Conv", [src, f"{name}.w", f"{name}.b"], [f"{name}.out"], name=name,
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride]))
        nodes.append(helper.make_node("Relu", [f"{name}.out"], [f"{name}.relu"], name=f"{name}.act"))
        return f"{name}.relu"

    t = conv("stem", "x", 3, 8)
    t = conv("block1", t, 8, 16, stride=2)
    t = conv("block2", t, 16, 16)
    nodes.append(helper.make_node("GlobalAveragePool", [t], ["pooled"], name="pool"))
    inits.append(_init("flat_shape", np.array([0, -1], dtype=np.int64)))
    nodes.append(helper.make_node("Reshape", ["pooled", "flat_shape"], ["flat"], name="flatten"))
    inits.append(_init("fc.w", (rng.standard_normal((16, 4)) * 0.3).astype(np.float32)))
    inits.append(_init("fc.b", np.zeros(4, np.float32)))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc"))
    graph = helper.make_graph(nodes, "own_detector",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 3, h, w])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [n, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="paddle2onnx")
    onnx.checker.check_model(model)
    return model


def encoder_model(vocab: int = 64, hidden: int = 16, seed: int = 0) -> onnx.ModelProto:
    """Embedding, one self-attention with the mask, and a pooled classifier over ``[batch, sequence]`` int64 inputs."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    inits = [
        _init("emb", (rng.standard_normal((vocab, hidden)) * 0.5).astype(f32)),
        _init("wq", (rng.standard_normal((hidden, hidden)) / hidden ** 0.5).astype(f32)),
        _init("wk", (rng.standard_normal((hidden, hidden)) / hidden ** 0.5).astype(f32)),
        _init("wv", (rng.standard_normal((hidden, hidden)) / hidden ** 0.5).astype(f32)),
        _init("wo", (rng.standard_normal((hidden, 2)) / hidden ** 0.5).astype(f32)),
        _init("axis1", np.array([1], dtype=np.int64)),
        _init("one", np.array(1.0, dtype=f32)),
        _init("neg", np.array(-1e4, dtype=f32)),
        _init("scale", np.array(1 / hidden ** 0.5, dtype=f32)),
    ]
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["embedded"], name="embeddings"),
        helper.make_node("MatMul", ["embedded", "wq"], ["q"], name="query"),
        helper.make_node("MatMul", ["embedded", "wk"], ["k"], name="key"),
        helper.make_node("MatMul", ["embedded", "wv"], ["v"], name="value"),
        helper.make_node("Transpose", ["k"], ["kt"], name="key_t", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores_raw"], name="scores"),
        helper.make_node("Mul", ["scores_raw", "scale"], ["scores_scaled"], name="scale_scores"),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], name="mask_cast", to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis1"], ["mask_b"], name="mask_unsqueeze"),
        helper.make_node("Sub", ["one", "mask_b"], ["mask_inv"], name="mask_invert"),
        helper.make_node("Mul", ["mask_inv", "neg"], ["mask_bias"], name="mask_bias"),
        helper.make_node("Add", ["scores_scaled", "mask_bias"], ["scores_masked"], name="apply_mask"),
        helper.make_node("Softmax", ["scores_masked"], ["probs"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["context"], name="attend"),
        helper.make_node("ReduceMean", ["context", "axis1"], ["pooled"], name="pool", keepdims=0),
        helper.make_node("MatMul", ["pooled", "wo"], ["logits"], name="classifier"),
    ]
    graph = helper.make_graph(
        nodes, "tiny_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "sequence_length"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="pytorch")
    onnx.checker.check_model(model)
    return model


def save(model: onnx.ModelProto, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def photo_crops(n: int, size: Tuple[int, int], seed: int = 0) -> np.ndarray:
    """``n`` real photographs from ``skimage.data``, cut at random places to ``size``: ``(n, 3, H, W)`` in [0, 1]."""
    from skimage import data

    photos = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket()]
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        img = photos[i % len(photos)]
        y = int(rng.integers(0, img.shape[0] - size[0]))
        x = int(rng.integers(0, img.shape[1] - size[1]))
        out.append(img[y:y + size[0], x:x + size[1], :3].transpose(2, 0, 1).astype(np.float32) / 255.0)
    return np.stack(out)


def image_samples(folder: Path, n: int = 8, sizes: Sequence[Tuple[int, int]] = ((96, 128),), seed: int = 0) -> Path:
    """A folder of ``sample_XXX.npy`` files of shape ``1x3xHxW`` (the sizes cycle), normalised like a detector's input."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        size = sizes[i % len(sizes)]
        crop = photo_crops(1, size, seed + i)
        np.save(folder / f"sample_{i:03d}.npy", ((crop - 0.5) / 0.25).astype(np.float32))
    return folder


def token_samples(folder: Path, n: int = 6, seq: int = 12, vocab: int = 64, seed: int = 0) -> Path:
    """A folder of ``.npz`` samples with ``input_ids`` and ``attention_mask`` of shape ``1 x seq``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        ids = rng.integers(1, vocab, size=(1, seq)).astype(np.int64)
        length = int(rng.integers(seq // 2, seq + 1))
        mask = (np.arange(seq) < length).astype(np.int64)[None]
        np.savez(folder / f"sample_{i:03d}.npz", input_ids=ids * mask, attention_mask=mask)
    return folder


def own_engine_doc(h: int = 96, w: int = 128) -> dict:
    """Inspector JSON for an INT8+FP16 engine of :func:`dynamic_hw_model` at ``1x3xHxW``.

    Hand-made in TensorRT 8.6's format (tests/core/inspector_samples.py), since no GPU is at hand
    where these tests run: the convolutions run INT8, the pooling and the classifier FP16.
    """
    from tests.core.inspector_samples import (CHW32_INT8, CHW4_INT8, HWC8_FP16, LINEAR_FP16, LINEAR_FP32, conv, simple,
                                              tensor)

    x = tensor("x", [1, 3, h, w], LINEAR_FP32)
    x8 = tensor("Reformatted Input Tensor 0 to stem + stem.act", [1, 3, h, w], CHW4_INT8)
    stem = tensor("stem.relu", [1, 8, h, w], CHW32_INT8)
    b1 = tensor("block1.relu", [1, 16, h // 2, w // 2], CHW32_INT8)
    b2 = tensor("block2.relu", [1, 16, h // 2, w // 2], HWC8_FP16)
    layers = [
        simple("Reformatting CopyNode for Input Tensor 0 to stem + stem.act", "Reformat", [x], [x8], "Reformat",
               Origin="REFORMAT", tactic_value="0x00000000000003e8"),
        conv("stem + stem.act", ["stem", "stem.act"], x8, stem, weights="Int8", count=216, outmaps=8,
             tactic="sm90_xmma_fprop_implicit_gemm_interleaved_i8i8_i8i32_f32_nchw_vect_c_32kcrs_vect_c_32"),
        conv("block1 + block1.act", ["block1", "block1.act"], stem, b1, weights="Int8", count=1152, outmaps=16,
             tactic="sm90_xmma_fprop_implicit_gemm_interleaved_i8i8_i8i32_f32_nchw_vect_c_32kcrs_vect_c_32"),
        conv("block2 + block2.act", ["block2", "block2.act"], b1, b2, weights="Int8", count=2304, outmaps=16,
             tactic="sm90_xmma_fprop_implicit_gemm_interleaved_i8i8_f16f32_f32_nchw_vect_c_32kcrs_vect_c_32"),
        simple("pool", "CaskPooling", [b2], [tensor("pooled", [1, 16, 1, 1], HWC8_FP16)], "Pooling", ["pool"],
               PoolingType="AVERAGE", WindowSize=[h // 2, w // 2], TacticName="sm50_xmma_pooling_coalescedC_NHWC_kAVG",
               tactic_value="0x56d7b61f084f251e"),
        simple("flatten", "NoOp", [tensor("pooled", [1, 16, 1, 1], HWC8_FP16)], [tensor("flat", [1, 16], HWC8_FP16)],
               None, ["flatten"]),
        simple("fc", "CaskGemmMatrixMultiply", [tensor("flat", [1, 16], LINEAR_FP16)],
               [tensor("logits", [1, 4], LINEAR_FP32)], "MatrixMultiply", ["fc"], tactic_value="0x000000000000001c"),
    ]
    return {"Layers": layers, "Bindings": ["x", "logits"]}


def own_saved_build(parent: Path, recipe, name: str = "detector_int8") -> Path:
    """A saved build folder of :func:`dynamic_hw_model` (see :func:`own_engine_doc`) with ``recipe``."""
    from tests.core.inspector_samples import saved_build_dir

    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    (h, w) = recipe.calibration_shapes["x"][2:]
    return saved_build_dir(parent, name, own_engine_doc(h, w), recipe)
