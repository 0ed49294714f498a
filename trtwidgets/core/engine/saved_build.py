"""Builds saved to disk: a build directory read back without TensorRT.

A build directory (written by :func:`trtwidgets.trt.build.build`, or committed
from a GPU run under ``tests/fixtures/trt86/<name>/``) holds the engine
inspector's JSON (``*.graph.json``), the ``recipe.json`` it was built from, the
calibration cache, the build log (``build.log.jsonl``) and optionally per-layer
timings. Reading one needs no GPU and no TensorRT, so notebooks, the app and
``trtwidgets run`` inspect real builds on a laptop or on Binder.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

from ..common.errors import InspectorError
from ..common.json_limits import (INSPECTOR_LIMITS, SIDE_FILE_LIMITS, check_file_size, nesting_depth,
                                read_json_file)
from .layer_times import timings_from_doc

#: Environment variable naming a folder of saved build directories.
ENV_VAR = "TRTWIDGETS_SAVED_BUILDS"
#: Where the repository keeps the real TensorRT 8.6 builds of the demo model.
REPO_SUBDIR = Path("tests") / "fixtures" / "trt86"
_TIMING_NAMES = ("timings.json", "profile.json", "layer_times.json", "engine.profile.json")
#: The parsed network's layers, written by ``trtwidgets.trt.build`` before the build (the pre-build view).
NETWORK_LAYERS_FILE = "network_layers.json"


@dataclass(frozen=True)
class SavedBuild:
    """One build directory, read back.

    Attributes
    ----------
    name : str
        The directory's name (``int8_implicit``, ...).
    out_dir : str
    inspector_json_path : str
    inspector_json : str
        The engine inspector's JSON text.
    recipe : dict, optional
        ``recipe.json`` as plain JSON (kept as a dict: a recipe written by another
        release still inspects).
    calibration_cache_path : str, optional
    log : tuple of (severity, message)
        ``build.log.jsonl``'s lines.
    timings_path : str, optional
        The timings file (``timings.json`` of ``tests/gpu/make_fixtures.py``,
        ``trtexec --exportProfile`` JSON, or a ``{layer: ms}`` mapping).
    timings : dict, optional
        Layer name -> mean ms per inference, read from it (None when absent or failed).
    latency : dict
        Whole-engine latency statistics from the timings file, when recorded.
    meta : dict
        ``build.json`` (TensorRT version, GPU, build seconds) when present.
    network_layers : tuple of dict, optional
        ``network_layers.json``: the parsed network's layers with their requested precision and
        output types (see :func:`trtwidgets.core.engine.layer_table.prebuild_table`); None when absent or unreadable.
    network_layers_path : str, optional
    """

    name: str
    out_dir: str
    inspector_json_path: str
    inspector_json: str = field(repr=False)
    recipe: Optional[dict] = field(default=None, repr=False)
    calibration_cache_path: Optional[str] = None
    log: Tuple[Tuple[str, str], ...] = field(default=(), repr=False)
    timings_path: Optional[str] = None
    timings: Optional[Dict[str, float]] = field(default=None, repr=False)
    latency: dict = field(default_factory=dict, repr=False)
    meta: dict = field(default_factory=dict, repr=False)
    network_layers: Optional[Tuple[dict, ...]] = field(default=None, repr=False)
    network_layers_path: Optional[str] = None

    @property
    def trt_version(self) -> str:
        return str(self.meta.get("trt_version") or (self.recipe or {}).get("trt_version") or "")

    @property
    def flags(self) -> Tuple[str, ...]:
        return tuple((self.recipe or {}).get("flags") or ())

    def error_lines(self) -> Tuple[str, ...]:
        """The log's ERROR lines (e.g. why TensorRT refused to build)."""
        return tuple(m for s, m in self.log if s in ("ERROR", "INTERNAL_ERROR"))


def _read_json(path: Path, what: str):
    try:
        return read_json_file(path, SIDE_FILE_LIMITS, InspectorError, strict=False)
    except (OSError, ValueError) as exc:
        raise InspectorError(f"Could not read {what} {path}.", str(exc),
                             "Copy the build directory again, or delete the broken file.") from None


def _read_log(path: Path) -> Tuple[Tuple[str, str], ...]:
    out = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ()
    for line in lines:
        try:
            if nesting_depth(line) > SIDE_FILE_LIMITS.max_depth:  # json.loads would end in RecursionError
                raise ValueError("nested too deep")
            rec = json.loads(line, strict=False)
        except ValueError:
            # Kept, not skipped: a damaged log line (a build cut off mid-write) may be the one that explains it.
            if line.strip():
                out.append(("INFO", f"(not a JSON log line) {line.strip()[:300]}"))
            continue
        if isinstance(rec, dict) and "message" in rec:
            out.append((str(rec.get("severity", "INFO")), str(rec["message"])))
    return tuple(out)


def read_timings(path: Union[str, os.PathLike]) -> Tuple[Optional[Dict[str, float]], dict]:
    """``(layer -> mean ms, latency statistics)`` from a timings file; ``(None, {})`` when it holds none."""
    doc = _read_json(Path(path), "the build's timings")
    try:
        return timings_from_doc(doc)
    except (TypeError, ValueError):
        return None, {}


def read_network_layers(path: Union[str, os.PathLike]) -> Tuple[dict, ...]:
    """The rows of a ``network_layers.json`` (one dict per network layer), or of the one in a build folder.

    Raises
    ------
    InspectorError
        The file is missing, not JSON, or not a list of layer objects with a ``name``.
    """
    p = Path(path)
    if p.is_dir():
        p = p / NETWORK_LAYERS_FILE
    if not p.is_file():
        raise InspectorError(f"{p} does not exist.",
                             "The pre-build view reads the network's layer list that trtwidgets.trt.build writes "
                             f"beside the engine ({NETWORK_LAYERS_FILE}).",
                             f"Pass a build folder that holds {NETWORK_LAYERS_FILE}, or the file itself.")
    doc = _read_json(p, "the network's layer list")
    if not isinstance(doc, list) or not doc or not all(isinstance(r, dict) and "name" in r for r in doc):
        shape = (f"a list of {len(doc)} items" if isinstance(doc, list) else f"a JSON {type(doc).__name__}")
        raise InspectorError(f"{p} is {shape}, not a network layer list.",
                             f"{NETWORK_LAYERS_FILE} is a JSON list with one object per network layer "
                             '({"index", "name", "type", "precision", "outputs", ...}).',
                             "Write it again with trtwidgets.trt.layer_info.network_layers(network), or rebuild "
                             "with trtwidgets.trt.build.")
    return tuple(doc)


def network_layers_of(source) -> Optional[Tuple[dict, ...]]:
    """The pre-build layer list that goes with a build source, where there is one.

    Parameters
    ----------
    source : SavedBuild, build result, path of a build folder or of an inspector JSON file, or other
        A saved build gives its ``network_layers``; a build result or a path gives the
        ``network_layers.json`` in its folder. Other sources (text, graphs) give None.

    Raises
    ------
    InspectorError
        The file is there but unreadable.
    """
    rows = getattr(source, "network_layers", None)
    if rows is not None:
        return tuple(rows)
    folder = None
    if isinstance(source, os.PathLike) or (isinstance(source, str) and source.strip()[:1] not in ("{", "[")
                                           and "\n" not in source and len(source) < 4096):
        try:
            p = Path(source)
            folder = p if p.is_dir() else (p.parent if p.is_file() else None)
        except OSError:
            folder = None
    else:
        where = getattr(source, "inspector_json_path", None) or getattr(source, "out_dir", None)
        if where:
            folder = Path(where) if Path(where).is_dir() else Path(where).parent
    if folder is None or not (folder / NETWORK_LAYERS_FILE).is_file():
        return None
    return read_network_layers(folder / NETWORK_LAYERS_FILE)


def find_graph_json(folder: Union[str, os.PathLike]) -> Path:
    """The engine-inspector JSON in a build folder (``*.graph.json``, else ``*graph*.json``)."""
    p = Path(folder)
    cands = sorted(p.glob("*.graph.json")) or sorted(p.glob("*graph*.json"))
    if not cands:
        raise InspectorError(f"The build directory {p} holds no engine-inspector JSON (*.graph.json).",
                             "A saved build is read through its inspector JSON; the engine itself needs a GPU.",
                             "Pass a directory written by `trtwidgets build`, or the .graph.json file itself.")
    return cands[0]


def load_saved_build(path: Union[str, os.PathLike]) -> SavedBuild:
    """Read a build directory (or one ``*.graph.json`` file inside one).

    Raises
    ------
    InspectorError
        The path does not exist or holds no inspector JSON.
    """
    p = Path(path)
    if p.is_file():
        graph_path, folder = p, p.parent
    elif p.is_dir():
        folder = p
        graph_path = find_graph_json(p)
    else:
        raise InspectorError(f"{p} does not exist.", "A saved build is read from its folder or its inspector JSON.",
                             "Pass a build directory (with a *.graph.json) or an engine-inspector JSON file.")
    check_file_size(graph_path, INSPECTOR_LIMITS, InspectorError)
    text = graph_path.read_text(encoding="utf-8", errors="replace")
    recipe = _read_json(folder / "recipe.json", "the build's recipe") if (folder / "recipe.json").is_file() else None
    meta = _read_json(folder / "build.json", "the build's metadata") if (folder / "build.json").is_file() else {}
    cache = folder / "calibration.cache"
    timings = next((folder / n for n in _TIMING_NAMES if (folder / n).is_file()), None)
    if timings is None:
        timings = next(iter(sorted(folder.glob("*timing*.json")) + sorted(folder.glob("*profile*.json"))), None)
    layer_ms, latency = read_timings(timings) if timings is not None else (None, {})
    network = folder / NETWORK_LAYERS_FILE
    try:
        network_rows = read_network_layers(network) if network.is_file() else None
    except InspectorError:
        network_rows = None  # the engine view does not need it; network_layers_of() explains a broken file
    return SavedBuild(name=folder.name if p.is_dir() or graph_path.name.startswith("engine") else graph_path.stem,
                      out_dir=str(folder), inspector_json_path=str(graph_path), inspector_json=text,
                      recipe=recipe if isinstance(recipe, dict) else None,
                      calibration_cache_path=str(cache) if cache.is_file() else None,
                      log=_read_log(folder / "build.log.jsonl"),
                      # Only a readable one: the inspector reads timings_path itself when timings is None.
                      timings_path=str(timings) if timings is not None and layer_ms else None,
                      timings=layer_ms, latency=latency or {},
                      meta=meta if isinstance(meta, dict) else {},
                      network_layers=network_rows,
                      network_layers_path=str(network) if network_rows is not None else None)


def saved_builds_root(start: Union[str, os.PathLike, None] = None) -> Optional[Path]:
    """The folder of saved builds: ``$TRTWIDGETS_SAVED_BUILDS``, else the repository's ``tests/fixtures/trt86``.

    The repository is found next to the package (an editable install) or above
    ``start`` (default: the working directory; a notebook on Binder runs in
    ``notebooks/``). None when there is none.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env) if Path(env).is_dir() else None
    cands = [Path(__file__).resolve().parents[3]]
    here = Path(start or os.getcwd()).resolve()
    cands += [here, *here.parents]
    for base in cands:
        if (base / REPO_SUBDIR).is_dir():
            return base / REPO_SUBDIR
    return None


def find_saved_builds(root: Union[str, os.PathLike, None] = None) -> Dict[str, Path]:
    """Build name -> directory, for every directory under ``root`` (two levels deep) holding a ``*.graph.json``.

    Names are paths relative to ``root`` (``cls_static_int8_entropy2``, ``tiny/fp16``), builds of the
    demo model (``cls_*``) first.
    """
    base = Path(root) if root is not None else saved_builds_root()
    if base is None or not base.is_dir():
        return {}
    found = []
    for d in sorted(base.iterdir()):
        if not d.is_dir():
            continue
        if any(d.glob("*.graph.json")):
            found.append(d)
        else:
            found.extend(sub for sub in sorted(d.iterdir()) if sub.is_dir() and any(sub.glob("*.graph.json")))
    found.sort(key=lambda d: (not d.name.startswith("cls"), d.relative_to(base).as_posix()))
    return {d.relative_to(base).as_posix(): d for d in found}


def tensorrt_outcomes(root: Union[str, os.PathLike, None] = None) -> Dict[str, dict]:
    """What real TensorRT did with the tiny lint test models (``lint_vs_tensorrt.json`` beside the saved builds).

    Model name -> ``{"flags", "outcome" ("built" | "parse_failed" | "build_failed"), "errors" (TensorRT's lines),
    "lint_all", "tensorrt"}``; empty when the file is not there.
    """
    base = Path(root) if root is not None else saved_builds_root()
    path = None if base is None else base / "lint_vs_tensorrt.json"
    if path is None or not path.is_file():
        return {}
    doc = _read_json(path, "TensorRT's recorded outcomes")
    return doc if isinstance(doc, dict) else {}
