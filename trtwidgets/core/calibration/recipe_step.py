"""The calibration step of a recipe, as one call shared by the app and ``trtwidgets run``.

Decides which data to calibrate on (the recipe's, the caller's, or the bundled
crops for the bundled demo model), at which shapes (the calibration profile's opt
shapes), collects the activation statistics, computes every range method and
applies the recipe's amax overrides for the method it exports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from ..common.errors import CalibrationDataError

#: The toolkit range method that matches each TensorRT calibrator.
TRT_CALIBRATOR_METHOD = {"trt_entropy2": "entropy", "trt_entropy": "entropy", "trt_minmax": "max",
                         "trt_legacy": "percentile", "none": "entropy", "toolkit": "entropy"}


@dataclass(frozen=True)
class Calibration:
    """Statistics, ranges and the exported amax of one calibration run.

    Attributes
    ----------
    stats : ActivationStats
    ranges : dict
        Tensor -> method -> RangeResult (every method).
    method : str
        The method whose amax is exported.
    percentile : float
    amax : dict
        Tensor -> exported amax (``method``'s, with the recipe's overrides applied).
    overrides : dict
        The amax overrides that were applied.
    data : str
        What the data was, in words.
    """

    stats: Any = field(repr=False)
    ranges: Dict[str, Dict[str, Any]] = field(repr=False)
    method: str
    percentile: float
    amax: Dict[str, float] = field(repr=False)
    overrides: Dict[str, float] = field(default_factory=dict)
    data: str = ""


def export_method(recipe: Any) -> str:
    """The range method a recipe exports: its toolkit method, else the one matching its TensorRT calibrator."""
    cal = getattr(recipe, "calibrator", None)
    if cal is None:
        return "entropy"
    if getattr(cal, "method", None):
        return cal.method
    return TRT_CALIBRATOR_METHOD.get(getattr(cal, "kind", "none"), "entropy")


def calibration_source(recipe: Any, model, data: Any = None):
    """``(source, description)``: the data to calibrate ``model`` on.

    ``data`` wins; then the recipe's ``calibration_data``; then, for the bundled
    demo model only, its bundled crops.

    Raises
    ------
    CalibrationDataError
        There is no data to calibrate on.
    """
    from .data import spec_for

    if data is not None:
        if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") or hasattr(data, "kind"):
            spec = spec_for(data)
            return spec, (spec.path or spec.kind)
        return data, "the given feeds"
    spec = getattr(recipe, "calibration_data", None)
    if spec is not None:
        return spec, (spec.path or spec.kind)
    from ... import demo

    if model is not None and is_demo_model(model, demo.MODEL_PATH):
        return spec_for("demo"), "the bundled demo crops"
    raise CalibrationDataError(
        "There is no calibration data for this model.",
        "Calibration runs the model over representative inputs; the recipe names none.",
        "Pick a folder of .npy/.npz samples or images (recipe.calibration_data, `--data DIR`), "
        "or pass feeds ({input: array}) directly.")


def is_demo_model(model, demo_path) -> bool:
    """True when ``model`` (anything with ``path`` / ``sha256``) is the demo at ``demo_path`` or a copy of it."""
    import hashlib
    from pathlib import Path

    path = getattr(model, "path", None)
    if path is not None and Path(str(path)).resolve() == Path(demo_path).resolve():
        return True
    # A copy of the demo elsewhere (e.g. a recipe written on another machine) is still the demo.
    return getattr(model, "sha256", None) == hashlib.sha256(Path(demo_path).read_bytes()).hexdigest()


def locate_model(recipe: Any, recipe_dir: Any = None) -> Any:
    """``recipe`` with a model path that exists here, when it can be found.

    A recipe made on another machine (a GPU box) names that machine's path. Tried in
    order: the path as written, relative to ``recipe_dir``, the file's name in
    ``recipe_dir``, and the bundled demo model when the recipe's SHA-256 is the demo's.
    The recipe is returned unchanged when nothing matches (loading then says what is missing).
    """
    import hashlib
    from pathlib import Path

    from ... import demo

    p = Path(recipe.model_path)
    if p.exists():
        return recipe
    cands = [Path(recipe_dir) / p, Path(recipe_dir) / p.name] if recipe_dir is not None else []
    for cand in cands:
        if cand.exists():
            return recipe.replace(model_path=str(cand))
    sha = getattr(recipe, "model_sha256", "")
    if sha and sha == hashlib.sha256(Path(demo.MODEL_PATH).read_bytes()).hexdigest():
        return recipe.replace(model_path=str(demo.MODEL_PATH))
    return recipe


def calibrate_recipe(recipe: Any, model=None, data: Any = None, progress: bool = False,
                     max_samples: Optional[int] = None, stats=None, providers=None,
                     percentile: Optional[float] = None) -> Calibration:
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
    progress : bool
        Show a progress bar.
    max_samples : int, optional
    stats : ActivationStats, optional
        Continue from these.
    providers : sequence, optional
        ONNX Runtime providers.
    percentile : float, optional
        Default: the recipe's.

    Returns
    -------
    Calibration
    """
    from .collect import collect_stats
    from ..model.load import LoadedModel, load_model
    from .ranges import METHODS, amax_table, compute_ranges

    if model is None:
        model = load_model(recipe.model_path)
    elif not isinstance(model, LoadedModel):
        model = load_model(model)
    source, described = calibration_source(recipe, model, data)
    opt = {k: list(v) for k, v in (getattr(recipe, "calibration_shapes", None) or {}).items()}
    adapt = dict(getattr(source, "adapt", None) or {})
    # An input whose data has another shape than the opt shape needs an adaptation; the
    # spec's own wins, otherwise iter_feeds explains the mismatch.
    cal = getattr(recipe, "calibrator", None)
    pct = float(percentile if percentile is not None else getattr(cal, "percentile", 99.99))
    stats = collect_stats(model, source, providers=providers, stats=stats, progress=progress,
                          max_samples=max_samples, adapt=adapt or None, opt_shapes=opt or None)
    ranges = compute_ranges(stats, METHODS, pct)
    method = export_method(recipe)
    amax = amax_table(ranges, method)
    overrides: Mapping[str, float] = dict(getattr(cal, "amax_overrides", None) or {})
    amax.update({k: float(v) for k, v in overrides.items() if k in stats.tensors})
    return Calibration(stats=stats, ranges=ranges, method=method, percentile=pct, amax=amax,
                       overrides=dict(overrides), data=str(described))
