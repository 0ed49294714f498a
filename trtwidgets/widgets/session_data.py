"""The session's calibration data: profiles from the data's shapes, and how odd samples are adapted.

A mixin of :class:`~trtwidgets.widgets.session.Session` (which holds the traits
``data_shapes`` and ``data_note`` it sets); the computation is in
:mod:`trtwidgets.core.recipe.data_defaults`.
"""

from __future__ import annotations

from typing import Any, Dict

from ..core.common.errors import UserError


class DataDefaults:
    """:meth:`use_data` and :meth:`set_adapt`, for :class:`~trtwidgets.widgets.session.Session`."""

    def use_data(self, source: Any) -> bool:
        """Calibrate on ``source`` (a folder, ``"demo"`` or a spec); its shapes fill the profiles left unset.

        The recipe's dynamic inputs whose ranges were never set (see
        :func:`~trtwidgets.core.recipe.data_defaults.profiles_from_data`) take the data's shapes,
        and :attr:`data_note` says so. Adaptations already chosen are kept. Data that cannot be
        read sets :attr:`error` and changes nothing.

        Returns
        -------
        bool
            True when the recipe now names this data.
        """
        from ..core.calibration.data import spec_for
        from ..core.recipe.data_defaults import fill_recipe_from_data

        if self.model is None:
            self.error = "There is no model to calibrate. Why: the data must fit a model's inputs. Fix: load a model first."
            return False
        try:
            spec = spec_for(source)
            old = getattr(self.recipe, "calibration_data", None)
            if old is not None and old.adapt and not spec.adapt:
                spec = spec.replace(adapt=dict(old.adapt))
            recipe = (self.recipe or self.default_recipe()).replace(calibration_data=spec)
            recipe, note, shapes = fill_recipe_from_data(recipe, self.model)
        except UserError as err:
            self.error = err.message
            return False
        with self.hold_trait_notifications():
            self.data_shapes = {k: [tuple(x) for x in v] for k, v in shapes.items()}
            self.data_note = note
        return self.set_recipe(recipe)

    def set_adapt(self, adapt: Dict[str, str]) -> bool:
        """How samples of another shape reach the opt shape: input name -> ``pad``, ``truncate`` or ``resize``."""
        spec = getattr(self.recipe, "calibration_data", None)
        if spec is None:
            self.error = "There is no calibration data to adapt. Fix: choose the data first."
            return False
        try:
            return self.set_recipe(calibration_data=spec.replace(adapt=dict(adapt)))
        except UserError as err:
            self.error = err.message
            return False
