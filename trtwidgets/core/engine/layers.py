"""``tw.layers(build)`` and ``tw.compare(builds)``: layer tables from whatever the user holds.

``tw.inspect`` is another name for ``tw.layers`` (code written before it keeps working); ``layers`` is the
one to use: ``inspect`` shadows the standard library's module in a notebook that imports names from ``tw``.

A build folder, a ``*.graph.json`` file, a build result or an
:class:`~trtwidgets.core.engine.inspector_json.EngineGraph`: the recipe,
calibration cache and per-layer timings saved beside it are used (they explain
why layers are not INT8 and fill the latency column), unless told otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def layers(build: Any, use_siblings: bool = True, **overrides):
    """The per-layer precision table of a build.

    Parameters
    ----------
    build : path, build result, saved build or EngineGraph
        A build folder (its ``*.graph.json`` is read), an inspector JSON file or text,
        ``trtwidgets.build(...)``'s result, or a parsed graph.
    use_siblings : bool
        Use the recipe, calibration cache and timings saved with the build.
    **overrides
        ``recipe``, ``calibration``, ``profile`` or ``qdq_tensors``, passed to
        :func:`~trtwidgets.core.engine.layer_table.layer_table` instead of what was found.

    Returns
    -------
    pandas.DataFrame
        One row per layer (see :data:`~trtwidgets.core.engine.layer_table.COLUMNS`).

    Raises
    ------
    InspectorError
        The path holds no inspector JSON, or a file beside it is malformed (named).
    """
    from .inspector_json import CONTEXT_FAILURES, as_graph, build_context, context_failure
    from .layer_table import layer_table
    from .saved_build import find_graph_json

    source = build
    if isinstance(build, (str, os.PathLike)) and len(str(build)) < 4096 and Path(build).is_dir():
        source = find_graph_json(build)
    graph = as_graph(Path(source) if isinstance(source, os.PathLike) else source)
    context = build_context(source) if use_siblings else {}
    context.update(overrides)
    try:
        return layer_table(graph, **context)
    except CONTEXT_FAILURES as exc:
        if not use_siblings:
            raise
        raise context_failure(exc, context, "use_siblings=False") from None


def compare(builds: Any, labels=None):
    """Match the layers of two or more builds, side by side (FP16 against INT8 is the usual question).

    Parameters
    ----------
    builds : mapping label -> build, or sequence of builds
        Each build is anything :func:`layers` takes; a folder's recorded per-layer
        timings come along.
    labels : sequence of str, optional

    Returns
    -------
    BuildComparison
        See :func:`~trtwidgets.core.engine.build_compare.compare_builds`.
    """
    from collections.abc import Mapping

    from .build_compare import compare_builds
    from .saved_build import load_saved_build

    def resolve(b):
        if isinstance(b, (str, os.PathLike)) and len(str(b)) < 4096 and Path(b).exists():
            return load_saved_build(b)
        return b

    resolved: Any
    profiles: Any
    if isinstance(builds, Mapping):
        resolved = {k: resolve(b) for k, b in builds.items()}
        profiles = {k: getattr(b, "timings", None) for k, b in resolved.items()}
    else:
        resolved = [resolve(b) for b in builds]
        profiles = [getattr(b, "timings", None) for b in resolved]
    return compare_builds(resolved, labels=labels, profiles=profiles)
