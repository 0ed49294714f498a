"""Calibrating over data of several shapes, for a Q/DQ export whose scales serve a whole profile.

TensorRT's implicit INT8 calibrator runs at one shape, the calibration profile's opt shape, and
:func:`~.step.calibrate` follows a recipe's calibration profile the same way. A Q/DQ (explicitly
quantized) model has no calibrator at build time: its scales are fixed numbers written into the model, and the
engine uses them at every shape of every profile. Ranges for it may therefore be collected at several shapes:
statistics at each shape, merged into one collection (:meth:`~..calibration.stats.ActivationStats.merge`:
histograms brought to a common range and added), then the range methods run on the merged histograms.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Optional

from ..calibration.calibration import Calibration
from ..calibration.stats import ActivationStats
from ..common.errors import CalibrationDataError


def calibrate_shapes(model: Any, data: Mapping[str, Iterable[Mapping[str, Any]]], *, method: str = "auto",
                     percentile: float = 99.99, providers=None) -> Dict[str, Calibration]:
    """One calibration per shape of ``data``, and one over all of them (key ``"all shapes"``).

    Parameters
    ----------
    model : LoadedModel or path
    data : mapping
        A label (e.g. ``"width 96"``) -> feeds ``{input: array}`` of that shape (any iterable
        :func:`~..calibration.collect.collect_stats` takes; every feed of one label may also vary).
    method : str
        The exported range method (``"auto"``, ``"entropy"``, ``"max"``, ``"percentile"``, ``"mse"``).
    percentile : float
        For ``method="percentile"``.
    providers : sequence, optional
        ONNX Runtime providers.

    Returns
    -------
    dict
        Label -> :class:`~..calibration.calibration.Calibration` of that label's samples, in ``data``'s
        order, then ``"all shapes"``: the merged statistics of every label (its ``stats.input_shapes``
        says ``-1`` for a dimension that varied).

    Raises
    ------
    CalibrationDataError
        ``data`` is empty, or a label is ``"all shapes"``.
    """
    from ..calibration.collect import collect_stats
    from ..model.load import as_loaded

    if not data:
        raise CalibrationDataError("No data to calibrate on: give feeds for at least one shape.")
    if ALL in data:
        raise CalibrationDataError(f"{ALL!r} is the label of the merged calibration.", None, "Name the shapes otherwise.")
    loaded = as_loaded(model)
    out: Dict[str, Calibration] = {}
    merged: Optional[ActivationStats] = None
    for label, feeds in data.items():
        stats = collect_stats(loaded, feeds, providers=providers, progress=False)
        out[label] = Calibration.fit(stats, method, percentile, data=label, model=loaded)
        merged = stats if merged is None else merged.merge(stats)
    assert merged is not None  # data is not empty
    out[ALL] = Calibration.fit(merged, method, percentile, data=", ".join(data), model=loaded)
    return out


#: The key of the calibration over every shape.
ALL = "all shapes"
