"""The session's data: profiles from the calibration data's shapes, how odd samples are adapted, held-back data.

A mixin of :class:`~trtwidgets.widgets.session.Session` (which holds the traits
``data_shapes``, ``data_note`` and ``held_back`` it sets); the computation is in
:mod:`trtwidgets.core.recipe.data_defaults`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict

from ..core.common.errors import UserError


class DataDefaults:
    """:meth:`use_data`, :meth:`set_adapt` and :meth:`use_held_back`, for :class:`~trtwidgets.widgets.session.Session`."""

    if TYPE_CHECKING:  # the Session's traits and methods this mixin uses
        model: Any
        recipe: Any
        calibration_data: Any
        data_shapes: Dict[str, Any]
        data_note: str
        held_back: str
        error: str
        default_recipe: Callable[..., Any]
        set_recipe: Callable[..., Any]
        hold_trait_notifications: Callable[..., Any]


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
            old = self.calibration_data
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
        spec = self.calibration_data
        if spec is None:
            self.error = "There is no calibration data to adapt. Fix: choose the data first."
            return False
        try:
            return self.set_recipe(calibration_data=spec.replace(adapt=dict(adapt)))
        except UserError as err:
            self.error = err.message
            return False

    # ------------------------------------------------------------------ held-back data

    def use_held_back(self, source: Any) -> bool:
        """Held-back samples: a folder the Plan step measures accuracy on and the explorer checks its export on.

        ``''`` or None: none (the Plan step holds back a seeded share of the calibration data, and the
        plan records which files). The folder is read now (a few samples, to check they fit the model's
        inputs); unreadable data sets :attr:`error` and keeps the previous choice.

        Returns
        -------
        bool
            True when the session now holds this choice.
        """
        from ..core.calibration.data import spec_for
        from ..core.recipe.data_defaults import sample_shapes

        text = "" if source is None else str(source).strip()
        if not text:
            self.held_back = ""
            return True
        if self.model is None:
            self.error = ("There is no model to hold data back for. Why: held-back samples must fit a model's "
                          "inputs. Fix: load a model first.")
            return False
        try:
            spec = spec_for(text)
            if spec.kind == "demo":
                raise UserError("'demo' is not a held-back folder.", "The bundled crops are the demo's calibration "
                                "data; held-back samples are others, kept out of calibration.",
                                "Give a folder of .npy/.npz samples or images that calibration does not read.")
            sample_shapes(spec, self.model.summary, limit=2)
        except UserError as err:
            self.error = err.message
            return False
        self.error = ""
        self.held_back = spec.path or text
        return True

    def held_back_feeds(self, max_samples: int = 64):
        """Up to ``max_samples`` feeds of the held-back folder, each input cut along its own batch axis; None
        without one. Raises a UserError when the folder cannot be read."""
        if not self.held_back or self.model is None:
            return None
        from ..core.calibration.data import iter_feeds
        from ..core.calibration.sample_axes import SampleAxes

        return list(iter_feeds(self.held_back, self.model.summary, max_samples=max_samples,
                               axes=SampleAxes(self.model.summary, model=self.model)))
