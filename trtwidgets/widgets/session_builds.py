"""The session's builds: added (live or saved), checked against the model, labelled, and their recipes used.

A mixin of :class:`~trtwidgets.widgets.session.Session` (which holds the traits ``builds``,
``graphs``, ``stale`` and ``error`` it sets). A build of another model is refused before it is
added (:mod:`trtwidgets.core.engine.build_origin`): its table would describe layers the loaded model
may not have. A build of the toolkit's Q/DQ export of the loaded model belongs to it; it is out of
date only when the model changes (its settings are the export's, not the recipe's).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Tuple

from ..core.common.errors import UserError
from ..core.recipe import staleness


def build_label(build: Any) -> str:
    """A short name for a build: a saved build's name, else its directory's name."""
    name = getattr(build, "name", None)
    if name:
        return str(name)
    out_dir = getattr(build, "out_dir", None) or os.path.dirname(str(getattr(build, "inspector_json_path", "") or ""))
    return Path(str(out_dir)).name or "build"


def build_recipe(build: Any, fallback: Any) -> Any:
    """The recipe a build was made from (its own, or its saved ``recipe.json``), else ``fallback``."""
    from ..core.engine.build_records import build_recipe_dict

    own = build_recipe_dict(build)
    return own if own is not None else fallback


class Builds:
    """:meth:`add_build`, :meth:`use_build_recipe`, :meth:`build_named`, for :class:`~trtwidgets.widgets.session.Session`."""

    if TYPE_CHECKING:  # the Session's traits and methods this mixin uses
        model: Any
        recipe: Any
        builds: Tuple[Any, ...]
        graphs: Dict[str, Any]
        error: str
        made_with: Dict[str, Any]
        _sha: Callable[..., Any]
        set_recipe: Callable[..., Any]
        update_stale: Callable[..., Any]
        hold_trait_notifications: Callable[..., Any]


    def _init_builds(self) -> None:
        self._known_builds: Dict[int, str] = {}
        #: build label -> its origin (:class:`~trtwidgets.core.engine.build_origin.BuildOrigin`)
        self.build_origins: Dict[str, Any] = {}

    def node_names(self) -> frozenset:
        """The loaded model's node names (what a build's layers came from), empty without a model."""
        model = self.model
        return frozenset(n.name for n in model.proto.graph.node if n.name) if model is not None else frozenset()

    def saved_builds(self) -> Dict[str, Path]:
        """The saved builds that may be offered: made from the loaded model or a Q/DQ export of it (none without one)."""
        from ..core.engine.build_origin import saved_builds_for

        if self.model is None:
            return {}
        return saved_builds_for(self.model.sha256, self.node_names())

    def add_build(self, build: Any) -> bool:
        """Add a build (a ``BuildResult``, a ``SavedBuild``, or a build directory / inspector JSON path).

        Its engine graph is parsed into :attr:`graphs`. A build of another model than the loaded one
        is refused (:attr:`error` says whose it is and what to do); so is bad input. Nothing changes then.
        """
        if isinstance(build, (str, os.PathLike)):
            from ..core.engine.saved_build import load_saved_build

            try:
                build = load_saved_build(build)
            except UserError as err:
                self.error = err.message
                return False
        try:
            label, graph = self._register(build)
        except UserError as err:
            self.error = err.message
            return False
        graphs = dict(self.graphs)
        graphs[label] = graph
        # Together, so that an observer of either sees the build and its graph.
        with self.hold_trait_notifications():
            self.error = ""
            self.builds = tuple(self.builds) + (build,)
            self.graphs = graphs
        return True

    def use_build_recipe(self, label: str) -> bool:
        """Make a build's own recipe the session's (e.g. to continue from a saved build made elsewhere).

        Paths that belong to the machine it was built on (the model path, the
        timing cache) are replaced by this session's. Refused, with :attr:`error`,
        when the build is of another model or has no readable recipe.
        """
        from ..core.engine.build_origin import QDQ_EXPORT
        from ..core.recipe.recipe import Recipe

        build = self.build_named(label)
        own = staleness.recipe_dict(build_recipe(build, None)) if build is not None else None
        if own is None or self.model is None:
            self.error = (f"The build {label!r} has no recipe to use. Why: only builds saved with their recipe.json "
                          "carry one. Fix: choose the settings in the steps instead.")
            return False
        origin = self.build_origins.get(label)
        if origin is not None and origin.kind == QDQ_EXPORT:
            self.error = (f"The build {label!r} is of a Q/DQ export of this model. Why: its recipe builds that "
                          "export (its ranges are in the model), not this model. Fix: choose the settings in the "
                          "steps, or build the export itself with that recipe on a GPU machine.")
            return False
        if own.get("model_sha256") and own["model_sha256"] != self.model.sha256:
            self.error = (f"The build {label!r} is of another model. Why: its recipe names model sha256 "
                          f"{str(own['model_sha256'])[:12]}..., the loaded model is {self.model.sha256[:12]}.... "
                          "Fix: load the model it was built from first.")
            return False
        own = dict(own, model_path=str(self.model.path), timing_cache=None)
        cal = own.get("calibrator")
        if isinstance(cal, dict) and cal.get("cache_path") and not os.path.isfile(cal["cache_path"]):
            own["calibrator"] = dict(cal, cache_path=getattr(build, "calibration_cache_path", None))
        try:
            recipe = Recipe.from_dict(own)
        except UserError as err:
            self.error = err.message
            return False
        return self.set_recipe(recipe)

    def build_named(self, label: str):
        """The build with this label (see :func:`build_label`), or None."""
        for b in self.builds:
            if self._known_builds.get(id(b)) == label:
                return b
        return None

    def _register(self, build: Any):
        """Label ``build``, parse its graph, check whose it is and record what it was made with."""
        from ..core.engine.build_origin import QDQ_EXPORT, build_origin, refuse_other_model
        from ..core.engine.inspector_json import as_graph

        graph = as_graph(build)
        label = build_label(build)
        taken = set(self.graphs) - {self._known_builds.get(id(build))}
        base, n = label, 2
        while label in taken:
            label, n = f"{base}-{n}", n + 1
        origin = None
        if self.model is not None:
            origin = build_origin(build, self.model.sha256, self.node_names(), graph)
            refused = refuse_other_model(label, origin, self.model.sha256)
            if refused is not None:
                raise refused
        self._known_builds[id(build)] = label
        self.build_origins[label] = origin
        if origin is not None and origin.kind == QDQ_EXPORT:
            # Its flags, profiles and ranges are the export's: only another model makes it out of date.
            self.made_with[f"build:{label}"] = staleness.fingerprint("build", self._sha(), None)
            return label, graph
        recipe = build_recipe(build, self.recipe)
        rd = staleness.recipe_dict(recipe) or {}
        sha = rd.get("model_sha256") or self._sha()
        self.made_with[f"build:{label}"] = staleness.fingerprint("build", sha, recipe)
        return label, graph

    def _on_builds(self, change) -> None:
        # Builds appended by other widgets (the build panel) are registered here.
        for b in change["new"]:
            if id(b) not in self._known_builds:
                try:
                    label, graph = self._register(b)
                except UserError as err:
                    self.error = err.message
                    continue
                graphs = dict(self.graphs)
                graphs[label] = graph
                self.graphs = graphs
        self.update_stale()
