"""Small helpers the lesson notebooks (08 to 14) import, so that their code cells stay short.

Each is plumbing a notebook would otherwise define in a cell: finding a committed file of the repository,
and the like. The notebooks name the helper in their text; nothing in :mod:`trtwidgets.core` imports this
module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

__all__ = ["repo_file"]


def repo_file(*parts: str) -> Optional[Path]:
    """A file of the repository (beside the package, or above the working folder), or None.

    ``repo_file("benchmarks", "results", "zoo")`` finds the committed folder whether the notebook runs from
    a checkout (the package's parent) or from a copy of the notebooks inside or below one.
    """
    for base in (Path(__file__).resolve().parents[2], Path.cwd(), *Path.cwd().parents):
        if base.joinpath(*parts).exists():
            return base.joinpath(*parts)
    return None
