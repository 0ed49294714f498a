"""The Session: the one object that every step of the notebook shares.

It holds the loaded model, its lint findings, the recipe, the activation
statistics and the builds, as traitlets so that widgets observe it instead of
each other. Every value in it is immutable and replaced as a whole; a failed
step sets :attr:`Session.error` and keeps whatever the session had.
"""

from __future__ import annotations

import os
from typing import Union

import traitlets

from ..core.errors import UserError
from ..core.lint import lint
from ..core.model import LoadedModel, load_model


class Session(traitlets.HasTraits):
    """Shared state of one exploration.

    Attributes
    ----------
    model : LoadedModel or None
        The current model.
    findings : tuple of Finding
        Lint findings for :attr:`model` under the current :attr:`recipe`.
    recipe : Recipe or None
        The build recipe (``trtwidgets.core.recipe.Recipe``).
    stats : ActivationStats or None
        Collected activation statistics.
    builds : tuple
        Build results, oldest first.
    error : str
        The last user-facing error message, '' when the last action succeeded.
    """

    model = traitlets.Instance(LoadedModel, allow_none=True, default_value=None)
    findings = traitlets.Tuple()
    recipe = traitlets.Any(default_value=None, allow_none=True)
    stats = traitlets.Any(default_value=None, allow_none=True)
    builds = traitlets.Tuple()
    error = traitlets.Unicode("")

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
        calibrator = getattr(r, "calibrator", None)
        return lint(model, flags=getattr(r, "flags", None), trt_version=getattr(r, "trt_version", None),
                    calibrator=getattr(calibrator, "kind", calibrator),
                    profiles=getattr(r, "profiles", None) or None)
