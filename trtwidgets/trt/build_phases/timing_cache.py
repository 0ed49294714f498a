"""The timing cache: whether to read the recipe's file, attach it to the config, and save it after the build."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

from ...core.common.atomic import write_bytes_atomic
from .. import version_of
from .state import BuildState


def timing_cache_plan(optimization_level: Optional[int], file_bytes: bytes, empty_bytes: bytes = b"") -> Tuple[str, str]:
    """What to do with a timing cache file: ``("off" | "new" | "load", why)``.

    ``"off"``: builder optimization level 0 takes the first tactic that runs and
    does not use a timing cache, so the file is neither read nor written (saving
    such a build's cache wrote an empty cache that TensorRT 8.6 then refused to read:
    ``Myelin error from unknown graph`` / ``The timing cache will not be used!``).
    ``"new"``: no file, an empty one, or one that is byte-equal to a fresh empty
    cache (``empty_bytes``): start a new cache. ``"load"``: read the file.
    """
    if optimization_level is not None and int(optimization_level) == 0:
        return "off", "not used at builder optimization level 0 (TensorRT takes the first tactic that runs)."
    if not file_bytes:
        return "new", "no cache yet; a new one is written after the build."
    if empty_bytes and file_bytes == empty_bytes:
        return "new", "the file holds an empty cache; a new one is written after the build."
    return "load", f"reusing {len(file_bytes)} bytes of earlier timings."


def attach_timing_cache(state: BuildState) -> None:
    """Attach the recipe's timing cache to the config (see :func:`timing_cache_plan`); nothing without one."""
    trt, config = state.trt, state.config
    state.timing_cache = None
    state.timing_cache_path = None
    state.empty_timing_cache = b""
    path = state.recipe.timing_cache
    if not path or not hasattr(config, "create_timing_cache"):
        return
    p = Path(path).expanduser()
    empty = config.create_timing_cache(b"")
    state.empty_timing_cache = bytes(memoryview(empty.serialize())) if empty is not None else b""
    data = p.read_bytes() if p.is_file() else b""
    action, why = timing_cache_plan(state.recipe.builder_optimization_level, data, state.empty_timing_cache)
    state.note("INFO", f"timing cache {p}: {why}")
    if action == "off":
        return
    cache = None
    if action == "load":
        # TensorRT 8.6 logs [E] for a cache it cannot read and then builds without it: that is a
        # warning for us, and the unreadable cache is not attached (a fresh one is, and saved after).
        with state.collector.demoting_errors("timing cache: ") as complaints:
            cache = config.create_timing_cache(data)
        if cache is None or complaints:
            state.note("WARNING", f"timing cache {p} cannot be used by TensorRT {version_of(trt)} "
                       f"({len(data)} bytes, written by another TensorRT/GPU or by a build that timed "
                       "nothing); building without it, and a new one replaces it after the build.")
            cache = None
    if cache is None:
        cache = empty if empty is not None else config.create_timing_cache(b"")
    with state.collector.demoting_errors("timing cache: ") as complaints:
        ok = config.set_timing_cache(cache, False)
    if not ok or complaints:
        state.note("WARNING", f"timing cache {p} does not match this TensorRT/GPU; starting a new one.")
        cache = config.create_timing_cache(b"")
        config.set_timing_cache(cache, True)
    state.timing_cache = cache
    state.timing_cache_path = p


def save_timing_cache(state: BuildState) -> None:
    """Write the timing cache back after the build (atomically), unless it has no entries."""
    if state.timing_cache is None or state.timing_cache_path is None:
        return

    try:
        data = bytes(memoryview(state.timing_cache.serialize()))
        if not data or data == state.empty_timing_cache:
            # An empty cache is not worth a file, and TensorRT 8.6 cannot read its own empty caches back.
            state.note("INFO", f"the timing cache has no entries; {state.timing_cache_path} is left as it was.")
            return
        write_bytes_atomic(state.timing_cache_path, data)
    except OSError as exc:
        state.note("WARNING", f"could not save the timing cache to {state.timing_cache_path}: {exc}")
