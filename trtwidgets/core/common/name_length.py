"""Names within the file system's length limit, and short forms of long names for a write's hidden files.

A file system limits each name in a path (``NAME_MAX``, 255 bytes on Linux and macOS, counted in the
bytes of its encoding) and the whole path (``PATH_MAX``, 4096 bytes on Linux). A name over either fails
with ``ENAMETOOLONG`` only when written, after the work: :func:`too_long` finds it first, so that the
write rule refuses it before anything runs (:func:`~.write_rule.check_name_length`).

A write's hidden names (``.NAME.PID.XXXXXXXX.tmp`` beside ``NAME``, ``.NAME.new-PID-XXXXXXXX`` beside a
folder, ``NAME.partial.EXT``) are longer than the final name; a legal name near the limit would be
refused because of them. :func:`fitted` gives the short form they use instead: the name cut to fit, and
a digest of the whole name so that two long names with the same beginning keep apart.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional, Tuple, Union

__all__ = ["NAME_MAX", "PATH_MAX", "fitted", "name_bytes", "name_limit", "too_long"]

#: The usual limit of one name, in bytes (Linux, macOS), where the file system does not say.
NAME_MAX = 255
#: The usual limit of a whole path, in bytes (Linux), where the file system does not say.
PATH_MAX = 4096


def name_bytes(name: str) -> int:
    """How many bytes ``name`` takes on disk (undecodable bytes of a name, held as surrogates, count once)."""
    return len(os.fsencode(name))


def _existing(folder: Path) -> Path:
    while not os.path.isdir(folder) and folder != folder.parent:  # os.path: a name too long is "not there"
        folder = folder.parent
    return folder


def name_limit(folder: Union[str, os.PathLike]) -> Tuple[int, int]:
    """``(longest name, longest path)`` in bytes where ``folder`` is (its nearest existing ancestor asked)."""
    where = _existing(Path(os.path.abspath(os.fspath(folder))))
    limits = []
    for key, default in (("PC_NAME_MAX", NAME_MAX), ("PC_PATH_MAX", PATH_MAX)):
        try:
            value = os.pathconf(where, key)
        except (OSError, ValueError, AttributeError):  # no pathconf (Windows), or it cannot tell
            value = None
        limits.append(value if isinstance(value, int) and value > 0 else default)
    return limits[0], limits[1]


def too_long(path: Union[str, os.PathLike]) -> Optional[Tuple[str, int, int, str]]:
    """``(the name, its bytes, the limit, "name")`` of the first name in ``path`` over its limit; None when all fit.

    A whole path over the path limit is ``(path, bytes, limit, "path")``.
    """
    text = os.path.abspath(os.path.expanduser(os.fspath(path)))
    name_max, path_max = name_limit(os.path.dirname(text) or os.sep)
    for part in Path(text).parts:
        if part != os.sep and name_bytes(part) > name_max:
            return part, name_bytes(part), name_max, "name"
    if name_bytes(text) >= path_max:
        return text, name_bytes(text), path_max - 1, "path"
    return None


def fitted(name: str, room: int) -> str:
    """``name`` itself when it takes at most ``room`` bytes; else its beginning and ``~`` and a digest, in ``room``."""
    if name_bytes(name) <= room:
        return name
    tail = "~" + hashlib.sha256(os.fsencode(name)).hexdigest()[:8]
    head = name
    while head and name_bytes(head + tail) > room:
        head = head[:-1]
    return head + tail if name_bytes(head + tail) <= room else tail[-max(room, 1):]
