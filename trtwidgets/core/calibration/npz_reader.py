"""Reading ``.npz`` samples with bounded memory, and telling the toolkit's own files from samples.

``numpy.load`` decompresses a whole member when it is indexed: a 1 MB compressed file can
declare 1.4 GB of zeros, and a sample file of 10,000 rows is read whole for ``--max-samples 2``.
Here each member's npy header is read first (it declares dtype and shape), the size is checked
against :data:`MAX_ARRAY_BYTES` and against the zip header's declared size *before* anything is
decompressed, and only the rows asked for are read from the stream. Nothing is unpickled: an
object dtype is refused from the header. (The reading itself is
:mod:`trtwidgets.core.common.npz_files`, which every other ``.npz`` the toolkit reads goes through.)

:func:`tool_output_kind` recognises a file the toolkit wrote (statistics from ``calibrate --stats``, a
calibration from ``calibrate --out``) so that a sample folder that also holds one skips it, with a note,
instead of reading it as a sample. :func:`text_member` reads one small text member (a JSON document).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Dict, Mapping, Optional, Union

import numpy as np

from ..common.errors import CalibrationDataError
from ..common.npz_files import MAX_ARRAY_BYTES, checked_header, read_member

#: The statistics' ``meta`` member is JSON text; beyond this it is not ours.
_MAX_META_BYTES = 64 << 20
#: The largest text member :func:`text_member` reads by default.
MAX_TEXT_BYTES = 64 << 20
_CHUNK = 16 << 20

__all__ = ["MAX_ARRAY_BYTES", "MAX_TEXT_BYTES", "read_npz", "text_member", "tool_output_kind"]


def _too_big(path: Path, key: str, shape, dtype, nbytes: int) -> CalibrationDataError:
    return CalibrationDataError(
        f"{path}: array {key!r} ({'x'.join(map(str, shape)) or 'scalar'} {dtype}) would take {nbytes / 2**30:.2f} GiB "
        "once decompressed.",
        f"A .npz member is read whole into memory; more than {MAX_ARRAY_BYTES / 2**30:g} GiB per array is refused "
        "before decompressing (a small compressed file can declare gigabytes).",
        "Save large sample sets as .npy files (read memory-mapped, a few rows at a time), split them into "
        "several files, or use --max-samples.")


def _read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, rows: Optional[int]) -> np.ndarray:
    return read_member(z, info, path, rows, refuse=_too_big)


def read_npz(path: Path, rows: Union[None, int, Mapping[str, int]] = None) -> Dict[str, np.ndarray]:
    """Every array of a ``.npz`` file, at most ``rows`` rows of each (None: all), never unpickling.

    ``rows`` may be a mapping, array name -> rows: the arrays it names are cut (those batched on
    axis 0), the others read whole (a state batched on axis 1, a scalar).

    Raises
    ------
    CalibrationDataError
        An array larger than :data:`MAX_ARRAY_BYTES` once read.
    Exception
        zipfile/numpy/ValueError for a damaged file (the caller words it).
    """
    out: Dict[str, np.ndarray] = {}
    with open(path, "rb") as fh, zipfile.ZipFile(fh) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            out[key] = _read_member(z, info, Path(path), rows.get(key) if isinstance(rows, Mapping) else rows)
    return out


def text_member(path: Path, name: str, max_bytes: int = MAX_TEXT_BYTES) -> Optional[bytes]:
    """The bytes of member ``name`` (a uint8 array of text) of a ``.npz``; None when it has none.

    Its header is read first and a member over ``max_bytes`` is refused before anything is
    decompressed; nothing is unpickled.

    Raises
    ------
    ValueError
        The member is not a 1-D uint8 array, or is larger than ``max_bytes``.
    Exception
        zipfile/numpy errors for a damaged file (the caller words it).
    """
    with open(path, "rb") as fh, zipfile.ZipFile(fh) as z:
        try:
            info = z.getinfo(name + ".npy")
        except KeyError:
            return None
        with z.open(info) as f:
            shape, _, dtype = checked_header(f, info.filename, name, info.file_size)
        if dtype != np.uint8 or len(shape) != 1:
            raise ValueError(f"member {name!r} is {dtype} of shape {shape}, not text (uint8 bytes)")
        if shape[0] > max_bytes:
            raise ValueError(f"member {name!r} holds {shape[0]:,} bytes, more than the {max_bytes:,} it may")
        return bytes(_read_member(z, info, Path(path), None))


def tool_output_kind(path: Path) -> str:
    """``"statistics"`` or ``"calibration"`` when ``path`` is a file the toolkit wrote, else ''.

    Statistics come from ``calibrate --stats``, a saved Calibration (statistics and its
    settings) from ``calibrate --out``. Only headers and the small ``meta`` member are
    read; anything unexpected means "not ours" ('').
    """
    from .stats import STATS_FORMAT

    try:
        with open(path, "rb") as fh, zipfile.ZipFile(fh) as z:
            names = set(z.namelist())
            if "meta.npy" not in names or not ({"hists.npy", "hist_0.npy"} & names):
                return ""
        meta = text_member(path, "meta", _MAX_META_BYTES)
        doc = json.loads(meta.decode("utf-8")) if meta is not None else None
        if not (isinstance(doc, dict) and doc.get("format") == STATS_FORMAT):
            return ""
        return "calibration" if "calibration.npy" in names else "statistics"
    except Exception:
        return ""
