"""``trtwidgets.calibrate(model, data)``: the calibration step in one call, shapes from the data.

The notebook-level entry point. It makes a recipe for the model whose dynamic
dimensions come from the data (see :mod:`trtwidgets.core.recipe.data_defaults`),
or takes the caller's, and runs :func:`~trtwidgets.core.calibration.recipe_step.calibrate_recipe`.
It lives with the recipe, not with calibration, because it makes a recipe: the
recipe stage imports calibration (a recipe holds a CalibrationDataSpec), never
the other way round.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..calibration.recipe_step import Calibration


def calibrate(model: Any, data: Any = None, *, method: str = "entropy", percentile: float = 99.99,
              adapt: Optional[Mapping[str, str]] = None, max_samples: Optional[int] = None,
              recipe: Any = None, progress: bool = True, providers=None) -> Calibration:
    """Activation statistics and INT8 ranges of ``model`` over ``data``.

    Parameters
    ----------
    model : LoadedModel or path
        From :func:`trtwidgets.load`, or an ``.onnx`` path.
    data : folder, ``"demo"``, CalibrationDataSpec or iterable of feeds, optional
        Default: the recipe's data (the bundled crops for the bundled demo model).
    method : str
        The range method whose amax is exported (``"entropy"``, ``"max"``, ``"percentile"``, ``"mse"``);
        every method's range is computed anyway.
    percentile : float
        For ``method="percentile"``.
    adapt : mapping, optional
        Input name -> ``"pad"``, ``"truncate"`` or ``"resize"``, for samples whose shape differs
        from the opt shape (see :data:`trtwidgets.core.recipe.data_defaults.ADAPT_CHOICES`).
    max_samples : int, optional
    recipe : Recipe, optional
        Its profiles (opt shapes) and calibrator are used instead; its unset dynamic
        dimensions are still taken from the data.
    progress : bool
        Show a progress bar.
    providers : sequence, optional
        ONNX Runtime providers.

    Returns
    -------
    Calibration
        ``stats``, ``ranges`` (every method), ``amax`` (the exported method's) and ``data``.

    Raises
    ------
    UserError
        Bad model, unreadable data, or samples that do not fit the model.
    """
    from ..model.load import LoadedModel, load_model
    from ..calibration.data import spec_for
    from ..calibration.recipe_step import calibrate_recipe
    from .data_defaults import fill_recipe_from_data
    from .recipe import CalibratorSpec, Recipe

    if not isinstance(model, LoadedModel):
        model = load_model(model)
    spec = None
    if data is not None and (isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") or hasattr(data, "kind")):
        spec = spec_for(data)
        if adapt:
            spec = spec.replace(adapt=dict(adapt))
    if recipe is None:
        recipe = Recipe.for_model(model, calibrator=CalibratorSpec(kind="toolkit", method=method, percentile=percentile))
    if spec is not None:
        recipe = recipe.replace(calibration_data=spec)
        recipe, _, _ = fill_recipe_from_data(recipe, model)
    elif isinstance(data, (list, tuple)) and model.summary.dynamic_inputs:
        # Feeds in memory: their shapes can be read without consuming them.
        from .data_defaults import profiles_from_data, sample_shapes

        filled = profiles_from_data(model.summary, sample_shapes(data, model.summary, None), recipe.profiles)
        if filled.filled:
            recipe = recipe.replace(profiles=filled.profiles)
    return calibrate_recipe(recipe, model, data=None if spec is not None else data, progress=progress,
                            max_samples=max_samples, providers=providers)
