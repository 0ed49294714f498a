"""Reading ``.npz`` and ``.npy`` files with bounded memory, headers checked before any data is read.

``numpy.load`` trusts a file's headers: a member whose npy header claims 10^11 floats is a
``MemoryError`` (or minutes of swapping), a small compressed file can declare gigabytes of zeros,
and a 3 GB sparse file is read whole. Every ``.npz`` the toolkit reads (calibration samples,
statistics, held-back checks, references, labels) goes through :func:`open_npz` or
:func:`read_member`, and a standalone ``.npy`` through :func:`read_npy`: each array's npy header is
read first, and refused before anything is decompressed when it holds Python objects (nothing is
ever unpickled), declares more data than the file holds, or more than :data:`MAX_ARRAY_BYTES`;
all arrays read from one archive stay within :data:`MAX_TOTAL_BYTES`.

Problems are ``ValueError`` (``zipfile.BadZipFile`` / ``OSError`` for a file that is no zip), as
``numpy.load`` raised them, so each caller keeps wording them for its kind of file.
"""

from __future__ import annotations

import io
import math
import os
import zipfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, List, Optional, Union

import numpy as np

__all__ = ["MAX_ARRAY_BYTES", "MAX_TOTAL_BYTES", "NpzArchive", "open_npz", "read_member", "read_npy"]

#: The most bytes one array may take once read (the rows asked for, not the file).
MAX_ARRAY_BYTES = 1 << 30
#: The most bytes all the arrays read from one archive by :func:`open_npz` may take together.
MAX_TOTAL_BYTES = 4 << 30
_CHUNK = 16 << 20


def _header(f, name: str):
    """``(shape, fortran_order, dtype)`` of the npy stream ``f`` (positioned at its start)."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version in ((2, 0), (3, 0)):
        return np.lib.format.read_array_header_2_0(f)
    raise ValueError(f"member {name!r} has npy format version {version}, which numpy does not write")


def checked_header(f, name: str, key: str, available: int):
    """The npy header of ``f``, refused when it holds objects or declares more than ``available`` bytes of data."""
    shape, fortran, dtype = _header(f, name)
    if dtype.hasobject:
        raise ValueError(f"member {key!r} holds Python objects; Object arrays cannot be loaded when "
                         "allow_pickle=False")
    total = math.prod(shape) * dtype.itemsize
    if available < total:
        raise ValueError(f"member {key!r} declares {total} bytes of data, but the file holds {available}")
    return shape, fortran, dtype


def too_big(path: Path, key: str, shape, dtype, nbytes: int) -> Exception:
    """The error for an array over :data:`MAX_ARRAY_BYTES` (a ValueError; samples say more, see npz_reader)."""
    return ValueError(f"array {key!r} ({'x'.join(map(str, shape)) or 'scalar'} {dtype}) would take "
                      f"{nbytes / 2**30:.2f} GiB once read, more than the {MAX_ARRAY_BYTES / 2**30:g} GiB one array "
                      "may take")


def _read_stream(f, key: str, shape, fortran: bool, dtype, nbytes: int, take) -> np.ndarray:
    """``nbytes`` of array data from the stream ``f`` into a new array of shape ``take``."""
    arr = np.empty(take, dtype=dtype, order="F" if fortran and take == shape else "C")
    view = arr.reshape(-1, order="A").data.cast("B") if arr.size else memoryview(bytearray())
    got = 0
    while got < nbytes:
        # In pieces: ZipExtFile.readinto reads a whole request into a temporary bytes object first.
        n = f.readinto(view[got:got + _CHUNK])
        if not n:
            break
        got += n
    if got != nbytes:
        raise ValueError(f"member {key!r} ends after {got} of {nbytes} bytes")
    return arr


def read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, rows: Optional[int] = None,
                refuse: Callable[..., Exception] = too_big, budget: Optional[int] = None) -> np.ndarray:
    """One member of an open ``.npz``, at most ``rows`` rows of it (None: all), checked as the module says.

    ``refuse(path, key, shape, dtype, nbytes)`` makes the error for an array over :data:`MAX_ARRAY_BYTES`;
    ``budget`` is how many bytes the archive's arrays may still take (None: no total).
    """
    key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
    with z.open(info) as f:
        shape, fortran, dtype = checked_header(f, info.filename, key, info.file_size)
        take = shape
        if rows is not None and len(shape) >= 1 and not fortran and rows < shape[0]:
            take = (rows,) + tuple(shape[1:])  # only the rows asked for are decompressed
        nbytes = math.prod(take) * dtype.itemsize
        if nbytes > MAX_ARRAY_BYTES:
            raise refuse(path, key, take, dtype, nbytes)
        if budget is not None and nbytes > budget:
            raise ValueError(f"its arrays take more than {MAX_TOTAL_BYTES / 2**30:g} GiB together")
        return _read_stream(f, key, shape, fortran, dtype, nbytes, take)


class NpzArchive:
    """A ``.npz`` opened by :func:`open_npz`: ``files``, ``archive[name]``, ``name in archive``, a context manager.

    Each array is read when it is indexed, after its header is checked (see the module docstring).
    """

    def __init__(self, source: Union[str, os.PathLike, bytes]) -> None:
        self._fh: BinaryIO
        if isinstance(source, (bytes, bytearray)):
            self.path, self._fh = Path("<bytes>"), io.BytesIO(bytes(source))
        else:
            self.path, self._fh = Path(os.fspath(source)), open(source, "rb")
        try:
            self._zip = zipfile.ZipFile(self._fh)
            self._infos = {}
            for info in self._zip.infolist():
                if not info.is_dir():
                    self._infos[info.filename[:-4] if info.filename.endswith(".npy") else info.filename] = info
        except BaseException:
            self._fh.close()
            raise
        self.files: List[str] = list(self._infos)
        self._read = 0

    def __contains__(self, key: object) -> bool:
        return key in self._infos

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._infos:
            raise KeyError(f"{key} is not a file in the archive")
        arr = read_member(self._zip, self._infos[key], self.path, budget=MAX_TOTAL_BYTES - self._read)
        self._read += arr.nbytes
        return arr

    def close(self) -> None:
        self._zip.close()
        self._fh.close()

    def __enter__(self) -> "NpzArchive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_npz(source: Union[str, os.PathLike, bytes]) -> NpzArchive:
    """``source`` (a path, or the file's bytes) opened for checked, bounded reading, instead of ``numpy.load``."""
    return NpzArchive(source)


def read_npy(path: Union[str, os.PathLike]) -> np.ndarray:
    """The array of a ``.npy`` file, its header checked first (see the module docstring), instead of ``numpy.load``."""
    path = Path(os.fspath(path))
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        shape, fortran, dtype = _header(f, path.name)
        if dtype.hasobject:
            raise ValueError(f"{path.name} holds Python objects; Object arrays cannot be loaded when "
                             "allow_pickle=False")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > size - f.tell():
            raise ValueError(f"it declares {nbytes} bytes of data, but holds {size - f.tell()}")
        if nbytes > MAX_ARRAY_BYTES:
            raise too_big(path, path.name, shape, dtype, nbytes)
        return _read_stream(f, path.name, shape, fortran, dtype, nbytes, shape)
