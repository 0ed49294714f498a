"""TensorRT calibration caches: write the toolkit's ranges, read any cache back.

Format (TensorRT <= 10)::

    TRT-8600-EntropyCalibration2
    x: 3c010204
    conv1_out: 3d8c6f2a

The header is ``TRT-<NV_TENSORRT_VERSION>-<algorithm>`` (8.6.0 -> ``8600``, 8.6.1 ->
``8601``); each line is a tensor name and the big-endian IEEE float32 of the scale
``amax / 127`` in 8 hex digits.  Names may themselves hold ``:``; the value is what
follows the last one.

Reading is strict: a line that is not ``name: hex``, a scale that is negative, NaN
or infinite, or a tensor named twice is an error naming the line, never skipped.
A skipped line would mean a tensor left unquantized without a word, and a Q/DQ
model or engine that looks fine but is not what the cache said.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Tuple, Union

from ..common.errors import StatsError
from ..common.atomic import write_bytes_atomic
from ..common.paths import user_path
from .fake_quant import amax_of_scale, symmetric_scale

ALGORITHMS = ("EntropyCalibration2", "EntropyCalibration", "MinMaxCalibration", "LegacyCalibration")
#: Toolkit range method -> the TensorRT algorithm whose calibrator the cache is handed to.
METHOD_ALGORITHM = {"entropy": "EntropyCalibration2", "max": "MinMaxCalibration",
                    "percentile": "EntropyCalibration2", "mse": "EntropyCalibration2", "auto": "EntropyCalibration2"}
_HEADER = re.compile(r"^TRT-(\d+)-([A-Za-z0-9_]+)$")
_HEX = re.compile(r"^[0-9a-fA-F]{1,8}$")
_FP32_TINY = 1.1754943508222875e-38  # numpy.finfo(numpy.float32).tiny


@dataclass(frozen=True)
class CalibrationCache:
    """A parsed calibration cache.

    Attributes
    ----------
    version : str
        e.g. ``"8600"``.
    algorithm : str
        e.g. ``"EntropyCalibration2"``.
    amax : dict
        Tensor -> ``scale * 127``.
    scales : dict
        Tensor -> scale as stored.
    skipped : tuple of str
        Always empty: malformed lines are errors (kept for callers that read it).
    """

    version: str
    algorithm: str
    amax: Dict[str, float]
    scales: Dict[str, float]
    skipped: Tuple[str, ...] = field(default=())

    @property
    def header(self) -> str:
        return f"TRT-{self.version}-{self.algorithm}"


def scale_hex(scale: float) -> str:
    """8 hex digits of the big-endian float32 ``scale``."""
    return struct.pack(">f", float(scale)).hex()


def hex_scale(text: str) -> float:
    """Inverse of :func:`scale_hex`."""
    return struct.unpack(">f", bytes.fromhex(text.rjust(8, "0")))[0]


def trt_version_tag(version: str) -> str:
    """``"8.6.1"`` or ``"8.6.1.6"`` -> ``"8601"`` (TensorRT's NV_TENSORRT_VERSION)."""
    if re.fullmatch(r"\d+", str(version)):
        return str(version)
    # A prefix match: pre-releases such as 10.0.0b6 carry a suffix.
    if not re.match(r"\d+\.\d+", str(version).strip()):
        raise StatsError(f"TensorRT version {version!r} is not a version.",
                         "A cache header holds TensorRT's version, e.g. 8.6.1 (written 8601).",
                         "Give e.g. 8.6.1 or 8601.")
    parts = [int(p) for p in re.findall(r"\d+", str(version))[:3]] + [0, 0, 0]
    major, minor, patch = parts[:3]
    return str(major * 1000 + minor * 100 + patch)


def cache_text(amax: Mapping[str, float], version: str = "8600", algorithm: str = "EntropyCalibration2") -> str:
    """The text of a calibration cache for ``amax`` (tensor -> amax)."""
    version = trt_version_tag(version)
    if algorithm not in ALGORITHMS:
        raise StatsError(f"Unknown calibration algorithm {algorithm!r}.", f"TensorRT knows: {', '.join(ALGORITHMS)}.",
                         "Use one of those names.")
    lines = [f"TRT-{version}-{algorithm}"]
    for name, a in amax.items():
        if "\n" in name:
            raise StatsError(f"Tensor name {name!r} holds a line break.", "A calibration cache has one tensor per line.",
                             "Rename the tensor in the ONNX model.")
        a = float(a)
        if not (a >= 0 and a < float("inf")):
            raise StatsError(f"Tensor {name!r} has an invalid amax {a}.", "An amax must be finite and non-negative.",
                             "Check the statistics of this tensor for NaN/Inf.")
        lines.append(f"{name}: {scale_hex(float(symmetric_scale(a)))}")
    return "\n".join(lines) + "\n"


def write_cache(amax: Mapping[str, float], path: Union[str, os.PathLike], version: str = "8600",
                algorithm: str = "EntropyCalibration2") -> Path:
    """Write a calibration cache atomically; returns the path."""
    path = user_path(path)
    data = cache_text(amax, version, algorithm).encode("utf-8")
    write_bytes_atomic(path, data)
    return path


def check_complete(tensors: Mapping[str, Any], amax: Mapping[str, float], target: str, kept: str = "") -> None:
    """Refuse to write a cache that would leave some of ``tensors`` without a scale.

    A cache missing most tensors (every value NaN/Inf on the samples, or never computed) quantizes far
    less than asked for, and nothing in the engine says so; it is refused instead, naming the first few.
    A tensor that was always 0 has no scale (amax 0) and is not required.

    Parameters
    ----------
    tensors : mapping
        Tensor name -> its :class:`~.stats.TensorStats`, in graph order (the statistics' ``tensors``).
    amax : mapping
        Tensor -> amax, as about to be written (a Calibration's ``amax``).
    target : str
        Where the cache would have gone (for the message).
    kept : str, optional
        A sentence saying what was kept (e.g. where the statistics were saved).

    Raises
    ------
    StatsError
    """
    names = list(tensors)
    missing = [n for n, t in tensors.items() if n not in amax and not (t.count and t.absmax == 0)]
    if not missing:
        return
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    raise StatsError(f"No cache written to {target}: {len(missing)} of {len(names)} tensors have no range ({shown}).",
                     "Every value they took was NaN or Inf (or they were never computed), so a cache would leave them "
                     "unquantized without a word." + (f" {kept}" if kept else ""),
                     "Find where the model makes NaN/Inf on these samples (the first tensor named is the earliest "
                     "in the graph), fix the samples or the model, and calibrate again.")


def parse_cache(data: Union[bytes, str], source: str = "calibration cache") -> CalibrationCache:
    """Parse cache bytes or text (as written by TensorRT or :func:`write_cache`)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise StatsError(f"{source} is not a text calibration cache.", "It is not UTF-8 text.",
                             "Give a cache written by TensorRT's calibrator or by trtwidgets.") from None
    numbered = [(k, ln.strip()) for k, ln in enumerate(data.replace("\r\n", "\n").split("\n"), start=1)]
    numbered = [(k, ln) for k, ln in numbered if ln]
    if not numbered:
        raise StatsError(f"{source} is empty.", "A cache starts with a TRT-<version>-<algorithm> line.",
                         "Calibrate again, or give another cache.")
    m = _HEADER.match(numbered[0][1])
    if not m:
        raise StatsError(f"{source} does not start with a TensorRT cache header.",
                         f"The first line is {_shown(numbered[0][1])}; expected e.g. 'TRT-8600-EntropyCalibration2'.",
                         "Give a cache written by TensorRT's calibrator or by trtwidgets.")
    amax: Dict[str, float] = {}
    scales: Dict[str, float] = {}
    for k, ln in numbered[1:]:
        name, sep, value = ln.rpartition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or not _HEX.match(value):
            raise _bad_line(source, k, ln, "A scale line is '<tensor name>: <8 hex digits>' (a big-endian float32), "
                            "e.g. 'x: 3c010204'.")
        s = hex_scale(value)
        if not (0 <= s < float("inf")):
            raise _bad_line(source, k, ln, f"Its scale {s} is not a finite, non-negative number.")
        if 0 < s < _FP32_TINY:
            # A subnormal scale: QuantizeLinear's x / scale overflows, and in FP16 it is 0 (a division by zero).
            raise _bad_line(source, k, ln, f"Its scale {s:.3g} is below float32's smallest normal number, so it "
                            "cannot be a Q/DQ scale (it rounds to 0 in FP16 and divides by almost nothing).")
        if name in scales:
            raise _bad_line(source, k, ln, f"Tensor {name!r} has a scale already; which one TensorRT would use is "
                            "not defined.")
        scales[name] = s
        amax[name] = float(amax_of_scale(s))
    if not scales:
        raise StatsError(f"{source} holds no tensor scales.", "It has a header and nothing else, so it would "
                         "quantize nothing.", "Calibrate again, or give the cache TensorRT wrote.")
    return CalibrationCache(version=m.group(1), algorithm=m.group(2), amax=amax, scales=scales, skipped=())


def _shown(line: str) -> str:
    return repr(line[:60] + ("..." if len(line) > 60 else ""))


def _bad_line(source: str, number: int, line: str, why: str) -> StatsError:
    return StatsError(f"{source}, line {number}: {_shown(line)} is not a valid calibration cache line.", why,
                      "Fix or remove that line, or calibrate again (trtwidgets calibrate --cache); nothing was "
                      "written from this cache.")


def read_cache(path: Union[str, os.PathLike, bytes]) -> CalibrationCache:
    """Read a calibration cache file (or its bytes) into amax per tensor.

    Raises
    ------
    StatsError
        For a missing file or one without a TensorRT cache header.
    """
    if isinstance(path, bytes):
        return parse_cache(path)
    p = user_path(path)
    if not p.is_file():
        raise StatsError(f"No calibration cache at {p}.", "The path does not exist or is a directory.",
                         "Give the .cache file TensorRT or `trtwidgets calibrate --cache` wrote.")
    return parse_cache(p.read_bytes(), str(p))


def retag(data: Union[bytes, str], version: str, algorithm: str) -> bytes:
    """The same cache with another header (what a calibrator of another TensorRT/algorithm expects).

    Scale lines are kept byte for byte.
    """
    c = parse_cache(data)  # validates
    if algorithm not in ALGORITHMS:
        raise StatsError(f"Unknown calibration algorithm {algorithm!r}.", f"TensorRT knows: {', '.join(ALGORITHMS)}.",
                         "Use one of those names.")
    lines = [f"TRT-{trt_version_tag(version)}-{algorithm}"]
    lines += [f"{name}: {scale_hex(s)}" for name, s in c.scales.items()]
    return ("\n".join(lines) + "\n").encode("utf-8")
