"""Which model a build is of: the loaded model, a Q/DQ export of it, another model, or unknown.

A build's layer table, precisions and timings describe the model it was built from. Shown in a
session of another model they would describe layers that model may not have (the App once offered
the demo's saved builds to a user's own model, and took one in). So a build is checked before it is
offered or loaded: its ``recipe.json`` names the SHA-256 of the model it was built from.

A build of the toolkit's Q/DQ export of the loaded model names the export's SHA-256, not the float
model's, yet it belongs to the session all the same (the quickstart inspects one beside TensorRT's
implicit INT8 build). It is recognised by its engine: TensorRT records the ONNX nodes each layer came
from, and every one of them that is not a Q/DQ node is a node of the loaded model.

Pure: no TensorRT. The model is given as its SHA-256 and node names (the engine stage does not load
models).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Optional

from ..common.errors import InspectorError, UserError
from .build_records import build_recipe_dict

__all__ = ["THIS_MODEL", "QDQ_EXPORT", "OTHER_MODEL", "UNKNOWN", "BuildOrigin", "build_origin", "refuse_other_model",
           "saved_builds_for", "qdq_export_of"]

THIS_MODEL = "this model"
QDQ_EXPORT = "a Q/DQ export of this model"
OTHER_MODEL = "another model"
UNKNOWN = "unknown"

#: The layer origin TensorRT's inspector gives layers made from QuantizeLinear / DequantizeLinear nodes.
_QDQ_ORIGIN = "QDQ"


@dataclass(frozen=True)
class BuildOrigin:
    """What model a build was made from, relative to the loaded one.

    Attributes
    ----------
    kind : str
        :data:`THIS_MODEL`, :data:`QDQ_EXPORT`, :data:`OTHER_MODEL` or :data:`UNKNOWN` (no recipe).
    sha256 : str
        The SHA-256 its recipe names ('' when unknown).
    """

    kind: str
    sha256: str = ""

    @property
    def belongs(self) -> bool:
        """True when the build may be shown in the loaded model's session (its own, or of unknown origin)."""
        return self.kind != OTHER_MODEL


def _is_qdq_node(name: str) -> bool:
    low = name.lower()
    return "quantizelinear" in low or low.endswith(("_quantize", "_dequantize"))


def qdq_export_of(graph: Any, node_names: Iterable[str]) -> bool:
    """True when ``graph`` (an :class:`~.inspector_json.EngineGraph`) is an engine of a Q/DQ export of the model
    whose nodes are ``node_names``: it has Q/DQ layers, and every other ONNX node its layers came from is one of
    the model's nodes."""
    names = set(node_names)
    layers = tuple(getattr(graph, "layers", ()) or ())
    if not names or not any(getattr(layer, "origin", "") == _QDQ_ORIGIN for layer in layers):
        return False
    seen = [n for layer in layers if getattr(layer, "origin", "") != _QDQ_ORIGIN
            for n in (getattr(layer, "onnx_nodes", ()) or ()) if not _is_qdq_node(n)]
    return bool(seen) and all(n in names for n in seen)


def build_origin(build: Any, model_sha256: str, node_names: Iterable[str] = (), graph: Any = None) -> BuildOrigin:
    """The origin of ``build`` (a build result or :class:`~.saved_build.SavedBuild`) for the loaded model.

    Parameters
    ----------
    build
        Anything with a ``recipe`` (or ``recipe_path``).
    model_sha256 : str
        The loaded model's SHA-256.
    node_names : iterable of str
        The loaded model's node names (to recognise a build of its Q/DQ export).
    graph : EngineGraph, optional
        The build's parsed engine (parsed here when needed and not given).
    """
    own = build_recipe_dict(build) or {}
    sha = own.get("model_sha256") if isinstance(own.get("model_sha256"), str) else ""
    if not sha:
        return BuildOrigin(UNKNOWN)
    if sha == model_sha256:
        return BuildOrigin(THIS_MODEL, sha)
    if graph is None:
        from .inspector_json import as_graph

        try:
            graph = as_graph(build)
        except InspectorError:
            return BuildOrigin(OTHER_MODEL, sha)
    return BuildOrigin(QDQ_EXPORT if qdq_export_of(graph, node_names) else OTHER_MODEL, sha)


def refuse_other_model(label: str, origin: BuildOrigin, model_sha256: str) -> Optional[InspectorError]:
    """The error that refuses a build of another model (None when it may be loaded)."""
    if origin.belongs:
        return None
    return InspectorError(
        f"The build {label!r} is of another model: its recipe names model sha256 {origin.sha256[:12]}..., "
        f"the loaded model is {model_sha256[:12]}....",
        "A build's layers, precisions and timings describe the model it was built from; beside this model they "
        "would describe layers it may not have (a Q/DQ export of this model is recognised by its layers).",
        "Load the model it was built from first, or build this one: save the recipe and run `trtwidgets run "
        "recipe.json --report report.html --build-dir build/` on a GPU machine, then load build/ here.")


def saved_builds_for(model_sha256: str, node_names: Iterable[str] = (), root=None) -> Dict[str, Path]:
    """The saved builds (see :func:`~.saved_build.find_saved_builds`) made from the loaded model or a Q/DQ export
    of it: what may be offered in its session. Builds of another model, without a recipe or unreadable are left
    out (they can still be loaded by their folder, where the check says why one is refused)."""
    from .saved_build import find_saved_builds, load_saved_build

    names = frozenset(node_names)
    out: Dict[str, Path] = {}
    for name, path in find_saved_builds(root).items():
        try:
            build = load_saved_build(path)
        except UserError:
            continue
        if build_origin(build, model_sha256, names).kind in (THIS_MODEL, QDQ_EXPORT):
            out[name] = path
    return out
