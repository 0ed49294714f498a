"""The float part compared with every quantizer held at the reference's integers.

An INT8 QuantizeLinear is a step function: a value next to a rounding boundary moves a whole step for any
change of its input, however small, and a deep Q/DQ model carries that step to its outputs. On the zoo's
text detector (PP-OCRv4 det) rounding only the Q/DQ scales to FP16 (a move of about 2**-12 in where each step
lies, nothing in the float part) takes the FP32 Q/DQ model to cosine 0.987 against itself
(``benchmarks/float_part_zoo.py``); on TensorRT 8.6 the same Q/DQ model's engine with an FP32 float part lands
at 0.9976 against ONNX Runtime's FP32 run, and its FP16-float-part engine at 0.986 against the FP32 one
(``benchmarks/results/trust/float_part_trt``). Any second implementation lands about as far away. Compared end
to end, the float part's precision and the quantizers' steps cannot be told apart.

:func:`compare_held` tells them apart. It runs the reference (the Q/DQ model with its float part in FP32) and
reads every QuantizeLinear's integers; then it runs ``model`` with each QuantizeLinear's output replaced by
the reference's integers, so that every span of float computation between quantizers starts from the same
values on both sides. What differs then is the float part alone, measured where it ends: at the model's
outputs and at the input of every quantizer (an FP16 overflow or a lost value ahead of a quantizer shows
there, where holding the quantizer's output would hide it). The model's own quantizers still run on their
own inputs; how many of their integers moved, and how far, is counted too (a quantizer that writes other
integers than the reference's, beyond the one-step flips of values next to a boundary, fails there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np
import onnx
from onnx import helper

from .storage import fresh_name, tensor_types

__all__ = ["HeldComparison", "Cosine", "compare_held"]

# Integer types whose values ONNX Runtime hands to numpy (FP8 and 4-bit ones are not held: their Q stays).
_HELD_TYPES = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16, onnx.TensorProto.UINT16)


class Cosine:
    """The cosine of two streams of arrays, accumulated batch by batch (nothing is kept)."""

    __slots__ = ("dot", "aa", "bb", "finite", "n", "moved", "far")

    def __init__(self) -> None:
        self.dot = self.aa = self.bb = 0.0
        self.finite, self.n, self.moved, self.far = True, 0, 0, 0

    def add(self, a, b, integers: bool = False) -> None:
        a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
        if a.shape != b.shape:
            self.finite = False
            return
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            self.finite = False
            return
        self.dot += float(a @ b)
        self.aa += float(a @ a)
        self.bb += float(b @ b)
        self.n += a.size
        if integers:
            d = np.abs(a - b)
            self.moved += int(np.count_nonzero(d))
            self.far += int(np.count_nonzero(d > 1))

    @property
    def value(self) -> float:
        if not self.finite:
            return float("nan")
        if self.aa == 0 or self.bb == 0:
            return 1.0 if self.aa == self.bb else 0.0
        return float(self.dot / np.sqrt(self.aa * self.bb))


@dataclass(frozen=True)
class HeldComparison:
    """What :func:`compare_held` measured (cosines against the reference, per name).

    Attributes
    ----------
    outputs : dict of str to float
        Each model output, every quantizer held.
    quantizer_inputs : dict of str to float
        The input of each held quantizer (named by the quantizer's node, or its output).
    quantizer_outputs : dict of str to float
        The integers each held quantizer of ``model`` writes from its own input, against the reference's.
    moved, far : int
        Of ``values`` quantized values, how many differ from the reference's, and by more than one step.
    held : int
        How many quantizers were held.
    not_held : tuple of str
        Quantizers that were not, and why.
    """

    outputs: Mapping[str, float]
    quantizer_inputs: Mapping[str, float] = field(default_factory=dict)
    quantizer_outputs: Mapping[str, float] = field(default_factory=dict)
    moved: int = 0
    far: int = 0
    values: int = 0
    held: int = 0
    not_held: Tuple[str, ...] = ()


def _pairs(model: onnx.ModelProto, reference: onnx.ModelProto, ref_types: Mapping[str, int], not_held: List[str]
           ) -> List[Tuple[onnx.NodeProto, onnx.NodeProto]]:
    """``(reference Q, model Q)`` for each QuantizeLinear of the reference that can be held."""
    by_output: Dict[str, onnx.NodeProto] = {}
    by_name: Dict[str, Optional[onnx.NodeProto]] = {}
    for n in model.graph.node:
        if n.op_type == "QuantizeLinear" and n.output:
            by_output[n.output[0]] = n
            if n.name:
                by_name[n.name] = None if n.name in by_name else n  # a repeated name matches nothing
    ref_outputs = {o.name for o in reference.graph.output}
    model_outputs = {o.name for o in model.graph.output}
    pairs = []
    for n in reference.graph.node:
        if n.op_type != "QuantizeLinear" or not n.output:
            continue
        label = n.name or n.output[0]
        if ref_types.get(n.output[0]) not in _HELD_TYPES:
            not_held.append(f"{label}: its output type is not one numpy holds (FP8, 4-bit)")
            continue
        match = by_output.get(n.output[0]) or (by_name.get(n.name) if n.name else None)
        if match is None:
            not_held.append(f"{label}: not found in the exported model")
        elif n.output[0] in ref_outputs or match.output[0] in model_outputs:
            not_held.append(f"{label}: writes a model output")
        else:
            pairs.append((n, match))
    return pairs


def _runnable_input(name: str, graph: onnx.GraphProto) -> bool:
    """Whether ``name`` is computed by a node (a graph input or initializer needs no comparison)."""
    return name not in {v.name for v in graph.input} and name not in {t.name for t in graph.initializer}


def compare_held(model: onnx.ModelProto, reference: onnx.ModelProto, feeds: Iterable[Mapping[str, np.ndarray]],
                 open_session) -> HeldComparison:
    """Compare ``model`` with ``reference`` on ``feeds``, every quantizer held (see the module docstring).

    Parameters
    ----------
    model : onnx.ModelProto
        The Q/DQ model whose float part is checked (e.g. its :func:`~.storage.storage_emulation`).
    reference : onnx.ModelProto
        The same Q/DQ model with an FP32 float part (and the same scales).
    feeds : iterable of dict
        Input name -> array, one dict per run.
    open_session : callable
        ``open_session(model) -> session`` with ``run(names, feed)`` and ``get_outputs()``.

    Returns
    -------
    HeldComparison
    """
    ref_types, model_types = tensor_types(reference), tensor_types(model)
    not_held: List[str] = []
    pairs = _pairs(model, reference, ref_types, not_held)
    names = [o.name for o in reference.graph.output]

    ref = onnx.ModelProto()
    ref.CopyFrom(reference)
    held = onnx.ModelProto()
    held.CopyFrom(model)
    taken = {x for n in held.graph.node for x in (*n.input, *n.output)} | {v.name for v in held.graph.input} | \
        {t.name for t in held.graph.initializer}
    have_ref = set(names)
    by_out = {n.output[0]: n for n in held.graph.node if n.op_type == "QuantizeLinear" and n.output}
    held_list = []  # (label, reference Q output, reference Q input or None, model's held input, own output, model Q input)
    for r, m in pairs:
        qtype = ref_types[r.output[0]]
        if r.output[0] not in have_ref:
            ref.graph.output.append(helper.make_tensor_value_info(r.output[0], qtype, None))
            have_ref.add(r.output[0])
        r_in = r.input[0] if _runnable_input(r.input[0], reference.graph) and \
            ref_types.get(r.input[0]) is not None else None
        m_in = m.input[0] if _runnable_input(m.input[0], model.graph) and \
            model_types.get(m.input[0]) is not None else None
        if r_in is not None and m_in is not None and r_in not in have_ref:
            ref.graph.output.append(helper.make_tensor_value_info(r_in, ref_types[r_in], None))
            have_ref.add(r_in)
        node = by_out[m.output[0]]
        own = fresh_name(f"{m.output[0]}__own", taken)
        node.output[0] = own
        held.graph.input.append(helper.make_tensor_value_info(m.output[0], qtype, None))
        held.graph.output.append(helper.make_tensor_value_info(own, qtype, None))
        if r_in is not None and m_in is not None:
            held.graph.output.append(helper.make_tensor_value_info(m_in, model_types[m_in], None))
        held_list.append((r.name or r.output[0], r.output[0], r_in if m_in is not None else None, m.output[0], own, m_in))

    ref_sess, held_sess = open_session(ref), open_session(held)
    ref_names = [o.name for o in ref_sess.get_outputs()]
    held_names = [o.name for o in held_sess.get_outputs()]
    held_inputs = {i.name for i in held_sess.get_inputs()}
    ref_inputs = {i.name for i in ref_sess.get_inputs()}
    outs = {n: Cosine() for n in names}
    q_in = {p[0]: Cosine() for p in held_list if p[2] is not None}
    q_out = {p[0]: Cosine() for p in held_list}
    for feed in feeds:
        rv = dict(zip(ref_names, ref_sess.run(ref_names, {k: v for k, v in feed.items() if k in ref_inputs})))
        hf = {k: v for k, v in feed.items() if k in held_inputs}
        hf.update({p[3]: rv[p[1]] for p in held_list})
        hv = dict(zip(held_names, held_sess.run(held_names, hf)))
        for n in names:
            outs[n].add(rv[n], hv[n])
        for label, r_out, r_in, _, own, m_in in held_list:
            if r_in is not None:
                q_in[label].add(rv[r_in], hv[m_in])
            q_out[label].add(rv[r_out], hv[own], integers=True)
    return HeldComparison(
        outputs={n: c.value for n, c in outs.items()},
        quantizer_inputs={k: c.value for k, c in q_in.items()},
        quantizer_outputs={k: c.value for k, c in q_out.items()},
        moved=sum(c.moved for c in q_out.values()), far=sum(c.far for c in q_out.values()),
        values=sum(c.n for c in q_out.values()), held=len(held_list), not_held=tuple(not_held))
