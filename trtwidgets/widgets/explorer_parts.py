"""What the calibration explorer reads before it draws: its starting Calibration, a TensorRT cache, the methods.

Kept apart from :mod:`trtwidgets.widgets.calib_explorer` (the widget itself): these are the small
readers and words the explorer and the App's other steps share.
"""

from __future__ import annotations

import os
from typing import Mapping, Tuple

from ..core.calibration.calibration import Calibration
from ..core.common.errors import UserError

__all__ = ["export_methods", "default_method", "METHOD_HELP", "starting_calibration", "as_user_error", "load_cache"]

#: One line per range method, for tooltips (a method without one is shown by its name alone).
METHOD_HELP = {
    "auto": "auto: each tensor's own method, chosen from its statistics and its role in the graph (the default)",
    "max": "max |x|: nothing is clipped; outliers widen the step for every value",
    "entropy": "entropy: the range whose INT8 histogram loses least information (TensorRT's EntropyCalibrator2)",
    "percentile": "percentile: the |x| below which the chosen share of values lies",
    "mse": "mse: the range with the least mean squared quantization error",
}


def export_methods() -> Tuple[str, ...]:
    """The range methods a :class:`~trtwidgets.core.calibration.calibration.Calibration` can export, in the
    calibration module's order (``auto`` first): the App offers these and no hard-coded list."""
    from ..core.calibration.auto_ranges import EXPORT_METHODS

    return tuple(EXPORT_METHODS)


def default_method() -> str:
    """The method ``trtwidgets.calibrate`` exports unless told otherwise: the App's default is the API's."""
    import inspect

    from ..core.calibrate.step import calibrate

    return inspect.signature(calibrate).parameters["method"].default


def starting_calibration(calibration, stats, recipe, session, percentile, method, ranges) -> Calibration:
    """``calibration`` (or a saved one's path), else the session's of these statistics, else ``stats`` as the
    recipe says; ``percentile`` and ``method`` given win."""
    from ..core.calibrate.step import recipe_calibration
    from ..core.calibration.stats import load_stats

    if calibration is None and stats is None and session is not None:
        calibration = session.calibration
    if isinstance(calibration, (str, os.PathLike)):
        calibration = Calibration.load(calibration)
    if calibration is None:
        if stats is None:
            raise UserError("no activation statistics to explore", "neither stats nor a session with stats was given",
                            "collect them first (trtwidgets.calibrate) and pass them as stats= or calibration=")
        stats = stats if hasattr(stats, "tensors") else load_stats(stats)
        calibration = recipe_calibration(stats, recipe, percentile, None if ranges is None else dict(ranges))
    return calibration.refit(method=method, percentile=percentile)


def as_user_error(e: Exception, what: str, fix: str) -> UserError:
    """``e`` if it is a UserError, else one saying ``what`` failed and how to fix it."""
    return e if isinstance(e, UserError) else UserError(what, f"{type(e).__name__}: {e}", fix)


def load_cache(trt_cache):
    """A TensorRT calibration cache as given (a CalibrationCache or mapping), read from a path, or None."""
    if trt_cache is None or isinstance(trt_cache, Mapping) or hasattr(trt_cache, "amax"):
        return trt_cache
    from ..core.calibration.cache import read_cache

    return read_cache(trt_cache)
