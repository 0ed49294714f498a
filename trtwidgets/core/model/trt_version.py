"""TensorRT version numbers: parse, compare, and find the installed one.

TensorRT spells its version several ways: ``tensorrt.__version__`` ("8.6.1",
"10.16.1.11"), a short "X.Y" a user types, and the number in a calibration
cache header (``TRT-8600-EntropyCalibration2`` for 8.6.0, ``TRT-100100-...`` for
10.1.0). :func:`parse_trt_version` reads all of them into one comparable value.

:func:`installed_trt_version` reads the version from the installed
distribution's metadata and never imports :mod:`tensorrt`: importing it loads
hundreds of MB of CUDA libraries and fails without a GPU driver, while lint only
needs the number.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple, Union

from ..common.errors import UserError

#: Distributions that carry TensorRT's Python bindings, most specific first.
#: ``tensorrt`` is a meta package on recent releases; the bindings live in the
#: ``-cuXX`` / ``_bindings`` ones, and any of them may be installed alone.
TRT_DISTRIBUTIONS = (
    "tensorrt",
    "tensorrt-cu13", "tensorrt-cu12", "tensorrt-cu11",
    "tensorrt-cu13-bindings", "tensorrt-cu12-bindings", "tensorrt-cu11-bindings",
    "tensorrt_bindings", "tensorrt-lean", "tensorrt-dispatch",
)

#: The TensorRT an export is written for when none is asked for and none is installed: 10 and 11 read an FP16
#: float part (a strongly typed build runs the model's types); 8.6 users say --trt-version 8.6.
DEFAULT_TARGET = "10"

_DOTTED = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.(\d+))?(?:[.+-]?[A-Za-z][\w.+-]*)?\s*$")
_CACHE = re.compile(r"^\s*(?:TRT-)?(\d{4,6})(?:-\w+)?\s*$")


@dataclass(frozen=True, order=True)
class TrtVersion:
    """A TensorRT version, ordered by (major, minor, patch, build).

    Missing parts are 0, so ``8.6`` == ``8.6.0`` < ``8.6.1``.
    """

    major: int
    minor: int = 0
    patch: int = 0
    build: int = 0

    def __str__(self) -> str:
        parts = [self.major, self.minor, self.patch] + ([self.build] if self.build else [])
        return ".".join(str(p) for p in parts)

    @property
    def short(self) -> str:
        """``"major.minor"``, e.g. ``"10.16"``."""
        return f"{self.major}.{self.minor}"


VersionLike = Union[str, TrtVersion, Tuple[int, ...], int]


def _bad(text) -> UserError:
    return UserError(
        f"{text!r} is not a TensorRT version.",
        "A version is written like 8.6, 8.6.1, 10.16.1.11 or 11.0 (or 8600 / 100100 as in a calibration cache).",
        "Give the TensorRT version you build with, e.g. --trt-version 10.16, or 'installed'.",
    )


def parse_trt_version(value: VersionLike) -> TrtVersion:
    """Read a TensorRT version from any of its spellings.

    Parameters
    ----------
    value : str, TrtVersion, tuple of int or int
        ``"8.6"``, ``"8.6.1"``, ``"10.16.1.11"``, ``"11.4"``, a cache number
        ``"8600"`` / ``"TRT-100100-EntropyCalibration2"``, ``(10, 1)`` or a bare
        major ``10``.

    Returns
    -------
    TrtVersion

    Raises
    ------
    UserError
        If ``value`` is not a version.
    """
    if isinstance(value, TrtVersion):
        return value
    if isinstance(value, bool):
        raise _bad(value)
    if isinstance(value, int):
        if value <= 0:
            raise _bad(value)
        return parse_trt_version(str(value))
    if isinstance(value, tuple):
        if not 1 <= len(value) <= 4 or not all(isinstance(p, int) and p >= 0 for p in value):
            raise _bad(value)
        return TrtVersion(*value)
    if not isinstance(value, str):
        raise _bad(value)
    m = _CACHE.match(value)
    if m:
        digits = m.group(1)
        if len(digits) == 4:  # 8.6.1 -> 8601
            return TrtVersion(int(digits[0]), int(digits[1]), int(digits[2:]))
        if len(digits) == 6:  # 10.16.1 -> 101601
            return TrtVersion(int(digits[:2]), int(digits[2:4]), int(digits[4:]))
        raise _bad(value)
    m = _DOTTED.match(value)
    if not m or int(m.group(1)) == 0 or int(m.group(1)) > 99:
        raise _bad(value)
    return TrtVersion(*(int(g) if g else 0 for g in m.groups()))


def _version_from_source(origin: str) -> Optional[str]:
    # Read __version__ as text: importing tensorrt would load the CUDA libraries.
    try:
        text = Path(origin).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", text, re.M)
    return m.group(1) if m else None


def installed_trt_version() -> Optional[TrtVersion]:
    """The installed TensorRT's version, or None, without importing :mod:`tensorrt`.

    Looks at the package metadata of the distributions in
    :data:`TRT_DISTRIBUTIONS`, then at ``tensorrt/__init__.py`` as text (for
    copies unpacked without metadata).
    """
    for dist in TRT_DISTRIBUTIONS:
        try:
            text = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        try:
            return parse_trt_version(text)
        except UserError:
            continue
    try:
        spec = importlib.util.find_spec("tensorrt")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin and spec.origin.endswith(".py"):
        found = _version_from_source(spec.origin)
        if found:
            try:
                return parse_trt_version(found)
            except UserError:
                return None
    return None
