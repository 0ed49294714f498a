"""Calibration data: the spec of a source, the checks on each sample, the feed loop.

A source is a :class:`CalibrationDataSpec` (JSON-serialisable, stored in a
recipe), a directory path, the word ``"demo"``, or any iterable of
``{input_name: array}``.  :func:`iter_feeds` turns any of them into model feeds
one batch at a time, checking each against the model's inputs and, where a
calibration profile's opt shape is given, adapting samples to it: TensorRT >= 8.5
calibrates only at the opt shape, so that is what its ranges are computed on.
Files are cut into samples, and samples joined, along each input's own batch axis
(:mod:`.sample_axes`, :mod:`..model.sample_batches`), never along axis 0 by assumption.
File loaders live in :mod:`.sources`, the opt-shape arithmetic in :mod:`.shape_adapt`.
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.errors import CalibrationDataError
from ..common.frozen import deep_freeze, mapping_hash, readonly_mapping, thaw
from ..model.sample_batches import SampleBatcher, first_samples
from .sample_axes import PROBE_SAMPLES, SampleAxes
from .shape_adapt import ADAPT_MODES, adapt_array, check_opt_shapes, check_shape, shape_text
from .sources import check_image_size, check_preprocessing, detect_kind, dir_samples, load_array_file
from ..common.paths import user_path

KINDS = ("demo", "npy_dir", "image_dir")


def _count(value, what: str, fix: str) -> int:
    """A positive whole number (batch size, sample count), or a :class:`CalibrationDataError`.

    Zero is refused: a batch of 0 is never full, and the loop that fills it would never end.
    """
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, float, str)):
        raise CalibrationDataError(f"{what} {value!r} is not a whole number.", "It counts samples, so it is a whole number.", fix)
    try:
        n = int(value)
        exact = float(value) == n
    except (TypeError, ValueError, OverflowError):
        raise CalibrationDataError(f"{what} {value!r} is not a whole number.", "It counts samples, so it is a whole number.", fix) from None
    if not exact:
        raise CalibrationDataError(f"{what} {value!r} is not a whole number.", "It counts samples, so it is a whole number.", fix)
    if n < 1:
        raise CalibrationDataError(f"{what} {n} is not positive.", "At least one sample is needed.", fix)
    return n


@dataclass(frozen=True)
class CalibrationDataSpec:
    """Where calibration samples come from, and how they are prepared.

    Attributes
    ----------
    kind : str
        ``"demo"`` (the demo's labelled text lines, calibration part), ``"npy_dir"`` (a folder of ``.npy``/``.npz``) or
        ``"image_dir"`` (a folder of images with ``preprocessing``).
    path : str, optional
        The folder (not used for ``"demo"``).
    batch_size : int
        Samples per model run.
    max_samples : int, optional
        Stop after this many samples.
    preprocessing : mapping, optional
        Read-only (lists become tuples). For images: ``input`` (name), ``resize`` ``[h, w]``, ``layout`` ``"NCHW"``/``"NHWC"``,
        ``scale`` (default 1/255), ``mean``, ``std`` (per channel, after scaling), ``dtype``,
        ``color`` ``"RGB"``/``"BGR"``/``"L"``.
    adapt : mapping
        Read-only. Input name -> ``"pad"``, ``"truncate"`` or ``"resize"``: how samples whose shape differs
        from the opt shape are brought to it.
    opt_shapes : mapping
        Read-only. Input name -> the calibration profile's opt shape (a tuple).
    """

    kind: str = "demo"
    path: Optional[str] = None
    batch_size: int = 1
    max_samples: Optional[int] = None
    preprocessing: Optional[Mapping[str, Any]] = None
    adapt: Mapping[str, str] = field(default_factory=dict)
    opt_shapes: Mapping[str, Tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self):
        # Read-only copies: the spec is part of an immutable recipe, and must not share the caller's dicts.
        for key in ("adapt", "opt_shapes") + (("preprocessing",) if self.preprocessing is not None else ()):
            if not isinstance(getattr(self, key), Mapping):
                raise CalibrationDataError(f"The calibration data's {key} must be a mapping, got {type(getattr(self, key)).__name__}.",
                                           "It maps input names to values.", f"Give {key} as a dict (input name -> value).")
        object.__setattr__(self, "adapt", readonly_mapping(self.adapt))
        object.__setattr__(self, "opt_shapes", readonly_mapping(
            {k: check_shape(v, f"The calibration shape of input {k!r}") for k, v in self.opt_shapes.items()}))
        if self.preprocessing is not None:
            check_preprocessing(self.preprocessing)
            object.__setattr__(self, "preprocessing", deep_freeze(self.preprocessing))
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise CalibrationDataError(f"Unknown calibration data kind {self.kind!r}.",
                                       f"Known kinds: {', '.join(KINDS)}.", "Use one of them.")
        if self.path is not None and not isinstance(self.path, (str, os.PathLike)):
            raise CalibrationDataError(f"The calibration data path {self.path!r} is not a path.", "It names a folder.",
                                       "Give the folder as a string.")
        object.__setattr__(self, "batch_size", _count(self.batch_size, "Calibration batch size",
                                                      "Use a batch size of 1 or more."))
        if self.max_samples is not None:
            object.__setattr__(self, "max_samples", _count(self.max_samples, "max_samples",
                                                           "Use 1 or more, or None for all."))
        for name, mode in self.adapt.items():
            if mode not in ADAPT_MODES:
                raise CalibrationDataError(f"Unknown adaptation {mode!r} for input {name!r}.",
                                           f"Known: {', '.join(ADAPT_MODES)}.", f"Use one of {', '.join(ADAPT_MODES)}.")
        if self.kind != "demo" and not self.path:
            raise CalibrationDataError(f"Calibration data of kind {self.kind!r} needs a path.",
                                       "Only the bundled demo data has no folder.", "Give the folder.")
        if self.kind == "image_dir" and not self.preprocessing:
            raise CalibrationDataError(
                "An image folder needs a declared preprocessing.",
                "Images must be resized, scaled and normalised exactly as the model expects; guessing would give wrong ranges.",
                "Give preprocessing={'input': 'x', 'resize': [48, 192], 'layout': 'NCHW', 'mean': [0.5]*3, 'std': [0.5]*3} "
                "(on the command line: --preprocess with the same keys as a JSON object).")

    def __hash__(self) -> int:
        return mapping_hash(self.kind, self.path, self.batch_size, self.max_samples, self.preprocessing, self.adapt,
                            self.opt_shapes)

    def __reduce__(self):
        # mappingproxy cannot be pickled or deep-copied; rebuild from plain containers instead.
        return (type(self), (self.kind, self.path, self.batch_size, self.max_samples,
                             None if self.preprocessing is None else thaw(self.preprocessing),
                             dict(self.adapt), dict(self.opt_shapes)))

    def to_dict(self) -> dict:
        """A JSON-serialisable mapping (inverse of :meth:`from_dict`)."""
        return {"kind": self.kind, "path": self.path, "batch_size": int(self.batch_size),
                "max_samples": None if self.max_samples is None else int(self.max_samples),
                "preprocessing": None if self.preprocessing is None else _jsonable(self.preprocessing),
                "adapt": dict(self.adapt), "opt_shapes": {k: [int(d) for d in v] for k, v in self.opt_shapes.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CalibrationDataSpec":
        """Build a spec from :meth:`to_dict` output (unknown keys are an error)."""
        known = {"kind", "path", "batch_size", "max_samples", "preprocessing", "adapt", "opt_shapes"}
        if not isinstance(d, Mapping):
            raise CalibrationDataError(f"The calibration data settings are a {type(d).__name__}, not a mapping.",
                                       f"They are an object with the keys {', '.join(sorted(known))}.",
                                       "Give them as a dict / JSON object.")
        unknown = sorted(map(str, set(d) - known))
        if unknown:
            raise CalibrationDataError(f"Unknown calibration data settings: {', '.join(unknown)}.",
                                       f"Known settings: {', '.join(sorted(known))}.", "Remove or rename them.")
        for key in ("adapt", "opt_shapes", "preprocessing"):
            if d.get(key) is not None and not isinstance(d[key], Mapping):
                raise CalibrationDataError(f"The calibration data's {key} is a {type(d[key]).__name__}, not a mapping.",
                                           "It maps input names to values.", f"Give {key} as an object (input name -> value).")
        return cls(kind=d.get("kind", "demo"), path=d.get("path"), batch_size=d.get("batch_size", 1),
                   max_samples=d.get("max_samples"), preprocessing=d.get("preprocessing"),
                   adapt=dict(d.get("adapt") or {}), opt_shapes=dict(d.get("opt_shapes") or {}))

    def replace(self, **changes) -> "CalibrationDataSpec":
        d = self.to_dict()
        d.update(changes)
        return CalibrationDataSpec.from_dict(d)


def _jsonable(v):
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def spec_for(source: Union[str, os.PathLike, CalibrationDataSpec], **overrides) -> CalibrationDataSpec:
    """A spec for a path (``"demo"`` for the demo's calibration lines); keyword arguments override fields."""
    if isinstance(source, CalibrationDataSpec):
        return source.replace(**overrides) if overrides else source
    text = str(source)
    if text == "demo":
        d = {"kind": "demo"}
    else:
        d = {"kind": detect_kind(user_path(text)), "path": text}
    d.update({k: v for k, v in overrides.items() if v is not None})
    return CalibrationDataSpec.from_dict(d)


# --------------------------------------------------------------------------- checks

_NP_KIND = {"f": "floating-point", "i": "integer", "u": "unsigned integer", "b": "bool"}


def _expected_dtype(info) -> Optional[np.dtype]:
    try:
        return np.dtype(info.dtype)
    except TypeError:
        return None


def check_feed(feed: Mapping[str, np.ndarray], inputs: Sequence, where: str = "") -> Dict[str, np.ndarray]:
    """Check one feed against the model inputs; returns it with arrays as numpy arrays.

    Raises
    ------
    CalibrationDataError
        Naming the input and the expected and found dtype, rank or shape.
    """
    at = f" ({where})" if where else ""
    if not isinstance(feed, Mapping):
        raise CalibrationDataError(f"A calibration sample{at} is a {type(feed).__name__}, not a mapping.",
                                   "Each sample must be a dict {input_name: array}.",
                                   "Yield dicts such as {'x': array}.")
    names = [i.name for i in inputs]
    missing = [n for n in names if n not in feed]
    extra = [n for n in feed if n not in names]
    if missing or extra:
        raise CalibrationDataError(
            f"Calibration sample{at} does not name the model's inputs.",
            (f"Missing: {', '.join(missing)}. " if missing else "") + (f"Unknown: {', '.join(map(str, extra))}. " if extra else "")
            + f"The model's inputs are: {', '.join(names)}.",
            "Use the model's input names as keys.")
    out = {}
    for info in inputs:
        arr = feed[info.name]
        if not isinstance(arr, np.ndarray):
            try:
                arr = np.asarray(arr)
            except (TypeError, ValueError) as exc:
                raise CalibrationDataError(f"Input {info.name!r}{at} is not an array.", f"{type(exc).__name__}: {exc}",
                                           "Give a numpy array of the input's shape.") from None
        exp = _expected_dtype(info)
        if exp is not None and arr.dtype != exp:
            hint = f"Convert it with .astype(np.{exp.name})" + (
                " (and check the preprocessing)" if arr.dtype.kind != exp.kind else "") + "."
            raise CalibrationDataError(
                f"Input {info.name!r}{at}: expected dtype {exp.name}, found {arr.dtype.name}.",
                f"The model takes {_NP_KIND.get(exp.kind, exp.name)} data for this input.", hint)
        if not info.shape:
            # The model declares no shape for this input: nothing to check it against.
            if arr.size == 0:
                raise CalibrationDataError(f"Input {info.name!r}{at} is empty.", "An empty sample has no values to calibrate on.",
                                           "Remove empty samples.")
            out[info.name] = arr
            continue
        if arr.ndim != len(info.shape):
            raise CalibrationDataError(
                f"Input {info.name!r}{at}: expected rank {len(info.shape)} (shape {shape_text(info.shape)}), "
                f"found rank {arr.ndim} (shape {shape_text(arr.shape)}).",
                "Samples must carry every dimension, including the batch dimension.",
                "Add a batch axis with array[None] if this is a single sample." if arr.ndim == len(info.shape) - 1 else
                f"Give samples of rank {len(info.shape)}, shaped like the model's input, or check that the data is "
                "for this model.")
        bad = [(i, d, s) for i, (d, s) in enumerate(zip(info.shape, arr.shape)) if isinstance(d, int) and d != s]
        if bad:
            raise CalibrationDataError(
                f"Input {info.name!r}{at}: expected shape {shape_text(info.shape)}, found {shape_text(arr.shape)}.",
                "Dimension " + ", ".join(f"{i} must be {d} (found {s})" for i, d, s in bad) + ".",
                "Resize or crop the samples in the preprocessing.")
        if arr.size == 0:
            raise CalibrationDataError(f"Input {info.name!r}{at} is empty (shape {shape_text(arr.shape)}).",
                                       "An empty sample has no values to calibrate on.", "Remove empty samples.")
        _check_finite(arr, info.name, at)
        out[info.name] = arr
    return out


def _check_finite(arr: np.ndarray, name: str, at: str) -> None:
    # A NaN or Inf in an input is damaged data (a division by a zero std, a bad file), never a value to calibrate:
    # it would be left out of the input's range and make every tensor computed from it NaN.
    if arr.dtype.kind not in "fc" or np.isfinite(arr).all():
        return
    nan = int(np.count_nonzero(np.isnan(arr)))
    inf = int(arr.size - np.count_nonzero(np.isfinite(arr)) - nan)
    raise CalibrationDataError(f"Input {name!r}{at} holds {nan} NaN and {inf} Inf values.",
                               "A calibration sample must be real data: NaN/Inf have no range, and every tensor "
                               "computed from them would be NaN too.",
                               "Remove or repair that sample (check the preprocessing: a std of 0 divides by zero).")


# --------------------------------------------------------------------------- feeds

def _raw_samples(source, input_names: Sequence[str], spec: Optional[CalibrationDataSpec],
                 rows_left=None) -> Iterator[Tuple[str, Any]]:
    """``(label, raw sample)`` pairs; the label names the file, or the sample's position in an iterable."""
    if spec is not None:
        if spec.kind == "demo":
            from ... import demo

            # The calibration part of the demo's labelled text lines (the held-back part judges it).
            return ((f"demo line sample {k}", f) for k, f in enumerate(demo.calibration_inputs(1)))
        assert spec.path is not None, "a spec of a folder names it"
        return dir_samples(user_path(spec.path), spec.kind, input_names, spec.preprocessing, rows_left)
    if isinstance(source, Mapping):
        # One feed given directly: treat it as a one-element source.
        return iter([("sample 0", source)])
    try:
        it = iter(source)
    except TypeError:
        raise CalibrationDataError(f"Calibration data of type {type(source).__name__} is not a source.",
                                   "A source is a folder path, 'demo', a CalibrationDataSpec, or an iterable of dicts.",
                                   "Pass a folder of .npy/.npz files or a list of {input_name: array}.") from None
    return ((f"sample {k}", f) for k, f in enumerate(it))


def _axis_of(axes: SampleAxes, name: str, arr: np.ndarray) -> Optional[int]:
    axis = axes.inputs.get(name)
    return axis if axis is not None and arr.ndim > axis else None


def _without(shape: Sequence[int], axis: Optional[int]) -> Tuple[int, ...]:
    return tuple(int(d) for i, d in enumerate(shape) if i != axis)


def _adapted(feed: Dict[str, np.ndarray], label: str, axes: SampleAxes, adapt: Mapping[str, str],
             opt_shapes: Mapping[str, Sequence[int]]) -> Dict[str, np.ndarray]:
    """``feed`` with every input brought to its opt shape (all dims but its own batch axis), as ``adapt`` says."""
    for name, arr in feed.items():
        axis = _axis_of(axes, name, arr)
        if name in opt_shapes and _without(arr.shape, axis) != _without(opt_shapes[name], axis):
            mode = adapt.get(name)
            if mode is None:
                raise CalibrationDataError(
                    f"Input {name!r} ({label}): shape {shape_text(arr.shape)} differs from the calibration opt shape "
                    f"{shape_text(opt_shapes[name])}.",
                    "TensorRT calibrates only at the calibration profile's opt shape.",
                    f"Choose adapt={{'{name}': 'pad' | 'truncate' | 'resize'}}, or change the opt shape.")
            feed[name] = adapt_array(arr, opt_shapes[name], mode, name, batch_axis=axis)
    return feed


def _axes_checked(label: str, raw: Any, axes: SampleAxes, inputs: Sequence, left: Optional[int], batching: bool,
                  reread) -> Any:
    """``raw``, once the first file whose batch axes matter has checked them (:meth:`SampleAxes.settle`).

    That file was read bounded along the axes found from the model's dims; where one turns out to be
    no batch (frames of one sample), ``reread`` reads it again whole.
    """
    if axes.settled or not isinstance(raw, Mapping) or not all(isinstance(v, np.ndarray) for v in raw.values()) \
            or not axes.needs_check(raw, batching):
        return raw
    probe = check_feed(axes.take(raw, 0, min(PROBE_SAMPLES, left or PROBE_SAMPLES)), inputs, where=label)
    if axes.settle(probe) and reread is not None:
        return reread()
    return raw


def iter_feeds(source, summary, batch_size: Optional[int] = None, max_samples: Optional[int] = None,
               adapt: Optional[Mapping[str, str]] = None, opt_shapes: Optional[Mapping[str, Sequence[int]]] = None,
               axes: Optional[SampleAxes] = None) -> Iterator[Dict[str, np.ndarray]]:
    """Model feeds from a calibration source, checked and (optionally) adapted and re-batched.

    Parameters
    ----------
    source : CalibrationDataSpec, str, path-like or iterable of dict
        A spec, a folder (kind detected from the files), ``"demo"``, or any iterable of
        ``{input_name: array}`` (arrays carry the batch dimension).
    summary : ModelSummary
        The model whose inputs the feeds must fit.
    batch_size : int, optional
        Re-batch samples to this many per feed (default: the spec's, else as given; with
        ``opt_shapes``, the opt batch size).
    max_samples : int, optional
        Stop after this many samples.
    adapt, opt_shapes : mapping, optional
        Input name -> adaptation mode / opt shape (default: the spec's).
    axes : SampleAxes, optional
        Each input's batch axis, along which files are cut into samples and samples joined
        (default: found from the model's declared dims, :class:`~.sample_axes.SampleAxes`).

    Yields
    ------
    dict
        ``{input_name: array}`` for one model run.

    Raises
    ------
    CalibrationDataError
        For an empty source, a batch size or shape below 1, and samples that do not fit the model's
        inputs (naming the file or the sample's position).
    """
    for _, feed in iter_labelled_feeds(source, summary, batch_size, max_samples, adapt, opt_shapes, axes=axes):
        yield feed


def iter_labelled_feeds(source, summary, batch_size: Optional[int] = None, max_samples: Optional[int] = None,
                        adapt: Optional[Mapping[str, str]] = None, opt_shapes: Optional[Mapping[str, Sequence[int]]] = None,
                        as_read: bool = False, axes: Optional[SampleAxes] = None
                        ) -> Iterator[Tuple[str, Dict[str, np.ndarray]]]:
    """:func:`iter_feeds` with each feed's label: the file(s) or sample positions it was made from.

    Every loop here ends: the batch size and every opt-shape dim are checked to be at least 1
    before any sample is read, and each sample adds at least one item (empty ones are refused).

    A file is cut into samples, and samples joined, along each input's own batch axis (``axes``);
    an input without one (a scalar sample rate) is passed whole. With ``as_read``, each file (or
    item of an iterable) is yielded as it was read, checked but never re-batched, whatever the
    spec's batch size (the planner cuts files itself, with :mod:`..model.sample_batches`).
    """
    # Checked before the spec's defaults fill them in: 0 is a wrong answer, not "not given".
    if batch_size is not None:
        batch_size = _count(batch_size, "Calibration batch size", "Use a batch size of 1 or more.")
    if max_samples is not None:
        max_samples = _count(max_samples, "max_samples", "Use 1 or more, or None for all.")
    spec = None
    if isinstance(source, (str, os.PathLike, CalibrationDataSpec)):
        spec = spec_for(source)
        batch_size = None if as_read else \
            batch_size or (spec.batch_size if spec.batch_size != 1 or not opt_shapes else None)
        max_samples = max_samples if max_samples is not None else spec.max_samples
        adapt = adapt if adapt is not None else spec.adapt
        opt_shapes = opt_shapes if opt_shapes is not None else (spec.opt_shapes or None)
    adapt = dict(adapt or {})
    opt_shapes = {k: list(check_shape(v, f"The calibration shape of input {k!r}")) for k, v in (opt_shapes or {}).items()}
    inputs = tuple(summary.inputs)
    names = [i.name for i in inputs]
    check_opt_shapes(opt_shapes, inputs)
    if spec is not None and spec.kind == "image_dir":
        check_image_size(spec.preprocessing or {}, inputs, opt_shapes, adapt)
    axes = axes if axes is not None else SampleAxes(summary)
    if batch_size is None and opt_shapes and not as_read:
        batch_size = axes.opt_batch(opt_shapes, names)
    batches = SampleBatcher(axes, batch_size, max_samples)
    whole = spec is not None and spec.kind == "npy_dir" and max_samples is not None

    for label, raw in _raw_samples(source, names, spec, lambda: axes.rows(batches.left())):
        # Only the samples still wanted are checked and adapted: a memory-mapped 4 GB .npy with
        # --max-samples 2 reads two rows, not the file.
        reread = (lambda path=label: load_array_file(Path(path), names)) if whole else None
        # Batched samples, and a file read bounded (its count does not tell whether more rows follow), need true batch axes.
        raw = _axes_checked(label, raw, axes, inputs, batches.left(), bool(batch_size and batch_size > 1) or whole,
                            reread)
        feed = check_feed(first_samples(raw, batches.left(), axes), inputs, where=label)
        yield from batches.add(label, _adapted(feed, label, axes, adapt, opt_shapes))
        if batches.done():
            break
    yield from batches.flush()
    if batches.seen == 0:
        raise CalibrationDataError("The calibration data is empty.", "No sample was found in the source.",
                                   "Point to a folder or iterable that holds at least one sample.")


__all__ = ["CalibrationDataSpec", "KINDS", "check_feed", "iter_feeds", "iter_labelled_feeds", "spec_for"]
