"""Accuracy that sees every part of every output: channel groups, standardized per channel.

A pooled output cosine is dominated by the channels that carry the energy. In a packed
YOLO-style detector output ``[N, 4+C, A]`` the box coordinates (hundreds of pixels)
carry nearly all of it and the class scores (0..1) almost none, so an output can keep a
cosine of 0.999 while its class scores lose a quarter of the confident detections.

This module splits each output into **channel groups** along a channel axis, and
compares reference and candidate over values **standardized per channel** (divided by
the reference channel's standard deviation, floored at :data:`STD_FLOOR` of the output's
largest, so that a channel that never moves does not turn rounding into a large error;
not centred, so that a constant channel still has a direction to compare). Each group gets
its own cosine and SNR; the check reports the **worst group**, never a pooled number.

The layout of an output is guessed by :func:`channel_layout` (documented there) or
given by the caller. :func:`blind_spots` says, as notes, which parts of which outputs a
pooled target cannot see (a group with a tiny share of the output's energy, or an output
the target does not look at).

The public entry point is :func:`check_outputs`::

    check = check_outputs(reference, candidate)        # name -> array on both sides
    check.worst.cosine, check.worst.snr_db, check.worst.label
    check.notes                                          # blind spots, in words
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .metrics import ComparisonError, cosine_similarity, snr_db

__all__ = ["ChannelGroup", "ChannelLayout", "GroupMetrics", "OutputCheck", "blind_spots", "channel_layout",
           "check_outputs", "detector_layout", "group_metrics"]

#: A channel whose standard deviation is below this fraction of the output's largest is scaled as if it had that:
#: standardizing a constant channel would turn the candidate's rounding into a large error.
STD_FLOOR = 0.05
#: A group with less than this share of its output's energy is invisible to a pooled cosine/SNR.
BLIND_ENERGY_SHARE = 0.01
#: At most this many channels are compared one by one; more are split into this many contiguous groups.
MAX_GROUPS = 32


@dataclass(frozen=True)
class ChannelGroup:
    """Channels ``start:stop`` of an output's channel axis, under a name (``"boxes"``, ``"scores"``, ``"ch 3"``)."""

    name: str
    start: int
    stop: int


@dataclass(frozen=True)
class ChannelLayout:
    """How one output is cut into channel groups.

    Attributes
    ----------
    axis : int or None
        The channel axis (non-negative); None: the output is one group, compared as a whole.
    groups : tuple of ChannelGroup
    kind : str
        ``"detector"`` (boxes + scores), ``"channels"``, ``"whole"`` or ``"given"``.
    """

    axis: Optional[int]
    groups: Tuple[ChannelGroup, ...]
    kind: str = "channels"


@dataclass(frozen=True)
class GroupMetrics:
    """Error of one channel group of one output, over per-channel standardized values."""

    output: str
    group: str
    cosine: float
    snr_db: float
    energy_share: float

    @property
    def label(self) -> str:
        """``output[group]``, for tables and messages."""
        return f"{self.output}[{self.group}]"

    def to_dict(self) -> dict:
        """A JSON-serialisable mapping (non-finite floats as text)."""
        def js(v: float):
            return float(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))

        return {"output": self.output, "group": self.group, "cosine": js(self.cosine), "snr_db": js(self.snr_db),
                "energy_share": js(self.energy_share)}


@dataclass(frozen=True)
class OutputCheck:
    """Every group of every output, the worst of them, and what a pooled target cannot see.

    Attributes
    ----------
    groups : tuple of GroupMetrics
    worst : GroupMetrics or None
        Lowest SNR (then lowest cosine); None when there was nothing to compare.
    notes : tuple of str
    """

    groups: Tuple[GroupMetrics, ...]
    worst: Optional[GroupMetrics]
    notes: Tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """A JSON-serialisable mapping for plan.json."""
        return {"groups": [g.to_dict() for g in self.groups],
                "worst": None if self.worst is None else self.worst.to_dict(), "notes": list(self.notes)}


def _looks_packed(reference: np.ndarray, axis: int, k: int) -> bool:
    # Scores in [0, 1] (after the head's sigmoid) and boxes in pixels (somewhere above 1): a sequence of
    # softmax rows [N, T, C] has its "boxes" in [0, 1] too, so it is not taken for a detector.
    r = np.moveaxis(np.asarray(reference), axis, -1)
    boxes, scores = r[..., :4], r[..., 4:k]
    fin_b, fin_s = boxes[np.isfinite(boxes)], scores[np.isfinite(scores)]
    if not fin_b.size or not fin_s.size:
        return False
    return float(fin_s.min()) >= -0.01 and float(fin_s.max()) <= 1.01 and float(np.abs(fin_b).max()) > 1.5


def detector_layout(shape: Sequence[int], reference=None) -> Optional[ChannelLayout]:
    """The layout of a packed YOLO-style output ``[N, 4+C, A]`` or ``[N, A, 4+C]``, else None.

    A 3-D output is taken as packed detections when one of its last two axes is short
    (5 to 1024 channels: 4 box values and at least one score) and the other at least
    twice as long and at least 64 (the anchors); given the ``reference`` values, also
    when its scores lie in [0, 1] and its boxes are in pixels (above 1 somewhere), so
    that softmax sequences ``[N, T, C]`` are not mistaken for detections. The groups
    are ``boxes`` (channels 0-3) and ``scores`` (the rest, objectness included where the
    model has it).
    """
    if len(shape) != 3:
        return None
    a, b = int(shape[1]), int(shape[2])
    for axis, k, n in ((1, a, b), (2, b, a)):
        if 5 <= k <= 1024 and n >= 64 and n >= 2 * k:
            if reference is not None and not _looks_packed(reference, axis, k):
                continue
            return ChannelLayout(axis, (ChannelGroup("boxes", 0, 4), ChannelGroup("scores", 4, k)), "detector")
    return None


def _split_channels(channels: int) -> Tuple[ChannelGroup, ...]:
    if channels <= MAX_GROUPS:
        return tuple(ChannelGroup(f"ch {c}", c, c + 1) for c in range(channels))
    edges = np.linspace(0, channels, MAX_GROUPS + 1).round().astype(int)
    return tuple(ChannelGroup(f"ch {lo}-{hi - 1}", int(lo), int(hi)) for lo, hi in zip(edges[:-1], edges[1:]))


def channel_layout(shape: Sequence[int], channel_axis: Optional[int] = None, reference=None) -> ChannelLayout:
    """The channel groups of an output of ``shape``.

    Parameters
    ----------
    shape : sequence of int
        The output's shape (batch axis included).
    channel_axis : int, optional
        Cut along this axis (one group per channel, or :data:`MAX_GROUPS` contiguous groups).
    reference : array_like, optional
        The reference values: they confirm a detector layout (:func:`detector_layout`).

    Returns
    -------
    ChannelLayout
        Without ``channel_axis``: a packed detector's boxes/scores (:func:`detector_layout`);
        a 4-D ``[N, C, H, W]`` map cut along axis 1; anything else (logits ``[N, K]``,
        sequences, scalars) one group, because a class or time axis has no per-channel
        meaning to standardize.
    """
    shape = tuple(int(d) for d in shape)
    if channel_axis is not None:
        axis = channel_axis % len(shape) if shape else 0
        if not shape:
            raise ComparisonError("A 0-d output has no channel axis.", None, "Leave channel_axis unset.")
        return ChannelLayout(axis, _split_channels(shape[axis]), "given")
    det = detector_layout(shape, reference)
    if det is not None:
        return det
    if len(shape) == 4 and shape[1] >= 2:
        return ChannelLayout(1, _split_channels(shape[1]), "channels")
    return ChannelLayout(None, (ChannelGroup("all", 0, 1),), "whole")


def _channels_last(a: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(np.asarray(a, dtype=np.float64), axis, -1).reshape(-1, a.shape[axis])


def _channel_scales(ref: np.ndarray) -> np.ndarray:
    # Per channel (columns), from the reference's finite values; floored at a fraction of the output's
    # largest channel std, so that a channel that never moves does not turn rounding into a large error.
    with np.errstate(invalid="ignore"):
        std = np.nan_to_num(np.nanstd(np.where(np.isfinite(ref), ref, np.nan), axis=0)) if ref.size \
            else np.zeros(ref.shape[1])
    floor = STD_FLOOR * float(std.max()) if std.size else 0.0
    scale = np.maximum(std, floor)
    scale[scale == 0.0] = 1.0
    return scale


def _standardize(ref: np.ndarray, cand: np.ndarray, scale: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    # Scaled, not centred: centring would make a constant channel all zero, and a cosine against zero says nothing.
    ok = np.isfinite(ref) & np.isfinite(cand)
    return (ref / scale)[ok], (cand / scale)[ok]


def group_metrics(reference, candidate, name: str = "output",
                  layout: Optional[ChannelLayout] = None) -> Tuple[GroupMetrics, ...]:
    """Cosine and SNR of each channel group of one output, over per-channel standardized values.

    Parameters
    ----------
    reference, candidate : array_like
        The same shape (or size: the candidate is reshaped to the reference's shape).
    name : str
        The output's name, carried into the result.
    layout : ChannelLayout, optional
        Default :func:`channel_layout` of the reference's shape.

    Returns
    -------
    tuple of GroupMetrics
        One per group; a ``"whole"`` layout gives the plain (unstandardized) cosine and SNR.
    """
    ref = np.asarray(reference)
    cand = np.asarray(candidate)
    if ref.size != cand.size:
        raise ComparisonError(f"Output {name!r} has shape {tuple(cand.shape)}, the reference {tuple(ref.shape)}.",
                              "The two sides were run with different inputs or models.",
                              "Compare runs of the same model on the same samples.")
    cand = cand.reshape(ref.shape)
    layout = layout or channel_layout(ref.shape, reference=ref)
    if layout.axis is None:
        return (GroupMetrics(name, layout.groups[0].name, cosine_similarity(ref, cand), snr_db(ref, cand), 1.0),)
    r2 = _channels_last(ref, layout.axis)
    c2 = _channels_last(cand, layout.axis)
    energy = np.nansum(np.where(np.isfinite(r2), r2, 0.0) ** 2, axis=0)
    total = float(energy.sum())
    out: List[GroupMetrics] = []
    scale = _channel_scales(r2)
    for g in layout.groups:
        rs, cs = _standardize(r2[:, g.start:g.stop], c2[:, g.start:g.stop], scale[g.start:g.stop])
        share = float(energy[g.start:g.stop].sum()) / total if total > 0 else 0.0
        out.append(GroupMetrics(name, g.name, cosine_similarity(rs, cs), snr_db(rs, cs), share))
    return tuple(out)


def blind_spots(groups: Sequence[GroupMetrics], target_outputs: Optional[Sequence[str]] = None,
                all_outputs: Optional[Sequence[str]] = None) -> Tuple[str, ...]:
    """Notes on what a pooled target cannot see.

    Parameters
    ----------
    groups : sequence of GroupMetrics
        From :func:`group_metrics` of each output.
    target_outputs : sequence of str, optional
        The outputs the target (a task metric, a pooled cosine) looks at; default all.
    all_outputs : sequence of str, optional
        Every output of the model; default the outputs named in ``groups``.

    Returns
    -------
    tuple of str
        One note per output the target does not look at, and one per group with less
        than :data:`BLIND_ENERGY_SHARE` of its output's energy (a pooled cosine or SNR of
        that output cannot see it; the worst-group check can).
    """
    outputs = list(all_outputs) if all_outputs is not None else list(dict.fromkeys(g.output for g in groups))
    notes: List[str] = []
    if target_outputs is not None:
        seen = set(target_outputs)
        for name in outputs:
            if name not in seen:
                notes.append(f"The target does not look at output {name!r}: its accuracy is not checked by it.")
    by_output: Dict[str, List[GroupMetrics]] = {}
    for g in groups:
        by_output.setdefault(g.output, []).append(g)
    for name, gs in by_output.items():
        if len(gs) < 2:
            continue
        tiny = [g for g in gs if g.energy_share < BLIND_ENERGY_SHARE]
        if tiny and len(tiny) < len(gs):
            share = sum(g.energy_share for g in tiny)
            names = ", ".join(g.group for g in tiny[:6]) + (" ..." if len(tiny) > 6 else "")
            notes.append(f"A pooled cosine or SNR of output {name!r} cannot see {names}: "
                         f"{share:.2%} of its energy. The worst channel group is checked instead.")
    return tuple(notes)


def check_outputs(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray],
                  layouts: Optional[Mapping[str, ChannelLayout]] = None,
                  target_outputs: Optional[Sequence[str]] = None) -> OutputCheck:
    """The default accuracy check: every output, every channel group, the worst one.

    Parameters
    ----------
    reference, candidate : mapping
        Output name -> array (FP32 and the candidate, same samples). Every reference
        output must be in the candidate.
    layouts : mapping, optional
        Output name -> :class:`ChannelLayout`; others get :func:`channel_layout`.
    target_outputs : sequence of str, optional
        The outputs a task metric looks at, for :func:`blind_spots`.

    Returns
    -------
    OutputCheck

    Raises
    ------
    ComparisonError
        An output is missing from the candidate or has another size.
    """
    missing = [n for n in reference if n not in candidate]
    if missing:
        raise ComparisonError(f"The candidate has no output named {', '.join(repr(n) for n in missing)}.",
                              f"The reference's outputs are {', '.join(repr(n) for n in reference)}.",
                              "Compare runs of the same model.")
    layouts = dict(layouts or {})
    groups: List[GroupMetrics] = []
    for name, ref in reference.items():
        if not np.issubdtype(np.asarray(ref).dtype, np.number):
            continue
        groups.extend(group_metrics(ref, candidate[name], name, layouts.get(name)))
    worst = min(groups, key=lambda g: (g.snr_db, g.cosine)) if groups else None
    notes = blind_spots(groups, target_outputs, list(reference))
    return OutputCheck(tuple(groups), worst, notes)
