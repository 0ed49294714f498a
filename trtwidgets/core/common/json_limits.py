"""JSON read with limits: a file too large or nested too deep is a :class:`UserError`, never a crash.

Python's ``json`` parser recurses once per nesting level, so a file of 200,000
``[`` raises ``RecursionError`` (a traceback, exit 1) and a 100 MB string is
read whole before anything looks at it. Every reader of a user's JSON file
(recipes, plan.json, engine-inspector JSON, a build folder's side files) goes
through :func:`load_json`, which

- refuses a file larger than its kind ever is, from its size on disk, before reading it;
- measures the nesting depth before parsing (strings skipped, one pass in C and
  numpy), and refuses what is deeper than the limit;
- still turns a ``RecursionError`` or ``MemoryError`` from the parser into the same
  error, should a limit be raised above what the interpreter can take.

Each kind of file has its own :class:`JsonLimits` (the depth and size its
writers never come near); the error says which limit was passed and by how much.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Type, Union

import numpy as np

from .errors import UserError

__all__ = ["JsonLimits", "RECIPE_LIMITS", "PLAN_LIMITS", "INSPECTOR_LIMITS", "SIDE_FILE_LIMITS", "nesting_depth",
           "check_json_text", "check_file_size", "load_json", "read_json_file"]

# A JSON string, escapes included; unrolled so that a 100 MB string is one fast C loop. An unterminated one runs
# to the end of the text: a pattern that could fail there would be retried from every later (escaped) quote, and
# '["' followed by a million '\\"' would take hours.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1
_CHUNK = 1 << 22


@dataclass(frozen=True)
class JsonLimits:
    """The largest and deepest JSON a kind of file may be.

    Attributes
    ----------
    kind : str
        What the file is, for messages (``"recipe"``).
    max_bytes : int
        Size limit, in bytes of UTF-8 text.
    max_depth : int
        Nesting limit: ``[]`` is depth 1, ``{"a": [1]}`` depth 2.
    usual : str
        What such a file usually holds, said in the error's *why*.
    """

    kind: str
    max_bytes: int
    max_depth: int
    usual: str


RECIPE_LIMITS = JsonLimits("recipe", 4 << 20, 32,
                           "a recipe holds a model path, flags, shapes and a few settings: a few KB, nested 5 deep")
PLAN_LIMITS = JsonLimits("plan.json", 64 << 20, 32,
                         "a plan holds a few candidates with their layer lists: at most a few MB, nested 6 deep")
INSPECTOR_LIMITS = JsonLimits("engine-inspector JSON", 1 << 30, 32,
                              "TensorRT's inspector JSON lists layers and tensors: tens of MB at most, nested 5 deep")
SIDE_FILE_LIMITS = JsonLimits("build file", 256 << 20, 32,
                              "the JSON files beside a build (recipe, build.json, timings) are small and flat")


def _size_text(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def nesting_depth(text: Union[str, bytes]) -> int:
    """The deepest ``[`` / ``{`` nesting of JSON ``text``, brackets inside strings not counted.

    Malformed text gives a number too (the parser says what else is wrong with it).
    """
    data = text.encode("utf-8", errors="replace") if isinstance(text, str) else bytes(text)
    if b"[" not in data and b"{" not in data:
        return 0
    codes = np.frombuffer(_STRING.sub(b"", data), np.uint8)
    depth = deepest = 0
    for start in range(0, len(codes), _CHUNK):  # in chunks: a running sum of the whole file would be 8 bytes a byte
        steps = _OPEN[codes[start:start + _CHUNK]]
        if steps.any():
            running = np.cumsum(steps, dtype=np.int64) + depth
            deepest = max(deepest, int(running.max()))
            depth = int(running[-1])
    return deepest


def _a(kind: str) -> str:
    return ("an " if kind[:1].lower() in "aeiou" else "a ") + kind


def _too_large(source: str, size: int, limits: JsonLimits, error: Type[UserError]) -> UserError:
    return error(f"{source} is {_size_text(size)}: larger than any {limits.kind} ({_size_text(limits.max_bytes)} at most).",
                 f"It was not read: {limits.usual}. A file this large is another file, or holds a damaged or "
                 "runaway value (a path or name of millions of characters).",
                 f"Check that this is the {limits.kind} you meant, or write it again with the tool that made it.")


def _too_deep(source: str, depth: Optional[int], limits: JsonLimits, error: Type[UserError]) -> UserError:
    deep = f"nested {depth:,} levels deep" if depth is not None else "nested deeper than the JSON parser can follow"
    return error(f"{source} is {deep}; {_a(limits.kind)} is at most {limits.max_depth} levels deep.",
                 f"It was not parsed: {limits.usual}. Deep nesting like this comes from a damaged or "
                 "generated file, and would exhaust the parser's stack.",
                 f"Check that this is the {limits.kind} you meant, or write it again with the tool that made it.")


def check_json_text(text: Union[str, bytes], source: str, limits: JsonLimits,
                    error: Type[UserError] = UserError) -> None:
    """Raise ``error`` when ``text`` is over the size or depth limit of ``limits``."""
    size = len(text)
    if isinstance(text, str) and 0 < size <= limits.max_bytes < 4 * size:  # near the limit: count UTF-8 bytes
        size = len(text.encode("utf-8", errors="replace"))
    if size > limits.max_bytes:
        raise _too_large(source, size, limits, error)
    depth = nesting_depth(text)
    if depth > limits.max_depth:
        raise _too_deep(source, depth, limits, error)


def load_json(text: Union[str, bytes], source: str, limits: JsonLimits, error: Type[UserError] = UserError,
              strict: bool = True, on_decode_error: Optional[Callable[[ValueError], UserError]] = None) -> Any:
    """``json.loads(text)`` within ``limits``.

    Parameters
    ----------
    text : str or bytes
        The JSON text (bytes are decoded as UTF-8 by ``json``).
    source : str
        The file's name, for messages.
    limits : JsonLimits
    error : type of UserError
        The error class raised (``RecipeError``, ``InspectorError`` ...).
    strict : bool
        ``json.loads``'s ``strict`` (False accepts raw control characters in strings).
    on_decode_error : callable, optional
        Turns the parser's ``ValueError`` (bad JSON, bad UTF-8) into the caller's own error;
        without it the ``ValueError`` propagates.

    Raises
    ------
    UserError
        Of class ``error``, for a file over the size or depth limit.
    """
    check_json_text(text, source, limits, error)
    try:
        return json.loads(text, strict=strict)
    except (RecursionError, MemoryError):
        raise _too_deep(source, None, limits, error) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        if on_decode_error is None:
            raise
        raise on_decode_error(exc) from None


def check_file_size(path: Union[str, os.PathLike], limits: JsonLimits, error: Type[UserError] = UserError) -> None:
    """Raise ``error`` when the file ``path`` is larger than ``limits`` allow (checked on disk, before reading)."""
    size = Path(path).stat().st_size
    if size > limits.max_bytes:
        raise _too_large(str(path), size, limits, error)


def read_json_file(path: Union[str, os.PathLike], limits: JsonLimits, error: Type[UserError] = UserError,
                   strict: bool = True, on_decode_error: Optional[Callable[[ValueError], UserError]] = None) -> Any:
    """Read and parse the JSON file ``path`` within ``limits``; its size is checked before it is read.

    ``OSError`` (a missing or unreadable file) propagates for the caller to explain.
    """
    path = Path(path)
    check_file_size(path, limits, error)
    return load_json(path.read_bytes(), str(path), limits, error, strict, on_decode_error)
