"""A ~20M-parameter U-Net at 480x640 (random He-initialised weights), written with onnx.helper: no torch needed.

Issue 33's CPU time-to-plan target names "a ~20M-parameter U-Net at 480x640". This is the classic
U-Net (Ronneberger et al.): four 2x2 max-pool downsamplings, each level two 3x3 Conv+BatchNorm-free
ReLU pairs, 2x2 stride-2 ConvTranspose upsampling, skip Concats, a 1x1 Conv and a Sigmoid (a per-pixel
mask), at widths 52-104-208-416-832 (20.3M parameters). Weights are random (He-scaled, so activations
keep their size through the depth); the data are scikit-image's photographs resized to 480x640.

    python benchmarks/unet_model.py OUT.onnx [--samples DIR --n 32 --held 8]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import List, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTHS = (52, 104, 208, 416, 832)
H, W = 480, 640


class _Builder:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []
        self.params = 0

    def weight(self, name: str, shape: Tuple[int, ...], fan_in: int) -> str:
        w = (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        self.inits.append(numpy_helper.from_array(w, name))
        self.params += w.size
        return name

    def bias(self, name: str, n: int) -> str:
        b = (self.rng.standard_normal(n) * 0.01).astype(np.float32)
        self.inits.append(numpy_helper.from_array(b, name))
        self.params += n
        return name

    def conv(self, x: str, cin: int, cout: int, name: str, k: int = 3, relu: bool = True) -> str:
        w = self.weight(f"{name}.w", (cout, cin, k, k), cin * k * k)
        b = self.bias(f"{name}.b", cout)
        pad = k // 2
        self.nodes.append(helper.make_node("Conv", [x, w, b], [f"{name}.out"], name=name, kernel_shape=[k, k],
                                           pads=[pad] * 4))
        if not relu:
            return f"{name}.out"
        self.nodes.append(helper.make_node("Relu", [f"{name}.out"], [f"{name}.relu"], name=f"{name}.relu"))
        return f"{name}.relu"

    def up(self, x: str, cin: int, cout: int, name: str) -> str:
        w = self.weight(f"{name}.w", (cin, cout, 2, 2), cin)
        b = self.bias(f"{name}.b", cout)
        self.nodes.append(helper.make_node("ConvTranspose", [x, w, b], [f"{name}.out"], name=name, kernel_shape=[2, 2],
                                           strides=[2, 2]))
        return f"{name}.out"

    def node(self, op: str, inputs: List[str], name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [f"{name}.out"], name=name, **attrs))
        return f"{name}.out"


def unet(widths: Tuple[int, ...] = WIDTHS, seed: int = 0) -> onnx.ModelProto:
    """The U-Net (input ``image`` [N, 3, 480, 640], output ``mask`` [N, 1, 480, 640]); batch dynamic."""
    b = _Builder(seed)
    x, cin, skips = "image", 3, []
    for i, c in enumerate(widths):
        x = b.conv(b.conv(x, cin, c, f"enc{i}.conv1"), c, c, f"enc{i}.conv2")
        cin = c
        if i < len(widths) - 1:
            skips.append((x, c))
            x = b.node("MaxPool", [x], f"enc{i}.pool", kernel_shape=[2, 2], strides=[2, 2])
    for i in reversed(range(len(widths) - 1)):
        skip, c = skips[i]
        x = b.up(x, cin, c, f"dec{i}.up")
        x = b.node("Concat", [x, skip], f"dec{i}.cat", axis=1)
        x = b.conv(b.conv(x, 2 * c, c, f"dec{i}.conv1"), c, c, f"dec{i}.conv2")
        cin = c
    x = b.conv(x, cin, 1, "head", k=1, relu=False)
    b.nodes.append(helper.make_node("Sigmoid", [x], ["mask"], name="sigmoid"))
    graph = helper.make_graph(b.nodes, "unet", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                              ["N", 3, H, W])],
                              [helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["N", 1, H, W])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="unet_model.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def images(n: int, seed: int) -> np.ndarray:
    """``n`` photographs of scikit-image, random crops resized to 480x640, ImageNet-normalised, [n, 3, 480, 640]."""
    from skimage import data, transform

    rng = np.random.default_rng(seed)
    srcs = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket(), data.hubble_deep_field(),
            data.immunohistochemistry(), np.stack([data.camera()] * 3, -1), np.stack([data.moon()] * 3, -1)]
    out = np.empty((n, 3, H, W), np.float32)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    for i in range(n):
        img = srcs[i % len(srcs)][..., :3].astype(np.float32) / 255.0
        h, w = img.shape[:2]
        ch, cw = int(h * rng.uniform(0.6, 1.0)), int(w * rng.uniform(0.6, 1.0))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = transform.resize(img[y:y + ch, x:x + cw], (H, W), anti_aliasing=True)
        out[i] = ((crop - mean) / std).transpose(2, 0, 1)
    return out


def write_samples(folder: Path, x: np.ndarray) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.npz"):
        old.unlink()
    for i in range(len(x)):
        np.savez(folder / f"{i:04d}.npz", image=x[i:i + 1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--samples", help="write calib/ and heldback/ sample folders here")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--held", type=int, default=8)
    args = ap.parse_args(argv)
    model = unet()
    onnx.save(model, args.out)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"wrote {args.out}: {params / 1e6:.1f}M parameters, {len(model.graph.node)} nodes")
    if args.samples:
        x = images(args.n, 7)
        write_samples(Path(args.samples) / "calib", x[:args.n - args.held])
        write_samples(Path(args.samples) / "heldback", x[args.n - args.held:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
