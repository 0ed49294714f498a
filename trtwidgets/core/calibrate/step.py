"""``trtwidgets.calibrate(model, data)`` and a recipe's calibration step: data in, a Calibration out.

The App, ``trtwidgets run`` and the notebook-level :func:`calibrate` share one step
(:func:`calibrate_recipe`): which data (the recipe's, the caller's, or the calibration part of the demo's
labelled set for the bundled demo model), at which shapes (the calibration profile's opt shapes), then the
statistics and the :class:`~trtwidgets.core.calibration.calibration.Calibration` with the
recipe's method, percentile and amax overrides. :func:`calibrate` makes the recipe, its
dynamic dimensions taken from the data (:mod:`trtwidgets.core.recipe.data_defaults`). This
stage stands above both the calibration stage (the value it returns) and the recipe stage
(a recipe holds a CalibrationDataSpec, so calibration cannot import the recipe).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..calibration.calibration import Calibration
from ..calibration.data import CalibrationDataSpec
from ..calibration.stats import zero_note
from ..common.errors import CalibrationDataError
from ..common.notes import note
from ..common.progress import ProgressArg
from ..recipe.recipe import CalibratorSpec, Recipe

__all__ = ["TRT_CALIBRATOR_METHOD", "calibrate", "calibrate_recipe", "calibration_source", "export_method",
           "is_demo_model", "recipe_calibration"]

#: The toolkit range method that matches each TensorRT calibrator (and auto where none is named).
TRT_CALIBRATOR_METHOD = {"trt_entropy2": "entropy", "trt_entropy": "entropy", "trt_minmax": "max",
                         "trt_legacy": "percentile", "none": "auto", "toolkit": "auto"}


def calibrate(model: Any, data: Any = None, *, method: str = "auto", percentile: float = 99.99,
              adapt: Optional[Mapping[str, str]] = None, max_samples: Optional[int] = None,
              recipe: Any = None, progress: ProgressArg = True, providers=None, client=None) -> Calibration:
    """Activation statistics and INT8 ranges of ``model`` over ``data``.

    Parameters
    ----------
    model : LoadedModel or path
        From :func:`trtwidgets.load`, or an ``.onnx`` path.
    data : folder, ``"demo"``, CalibrationDataSpec or iterable of feeds, optional
        Default: the recipe's data (the demo's labelled calibration samples for the bundled demo model).
    method : str
        The range method whose amax is exported: ``"auto"`` (each tensor's, chosen from its statistics and
        its role in the graph, with the reason: ``cal.choices``), or ``"entropy"``, ``"max"``, ``"percentile"``,
        ``"mse"`` for every tensor; every method's range is computed anyway.
    percentile : float
        For ``method="percentile"``.
    adapt : mapping, optional
        Input name -> ``"pad"``, ``"truncate"`` or ``"resize"``, for samples whose shape differs
        from the opt shape (see :data:`trtwidgets.core.recipe.data_defaults.ADAPT_CHOICES`).
    max_samples : int, optional
    recipe : Recipe, optional
        Its profiles (opt shapes) and calibrator are used instead; its unset dynamic
        dimensions are still taken from the data.
    progress : bool or callable
        True: a progress bar; a callable receives a
        :class:`~..common.progress.ProgressEvent` per batch of samples (no bar).
    providers : sequence, optional
        ONNX Runtime providers.
    client : distributed.Client, optional
        Collect on its Dask workers, shards of samples merged here into the same statistics
        (:mod:`~trtwidgets.core.calibration.shards`); None: in this process.

    Returns
    -------
    Calibration
        ``stats``, ``ranges`` (every method), ``amax`` (the exported method's) and ``data``.

    Raises
    ------
    UserError
        Bad model, unreadable data, or samples that do not fit the model.
    """
    from ..calibration.data import spec_for
    from ..model.load import as_loaded
    from ..recipe.data_defaults import fill_recipe_from_data

    model = as_loaded(model)
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
        from ..recipe.data_defaults import profiles_from_data, sample_shapes

        filled = profiles_from_data(model.summary, sample_shapes(data, model.summary, None), recipe.profiles)
        if filled.filled:
            recipe = recipe.replace(profiles=filled.profiles)
    cal = calibrate_recipe(recipe, model, data=None if spec is not None else data, progress=progress,
                           max_samples=max_samples, providers=providers, client=client)
    zeros = zero_note(cal.stats)  # all-zero data said where it is given, not later as "no range matched"
    if zeros:
        note(zeros)
    return cal


def export_method(recipe: Optional[Recipe]) -> str:
    """The range method a recipe exports: its toolkit method, else the one matching its TensorRT calibrator."""
    if recipe is None:
        return "auto"
    cal = recipe.calibrator
    return cal.method or TRT_CALIBRATOR_METHOD.get(cal.kind, "auto")


def calibration_source(recipe: Optional[Recipe], model, data: Any = None):
    """``(source, description)``: the data to calibrate ``model`` on.

    ``data`` wins; then the recipe's ``calibration_data``; then, for the bundled
    demo model only, the calibration part of its labelled text lines.

    Raises
    ------
    CalibrationDataError
        There is no data to calibrate on.
    """
    from ..calibration.data import spec_for

    if data is not None:
        if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") or hasattr(data, "kind"):
            given = spec_for(data)
            return given, (given.path or given.kind)
        return data, "the given feeds"
    spec = None if recipe is None else recipe.calibration_data
    if spec is not None:
        return spec, (spec.path or spec.kind)
    from ... import demo

    if model is not None and is_demo_model(model, demo.MODEL_PATH):
        return spec_for("demo"), "the demo's labelled text lines (calibration part)"
    raise CalibrationDataError(
        "There is no calibration data for this model.",
        "Calibration runs the model over representative inputs; the recipe names none.",
        "Pick a folder of .npy/.npz samples or images (recipe.calibration_data, `--data DIR`), "
        "or pass feeds ({input: array}) directly.")


def is_demo_model(model, demo_path) -> bool:
    """True when ``model`` (a LoadedModel) is the demo at ``demo_path`` or a copy of it."""
    import hashlib
    from pathlib import Path

    if Path(str(model.path)).resolve() == Path(demo_path).resolve():
        return True
    # A copy of the demo elsewhere (e.g. a recipe written on another machine) is still the demo.
    return model.sha256 == hashlib.sha256(Path(demo_path).read_bytes()).hexdigest()


def calibrate_recipe(recipe: Recipe, model=None, data: Any = None, progress: ProgressArg = False,
                     max_samples: Optional[int] = None, stats=None, providers=None,
                     percentile: Optional[float] = None, client=None) -> Calibration:
    """Calibrate ``model`` as ``recipe`` says.

    Parameters
    ----------
    recipe : Recipe
        Its calibration profile's opt shapes, calibration data (adaptation),
        calibrator method, percentile and amax overrides are used.
    model : LoadedModel or path, optional
        Default: ``recipe.model_path``.
    data : optional
        Overrides the recipe's calibration data (a spec, a folder, ``"demo"`` or feeds).
    progress : bool or callable
        True: a progress bar; a callable receives a
        :class:`~..common.progress.ProgressEvent` per batch of samples (no bar).
    max_samples : int, optional
    stats : ActivationStats, optional
        Continue from these.
    providers : sequence, optional
        ONNX Runtime providers.
    percentile : float, optional
        Default: the recipe's.
    client : distributed.Client, optional
        Collect on its Dask workers (:func:`~trtwidgets.core.calibration.shards.collect_stats_distributed`).

    Returns
    -------
    Calibration
    """
    from ..calibration.collect import collect_stats
    from ..calibration.shards import collect_stats_distributed
    from ..model.load import as_loaded

    model = as_loaded(recipe.model_path if model is None else model)
    source, described = calibration_source(recipe, model, data)
    opt = {k: list(v) for k, v in recipe.calibration_shapes.items()}
    # Feeds given directly have no adaptation; only a data spec carries one.
    adapt = dict(source.adapt) if isinstance(source, CalibrationDataSpec) else {}
    # An input whose data has another shape than the opt shape needs an adaptation; the
    # spec's own wins, otherwise iter_feeds explains the mismatch.
    kwargs = dict(providers=providers, stats=stats, progress=progress, max_samples=max_samples, adapt=adapt or None,
                  opt_shapes=opt or None)
    stats = collect_stats(model, source, **kwargs) if client is None else \
        collect_stats_distributed(model, source, client, **kwargs)
    return recipe_calibration(stats, recipe, percentile, data=str(described), model=model)


def recipe_calibration(stats, recipe: Optional[Recipe], percentile: Optional[float] = None, ranges=None,
                       data: str = "", model=None) -> Calibration:
    """``stats`` as ``recipe``'s calibrator says: its method (:func:`export_method`), percentile and amax overrides.

    ``percentile`` replaces the recipe's; ``ranges`` (of ``stats`` at that percentile) are not recomputed;
    ``model`` (the statistics' model) gives the tensors' roles that ``auto`` reads (else the export reads them).
    """
    cal = CalibratorSpec() if recipe is None else recipe.calibrator
    pct = float(percentile if percentile is not None else cal.percentile)
    return Calibration.fit(stats, export_method(recipe), pct, dict(cal.amax_overrides),
                           data, ranges=ranges, model=model)
