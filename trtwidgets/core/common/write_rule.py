"""The write rule: what an output may replace, and how a failed write is explained.

Every command and API function that writes follows it (see :mod:`.atomic` and
:mod:`.file_set` for the machinery):

- an output never replaces an input of the same run, whether it is named directly or
  written inside an output folder; two paths are the same file when they resolve to
  the same path or are the same file on disk (a hard link, a symlink). An input that is a
  folder (calibration samples, a plan or build folder) has its files as inputs
  (:func:`folder_member`): ``--out data/s000.npy`` would replace a sample;
- only a regular file (or nothing) is replaced: a folder, a named pipe, a device or a
  socket where a file is to be written is refused, so ``--cache /dev/null`` never turns
  a device into a file;
- a write that fails (disk full, no permission, ...) keeps the earlier file and says
  what, why and what to do;
- an interrupted run writes its partial result under its own name
  (:func:`partial_path`), never over a complete one;
- a name longer than the file system allows (255 bytes a name, 4096 a path) is refused before any work
  (:func:`check_name_length`); the hidden names a write uses beside it are shortened to fit
  (:mod:`.name_length`), so a legal name is never refused because of them;
- nothing is written through a symbolic link to a folder *inside* an output folder
  (:func:`inside_output`): a ``candidates/`` link in a shared plan folder must not make
  ``plan measure`` replace files elsewhere. (The output folder itself may be a link: the
  user named it.)
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Callable, Mapping, Optional, Tuple, Union

from .errors import UserError
from .name_length import NAME_MAX, fitted, name_bytes, too_long

__all__ = ["WriteError", "check_replaceable", "check_name_length", "file_identity", "folder_member", "same_file",
           "refuse_inputs", "partial_path", "write_error", "inside_output"]

PathLike = Union[str, "os.PathLike[str]"]

_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class WriteError(UserError, OSError):
    """An output could not be written, or may not be written where it was asked to go.

    It is a :class:`~.errors.UserError` (what, why, fix) and, for code that catches write
    failures as such, an :class:`OSError` (``errno`` is the original one, where there was one).
    """

    def __init__(self, what, why=None, fix=None, errno_=None) -> None:
        super().__init__(what, why, fix)
        self.errno = errno_

    def __str__(self) -> str:
        return self.message  # not OSError's "[Errno N] ...": the explanation, as for every UserError


def file_identity(path: PathLike) -> Optional[Tuple[int, int]]:
    """``(device, inode)`` of the file ``path`` names (symlinks followed), or None when there is none."""
    try:
        st = os.stat(os.path.expanduser(os.fspath(path)))
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def same_file(a: PathLike, b: PathLike) -> bool:
    """True when ``a`` and ``b`` resolve to the same path or are the same file on disk (hard or symbolic link)."""
    a, b = os.path.expanduser(os.fspath(a)), os.path.expanduser(os.fspath(b))
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    ida = file_identity(a)
    return ida is not None and ida == file_identity(b)


def check_replaceable(path: PathLike, label: Optional[str] = None) -> None:
    """Refuse to write a file at ``path`` unless nothing or a regular file is there.

    Parameters
    ----------
    path : path-like
    label : str, optional
        How the message names the output (e.g. ``"--cache /dev/null"``); default: the path.

    Raises
    ------
    WriteError
        ``path`` is a folder, a named pipe, a device or a socket.
    """
    label = label or os.fspath(path)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # nothing there (or a parent that is no folder: the write itself says so)
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise WriteError(f"{label} is a folder.", "A file is to be written there, and a folder is never replaced.",
                         f"Give a file path, e.g. {os.path.join(os.fspath(path), 'out' + Path(path).suffix)}.")
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    why = ("Only regular files are replaced: a pipe would be turned into a file, or block the run until "
           "something reads it." if stat.S_ISFIFO(mode) else
           f"Only regular files are replaced: writing there would replace {kind} with a file.")
    raise WriteError(f"{label} is {kind}, not a regular file.", why,
                     "Give the path of a regular file, or of one that does not exist yet.")


def _short(text: str, keep: int = 60) -> str:
    return text if len(text) <= keep else f"{text[:keep - 21]}...{text[-18:]}"


def check_name_length(path: PathLike, label: Optional[str] = None) -> None:
    """Refuse a ``path`` with a name (a folder's or the file's) longer than its file system allows.

    Raises
    ------
    WriteError
        Naming the long name, its length and the limit (errno ``ENAMETOOLONG``).
    """
    hit = too_long(path)
    if hit is None:
        return
    name, size, limit, kind = hit
    label = _short(label or os.fspath(path), 100)
    one = "a whole path" if kind == "path" else "one name (a folder's or a file's)"
    raise WriteError(f"{label}: the {kind} {_short(name)!r} is {size} bytes long.",
                     f"The file system allows at most {limit} bytes for {one}, counted in the bytes of its encoding: "
                     f"no file can have this {kind}, so reading or writing it fails (a write, after the work).",
                     f"Give a shorter {kind} (at most {limit} bytes).", errno.ENAMETOOLONG)


#: At most this many entries of an input folder are compared with an output by the file itself (hard links).
MAX_MEMBERS = 200_000


def folder_member(output: PathLike, folder: PathLike, counts: Optional[Callable[[Path], bool]] = None,
                  recursive: bool = True) -> Optional[Path]:
    """The file of the input ``folder`` that writing ``output`` would replace, or None.

    A file is the folder's when ``output`` resolves into the folder (``..``, a symlinked folder, a link to
    it), or is one of its files on disk (a hard link, the target of a link the folder holds).

    Parameters
    ----------
    output : path-like
        A file to be written. Only one that exists can replace anything.
    folder : path-like
        A folder the run reads.
    counts : callable, optional
        ``counts(member) -> bool``: which of its files the run reads (default: every file); a data folder's
        reader, for one, reads its sample files and passes over the toolkit's own outputs.
    recursive : bool
        The run reads files below the folder's subfolders too (False: its own files only).
    """
    out = os.path.expanduser(os.fspath(output))
    top = os.path.realpath(os.path.expanduser(os.fspath(folder)))
    if not os.path.isdir(top) or not os.path.isfile(out):
        return None
    real = os.path.realpath(out)
    inside = os.path.dirname(real) == top if not recursive else os.path.commonpath([real, top]) == top
    if inside and (counts is None or counts(Path(real))):
        return Path(real)
    ident = file_identity(out)
    seen = 0
    for root, _folders, files in os.walk(top):
        for name in files:
            member = Path(root) / name
            seen += 1
            if file_identity(member) == ident and (counts is None or counts(member)):
                return member
        if seen > MAX_MEMBERS or not recursive:
            break
    return None


def refuse_inputs(output: PathLike, inputs: Mapping[str, object], label: Optional[str] = None) -> None:
    """Refuse an ``output`` that is one of ``inputs`` (label -> path, or an object with a ``path``) of the same run.

    An input that is a folder refuses an output that is one of its files (:func:`folder_member`).

    Raises
    ------
    WriteError
        Naming the output and the input it would destroy.
    """
    label = label or os.fspath(output)
    for source, path in inputs.items():
        if not isinstance(path, (str, os.PathLike)):
            path = getattr(path, "path", None)  # a loaded model or statistics remember the file they came from
        if not isinstance(path, (str, os.PathLike)) or not os.path.exists(os.path.expanduser(os.fspath(path))):
            continue
        if same_file(output, path):
            raise WriteError(f"{label} is the run's own input ({source}: {os.fspath(path)}).",
                             "Writing it would destroy the file it is read from.",
                             f"Write {Path(os.fspath(output)).name} somewhere else.")
        member = folder_member(output, path)
        if member is not None:
            raise WriteError(f"{label} is {member}, a file of the run's own input ({source}: {os.fspath(path)}).",
                             "Writing it would destroy a file the run reads.",
                             f"Write {Path(os.fspath(output)).name} outside {os.fspath(path)}.")


def inside_output(root: PathLike, *folders: str, label: Optional[str] = None) -> Path:
    """The folder ``root/folders...``, after checking that none of ``folders`` is a link or no folder.

    Parameters
    ----------
    root : path-like
        The output folder the user named (it may itself be a link).
    *folders : str
        Folders below ``root`` that files are written into; those that do not exist yet are created later by
        the writer, as real folders. (A file written there may be a link: an atomic write replaces the link,
        never its target.)
    label : str, optional
        How the message names the output folder (default: its path).

    Raises
    ------
    WriteError
        A folder below ``root`` is a symbolic link (writing through it would write outside the output folder),
        or a file, pipe or device stands where a folder is needed.
    """
    root = Path(os.path.expanduser(os.fspath(root)))
    label = label or str(root)
    current = root
    for part in folders:
        current = current / part
        if os.path.islink(current):
            raise WriteError(f"{current} inside {label} is a symbolic link (to {os.readlink(current)}).",
                             "Files are written into that folder; through the link they would land outside the output "
                             "folder and replace files there (a shared folder can carry such a link).",
                             f"Remove the link ({current}); the folder is made again when needed.")
        if os.path.lexists(current) and not os.path.isdir(current):
            raise WriteError(f"{current} inside {label} is not a folder.", "Files are written into a folder there.",
                             f"Move {current.name} away; the folder is made again when needed.")
    return current


def partial_path(path: PathLike) -> Path:
    """Where an interrupted run's result for ``path`` goes: ``stats.npz`` -> ``stats.partial.npz``, ``out`` -> ``out.partial``."""
    path = Path(os.fspath(path))
    if path.stem.endswith(".partial") or path.name.endswith(".partial"):
        return path  # already a partial result's name: a second interruption replaces it (it holds the first's samples)
    # A name near the length limit keeps its partial name within it: the stem is shortened (name_length.fitted).
    if path.suffix and path.stem:
        return path.with_name(f"{fitted(path.stem, NAME_MAX - 8 - name_bytes(path.suffix))}.partial{path.suffix}")
    return path.with_name(fitted(path.name, NAME_MAX - 8) + ".partial")


def write_error(exc: OSError, path: PathLike, kept: Optional[str] = None) -> WriteError:
    """A :class:`WriteError` explaining ``exc``, raised while writing ``path``.

    ``kept`` says what was left as it was (default: the earlier file, or that nothing was written).
    """
    path = Path(os.fspath(path))
    if kept is None:
        kept = f"the earlier {path.name} is kept as it was" if os.path.lexists(path) else "nothing was written"
    code = getattr(exc, "errno", None)
    reason = exc.strerror or str(exc) or type(exc).__name__
    if code in (errno.ENOSPC, errno.EDQUOT):
        why, fix = (f"The disk holding {path.parent} is full (or your quota is used up); {kept}.",
                    "Free some space there, or write to another disk, then run again.")
    elif code == errno.EFBIG:
        why, fix = (f"The file is larger than this system or file system allows; {kept}.",
                    "Write to another file system, or raise the file size limit (ulimit -f), then run again.")
    elif code in (errno.EACCES, errno.EPERM):
        why, fix = (f"There is no permission to write in {path.parent}; {kept}.",
                    "Write to a folder you can write to.")
    elif code in (errno.ENOTDIR, errno.EEXIST):
        why, fix = (f"A file stands where a folder of the path {path.parent} is needed; {kept}.",
                    "Give a path inside a folder (or move that file away).")
    elif code == errno.EROFS:
        why, fix = f"{path.parent} is on a read-only file system; {kept}.", "Write to a writable folder."
    else:
        why, fix = (f"{type(exc).__name__}: {reason}; {kept}.",
                    "Check the path and the disk, then run again (or write somewhere else).")
    err = WriteError(f"Could not write {path}: {reason}.", why, fix, code)
    err.strerror, err.filename = reason, str(path)
    return err
