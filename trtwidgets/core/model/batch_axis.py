"""Which axis of each input and output holds the samples: found, never assumed to be axis 0.

A model promises nothing about its batch axis. An LSTM's output is time-major
(``[T, N, C]``), a voice-activity model's input ``[94, 576]`` is one sample of frames x
features with no batch axis at all, and a classifier exported with ``[1, 3, 224, 224]``
has a batch axis of size 1. :func:`find_batch_axes` decides, for each tensor, in order:

1. **the user's word** (``--batch-axis``: :func:`parse_batch_axis`), when given for that tensor;
2. **a dim named like a batch** (``N``, ``batch``, ``batch_size``, ``bs``...: :data:`BATCH_NAMES`);
   an output axis carrying the same ``dim_param`` as an input's batch axis is its batch axis;
3. for inputs, **a dynamic dim**: axis 0 when it is dynamic, else the only dynamic axis;
   a static leading dim of 1 is taken as a batch axis of size 1;
4. for outputs, **a batch-2 run against two batch-1 runs** in ONNX Runtime (imported
   lazily): the axis along which the batch-2 output splits into the two batch-1 outputs;
   where a static batch-1 model cannot run two samples, an output's static leading 1 is
   its batch axis, as its inputs' is;
5. otherwise **no batch axis**: the tensor is one sample, and the model is run sample by sample.

How samples are then cut and joined along these axes, and outputs gathered batch first, is
:mod:`.sample_batches`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

import numpy as np
import onnx

from ..common.errors import UserError
from .load import as_model_proto

__all__ = ["BATCH_NAMES", "BatchAxes", "find_batch_axes", "named_batch_axis", "parse_batch_axis", "probe_output_axes",
           "settle_input_axes", "user_batch_axes"]

#: ``dim_param`` names (lower case, without ``_``, ``-`` or spaces) that mean "the batch".
BATCH_NAMES = ("n", "b", "bs", "batch", "batchsize", "batches", "nbatch", "numbatch", "numsamples", "nsamples",
               "samples", "minibatch", "unkbatch", "batchdim", "dynamicbatch", "batchaxis", "bsz")

Dim = Union[int, str, None]


@dataclass(frozen=True)
class BatchAxes:
    """The batch axis of every input and output (None: the tensor has none).

    Attributes
    ----------
    inputs, outputs : dict
        Tensor name -> axis or None.
    reasons : dict
        Tensor name -> how its axis was found, in words.
    fixed_batch : dict
        Input name -> the size its batch axis must have (a static dim), where it has one.
    """

    inputs: Dict[str, Optional[int]]
    outputs: Dict[str, Optional[int]]
    reasons: Dict[str, str] = field(default_factory=dict)
    fixed_batch: Dict[str, int] = field(default_factory=dict)

    @property
    def batched(self) -> bool:
        """True when samples can be stacked: every input has a batch axis that is not fixed to one size."""
        return bool(self.inputs) and all(a is not None for a in self.inputs.values()) and not self.fixed_batch

    def notes(self) -> Tuple[str, ...]:
        """One line per tensor whose batch axis is not axis 0, or that has none."""
        out = []
        for name, axis in list(self.inputs.items()) + list(self.outputs.items()):
            if axis != 0:
                where = "no batch axis" if axis is None else f"batch axis {axis}"
                out.append(f"{name!r}: {where} ({self.reasons.get(name, '')}).")
        if not self.batched:
            out.append("Samples are run one at a time (the model takes no batch of them).")
        return tuple(out)

    def to_dict(self) -> dict:
        """A JSON-serialisable mapping for plan.json."""
        return {"inputs": dict(self.inputs), "outputs": dict(self.outputs), "reasons": dict(self.reasons),
                "fixed_batch": dict(self.fixed_batch)}


def _dims(value_info: onnx.ValueInfoProto) -> Optional[List[Dim]]:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    out: List[Dim] = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            out.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


def _is_batch_name(name: str) -> bool:
    key = re.sub(r"[\s_\-.]", "", name.lower())
    return key in BATCH_NAMES or key.startswith("batch")


def named_batch_axis(dims: Sequence[Dim]) -> Optional[int]:
    """The first axis whose ``dim_param`` is named like a batch (:data:`BATCH_NAMES`), else None."""
    for i, d in enumerate(dims):
        if isinstance(d, str) and _is_batch_name(d):
            return i
    return None


def _input_axis(dims: Optional[Sequence[Dim]]) -> Tuple[Optional[int], str, Optional[int]]:
    """``(axis, reason, fixed size)`` of one input from its declared dims."""
    if not dims:
        return None, "a scalar or an input without a declared shape", None
    named = named_batch_axis(dims)
    if named is not None:
        return named, f"dim named {dims[named]!r}", None
    dynamic = [i for i, d in enumerate(dims) if not isinstance(d, int) or d <= 0]
    if 0 in dynamic:
        return 0, "axis 0 is dynamic", None
    if len(dynamic) == 1:
        d = dims[dynamic[0]]
        return dynamic[0], f"the only dynamic axis ({'unnamed' if d is None else repr(d)}, axis {dynamic[0]})", None
    if dims[0] == 1 and not dynamic:
        return 0, "a static leading dim of 1", 1
    if dynamic:
        return None, f"several dynamic axes ({', '.join(str(dims[i]) for i in dynamic)}) and none named a batch", None
    return None, f"static shape {list(dims)} with no leading 1 (one sample per run)", None


def parse_batch_axis(text: str) -> Dict[str, Optional[int]]:
    """The CLI's ``--batch-axis``: ``1`` (every tensor), ``none``, or ``NAME:AXIS,NAME:none,...``.

    The key ``"*"`` stands for every tensor not named.

    Raises
    ------
    UserError
        An axis that is not a whole number or ``none``.
    """
    out: Dict[str, Optional[int]] = {}
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        name, sep, value = part.rpartition(":")
        key = name if sep else "*"
        v = value.strip().lower()
        if v in ("none", "-"):
            out[key] = None
            continue
        try:
            out[key] = int(v)
        except ValueError:
            raise UserError(f"--batch-axis {text!r}: {value!r} is not an axis.",
                            "An axis is a whole number (0, 1, -1) or 'none' (the tensor has no batch axis).",
                            "Write e.g. --batch-axis 1, --batch-axis none or --batch-axis input:0,output:1.") from None
    return out


def _user(user: Mapping[str, Optional[int]], name: str, rank: Optional[int]):
    if name in user:
        v = user[name]
    elif "*" in user:
        v = user["*"]
    else:
        return False, None
    if v is not None and rank:
        if not -rank <= v < rank:
            raise UserError(f"--batch-axis gives {name!r} axis {v}, but it has {rank} axes.", None,
                            f"Give an axis from 0 to {rank - 1}, or none.")
        v = v % rank
    return True, v


def find_batch_axes(model, user: Optional[Mapping[str, Optional[int]]] = None,
                    sample: Optional[Mapping[str, np.ndarray]] = None, run: bool = True) -> BatchAxes:
    """The batch axis of every input and output of ``model``.

    Parameters
    ----------
    model : path, LoadedModel or onnx.ModelProto
    user : mapping, optional
        From :func:`parse_batch_axis`: wins for the tensors it names (``"*"``: all).
    sample : mapping, optional
        One real sample per input, batch axis (of size 1) included: used for the batch-2
        run. Without it, random values at the declared shapes are used when all are known.
    run : bool
        Allow the ONNX Runtime check for outputs that names cannot settle.

    Returns
    -------
    BatchAxes
    """
    proto = as_model_proto(model)
    user = dict(user or {})
    init = {i.name for i in proto.graph.initializer}
    inputs: Dict[str, Optional[int]] = {}
    reasons: Dict[str, str] = {}
    fixed: Dict[str, int] = {}
    batch_names = set()
    for vi in [i for i in proto.graph.input if i.name not in init]:
        dims = _dims(vi)
        given, axis = _user(user, vi.name, len(dims) if dims else None)
        if given:
            inputs[vi.name], reasons[vi.name] = axis, "--batch-axis"
            continue
        axis, why, size = _input_axis(dims)
        inputs[vi.name], reasons[vi.name] = axis, why
        if size is not None:
            fixed[vi.name] = size
        if axis is not None and dims is not None and isinstance(dims[axis], str):
            batch_names.add(dims[axis])
    outputs: Dict[str, Optional[int]] = {}
    unsettled = []
    for vi in proto.graph.output:
        dims = _dims(vi)
        given, axis = _user(user, vi.name, len(dims) if dims else None)
        if given:
            outputs[vi.name], reasons[vi.name] = axis, "--batch-axis"
        elif not any(a is not None for a in inputs.values()):
            outputs[vi.name], reasons[vi.name] = None, "no input has a batch axis"
        elif dims and any(d in batch_names for d in dims if isinstance(d, str)):
            axis = next(i for i, d in enumerate(dims) if isinstance(d, str) and d in batch_names)
            outputs[vi.name], reasons[vi.name] = axis, f"carries the inputs' batch dim {dims[axis]!r}"
        elif dims and (named := named_batch_axis(dims)) is not None:
            outputs[vi.name], reasons[vi.name] = named, f"dim named {dims[named]!r}"
        else:
            unsettled.append(vi.name)
    if unsettled:
        probed = probe_output_axes(proto, inputs, sample) if run else {}
        dims_of = {vi.name: _dims(vi) for vi in proto.graph.output}
        fixed_one = bool(fixed) and all(v == 1 for v in fixed.values()) and len(fixed) == len(
            [a for a in inputs.values() if a is not None])
        for name in unsettled:
            leading_one = fixed_one and (dims_of.get(name) or [None])[0] == 1
            if name in probed and not (leading_one and probed[name] != 0):
                outputs[name], reasons[name] = probed[name], "a batch-2 run split into the two batch-1 runs"
            elif leading_one and name in probed:
                # A batch-2 run of a static batch-1 model "split" along another axis: a Reshape with the batch
                # written into its target ([1, -1]) folded the second sample into that axis. The batch is axis 0.
                outputs[name], reasons[name] = 0, ("a static leading dim of 1, as the inputs' fixed batch of 1 (a "
                                                   f"batch-2 run came out along axis {probed[name]}: a Reshape pins "
                                                   "the batch)")
            elif leading_one:
                # A static model of batch 1 (its Reshapes fix the batch, so it cannot run 2): leading 1 as the inputs.
                outputs[name], reasons[name] = 0, "a static leading dim of 1, as the inputs' fixed batch of 1"
            else:
                outputs[name] = None
                reasons[name] = ("the batch-2 check could not run: give --batch-axis" if run else
                                 "not checked: give --batch-axis")
    return BatchAxes(inputs, outputs, reasons, fixed)


def user_batch_axes(batch_axis: Union[None, str, int, Mapping]) -> Dict[str, Optional[int]]:
    """The user's batch axes as a mapping (``"*"``: every tensor not named), as ``--batch-axis`` reads them.

    ``batch_axis`` is None, the CLI's text (``1``, ``none``, ``NAME:AXIS,NAME:none``), an int or a mapping.

    Raises
    ------
    UserError
        Anything else, or text that :func:`parse_batch_axis` refuses.
    """
    if batch_axis is None:
        return {}
    if isinstance(batch_axis, str):
        return parse_batch_axis(batch_axis)
    if isinstance(batch_axis, int) and not isinstance(batch_axis, bool):
        return {"*": batch_axis}
    if isinstance(batch_axis, Mapping):
        return dict(batch_axis)
    raise UserError(f"batch_axis={batch_axis!r} is not a batch axis.",
                    "It is an axis for every tensor, 'none', or tensor name -> axis (None: no batch axis).",
                    "Pass e.g. batch_axis=1, batch_axis='none' or batch_axis={'state': 1}.")


def settle_input_axes(axes: BatchAxes, user: Mapping[str, Optional[int]]) -> BatchAxes:
    """No input batch axis where no output has one: a dynamic axis 0 that a batch-2 run does not split is no batch.

    (An input ``[T, 576]`` of frames with T dynamic looks batched; its LSTM's output does not
    split into two runs' outputs, so the frames are one sample.) The user's axes stand. The
    planner and the calibration reader both settle the axes found this way.
    """
    found = [k for k, a in axes.inputs.items() if a is not None and k not in user and "*" not in user]
    if not found or not axes.outputs or any(a is not None for a in axes.outputs.values()):
        return axes
    if any(k in user for k in axes.outputs) or "*" in user:
        return axes
    reasons = dict(axes.reasons)
    for k in found:
        reasons[k] = (f"{reasons.get(k, '')}, but no output splits along a batch in a batch-2 run: taken as one "
                      "sample (give --batch-axis to say otherwise)")
    return BatchAxes({k: (None if k in found else a) for k, a in axes.inputs.items()}, dict(axes.outputs), reasons, {})


def _random_sample(proto: onnx.ModelProto, inputs: Mapping[str, Optional[int]]) -> Optional[Dict[str, np.ndarray]]:
    from onnx import helper

    rng = np.random.default_rng(0)
    out = {}
    for vi in proto.graph.input:
        if vi.name not in inputs:
            continue
        dims = _dims(vi)
        axis = inputs[vi.name]
        if dims is None:
            return None
        shape = [1 if i == axis else d for i, d in enumerate(dims)]
        if any(not isinstance(d, int) or d <= 0 for d in shape):
            return None
        ints = cast(List[int], shape)
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        out[vi.name] = (rng.standard_normal(ints).astype(dtype) if np.issubdtype(dtype, np.floating)
                        else np.zeros(ints, dtype))

    return out


def _dynamic_copy(proto: onnx.ModelProto, inputs: Mapping[str, Optional[int]]) -> onnx.ModelProto:
    # The batch axes made dynamic and output shapes cleared, so that ONNX Runtime takes a batch of 2.
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for vi in copy.graph.input:
        axis = inputs.get(vi.name)
        if axis is not None and vi.type.tensor_type.HasField("shape"):
            vi.type.tensor_type.shape.dim[axis].Clear()
            vi.type.tensor_type.shape.dim[axis].dim_param = "trtwidgets_batch"
    for vi in copy.graph.output:
        vi.type.tensor_type.ClearField("shape")
    del copy.graph.value_info[:]
    return copy


def _split_axis(two: np.ndarray, a: np.ndarray, b: np.ndarray) -> Optional[int]:
    if two.ndim != a.ndim or a.shape != b.shape:
        return None
    for k in range(two.ndim):
        if two.shape[k] != a.shape[k] + b.shape[k]:
            continue
        first, second = np.split(two, [a.shape[k]], axis=k)
        if np.allclose(first, a, rtol=1e-3, atol=1e-4, equal_nan=True) and \
                np.allclose(second, b, rtol=1e-3, atol=1e-4, equal_nan=True):
            return k
    return None


def probe_output_axes(model, inputs: Mapping[str, Optional[int]],
                      sample: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, int]:
    """Output name -> the axis along which a batch-2 run splits into two batch-1 runs.

    Outputs that do not split (or the run fails: no ONNX Runtime, a model that cannot take
    two samples) are left out. The second sample is the first scaled by 0.5 plus noise
    (floats), so that an axis that merely doubles in size is not mistaken for the batch.
    """
    proto = as_model_proto(model)
    if not any(a is not None for a in inputs.values()):
        return {}
    a = dict(sample) if sample is not None else _random_sample(proto, inputs)
    if a is None:
        return {}
    rng = np.random.default_rng(1)
    b = {k: (v * 0.5 + rng.standard_normal(v.shape).astype(v.dtype) * 0.1
             if np.issubdtype(v.dtype, np.floating) else v.copy()) for k, v in a.items()}
    two = {k: (np.concatenate([a[k], b[k]], axis=inputs[k]) if inputs.get(k) is not None else a[k]) for k in a}
    try:
        from ..common.ort import open_session

        # log_severity 4: a model that cannot take 2 samples is an answer, not an error to print.
        sess = open_session(_dynamic_copy(proto, inputs), log_severity=4, purpose="check the batch axes")
        names = list(sess.output_names)
        ra, rb, r2 = (dict(zip(names, sess.run(None, f))) for f in (a, b, two))
    except Exception:
        return {}
    out = {}
    for name in names:
        axis = _split_axis(np.asarray(r2[name]), np.asarray(ra[name]), np.asarray(rb[name]))
        if axis is not None:
            out[name] = axis
    return out
