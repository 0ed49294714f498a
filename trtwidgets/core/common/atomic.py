"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every file the toolkit writes (statistics, recipes, caches, reports, Q/DQ models,
references, engines) goes through :func:`atomic_write`: a temporary file in the
same folder, then ``os.replace``. A crash or an exception while writing leaves
the earlier file as it was, and follows the write rule of :mod:`.write_rule`:

- only a regular file (or nothing) is replaced; a folder, pipe or device is refused;
- the temporary file is removed on every way out (exceptions, Ctrl-C, ``sys.exit``);
  one left by a run that was killed (``kill -9``, a power cut) carries that run's
  process id in its name (``.NAME.PID.XXXX.tmp``) and the next write of the same
  file removes it once that process is gone;
- a name longer than the file system allows is refused before anything is written; a name
  near the limit gets a temporary name that fits (``NAME`` shortened, :mod:`.name_length`);
- a failed write (disk full, no permission) is a :class:`~.write_rule.WriteError`
  with what, why and fix, and the earlier file is kept.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, List, Union

from .errors import UserError
from .name_length import fitted, name_limit
from .paths import user_path
from .write_rule import check_name_length, check_replaceable, write_error

__all__ = ["atomic_write", "write_bytes_atomic", "write_text_atomic", "remove_stale_temps", "process_alive"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (True when it cannot be told)."""
    if pid == os.getpid():
        return True
    if os.name == "nt":  # os.kill(pid, 0) would end the process on Windows: keep everything there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True


def _leftover_pid(name: str, prefix: str, suffix: str):
    """The process id in a leftover's name ``<prefix><pid>.<random><suffix>``, or None."""
    if not (name.startswith(prefix) and name.endswith(suffix)):
        return None
    head = name[len(prefix):].split(".", 1)[0].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _temp_prefix(path: Path) -> str:
    """``.NAME.PID.`` of a temporary file beside ``path``, NAME shortened so that the whole name fits the limit."""
    pid = str(os.getpid())
    # "." NAME "." PID "." + 8 random characters (mkstemp) + ".tmp"; a dead run's PID may have had up to 7 digits.
    room = name_limit(path.parent)[0] - (1 + 1 + max(len(pid), 7) + 1 + 8 + 4)
    return f".{fitted(path.name, room)}."


def remove_stale_temps(path: Union[str, os.PathLike]) -> List[Path]:
    """Remove the temporary files of writes of ``path`` whose process is gone; returns those removed."""
    path = Path(path)
    removed: List[Path] = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    prefix = _temp_prefix(path)
    for name in names:
        pid = _leftover_pid(name, prefix, ".tmp")
        if pid is None or process_alive(pid):
            continue
        try:
            os.unlink(path.parent / name)
            removed.append(path.parent / name)
        except OSError:
            pass
    return removed


def atomic_write(path: Union[str, os.PathLike], write: Callable[[BinaryIO], object]) -> Path:
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

    Raises
    ------
    WriteError
        ``path`` is not a regular file (a folder, pipe or device), or the write failed (disk full, no
        permission, ...); the earlier file is kept and no temporary file is left.
    """
    path = user_path(path)
    check_name_length(path)
    check_replaceable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path)
        fd, tmp = tempfile.mkstemp(prefix=f"{_temp_prefix(path)}{os.getpid()}.", suffix=".tmp", dir=str(path.parent))
    except UserError:
        raise
    except OSError as exc:
        raise write_error(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        # mkstemp makes the file private (0600); give it the permissions a normal write would.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, UserError):
            raise write_error(exc, path) from None
        raise
    return path


def write_bytes_atomic(path: Union[str, os.PathLike], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda f: f.write(data))


def write_text_atomic(path: Union[str, os.PathLike], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically.

    A file name holding bytes that are not UTF-8 reaches Python as lone surrogates (``m\\udcff.onnx``),
    which UTF-8 cannot encode; such a character is written as its escape ``\\udcff`` (read back as the same
    character from JSON, shown as that text in HTML) instead of failing after the work is done.
    """
    return atomic_write(path, lambda f: f.write(text.encode("utf-8", errors="backslashreplace")))
