"""Paths typed by a person: ``~`` expanded, and ``~nobody/...`` a clear error.

``pathlib.Path.expanduser`` raises ``RuntimeError`` for ``~name/...`` when there is
no user ``name`` (a typo, or a path copied from another machine), which reached
users as a traceback; :func:`user_path` says what is wrong instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

from .errors import UserError

__all__ = ["user_path"]


def user_path(path: Union[str, os.PathLike]) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded.

    Raises
    ------
    UserError
        For ``~name/...`` when there is no user ``name`` (``Path.expanduser`` raised RuntimeError, a
        traceback; ``os.path.expanduser`` would leave it as a relative folder named ``~name``).
    """
    text = os.fspath(path)
    expanded = os.path.expanduser(text)
    if isinstance(expanded, str) and expanded.startswith("~"):
        name = expanded[1:].split(os.sep, 1)[0]
        raise UserError(f"{text}: there is no user {name!r} on this machine.",
                        f"A path that starts with ~{name} means the home folder of the user {name}.",
                        "Write the full path, or ~/... for your own home folder.")
    return Path(expanded)
