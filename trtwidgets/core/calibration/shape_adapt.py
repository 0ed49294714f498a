"""Bringing samples to a calibration profile's opt shape: pad, truncate or resize.

TensorRT >= 8.5 calibrates only at the calibration profile's opt shape, so samples
of another shape must be adapted to it before their ranges mean anything.  This
module holds that arithmetic and the plain-words account of it; where the samples
come from is :mod:`.sources`, and the feed loop is :mod:`.data`.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from ..common.errors import CalibrationDataError

ADAPT_MODES = ("pad", "truncate", "resize")
#: The most elements one calibration shape may have (2**31, 8 GiB of float32): a typo such as
#: ``1x3x48000x192000`` must be refused, not allocated until the machine swaps.
MAX_SHAPE_ELEMENTS = 1 << 31


def shape_text(shape: Sequence) -> str:
    """``(1, 3, 48, 192)`` -> ``"1x3x48x192"`` (``"scalar"`` for no dims)."""
    return "x".join(str(d) for d in shape) if len(shape) else "scalar"


def check_shape(shape: Sequence, what: str) -> tuple:
    """A calibration shape as a tuple of positive ints, or a :class:`CalibrationDataError`.

    A zero or negative dim is refused here because every loop that batches or pads to the
    shape would otherwise never end (a batch of 0 is never full) or allocate nothing.
    """
    try:
        dims = tuple(int(d) for d in shape)
        exact = all(float(d) == int(d) for d in shape)
    except (TypeError, ValueError, OverflowError):
        raise CalibrationDataError(f"{what} {shape!r} is not a list of dims.", "A shape is a list of positive integers.",
                                   "Give e.g. [1, 3, 48, 192].") from None
    if not exact:
        raise CalibrationDataError(f"{what} {list(shape)!r} has a dim that is not a whole number.",
                                   "A shape is a list of positive integers.", "Give e.g. [1, 3, 48, 192].")
    bad = [i for i, d in enumerate(dims) if d < 1]
    if bad:
        raise CalibrationDataError(f"{what} {shape_text(dims)} has a dim below 1 (dim {bad[0]} is {dims[bad[0]]}).",
                                   "A zero or negative dim is not a shape: no sample fits it.",
                                   "Give every dim as a positive integer, e.g. 1x3x48x192.")
    if int(np.prod(dims, dtype=object)) > MAX_SHAPE_ELEMENTS:
        raise CalibrationDataError(f"{what} {shape_text(dims)} has {int(np.prod(dims, dtype=object)):,} elements.",
                                   f"That is more than {MAX_SHAPE_ELEMENTS:,} per batch, far beyond any calibration "
                                   "shape; it is probably a typo.", "Give the profile's opt shape, e.g. 1x3x48x192.")
    return dims


def check_opt_shapes(opt_shapes: Mapping[str, Sequence[int]], inputs: Sequence) -> None:
    """Opt shapes name model inputs, have their rank and positive dims (before any sample is read)."""
    by_name = {i.name: i for i in inputs}
    for name, shape in opt_shapes.items():
        info = by_name.get(name)
        if info is None:
            raise CalibrationDataError(f"The calibration shape names input {name!r}, which the model does not have.",
                                       f"Its inputs: {', '.join(by_name) or 'none'}.", "Use one of those names.")
        check_shape(shape, f"The calibration shape of input {name!r}")
        dims = info.shape
        if info.has_shape and len(dims) != len(shape):
            raise CalibrationDataError(
                f"The calibration shape of input {name!r} has {len(shape)} dims ({shape_text(shape)}); "
                f"the input has {len(dims)}.", "A calibration shape gives every dim of the input, batch included.",
                f"Give all {len(dims)} dims of {name!r} (its shape in the model: "
                f"[{', '.join(str(d) for d in dims)}]).")
        fixed = [(i, d, s) for i, (d, s) in enumerate(zip(dims or (), shape))
                 if isinstance(d, int) and not isinstance(d, bool) and d > 0 and d != int(s)]
        if fixed:
            # Checked before any sample is read: adapting samples to a shape the model cannot take would
            # allocate (a resize to 16384x16384 is a gigabyte per sample) only to fail in ONNX Runtime.
            raise CalibrationDataError(
                f"The calibration shape of input {name!r} is {shape_text(shape)}; the model fixes it at "
                f"{shape_text(dims)}.", "Dim " + ", ".join(f"{i} is {d} in the model, not {s}" for i, d, s in fixed)
                + ": the model cannot run at that shape, so no sample is adapted to it.",
                f"Give {name!r} the model's shape ({shape_text(dims)}), or leave its --shape out.")


def _resize_axis(arr: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Linear interpolation along one axis, align_corners=False (as cv2/PIL bilinear)."""
    n = arr.shape[axis]
    if n == size:
        return arr
    pos = (np.arange(size, dtype=np.float64) + 0.5) * (n / size) - 0.5
    pos = np.clip(pos, 0, n - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    w = (pos - lo).astype(np.float32)
    shape = [1] * arr.ndim
    shape[axis] = size
    w = w.reshape(shape)
    a = np.take(arr, lo, axis=axis).astype(np.float32)
    b = np.take(arr, hi, axis=axis).astype(np.float32)
    return (a * (1 - w) + b * w).astype(arr.dtype)


def adapt_array(arr: np.ndarray, target: Sequence[int], mode: str, name: str = "",
                batch_axis: Optional[int] = 0) -> np.ndarray:
    """Bring every non-batch dimension of ``arr`` to ``target`` (batch is left alone).

    ``batch_axis``: the input's batch axis (None: it has none, and every dimension is adapted).

    ``pad`` zero-pads smaller dimensions at the end, ``truncate`` keeps the leading part of
    larger ones, ``resize`` interpolates linearly.

    Raises
    ------
    CalibrationDataError
        For a target of another rank, a dim below 1, or a mode that cannot reach the target.
    """
    if len(target) != arr.ndim:
        raise CalibrationDataError(f"Input {name!r}: opt shape {shape_text(target)} has rank {len(target)}, "
                                   f"samples have rank {arr.ndim}.", "Samples can only be adapted to a shape of their own rank.",
                                   "Fix the calibration profile.")
    check_shape(target, f"The opt shape of input {name!r}")
    out = arr
    for axis in range(arr.ndim):
        if axis == batch_axis:
            continue
        want, have = int(target[axis]), out.shape[axis]
        if want == have:
            continue
        if mode == "resize":
            out = _resize_axis(out, axis, want)
        elif mode == "pad":
            if have > want:
                raise CalibrationDataError(
                    f"Input {name!r}: dimension {axis} is {have}, larger than the opt shape's {want}; padding cannot shrink it.",
                    "Padding only adds zeros at the end.", "Use adapt='truncate' or 'resize' for this input.")
            widths = [(0, 0)] * out.ndim
            widths[axis] = (0, want - have)
            out = np.pad(out, widths)
        elif mode == "truncate":
            if have < want:
                raise CalibrationDataError(
                    f"Input {name!r}: dimension {axis} is {have}, smaller than the opt shape's {want}; truncating cannot grow it.",
                    "Truncating only keeps the leading part.", "Use adapt='pad' or 'resize' for this input.")
            out = np.take(out, np.arange(want), axis=axis)
        else:
            raise CalibrationDataError(f"Unknown adaptation {mode!r} for input {name!r}.",
                                       f"Known: {', '.join(ADAPT_MODES)}.", f"Use one of {', '.join(ADAPT_MODES)}.")
    return np.ascontiguousarray(out)


def describe_adaptation(summary, opt_shapes: Mapping[str, Sequence[int]], adapt: Optional[Mapping[str, str]] = None,
                        sample_shapes: Optional[Mapping[str, Sequence[int]]] = None) -> str:
    """Say plainly what TensorRT's calibrator would see for these samples.

    Parameters
    ----------
    summary : ModelSummary
    opt_shapes : mapping
        Input name -> the calibration profile's opt shape.
    adapt : mapping, optional
        Input name -> adaptation mode.
    sample_shapes : mapping, optional
        Input name -> the shape of the samples as given.
    """
    adapt = dict(adapt or {})
    sample_shapes = dict(sample_shapes or {})
    lines = []
    for info in summary.inputs:
        opt = opt_shapes.get(info.name)
        if opt is None:
            if info.is_dynamic:
                lines.append(f"Input {info.name!r} ({shape_text(info.shape)}) has no opt shape: TensorRT calibrates at the "
                             "calibration profile's opt shape, so give one.")
            continue
        opt_t = shape_text(opt)
        have = sample_shapes.get(info.name)
        if have is None or tuple(have[1:]) == tuple(opt[1:]):
            lines.append(f"Input {info.name!r}: TensorRT calibrates at the opt shape {opt_t}; the samples already have that shape"
                         + ("." if have is not None else " (assumed)."))
            continue
        mode = adapt.get(info.name)
        diffs = ", ".join(f"dim {i}: {h} -> {o}" for i, (h, o) in enumerate(zip(have, opt)) if i and h != o)
        if mode is None:
            lines.append(f"Input {info.name!r}: samples are {shape_text(have)} but TensorRT calibrates only at the opt shape "
                         f"{opt_t} ({diffs}). Choose pad, truncate or resize for this input, or change the profile's opt shape.")
        else:
            how = {"pad": "zero-padded at the end", "truncate": "cut to the leading part", "resize": "linearly resized"}[mode]
            lines.append(f"Input {info.name!r}: samples are {shape_text(have)}; TensorRT calibrates at the opt shape {opt_t}, "
                         f"so each sample is {how} ({diffs}). Ranges come from the adapted samples, as TensorRT would see them.")
        if opt[0] != (have[0] if have is not None else opt[0]):
            lines.append(f"Input {info.name!r}: samples are batched {opt[0]} at a time to match the opt batch size.")
    return "\n".join(lines) if lines else "All inputs are static; TensorRT sees the samples as they are."


__all__ = ["ADAPT_MODES", "MAX_SHAPE_ELEMENTS", "adapt_array", "check_opt_shapes", "check_shape", "describe_adaptation",
           "shape_text"]
