"""Build directories: one new folder per build, published atomically, never reused.

A build writes everything (engine, inspector JSON, recipe, log, cache) into a
hidden temporary folder beside its destination and renames it into place only
when complete, so a crash or a failed build leaves no half-written build
behind, and a folder that exists is always a whole build. An earlier build is
never overwritten: the default name is ``<timestamp>-<recipe hash>`` under
``builds/``, made unique with a counter, and an explicit ``out_dir`` must not
exist or be empty.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Optional, Union

from ..core.common.errors import BuildError

PathLike = Union[str, "os.PathLike[str]"]

#: Where builds go when no out_dir is given (relative to the working directory), unless TRTWIDGETS_BUILDS is set.
DEFAULT_ROOT = "builds"


def recipe_hash(recipe_json: str, length: int = 8) -> str:
    """Short content hash of a recipe's JSON text (names a build after what it built)."""
    return hashlib.sha256(recipe_json.encode("utf-8")).hexdigest()[:length]


def default_build_dir(recipe_json: str, root: Optional[PathLike] = None, now: Optional[float] = None) -> Path:
    """A fresh ``<root>/<YYYYmmdd-HHMMSS>-<hash>`` path that does not exist yet.

    Two builds of the same recipe in the same second get ``-2``, ``-3``, ...
    """
    root = Path(root if root is not None else os.environ.get("TRTWIDGETS_BUILDS", DEFAULT_ROOT)).expanduser()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    base = f"{stamp}-{recipe_hash(recipe_json)}"
    cand = root / base
    n = 2
    while cand.exists():
        cand = root / f"{base}-{n}"
        n += 1
    return cand


def check_out_dir(out_dir: PathLike) -> Path:
    """``out_dir`` as a Path, if a build may be published there (missing or an empty folder).

    Raises
    ------
    BuildError
        It is a file, or a folder that already holds something (an earlier build is never overwritten).
    """
    p = Path(out_dir).expanduser()
    if p.exists() and not p.is_dir():
        raise BuildError(f"The build output {p} is a file.", "A build writes a folder of files.",
                         "Give the path of a new folder, or leave out_dir unset for builds/<time>-<hash>/.")
    if p.is_dir() and any(p.iterdir()):
        raise BuildError(f"The build folder {p} already exists and is not empty.",
                         "An earlier build is never overwritten.",
                         "Give a new folder, delete the old one yourself, or leave out_dir unset for builds/<time>-<hash>/.")
    return p


def staging_dir(final: Path) -> Path:
    """A new hidden temporary folder beside ``final`` (same file system, so the rename is atomic)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=str(final.parent)))


def publish(staging: Path, final: Path) -> Path:
    """Move the complete ``staging`` folder to ``final`` in one rename.

    ``os.rename`` of a folder replaces only a missing or *empty* folder and
    fails on a non-empty one, which is exactly the never-overwrite rule even if
    another build took ``final`` in the meantime.

    Raises
    ------
    BuildError
        ``final`` appeared and is not empty; the staging folder is left for the user.
    """
    try:
        os.rename(staging, final)
    except OSError as exc:
        raise BuildError(f"Could not publish the build to {final}.",
                         f"{exc.strerror or exc}; the folder was probably created by another build meanwhile.",
                         f"The complete build is kept in {staging}; rename it yourself.") from None
    return final


def discard(staging: Optional[Path]) -> None:
    """Remove a staging folder after a failed build."""
    if staging is not None and staging.exists():
        shutil.rmtree(staging, ignore_errors=True)


