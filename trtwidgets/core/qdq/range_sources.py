"""The ranges an export reads, checked against the model they are for.

:func:`~.export.export_ranges` turns a Calibration, statistics or a mapping into amax per tensor;
this module adds, before and after it, what reading from a file needs: the statistics' fingerprint and the ranges'
coverage of the model (:mod:`~trtwidgets.core.calibration.fingerprint`), and values that can be
scales in the export's float part (:mod:`~trtwidgets.core.calibration.amax_values`). Notes (an
older file without a fingerprint, partial coverage) go to :func:`~trtwidgets.core.common.notes.note`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Mapping, Tuple

from ..calibration.amax_values import check_amax_values
from ..calibration.fingerprint import check_ranges_fit, check_stats_fit
from ..common.notes import note
from .options import QdqOptions
from .weights import PRECISIONS

__all__ = ["as_loaded", "checked_amax", "checked_cache_ranges", "checked_stats_source"]


def as_loaded(model):
    """A :class:`~trtwidgets.core.model.load.LoadedModel` for a path, proto or LoadedModel."""
    import onnx

    from ..model.load import LoadedModel, load_model, summarize

    if isinstance(model, LoadedModel):
        return model
    proto = model if isinstance(model, onnx.ModelProto) else getattr(model, "proto", None)
    if isinstance(proto, onnx.ModelProto):
        return LoadedModel(Path(getattr(model, "path", None) or proto.graph.name or "model.onnx"), proto,
                           summarize(proto))
    return load_model(model)


def checked_amax(amax: Mapping[str, float], source: str, options: QdqOptions) -> Dict[str, float]:
    """``amax`` whose every value can be a scale of ``options``' precision and float part (else a StatsError)."""
    qmax = PRECISIONS[options.precision][0] if options.precision in PRECISIONS else 127.0
    return check_amax_values(amax, source, qmax, options.resolved_high_precision())


def checked_stats_source(loaded, calibration) -> Tuple[object, str]:
    """``(calibration, source in words)``: a statistics path read, and statistics of another model refused.

    ``calibration`` is what :func:`~.export.export_ranges` takes (a Calibration, statistics, their
    ``.npz`` path, or a mapping of tensor -> amax, which is returned as is).
    """
    from ..calibration.recipe_step import Calibration
    from ..calibration.stats import load_stats

    source = "the ranges given"
    if isinstance(calibration, (str, os.PathLike)):
        source = str(calibration)
        calibration = load_stats(calibration)
    stats = calibration.stats if isinstance(calibration, Calibration) else calibration
    if hasattr(stats, "tensors") and hasattr(stats, "model_sha256"):
        if source == "the ranges given":
            source = "the calibration's statistics" if stats is not calibration else "the statistics given"
        for text in check_stats_fit(loaded, stats, source):
            note(text)
    return calibration, source


def checked_cache_ranges(loaded, path, options: QdqOptions) -> Tuple[Dict[str, float], str]:
    """The amax of a TensorRT calibration cache file, refused when it does not cover ``loaded``."""
    from ..calibration.cache import read_cache

    cache = read_cache(path)
    for text in check_ranges_fit(loaded, cache.amax, str(path), "calibration cache"):
        note(text)
    return checked_amax(cache.amax, str(path), options), f"the calibration cache {path}"
