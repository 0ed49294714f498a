"""Paths typed by a person: ``~`` expanded without ever raising.

``pathlib.Path.expanduser`` raises ``RuntimeError`` for ``~name/...`` when there is
no user ``name`` (a typo, or a path copied from another machine), which reached
users as a traceback. ``os.path.expanduser`` leaves such a path as it is, so the
caller's own "no file at ..." message names it instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

__all__ = ["user_path"]


def user_path(path: Union[str, os.PathLike]) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded where that user exists; never raises for it."""
    return Path(os.path.expanduser(os.fspath(path)))
