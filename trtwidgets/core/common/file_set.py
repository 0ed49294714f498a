"""Replace a set of files in a folder as one: the whole earlier set or the whole new one, never a mix.

A result of several files (a plan's ``plan.json``, ``plan.html`` and ``model.qdq.onnx``) is
only meaningful together: a new ``plan.json`` beside an old ``plan.html``, or an old
``plan.json`` that recommends INT8 with its ``model.qdq.onnx`` deleted, misleads. So
:func:`replace_file_set` writes the new set into a new hidden folder beside the
destination (``.NAME.new-PID-XXXX``), gives it hard links to everything else the
destination holds (the user's own files stay, unchanged, under the same names), and then
swaps: the destination is renamed aside (``.NAME.old-PID-XXXX``), the new folder is
renamed in, and the old one is removed.

A kill at any point leaves the complete earlier set or the complete new one in place; in
the instant between the two renames both sit under their hidden names, and the next
write of the same folder (:func:`clean_leftovers`) puts the earlier one back, or removes
what a dead process left.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterable, List, Union

from .atomic import process_alive
from .name_length import fitted, name_limit
from .paths import user_path
from .write_rule import WriteError, check_name_length, write_error

__all__ = ["replace_file_set", "clean_leftovers", "check_set_folder", "MAX_CARRIED"]


def _hidden(folder: Path, kind: str) -> str:
    """``.NAME.<kind>-`` of a hidden folder beside ``folder``, NAME shortened so that the whole name fits the limit."""
    # "." NAME "." kind "-" PID (up to 7 digits) "-" + 8 random characters (mkdtemp)
    room = name_limit(folder.parent)[0] - (1 + 1 + len(kind) + 1 + 7 + 1 + 8)
    return f".{fitted(folder.name, room)}.{kind}-"


def _leftovers(folder: Path, kind: str):
    """``(path, pid)`` of the hidden ``.NAME.<kind>-PID-XXXX`` folders beside ``folder``."""
    prefix = _hidden(folder, kind)
    try:
        names = os.listdir(folder.parent)
    except OSError:
        return []
    out = []
    for name in names:
        head = name[len(prefix):].split("-", 1)[0] if name.startswith(prefix) else ""
        if head.isdigit():
            out.append((folder.parent / name, int(head)))
    return out


def clean_leftovers(folder: Union[str, os.PathLike]) -> List[str]:
    """Tidy what a killed earlier replacement of ``folder`` left behind; returns one line per action.

    A half-written new set (``.NAME.new-*``) is removed. An earlier set renamed aside
    (``.NAME.old-*``) is removed when ``folder`` holds the new one, and renamed back when the
    kill came between the two renames and ``folder`` is missing. Leftovers of a process that
    still runs are not touched.
    """
    folder = Path(folder)
    done = []
    for path, pid in _leftovers(folder, "new"):
        if not process_alive(pid):
            shutil.rmtree(path, ignore_errors=True)
            done.append(f"removed {path} (an unfinished write of {folder.name} by a process that is gone)")
    olds = sorted((p for p, pid in _leftovers(folder, "old") if not process_alive(pid)),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    for path in olds:
        if not os.path.lexists(folder):
            os.rename(path, folder)
            done.append(f"restored {folder} from {path} (a replacement was killed half-way)")
        else:
            shutil.rmtree(path, ignore_errors=True)
            done.append(f"removed {path} (the set a finished replacement of {folder.name} put aside)")
    return done


#: At most this many other entries are carried over into the new folder (each one a hard link or a folder).
MAX_CARRIED = 500


def check_set_folder(folder: Union[str, os.PathLike], names: Iterable[str]) -> None:
    """Refuse, before any work, a destination :func:`replace_file_set` could not swap.

    Raises
    ------
    WriteError
        ``folder`` holds more than :data:`MAX_CARRIED` other entries, or another file system.
    """
    folder = user_path(folder)
    check_name_length(folder)
    if folder.is_dir():
        _check_carry(folder, names)


def _check_carry(folder: Path, names: Iterable[str]) -> None:
    """Refuse a folder whose other contents are too many to link, or hold another file system."""
    skip, count, device = set(names), 0, os.stat(folder).st_dev
    stack = [(folder, skip)]
    while stack:
        current, ignore = stack.pop()
        with os.scandir(current) as it:
            entries = list(it)
        for entry in entries:
            if entry.name in ignore:
                continue
            count += 1
            if entry.is_dir(follow_symlinks=False):
                if entry.stat(follow_symlinks=False).st_dev != device:
                    raise WriteError(f"{folder} holds {entry.path}, the mount point of another file system.",
                                     "A set of files is replaced by swapping in a new folder that links to "
                                     "everything else in the old one; another file system cannot be linked.",
                                     "Give the results a folder of their own.")
                stack.append((Path(entry.path), set()))
            if count > MAX_CARRIED:
                raise WriteError(f"{folder} holds more than {MAX_CARRIED} other files and folders.",
                                 "A set of files is replaced by swapping in a new folder that links to "
                                 "everything else in the old one; that many is no results folder.",
                                 "Give the results a folder of their own (e.g. a new subfolder).")


def _link_tree(src: Path, dst: Path, skip: Iterable[str]) -> None:
    """Give ``dst`` every entry of ``src`` but ``skip``: hard links for files, new folders for folders."""
    skip = set(skip)
    with os.scandir(src) as it:
        entries = list(it)
    for entry in entries:
        if entry.name in skip:
            continue
        target = dst / entry.name
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(target)
            _link_tree(Path(entry.path), target, ())
            shutil.copystat(entry.path, target, follow_symlinks=False)
            continue
        try:
            os.link(entry.path, target, follow_symlinks=False)
        except OSError:  # a file system without hard links: copy (symlinks as symlinks)
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            else:
                shutil.copy2(entry.path, target)


def _swap(folder: Path, staging: Path) -> None:
    """Put ``staging`` in the place of ``folder`` (renaming the earlier one aside, then removing it)."""
    if not os.path.lexists(folder):
        os.rename(staging, folder)
        return
    cwd = os.getcwd()
    real = os.path.realpath(folder)
    inside = cwd == real or cwd.startswith(real + os.sep)
    aside = Path(tempfile.mkdtemp(prefix=f"{_hidden(folder, 'old')}{os.getpid()}-", dir=str(folder.parent)))
    os.rename(folder, aside)  # onto the empty folder mkdtemp made: the name is ours
    try:
        os.rename(staging, folder)
    except BaseException:
        os.rename(aside, folder)
        raise
    if inside:  # the working directory went aside with the old folder: follow the name
        os.chdir(os.path.join(str(folder.resolve()), os.path.relpath(cwd, real)))
    shutil.rmtree(aside, ignore_errors=True)


def replace_file_set(folder: Union[str, os.PathLike], names: Iterable[str],
                     write: Callable[[Path], None]) -> Path:
    """Write a set of files into ``folder`` and make them appear together, replacing the earlier set.

    Parameters
    ----------
    folder : path-like
        The destination folder (created if missing).
    names : iterable of str
        The file names of the set. Earlier files of these names go, whether or not the new set
        writes them again (an FP16 plan has no ``model.qdq.onnx``); every other entry of
        ``folder`` stays.
    write : callable
        ``write(staging)`` writes the new set into the (empty) folder it is given.

    Returns
    -------
    pathlib.Path
        ``folder``.

    Raises
    ------
    WriteError
        ``folder`` is a file, or writing failed (disk full, ...): the earlier set is kept as it was.
    UserError
        Whatever ``write`` raises; the earlier set is kept as it was.
    """
    # Resolved: a symlink to a folder is replaced at its target (not the link), and "." has a name to rename.
    check_name_length(user_path(folder))
    folder = Path(os.path.realpath(user_path(folder)))
    if os.path.lexists(folder) and not folder.is_dir():
        raise WriteError(f"{folder} is not a folder.", "A set of files is written into a folder.",
                         "Give the path of a folder (a new one, or one of an earlier run).")
    names = tuple(names)
    staging = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        clean_leftovers(folder)
        if folder.is_dir():
            _check_carry(folder, names)
        staging = Path(tempfile.mkdtemp(prefix=f"{_hidden(folder, 'new')}{os.getpid()}-", dir=str(folder.parent)))
        write(staging)
        if folder.is_dir():
            _link_tree(folder, staging, names)
            shutil.copystat(folder, staging)
        else:  # mkdtemp made it private (0700); a new folder gets the permissions mkdir would give
            mask = os.umask(0o022)
            os.umask(mask)
            os.chmod(staging, stat.S_IMODE(0o777 & ~mask))
        _swap(folder, staging)
        staging = None
    except BaseException as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno is not None:
            # Name the file of the set, not its place in the hidden staging folder.
            name = Path(exc.filename).name if isinstance(exc.filename, str) and staging is not None and \
                exc.filename.startswith(str(folder.parent)) else ""
            raise write_error(OSError(exc.errno, exc.strerror), folder / name if name else folder,
                              kept=f"the earlier files in {folder} are kept as they were, none of the new set"
                              if folder.is_dir() else "nothing was written") from None
        raise
    return folder
