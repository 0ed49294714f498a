"""Calibration data: where samples come from, how they are checked and shaped.

A source is a :class:`CalibrationDataSpec` (JSON-serialisable, stored in a
recipe), a directory path, the word ``"demo"``, or any iterable of
``{input_name: array}``.  :func:`iter_feeds` turns any of them into model feeds
one batch at a time, checking each against the model's inputs and, where a
calibration profile's opt shape is given, adapting samples to it: TensorRT >= 8.5
calibrates only at the opt shape, so that is what its ranges are computed on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.errors import CalibrationDataError
from ..common.frozen import deep_freeze, mapping_hash, readonly_mapping, thaw

KINDS = ("demo", "npy_dir", "image_dir")
ADAPT_MODES = ("pad", "truncate", "resize")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
ARRAY_SUFFIXES = (".npy", ".npz")


@dataclass(frozen=True)
class CalibrationDataSpec:
    """Where calibration samples come from, and how they are prepared.

    Attributes
    ----------
    kind : str
        ``"demo"`` (the bundled crops), ``"npy_dir"`` (a folder of ``.npy``/``.npz``) or
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
                                           fix=f"Give {key} as a dict (input name -> value).")
        object.__setattr__(self, "adapt", readonly_mapping(self.adapt))
        object.__setattr__(self, "opt_shapes", readonly_mapping({k: tuple(int(d) for d in v) for k, v in self.opt_shapes.items()}))
        if self.preprocessing is not None:
            object.__setattr__(self, "preprocessing", deep_freeze(self.preprocessing))
        if self.kind not in KINDS:
            raise CalibrationDataError(f"Unknown calibration data kind {self.kind!r}.",
                                       f"Known kinds: {', '.join(KINDS)}.", "Use one of them.")
        if int(self.batch_size) < 1:
            raise CalibrationDataError(f"Calibration batch size {self.batch_size} is not positive.",
                                       fix="Use a batch size of 1 or more.")
        if self.max_samples is not None and int(self.max_samples) < 1:
            raise CalibrationDataError(f"max_samples={self.max_samples} leaves no data.", fix="Use 1 or more, or None for all.")
        for name, mode in self.adapt.items():
            if mode not in ADAPT_MODES:
                raise CalibrationDataError(f"Unknown adaptation {mode!r} for input {name!r}.",
                                           f"Known: {', '.join(ADAPT_MODES)}.")
        if self.kind != "demo" and not self.path:
            raise CalibrationDataError(f"Calibration data of kind {self.kind!r} needs a path.", fix="Give the folder.")
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
        unknown = sorted(set(d) - known)
        if unknown:
            raise CalibrationDataError(f"Unknown calibration data settings: {', '.join(unknown)}.",
                                       f"Known settings: {', '.join(sorted(known))}.")
        return cls(kind=d.get("kind", "demo"), path=d.get("path"), batch_size=int(d.get("batch_size", 1)),
                   max_samples=d.get("max_samples"), preprocessing=d.get("preprocessing"),
                   adapt=dict(d.get("adapt") or {}),
                   opt_shapes={k: [int(x) for x in v] for k, v in (d.get("opt_shapes") or {}).items()})

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


def _check_opt_shapes(opt_shapes: Mapping[str, Sequence[int]], inputs: Sequence) -> None:
    """Opt shapes name model inputs and have their rank (before any sample is read)."""
    by_name = {i.name: i for i in inputs}
    for name, shape in opt_shapes.items():
        info = by_name.get(name)
        if info is None:
            raise CalibrationDataError(f"The calibration shape names input {name!r}, which the model does not have.",
                                       f"Its inputs: {', '.join(by_name) or 'none'}.", "Use one of those names.")
        dims = getattr(info, "shape", None)
        if dims is not None and len(dims) != len(shape):
            raise CalibrationDataError(
                f"The calibration shape of input {name!r} has {len(shape)} dims ({_shape_text(shape)}); "
                f"the input has {len(dims)}.", None,
                f"Give all {len(dims)} dims of {name!r} (its shape in the model: "
                f"[{', '.join(str(d) for d in dims)}]).")


def _shape_text(shape: Sequence) -> str:
    return "x".join(str(d) for d in shape) if len(shape) else "scalar"


# --------------------------------------------------------------------------- sources

def _file_samples(path: Path, input_names: Sequence[str]) -> Iterator[Dict[str, np.ndarray]]:
    if path.suffix == ".npz":
        try:
            with np.load(str(path), allow_pickle=False) as f:
                data = {k: f[k] for k in f.files}
        except ValueError as exc:
            raise CalibrationDataError(f"{path} holds Python objects, which are never unpickled.", str(exc),
                                       "Save plain numeric arrays (np.savez(path, x=array)).") from None
        except Exception as exc:  # noqa: BLE001
            raise CalibrationDataError(f"{path} could not be read as .npz.", f"{type(exc).__name__}: {exc}",
                                       "Re-save it with numpy.savez.") from None
        if len(data) == 1 and len(input_names) == 1 and input_names[0] not in data:
            # A single unnamed array (arr_0) feeds a single-input model.
            data = {input_names[0]: next(iter(data.values()))}
        yield data
    else:
        if len(input_names) != 1:
            raise CalibrationDataError(
                f"{path} is a .npy file, but the model has {len(input_names)} inputs ({', '.join(input_names)}).",
                "A .npy file holds one array and cannot say which input it is for.",
                "Save each sample as .npz with one array per input name: np.savez(path, **{name: array}).")
        try:
            arr = np.load(str(path), allow_pickle=False, mmap_mode="r")
        except ValueError as exc:
            raise CalibrationDataError(f"{path} holds Python objects, which are never unpickled.", str(exc),
                                       "Save a plain numeric array with numpy.save.") from None
        except Exception as exc:  # noqa: BLE001
            raise CalibrationDataError(f"{path} could not be read as .npy.", f"{type(exc).__name__}: {exc}",
                                       "Re-save it with numpy.save.") from None
        yield {input_names[0]: arr}


def _load_image(path: Path, pre: Mapping[str, Any]) -> np.ndarray:
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow is a dependency
        raise CalibrationDataError("Reading image folders needs Pillow.", "It is not installed.",
                                   "pip install Pillow") from None
    color = str(pre.get("color", "RGB")).upper()
    try:
        with Image.open(path) as im:
            im = im.convert("L" if color == "L" else "RGB")
            if pre.get("resize"):
                h, w = (int(v) for v in pre["resize"])
                im = im.resize((w, h), Image.BILINEAR)
            arr = np.asarray(im, dtype=np.float32)
    except CalibrationDataError:
        raise
    except Exception as exc:  # noqa: BLE001 - PIL raises many types for bad files
        raise CalibrationDataError(f"{path} could not be read as an image.", f"{type(exc).__name__}: {exc}",
                                   "Remove or replace the file.") from None
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if color == "BGR":
        arr = arr[:, :, ::-1]
    arr = arr * np.float32(pre.get("scale", 1.0 / 255.0))
    if pre.get("mean") is not None:
        arr = arr - np.asarray(pre["mean"], dtype=np.float32)
    if pre.get("std") is not None:
        arr = arr / np.asarray(pre["std"], dtype=np.float32)
    if str(pre.get("layout", "NCHW")).upper() == "NCHW":
        arr = arr.transpose(2, 0, 1)
    return np.ascontiguousarray(arr[None].astype(pre.get("dtype", "float32")))


def _dir_samples(path: Path, kind: str, input_names: Sequence[str], pre: Optional[Mapping]) -> Iterator[Dict[str, np.ndarray]]:
    if not path.exists():
        raise CalibrationDataError(f"No calibration data at {path}.", "The path does not exist.",
                                   "Give a folder of .npy/.npz files or images.")
    if not path.is_dir():
        raise CalibrationDataError(f"{path} is not a folder.", "Calibration data is a folder of samples.",
                                   "Give the folder that holds the .npy/.npz files or images.")
    suffixes = ARRAY_SUFFIXES if kind == "npy_dir" else IMAGE_SUFFIXES
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in suffixes)
    if not files:
        found = sorted({p.suffix.lower() or p.name for p in path.iterdir()})[:8]
        raise CalibrationDataError(f"{path} holds no {'/'.join(suffixes)} files.",
                                   f"An empty source cannot calibrate anything. Found: {', '.join(found) or 'nothing'}.",
                                   "Point to the folder that holds the samples.")
    for p in files:
        if kind == "npy_dir":
            yield from _file_samples(p, input_names)
        else:
            name = (pre or {}).get("input") or input_names[0]
            yield {name: _load_image(p, pre or {})}


def _detect_kind(path: Path) -> str:
    if path.is_dir():
        suffixes = {p.suffix.lower() for p in path.iterdir() if p.is_file()}
        if suffixes & set(ARRAY_SUFFIXES):
            return "npy_dir"
        if suffixes & set(IMAGE_SUFFIXES):
            return "image_dir"
    return "npy_dir"


def spec_for(source: Union[str, os.PathLike, CalibrationDataSpec], **overrides) -> CalibrationDataSpec:
    """A spec for a path (``"demo"`` for the bundled crops); keyword arguments override fields."""
    if isinstance(source, CalibrationDataSpec):
        return source.replace(**overrides) if overrides else source
    text = str(source)
    if text == "demo":
        d = {"kind": "demo"}
    else:
        d = {"kind": _detect_kind(Path(text).expanduser()), "path": text}
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
            arr = np.asarray(arr)
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
                raise CalibrationDataError(f"Input {info.name!r}{at} is empty.", fix="Remove empty samples.")
            out[info.name] = arr
            continue
        if arr.ndim != len(info.shape):
            raise CalibrationDataError(
                f"Input {info.name!r}{at}: expected rank {len(info.shape)} (shape {_shape_text(info.shape)}), "
                f"found rank {arr.ndim} (shape {_shape_text(arr.shape)}).",
                "Samples must carry every dimension, including the batch dimension.",
                "Add a batch axis with array[None] if this is a single sample." if arr.ndim == len(info.shape) - 1 else None)
        bad = [(i, d, s) for i, (d, s) in enumerate(zip(info.shape, arr.shape)) if isinstance(d, int) and d != s]
        if bad:
            raise CalibrationDataError(
                f"Input {info.name!r}{at}: expected shape {_shape_text(info.shape)}, found {_shape_text(arr.shape)}.",
                "Dimension " + ", ".join(f"{i} must be {d} (found {s})" for i, d, s in bad) + ".",
                "Resize or crop the samples in the preprocessing.")
        if arr.size == 0:
            raise CalibrationDataError(f"Input {info.name!r}{at} is empty (shape {_shape_text(arr.shape)}).",
                                       fix="Remove empty samples.")
        out[info.name] = arr
    return out


# --------------------------------------------------------------------------- adaptation

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


def adapt_array(arr: np.ndarray, target: Sequence[int], mode: str, name: str = "") -> np.ndarray:
    """Bring every non-batch dimension of ``arr`` to ``target`` (batch is left alone).

    ``pad`` zero-pads smaller dimensions at the end, ``truncate`` keeps the leading part of
    larger ones, ``resize`` interpolates linearly.
    """
    if len(target) != arr.ndim:
        raise CalibrationDataError(f"Input {name!r}: opt shape {_shape_text(target)} has rank {len(target)}, "
                                   f"samples have rank {arr.ndim}.", fix="Fix the calibration profile.")
    out = arr
    for axis in range(1, arr.ndim):
        want, have = int(target[axis]), out.shape[axis]
        if want == have:
            continue
        if mode == "resize":
            out = _resize_axis(out, axis, want)
        elif mode == "pad":
            if have > want:
                raise CalibrationDataError(
                    f"Input {name!r}: dimension {axis} is {have}, larger than the opt shape's {want}; padding cannot shrink it.",
                    fix="Use adapt='truncate' or 'resize' for this input.")
            widths = [(0, 0)] * out.ndim
            widths[axis] = (0, want - have)
            out = np.pad(out, widths)
        elif mode == "truncate":
            if have < want:
                raise CalibrationDataError(
                    f"Input {name!r}: dimension {axis} is {have}, smaller than the opt shape's {want}; truncating cannot grow it.",
                    fix="Use adapt='pad' or 'resize' for this input.")
            out = np.take(out, np.arange(want), axis=axis)
        else:
            raise CalibrationDataError(f"Unknown adaptation {mode!r} for input {name!r}.", fix=f"Use one of {ADAPT_MODES}.")
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
                lines.append(f"Input {info.name!r} ({_shape_text(info.shape)}) has no opt shape: TensorRT calibrates at the "
                             "calibration profile's opt shape, so give one.")
            continue
        opt_t = _shape_text(opt)
        have = sample_shapes.get(info.name)
        if have is None or tuple(have[1:]) == tuple(opt[1:]):
            lines.append(f"Input {info.name!r}: TensorRT calibrates at the opt shape {opt_t}; the samples already have that shape"
                         + ("." if have is not None else " (assumed)."))
            continue
        mode = adapt.get(info.name)
        diffs = ", ".join(f"dim {i}: {h} -> {o}" for i, (h, o) in enumerate(zip(have, opt)) if i and h != o)
        if mode is None:
            lines.append(f"Input {info.name!r}: samples are {_shape_text(have)} but TensorRT calibrates only at the opt shape "
                         f"{opt_t} ({diffs}). Choose pad, truncate or resize for this input, or change the profile's opt shape.")
        else:
            how = {"pad": "zero-padded at the end", "truncate": "cut to the leading part", "resize": "linearly resized"}[mode]
            lines.append(f"Input {info.name!r}: samples are {_shape_text(have)}; TensorRT calibrates at the opt shape {opt_t}, "
                         f"so each sample is {how} ({diffs}). Ranges come from the adapted samples, as TensorRT would see them.")
        if opt[0] != (have[0] if have is not None else opt[0]):
            lines.append(f"Input {info.name!r}: samples are batched {opt[0]} at a time to match the opt batch size.")
    return "\n".join(lines) if lines else "All inputs are static; TensorRT sees the samples as they are."


# --------------------------------------------------------------------------- feeds

def _raw_samples(source, input_names: Sequence[str], spec: Optional[CalibrationDataSpec]) -> Iterable[Mapping[str, np.ndarray]]:
    if spec is not None:
        if spec.kind == "demo":
            from ... import demo

            return demo.sample_inputs(1)
        return _dir_samples(Path(spec.path).expanduser(), spec.kind, input_names, spec.preprocessing)
    if isinstance(source, Mapping):
        # One feed given directly: treat it as a one-element source.
        return [source]
    try:
        return iter(source)
    except TypeError:
        raise CalibrationDataError(f"Calibration data of type {type(source).__name__} is not a source.",
                                   "A source is a folder path, 'demo', a CalibrationDataSpec, or an iterable of dicts.",
                                   "Pass a folder of .npy/.npz files or a list of {input_name: array}.") from None


def iter_feeds(source, summary, batch_size: Optional[int] = None, max_samples: Optional[int] = None,
               adapt: Optional[Mapping[str, str]] = None, opt_shapes: Optional[Mapping[str, Sequence[int]]] = None
               ) -> Iterator[Dict[str, np.ndarray]]:
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

    Yields
    ------
    dict
        ``{input_name: array}`` for one model run.

    Raises
    ------
    CalibrationDataError
        For an empty source and for samples that do not fit the model's inputs.
    """
    spec = None
    if isinstance(source, (str, os.PathLike, CalibrationDataSpec)):
        spec = spec_for(source)
        batch_size = batch_size or (spec.batch_size if spec.batch_size != 1 or not opt_shapes else None)
        max_samples = max_samples if max_samples is not None else spec.max_samples
        adapt = adapt if adapt is not None else spec.adapt
        opt_shapes = opt_shapes if opt_shapes is not None else (spec.opt_shapes or None)
    adapt = dict(adapt or {})
    opt_shapes = {k: [int(d) for d in v] for k, v in (opt_shapes or {}).items()}
    inputs = tuple(summary.inputs)
    names = [i.name for i in inputs]
    _check_opt_shapes(opt_shapes, inputs)
    if batch_size is None and opt_shapes:
        batch_size = opt_shapes[names[0]][0] if names[0] in opt_shapes else None
    seen = 0
    pending: List[Dict[str, np.ndarray]] = []
    pending_n = 0
    for k, raw in enumerate(_raw_samples(source, names, spec)):
        feed = check_feed(raw, inputs, where=f"sample {k}")
        for name, arr in feed.items():
            if name in opt_shapes and tuple(arr.shape[1:]) != tuple(opt_shapes[name][1:]):
                mode = adapt.get(name)
                if mode is None:
                    raise CalibrationDataError(
                        f"Input {name!r} (sample {k}): shape {_shape_text(arr.shape)} differs from the calibration opt shape "
                        f"{_shape_text(opt_shapes[name])}.",
                        "TensorRT calibrates only at the calibration profile's opt shape.",
                        f"Choose adapt={{'{name}': 'pad' | 'truncate' | 'resize'}}, or change the opt shape.")
                feed[name] = adapt_array(arr, opt_shapes[name], mode, name)
        n = int(feed[names[0]].shape[0]) if feed[names[0]].ndim else 1
        if max_samples is not None and seen + pending_n + n > max_samples:
            keep = max_samples - seen - pending_n
            feed = {name: a[:keep] for name, a in feed.items()}
            n = keep
        if n <= 0:
            break
        if batch_size is None:
            seen += n
            yield {name: np.ascontiguousarray(a) for name, a in feed.items()}
        else:
            pending.append(feed)
            pending_n += n
            while pending_n >= batch_size:
                cat = {name: np.concatenate([p[name] for p in pending]) if len(pending) > 1 else pending[0][name]
                       for name in names}
                out = {name: np.ascontiguousarray(a[:batch_size]) for name, a in cat.items()}
                rest = {name: a[batch_size:] for name, a in cat.items()}
                pending_n -= batch_size
                pending = [rest] if pending_n else []
                seen += batch_size
                yield out
        if max_samples is not None and seen + pending_n >= max_samples:
            break
    if pending_n:
        # The last, incomplete batch is still fed: dropping samples silently would change the ranges.
        cat = {name: np.concatenate([p[name] for p in pending]) for name in names}
        seen += pending_n
        yield cat
    if seen == 0:
        raise CalibrationDataError("The calibration data is empty.", "No sample was found in the source.",
                                   "Point to a folder or iterable that holds at least one sample.")


def feed_shapes(feed: Mapping[str, np.ndarray]) -> Dict[str, Tuple[int, ...]]:
    return {k: tuple(int(d) for d in v.shape) for k, v in feed.items()}
