"""Where calibration samples come from: folders of ``.npy``/``.npz`` arrays or of images.

Each loader yields ``(label, {input_name: array})`` pairs, the label naming the
file, so that every later complaint (a wrong dtype, a NaN, an ONNX Runtime
failure) can say which file to look at.  Nothing here unpickles: arrays are read
with ``allow_pickle=False`` and images with Pillow.  How samples are checked and
batched is :mod:`.data`; how they are brought to the opt shape is :mod:`.shape_adapt`.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
import stat
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.errors import CalibrationDataError
from ..common.notes import note
from .image_depth import read_pixels
from .npz_reader import read_npz, tool_output_kind

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
ARRAY_SUFFIXES = (".npy", ".npz")
#: Preprocessing keys for image folders, and what each must be.
PREPROCESS_KEYS = {
    "input": "the model input the images feed (a name)",
    "resize": "[height, width] in pixels",
    "layout": "'NCHW' or 'NHWC'",
    "scale": "a number the pixel values are multiplied by (default 1/255)",
    "mean": "a number or one per channel, subtracted after scaling",
    "std": "a non-zero number or one per channel, divided by after the mean",
    "dtype": "'float32', 'float16' or 'float64'",
    "color": "'RGB', 'BGR' or 'L'",
}
#: The largest image side ``resize`` accepts: beyond it a typo would allocate gigabytes per image.
MAX_IMAGE_SIDE = 16384
_DTYPES = ("float32", "float16", "float64")

Sample = Tuple[str, Dict[str, np.ndarray]]


def _bad_pre(key: str, value, why: Optional[str] = None) -> CalibrationDataError:
    return CalibrationDataError(f"The image preprocessing's {key!r} is {value!r}.",
                                why or f"{key!r} must be {PREPROCESS_KEYS[key]}.",
                                f"Give {key!r} as {PREPROCESS_KEYS[key]}, e.g. {{\"input\": \"x\", \"resize\": [48, 192], "
                                "\"layout\": \"NCHW\", \"mean\": [0.5, 0.5, 0.5], \"std\": [0.5, 0.5, 0.5]}.")


def _number(key: str, value) -> float:
    # Finite in float32 too: the pixels are float32, and 1e308 would silently become Inf there.
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)) \
            or abs(float(value)) > float(np.finfo(np.float32).max):
        raise _bad_pre(key, value)
    return float(value)


def check_preprocessing(pre: Mapping[str, Any]) -> None:
    """Refuse preprocessing that could not be applied to an image, before any image is read.

    Raises
    ------
    CalibrationDataError
        Naming the key, its value, and what it must be.
    """
    unknown = sorted(str(k) for k in pre if k not in PREPROCESS_KEYS)
    if unknown:
        raise CalibrationDataError(f"Unknown image preprocessing setting(s): {', '.join(unknown)}.",
                                   f"Known settings: {', '.join(PREPROCESS_KEYS)}.", "Remove or rename them.")
    if "input" in pre and not (isinstance(pre["input"], str) and pre["input"]):
        raise _bad_pre("input", pre["input"])
    if pre.get("resize") is not None:
        size = pre["resize"]
        if isinstance(size, (str, bytes)) or not isinstance(size, Sequence) or len(size) != 2 or not all(
                isinstance(v, numbers.Integral) and not isinstance(v, bool) and 1 <= int(v) <= MAX_IMAGE_SIDE for v in size):
            raise _bad_pre("resize", size, f"'resize' must be [height, width], two whole numbers from 1 to {MAX_IMAGE_SIDE}.")
    if str(pre.get("layout", "NCHW")).upper() not in ("NCHW", "NHWC"):
        raise _bad_pre("layout", pre.get("layout"))
    if str(pre.get("color", "RGB")).upper() not in ("RGB", "BGR", "L"):
        raise _bad_pre("color", pre.get("color"))
    if str(pre.get("dtype", "float32")) not in _DTYPES:
        raise _bad_pre("dtype", pre.get("dtype"))
    if pre.get("scale") is not None:
        _number("scale", pre["scale"])
    channels = 1 if str(pre.get("color", "RGB")).upper() == "L" else 3
    for key in ("mean", "std"):
        value = pre.get(key)
        if value is None:
            continue
        values = list(value) if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else [value]
        given = [_number(key, v) for v in values]
        if len(given) not in (1, channels):
            raise _bad_pre(key, value, f"{key!r} has {len(given)} values; the images have {channels} channel(s) "
                                       f"(color {str(pre.get('color', 'RGB')).upper()}).")
        if key == "std" and any(v == 0 for v in given):
            raise _bad_pre(key, value, "A std of 0 divides by zero: every pixel would be Inf or NaN.")


def check_image_size(pre: Mapping[str, Any], inputs: Sequence, opt_shapes: Mapping[str, Sequence[int]],
                     adapt: Mapping[str, str]) -> None:
    """Refuse a ``resize`` the model's input cannot take, before any image is read and resized.

    A resize to 16384x16384 is 3 GB per RGB image in float32; when the input is fixed at another size
    (and no adaptation brings the images to it) the first image would fail only after that.
    """
    name = pre.get("input") or (inputs[0].name if inputs else None)
    info = next((i for i in inputs if i.name == name), None)
    if not pre.get("resize") or info is None or name in adapt or len(info.shape or ()) != 4:
        return
    target = tuple((opt_shapes.get(name) if name is not None else None) or info.shape)
    axes = (1, 2) if str(pre.get("layout", "NCHW")).upper() == "NHWC" else (2, 3)
    want = [target[a] for a in axes]
    h, w = (int(v) for v in pre["resize"])
    if all(isinstance(d, int) and not isinstance(d, bool) for d in want) and (h, w) != tuple(want):
        raise CalibrationDataError(
            f"The image preprocessing resizes to {h}x{w}; input {name!r} takes {want[0]}x{want[1]} "
            f"(shape {'x'.join(map(str, target))}).",
            "Every image would be resized to a size the model cannot run at (checked before reading any).",
            f"Give \"resize\": [{want[0]}, {want[1]}] in the preprocessing.")


def _not_readable(path: Path, what: str, exc: Exception, fix: str) -> CalibrationDataError:
    # numpy says "allow_pickle" only when the file holds Python objects; any other ValueError is damage.
    if isinstance(exc, ValueError) and ("pickle" in str(exc).lower() or "python objects" in str(exc).lower()):
        return CalibrationDataError(f"{path} holds Python objects, which are never unpickled.", str(exc),
                                    "Save plain numeric arrays (np.save(path, array) / np.savez(path, x=array)).")
    return CalibrationDataError(f"{path} could not be read as {what}.", f"{type(exc).__name__}: {exc}", fix)


def load_array_file(path: Path, input_names: Sequence[str], rows: Union[None, int, Mapping[str, int]] = None
                    ) -> Dict[str, np.ndarray]:
    """One sample from a ``.npy`` (single-input models) or ``.npz`` file (one array per input).

    ``rows`` bounds what is read of a ``.npz`` along axis 0 (its headers are read first, see
    :mod:`.npz_reader`): one number for every array, or input name -> rows for the inputs batched
    on axis 0; a ``.npy`` is memory-mapped, so only the rows used are ever read.

    Raises
    ------
    CalibrationDataError
        For a file numpy cannot read, one holding Python objects, an array too large to decompress,
        or a ``.npy`` for a multi-input model.
    """
    path = Path(path)
    if isinstance(rows, Mapping) and len(input_names) == 1:
        rows = rows.get(input_names[0])  # a single array feeds the only input, whatever its name (arr_0)
    if path.suffix.lower() == ".npz":
        try:
            with warnings.catch_warnings():
                # numpy warns about Python 2 headers it can still read; the data is what matters here.
                warnings.simplefilter("ignore")
                data = read_npz(path, rows)
        except CalibrationDataError:
            raise
        except Exception as exc:
            raise _not_readable(path, ".npz", exc, "Re-save it with numpy.savez(path, x=array).") from None
        if len(data) == 1 and len(input_names) == 1 and input_names[0] not in data:
            # A single unnamed array (arr_0) feeds a single-input model.
            data = {input_names[0]: next(iter(data.values()))}
        return data
    if len(input_names) != 1:
        raise CalibrationDataError(
            f"{path} is a .npy file, but the model has {len(input_names)} inputs ({', '.join(input_names)}).",
            "A .npy file holds one array and cannot say which input it is for.",
            "Save each sample as .npz with one array per input name: np.savez(path, **{name: array}).")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = np.load(str(path), allow_pickle=False, mmap_mode="r")
    except Exception as exc:
        raise _not_readable(path, ".npy", exc, "Re-save it with numpy.save(path, array).") from None
    if not isinstance(arr, np.ndarray):
        raise CalibrationDataError(f"{path} could not be read as .npy.", f"It holds a {type(arr).__name__}.",
                                   "Re-save it with numpy.save(path, array).")
    return {input_names[0]: arr}


def load_image(path: Path, pre: Mapping[str, Any]) -> np.ndarray:
    """One image as a batch of one, preprocessed as ``pre`` says (see :data:`PREPROCESS_KEYS`).

    Raises
    ------
    CalibrationDataError
        For bad preprocessing, or a file Pillow cannot decode.
    """
    check_preprocessing(pre)
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow is a dependency
        raise CalibrationDataError("Reading image folders needs Pillow.", "It is not installed.",
                                   "pip install Pillow") from None
    color = str(pre.get("color", "RGB")).upper()
    try:
        with Image.open(path) as im:
            # As a viewer shows it: a phone photo stored sideways carries its turn in EXIF Orientation.
            upright = _upright(im)
            # At the image's real depth: 16-bit scaled to the 8-bit range, float used as is or refused.
            arr = read_pixels(upright, color, pre.get("resize"), Path(path))
    except CalibrationDataError:
        raise
    except Exception as exc:
        raise CalibrationDataError(f"{path} could not be read as an image.", f"{type(exc).__name__}: {exc}",
                                   "Remove or replace the file.") from None
    if color == "BGR":
        arr = arr[:, :, ::-1]
    # Extreme (but float32-finite) settings can still overflow; the feed check then refuses the Inf, naming the file.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        arr = arr * np.float32(pre.get("scale", 1.0 / 255.0))
        if pre.get("mean") is not None:
            arr = arr - np.asarray(pre["mean"], dtype=np.float32)
        if pre.get("std") is not None:
            arr = arr / np.asarray(pre["std"], dtype=np.float32)
    if str(pre.get("layout", "NCHW")).upper() == "NCHW":
        arr = arr.transpose(2, 0, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(arr[None].astype(pre.get("dtype", "float32")))


def _hidden(name: str) -> bool:
    # Dot files are no samples: macOS's AppleDouble "._x.npy" (resource forks, 1 byte to a few KB), ".DS_Store",
    # editors' swap files. They are passed over without a word, as `ls` does.
    return name.startswith(".")


def reads_as_sample(path: Path) -> bool:
    """Whether a folder of samples has ``path`` read as a sample (an input an output must not replace).

    Only the name is judged, as :func:`sample_files` does: a dot file no, a sample suffix yes, the toolkit's own
    statistics and calibrations (``calibrate --data D --stats D/stats.npz``) no.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if _hidden(path.name) or suffix not in ARRAY_SUFFIXES + IMAGE_SUFFIXES:
        return False
    return suffix != ".npz" or not tool_output_kind(path)


def _unusable(entry: Path) -> str:
    """Why a sample-named folder entry cannot be read ('' when it can): a FIFO, a dangling link, a folder ..."""
    try:
        mode = entry.stat().st_mode
    except OSError as exc:
        if entry.is_symlink():
            return "a link loop" if exc.errno == errno.ELOOP else "a link to nothing"
        return f"not readable ({exc.strerror or type(exc).__name__})"
    if stat.S_ISDIR(mode):
        return "a folder"
    if not stat.S_ISREG(mode):
        return "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "not a regular file (a device or socket)"
    if not os.access(entry, os.R_OK):
        return "not readable (no permission)"
    return ""


def _note_skipped(path: Path, skipped) -> None:
    """One note listing the sample-named entries that could not be read (the first few of them)."""
    if not skipped:
        return
    shown = "; ".join(f"{p.name} ({why})" for p, why in skipped[:6])
    more = f"; and {len(skipped) - 6} more" if len(skipped) > 6 else ""
    note(f"{path}: {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} named like samples skipped, not "
         f"calibrated on: {shown}{more}")


def _upright(im):
    """``im`` turned as its EXIF Orientation says (the same image when it says nothing)."""
    from PIL import ImageOps

    try:
        orientation = im.getexif().get(0x0112, 1)
    except Exception:
        return im
    if orientation in (None, 1):
        return im
    return ImageOps.exif_transpose(im)


def sample_files(path: Path, kind: str) -> list:
    """The sample files of a folder, sorted, or a :class:`CalibrationDataError` saying why there are none.

    Dot files (``._x.npy`` of macOS, ``.DS_Store``) are passed over silently; entries named like samples that
    cannot be read as files (a FIFO, a dangling link, a folder named ``x.npy``, a file without read
    permission) are skipped and listed in one note.
    """
    if not path.exists():
        raise CalibrationDataError(f"No calibration data at {path}.", "The path does not exist.",
                                   "Give a folder of .npy/.npz files or images.")
    if not path.is_dir():
        raise CalibrationDataError(f"{path} is not a folder.", "Calibration data is a folder of samples.",
                                   "Give the folder that holds the .npy/.npz files or images.")
    suffixes = ARRAY_SUFFIXES if kind == "npy_dir" else IMAGE_SUFFIXES
    try:
        entries = list(path.iterdir())
    except OSError as exc:
        raise CalibrationDataError(f"The folder {path} could not be listed.", f"{type(exc).__name__}: {exc}",
                                   "Check its permissions.") from None
    named = sorted(p for p in entries if not _hidden(p.name) and p.suffix.lower() in suffixes)
    skipped = [(p, why) for p, why in ((p, _unusable(p)) for p in named) if why]
    _note_skipped(path, skipped)
    files = [p for p in named if p not in {s for s, _ in skipped}]
    kinds = {p: tool_output_kind(p) for p in files if p.suffix.lower() == ".npz"}
    own = [p for p, kind in kinds.items() if kind]
    for p in own:
        # e.g. `calibrate --data D --stats D/stats.npz`: the next run must not read the statistics as a sample.
        option = "--out" if kinds[p] == "calibration" else "--stats"
        note(f"{p} is trtwidgets {kinds[p]} (written by calibrate {option}), not a calibration sample: skipped")
    files = [p for p in files if p not in own]
    if not files and own:
        raise CalibrationDataError(f"{path} holds no samples, only the toolkit's own statistics ({own[0].name}).",
                                   "Statistics written by calibrate --stats are not calibration samples.",
                                   "Point --data to the folder of the samples (.npy/.npz per sample, or images).")
    if not files:
        found = sorted({p.suffix.lower() or p.name for p in entries})[:8]
        raise CalibrationDataError(f"{path} holds no {'/'.join(suffixes)} files.",
                                   f"An empty source cannot calibrate anything. Found: {', '.join(found) or 'nothing'}.",
                                   "Point to the folder that holds the samples.")
    return files


def dir_samples(path: Path, kind: str, input_names: Sequence[str], pre: Optional[Mapping],
                rows_left: Optional[Callable[[], Union[None, int, Mapping[str, int]]]] = None) -> Iterator[Sample]:
    """``(file name, sample)`` for every sample file of a folder, in name order.

    ``rows_left`` says, as each file is opened, how many samples are still wanted (None: all; a
    mapping: per input batched on axis 0), so that no more of a ``.npz`` is decompressed than is used.
    """
    files = sample_files(path, kind)
    if kind != "npy_dir":
        check_preprocessing(pre or {})
    for p in files:
        if kind == "npy_dir":
            yield str(p), load_array_file(p, input_names, rows_left() if rows_left is not None else None)
        else:
            name = (pre or {}).get("input") or input_names[0]
            yield str(p), {name: load_image(p, pre or {})}


def detect_kind(path: Path) -> str:
    """``"npy_dir"`` or ``"image_dir"``, from the files a folder holds (``"npy_dir"`` when unsure)."""
    try:
        if path.is_dir():
            suffixes = {p.suffix.lower() for p in path.iterdir() if not _hidden(p.name) and p.is_file()}
            if suffixes & set(ARRAY_SUFFIXES):
                return "npy_dir"
            if suffixes & set(IMAGE_SUFFIXES):
                return "image_dir"
    except OSError:
        pass  # an unreadable folder is reported by sample_files, with the reason
    return "npy_dir"


__all__ = ["ARRAY_SUFFIXES", "IMAGE_SUFFIXES", "MAX_IMAGE_SIDE", "PREPROCESS_KEYS", "check_image_size",
           "check_preprocessing", "detect_kind",
           "dir_samples", "load_array_file", "load_image", "reads_as_sample", "sample_files"]
