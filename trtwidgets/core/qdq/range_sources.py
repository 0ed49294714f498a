"""The ranges an export reads, checked against the model they are for and the float part they are written in.

:func:`calibration_spec` turns what :func:`~.export.export_qdq` is given (a Calibration, the path of a
saved one or of statistics, or a mapping of tensor -> amax) into the :class:`~.spec.QdqSpec` it builds:
a calibration is checked once against the model
(:meth:`~trtwidgets.core.calibration.calibration.Calibration.check_fits`: its fingerprint, the coverage of
the model's tensors, its overrides), and its :attr:`~trtwidgets.core.calibration.calibration.Calibration.amax`
is what is written, never refitted; the spec checks every value is a scale of the export's precision and
float part (:mod:`~trtwidgets.core.calibration.amax_values`). Notes (an older file without a fingerprint,
partial coverage) go to :func:`~trtwidgets.core.common.notes.note`.
"""

from __future__ import annotations

import os
from typing import Dict, Mapping, Optional, Tuple

from ..calibration.amax_values import check_amax_values
from ..calibration.calibration import Calibration
from ..calibration.fingerprint import check_ranges_fit
from ..common.notes import note
from .options import QdqExportError, QdqOptions
from .spec import QdqSpec
from .weights import PRECISIONS

__all__ = ["calibration_spec", "checked_amax", "checked_cache_ranges"]


def checked_amax(amax: Mapping[str, float], source: str, options: QdqOptions) -> Dict[str, float]:
    """``amax`` whose every value can be a scale of ``options``' precision and float part (else a StatsError)."""
    qmax = PRECISIONS[options.precision][0] if options.precision in PRECISIONS else 127.0
    return check_amax_values(amax, source, qmax, options.resolved_high_precision())


def calibration_spec(loaded, calibration, options: Optional[QdqOptions] = None) -> QdqSpec:
    """The spec an export of ``calibration`` into ``loaded`` builds (every layer the placement rules allow).

    Raises
    ------
    StatsError
        A file that is no calibration, another model's calibration, or values that cannot be scales.
    QdqExportError
        Something that is none of a Calibration, a path or a mapping.
    """
    opts = options if options is not None else QdqOptions()
    if isinstance(calibration, (str, os.PathLike)):
        calibration = Calibration.load(calibration)
    elif isinstance(calibration, Mapping):
        return QdqSpec({str(k): v for k, v in calibration.items()}, opts, source=f"the {len(calibration)} amax given")
    elif not isinstance(calibration, Calibration):
        raise _not_a_calibration(calibration)
    return QdqSpec.from_calibration(calibration.check_fits(loaded), opts)


def _not_a_calibration(value) -> QdqExportError:
    stats = hasattr(value, "tensors") and hasattr(value, "model_sha256")
    return QdqExportError(
        f"Cannot export ranges from a {type(value).__name__}.",
        "The export takes a Calibration (trtwidgets.calibrate), the path of a saved one or of statistics, or a "
        "mapping of tensor -> amax" + ("; statistics alone do not say which range method to export" if stats
                                       else "") + ".",
        "Pass cal = trtwidgets.calibrate(model, data)" + (", or trtwidgets.Calibration.fit(stats, method=...)"
                                                         if stats else "") + ".")


def checked_cache_ranges(loaded, path, options: QdqOptions) -> Tuple[Dict[str, float], str]:
    """The amax of a TensorRT calibration cache file, refused when it does not cover ``loaded``."""
    from ..calibration.cache import read_cache

    cache = read_cache(path)
    for text in check_ranges_fit(loaded, cache.amax, str(path), "calibration cache"):
        note(text)
    return checked_amax(cache.amax, str(path), options), f"the calibration cache {path}"
