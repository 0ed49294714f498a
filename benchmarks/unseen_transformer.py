"""A vision transformer nobody tuned on: written with ``onnx.helper``, for ``benchmarks/auto_ranges.py``.

``python benchmarks/unseen_transformer.py [--out DIR]`` writes ``DIR/float.onnx`` and ``DIR/{calib,heldback}/``
(8 samples each, one ``.npz`` per sample) under ``$TRTWIDGETS_ZOO/unseen`` by default.

The model is what the issue's user brought, in small: a ViT (patch embedding by a strided Conv, a class
token, learned positions, 6 pre-norm blocks of 4-head attention and a 4x MLP, a head on the class token)
whose LayerNorm is written as ``ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div`` with its affine
``Mul / Add``, GELU as ``x * 0.5 * (1 + erf(x / sqrt 2))`` and attention as ``MatMul`` of two activations,
scaled, then ``Softmax``. Its weights are random (seeded) but well conditioned: each layer's scaled by
1/sqrt(fan in), residual branches scaled down with depth, and, as trained transformers have, a few
outlier channels in the residual stream (LayerNorm gains of 8-12 on 3 of 192 channels) and somewhat
sharper attention in later blocks. The inputs are scikit-image's photographs (crops, ImageNet
normalisation): calibration and held-back samples are crops of different photographs.

Well conditioned means: 1% Gaussian noise on the input keeps the logits' cosine above 0.9999
(:func:`input_noise_cosine`; 0.99992 here, the zoo's trained ViT 0.999993). A first version, with the
query/key gain growing to 3.5 in the last block, did not (0.9876): it amplified any perturbation,
and no INT8 range passed (cosine 0.85-0.89 for every method), so its attention gain was lowered to
1.0-1.5, checked by that criterion alone (the noise, not the quantization).

Nothing in the toolkit was tuned on it: the range rule of ``auto`` was chosen on the zoo's families
before this model was first run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
ZOO = Path(os.environ.get("TRTWIDGETS_ZOO", "/work/zoo"))

D, HEADS, DEPTH, MLP, PATCH, SIZE, CLASSES = 192, 4, 6, 768, 16, 128, 32
SEED = 20240611


class _Builder:
    """Nodes and initializers of one graph, with unique names."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []

    def const(self, name: str, value) -> str:
        arr = np.asarray(value)
        arr = arr.astype(np.float32) if arr.dtype.kind == "f" else arr.astype(np.int64)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op_type: str, inputs, name: str, **attrs) -> str:
        out = f"{name}.out"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    def linear(self, x: str, fan_in: int, fan_out: int, name: str, gain: float = 1.0) -> str:
        w = self.rng.normal(0.0, gain / np.sqrt(fan_in), (fan_in, fan_out))
        b = self.rng.normal(0.0, 0.02, fan_out)
        y = self.op("MatMul", [x, self.const(f"{name}.weight", w)], f"{name}/MatMul")
        return self.op("Add", [y, self.const(f"{name}.bias", b)], f"{name}/Add")

    def layernorm(self, x: str, name: str, outliers: bool = False) -> str:
        gamma = 1.0 + self.rng.normal(0.0, 0.1, D)
        if outliers:  # the few large channels trained transformers carry in the residual stream
            gamma[[7, 61, 150]] = [12.0, -9.0, 8.0]
        beta = self.rng.normal(0.0, 0.05, D)
        axes = dict(axes=[-1], keepdims=1)
        mean = self.op("ReduceMean", [x], f"{name}/ReduceMean", **axes)
        d = self.op("Sub", [x, mean], f"{name}/Sub")
        sq = self.op("Pow", [d, self.const(f"{name}.two", np.float32(2.0))], f"{name}/Pow")
        var = self.op("ReduceMean", [sq], f"{name}/ReduceMean_1", **axes)
        eps = self.op("Add", [var, self.const(f"{name}.eps", np.float32(1e-6))], f"{name}/Add")
        std = self.op("Sqrt", [eps], f"{name}/Sqrt")
        norm = self.op("Div", [d, std], f"{name}/Div")
        scaled = self.op("Mul", [norm, self.const(f"{name}.gamma", gamma)], f"{name}/Mul")
        return self.op("Add", [scaled, self.const(f"{name}.beta", beta)], f"{name}/Add_1")

    def gelu(self, x: str, name: str) -> str:
        half = self.op("Div", [x, self.const(f"{name}.sqrt2", np.float32(np.sqrt(2.0)))], f"{name}/Div")
        erf = self.op("Erf", [half], f"{name}/Erf")
        one = self.op("Add", [erf, self.const(f"{name}.one", np.float32(1.0))], f"{name}/Add")
        prod = self.op("Mul", [x, one], f"{name}/Mul")
        return self.op("Mul", [prod, self.const(f"{name}.half", np.float32(0.5))], f"{name}/Mul_1")

    def attention(self, x: str, name: str, sharpness: float) -> str:
        dh = D // HEADS
        qkv = self.linear(x, D, 3 * D, f"{name}/qkv", gain=sharpness)
        heads = self.op("Reshape", [qkv, self.const(f"{name}.shape5", [1, -1, 3, HEADS, dh])], f"{name}/Reshape")
        perm = self.op("Transpose", [heads], f"{name}/Transpose", perm=[2, 0, 3, 1, 4])
        q, k, v = (self.op("Gather", [perm, self.const(f"{name}.i{i}", np.int64(i))], f"{name}/Gather_{i}", axis=0)
                   for i in range(3))
        kt = self.op("Transpose", [k], f"{name}/Transpose_k", perm=[0, 1, 3, 2])
        logits = self.op("MatMul", [q, kt], f"{name}/MatMul")
        scaled = self.op("Div", [logits, self.const(f"{name}.scale", np.float32(np.sqrt(dh)))], f"{name}/Div")
        probs = self.op("Softmax", [scaled], f"{name}/Softmax", axis=-1)
        ctx = self.op("MatMul", [probs, v], f"{name}/MatMul_1")
        back = self.op("Transpose", [ctx], f"{name}/Transpose_1", perm=[0, 2, 1, 3])
        merged = self.op("Reshape", [back, self.const(f"{name}.shape3", [1, -1, D])], f"{name}/Reshape_1")
        return self.linear(merged, D, D, f"{name}/proj", gain=0.5)


def build_model(seed: int = SEED) -> onnx.ModelProto:
    """The unseen ViT (see the module docstring), checked by ``onnx.checker``."""
    b = _Builder(seed)
    grid = SIZE // PATCH
    w = b.rng.normal(0.0, 1.0 / np.sqrt(3 * PATCH * PATCH), (D, 3, PATCH, PATCH))
    patches = b.op("Conv", ["pixel_values", b.const("patch.weight", w), b.const("patch.bias", b.rng.normal(0, 0.02, D))],
                   "patch/Conv", strides=[PATCH, PATCH], kernel_shape=[PATCH, PATCH])
    flat = b.op("Reshape", [patches, b.const("patch.shape", [1, D, grid * grid])], "patch/Reshape")
    tokens = b.op("Transpose", [flat], "patch/Transpose", perm=[0, 2, 1])
    cls = b.const("cls_token", b.rng.normal(0.0, 0.5, (1, 1, D)))
    seq = b.op("Concat", [cls, tokens], "embed/Concat", axis=1)
    x = b.op("Add", [seq, b.const("pos_embed", b.rng.normal(0.0, 0.3, (1, grid * grid + 1, D)))], "embed/Add")
    for i in range(DEPTH):
        name = f"blocks.{i}"
        h = b.layernorm(x, f"{name}/norm1", outliers=True)
        a = b.attention(h, f"{name}/attn", sharpness=1.0 + 0.1 * i)
        x = b.op("Add", [x, a], f"{name}/Add")
        h = b.layernorm(x, f"{name}/norm2", outliers=True)
        m = b.linear(h, D, MLP, f"{name}/mlp/fc1", gain=1.5)
        m = b.gelu(m, f"{name}/mlp/gelu")
        m = b.linear(m, MLP, D, f"{name}/mlp/fc2", gain=1.0 / np.sqrt(DEPTH))
        x = b.op("Add", [x, m], f"{name}/Add_1")
    x = b.layernorm(x, "norm")
    first = b.op("Gather", [x, b.const("cls_index", np.int64(0))], "head/Gather", axis=1)
    logits = b.linear(first, D, CLASSES, "head", gain=2.0)
    graph = helper.make_graph(
        b.nodes, "unseen_vit",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, CLASSES])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="unseen_transformer")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def input_noise_cosine(model: onnx.ModelProto, xs: np.ndarray, rel: float = 0.01, seed: int = 0) -> float:
    """The cosine of the logits with and without Gaussian noise of ``rel`` times the input's std (conditioning)."""
    import onnxruntime as ort

    from trtwidgets.core.accuracy.metrics import cosine_similarity

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    ref = np.concatenate([sess.run(None, {"pixel_values": x[None]})[0] for x in xs])
    noisy = np.concatenate([sess.run(None, {"pixel_values": (x + rel * x.std() * rng.standard_normal(x.shape))
                                            .astype(np.float32)[None]})[0] for x in xs])
    return float(cosine_similarity(ref, noisy))


def samples(split: str, n: int = 8) -> np.ndarray:
    """``n`` crops of scikit-image photographs, ImageNet-normalised NCHW (other photographs per split)."""
    from zoo import _crops, _images, _imagenet

    srcs = (["astronaut", "chelsea", "coffee", "rocket"] if split == "calib"
            else ["camera", "cat", "coins", "hubble_deep_field"])
    return _imagenet(_crops(_images(srcs), n, (SIZE, SIZE), seed=7 if split == "calib" else 8))


def write(out: Path) -> Path:
    """The model and its sample folders under ``out``; returns the model's path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "float.onnx"
    onnx.save(build_model(), str(path))
    for split, folder in (("calib", "calib"), ("heldback", "heldback")):
        d = out / folder
        d.mkdir(exist_ok=True)
        for old in d.glob("*.npz"):
            old.unlink()
        for i, x in enumerate(samples(split)):
            np.savez(d / f"{i:04d}.npz", pixel_values=x[None])
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ZOO / "unseen"))
    args = ap.parse_args(argv)
    print(write(Path(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
