"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every file the toolkit writes (statistics, recipes, caches, reports, Q/DQ models,
references, engines) goes through :func:`atomic_write`: a temporary file in the
same folder, then ``os.replace``. A crash or an exception while writing leaves
the earlier file as it was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Union

from .paths import user_path

__all__ = ["atomic_write", "write_bytes_atomic", "write_text_atomic"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Union[str, os.PathLike], write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write(f)`` on a binary temporary file beside ``path``, then move it into place.

    Parameters
    ----------
    path : path-like
        The file to write (its folder is created).
    write : callable
        Writes the content to the open binary file it is given.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    path = user_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        # mkstemp makes the file private (0600); give it the permissions a normal write would.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def write_bytes_atomic(path: Union[str, os.PathLike], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda f: f.write(data))


def write_text_atomic(path: Union[str, os.PathLike], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))
