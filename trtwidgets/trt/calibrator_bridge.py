"""Hand the toolkit's calibration cache to TensorRT (<= 10) without calibrating.

TensorRT's implicit-quantization INT8 build asks its calibrator for a cache first
(``read_calibration_cache``); when the cache covers the network it uses those
ranges and never calls ``get_batch``.  :func:`make_cache_calibrator` builds a
calibrator of the class matching the cache's algorithm (TensorRT checks that the
header names its calibrator's algorithm) whose cache is the toolkit's, and whose
``get_batch`` returns ``None``, so a build needs no calibration data or GPU buffers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from ..core.calibration.cache import parse_cache, retag, trt_version_tag
from ..core.common.errors import StatsError, TensorRTUnavailable
from .calibrators import CalibratorFields, LegacyCalibratorDefaults
from . import version_of
from .probe import probe

#: Cache algorithm -> TensorRT calibrator class name.
CALIBRATOR_CLASSES = {
    "EntropyCalibration2": "IInt8EntropyCalibrator2",
    "EntropyCalibration": "IInt8EntropyCalibrator",
    "MinMaxCalibration": "IInt8MinMaxCalibrator",
    "LegacyCalibration": "IInt8LegacyCalibrator",
}


def _trt(trt_module=None):
    if trt_module is not None:
        return trt_module
    try:
        import tensorrt
    except Exception as exc:
        raise TensorRTUnavailable("TensorRT is not importable.", f"{type(exc).__name__}: {exc}",
                                  "Install TensorRT (pip install tensorrt) on a machine with an NVIDIA GPU.") from None
    return tensorrt


def make_cache_calibrator(cache_bytes_or_path: Union[bytes, str, os.PathLike], trt_module=None, retag_version: bool = True):
    """A TensorRT calibrator that supplies a ready calibration cache.

    Parameters
    ----------
    cache_bytes_or_path : bytes, str or path-like
        The cache (``TRT-<version>-<algorithm>`` then ``name: hex`` lines), or its file.
    trt_module : module, optional
        The ``tensorrt`` module (imported when not given).
    retag_version : bool
        Rewrite the header's version to the running TensorRT's, so a cache written for
        8.6 is accepted by another version (the scales are the same format).

    Returns
    -------
    tensorrt.IInt8Calibrator
        An instance of ``IInt8EntropyCalibrator2`` / ``IInt8MinMaxCalibrator`` / ... (by the
        cache's algorithm); assign it to ``config.int8_calibrator`` with the INT8 flag set.

    Raises
    ------
    TensorRTUnavailable
        When TensorRT is missing, or has no calibrators (TensorRT 11 quantizes only with Q/DQ).
    StatsError
        For a cache that cannot be parsed.
    """
    trt = _trt(trt_module)
    if isinstance(cache_bytes_or_path, (bytes, bytearray)):
        data = bytes(cache_bytes_or_path)
    else:
        p = Path(cache_bytes_or_path).expanduser()
        if not p.is_file():
            raise StatsError(f"No calibration cache at {p}.", fix="Write one with `trtwidgets calibrate --cache`.")
        data = p.read_bytes()
    cache = parse_cache(data)
    cls_name = CALIBRATOR_CLASSES.get(cache.algorithm)
    if cls_name is None:
        raise StatsError(f"The cache's algorithm {cache.algorithm!r} has no TensorRT calibrator.",
                         f"Known: {', '.join(CALIBRATOR_CLASSES)}.", "Write the cache with one of them.")
    base = probe(trt, cls_name)
    if base is None:
        raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no {cls_name}.",
                                  "TensorRT 11 removed the calibrators; it quantizes only explicitly (Q/DQ).",
                                  "Export the ranges as a Q/DQ ONNX model instead of a calibration cache.")
    if retag_version and hasattr(trt, "__version__"):
        data = retag(data, trt_version_tag(trt.__version__), cache.algorithm)

    # Only the legacy calibrator calls the quantile / cutoff / histogram-cache methods.
    bases = (LegacyCalibratorDefaults, base) if cls_name == "IInt8LegacyCalibrator" else (base,)

    class CacheCalibrator(CalibratorFields, *bases):  # type: ignore[misc]  # bases chosen at run time
        """Returns a fixed cache; never asks for batches."""

        def __init__(self, cache_bytes: bytes, batch_size: int = 1):
            base.__init__(self)
            self._cache = cache_bytes
            self._batch_size = int(batch_size)
            self.written: Optional[bytes] = None

            self.batches_requested = 0

        def get_batch_size(self):
            return self._batch_size

        def get_batch(self, names, *args):
            # Called only if the cache does not cover the network: no data means "done".
            self.batches_requested += 1
            self.get_batch_calls += 1
            return None

        def read_calibration_cache(self, *args):
            return self._cache

        def write_calibration_cache(self, cache, *args):
            self.written = self.cache_written = bytes(cache)

    calib = CacheCalibrator(data)
    calib.cache = cache
    return calib
