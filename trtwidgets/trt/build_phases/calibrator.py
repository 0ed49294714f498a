"""The calibrator phase: which INT8 calibrator TensorRT gets, and at which profile it calibrates.

``toolkit`` hands TensorRT the toolkit's own ranges as a calibration cache;
``entropy2``, ``minmax``, ``entropy`` and ``legacy`` are TensorRT's calibrators,
fed with the recipe's calibration data at the calibration profile's opt shapes.
TensorRT 11 has no calibrators: it quantizes only from Q/DQ models.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from ...core.common.errors import CalibrationDataError, RecipeError, TensorRTUnavailable
from .. import version_of
from ..calibrator_bridge import make_cache_calibrator
from ..calibrators import make_calibrator
from .profiles import feed_opt_shapes, input_specs, opt_shapes
from .result import CACHE_FILE
from .state import BuildState


def attach_calibrator(state: BuildState) -> None:
    """Set the config's INT8 calibrator (the toolkit's cache, or one of TensorRT's feeding the data) and its profile."""
    trt, recipe, config = state.trt, state.recipe, state.config
    cal = recipe.calibrator
    if cal.kind == "none":
        return
    if "int8" not in recipe.flags:
        state.note("WARNING", f"calibrator {cal.kind!r} is not used: the int8 flag is off.")
        return
    if not hasattr(config, "int8_calibrator"):
        raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no calibrators.",
                                  "TensorRT's calibrators were removed in TensorRT 11 (strong typing).",
                                  "Export a Q/DQ ONNX model from the toolkit's calibration and build that.")
    if cal.kind == "toolkit":
        state.calibrator = _toolkit_calibrator(state)
    else:
        state.calibrator = _trt_calibrator(state)
    config.int8_calibrator = state.calibrator
    if state.profiles and hasattr(config, "set_calibration_profile"):
        config.set_calibration_profile(state.profiles[recipe.calibration_profile])
        state.note("INFO", f"calibrating at profile {recipe.calibration_profile}'s opt shapes "
                   f"{ {k: list(v) for k, v in opt_shapes(recipe).items()} }")


def _toolkit_calibrator(state: BuildState):
    # The toolkit's ranges reach TensorRT as a calibration cache: it reads them and never asks for a batch.
    cal = state.recipe.calibrator
    if not cal.cache_path or not Path(cal.cache_path).expanduser().is_file():
        raise RecipeError("The toolkit calibrator needs a calibration cache file, and the recipe has "
                          + (f"none at {cal.cache_path}." if cal.cache_path else "no cache_path."),
                          "The build hands the toolkit's ranges to TensorRT as a calibration cache; it does not "
                          "collect statistics itself.",
                          "Collect statistics and write the cache (calibration step of the notebook, or "
                          "trtwidgets.core.calibration.cache.write_cache), then set cache_path.")
    data = Path(cal.cache_path).expanduser().read_bytes()
    _check_cache_fits(state, data, cal.cache_path)
    if cal.amax_overrides:
        from ...core.calibration import cache as calib_cache

        parsed = calib_cache.read_cache(Path(cal.cache_path).expanduser())
        amax = dict(parsed.amax)
        amax.update(cal.amax_overrides)
        data = calib_cache.cache_text(amax, parsed.version, parsed.algorithm).encode()
        state.note("INFO", f"applied {len(cal.amax_overrides)} amax override(s) to the calibration cache.")
    state.cache_bytes_used = data
    return make_cache_calibrator(data, trt_module=state.trt)


def _check_cache_fits(state: BuildState, data: bytes, path) -> None:
    """Refuse a cache of another model (too few of this model's tensors named) before TensorRT reads it.

    TensorRT takes a cache's scales by tensor name and leaves the rest unquantized without a word, so a
    cache made for another model builds an engine that is mostly float, with another model's ranges.
    """
    from ...core.calibration.cache import parse_cache
    from ...core.calibration.fingerprint import check_ranges_fit

    parsed = parse_cache(data, str(path))
    for text in check_ranges_fit(state.model, parsed.amax, str(path), "calibration cache"):
        state.note("INFO", text)


def _trt_calibrator(state: BuildState):
    from ...core.calibration.data import iter_feeds

    recipe, cal = state.recipe, state.recipe.calibrator
    cache_in = None
    if cal.cache_path and Path(cal.cache_path).expanduser().is_file():
        cache_in = Path(cal.cache_path).expanduser().read_bytes()
        _check_cache_fits(state, cache_in, cal.cache_path)
        state.note("INFO", f"reusing calibration cache {cal.cache_path}: TensorRT will not calibrate again.")
    specs = input_specs(state)
    source = state.calibration_data if state.calibration_data is not None else recipe.calibration_data
    if source is None and cache_in is None:
        raise RecipeError(f"TensorRT's calibrator {cal.kind!r} needs calibration data, and the recipe has none.",
                          "It runs the network on real batches to find INT8 ranges.",
                          "Choose calibration data (e.g. CalibrationDataSpec(kind='demo')) or give an existing cache_path.")
    feeds = iter(()) if source is None else iter_feeds(source, state.model.summary, opt_shapes=feed_opt_shapes(specs))
    if cache_in is None:
        # Read the first batch now: bad data should fail in a second, not after TensorRT has built
        # its calibration engine.
        first = next(feeds, None)
        if first is None:
            raise CalibrationDataError("The calibration data yielded no batch.", fix="Give at least one sample.")
        feeds = itertools.chain([first], feeds)
    assert state.staging is not None, "build.py sets the staging folder before any phase runs"
    state.cache_out = str(state.staging / CACHE_FILE)
    calibrator = make_calibrator(cal.kind, feeds, specs, state.trt, cache_out=state.cache_out, cache_in=cache_in,
                                 max_batches=state.max_calibration_batches,
                                 on_batch=lambda n: state.progress.step("Calibration", n, f"batch {n}", source="calibrator"))
    if cache_in is None:
        calibrator._check(first, list(specs))  # raises CalibrationDataError for a wrong shape or input
    return calibrator
