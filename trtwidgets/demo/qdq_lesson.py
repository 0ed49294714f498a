"""Small models for notebook 17 (Q/DQ propagation and scale unification), built with ``onnx.helper``.

:func:`one_op` runs a single ONNX operator in ONNX Runtime, so the notebook can ask whether quantizing
before or after an op gives the same codes; :func:`concat_block` is a block whose two branches, joined by a
Concat, have ranges several times apart. Both are plumbing the notebook would otherwise write in its cells;
nothing in :mod:`trtwidgets.core` imports this module.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["OPSET", "one_op", "concat_block", "block_inputs"]

#: The opset of the models made here.
OPSET = 13


def one_op(op_type: str, x: np.ndarray, constants: Sequence[np.ndarray] = (), **attributes: Any) -> np.ndarray:
    """``op_type`` applied to ``x`` by ONNX Runtime (a model of one node).

    Parameters
    ----------
    op_type : str
        An ONNX operator of the default domain, e.g. ``"MaxPool"``.
    x : numpy.ndarray
        The float32 input.
    constants : sequence of numpy.ndarray
        Further inputs, written as initializers (an empty array is an omitted optional input, e.g. Resize's ``roi``).
    **attributes
        The node's attributes (``kernel_shape=[2, 2]``).

    Returns
    -------
    numpy.ndarray
        The node's output.
    """
    from ..core.qdq.validate import run_model

    names = [f"c{i}" if np.size(c) else "" for i, c in enumerate(constants)]
    inits = [numpy_helper.from_array(np.asarray(c), n) for c, n in zip(constants, names) if n]
    node = helper.make_node(op_type, ["x", *names], ["y"], name=op_type.lower(), **attributes)
    graph = helper.make_graph([node], op_type, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    outputs, _ = run_model(model, [{"x": np.asarray(x, dtype=np.float32)}])
    return outputs["y"]


def _conv(rng: np.random.Generator, name: str, x: str, cin: int, cout: int, k: int, gain: float):
    """A Conv + Relu of ``cout`` filters (He-scaled weights times ``gain``), its nodes and initializers."""
    w = (rng.standard_normal((cout, cin, k, k)) * gain * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
    nodes = [helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_y"], name=name, pads=[k // 2] * 4),
             helper.make_node("Relu", [f"{name}_y"], [f"{name}_out"], name=f"{name}_relu")]
    return nodes, [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(np.zeros(cout, np.float32),
                                                                                      f"{name}_b")]


def concat_block(gain: float = 6.0, seed: int = 17) -> onnx.ModelProto:
    """``x -> stem -> (branch_a, branch_b) -> Concat -> head``: the branches' outputs ``gain`` times apart.

    Every layer is a 3x3 Conv + Relu (the head 1x1) with He-scaled random weights; ``branch_b``'s are
    multiplied by ``gain``, so its output's range is about ``gain`` times ``branch_a``'s. Input ``x``
    ``[N, 3, 32, 32]``, output ``head_out`` ``[N, 8, 32, 32]``.

    Parameters
    ----------
    gain : float
        How many times larger ``branch_b``'s weights are.
    seed : int
        Seed of the weights.
    """
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    for name, x, cin, cout, k, g in (("stem", "x", 3, 8, 3, 1.0), ("branch_a", "stem_out", 8, 8, 3, 1.0),
                                     ("branch_b", "stem_out", 8, 8, 3, gain), ("head", "cat", 16, 8, 1, 1.0)):
        if name == "head":
            nodes.append(helper.make_node("Concat", ["branch_a_out", "branch_b_out"], ["cat"], name="cat", axis=1))
        n, i = _conv(rng, name, x, cin, cout, k, g)
        nodes += n
        inits += i
    graph = helper.make_graph(nodes, "concat_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                     ["N", 3, 32, 32])],
                              [helper.make_tensor_value_info("head_out", TensorProto.FLOAT, ["N", 8, 32, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model


def block_inputs(batches: int, batch_size: int = 8, seed: int = 0) -> list:
    """``batches`` feeds ``{"x": float32[batch_size, 3, 32, 32]}`` of standard normal values (seeded)."""
    rng = np.random.default_rng(seed)
    feeds: list = []
    for _ in range(batches):
        feed: Dict[str, np.ndarray] = {"x": rng.standard_normal((batch_size, 3, 32, 32)).astype(np.float32)}
        feeds.append(feed)
    return feeds
