"""Inputs and a small model for notebook 19 (explicit quantization with dynamic shapes).

:func:`text_lines_at` gives the demo's labelled text lines at another width than the 192 the classifier
was made for, as an application with a dynamic-width engine would feed them: the first 96 columns of
each crop (a short line), the crop itself, or two lines of the same orientation side by side (a long
line, 384 wide). :func:`sum_pool_model` is a sequence classifier, made with ``onnx.helper``, whose
pooled features are a *sum* over the tokens, so their range grows with the sequence length;
:func:`tokens` gives its inputs. Plumbing the notebook would otherwise write in its cells; nothing in
:mod:`trtwidgets.core` imports this module.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["WIDTHS", "FEATURES", "text_lines_at", "sum_pool_model", "tokens"]

#: The widths :func:`text_lines_at` makes: the recorded dynamic builds' profile (min, opt, max).
WIDTHS = (96, 192, 384)
#: Features per token of :func:`sum_pool_model`, its hidden units and classes.
FEATURES, HIDDEN, CLASSES = 16, 32, 4
#: The opset of the model made here.
OPSET = 13


def text_lines_at(width: int, part: str = "held_back", n_lines: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """The demo's labelled text lines at ``width`` columns: model input and labels.

    Parameters
    ----------
    width : {96, 192, 384}
        96: each crop's first 96 columns (its first words; a turned line keeps its end, turned);
        192: the crops as they are; 384: each crop followed by the next crop of the same orientation
        (two lines of text, with the padding of the second at the end).
    part : {"held_back", "calibration", "all"}
    n_lines : int
        Only the first ``n_lines`` lines of the part (0: all).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        float32 ``(n, 3, 48, width)`` in [-1, 1], and the int64 label of each sample.
    """
    from .labelled_set import labelled_set

    data = labelled_set(part)
    data = data.first(n_lines) if n_lines else data
    x = data.inputs()
    if width == 96:
        return np.ascontiguousarray(x[..., :96]), data.labels
    if width == 192:
        return x, data.labels
    if width != 384:
        raise ValueError(f"width {width} is not one of {WIDTHS}")
    used = (data.images != 128).any(axis=(1, 3))                  # columns of the line; PAD (128) after it
    ends = np.array([np.flatnonzero(u).max() + 1 if u.any() else 0 for u in used])
    out = np.tile(x[:, :, :, -1:], (1, 1, 1, 384))                # the padding value, everywhere
    nxt = (np.arange(len(x)) + 2) % len(x)                         # samples alternate upright, turned
    for i, j in enumerate(nxt):
        out[i, :, :, :ends[i]] = x[i, :, :, :ends[i]]
        out[i, :, :, ends[i]:ends[i] + 192] = x[j]
    return out, data.labels


def sum_pool_model(seed: int = 19) -> onnx.ModelProto:
    """A sequence classifier with a dynamic batch ``N`` and length ``L``: tokens in, class logits out.

    ``tokens`` float32 ``[N, L, 16]`` -> ``embed`` (MatMul 16x32) -> Tanh -> ``pooled`` (ReduceSum over
    the tokens: grows with ``L``) -> ``classify`` (MatMul 32x4) -> ``logits`` ``[N, 4]``. Random weights
    (seeded): its float outputs are the reference its Q/DQ exports are compared with.
    """
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES)).astype(np.float32)
    w2 = (rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN)).astype(np.float32)
    node = helper.make_node
    nodes = [node("MatMul", ["tokens", "embed.weight"], ["embedded"], name="embed"),
             node("Tanh", ["embedded"], ["features"], name="tanh"),
             node("ReduceSum", ["features", "token_axis"], ["pooled"], name="sum_pool", keepdims=0),
             node("MatMul", ["pooled", "classify.weight"], ["logits"], name="classify")]
    inits = [numpy_helper.from_array(w1, "embed.weight"), numpy_helper.from_array(w2, "classify.weight"),
             numpy_helper.from_array(np.array([1], np.int64), "token_axis")]
    graph = helper.make_graph(nodes, "sum_pool", [helper.make_tensor_value_info("tokens", TensorProto.FLOAT,
                                                                                ["N", "L", FEATURES])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8,
                              producer_name="trtwidgets.demo.dynamic_lesson")
    onnx.checker.check_model(model)
    return model


def tokens(n: int, length: int, seed: int = 0) -> np.ndarray:
    """``n`` sequences of ``length`` tokens, float32 ``(n, length, 16)`` (standard normal, seeded)."""
    return np.random.default_rng(seed).standard_normal((n, length, FEATURES)).astype(np.float32)
