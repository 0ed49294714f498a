"""The Session: the one object that every step of the notebook shares.

It holds the loaded model, its lint findings, the recipe, the calibration (a typed
:class:`~trtwidgets.core.calibration.calibration.Calibration`: the statistics and ranges are read
from it), the plan (a :class:`~trtwidgets.core.plan.plan_artifact.Plan`), the held-back data and
the builds (each with its inspected engine graph), as traitlets so that widgets observe it
instead of each other. Every value in
it is immutable and replaced as a whole; a failed step sets
:attr:`Session.error` and keeps whatever the session had.

Every result remembers what it was made from (its fingerprint, see
:mod:`trtwidgets.core.recipe.staleness`). When an earlier step changes (the model,
the flags, the profiles, the calibrator, the data, the calibration a plan used, the held-back
data), :attr:`Session.stale`
names the later results that no longer match and why. Stale results are kept,
not deleted: the user decides when to redo them, and can still compare.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional, Union

import traitlets

from ..core.common.errors import UserError
from ..core.model.lint import lint
from ..core.model.load import LoadedModel, load_model
from ..core.recipe import staleness
from .session_builds import Builds, build_label
from .session_data import DataDefaults

__all__ = ["Session", "build_label"]


class Session(DataDefaults, Builds, traitlets.HasTraits):
    """Shared state of one exploration.

    Attributes
    ----------
    model : LoadedModel or None
        The current model.
    findings : tuple of Finding
        Lint findings for :attr:`model` under the current :attr:`recipe`.
    recipe : Recipe or None
        The build recipe (``trtwidgets.core.recipe.recipe.Recipe``).
    calibration : Calibration or None
        The calibration every step uses (statistics, exported method, percentile, amax overrides), see
        :class:`~trtwidgets.core.calibration.calibration.Calibration`. The explorer's overrides and method
        choice replace it (a refit); the Plan step plans with it.
    stats : ActivationStats or None
        Read-only: :attr:`calibration`'s statistics.
    ranges : dict or None
        Read-only: :attr:`calibration`'s ranges (tensor -> method -> RangeResult).
    plan : Plan or None
        The last plan (:class:`~trtwidgets.core.plan.plan_artifact.Plan`; a cancelled one is marked interrupted).
    held_back : str
        A folder of held-back samples (the Plan step's accuracy, the explorer's export check); '' for none
        (the Plan step holds back a seeded share of the data). See :meth:`use_held_back`.
    builds : tuple
        Build results (``BuildResult`` or ``SavedBuild``), oldest first.
    graphs : dict
        Build label -> its parsed ``EngineGraph`` (see :func:`build_label`).
    stale : dict
        Result key (``"stats"``, ``"ranges"``, ``"plan"``, ``"build:<label>"``) -> why it is out of date.
        Stale results stay in the session.
    problems : tuple of str
        What is wrong with the recipe as it stands (see :func:`~trtwidgets.core.recipe.recipe.recipe_problems`).
    data_shapes : dict
        Input name -> shapes of the first calibration samples (see :meth:`use_data`).
    data_note : str
        What the calibration data set in the recipe (profiles from its shapes), '' when nothing.
    error : str
        The last user-facing error message, '' when the last action succeeded.
    client : distributed.Client or None
        Where calibration and planning run: its Dask workers, or the kernel (None, the default).
    """

    model = traitlets.Instance(LoadedModel, allow_none=True, default_value=None)
    findings = traitlets.Tuple()
    recipe = traitlets.Instance("trtwidgets.core.recipe.recipe.Recipe", allow_none=True)
    calibration = traitlets.Instance("trtwidgets.core.calibration.calibration.Calibration", allow_none=True)
    plan = traitlets.Instance("trtwidgets.core.plan.plan_artifact.Plan", allow_none=True)
    held_back = traitlets.Unicode("")
    builds = traitlets.Tuple()
    graphs = traitlets.Dict()
    stale = traitlets.Dict()
    problems = traitlets.Tuple()
    data_shapes = traitlets.Dict()
    data_note = traitlets.Unicode("")
    error = traitlets.Unicode("")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.client = None
        #: result key -> fingerprint of what it was made from
        self.made_with: Dict[str, dict] = {}
        self._init_builds()
        # The statistics whose "stats" and "ranges" fingerprints are recorded (a refit keeps them).
        self._recorded_stats: Any = None
        self.observe(self._on_recipe, names=["recipe"])
        self.observe(self._on_builds, names=["builds"])
        self.observe(self._on_calibration, names=["calibration"])
        self.observe(lambda _c: self.update_stale(), names=["held_back"])

    @property
    def stats(self):
        """The calibration's activation statistics (None without a calibration)."""
        return self.calibration.stats if self.calibration is not None else None

    @property
    def calibration_data(self):
        """The recipe's calibration data (a CalibrationDataSpec; None without a recipe or data)."""
        return None if self.recipe is None else self.recipe.calibration_data

    @property
    def ranges(self):
        """The calibration's ranges: tensor -> method -> RangeResult (None without a calibration)."""
        return self.calibration.ranges if self.calibration is not None else None

    # ------------------------------------------------------------------ model

    def load(self, path: Union[str, os.PathLike]) -> bool:
        """Load a model and lint it; on bad input set :attr:`error` and keep the previous model.

        Returns
        -------
        bool
            True when the model was loaded.
        """
        try:
            model = load_model(path)
        except UserError as err:
            self.error = err.message
            return False
        try:
            findings, error = self._lint(model), ""
        except UserError as err:
            # The model itself is fine; only the recipe's settings are not (e.g. an unknown flag).
            findings, error = (), err.message
        with self.hold_trait_notifications():
            self.model = model
            self.findings = findings
            self.error = error
            # The data's shapes and the held-back samples belonged to the previous model's inputs.
            self.data_shapes = {}
            self.data_note = ""
            self.held_back = ""
        self.update_stale()
        return True

    def relint(self) -> None:
        """Lint the current model again (after the recipe changed)."""
        if self.model is None:
            return
        try:
            self.findings = self._lint(self.model)
        except UserError as err:
            self.error = err.message

    def _lint(self, model: LoadedModel):
        # The recipe, when there is one, says what will be built: lint against it.
        r = self.recipe
        if r is None:
            return lint(model)
        return lint(model, flags=r.flags, trt_version=r.trt_version, calibrator=r.calibrator.kind,
                    profiles=r.profiles or None)

    # ------------------------------------------------------------------ recipe

    def default_recipe(self, **changes):
        """A recipe for the current model: default profiles, plus ``changes``.

        Raises
        ------
        UserError
            No model is loaded, or a change is invalid.
        """
        from ..core.recipe.recipe import Recipe

        if self.model is None:
            raise UserError("There is no model to make a recipe for.", "A recipe describes how one model is built.",
                            "Load a model first.")
        return Recipe.for_model(self.model, **changes)

    def set_recipe(self, recipe=None, **changes) -> bool:
        """Replace the recipe (``recipe``, or the current one with ``changes``); a bad one sets :attr:`error`.

        A recipe whose profiles do not fit the model's inputs is refused (the previous
        recipe stays). Other problems (say, INT8 without a calibrator yet, while the
        user is still choosing) are accepted and listed in :attr:`problems`.

        Returns
        -------
        bool
            True when the recipe was replaced.
        """
        from ..core.recipe.profiles import profile_problems
        from ..core.recipe.recipe import recipe_problems

        try:
            base = recipe if recipe is not None else (self.recipe or self.default_recipe())
            new = base.replace(**changes) if changes else base
            summary = self.model.summary if self.model is not None else None
            blocking = profile_problems(new.profiles, summary) if summary is not None else []
            if blocking:
                raise UserError(f"The profiles do not fit the model: {blocking[0]}",
                                "\n".join(blocking) if len(blocking) > 1 else
                                "TensorRT refuses a profile whose shapes the model's inputs cannot take.",
                                "Give every dynamic input min <= opt <= max shapes of the model's rank.")
            problems = tuple(recipe_problems(new, summary))
        except UserError as err:
            self.error = err.message
            return False
        with self.hold_trait_notifications():
            self.error = ""
            self.problems = problems
            self.recipe = new
        return True

    def save_recipe(self, path: Union[str, os.PathLike]) -> Optional[str]:
        """Write the recipe as JSON (atomically, its folder made); returns the path, or None (and :attr:`error`)."""
        from ..core.recipe.recipe import save_recipe

        if self.recipe is None:
            self.error = "There is no recipe to save. Why: no model or settings were chosen yet. Fix: load a model first."
            return None
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            return str(save_recipe(self.recipe, path))
        except UserError as err:
            self.error = err.message
            return None
        except OSError as err:
            self.error = UserError(f"Could not write the recipe to {path}.", f"{err.strerror or err}.",
                                   "Choose a folder you can write to (a file may stand where a folder is needed); "
                                   "nothing was changed.").message
            return None

    def load_recipe(self, path: Union[str, os.PathLike]) -> bool:
        """Read a recipe JSON and load its model; on any problem keep everything and set :attr:`error`."""
        from ..core.recipe.recipe import load_recipe

        from ..core.recipe.recipe import locate_model

        try:
            recipe = locate_model(load_recipe(path), Path(path).parent)
        except UserError as err:
            self.error = err.message
            return False
        if self.model is None or str(self.model.path) != str(Path(recipe.model_path)):
            previous = self.model
            if not self.load(recipe.model_path):
                return False
            if previous is not None and self.model is not previous:
                self.update_stale()
        note, shapes = "", {}
        if recipe.calibration_data is not None:
            from ..core.recipe.data_defaults import fill_recipe_from_data

            try:
                # A recipe that names data but leaves the dynamic dims open takes them from the data.
                recipe, note, shapes = fill_recipe_from_data(recipe, self.model)
            except UserError:
                pass  # the data is not readable here (another machine's path): the calibrate step says so
        if not self.set_recipe(recipe):
            return False
        with self.hold_trait_notifications():
            self.data_shapes = {k: [tuple(x) for x in v] for k, v in shapes.items()}
            self.data_note = note
        return True

    def _on_recipe(self, change) -> None:
        self.relint()
        self.update_stale()

    # ------------------------------------------------------------------ calibration

    def calibrate(self, data: Any = None, progress: bool = True, max_samples: Optional[int] = None) -> bool:
        """Collect activation statistics and compute ranges as the recipe says.

        On any problem (bad data, shapes that do not fit) :attr:`error` says what,
        and the previous statistics and ranges stay.

        Parameters
        ----------
        data : optional
            Overrides the recipe's calibration data (see
            :func:`~trtwidgets.core.calibrate.step.calibrate_recipe`); the bundled demo model
            calibrates on the calibration part of the demo's labelled set by default.
        progress : bool or callable
            Show a progress bar.
        max_samples : int, optional

        Returns
        -------
        bool
            True when new statistics were collected.
        """
        from ..core.calibrate.step import calibrate_recipe

        if self.model is None:
            self.error = "There is no model to calibrate. Why: calibration runs the model. Fix: load a model first."
            return False
        recipe = self.recipe
        if recipe is None:
            try:
                recipe = self.default_recipe()
            except UserError as err:
                self.error = err.message
                return False
            self.recipe = recipe
        try:
            result = calibrate_recipe(recipe, self.model, data=data, progress=progress, max_samples=max_samples,
                                      client=self.client)
        except UserError as err:
            self.error = err.message
            return False
        self._set_calibration(result, recipe)
        return True

    def recompute_ranges(self, percentile: Optional[float] = None) -> bool:
        """Ranges of the current statistics at another percentile (statistics unchanged).

        :attr:`calibration` is refitted (its method and overrides kept), and the recipe's
        calibrator takes the percentile, so that both say the same.
        """
        if self.calibration is None:
            self.error = "There are no statistics yet. Fix: run the calibration step first."
            return False
        pct = float(percentile if percentile is not None
                    else 99.99 if self.recipe is None else self.recipe.calibrator.percentile)
        try:
            cal = self.calibration.refit(percentile=pct)
        except UserError as err:
            self.error = err.message
            return False
        recipe = self.recipe
        if percentile is not None and recipe is not None:
            import dataclasses

            recipe = recipe.replace(calibrator=dataclasses.replace(recipe.calibrator, percentile=pct))
        self.made_with["ranges"] = staleness.fingerprint("ranges", self._sha(), recipe)
        self.calibration = cal
        if recipe is not self.recipe:
            self.recipe = recipe
        self.update_stale()
        return True

    def set_method(self, method: str) -> bool:
        """Export ``method``'s ranges (a refit of :attr:`calibration`; statistics and overrides kept).

        The recipe's toolkit calibrator takes the method too (its calibration cache carries those
        ranges). An unknown method sets :attr:`error` and changes nothing.
        """
        if self.calibration is None:
            self.error = "There are no statistics yet. Fix: run the calibration step first."
            return False
        try:
            cal = self.calibration.refit(method=method)
        except UserError as err:
            self.error = err.message
            return False
        recipe = self.recipe
        calibrator = None if recipe is None else recipe.calibrator
        with self.hold_trait_notifications():
            self.error = ""
            self.calibration = cal
            if recipe is not None and calibrator is not None and calibrator.kind == "toolkit" \
                    and calibrator.method not in (None, method):

                import dataclasses

                try:
                    self.recipe = recipe.replace(calibrator=dataclasses.replace(calibrator, method=method))
                except UserError:
                    pass  # a method the recipe cannot name yet: the calibration says it, the recipe keeps its own
        return True

    def qdq_options(self, **changes):
        """The Q/DQ export's choices for this session (:class:`~trtwidgets.core.qdq.options.QdqOptions`).

        Its defaults, at the recipe's TensorRT version (the ranges are the :attr:`calibration`'s);
        ``changes`` replace single fields. The Plan step and every App export build theirs here.
        """
        from ..core.qdq.options import QdqOptions

        return QdqOptions(trt_version=None if self.recipe is None else self.recipe.trt_version or None).replace(**changes)

    def _set_calibration(self, result, recipe) -> None:
        sha = self._sha()
        self.made_with["stats"] = staleness.fingerprint("stats", sha, recipe)
        self.made_with["ranges"] = staleness.fingerprint("ranges", sha, recipe)
        self._recorded_stats = result.stats
        with self.hold_trait_notifications():
            self.calibration = result
            self.error = ""
        self.update_stale()

    def _on_calibration(self, change) -> None:
        # A calibration of other statistics set from outside (loaded from a file) counts as made with the
        # current recipe; a refit (overrides, method, percentile) keeps what the statistics were made with.
        cal = change["new"]
        if cal is not None and cal.stats is not self._recorded_stats:
            self._recorded_stats = cal.stats
            for key in ("stats", "ranges"):
                self.made_with[key] = staleness.fingerprint(key, self._sha(), self.recipe)
        self.update_stale()

    # ------------------------------------------------------------------ plan

    def plan_inputs(self) -> dict:
        """What a plan made now is made from (its fingerprint, see :mod:`trtwidgets.core.recipe.staleness`)."""
        return staleness.fingerprint("plan", self._sha(), self._recipe_or_none(), self._plan_extra())

    def _plan_extra(self) -> dict:
        return {"calibration": staleness.calibration_inputs(self.calibration), "held_back": self.held_back}

    def set_plan(self, plan, made_with: Optional[dict] = None) -> None:
        """Make ``plan`` the session's; ``made_with`` is :meth:`plan_inputs` taken when it started (default: now)."""
        self.made_with["plan"] = dict(made_with) if made_with is not None else self.plan_inputs()
        self.plan = plan
        self.update_stale()

    # ------------------------------------------------------------------ staleness

    def _sha(self) -> str:
        return self.model.sha256 if self.model is not None else ""

    def update_stale(self) -> None:
        """Recompute :attr:`stale` from what each result was made with and the current model and recipe."""
        sha = self._sha()
        out = {}
        recipe = self._recipe_or_none()
        for key, made in self.made_with.items():
            kind = "build" if key.startswith("build:") else key
            if kind == "build" and key[len("build:"):] not in self.graphs:
                continue
            if (kind in ("stats", "ranges") and self.calibration is None) or (kind == "plan" and self.plan is None):
                continue
            now = staleness.fingerprint(kind, sha, recipe, self._plan_extra() if kind == "plan" else None)
            reason = staleness.stale_reason(made, now)
            if reason:
                out[key] = reason
        if out != self.stale:
            self.stale = out

    def is_stale(self, key: str) -> bool:
        """Whether the result ``key`` (``"stats"``, ``"ranges"``, ``"plan"``, ``"build:<label>"``) is out of date."""
        return key in self.stale

    def _recipe_or_none(self):
        return self.recipe if hasattr(self.recipe, "to_dict") else None
