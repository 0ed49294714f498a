"""Profiles from the calibration data: the shapes a user's own samples have.

A model exported with every dimension dynamic (``[N, 3, H, W]``) says nothing
about the size it will see; its samples do. When calibration data is given,
:func:`profiles_from_data` sets each dynamic input's ``opt`` to the samples'
shape and ``min``/``max`` around it, for every input whose range was never set
(still the model-only default of :func:`~trtwidgets.core.recipe.profiles.default_profiles`),
and says so in a note. A range the user typed is kept; where samples do not
match its ``opt``, :func:`mismatched_inputs` names the inputs that need one of
the adaptations in :data:`ADAPT_CHOICES`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .profiles import Profile, Shape, ShapeRange, demo_shapes, default_profiles, format_shape

#: How samples of another shape are brought to the opt shape: mode -> one-line explanation.
ADAPT_CHOICES: Dict[str, str] = {
    "pad": "pad: zeros are added at the end of each smaller dimension (content unscaled; larger samples are refused).",
    "truncate": "truncate: each larger dimension is cut to its leading part (content unscaled; smaller samples are refused).",
    "resize": "resize: each sample is linearly interpolated to the opt shape (any size works; content is rescaled).",
}

#: Samples read to learn the data's shapes (enough to see whether they differ, cheap on a folder of images).
PEEK_SAMPLES = 16
#: The largest batch of a dynamic batch dimension whose samples are all single (batch 1): they say nothing
#: of the batch the engine will serve, and ``max = 1`` would make an engine that takes one sample only.
SINGLE_SAMPLE_MAX_BATCH = 32


@dataclass(frozen=True)
class DataProfiles:
    """Profiles with the data's shapes filled in, and what was done.

    Attributes
    ----------
    profiles : tuple of Profile
    filled : tuple of str
        Inputs whose range now comes from the data.
    note : str
        One sentence per filled input ('' when nothing was filled).
    """

    profiles: Tuple[Profile, ...]
    filled: Tuple[str, ...]
    note: str


def sample_shapes(source: Any, summary, limit: Optional[int] = PEEK_SAMPLES) -> Dict[str, List[Shape]]:
    """Input name -> the shape of each of the first ``limit`` samples (batch of one each).

    Parameters
    ----------
    source : CalibrationDataSpec, folder, ``"demo"`` or iterable of feeds
        Anything :func:`~trtwidgets.core.calibration.data.iter_feeds` takes. Its own
        opt shapes and adaptation are ignored: this asks what the samples are.
    summary : ModelSummary
    limit : int, optional

    Raises
    ------
    CalibrationDataError
        The data cannot be read, or does not fit the model's inputs (names, rank, dtype).
    """
    from ..calibration.data import iter_feeds

    out: Dict[str, List[Shape]] = {}
    for feed in iter_feeds(source, summary, batch_size=1, max_samples=limit, adapt={}, opt_shapes={}):
        for name, arr in feed.items():
            out.setdefault(name, []).append(tuple(int(d) for d in arr.shape))
    return out


def _around(opt: int) -> Tuple[int, int]:
    # Half and twice the size: a detector fed 480x480 crops should still take a 240 or a 960 image.
    return max(1, opt // 2), opt * 2


def data_range(declared: Sequence, seen: Sequence[Shape]) -> Optional[ShapeRange]:
    """The range of one input from its samples' shapes (None when no sample has the model's rank).

    ``opt`` is the most frequent shape. A dynamic dimension that varies in the data
    spans what was seen; one that does not spans half to twice its size; a dynamic
    batch dimension starts at 1, and goes up to :data:`SINGLE_SAMPLE_MAX_BATCH` when every
    sample is single. Static dimensions keep the model's size.
    """
    seen = [tuple(s) for s in seen if len(s) == len(declared)]
    if not seen:
        return None
    opt_shape = Counter(seen).most_common(1)[0][0]
    lo, opt, hi = [], [], []
    for i, d in enumerate(declared):
        if isinstance(d, int):
            lo.append(d)
            opt.append(d)
            hi.append(d)
            continue
        values = [s[i] for s in seen]
        o = opt_shape[i]
        if i == 0:
            # The batch: single samples must run; the largest batch seen is the most asked for. Single samples
            # (a folder of one image per file) do not say the batch the engine will serve.
            a, b = 1, max(values)
            if b == 1:
                b = SINGLE_SAMPLE_MAX_BATCH
        else:
            a, b = (min(values), max(values)) if min(values) != max(values) else _around(o)
        lo.append(a)
        opt.append(o)
        hi.append(b)
    return ShapeRange(tuple(lo), tuple(opt), tuple(hi))


def profiles_from_data(summary, data_shapes: Mapping[str, Sequence[Shape]],
                       profiles: Sequence[Profile] = ()) -> DataProfiles:
    """``profiles`` with every unset dynamic input's range taken from the data.

    Parameters
    ----------
    summary : ModelSummary
    data_shapes : mapping
        Input name -> shapes of its samples (see :func:`sample_shapes`).
    profiles : sequence of Profile
        The current profiles. An input counts as unset when it has no range, or
        still has the model-only default (e.g. ``1x3x1x1`` for ``[N, 3, H, W]``).
        With no profiles at all, one is made.

    Returns
    -------
    DataProfiles
    """
    untouched = default_profiles(summary)
    # The bundled demo's default is its real shape, not a placeholder: it counts as set.
    defaults = untouched[0].shapes if untouched and not demo_shapes(summary) else {}
    current = list(profiles) or list(untouched)
    if not current:
        return DataProfiles((), (), "")
    filled, notes, out = [], [], []
    for profile in current:
        shapes = dict(profile.shapes)
        for t in summary.dynamic_inputs:
            if t.name in shapes and shapes[t.name] != defaults.get(t.name):
                continue  # the user's range: kept, even if the data disagree
            rng = data_range(t.shape, data_shapes.get(t.name, ()))
            if rng is None:
                continue
            shapes[t.name] = rng
            if t.name not in filled:
                filled.append(t.name)
                notes.append(f"input {t.name!r}: opt {format_shape(rng.opt)} is the calibration data's shape, "
                             f"min {format_shape(rng.min)}, max {format_shape(rng.max)}"
                             + _single_batch_note(t.shape, data_shapes.get(t.name, ()), rng))
        out.append(Profile(shapes))
    note = ("Profiles from the data (the model leaves these dimensions open): " + "; ".join(notes)
            + ". Change them in the profile editor if the engine must take other sizes.") if notes else ""
    return DataProfiles(tuple(out), tuple(filled), note)


def _single_batch_note(declared: Sequence, seen: Sequence[Shape], rng: ShapeRange) -> str:
    """What a dynamic batch of single samples was given (its max), '' for other inputs."""
    if not declared or isinstance(declared[0], int) or rng.max[0] != SINGLE_SAMPLE_MAX_BATCH:
        return ""
    if any(len(s) != len(declared) or s[0] != 1 for s in seen):
        return ""
    return (f" (the samples are single, so the batch runs from 1 up to {SINGLE_SAMPLE_MAX_BATCH}, tuned for 1: "
            "set the batch you will serve in the profile editor)")


def mismatched_inputs(opt_shapes: Mapping[str, Sequence[int]], data_shapes: Mapping[str, Sequence[Shape]]
                      ) -> Dict[str, Tuple[Shape, ...]]:
    """Input name -> the distinct sample shapes that differ from its opt shape (batch ignored).

    These inputs need a choice among :data:`ADAPT_CHOICES` before calibration can run.
    """
    out = {}
    for name, opt in opt_shapes.items():
        odd = sorted({tuple(s) for s in data_shapes.get(name, ()) if tuple(s[1:]) != tuple(opt[1:])})
        if odd:
            out[name] = tuple(odd)
    return out


def fill_recipe_from_data(recipe, model, limit: Optional[int] = PEEK_SAMPLES):
    """``(recipe, note, data_shapes)``: the recipe with unset profile ranges taken from its calibration data.

    The recipe is returned unchanged (note '') when it names no data or the model
    has no dynamic input. Unreadable data raises, so that the caller can say why.
    """
    spec = recipe.calibration_data
    summary = model.summary
    if spec is None or not summary.dynamic_inputs:
        return recipe, "", {}
    shapes = sample_shapes(spec, summary, limit)
    result = profiles_from_data(summary, shapes, recipe.profiles)
    if not result.filled:
        return recipe, "", shapes
    return recipe.replace(profiles=result.profiles), result.note, shapes
